//! DMA classes on a running machine: the tape counters and queue cycles of launches mixing
//! classes, and the stack check of streamed tape across launches.

use std::ffi::c_void;

use crate::machine::{Direction, KernelStats, Machine, Violation};
use crate::tape::DmaClass;
use crate::timing::Spec;
use crate::{cpe, native};

/// Main memory each CPE of a test kernel works in.
const PER_CPE: usize = 1024;
/// The LDM buffer a test kernel moves data through.
const BUF: usize = 512;

/// One DMA of a test kernel at `offset` of its CPE's main memory, after setting `class`
/// (none: keep the current one), on CPE `only` or on all.
#[derive(Clone, Copy)]
struct Step {
    class: Option<DmaClass>,
    put: bool,
    offset: usize,
    len: usize,
    stride: usize,
    bsize: usize,
    only: Option<usize>,
}

fn step(class: DmaClass, put: bool, offset: usize, len: usize) -> Step {
    Step {
        class: Some(class),
        put,
        offset,
        len,
        stride: 0,
        bsize: 0,
        only: None,
    }
}

/// What a test kernel does: its steps in order, then one wait for all of them.
struct Script {
    main: usize,
    steps: Vec<Step>,
}

/// Runs the [`Script`] at `arg` on the calling CPE.
extern "C" fn run_script(arg: *mut c_void) {
    // SAFETY: every launch of this kernel passes a live `Script`.
    let script = unsafe { &*(arg as *const Script) };
    if let Err(v) = script_steps(script) {
        cpe::record(v).expect("on a CPE");
    }
}

fn script_steps(script: &Script) -> Result<(), Violation> {
    let id = cpe::cpe_id().expect("on a CPE");
    let ldm = native::swflow_native_ldm(BUF + 16) as usize;
    cpe::declare_ldm(ldm, BUF, "buf")?;
    cpe::declare_ldm(ldm + BUF, 16, "reply")?;
    let reply = ldm + BUF;
    // SAFETY: the reply counter lies in this CPE's LDM area.
    unsafe { (reply as *mut i32).write_volatile(0) };
    let mut issued = 0;
    for s in script.steps.iter().filter(|s| s.only.is_none_or(|c| c == id)) {
        if let Some(class) = s.class {
            cpe::set_class(class)?;
        }
        let dir = if s.put { Direction::Put } else { Direction::Get };
        let main = script.main + id * PER_CPE + s.offset;
        cpe::dma(dir, main, ldm, s.len, reply, s.stride, s.bsize)?;
        issued += 1;
    }
    cpe::wait(reply, issued, true)
}

/// Main memory in whole 128-byte lines, so the lines a transfer touches are its bytes'.
#[repr(C, align(128))]
struct Line([u8; 128]);

/// A timed pooled machine of `cpes` CPEs (test timing, 1 GHz) with main memory for them,
/// registered as "arena".
fn machine(cpes: usize) -> (Machine, Vec<Line>) {
    let spec = Spec {
        clock_hz: 1e9,
        flops_per_cycle: 8.0,
        timing: crate::test_timing(),
    };
    let m = Machine::pooled(cpes, 4096, Some(spec), 1);
    let memory: Vec<Line> = (0..cpes * PER_CPE / 128).map(|_| Line([0; 128])).collect();
    m.add_region(memory.as_ptr() as usize, cpes * PER_CPE, "arena");
    (m, memory)
}

/// Launches `steps` as kernel `kernel` and joins it.
fn launch(m: &Machine, memory: &[Line], kernel: &str, steps: &[Step]) -> Result<(), Violation> {
    let mut script = Script {
        main: memory.as_ptr() as usize,
        steps: steps.to_vec(),
    };
    m.spawn(kernel, run_script, (&mut script as *mut Script).cast(), 0);
    m.try_join()
}

/// A get and a put of data, and a put of tape with the get bringing it back, each 128 or 256
/// bytes at line-aligned offsets; the tape ones of `tape`.
fn mixed(tape: DmaClass) -> Vec<Step> {
    vec![
        step(DmaClass::Data, false, 0, 256),
        step(tape, true, 256, 128),
        step(tape, false, 256, 128),
        step(DmaClass::Data, true, 640, 256),
    ]
}

fn stats(steps: &[Step]) -> KernelStats {
    let (m, memory) = machine(4);
    launch(&m, &memory, "k", steps).expect("no violation");
    m.stats()["k"].clone()
}

#[test]
fn tape_transfers_count_in_the_totals_and_apart() {
    let data = stats(&mixed(DmaClass::Data));
    for tape in [DmaClass::Tape, DmaClass::TapeStream] {
        let mixed = stats(&mixed(tape));
        let c = &mixed.counters;
        assert_eq!(
            (c.tape_gets, c.tape_get_bytes, c.tape_puts, c.tape_put_bytes),
            (4, 4 * 128, 4, 4 * 128)
        );
        let mut untaped = c.clone();
        (
            untaped.tape_gets,
            untaped.tape_get_bytes,
            untaped.tape_puts,
            untaped.tape_put_bytes,
        ) = (0, 0, 0, 0);
        assert_eq!(untaped, data.counters, "the totals do not depend on the class");
        assert_eq!((c.gets, c.get_bytes, c.puts, c.put_bytes), (8, 4 * 384, 8, 4 * 384));
        // The queue serves tape as data; four CPEs' tape get and put of one line each take
        // 10 + 128 cycles of it.
        let mut time = mixed.time.clone();
        assert_eq!(time.tape_queue_cycles, 4.0 * 2.0 * 138.0);
        time.tape_queue_cycles = 0.0;
        assert_eq!(time, data.time, "the timing does not depend on the class");
    }
    assert_eq!(data.counters.tape_gets + data.counters.tape_puts, 0);
    assert_eq!(data.time.tape_queue_cycles, 0.0);
}

