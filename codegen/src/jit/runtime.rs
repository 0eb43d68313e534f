//! What JIT-compiled kernels call: the emulator's hooks, libm, and the helpers that
//! runtime-c gives generated C (`swflow_dma_box`, `swflow_dma_box_padded`, `swflow_pad_box`,
//! `swflow_pow_i64`), here in Rust with the same steps and the same charges.

use std::collections::HashMap;

use cranelift_codegen::ir::{types, AbiParam, Signature, Type};
use cranelift_codegen::isa::CallConv;
use swflow_emulator::native::{self, GO, STOP};
use swflow_emulator::timing::Ops;

use swflow_scheduler::schedule::clip::{box_transfers, pitches, Clipped, Transfer};

use crate::cost::{
    DMA_BOX_PER_DIM_OPS, DMA_BOX_SETUP_OPS, DMA_BOX_TRANSFER_OPS, DMA_CLIP_PER_DIM_OPS, DMA_CLIP_SETUP_OPS,
    DMA_MOVE_HEAD_OPS, DMA_MOVE_OPS, DMA_MOVE_SHORT_OPS, DMA_MOVE_VECTOR_OPS, DMA_PACK_CHECK_OPS, DMA_PACK_FIRST_OPS,
    DMA_PAD_DEEP_OPS, DMA_PAD_EMPTY_OPS, DMA_PAD_FILL_OPS, DMA_PAD_RUN_OPS, DMA_PAD_SETUP_OPS, DMA_PAD_SLAB_OPS,
    DMA_PAD_SPLAT_OPS, DMA_PAD_STEP_OPS, DMA_PAD_VECTOR_OPS, DMA_SPREAD_PLANE_OPS, DMA_SPREAD_ROW_OPS,
    DMA_SPREAD_SETUP_OPS,
};

/// A function compiled code calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Callee {
    Ldm,
    Declare,
    Dma,
    DmaClass,
    Wait,
    Direct,
    Charge,
    Fail,
    CpeId,
    DmaBox,
    DmaBoxPadded,
    PadBox,
    PowI64,
    RegSend,
    RegRecv,
    RmaPost,
    RmaWait,
    Sync,
    /// A libm routine: its name without the `f` suffix, whether it is the f32 one, and its
    /// arity.
    Libm(&'static str, bool, u8),
}

/// The libm routines kernels may call.
pub const LIBM: &[(&str, u8)] = &[
    ("exp", 1),
    ("log", 1),
    ("erf", 1),
    ("tanh", 1),
    ("sin", 1),
    ("cos", 1),
    ("fmod", 2),
    ("pow", 2),
];

impl Callee {
    /// Every callee, for declaring them all in a module.
    pub fn all() -> Vec<Callee> {
        let mut all = vec![
            Callee::Ldm,
            Callee::Declare,
            Callee::Dma,
            Callee::DmaClass,
            Callee::Wait,
            Callee::Direct,
            Callee::Charge,
            Callee::Fail,
            Callee::CpeId,
            Callee::DmaBox,
            Callee::DmaBoxPadded,
            Callee::PadBox,
            Callee::PowI64,
            Callee::RegSend,
            Callee::RegRecv,
            Callee::RmaPost,
            Callee::RmaWait,
            Callee::Sync,
        ];
        for &(name, arity) in LIBM {
            all.push(Callee::Libm(name, true, arity));
            all.push(Callee::Libm(name, false, arity));
        }
        all
    }

    /// The symbol it is linked by.
    pub fn symbol(self) -> String {
        match self {
            Callee::Ldm => "swflow_native_ldm".into(),
            Callee::Declare => "swflow_native_declare".into(),
            Callee::Dma => "swflow_native_dma".into(),
            Callee::DmaClass => "swflow_native_dma_class".into(),
            Callee::Wait => "swflow_native_wait".into(),
            Callee::Direct => "swflow_native_direct".into(),
            Callee::Charge => "swflow_native_charge".into(),
            Callee::Fail => "swflow_native_fail".into(),
            Callee::CpeId => "swflow_native_cpe_id".into(),
            Callee::DmaBox => "swflow_jit_dma_box".into(),
            Callee::DmaBoxPadded => "swflow_jit_dma_box_padded".into(),
            Callee::PadBox => "swflow_jit_pad_box".into(),
            Callee::PowI64 => "swflow_jit_pow_i64".into(),
            Callee::RegSend => "swflow_native_reg_send".into(),
            Callee::RegRecv => "swflow_native_reg_recv".into(),
            Callee::RmaPost => "swflow_native_rma_post".into(),
            Callee::RmaWait => "swflow_native_rma_wait".into(),
            Callee::Sync => "swflow_native_sync".into(),
            Callee::Libm(name, true, _) => format!("{name}f"),
            Callee::Libm(name, false, _) => name.into(),
        }
    }

