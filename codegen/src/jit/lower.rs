//! A CPE program as a Cranelift function `extern "C" fn(arg: *mut c_void)`, the kernel every
//! CPE runs.
//!
//! The function does what the C of [`crate::cpe::print_body`] does, in the same order, and
//! calls the emulator's hooks ([`swflow_emulator::native`]) where the C calls the athread
//! interface or charges: so both report the same counters and modelled time. Where a hook
//! reports a violation, the function returns at once. Every LDM element access is checked
//! against its buffer, so a kernel that indexes outside a buffer stops with a message instead
//! of writing over memory.

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, Block, FuncRef, InstBuilder, MemFlagsData, StackSlot, StackSlotData, StackSlotKind, Type, Value as Val,
};
use cranelift_frontend::{FunctionBuilder, Variable};
use swflow_frontend::ir::{BinaryOp, DType, ReduceKind, UnaryOp};
use swflow_scheduler::loops::Scalar;

mod block;
mod transpose;
mod vector;

use swflow_scheduler::schedule::share::MeshLine;
use swflow_scheduler::schedule::{LDM_BUFFER_ALIGN, PARAM_FIELD_BYTES};

use super::runtime::{Callee, Pool};
use crate::cpe::{fused_product, Array, BoxDma, BoxPad, Buf, Cond, DmaClass, Func, Half, Int, Place, Stmt, Value, Var};

/// Where a kernel's data lives in a CPE's LDM: its copy of the parameter struct at offset 0,
/// then each buffer (aligned to [`LDM_BUFFER_ALIGN`]), then the reply counters (`i32`), the
/// whole rounded up to the alignment as the C struct's size is. The scheduler's LDM
/// accounting ([`swflow_scheduler::schedule::ldm_overhead`]) counts the same.
pub struct Layout {
    pub bufs: Vec<usize>,
    pub replies: usize,
    pub bytes: usize,
}

impl Layout {
    pub fn of(f: &Func) -> Layout {
        let align = |x: usize| x.next_multiple_of(LDM_BUFFER_ALIGN);
        let mut at = align(PARAM_FIELD_BYTES * f.fields.len());
        let mut bufs = Vec::new();
        for b in &f.bufs {
            bufs.push(at);
            at = align(at + b.bytes());
        }
        Layout {
            bufs,
            replies: at,
            bytes: align(at + 4 * f.replies),
        }
    }
}

/// Builds `f` into the function of `b` (whose signature is `fn(i64)`). `funcs` are the
/// runtime functions declared in it, `pool` keeps the constants the code points to, and
/// `exact_wait` says whether a wait requires the counter to equal its count (athread) or to
/// reach it (CRTS).
pub fn lower(
    b: &mut FunctionBuilder<'_>,
    f: &Func,
    layout: &Layout,
    funcs: &HashMap<Callee, FuncRef>,
    pool: &mut Pool,
    exact_wait: bool,
) {
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let arg = b.block_params(entry)[0];
    let stop = b.create_block();
    let mut l = Lower {
        b,
        f,
        layout,
        funcs,
        pool,
        exact_wait,
        vars: Vec::new(),
        arrays: Vec::new(),
        fields: Vec::new(),
        current: HashMap::new(),
        ldm: arg,
        arg,
        stop,
        strided: HashMap::new(),
        consts: block::constant_vars(f),
        vregs: Vec::new(),
    };
    l.function();
}

struct Lower<'a, 'b> {
    b: &'a mut FunctionBuilder<'b>,
    f: &'a Func,
    layout: &'a Layout,
    funcs: &'a HashMap<Callee, FuncRef>,
    pool: &'a mut Pool,
    exact_wait: bool,
    vars: Vec<Variable>,
    /// Each local array as one variable per element (so that compute loops keep box starts
    /// and extents in registers), and a stack slot the box DMA helper reads a row from.
    arrays: Vec<(Vec<Variable>, StackSlot)>,
    /// The address of each parameter-struct field's tensor, once fetched.
    fields: Vec<Variable>,
    /// The current half's address of each double buffer.
    current: HashMap<Buf, Variable>,
    /// The LDM area's address (valid once the entry has fetched it).
    ldm: Val,
    /// The kernel's argument: the parameter struct in main memory.
    arg: Val,
    /// The block that returns from the kernel (after a violation, or at the end).
    stop: Block,
    /// LDM places of the point nest being lowered whose address a variable holds.
    strided: HashMap<*const Place, Variable>,
    /// The variables the program only ever sets to one constant.
    consts: HashMap<Var, i64>,
    /// Each vector register as `f32x4` variables.
    vregs: Vec<Vec<Variable>>,
}

const I64: Type = types::I64;

fn ty(d: DType) -> Type {
    match d {
        DType::F32 => types::F32,
        DType::F64 => types::F64,
        DType::I64 => types::I64,
        DType::Bool => types::I8,
    }
}

fn trusted() -> MemFlagsData {
    MemFlagsData::trusted()
}