#[test]
fn every_launch_starts_with_data() {
    let (m, memory) = machine(2);
    let keep = Step {
        class: None,
        ..step(DmaClass::Data, false, 0, 128)
    };
    launch(&m, &memory, "tape", &[step(DmaClass::Tape, false, 0, 128), keep]).unwrap();
    launch(&m, &memory, "after", &[keep]).unwrap();
    let stats = m.stats();
    assert_eq!(
        stats["tape"].counters.tape_gets, 4,
        "the class stays set within a launch"
    );
    assert_eq!(stats["after"].counters.tape_gets, 0);
    assert_eq!(stats["after"].counters.gets, 2);
}

/// Pushes two layers (256 bytes at offset 0, 128 at 256) on every CPE, with data between.
fn forward() -> Vec<Step> {
    vec![
        step(DmaClass::TapeStream, true, 0, 256),
        step(DmaClass::Data, true, 768, 128),
        step(DmaClass::TapeStream, true, 256, 128),
    ]
}

#[test]
fn streamed_layers_pop_in_reverse_order_across_launches() {
    let (m, memory) = machine(2);
    launch(&m, &memory, "fwd", &forward()).expect("pushes are contiguous");
    assert_eq!(m.tape_depths(), [2, 2]);
    let backward = [
        step(DmaClass::TapeStream, false, 256, 128),
        step(DmaClass::Data, false, 768, 128),
        step(DmaClass::TapeStream, false, 0, 256),
    ];
    launch(&m, &memory, "bwd", &backward).expect("pops in LIFO order");
    assert_eq!(m.tape_depths(), [0, 0]);
    let stats = m.stats();
    assert_eq!(
        (stats["fwd"].counters.tape_puts, stats["fwd"].counters.tape_put_bytes),
        (4, 2 * 384)
    );
    assert_eq!(
        (stats["bwd"].counters.tape_gets, stats["bwd"].counters.tape_get_bytes),
        (4, 2 * 384)
    );
}

#[test]
fn popping_the_first_layer_first_names_kernel_cpe_and_the_layer_expected() {
    let (m, memory) = machine(2);
    launch(&m, &memory, "fwd", &forward()).unwrap();
    let first = Step {
        only: Some(1),
        ..step(DmaClass::TapeStream, false, 0, 256)
    };
    let v = launch(&m, &memory, "bwd", &[first]).expect_err("the first layer is not on top");
    assert_eq!((v.kernel.as_str(), v.cpes.as_slice()), ("bwd", &[1][..]));
    assert_eq!(
        v.to_string(),
        "kernel 'bwd' on CPE 1: tape stream get of 256 bytes at offset 1024 of arena is not the \
         last pushed layer (128 bytes at offset 1280 of arena, pushed by kernel 'fwd')"
    );
    assert_eq!(m.tape_depths(), [2, 2], "a refused pop pops nothing");
}

#[test]
fn a_push_that_leaves_a_gap_or_strides_is_a_violation() {
    let (m, memory) = machine(2);
    launch(&m, &memory, "fwd", &forward()).unwrap();
    let gap = step(DmaClass::TapeStream, true, 512, 128);
    let v = launch(&m, &memory, "gap", &[gap]).expect_err("a gap after the top layer");
    assert_eq!(v.cpes, [0]);
    assert!(v.message.ends_with("ends, at offset 384 of arena"), "{}", v.message);
    let strided = Step {
        stride: 64,
        bsize: 64,
        ..step(DmaClass::TapeStream, true, 384, 128)
    };
    let v = launch(&m, &memory, "strided", &[strided]).expect_err("a strided push");
    assert_eq!((v.kernel.as_str(), v.cpes.as_slice()), ("strided", &[0][..]));
    assert_eq!(
        v.message,
        "tape stream put of 128 bytes in blocks of 64 with a stride of 64: streamed tape moves in one contiguous transfer"
    );
    // Blocks that follow each other are one contiguous transfer.
    let blocks = Step {
        bsize: 64,
        ..step(DmaClass::TapeStream, true, 384, 128)
    };
    launch(&m, &memory, "blocks", &[blocks]).expect("contiguous blocks push one layer");
    assert_eq!(m.tape_depths(), [3, 3]);
}

#[test]
fn a_reset_forgets_every_layer() {
    let (m, memory) = machine(2);
    launch(&m, &memory, "fwd", &forward()).unwrap();
    m.reset_tape();
    assert_eq!(m.tape_depths(), [0, 0]);
    let pop = step(DmaClass::TapeStream, false, 256, 128);
    let v = launch(&m, &memory, "bwd", &[pop]).expect_err("nothing to pop");
    assert!(
        v.message.ends_with("pops no layer: none is outstanding"),
        "{}",
        v.message
    );
}

extern "C" fn bad_class(_: *mut c_void) {
    native::swflow_native_dma_class(7);
}

#[test]
fn an_unknown_class_code_is_a_violation() {
    let (m, _memory) = machine(1);
    m.spawn("bad", bad_class, std::ptr::null_mut(), 0);
    let v = m.try_join().expect_err("class 7 does not exist");
    assert_eq!(
        v.to_string(),
        "kernel 'bad' on CPE 0: DMA class 7 is none of 0, 1 and 2"
    );
}