    /// Its address in this process.
    pub fn address(self) -> *const u8 {
        match self {
            Callee::Ldm => native::swflow_native_ldm as *const u8,
            Callee::Declare => native::swflow_native_declare as *const u8,
            Callee::Dma => native::swflow_native_dma as *const u8,
            Callee::DmaClass => native::swflow_native_dma_class as *const u8,
            Callee::Wait => native::swflow_native_wait as *const u8,
            Callee::Direct => native::swflow_native_direct as *const u8,
            Callee::Charge => native::swflow_native_charge as *const u8,
            Callee::Fail => native::swflow_native_fail as *const u8,
            Callee::CpeId => native::swflow_native_cpe_id as *const u8,
            Callee::DmaBox => swflow_jit_dma_box as *const u8,
            Callee::DmaBoxPadded => swflow_jit_dma_box_padded as *const u8,
            Callee::PadBox => swflow_jit_pad_box as *const u8,
            Callee::PowI64 => swflow_jit_pow_i64 as *const u8,
            Callee::RegSend => native::swflow_native_reg_send as *const u8,
            Callee::RegRecv => native::swflow_native_reg_recv as *const u8,
            Callee::RmaPost => native::swflow_native_rma_post as *const u8,
            Callee::RmaWait => native::swflow_native_rma_wait as *const u8,
            Callee::Sync => native::swflow_native_sync as *const u8,
            Callee::Libm(name, single, _) => libm_address(name, single),
        }
    }

    /// Its signature under `call_conv`.
    pub fn signature(self, call_conv: CallConv) -> Signature {
        use types::{F32, F64, I32, I64};
        let (params, returns): (&[Type], &[Type]) = match self {
            Callee::Ldm => (&[I64], &[I64]),
            Callee::Declare => (&[I64, I64, I64, I64], &[I32]),
            Callee::Dma => (&[I32, I64, I64, I64, I64, I64, I64], &[I32]),
            Callee::DmaClass => (&[I32], &[I32]),
            Callee::Wait => (&[I64, I64, I32], &[I32]),
            Callee::Direct => (&[I64, I64, I32], &[I32]),
            Callee::Charge => (&[I64, I64], &[I32]),
            Callee::Fail => (&[I64, I64], &[I32]),
            Callee::CpeId => (&[], &[I64]),
            Callee::DmaBox => (&[I32, I64, I64, I64, I64, I64, I64, I64, I64], &[I64]),
            Callee::DmaBoxPadded => (&[I64, I64, I64, I64, I64, I64, I64, I64], &[I64]),
            Callee::PadBox => (&[I64, I64, I64, I64, I64, I64, I64, I64], &[I64]),
            Callee::PowI64 => (&[I64, I64], &[I64]),
            Callee::RegSend | Callee::RegRecv => (&[I32, I64, I64], &[I32]),
            Callee::RmaPost => (&[I32, I64, I64, I64], &[I32]),
            Callee::RmaWait => (&[I32, I64, I64], &[I32]),
            Callee::Sync => (&[I32], &[I32]),
            Callee::Libm(_, true, 1) => (&[F32], &[F32]),
            Callee::Libm(_, true, _) => (&[F32, F32], &[F32]),
            Callee::Libm(_, false, 1) => (&[F64], &[F64]),
            Callee::Libm(_, false, _) => (&[F64, F64], &[F64]),
        };
        let mut s = Signature::new(call_conv);
        s.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        s.returns.extend(returns.iter().map(|&t| AbiParam::new(t)));
        s
    }
}

mod libm {
    extern "C" {
        pub fn expf(x: f32) -> f32;
        pub fn logf(x: f32) -> f32;
        pub fn erff(x: f32) -> f32;
        pub fn tanhf(x: f32) -> f32;
        pub fn sinf(x: f32) -> f32;
        pub fn cosf(x: f32) -> f32;
        pub fn fmodf(x: f32, y: f32) -> f32;
        pub fn powf(x: f32, y: f32) -> f32;
        pub fn exp(x: f64) -> f64;
        pub fn log(x: f64) -> f64;
        pub fn erf(x: f64) -> f64;
        pub fn tanh(x: f64) -> f64;
        pub fn sin(x: f64) -> f64;
        pub fn cos(x: f64) -> f64;
        pub fn fmod(x: f64, y: f64) -> f64;
        pub fn pow(x: f64, y: f64) -> f64;
    }
}