impl<'f> Lower<'f, '_> {
    fn function(&mut self) {
        for v in &self.f.vars {
            let var = self.b.declare_var(I64);
            let init = self.b.ins().iconst(I64, v.init.unwrap_or(0));
            self.b.def_var(var, init);
            self.vars.push(var);
        }
        for a in &self.f.arrays {
            let row = a.dims.last().copied().unwrap_or(1).max(1);
            let slot =
                self.b
                    .create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, (8 * row) as u32, 3));
            let vars = (0..a.len())
                .map(|i| {
                    let var = self.b.declare_var(I64);
                    let v = a.values.as_ref().map_or(0, |values| values[i]);
                    let c = self.b.ins().iconst(I64, v);
                    self.b.def_var(var, c);
                    var
                })
                .collect();
            self.arrays.push((vars, slot));
        }
        for _ in &self.f.fields {
            let var = self.b.declare_var(I64);
            let zero = self.b.ins().iconst(I64, 0);
            self.b.def_var(var, zero);
            self.fields.push(var);
        }
        self.declare_vregs();
        for (i, buf) in self.f.bufs.iter().enumerate() {
            if buf.halves > 1 {
                let var = self.b.declare_var(I64);
                let zero = self.b.ins().iconst(I64, 0);
                self.b.def_var(var, zero);
                self.current.insert(Buf(i as u32), var);
            }
        }
        // The LDM area, then every buffer declared, as the C does at entry.
        let bytes = self.b.ins().iconst(I64, self.layout.bytes as i64);
        let ldm = self.call(Callee::Ldm, &[bytes])[0];
        let null = self.b.ins().icmp_imm_s(IntCC::Equal, ldm, 0);
        self.stop_if(null);
        self.ldm = ldm;
        self.declare(0, 8 * self.f.fields.len(), "para");
        for (i, buf) in self.f.bufs.iter().enumerate() {
            self.declare(self.layout.bufs[i], buf.bytes(), &buf.name);
        }
        if self.f.posts() {
            // Other CPEs' posted broadcasts count their arrivals in the reply counters.
            self.declare(self.layout.replies, 4 * self.f.replies, "reply");
        }
        let f = self.f;
        self.stmts(&f.body);
        self.b.ins().jump(self.stop, &[]);
        self.b.switch_to_block(self.stop);
        self.b.ins().return_(&[]);
        self.b.seal_all_blocks();
    }

    /// Calls a runtime function; returns its results.
    fn call(&mut self, c: Callee, args: &[Val]) -> Vec<Val> {
        let f = self.funcs[&c];
        let inst = self.b.ins().call(f, args);
        self.b.inst_results(inst).to_vec()
    }

    /// Calls a hook and returns from the kernel when it says stop.
    fn hook(&mut self, c: Callee, args: &[Val]) {
        let status = self.call(c, args)[0];
        self.stop_if(status);
    }

    /// Continues in a new block when `cond` (an integer) is zero; returns otherwise.
    fn stop_if(&mut self, cond: Val) {
        let go = self.b.create_block();
        self.b.ins().brif(cond, self.stop, &[], go, &[]);
        self.b.switch_to_block(go);
    }

    /// Stops the kernel with `message`, when `cond` holds.
    fn fail_if(&mut self, cond: Val, message: &str) {
        let fail = self.b.create_block();
        let go = self.b.create_block();
        self.b.ins().brif(cond, fail, &[], go, &[]);
        self.b.switch_to_block(fail);
        let (ptr, len) = self.pool.text(message);
        let (ptr, len) = (self.b.ins().iconst(I64, ptr), self.b.ins().iconst(I64, len));
        self.call(Callee::Fail, &[ptr, len]);
        self.b.ins().jump(self.stop, &[]);
        self.b.switch_to_block(go);
    }

    fn declare(&mut self, offset: usize, bytes: usize, name: &str) {
        let base = self.b.ins().iadd_imm_s(self.ldm, offset as i64);
        let bytes = self.b.ins().iconst(I64, bytes as i64);
        let (ptr, len) = self.pool.text(name);
        let (ptr, len) = (self.b.ins().iconst(I64, ptr), self.b.ins().iconst(I64, len));
        self.hook(Callee::Declare, &[base, bytes, ptr, len]);
    }

    fn reply(&mut self, r: usize) -> Val {
        self.b.ins().iadd_imm_s(self.ldm, (self.layout.replies + 4 * r) as i64)
    }

    fn stmts(&mut self, body: &'f [Stmt]) {
        for s in body {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &'f Stmt) {
        match s {
            Stmt::Comment(_) => {}
            Stmt::VLoad {
                reg,
                place,
                broadcast,
                aligned,
            } => self.vload(*reg, place, *broadcast, *aligned),
            Stmt::VStore { reg, place, aligned } => self.vstore(*reg, place, *aligned),
            Stmt::VStoreLanes {
                reg,
                place,
                first,
                count,
            } => self.vstore_lanes(*reg, place, first, count),
            Stmt::VLoadStrided { reg, place, stride } => self.vload_strided(*reg, place, *stride),
            Stmt::VSplat { reg, value } => self.vsplat(*reg, *value),
            Stmt::VBinary { op, dst, a, b } => self.vbinary(*op, *dst, *a, *b),
            Stmt::VUnary { op, dst, a } => self.vunary(*op, *dst, *a),
            Stmt::VFma { acc, a, b } => self.vfma(*acc, *a, *b),
            Stmt::Set(v, e) => {
                let x = self.int(e);
                self.b.def_var(self.vars[v.0 as usize], x);
            }
            Stmt::SetElem(a, index, e) => {
                let x = self.int(e);
                self.set_elem(*a, index, x);
            }
            Stmt::For {
                var,
                from,
                to,
                step,
                body,
            } => {
                if let Some((levels, body)) = self.point_nest(s) {
                    self.nest(&levels, body);
                    return;
                }
                let var = self.vars[var.0 as usize];
                let x = self.int(from);
                self.b.def_var(var, x);
                let (head, inner, exit) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
                self.b.ins().jump(head, &[]);
                self.b.switch_to_block(head);
                let (v, bound) = (self.b.use_var(var), self.int(to));
                let go = self.b.ins().icmp(IntCC::SignedLessThan, v, bound);
                self.b.ins().brif(go, inner, &[], exit, &[]);
                self.b.switch_to_block(inner);
                self.stmts(body);
                let step = self.int(step);
                let v = self.b.use_var(var);
                let next = self.b.ins().iadd(v, step);
                self.b.def_var(var, next);
                self.b.ins().jump(head, &[]);
                self.b.switch_to_block(exit);
            }
            Stmt::If { cond, then, otherwise } => {
                let c = self.cond(cond);
                let (yes, no, join) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
                self.b.ins().brif(c, yes, &[], no, &[]);
                self.b.switch_to_block(yes);
                self.stmts(then);
                self.b.ins().jump(join, &[]);
                self.b.switch_to_block(no);
                self.stmts(otherwise);
                self.b.ins().jump(join, &[]);
                self.b.switch_to_block(join);
            }
            Stmt::Charge { ops, count } => {
                let n = self.int(count);
                let ops = self.pool.ops(*ops);
                let ops = self.b.ins().iconst(I64, ops);
                self.hook(Callee::Charge, &[ops, n]);
            }
            Stmt::FetchParams => self.fetch_params(),
            Stmt::Dma(d) => self.dma(d),
            Stmt::Pad(d) => self.pad_box(d),
            Stmt::Wait { reply, count } => {
                let (r, n) = (self.reply(*reply), self.int(count));
                let exact = self.b.ins().iconst(types::I32, i64::from(self.exact_wait));
                self.hook(Callee::Wait, &[r, n, exact]);
            }
            Stmt::Broadcast {
                line,
                send,
                buf,
                half,
                offset,
                bytes,
                ..
            } => {
                let code = self.b.ins().iconst(types::I32, i64::from(line.code()));
                let at = self.buffer_at(*buf, half, offset);
                let n = self.int(bytes);
                let callee = if *send { Callee::RegSend } else { Callee::RegRecv };
                self.hook(callee, &[code, at, n]);
            }
            Stmt::Post {
                line,
                buf,
                half,
                offset,
                bytes,
                reply,
                ..
            } => {
                let code = self.b.ins().iconst(types::I32, i64::from(line.code()));
                let at = self.buffer_at(*buf, half, offset);
                let n = self.int(bytes);
                let reply = self.reply_at(reply);
                self.hook(Callee::RmaPost, &[code, at, n, reply]);
            }
            Stmt::ArrivalWait { line, reply, count } => {
                let code = self.b.ins().iconst(types::I32, i64::from(line.code()));
                let reply = self.reply_at(reply);
                let n = self.int(count);
                self.hook(Callee::RmaWait, &[code, reply, n]);
            }
            Stmt::Sync { line } => {
                let scope = match line {
                    MeshLine::Mesh => 2,
                    l => i64::from(l.code()),
                };
                let scope = self.b.ins().iconst(types::I32, scope);
                self.hook(Callee::Sync, &[scope]);
            }
            Stmt::SelectHalf { buf, var, .. } => {
                let h = self.b.use_var(self.vars[var.0 as usize]);
                let base = self.half_base(*buf, h);
                self.b.def_var(self.current[buf], base);
            }
            Stmt::Store { place, value } => {
                let v = self.value(value);
                let addr = self.place_addr(place);
                self.b.ins().store(trusted(), v, addr, 0);
            }
            Stmt::Fold {
                kind,
                dtype,
                place,
                value,
            } => self.fold(*kind, *dtype, place, value),
        }
    }

    /// Zeroes the reply counters, gets the parameter struct into LDM and waits for it, then
    /// reads each field's address.
    fn fetch_params(&mut self) {
        let zero = self.b.ins().iconst(types::I32, 0);
        for r in 0..self.f.replies {
            let at = self.reply(r);
            self.b.ins().store(trusted(), zero, at, 0);
        }
        let bytes = 8 * self.f.fields.len() as i64;
        let get = self.b.ins().iconst(types::I32, 0);
        let len = self.b.ins().iconst(I64, bytes);
        let reply = self.reply(0);
        let none = self.b.ins().iconst(I64, 0);
        self.hook(Callee::Dma, &[get, self.arg, self.ldm, len, reply, none, none]);
        let one = self.b.ins().iconst(I64, 1);
        let exact = self.b.ins().iconst(types::I32, i64::from(self.exact_wait));
        let reply = self.reply(0);
        self.hook(Callee::Wait, &[reply, one, exact]);
        for i in 0..self.f.fields.len() {
            let addr = self.b.ins().load(I64, trusted(), self.ldm, (8 * i) as i32);
            self.b.def_var(self.fields[i], addr);
        }
    }

    /// Sets the CPE's DMA class, as the C's `SWFLOW_DMA_CLASS`.
    fn dma_class(&mut self, class: DmaClass) {
        let code = self.b.ins().iconst(types::I32, i64::from(class.code()));
        self.hook(Callee::DmaClass, &[code]);
    }

    /// A box DMA; one of another class than data is bracketed by class changes, as in the C.
    fn dma(&mut self, d: &BoxDma) {
        if d.class != DmaClass::Data {
            self.dma_class(d.class);
        }
        self.dma_box(d);
        if d.class != DmaClass::Data {
            self.dma_class(DmaClass::Data);
        }
    }

    fn dma_box(&mut self, d: &BoxDma) {
        let buf = self.f.buf(d.buf);
        let ldm = self.buffer_at(d.buf, &d.half, &d.offset);
        let rank = self.f.array(d.shape).len();
        let shape = self.spill_row(d.shape, &None, rank);
        let (start, extent) = (
            self.spill_row(d.start, &d.row, rank),
            self.spill_row(d.extent, &d.row, rank),
        );
        let rank = rank as i64;
        let main = self.b.use_var(self.fields[d.field.0 as usize]);
        let rank = self.b.ins().iconst(I64, rank);
        let elem = self.b.ins().iconst(I64, buf.dtype.size_bytes() as i64);
        let reply = self.reply(d.reply);
        let issued = if d.padded {
            self.call(
                Callee::DmaBoxPadded,
                &[ldm, main, rank, shape, start, extent, elem, reply],
            )[0]
        } else {
            let put = self.b.ins().iconst(types::I32, i64::from(d.put));
            self.call(
                Callee::DmaBox,
                &[put, ldm, main, rank, shape, start, extent, elem, reply],
            )[0]
        };
        let failed = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, issued, 0);
        self.stop_if(failed);
        let var = self.vars[d.issued.0 as usize];
        let before = self.b.use_var(var);
        let after = self.b.ins().iadd(before, issued);
        self.b.def_var(var, after);
    }

    fn pad_box(&mut self, d: &BoxPad) {
        let buf = self.f.buf(d.buf);
        let ldm = self.buffer_at(d.buf, &d.half, &d.offset);
        let elem = self.b.ins().iconst(I64, buf.dtype.size_bytes() as i64);
        let rank = self.f.array(d.shape).len();
        let shape = self.spill_row(d.shape, &None, rank);
        let start = self.spill_row(d.start, &d.row, rank);
        let extent = self.spill_row(d.extent, &d.row, rank);
        let rank = self.b.ins().iconst(I64, rank as i64);
        let pad = self.b.ins().iconst(I64, scalar_bits(d.pad));
        let lanes = self.b.ins().iconst(I64, self.f.lanes as i64);
        let status = self.call(Callee::PadBox, &[ldm, rank, shape, start, extent, elem, pad, lanes])[0];
        let failed = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, status, 0);
        self.stop_if(failed);
    }

    /// The address of the row `row` of array `a` (of `rank` values), spilled to its stack
    /// slot for a helper that reads it from memory.
    fn spill_row(&mut self, a: Array, row: &Option<Int>, rank: usize) -> Val {
        for i in 0..rank {
            let index: Vec<Int> = row.iter().cloned().chain([Int::Const(i as i64)]).collect();
            let v = self.elem(a, &index);
            self.b
                .ins()
                .stack_store(I64, v, self.arrays[a.0 as usize].1, (8 * i) as i32);
        }
        self.b.ins().stack_addr(I64, self.arrays[a.0 as usize].1, 0)
    }

    /// The address of buffer `buf`, or of the half of it that `half` names.
    fn buffer_base(&mut self, buf: Buf, half: &Half) -> Val {
        match half {
            Half::Single => self
                .b
                .ins()
                .iadd_imm_s(self.ldm, self.layout.bufs[buf.0 as usize] as i64),
            Half::Current => self.b.use_var(self.current[&buf]),
            Half::At(h) => {
                let h = self.int(h);
                self.half_base(buf, h)
            }
        }
    }

    /// The address `offset` elements into buffer `buf` (or the half of it that `half`
    /// names), or its start.
    fn buffer_at(&mut self, buf: Buf, half: &Half, offset: &Option<Int>) -> Val {
        let base = self.buffer_base(buf, half);
        let Some(offset) = offset else { return base };
        let elements = self.int(offset);
        let bytes = self
            .b
            .ins()
            .imul_imm_s(elements, self.f.buf(buf).dtype.size_bytes() as i64);
        self.b.ins().iadd(base, bytes)
    }

    /// The address of the reply counter at index `r`, computed.
    fn reply_at(&mut self, r: &Int) -> Val {
        let r = self.int(r);
        let bytes = self.b.ins().imul_imm_s(r, 4);
        let base = self.b.ins().iadd_imm_s(self.ldm, self.layout.replies as i64);
        self.b.ins().iadd(base, bytes)
    }

    /// The address of half `h` of buffer `buf`.
    fn half_base(&mut self, buf: Buf, h: Val) -> Val {
        let b = self.f.buf(buf);
        let half = (b.elements * b.dtype.size_bytes()) as i64;
        let base = self
            .b
            .ins()
            .iadd_imm_s(self.ldm, self.layout.bufs[buf.0 as usize] as i64);
        let off = self.b.ins().imul_imm_s(h, half);
        self.b.ins().iadd(base, off)
    }

    /// The variables an element of local array `a` may be, with the condition choosing each:
    /// one with no condition when every index is a constant; else one per value of the
    /// first index (the row of a `[2][rank]` array), the rest being constants.
    fn elem_vars(&mut self, a: Array, index: &[Int]) -> Vec<(Option<Val>, Variable)> {
        let dims = self.f.array(a).dims.clone();
        let consts: Option<Vec<i64>> = index
            .iter()
            .map(|i| match i {
                Int::Const(c) => Some(*c),
                _ => None,
            })
            .collect();
        let flat = |idx: &[i64]| idx.iter().zip(&dims).fold(0, |f, (&i, &d)| f * d as i64 + i) as usize;
        if let Some(idx) = consts {
            return vec![(None, self.arrays[a.0 as usize].0[flat(&idx)])];
        }
        let rest: Vec<i64> = index[1..]
            .iter()
            .map(|i| match i {
                Int::Const(c) => *c,
                _ => unreachable!("only the row of a local array is computed"),
            })
            .collect();
        let row = self.int(&index[0]);
        (0..dims[0] as i64)
            .map(|r| {
                let idx: Vec<i64> = [r].into_iter().chain(rest.iter().copied()).collect();
                let is = self.b.ins().icmp_imm_s(IntCC::Equal, row, r);
                (Some(is), self.arrays[a.0 as usize].0[flat(&idx)])
            })
            .collect()
    }

    /// An element of a local array.
    fn elem(&mut self, a: Array, index: &[Int]) -> Val {
        let vars = self.elem_vars(a, index);
        let mut v = self.b.use_var(vars[0].1);
        for &(is, var) in &vars[1..] {
            let x = self.b.use_var(var);
            v = self.b.ins().select(is.expect("a chosen row"), x, v);
        }
        v
    }

    fn set_elem(&mut self, a: Array, index: &[Int], x: Val) {
        for (is, var) in self.elem_vars(a, index) {
            let new = match is {
                None => x,
                Some(is) => {
                    let old = self.b.use_var(var);
                    self.b.ins().select(is, x, old)
                }
            };
            self.b.def_var(var, new);
        }
    }

    fn int(&mut self, e: &Int) -> Val {
        match e {
            Int::Const(c) => self.b.ins().iconst(I64, *c),
            Int::Var(v) => self.b.use_var(self.vars[v.0 as usize]),
            Int::Cpe => self.call(Callee::CpeId, &[])[0],
            Int::Elem(a, index) => self.elem(*a, index),
            Int::Add(a, b) => {
                let (a, b) = (self.int(a), self.int(b));
                self.b.ins().iadd(a, b)
            }
            Int::Sub(a, b) => {
                let (a, b) = (self.int(a), self.int(b));
                self.b.ins().isub(a, b)
            }
            Int::Mul(a, b) => {
                let (a, b) = (self.int(a), self.int(b));
                self.b.ins().imul(a, b)
            }
            Int::Div(a, b) | Int::Rem(a, b) => {
                let x = self.int(a);
                match **b {
                    Int::Const(d) => {
                        assert!(d > 0, "CPE programs divide by positive constants");
                        if matches!(e, Int::Div(..)) {
                            self.b.ins().sdiv_imm_s(x, d)
                        } else {
                            self.b.ins().srem_imm_s(x, d)
                        }
                    }
                    _ => {
                        let d = self.int(b);
                        let bad = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, d, 1);
                        self.fail_if(bad, "a division by a divisor that is not positive");
                        if matches!(e, Int::Div(..)) {
                            self.b.ins().sdiv(x, d)
                        } else {
                            self.b.ins().srem(x, d)
                        }
                    }
                }
            }
            Int::Min(a, b) => {
                let (a, b) = (self.int(a), self.int(b));
                self.b.ins().smin(a, b)
            }
            Int::Gather(v, extent) => {
                let pos = self.value(v);
                let extent = *extent as i64;
                let negative = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, pos, 0);
                let wrapped = self.b.ins().iadd_imm_s(pos, extent);
                let pos = self.b.ins().select(negative, wrapped, pos);
                let outside = self.b.ins().icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, pos, extent);
                self.fail_if(outside, "gather index out of range");
                pos
            }
        }
    }

    fn cond(&mut self, c: &Cond) -> Val {
        match c {
            Cond::Lt(a, b) => {
                let (a, b) = (self.int(a), self.int(b));
                self.b.ins().icmp(IntCC::SignedLessThan, a, b)
            }
            Cond::Eq(a, b) => {
                let (a, b) = (self.int(a), self.int(b));
                self.b.ins().icmp(IntCC::Equal, a, b)
            }
            Cond::All(cs) => {
                let mut all = self.b.ins().iconst(types::I8, 1);
                for c in cs {
                    let c = self.cond(c);
                    all = self.b.ins().band(all, c);
                }
                all
            }
        }
    }
}

