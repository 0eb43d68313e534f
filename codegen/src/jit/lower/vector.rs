//! The vector statements of a CPE program: each vector register is `lanes / 4` Cranelift
//! `f32x4` values, and every lane computes what `simd_vmas` and the loads and stores of the
//! generated C compute there.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value as Val};

use super::{vector_flags, Lower, LANES};
use swflow_frontend::ir::{BinaryOp, UnaryOp};

use crate::cpe::{Int, Place, VReg};

impl Lower<'_, '_> {
    /// Declares every vector register of the program, zeroed.
    pub(super) fn declare_vregs(&mut self) {
        let chunks = self.f.lanes / LANES as usize;
        for _ in &self.f.vregs {
            let parts = (0..chunks)
                .map(|_| {
                    let var = self.b.declare_var(types::F32X4);
                    let zero = self.b.ins().f32const(0.0);
                    let zero = self.b.ins().splat(types::F32X4, zero);
                    self.b.def_var(var, zero);
                    var
                })
                .collect();
            self.vregs.push(parts);
        }
    }

    /// The address of the first of the lanes at LDM place `p`, after checking that the last
    /// lane (or, for a broadcast, the one element) is inside its buffer.
    fn lanes_addr(&mut self, p: &Place, lanes: i64) -> Val {
        let count = self.b.ins().iconst(types::I64, lanes);
        self.span_addr(p, count)
    }

    /// The address of LDM place `p`, after checking that the `count` elements from it on are
    /// inside its buffer.
    fn span_addr(&mut self, p: &Place, count: Val) -> Val {
        let Place::Ldm { buf, half, index } = p else {
            unreachable!("vector statements access LDM places")
        };
        let b = self.f.buf(*buf);
        let (elements, size) = (b.elements as i64, b.dtype.size_bytes() as i64);
        let message = format!("an access outside LDM buffer '{}'", b.name);
        let i = self.int(index);
        let past = self.b.ins().iadd(i, count);
        let outside = self.b.ins().icmp_imm_s(IntCC::UnsignedGreaterThan, past, elements);
        self.fail_if(outside, &message);
        let base = self.buffer_base(*buf, half);
        let off = self.b.ins().imul_imm_s(i, size);
        self.b.ins().iadd(base, off)
    }

    /// With `aligned`, checks the promise of [`crate::cpe::Stmt::VLoad`]: the address of the
    /// first lane, counted from the LDM's start (where every buffer and half starts aligned),
    /// is a multiple of a vector's bytes.
    fn check_aligned(&mut self, at: Val, p: &Place) {
        let Place::Ldm { buf, .. } = p else {
            unreachable!("vector statements access LDM places")
        };
        let bytes = self.f.lanes as i64 * types::F32.bytes() as i64;
        let message = format!(
            "an aligned vector access to LDM buffer '{}' at an element not a multiple of {} lanes",
            self.f.buf(*buf).name,
            self.f.lanes
        );
        let offset = self.b.ins().isub(at, self.ldm);
        let rest = self.b.ins().band_imm_s(offset, bytes - 1);
        let misaligned = self.b.ins().icmp_imm_s(IntCC::NotEqual, rest, 0);
        self.fail_if(misaligned, &message);
    }

    pub(super) fn vload(&mut self, reg: VReg, place: &Place, broadcast: bool, aligned: bool) {
        let parts = self.vregs[reg.0 as usize].clone();
        if broadcast {
            let at = self.lanes_addr(place, 1);
            let x = self.b.ins().load(types::F32, vector_flags(), at, 0);
            let x = self.b.ins().splat(types::F32X4, x);
            for var in parts {
                self.b.def_var(var, x);
            }
            return;
        }
        let at = self.lanes_addr(place, self.f.lanes as i64);
        if aligned {
            self.check_aligned(at, place);
        }
        for (c, var) in parts.into_iter().enumerate() {
            let x = self.b.ins().load(types::F32X4, vector_flags(), at, (16 * c) as i32);
            self.b.def_var(var, x);
        }
    }

    pub(super) fn vstore(&mut self, reg: VReg, place: &Place, aligned: bool) {
        let parts = self.vregs[reg.0 as usize].clone();
        let at = self.lanes_addr(place, self.f.lanes as i64);
        if aligned {
            self.check_aligned(at, place);
        }
        for (c, var) in parts.into_iter().enumerate() {
            let x = self.b.use_var(var);
            self.b.ins().store(vector_flags(), x, at, (16 * c) as i32);
        }
    }