/// The C library's routine, the one generated C calls.
fn libm_address(name: &str, single: bool) -> *const u8 {
    match (name, single) {
        ("exp", true) => libm::expf as *const u8,
        ("log", true) => libm::logf as *const u8,
        ("erf", true) => libm::erff as *const u8,
        ("tanh", true) => libm::tanhf as *const u8,
        ("sin", true) => libm::sinf as *const u8,
        ("cos", true) => libm::cosf as *const u8,
        ("fmod", true) => libm::fmodf as *const u8,
        ("pow", true) => libm::powf as *const u8,
        ("exp", false) => libm::exp as *const u8,
        ("log", false) => libm::log as *const u8,
        ("erf", false) => libm::erf as *const u8,
        ("tanh", false) => libm::tanh as *const u8,
        ("sin", false) => libm::sin as *const u8,
        ("cos", false) => libm::cos as *const u8,
        ("fmod", false) => libm::fmod as *const u8,
        ("pow", false) => libm::pow as *const u8,
        _ => unreachable!("LIBM lists every routine"),
    }
}

/// Constants compiled code points to (names, messages, operation counts); they live as long
/// as the code.
#[derive(Default)]
pub struct Pool {
    texts: HashMap<String, Box<[u8]>>,
    /// Boxed, so that each stays where the code points as the pool grows.
    #[allow(clippy::vec_box)]
    ops: Vec<Box<Ops>>,
}

impl Pool {
    /// The address and length of `s`'s bytes.
    pub fn text(&mut self, s: &str) -> (i64, i64) {
        let bytes = self
            .texts
            .entry(s.to_string())
            .or_insert_with(|| s.as_bytes().to_vec().into_boxed_slice());
        (bytes.as_ptr() as i64, bytes.len() as i64)
    }

    /// The address of a copy of `ops`.
    pub fn ops(&mut self, ops: Ops) -> i64 {
        let b = Box::new(ops);
        let at = &*b as *const Ops as i64;
        self.ops.push(b);
        at
    }
}

/// runtime-c's `swflow_dma_box` (see `swflow_slave.h` for the contract), charging the same
/// operations in the same order; the transfers issued, or -1 after a violation.
///
/// # Safety
/// `shape`, `start` and `extent` point to `rank` readable values.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn swflow_jit_dma_box(
    put: i32,
    ldm: i64,
    main: i64,
    rank: i64,
    shape: *const i64,
    start: *const i64,
    extent: *const i64,
    elem: i64,
    reply: i64,
) -> i64 {
    let n = rank.max(0) as usize;
    if !charge(&DMA_BOX_SETUP_OPS, n) {
        return -1;
    }
    let transfers = box_transfers(&dims(shape, n), &dims(start, n), &dims(extent, n), 0);
    issue(put, &transfers, ldm, main, elem, reply, &DMA_BOX_PER_DIM_OPS, n)
}

/// The `n` values at `p` (negative ones as 0).
///
/// # Safety
/// `p` points to `n` readable values.
unsafe fn dims(p: *const i64, n: usize) -> Vec<usize> {
    std::slice::from_raw_parts(p, n)
        .iter()
        .map(|&v| v.max(0) as usize)
        .collect()
}

/// Issues `transfers` (in elements of `elem` bytes) between the buffer at `ldm` and the
/// tensor at `main`, charging `per_dim` for each of the `n` dimensions and the call of each;
/// the transfers issued, or -1 after a violation.
#[allow(clippy::too_many_arguments)]
fn issue(put: i32, transfers: &[Transfer], ldm: i64, main: i64, elem: i64, reply: i64, per_dim: &Ops, n: usize) -> i64 {
    let bytes = |e: usize| e as i64 * elem;
    for t in transfers {
        if !charge(per_dim, n) || !charge(&DMA_BOX_TRANSFER_OPS, 1) {
            return -1;
        }
        let (stride, bsize) = match t.blocks {
            1 => (0, 0),
            _ => (bytes(t.main_pitch - t.run), bytes(t.run)),
        };
        let status = native::swflow_native_dma(
            put,
            (main + bytes(t.main)) as usize,
            (ldm + bytes(t.ldm)) as usize,
            bytes(t.run * t.blocks),
            reply as usize,
            stride,
            bsize,
        );
        if status == STOP {
            return -1;
        }
    }
    transfers.len() as i64
}