impl Lower<'_, '_> {
    /// The address of `p`, after its checks: an LDM index inside its buffer, a main-memory
    /// access through the emulator's direct-access hook.
    fn place_addr(&mut self, p: &Place) -> Val {
        if let Some(&var) = self.strided.get(&(p as *const Place)) {
            return self.b.use_var(var);
        }
        match p {
            Place::Ldm { buf, half, index } => {
                let b = self.f.buf(*buf);
                let (elements, size) = (b.elements as i64, b.dtype.size_bytes() as i64);
                let message = format!("an access outside LDM buffer '{}'", b.name);
                let i = self.int(index);
                let outside = self.b.ins().icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, i, elements);
                self.fail_if(outside, &message);
                let base = self.buffer_base(*buf, half);
                let off = self.b.ins().imul_imm_s(i, size);
                self.b.ins().iadd(base, off)
            }
            Place::Main { field, index, write } => {
                let size = self.f.field(*field).dtype.size_bytes() as i64;
                let i = self.int(index);
                let base = self.b.use_var(self.fields[field.0 as usize]);
                let off = self.b.ins().imul_imm_s(i, size);
                let addr = self.b.ins().iadd(base, off);
                let bytes = self.b.ins().iconst(I64, size);
                let write = self.b.ins().iconst(types::I32, i64::from(*write));
                self.hook(Callee::Direct, &[addr, bytes, write]);
                addr
            }
        }
    }

    fn dtype_of_place(&self, p: &Place) -> DType {
        match p {
            Place::Ldm { buf, .. } => self.f.buf(*buf).dtype,
            Place::Main { field, .. } => self.f.field(*field).dtype,
        }
    }

    /// `place = fold(place, value)`. As in the C, a float sum or product (`t += v`) evaluates
    /// the place once; the other folds (`t = op(t, v)`) evaluate it twice, which for a direct
    /// access is two checked accesses.
    fn fold(&mut self, kind: ReduceKind, d: DType, place: &Place, value: &Value) {
        if let Some((a, b)) = fused_product(kind, d, value) {
            let (a, b) = (self.value(a), self.value(b));
            let addr = self.place_addr(place);
            let old = self.b.ins().load(ty(d), trusted(), addr, 0);
            let new = self.b.ins().fma(a, b, old);
            self.b.ins().store(trusted(), new, addr, 0);
            return;
        }
        let v = self.value(value);
        let addr = self.place_addr(place);
        let old = self.b.ins().load(ty(d), trusted(), addr, 0);
        let new = match kind {
            ReduceKind::Sum => self.binary(BinaryOp::Add, d, old, v),
            ReduceKind::Prod => self.binary(BinaryOp::Mul, d, old, v),
            ReduceKind::Max => self.binary(BinaryOp::Max, d, old, v),
            ReduceKind::Min => self.binary(BinaryOp::Min, d, old, v),
        };
        let compound = matches!(kind, ReduceKind::Sum | ReduceKind::Prod) && d != DType::I64;
        let addr = if compound || matches!(place, Place::Ldm { .. }) {
            addr
        } else {
            self.place_addr(place)
        };
        self.b.ins().store(trusted(), new, addr, 0);
    }

    fn value(&mut self, v: &Value) -> Val {
        match v {
            Value::Load(p) => {
                let d = self.dtype_of_place(p);
                let addr = self.place_addr(p);
                self.b.ins().load(ty(d), trusted(), addr, 0)
            }
            Value::Const(c) => self.constant(*c),
            Value::Unary(op, d, a) => {
                let a = self.value(a);
                self.unary(*op, *d, a)
            }
            Value::Binary(op, d, a, b) => {
                let (a, b) = (self.value(a), self.value(b));
                self.binary(*op, *d, a, b)
            }
            Value::Select(c, a, b) => {
                let c = self.value(c);
                if has_effects(a) || has_effects(b) {
                    // Only the chosen side runs, as in the C: its accesses are what count.
                    let t = self.value_type(a);
                    let (yes, no, join) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
                    self.b.append_block_param(join, t);
                    self.b.ins().brif(c, yes, &[], no, &[]);
                    self.b.switch_to_block(yes);
                    let x = self.value(a);
                    self.b.ins().jump(join, &[x.into()]);
                    self.b.switch_to_block(no);
                    let y = self.value(b);
                    self.b.ins().jump(join, &[y.into()]);
                    self.b.switch_to_block(join);
                    self.b.block_params(join)[0]
                } else {
                    let (x, y) = (self.value(a), self.value(b));
                    self.b.ins().select(c, x, y)
                }
            }
            Value::Cast(from, to, a) => {
                let a = self.value(a);
                self.cast(*from, *to, a)
            }
            Value::Index(e) => self.int(e),
        }
    }

    fn value_type(&self, v: &Value) -> Type {
        match v {
            Value::Load(p) => ty(self.dtype_of_place(p)),
            Value::Const(c) => ty(c.dtype()),
            Value::Unary(_, d, _) => ty(*d),
            Value::Binary(op, d, _, _) => match op.is_comparison() {
                true => types::I8,
                false => ty(*d),
            },
            Value::Select(_, a, _) => self.value_type(a),
            Value::Cast(_, to, _) => ty(*to),
            Value::Index(_) => I64,
        }
    }

    fn constant(&mut self, c: Scalar) -> Val {
        match c {
            Scalar::F32(v) => self.b.ins().f32const(v),
            Scalar::F64(v) => self.b.ins().f64const(v),
            Scalar::I64(v) => self.b.ins().iconst(I64, v),
            Scalar::Bool(v) => self.b.ins().iconst(types::I8, i64::from(v)),
        }
    }

    fn float(&mut self, d: DType, v: f64) -> Val {
        match d {
            DType::F32 => self.b.ins().f32const(v as f32),
            _ => self.b.ins().f64const(v),
        }
    }

    /// A libm routine of the element type (`expf` for f32, `exp` for f64).
    fn libm(&mut self, name: &'static str, d: DType, args: &[Val]) -> Val {
        self.call(Callee::Libm(name, d == DType::F32, args.len() as u8), args)[0]
    }

    fn unary(&mut self, op: UnaryOp, d: DType, a: Val) -> Val {
        match d {
            DType::F32 | DType::F64 => self.float_unary(op, d, a),
            DType::I64 => {
                let zero = self.b.ins().iconst(I64, 0);
                match op {
                    UnaryOp::Neg => self.b.ins().ineg(a),
                    UnaryOp::Abs => self.b.ins().iabs(a),
                    UnaryOp::Sign => {
                        let pos = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, a, 0);
                        let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, a, 0);
                        let diff = self.b.ins().isub(pos, neg);
                        self.b.ins().sextend(I64, diff)
                    }
                    UnaryOp::Relu => self.b.ins().smax(a, zero),
                    UnaryOp::Not => {
                        let z = self.b.ins().icmp_imm_s(IntCC::Equal, a, 0);
                        self.b.ins().uextend(I64, z)
                    }
                    // Through double, as the C's implicit conversions do.
                    _ => {
                        let x = self.b.ins().fcvt_from_sint(types::F64, a);
                        let y = self.float_unary(op, DType::F64, x);
                        self.b.ins().fcvt_to_sint_sat(I64, y)
                    }
                }
            }
            DType::Bool => match op {
                UnaryOp::Not => self.b.ins().icmp_imm_s(IntCC::Equal, a, 0),
                UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sign | UnaryOp::Relu => a,
                _ => {
                    let wide = self.b.ins().uextend(I64, a);
                    let x = self.b.ins().fcvt_from_sint(types::F64, wide);
                    let y = self.float_unary(op, DType::F64, x);
                    let zero = self.b.ins().f64const(0.0);
                    self.b.ins().fcmp(FloatCC::NotEqual, y, zero)
                }
            },
        }
    }

    fn float_unary(&mut self, op: UnaryOp, d: DType, a: Val) -> Val {
        let zero = self.float(d, 0.0);
        let one = self.float(d, 1.0);
        match op {
            UnaryOp::Neg => self.b.ins().fneg(a),
            UnaryOp::Abs => self.b.ins().fabs(a),
            UnaryOp::Sign => {
                let minus = self.float(d, -1.0);
                let neg = self.b.ins().fcmp(FloatCC::LessThan, a, zero);
                let inner = self.b.ins().select(neg, minus, a);
                let pos = self.b.ins().fcmp(FloatCC::GreaterThan, a, zero);
                self.b.ins().select(pos, one, inner)
            }
            UnaryOp::Relu => {
                let neg = self.b.ins().fcmp(FloatCC::LessThan, a, zero);
                self.b.ins().select(neg, zero, a)
            }
            UnaryOp::Sigmoid => {
                let minus = self.b.ins().fneg(a);
                let e = self.libm("exp", d, &[minus]);
                let den = self.b.ins().fadd(one, e);
                self.b.ins().fdiv(one, den)
            }
            UnaryOp::Sqrt => self.b.ins().sqrt(a),
            UnaryOp::Exp => self.libm("exp", d, &[a]),
            UnaryOp::Log => self.libm("log", d, &[a]),
            UnaryOp::Erf => self.libm("erf", d, &[a]),
            UnaryOp::Tanh => self.libm("tanh", d, &[a]),
            UnaryOp::Sin => self.libm("sin", d, &[a]),
            UnaryOp::Cos => self.libm("cos", d, &[a]),
            UnaryOp::Recip => self.b.ins().fdiv(one, a),
            UnaryOp::Not => {
                let z = self.b.ins().fcmp(FloatCC::Equal, a, zero);
                let wide = self.b.ins().uextend(I64, z);
                self.b.ins().fcvt_from_sint(ty(d), wide)
            }
        }
    }

    fn binary(&mut self, op: BinaryOp, d: DType, a: Val, b: Val) -> Val {
        match d {
            DType::F32 | DType::F64 => match op {
                BinaryOp::Add => self.b.ins().fadd(a, b),
                BinaryOp::Sub => self.b.ins().fsub(a, b),
                BinaryOp::Mul => self.b.ins().fmul(a, b),
                BinaryOp::Div => self.b.ins().fdiv(a, b),
                BinaryOp::Rem => self.libm("fmod", d, &[a, b]),
                BinaryOp::Pow => self.libm("pow", d, &[a, b]),
                BinaryOp::Max | BinaryOp::Min => self.extreme(op, a, b, |l, c, x, y| l.b.ins().select(c, x, y)),
                BinaryOp::Less => self.b.ins().fcmp(FloatCC::LessThan, a, b),
                BinaryOp::Greater => self.b.ins().fcmp(FloatCC::GreaterThan, a, b),
                BinaryOp::Equal => self.b.ins().fcmp(FloatCC::Equal, a, b),
            },
            DType::I64 => match op {
                BinaryOp::Add => self.b.ins().iadd(a, b),
                BinaryOp::Sub => self.b.ins().isub(a, b),
                BinaryOp::Mul => self.b.ins().imul(a, b),
                BinaryOp::Div | BinaryOp::Rem => {
                    let zero = self.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
                    self.fail_if(zero, "integer division by zero");
                    // b == -1 is done apart: a / -1 is -a (wrapping) and a % -1 is 0.
                    let minus_one = self.b.ins().icmp_imm_s(IntCC::Equal, b, -1);
                    let one = self.b.ins().iconst(I64, 1);
                    let safe = self.b.ins().select(minus_one, one, b);
                    if op == BinaryOp::Div {
                        let q = self.b.ins().sdiv(a, safe);
                        let neg = self.b.ins().ineg(a);
                        self.b.ins().select(minus_one, neg, q)
                    } else {
                        let r = self.b.ins().srem(a, safe);
                        let zero = self.b.ins().iconst(I64, 0);
                        self.b.ins().select(minus_one, zero, r)
                    }
                }
                BinaryOp::Pow => self.call(Callee::PowI64, &[a, b])[0],
                BinaryOp::Max => self.b.ins().smax(a, b),
                BinaryOp::Min => self.b.ins().smin(a, b),
                BinaryOp::Less => self.b.ins().icmp(IntCC::SignedLessThan, a, b),
                BinaryOp::Greater => self.b.ins().icmp(IntCC::SignedGreaterThan, a, b),
                BinaryOp::Equal => self.b.ins().icmp(IntCC::Equal, a, b),
            },
            DType::Bool => match op {
                BinaryOp::Add => self.b.ins().iadd(a, b),
                BinaryOp::Sub => self.b.ins().isub(a, b),
                BinaryOp::Mul => self.b.ins().imul(a, b),
                BinaryOp::Div | BinaryOp::Rem => {
                    let zero = self.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
                    self.fail_if(zero, "integer division by zero");
                    if op == BinaryOp::Div {
                        self.b.ins().udiv(a, b)
                    } else {
                        self.b.ins().urem(a, b)
                    }
                }
                // a to the power b for a, b in {0, 1}: a, or 1 when b is 0.
                BinaryOp::Pow => {
                    let not_b = self.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
                    self.b.ins().bor(a, not_b)
                }
                BinaryOp::Max => self.b.ins().umax(a, b),
                BinaryOp::Min => self.b.ins().umin(a, b),
                BinaryOp::Less => self.b.ins().icmp(IntCC::UnsignedLessThan, a, b),
                BinaryOp::Greater => self.b.ins().icmp(IntCC::UnsignedGreaterThan, a, b),
                BinaryOp::Equal => self.b.ins().icmp(IntCC::Equal, a, b),
            },
        }
    }

    fn cast(&mut self, from: DType, to: DType, a: Val) -> Val {
        use DType::{Bool, F32, F64};
        match (from, to) {
            _ if from == to => a,
            (F32 | F64, Bool) => {
                let zero = self.float(from, 0.0);
                self.b.ins().fcmp(FloatCC::NotEqual, a, zero)
            }
            (DType::I64, Bool) => self.b.ins().icmp_imm_s(IntCC::NotEqual, a, 0),
            (F32, F64) => self.b.ins().fpromote(types::F64, a),
            (F64, F32) => self.b.ins().fdemote(types::F32, a),
            (DType::I64, F32 | F64) => self.b.ins().fcvt_from_sint(ty(to), a),
            (Bool, F32 | F64) => {
                let wide = self.b.ins().uextend(I64, a);
                self.b.ins().fcvt_from_sint(ty(to), wide)
            }
            (F32 | F64, DType::I64) => self.b.ins().fcvt_to_sint_sat(I64, a),
            (Bool, DType::I64) => self.b.ins().uextend(I64, a),
            _ => unreachable!("every pair of distinct types is covered"),
        }
    }
}

