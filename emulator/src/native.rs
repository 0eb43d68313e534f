//! Hooks for kernels compiled into this process (the JIT): what the hardware does for them.
//!
//! A compiled kernel is a [`crate::machine::KernelFn`] launched with [`crate::Machine::spawn`]
//! like a C kernel. It calls these functions for its LDM area, DMA and its class, waits,
//! direct accesses, charges, register communication and detected failures, and for nothing
//! else. Where the C ABI stops
//! the program at a violation, a hook records it on the calling CPE and returns [`STOP`]; the
//! kernel must then return at once, and [`crate::Machine::try_join`] hands the violation to the
//! host. So a broken kernel is an error of the run, not the end of the process.

use crate::cpe;
use crate::machine::{Direction, Violation};
use crate::mesh::Line;
use crate::tape::DmaClass;
use crate::timing::Ops;

/// Hook result: carry on.
pub const GO: i32 = 0;
/// Hook result: a violation was recorded; the kernel must return.
pub const STOP: i32 = 1;

/// [`GO`], or [`STOP`] with the violation recorded on the calling CPE.
fn status(r: Result<(), Violation>) -> i32 {
    match r {
        Ok(()) => GO,
        Err(v) => {
            if let Err(v) = cpe::record(v) {
                // Called from the host: there is no CPE to record it on.
                eprintln!("error: {v}");
            }
            STOP
        }
    }
}

/// The calling CPE's LDM area, `bytes` long (its contents stay from kernel to kernel, as in
/// the hardware's LDM); null, with a violation recorded, when `bytes` exceeds the LDM.
#[no_mangle]
pub extern "C" fn swflow_native_ldm(bytes: usize) -> *mut u8 {
    let (Some(ldm), Some(area)) = (cpe::ldm_bytes(), cpe::ldm_area()) else {
        status(Err(cpe::fail("the LDM area")));
        return std::ptr::null_mut();
    };
    if bytes > ldm {
        status(Err(cpe::fail(&format!(
            "lays out {bytes} bytes of LDM; each CPE has {ldm} bytes"
        ))));
        return std::ptr::null_mut();
    }
    area
}

/// Declares an LDM buffer named by the `len` UTF-8 bytes at `name`.
///
/// # Safety
/// `name` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn swflow_native_declare(base: usize, bytes: usize, name: *const u8, len: usize) -> i32 {
    let name = String::from_utf8_lossy(std::slice::from_raw_parts(name, len));
    status(cpe::declare_ldm(base, bytes, &name))
}

/// A DMA, as [`crate::cpe::dma`]: `put` non-zero moves LDM to main memory.
#[no_mangle]
pub extern "C" fn swflow_native_dma(
    put: i32,
    main: usize,
    ldm: usize,
    len: i64,
    reply: usize,
    stride: i64,
    bsize: i64,
) -> i32 {
    let dir = if put != 0 { Direction::Put } else { Direction::Get };
    let sizes = [
        ("a DMA length", len),
        ("a DMA stride", stride),
        ("a DMA block size", bsize),
    ];
    if let Some((what, v)) = sizes.iter().find(|(_, v)| *v < 0) {
        return status(Err(cpe::fail(&format!("{what} is negative ({v})"))));
    }
    status(cpe::dma(
        dir,
        main,
        ldm,
        len as usize,
        reply,
        stride as usize,
        bsize as usize,
    ))
}

/// Sets the class of the calling CPE's later DMA, by its code (see [`DmaClass::from_code`]);
/// an unknown code is a violation.
#[no_mangle]
pub extern "C" fn swflow_native_dma_class(class: i32) -> i32 {
    status(match DmaClass::from_code(class.into()) {
        Some(c) => cpe::set_class(c),
        None => Err(cpe::fail(&format!("DMA class {class} is none of 0, 1 and 2"))),
    })
}

/// Completes the transfers on the counter at `reply`, which must then be `n` (at least `n`
/// unless `exact`).
#[no_mangle]
pub extern "C" fn swflow_native_wait(reply: usize, n: i64, exact: i32) -> i32 {
    status(cpe::wait(reply, n, exact != 0))
}

/// Checks a direct access of `bytes` at `addr` (a write when `write` is non-zero).
/// Sends the `bytes` of LDM at `ldm` along the calling CPE's row (`line` 0) or column (1) to
/// all its other CPEs, as one block (see [`crate::capi::swflow_emu_regcomm_send_block`]).
#[no_mangle]
pub extern "C" fn swflow_native_reg_send(line: i32, ldm: usize, bytes: usize) -> i32 {
    status(reg_line(line).and_then(|l| cpe::reg_send_block(l, ldm, bytes)))
}

/// Takes a block of `bytes` sent along the calling CPE's row (`line` 0) or column (1) into
/// LDM at `ldm`, waiting for it.
#[no_mangle]
pub extern "C" fn swflow_native_reg_recv(line: i32, ldm: usize, bytes: usize) -> i32 {
    status(reg_line(line).and_then(|l| cpe::reg_recv_block(l, ldm, bytes)))
}

/// Posts the `bytes` of LDM at `ldm` along the calling CPE's row (`line` 0) or column (1),
/// counting its own copy in the reply word at `reply` (see
/// [`crate::capi::swflow_emu_rma_post`]).
#[no_mangle]
pub extern "C" fn swflow_native_rma_post(line: i32, ldm: usize, bytes: usize, reply: usize) -> i32 {
    status(reg_line(line).and_then(|l| cpe::rma_post(l, ldm, bytes, reply)))
}

/// Waits until the reply word at `reply` holds at least `count`, the blocks posted along the
/// calling CPE's row (`line` 0) or column (1) landing meanwhile.
#[no_mangle]
pub extern "C" fn swflow_native_rma_wait(line: i32, reply: usize, count: i64) -> i32 {
    status(reg_line(line).and_then(|l| cpe::rma_wait(l, reply, count)))
}

/// Meets the CPEs of the calling CPE's row (`scope` 0), its column (1), or all the CPEs (2).
#[no_mangle]
pub extern "C" fn swflow_native_sync(scope: i32) -> i32 {
    status(match scope {
        2 => cpe::barrier(),
        code => reg_line(code).and_then(cpe::sync_line),
    })
}

fn reg_line(code: i32) -> Result<Line, Violation> {
    Line::from_code(code).ok_or_else(|| {
        cpe::fail(&format!(
            "register communication on line {code}, neither 0 (row) nor 1 (column)"
        ))
    })
}

#[no_mangle]
pub extern "C" fn swflow_native_direct(addr: usize, bytes: usize, write: i32) -> i32 {
    status(cpe::direct(addr, bytes, write != 0))
}

/// Charges `n` executions of `ops` (nothing when `n` is not positive).
///
/// # Safety
/// `ops` points to an [`Ops`].
#[no_mangle]
pub unsafe extern "C" fn swflow_native_charge(ops: *const Ops, n: i64) -> i32 {
    if n <= 0 {
        return GO;
    }
    status(cpe::charge(&*ops, n as u64))
}

/// Records a failure the kernel detected, named by the `len` UTF-8 bytes at `message`;
/// returns [`STOP`].
///
/// # Safety
/// `message` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn swflow_native_fail(message: *const u8, len: usize) -> i32 {
    let message = String::from_utf8_lossy(std::slice::from_raw_parts(message, len));
    status(Err(cpe::fail(&message)));
    STOP
}

/// The calling CPE's id, or -1 on the host.
#[no_mangle]
pub extern "C" fn swflow_native_cpe_id() -> i64 {
    cpe::cpe_id().map_or(-1, |c| c as i64)
}