/// A guarded read's box as the helpers receive it: the tensor's shape, the box's start and
/// extent, and its clipped part (`None` when the box lies inside the tensor).
///
/// # Safety
/// `shape`, `start` and `extent` point to `rank` readable values.
unsafe fn guarded_box(
    rank: i64,
    shape: *const i64,
    start: *const i64,
    extent: *const i64,
) -> (Vec<usize>, Vec<usize>, Option<Clipped>) {
    let n = rank.max(0) as usize;
    let (tensor, boxed) = (dims(shape, n), dims(extent, n));
    let clipped = Clipped::of(&tensor, std::slice::from_raw_parts(start, n), &boxed);
    (tensor, boxed, clipped)
}

/// Charges the calling CPE `count` executions of `ops`; false after a violation.
fn charge(ops: &Ops, count: usize) -> bool {
    // SAFETY: `ops` is a valid reference for the whole call.
    unsafe { native::swflow_native_charge(ops, count as i64) == GO }
}

/// runtime-c's `swflow_dma_box_padded` (a guarded read's get), charging the same operations
/// in the same order: the transfers issued, or -1 after a violation.
///
/// # Safety
/// `shape`, `start` and `extent` point to `rank` readable values.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn swflow_jit_dma_box_padded(
    ldm: i64,
    main: i64,
    rank: i64,
    shape: *const i64,
    start: *const i64,
    extent: *const i64,
    elem: i64,
    reply: i64,
) -> i64 {
    let (tensor, boxed, clipped) = guarded_box(rank, shape, start, extent);
    let n = tensor.len();
    if !charge(&DMA_PAD_SETUP_OPS, n) {
        return -1;
    }
    let Some(c) = clipped else {
        return swflow_jit_dma_box(0, ldm, main, rank, shape, start, extent, elem, reply);
    };
    if n == 0 || c.is_empty() {
        return 0;
    }
    if !charge(&DMA_PACK_CHECK_OPS, n) {
        return -1;
    }
    if c.packed {
        if !charge(&DMA_PACK_FIRST_OPS, n) {
            return -1;
        }
        let first = c.transfers(&tensor, &boxed)[0].ldm as i64 * elem;
        let lo: Vec<i64> = c.lo.iter().map(|&v| v as i64).collect();
        let sub: Vec<i64> = c.extent.iter().map(|&v| v as i64).collect();
        return swflow_jit_dma_box(
            0,
            ldm + first,
            main,
            rank,
            shape,
            lo.as_ptr(),
            sub.as_ptr(),
            elem,
            reply,
        );
    }
    if !charge(&DMA_CLIP_SETUP_OPS, n) {
        return -1;
    }
    issue(
        0,
        &c.transfers(&tensor, &boxed),
        ldm,
        main,
        elem,
        reply,
        &DMA_CLIP_PER_DIM_OPS,
        n,
    )
}