/// Whether evaluating `v` does more than compute: a checked main-memory access, or a gathered
/// position that may fail.
fn has_effects(v: &Value) -> bool {
    fn int(e: &Int) -> bool {
        match e {
            Int::Const(_) | Int::Var(_) | Int::Cpe => false,
            Int::Elem(_, index) => index.iter().any(int),
            Int::Add(a, b) | Int::Sub(a, b) | Int::Mul(a, b) | Int::Div(a, b) | Int::Rem(a, b) | Int::Min(a, b) => {
                int(a) || int(b)
            }
            Int::Gather(..) => true,
        }
    }
    match v {
        Value::Load(Place::Main { .. }) => true,
        Value::Load(Place::Ldm { index, half, .. }) => int(index) || matches!(half, Half::At(h) if int(h)),
        Value::Const(_) => false,
        Value::Index(e) => int(e),
        Value::Unary(_, _, a) | Value::Cast(_, _, a) => has_effects(a),
        Value::Binary(_, _, a, b) => has_effects(a) || has_effects(b),
        Value::Select(c, a, b) => has_effects(c) || has_effects(a) || has_effects(b),
    }
}

/// One loop of a point nest: its variable, and its bounds (which no loop of the nest changes).
type Level<'a> = (Var, &'a Int, &'a Int);