    /// Stores lanes `first..first + count` of `reg` from `place` on: lane `i` goes to element
    /// `i - first`.
    pub(super) fn vstore_lanes(&mut self, reg: VReg, place: &Place, first: &Int, count: &Int) {
        let lanes = self.f.lanes as i64;
        let (first, n) = (self.int(first), self.int(count));
        let end = self.b.ins().iadd(first, n);
        let before = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, first, 0);
        let short = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 1);
        let long = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, end, lanes);
        let bad = self.b.ins().bor(short, long);
        let bad = self.b.ins().bor(bad, before);
        self.fail_if(bad, "a partial vector store of no lanes or of lanes outside the vector");
        let at = self.span_addr(place, n);
        let size = types::F32.bytes() as i64;
        let parts = self.vregs[reg.0 as usize].clone();
        for lane in 0..lanes {
            let from = self.b.ins().icmp_imm_s(IntCC::SignedLessThanOrEqual, first, lane);
            let to = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, end, lane);
            let keep = self.b.ins().band(from, to);
            let store = self.b.create_block();
            let next = self.b.create_block();
            self.b.ins().brif(keep, store, &[], next, &[]);
            self.b.switch_to_block(store);
            let part = self.b.use_var(parts[(lane / LANES) as usize]);
            let x = self.b.ins().extractlane(part, (lane % LANES) as u8);
            // Element `lane - first`, as a byte offset from `at`.
            let lane_value = self.b.ins().iconst(types::I64, lane);
            let element = self.b.ins().isub(lane_value, first);
            let off = self.b.ins().imul_imm_s(element, size);
            let to = self.b.ins().iadd(at, off);
            self.b.ins().store(vector_flags(), x, to, 0);
            self.b.ins().jump(next, &[]);
            self.b.switch_to_block(next);
        }
    }

    /// Lane `i` from the element `i * stride` after `place`.
    pub(super) fn vload_strided(&mut self, reg: VReg, place: &Place, stride: i64) {
        let lanes = self.f.lanes as i64;
        let span = self.b.ins().iconst(types::I64, (lanes - 1) * stride + 1);
        let at = self.span_addr(place, span);
        let size = types::F32.bytes() as i64;
        let parts = self.vregs[reg.0 as usize].clone();
        for (c, var) in parts.into_iter().enumerate() {
            let zero = self.b.ins().f32const(0.0);
            let mut x = self.b.ins().splat(types::F32X4, zero);
            for lane in 0..LANES {
                let element = (c as i64 * LANES + lane) * stride;
                let e = self
                    .b
                    .ins()
                    .load(types::F32, vector_flags(), at, (element * size) as i32);
                x = self.b.ins().insertlane(x, e, lane as u8);
            }
            self.b.def_var(var, x);
        }
    }

    pub(super) fn vsplat(&mut self, reg: VReg, value: f32) {
        let x = self.b.ins().f32const(value);
        let x = self.b.ins().splat(types::F32X4, x);
        for var in self.vregs[reg.0 as usize].clone() {
            self.b.def_var(var, x);
        }
    }

    /// `dst = op(a, b)` lane by lane; the maximum and minimum as the scalar helpers pick
    /// their operands (as `SWFLOW_VMAX`/`SWFLOW_VMIN` do).
    pub(super) fn vbinary(&mut self, op: BinaryOp, dst: VReg, a: VReg, b: VReg) {
        let parts = |l: &Self, r: VReg| l.vregs[r.0 as usize].clone();
        let (dst, a, b) = (parts(self, dst), parts(self, a), parts(self, b));
        for ((dst, a), b) in dst.into_iter().zip(a).zip(b) {
            let (x, y) = (self.b.use_var(a), self.b.use_var(b));
            let r = match op {
                BinaryOp::Add => self.b.ins().fadd(x, y),
                BinaryOp::Sub => self.b.ins().fsub(x, y),
                BinaryOp::Mul => self.b.ins().fmul(x, y),
                BinaryOp::Div => self.b.ins().fdiv(x, y),
                BinaryOp::Max | BinaryOp::Min => self.vector_extreme(op, x, y),
                other => unreachable!("no vector form of {other:?}"),
            };
            self.b.def_var(dst, r);
        }
    }

    /// `dst = op(a)` lane by lane: the square root, correctly rounded as the scalar one is.
    pub(super) fn vunary(&mut self, op: UnaryOp, dst: VReg, a: VReg) {
        let parts = |l: &Self, r: VReg| l.vregs[r.0 as usize].clone();
        let (dst, a) = (parts(self, dst), parts(self, a));
        for (dst, a) in dst.into_iter().zip(a) {
            let x = self.b.use_var(a);
            let r = match op {
                UnaryOp::Sqrt => self.b.ins().sqrt(x),
                other => unreachable!("no vector form of {other:?}"),
            };
            self.b.def_var(dst, r);
        }
    }

    pub(super) fn vfma(&mut self, acc: VReg, a: VReg, b: VReg) {
        let parts = |l: &Self, r: VReg| l.vregs[r.0 as usize].clone();
        let (acc, a, b) = (parts(self, acc), parts(self, a), parts(self, b));
        for ((acc, a), b) in acc.into_iter().zip(a).zip(b) {
            let (x, y, z) = (self.b.use_var(a), self.b.use_var(b), self.b.use_var(acc));
            let r = self.b.ins().fma(x, y, z);
            self.b.def_var(acc, r);
        }
    }
}