/// runtime-c's `swflow_pad_box`, charging the same operations; `pad` holds the pad value's
/// bits in its low `elem` bytes, and `lanes` is the machine's f32 vector lanes
/// (`SWFLOW_F32_LANES`: where it has more than one, rows of f32 of at least a vector move, and
/// runs of f32 of at least a vector are padded, a vector at a time). 0, or -1 after a
/// violation.
///
/// # Safety
/// `shape`, `start` and `extent` point to `rank` readable values, and `ldm` to a buffer of
/// the box's elements.
pub unsafe extern "C" fn swflow_jit_pad_box(
    ldm: i64,
    rank: i64,
    shape: *const i64,
    start: *const i64,
    extent: *const i64,
    elem: i64,
    pad: i64,
    lanes: i64,
) -> i64 {
    let (tensor, boxed, clipped) = guarded_box(rank, shape, start, extent);
    let n = tensor.len();
    if !charge(&DMA_PAD_SETUP_OPS, n) {
        return -1;
    }
    let Some(c) = clipped else { return 0 };
    let elem = elem as usize;
    let at = |i: usize| (ldm as usize + i * elem) as *mut u8;
    if !c.is_empty() && !charge(&DMA_PACK_CHECK_OPS, n) {
        return -1;
    }
    let bits = pad.to_le_bytes();
    // Elements `from..to` set to the pad value.
    let set = |from: usize, to: usize| {
        for i in from..to {
            std::ptr::copy_nonoverlapping(bits.as_ptr(), at(i), elem);
        }
    };
    let vectors = if elem == 4 && lanes > 1 { lanes as usize } else { 0 };
    // swflow_pad_run: `len` elements from element `from` set to the pad value.
    let run = |from: usize, len: usize| -> bool {
        if !charge(&DMA_PAD_RUN_OPS, 1) {
            return false;
        }
        let charged = match vectors {
            l if l > 0 && len >= l => charge(&DMA_PAD_SPLAT_OPS, 1) && charge(&DMA_PAD_VECTOR_OPS, len.div_ceil(l)),
            _ => charge(&DMA_PAD_FILL_OPS, len),
        };
        if charged {
            set(from, from + len);
        }
        charged
    };
    if c.is_empty() {
        return match charge(&DMA_PAD_EMPTY_OPS, n) && run(0, boxed.iter().product()) {
            true => 0,
            false => -1,
        };
    }
    let last = n - 1;
    let pitch = pitches(&boxed);
    if c.packed {
        if !charge(&DMA_PACK_FIRST_OPS, n) || !charge(&DMA_SPREAD_SETUP_OPS, n) {
            return -1;
        }
        let rows = if n >= 2 { c.extent[n - 2] } else { 1 };
        let planes: usize = c.extent[..n.saturating_sub(2)].iter().product();
        if !charge(&DMA_SPREAD_PLANE_OPS, n * planes) || !charge(&DMA_SPREAD_ROW_OPS, rows * planes) {
            return -1;
        }
        // A row in place, its data from element `to`, has its two ends padded.
        let (before, width) = (c.at[last], boxed[last]);
        let after = width - before - c.extent[last];
        let ends = |to: usize| -> bool {
            let charged = charge(&DMA_PAD_FILL_OPS, before) && charge(&DMA_PAD_FILL_OPS, after);
            if charged {
                let end = to + c.extent[last];
                set(to - before, to);
                set(end, end + after);
            }
            charged
        };
        for m in c.moves(&boxed) {
            // A row shorter than a vector moves as one when the padding around it takes the
            // vector's other lanes: they are set to the padding next, as if copied.
            let charged = match vectors {
                l if l > 0 && m.len >= l => {
                    charge(&DMA_MOVE_VECTOR_OPS, m.len / l) && charge(&DMA_MOVE_HEAD_OPS, usize::from(m.len % l != 0))
                }
                l if l > 0 && m.len > 0 && width >= l => charge(&DMA_MOVE_SHORT_OPS, 1),
                _ => charge(&DMA_MOVE_OPS, m.len),
            };
            if !charged {
                return -1;
            }
            std::ptr::copy(at(m.from), at(m.to), m.len * elem);
            if !ends(m.to) {
                return -1;
            }
        }
        // The very first row is in place from the start.
        if !ends((0..n).map(|j| c.at[j] * pitch[j]).sum()) {
            return -1;
        }
    }
    if !charge(&DMA_PAD_DEEP_OPS, n) {
        return -1;
    }
    let Some(deep) = (0..n)
        .rev()
        .find(|&j| c.extent[j] != boxed[j] && (j != last || !c.packed))
    else {
        return 0;
    };
    match pad_outside(0, 0, deep, &c, &boxed, &pitch, &run) {
        true => 0,
        false => -1,
    }
}

/// runtime-c's `swflow_pad_outside`: sets the elements of `boxed` outside the clipped box
/// `c` by `run` (element pitches `pitch`), within the part at element `to` of one index of
/// every dimension before `j`, down to dimension `deep`; false after a violation.
fn pad_outside(
    to: usize,
    j: usize,
    deep: usize,
    c: &Clipped,
    boxed: &[usize],
    pitch: &[usize],
    run: &dyn Fn(usize, usize) -> bool,
) -> bool {
    let after = c.at[j] + c.extent[j];
    if !charge(&DMA_PAD_SLAB_OPS, 1)
        || !run(to, c.at[j] * pitch[j])
        || !run(to + after * pitch[j], (boxed[j] - after) * pitch[j])
    {
        return false;
    }
    j == deep
        || charge(&DMA_PAD_STEP_OPS, c.extent[j])
            && (c.at[j]..after).all(|i| pad_outside(to + i * pitch[j], j + 1, deep, c, boxed, pitch, run))
}

/// runtime-c's `swflow_pow_i64`: `a` to the power `b`, wrapping; negative powers of integers
/// other than 1 and -1 are 0.
pub extern "C" fn swflow_jit_pow_i64(a: i64, b: i64) -> i64 {
    if b < 0 {
        return match a {
            1 => 1,
            -1 if b % 2 == 0 => 1,
            -1 => -1,
            _ => 0,
        };
    }
    let (mut base, mut result) = (a as u64, 1u64);
    let mut e = (b as u64).min(0xffff_ffff);
    while e != 0 {
        if e & 1 == 1 {
            result = result.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        e >>= 1;
    }
    result as i64
}