/// An LDM place of a point nest with an address variable per level, and the address step of
/// each level.
struct Strided {
    place: *const Place,
    addr: Vec<Variable>,
    step: Vec<Val>,
    /// How the index changes along each loop, where that is a known constant.
    slopes: Vec<Option<i64>>,
    elem_bytes: i64,
    /// Whether it holds f32 elements.
    f32: bool,
}

impl<'f> Lower<'f, '_> {
    /// When `s` is a nest of unit-step loops around element statements only (the compute
    /// loops of a tile), its levels and innermost body.
    fn point_nest(&self, s: &'f Stmt) -> Option<(Vec<Level<'f>>, &'f [Stmt])> {
        let mut levels = Vec::new();
        let mut body = std::slice::from_ref(s);
        while let [Stmt::For {
            var,
            from,
            to,
            step: Int::Const(1),
            body: inner,
        }] = body
        {
            levels.push((*var, from, to));
            body = inner;
        }
        let vars: Vec<Var> = levels.iter().map(|l| l.0).collect();
        let elementwise = body.iter().all(|s| matches!(s, Stmt::Store { .. } | Stmt::Fold { .. }));
        let fixed_bounds = levels.iter().all(|(_, f, t)| !uses(f, &vars) && !uses(t, &vars));
        (!levels.is_empty() && !body.is_empty() && elementwise && fixed_bounds).then_some((levels, body))
    }

    /// A point nest. LDM places whose index is affine in the nest's variables are checked once,
    /// at both ends of every dimension, and walked by address increments; the others are
    /// computed and checked at every point.
    ///
    /// The innermost loop the target's index depends on becomes the innermost loop: each
    /// target element still takes its values in the same order (the loops it does not depend
    /// on keep theirs), so the results are those of the C's order, bit for bit, while the
    /// innermost loop runs over distinct elements instead of, often, a single tap.
    fn nest(&mut self, levels: &[Level<'f>], body: &'f [Stmt]) {
        let mut levels = levels.to_vec();
        if let [Stmt::Store { place, .. } | Stmt::Fold { place, .. }] = body {
            let index = match place {
                Place::Ldm { index, .. } | Place::Main { index, .. } => index,
            };
            if let Some(p) = levels.iter().rposition(|l| uses(index, &[l.0])) {
                let level = levels.remove(p);
                levels.push(level);
            }
        }
        let levels = &levels[..];
        let vars: Vec<Var> = levels.iter().map(|l| l.0).collect();
        let from: Vec<Val> = levels.iter().map(|(_, f, _)| self.int(f)).collect();
        let to: Vec<Val> = levels.iter().map(|(_, _, t)| self.int(t)).collect();
        let exit = self.b.create_block();
        let setup = self.b.create_block();
        let mut empty = self.b.ins().iconst(types::I8, 0);
        for (f, t) in from.iter().zip(&to) {
            let none = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, *t, *f);
            empty = self.b.ins().bor(empty, none);
        }
        self.b.ins().brif(empty, exit, &[], setup, &[]);
        self.b.switch_to_block(setup);
        for (v, f) in vars.iter().zip(&from) {
            self.b.def_var(self.vars[v.0 as usize], *f);
        }
        let mut places = Vec::new();
        for s in body {
            match s {
                Stmt::Store { place, value } | Stmt::Fold { place, value, .. } => {
                    ldm_places_of_place(place, &mut places);
                    ldm_places(value, &mut places);
                }
                _ => unreachable!("point nests hold element statements only"),
            }
        }
        let mut strided = Vec::new();
        for p in places {
            if let Some(s) = self.stride(p, &vars, &from, &to) {
                strided.push(s);
            }
        }
        let fast = Fast {
            vector: vectorizable(body, &strided, vars.len() - 1),
            transpose: transpose::transposable(body, &strided, vars.len()),
        };
        let bounds: Vec<(&Int, &Int)> = levels.iter().map(|&(_, f, t)| (f, t)).collect();
        match self.block_plan(&bounds, body, &strided) {
            Some(plan) => {
                self.blocked(&plan, &from, &to, &strided, &mut |l| {
                    l.level(0, &vars, &from, &to, body, &strided, fast)
                });
                // Each loop variable ends where the plain nest leaves it.
                for (v, t) in vars.iter().zip(&to) {
                    self.b.def_var(self.vars[v.0 as usize], *t);
                }
            }
            None => self.level(0, &vars, &from, &to, body, &strided, fast),
        }
        self.b.ins().jump(exit, &[]);
        self.b.switch_to_block(exit);
    }

    /// Sets up walking `p` by address increments, after checking every index it takes over
    /// the nest; `None` when its index is not affine in the nest's variables.
    fn stride(&mut self, p: &'f Place, vars: &[Var], from: &[Val], to: &[Val]) -> Option<Strided> {
        let Place::Ldm { buf, half, index } = p else {
            return None;
        };
        if matches!(half, Half::At(h) if uses(h, vars)) {
            return None;
        }
        let slopes: Vec<Int> = vars
            .iter()
            .map(|&v| derivative(index, v).filter(|d| !uses(d, vars)))
            .collect::<Option<_>>()?;
        let b = self.f.buf(*buf);
        let (elements, size) = (b.elements as i64, b.dtype.size_bytes() as i64);
        let message = format!("an access outside LDM buffer '{}'", b.name);
        // The index at the nest's first point, and its least and greatest over the nest.
        let first = self.int(index);
        let (mut lo, mut hi) = (first, first);
        let mut step = Vec::new();
        for (i, d) in slopes.iter().enumerate() {
            let d = self.int(d);
            let last = self.b.ins().isub(to[i], from[i]);
            let last = self.b.ins().iadd_imm_s(last, -1);
            let span = self.b.ins().imul(d, last);
            let zero = self.b.ins().iconst(I64, 0);
            let (down, up) = (self.b.ins().smin(span, zero), self.b.ins().smax(span, zero));
            lo = self.b.ins().iadd(lo, down);
            hi = self.b.ins().iadd(hi, up);
            step.push(self.b.ins().imul_imm_s(d, size));
        }
        let below = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, lo, 0);
        let above = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, hi, elements);
        let outside = self.b.ins().bor(below, above);
        self.fail_if(outside, &message);
        let base = self.buffer_base(*buf, half);
        let off = self.b.ins().imul_imm_s(first, size);
        let start = self.b.ins().iadd(base, off);
        let addr: Vec<Variable> = vars.iter().map(|_| self.b.declare_var(I64)).collect();
        self.b.def_var(addr[0], start);
        let slopes = slopes.iter().map(konst).collect();
        Some(Strided {
            place: p as *const Place,
            addr,
            step,
            slopes,
            elem_bytes: size,
            f32: b.dtype == DType::F32,
        })
    }

    /// Level `i` of a point nest, and the levels inside it.
    #[allow(clippy::too_many_arguments)]
    fn level(
        &mut self,
        i: usize,
        vars: &[Var],
        from: &[Val],
        to: &[Val],
        body: &'f [Stmt],
        strided: &[Strided],
        fast: Fast,
    ) {
        let var = self.vars[vars[i].0 as usize];
        if fast.vector && i + 1 == vars.len() {
            self.vector_loop(var, to[i], body, strided);
        }
        if fast.transpose && i + 2 == vars.len() {
            self.transposed_rows(vars, from, to, body, strided);
        }
        let (head, inner, after) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let v = self.b.use_var(var);
        let go = self.b.ins().icmp(IntCC::SignedLessThan, v, to[i]);
        self.b.ins().brif(go, inner, &[], after, &[]);
        self.b.switch_to_block(inner);
        if i + 1 < vars.len() {
            self.enter(self.vars[vars[i + 1].0 as usize], from[i + 1], i + 1, strided);
            self.level(i + 1, vars, from, to, body, strided, fast);
        } else {
            for s in strided {
                self.strided.insert(s.place, s.addr[i]);
            }
            self.stmts(body);
            self.strided.clear();
        }
        self.advance(var, i, 1, strided);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(after);
    }

    /// Starts level `level` of a point nest: its variable `var` at `from`, and every place's
    /// address at the enclosing level's.
    fn enter(&mut self, var: Variable, from: Val, level: usize, strided: &[Strided]) {
        self.b.def_var(var, from);
        for s in strided {
            let a = self.b.use_var(s.addr[level - 1]);
            self.b.def_var(s.addr[level], a);
        }
    }

    /// Whether `points` more points from `var`'s value stay below `to`.
    fn fits(&mut self, var: Variable, points: i64, to: Val) -> Val {
        let v = self.b.use_var(var);
        let end = self.b.ins().iadd_imm_s(v, points);
        self.b.ins().icmp(IntCC::SignedLessThanOrEqual, end, to)
    }

    /// Moves level `level`'s variable `var` and every place's address `points` points on.
    fn advance(&mut self, var: Variable, level: usize, points: i64, strided: &[Strided]) {
        let v = self.b.use_var(var);
        let next = self.b.ins().iadd_imm_s(v, points);
        self.b.def_var(var, next);
        for s in strided {
            let a = self.b.use_var(s.addr[level]);
            let step = match points {
                1 => s.step[level],
                _ => self.b.ins().imul_imm_s(s.step[level], points),
            };
            let next = self.b.ins().iadd(a, step);
            self.b.def_var(s.addr[level], next);
        }
    }
}

/// The faster ways a point nest's innermost levels run, before the plain loops do what they
/// leave.
#[derive(Clone, Copy)]
struct Fast {
    /// The innermost level runs four points at a time ([`vectorizable`]).
    vector: bool,
    /// The two innermost levels run in transposed 4 × 4 blocks ([`transpose::transposable`]).
    transpose: bool,
}

/// Whether `e` reads any of `vars`.
fn uses(e: &Int, vars: &[Var]) -> bool {
    match e {
        Int::Const(_) | Int::Cpe => false,
        Int::Var(v) => vars.contains(v),
        Int::Elem(_, index) => index.iter().any(|i| uses(i, vars)),
        Int::Add(a, b) | Int::Sub(a, b) | Int::Mul(a, b) | Int::Div(a, b) | Int::Rem(a, b) | Int::Min(a, b) => {
            uses(a, vars) || uses(b, vars)
        }
        Int::Gather(v, _) => value_uses(v, vars),
    }
}

fn value_uses(v: &Value, vars: &[Var]) -> bool {
    match v {
        Value::Load(Place::Ldm { index, half, .. }) => {
            uses(index, vars) || matches!(half, Half::At(h) if uses(h, vars))
        }
        Value::Load(Place::Main { index, .. }) => uses(index, vars),
        Value::Const(_) => false,
        Value::Index(e) => uses(e, vars),
        Value::Unary(_, _, a) | Value::Cast(_, _, a) => value_uses(a, vars),
        Value::Binary(_, _, a, b) => value_uses(a, vars) || value_uses(b, vars),
        Value::Select(c, a, b) => value_uses(c, vars) || value_uses(a, vars) || value_uses(b, vars),
    }
}

/// How `e` changes when `v` grows by one, when that does not depend on `v` (`e` is affine in
/// `v`); `None` otherwise.
fn derivative(e: &Int, v: Var) -> Option<Int> {
    let zero = |d: &Int| matches!(d, Int::Const(0));
    Some(match e {
        Int::Const(_) | Int::Cpe => Int::Const(0),
        Int::Var(x) => Int::Const(i64::from(*x == v)),
        Int::Add(a, b) | Int::Sub(a, b) => {
            let (da, db) = (derivative(a, v)?, derivative(b, v)?);
            match (zero(&da), zero(&db), matches!(e, Int::Add(..))) {
                (_, true, _) => da,
                (true, false, true) => db,
                (true, false, false) => Int::Const(0) - db,
                (false, false, true) => da + db,
                (false, false, false) => da - db,
            }
        }
        Int::Mul(a, b) => {
            let (da, db) = (derivative(a, v)?, derivative(b, v)?);
            match (zero(&da), zero(&db)) {
                (true, true) => Int::Const(0),
                (false, true) => da * (**b).clone(),
                (true, false) => (**a).clone() * db,
                (false, false) => return None,
            }
        }
        _ if uses(e, &[v]) => return None,
        _ => Int::Const(0),
    })
}

/// The value of `e` when it is made of constants only.
fn konst(e: &Int) -> Option<i64> {
    match e {
        Int::Const(c) => Some(*c),
        Int::Add(a, b) => konst(a)?.checked_add(konst(b)?),
        Int::Sub(a, b) => konst(a)?.checked_sub(konst(b)?),
        Int::Mul(a, b) => konst(a)?.checked_mul(konst(b)?),
        _ => None,
    }
}

/// The LDM places `v` loads from (not those inside gathered positions).
fn ldm_places<'a>(v: &'a Value, out: &mut Vec<&'a Place>) {
    match v {
        Value::Load(p) => ldm_places_of_place(p, out),
        Value::Const(_) | Value::Index(_) => {}
        Value::Unary(_, _, a) | Value::Cast(_, _, a) => ldm_places(a, out),
        Value::Binary(_, _, a, b) => {
            ldm_places(a, out);
            ldm_places(b, out);
        }
        Value::Select(c, a, b) => {
            ldm_places(c, out);
            ldm_places(a, out);
            ldm_places(b, out);
        }
    }
}

fn ldm_places_of_place<'a>(p: &'a Place, out: &mut Vec<&'a Place>) {
    if matches!(p, Place::Ldm { .. }) {
        out.push(p);
    }
}

/// Lanes of the vector loops.
const LANES: i64 = 4;

/// Whether loop `along` of a point nest can run four points at a time: the body is one f32
/// store or sum, maximum or minimum into a target element that moves by one element along
/// the loop, from a value of loads that move by a constant step (or not at all), constants
/// and operations that act lane by lane exactly as on scalars.
fn vectorizable(body: &[Stmt], strided: &[Strided], along: usize) -> bool {
    // Only f32 LDM places with a constant step along the loop have a slope.
    let slope = |p: &Place| {
        strided
            .iter()
            .find(|s| std::ptr::eq(s.place, p) && s.f32)
            .and_then(|s| s.slopes[along])
    };
    match body {
        [Stmt::Store { place, value }] => slope(place) == Some(1) && lane_wise(value, &slope),
        [Stmt::Fold {
            kind,
            dtype: DType::F32,
            place,
            value,
        }] => {
            matches!(kind, ReduceKind::Sum | ReduceKind::Max | ReduceKind::Min)
                && slope(place) == Some(1)
                && lane_wise(value, &slope)
        }
        _ => false,
    }
}

/// Whether `v` is made of f32 loads that move by a constant step along the vector loop
/// (`slope` gives it), f32 constants, and operations that act lane by lane exactly as on
/// scalars.
fn lane_wise(v: &Value, slope: &dyn Fn(&Place) -> Option<i64>) -> bool {
    match v {
        Value::Load(p) => slope(p).is_some(),
        Value::Const(c) => matches!(c, Scalar::F32(_)),
        Value::Unary(op, DType::F32, a) => {
            matches!(op, UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu | UnaryOp::Sqrt) && lane_wise(a, slope)
        }
        Value::Binary(op, DType::F32, a, b) => {
            matches!(
                op,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Max | BinaryOp::Min
            ) && lane_wise(a, slope)
                && lane_wise(b, slope)
        }
        _ => false,
    }
}

/// The binary operation of a maximum or minimum fold.
fn extreme_op(kind: ReduceKind) -> BinaryOp {
    match kind {
        ReduceKind::Max => BinaryOp::Max,
        _ => BinaryOp::Min,
    }
}

fn vector_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

impl<'f> Lower<'f, '_> {
    /// Runs the innermost loop four points at a time while four remain; the scalar loop after
    /// it does the rest. Each lane computes what the scalar code computes for its point.
    fn vector_loop(&mut self, var: Variable, to: Val, body: &'f [Stmt], strided: &[Strided]) {
        let last = strided[0].addr.len() - 1;
        let (head, inner, after) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let go = self.fits(var, LANES, to);
        self.b.ins().brif(go, inner, &[], after, &[]);
        self.b.switch_to_block(inner);
        let addrs: HashMap<*const Place, (Variable, i64)> = strided
            .iter()
            .map(|s| (s.place, (s.addr[last], s.slopes[last].unwrap_or(0) * s.elem_bytes)))
            .collect();
        match &body[0] {
            Stmt::Store { place, value } => {
                let x = self.vector_value(value, &addrs);
                let at = self.b.use_var(addrs[&(place as *const Place)].0);
                self.b.ins().store(vector_flags(), x, at, 0);
            }
            Stmt::Fold { kind, place, value, .. } => {
                let at = self.b.use_var(addrs[&(place as *const Place)].0);
                let old = self.b.ins().load(types::F32X4, vector_flags(), at, 0);
                let new = match kind {
                    ReduceKind::Sum => self.lane_sum(old, value, true, &mut |l, p| {
                        let (var, step) = addrs[&(p as *const Place)];
                        let at = l.b.use_var(var);
                        l.lanes_load(at, 0, step)
                    }),
                    kind => {
                        let x = self.vector_value(value, &addrs);
                        self.vector_extreme(extreme_op(*kind), old, x)
                    }
                };
                self.b.ins().store(vector_flags(), new, at, 0);
            }
            _ => unreachable!("vectorizable bodies are one store or fold"),
        }
        self.advance(var, last, LANES, strided);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(after);
    }

    /// Four lanes of `v`: lane `j` is `v` at the `j`-th next point of the innermost loop.
    fn vector_value(&mut self, v: &Value, addrs: &HashMap<*const Place, (Variable, i64)>) -> Val {
        self.lane_value(v, true, &mut |l, p| {
            let (var, step) = addrs[&(p as *const Place)];
            let at = l.b.use_var(var);
            l.lanes_load(at, 0, step)
        })
    }

    /// Four f32 lanes from `at + offset`, the next `step` bytes further each.
    fn lanes_load(&mut self, at: Val, offset: i64, step: i64) -> Val {
        match step {
            4 => self.b.ins().load(types::F32X4, vector_flags(), at, offset as i32),
            0 => {
                let x = self.b.ins().load(types::F32, vector_flags(), at, offset as i32);
                self.b.ins().splat(types::F32X4, x)
            }
            step => {
                let x = self.b.ins().load(types::F32, vector_flags(), at, offset as i32);
                let mut vec = self.b.ins().splat(types::F32X4, x);
                for lane in 1..LANES {
                    let at_lane = (offset + step * lane) as i32;
                    let x = self.b.ins().load(types::F32, vector_flags(), at, at_lane);
                    vec = self.b.ins().insertlane(vec, x, lane as u8);
                }
                vec
            }
        }
    }

    /// `v` of a vectorizable body (see [`vectorizable`]), on four lanes or on one f32
    /// scalar; `load` gives each loaded place's value in that form.
    fn lane_value(&mut self, v: &Value, vector: bool, load: &mut dyn FnMut(&mut Self, &Place) -> Val) -> Val {
        match v {
            Value::Load(p) => load(self, p),
            Value::Const(Scalar::F32(c)) => {
                let x = self.b.ins().f32const(*c);
                match vector {
                    true => self.b.ins().splat(types::F32X4, x),
                    false => x,
                }
            }
            Value::Unary(op, _, a) => {
                let a = self.lane_value(a, vector, load);
                match (vector, op) {
                    (false, op) => self.unary(*op, DType::F32, a),
                    (true, UnaryOp::Neg) => self.b.ins().fneg(a),
                    (true, UnaryOp::Abs) => self.b.ins().fabs(a),
                    (true, UnaryOp::Sqrt) => self.b.ins().sqrt(a),
                    (true, _) => {
                        // Relu: a < 0 ? 0 : a.
                        let zero = self.b.ins().f32const(0.0);
                        let zero = self.b.ins().splat(types::F32X4, zero);
                        let neg = self.b.ins().fcmp(FloatCC::LessThan, a, zero);
                        self.vector_pick(neg, zero, a)
                    }
                }
            }
            Value::Binary(op, _, a, b) => {
                let a = self.lane_value(a, vector, load);
                let b = self.lane_value(b, vector, load);
                match (vector, op) {
                    (false, op) => self.binary(*op, DType::F32, a, b),
                    (true, BinaryOp::Add) => self.b.ins().fadd(a, b),
                    (true, BinaryOp::Sub) => self.b.ins().fsub(a, b),
                    (true, BinaryOp::Mul) => self.b.ins().fmul(a, b),
                    (true, BinaryOp::Div) => self.b.ins().fdiv(a, b),
                    (true, op) => self.vector_extreme(*op, a, b),
                }
            }
            _ => unreachable!("vectorizable values hold loads, constants and lane-wise operations"),
        }
    }

    /// `old` plus `v` on four lanes or one f32 scalar, as [`Stmt::Fold`] sums: a product is
    /// one fused multiply-add.
    fn lane_sum(&mut self, old: Val, v: &Value, vector: bool, load: &mut dyn FnMut(&mut Self, &Place) -> Val) -> Val {
        match fused_product(ReduceKind::Sum, DType::F32, v) {
            Some((a, b)) => {
                let a = self.lane_value(a, vector, load);
                let b = self.lane_value(b, vector, load);
                self.b.ins().fma(a, b, old)
            }
            None => {
                let x = self.lane_value(v, vector, load);
                self.b.ins().fadd(old, x)
            }
        }
    }

    /// Lane by lane, `mask ? x : y` (`mask` from a lane-wise comparison).
    fn vector_pick(&mut self, mask: Val, x: Val, y: Val) -> Val {
        let mask = self.b.ins().bitcast(types::F32X4, MemFlagsData::new(), mask);
        self.b.ins().bitselect(mask, x, y)
    }

    /// The max or min of [`Lower::binary`], lane by lane.
    fn vector_extreme(&mut self, op: BinaryOp, a: Val, b: Val) -> Val {
        self.extreme(op, a, b, |l, mask, x, y| l.vector_pick(mask, x, y))
    }

    /// Float max or min of scalars or vectors, `pick(cond, x, y)` choosing between them: NaN
    /// propagates (a if a is NaN, else b if b is NaN), else the larger (smaller), ties to a.
    fn extreme(&mut self, op: BinaryOp, a: Val, b: Val, pick: fn(&mut Self, Val, Val, Val) -> Val) -> Val {
        let cc = if op == BinaryOp::Max {
            FloatCC::GreaterThan
        } else {
            FloatCC::LessThan
        };
        let wins = self.b.ins().fcmp(cc, b, a);
        let r = pick(self, wins, b, a);
        let b_nan = self.b.ins().fcmp(FloatCC::Unordered, b, b);
        let r = pick(self, b_nan, b, r);
        let a_nan = self.b.ins().fcmp(FloatCC::Unordered, a, a);
        pick(self, a_nan, a, r)
    }
}

/// A constant's bits, little-endian in the low bytes of its element size.
fn scalar_bits(c: Scalar) -> i64 {
    match c {
        Scalar::F32(v) => i64::from(v.to_bits()),
        Scalar::F64(v) => v.to_bits() as i64,
        Scalar::I64(v) => v,
        Scalar::Bool(v) => i64::from(v),
    }
}
