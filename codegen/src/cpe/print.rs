//! A CPE program as C: the body of `slave/<k>_slave.c` and the members of its LDM struct.
//!
//! A box DMA of data prints as the call alone; one of another class is bracketed by
//! `SWFLOW_DMA_CLASS` lines, setting its class before and data after.

use super::{fused_product, Cond, DmaClass, Func, Half, Int, Local, Place, Stmt, Value};
use crate::cost::charge;
use crate::scalar::{binary, cast, ctype, fma, fold, literal, unary};
use crate::writer::Writer;
use swflow_frontend::ir::{BinaryOp, DType, UnaryOp};
use swflow_scheduler::loops::Scalar;
use swflow_scheduler::schedule::share::MeshLine;
use swflow_scheduler::schedule::LDM_BUFFER_ALIGN;

/// Members of the kernel's LDM struct (after `para`, before `reply`), one per line, each
/// aligned to [`LDM_BUFFER_ALIGN`] as the scheduler's LDM accounting and the JIT's layout
/// place it.
pub fn print_ldm_members(f: &Func) -> Vec<String> {
    f.bufs
        .iter()
        .map(|b| {
            let half = match b.halves {
                1 => String::new(),
                n => format!("[{n}]"),
            };
            format!(
                "{} {}{half}[{}] __attribute__((aligned({LDM_BUFFER_ALIGN}))); /* {} */",
                ctype(b.dtype),
                b.name,
                b.elements,
                b.note
            )
        })
        .collect()
}

/// The function body of kernel `func` (its LDM struct is `struct <func>_ldm`, its parameter
/// struct `struct <func>_para`).
pub fn print_body(f: &Func, func: &str) -> String {
    let mut w = Writer::new(1);
    // A pointer to a union, converted, points to each of its members (C99 6.7.2.1).
    w.line(format!(
        "struct {func}_ldm *const ldm = (struct {func}_ldm *)(void *)&swflow_ldm;"
    ));
    w.line("const long cpe = SWFLOW_CPE_ID;");
    w.line(format!("struct {func}_para para;"));
    for line in &f.decl_lines {
        let constant = line.iter().find_map(|l| match l {
            Local::Array(a) => f.array(*a).values.as_ref().map(|v| (*a, v)),
            Local::Var(_) => None,
        });
        if let Some((a, values)) = constant {
            let a = f.array(a);
            let values: Vec<String> = values.iter().map(i64::to_string).collect();
            w.line(format!(
                "const long {}[{}] = {{{}}};",
                a.name,
                a.len(),
                values.join(", ")
            ));
            continue;
        }
        let names: Vec<String> = line
            .iter()
            .map(|l| match l {
                Local::Var(v) => {
                    let v = f.var(*v);
                    match v.init {
                        Some(i) => format!("{} = {i}", v.name),
                        None => v.name.clone(),
                    }
                }
                Local::Array(a) => {
                    let a = f.array(*a);
                    let dims: String = a.dims.iter().map(|d| format!("[{d}]")).collect();
                    format!("{}{dims}", a.name)
                }
            })
            .collect();
        w.line(format!("long {};", names.join(", ")));
    }
    for regs in f.vregs.chunks(8) {
        w.line(format!("{} {};", f.vector_type(), regs.join(", ")));
    }
    w.line("");
    w.line("SWFLOW_LDM_BUFFER(&ldm->para, sizeof ldm->para, \"para\");");
    for b in &f.bufs {
        w.line(format!(
            "SWFLOW_LDM_BUFFER(ldm->{n}, sizeof ldm->{n}, \"{n}\");",
            n = b.name
        ));
    }
    let p = Printer { f };
    for s in &f.body {
        p.stmt(&mut w, s);
    }
    w.finish()
}

/// The name `swflow_slave.h` gives `c`.
fn class_name(c: DmaClass) -> &'static str {
    match c {
        DmaClass::Data => "SWFLOW_DMA_DATA",
        DmaClass::Tape => "SWFLOW_DMA_TAPE",
        DmaClass::TapeStream => "SWFLOW_DMA_TAPE_STREAM",
    }
}

struct Printer<'a> {
    f: &'a Func,
}

/// Binding strength of C operators, loosest first.
const TERNARY: u8 = 0;
const ADDITIVE: u8 = 2;
const MULTIPLICATIVE: u8 = 3;
const ATOM: u8 = 4;

impl Printer<'_> {
    fn stmt(&self, w: &mut Writer, s: &Stmt) {
        match s {
            Stmt::Comment(text) => w.line(format!("/* {text} */")),
            Stmt::Set(v, e) => w.line(format!("{} = {};", self.f.var(*v).name, self.int(e, TERNARY))),
            Stmt::SetElem(a, index, e) => {
                w.line(format!("{} = {};", self.elem(*a, index), self.int(e, TERNARY)));
            }
            Stmt::For {
                var,
                from,
                to,
                step,
                body,
            } => {
                let v = &self.f.var(*var).name;
                let step = match step {
                    Int::Const(1) => format!("{v}++"),
                    s => format!("{v} += {}", self.int(s, TERNARY)),
                };
                w.open(format!(
                    "for ({v} = {}; {v} < {}; {step}) {{",
                    self.int(from, TERNARY),
                    self.int(to, ADDITIVE)
                ));
                for s in body {
                    self.stmt(w, s);
                }
                w.close();
            }
            Stmt::If { cond, then, otherwise } => {
                w.open(format!("if ({}) {{", self.cond(cond)));
                for s in then {
                    self.stmt(w, s);
                }
                w.close();
                if !otherwise.is_empty() {
                    w.open("else {");
                    for s in otherwise {
                        self.stmt(w, s);
                    }
                    w.close();
                }
            }
            Stmt::Charge { ops, count } => {
                if let Some(c) = charge(ops, &self.int(count, TERNARY)) {
                    w.line(c);
                }
            }
            Stmt::FetchParams => {
                if self.f.posts() {
                    // Other CPEs' posted broadcasts count their arrivals in these counters.
                    w.line("SWFLOW_LDM_BUFFER((void *)ldm->reply, sizeof ldm->reply, \"reply\");");
                }
                w.open(format!("for (f = 0; f < {}; f++) {{", self.f.replies));
                w.line("ldm->reply[f] = 0;");
                w.close();
                w.line("swflow_dma(0, &ldm->para, (char *)arg, sizeof ldm->para, 0, 0, &ldm->reply[0]);");
                w.line("SWFLOW_DMA_WAIT(ldm->reply[0], 1);");
                w.line("para = ldm->para;");
                w.line("");
            }
            Stmt::Dma(d) => {
                let b = self.f.buf(d.buf);
                let row = |a| match &d.row {
                    Some(r) => format!("{}[{}]", self.f.array(a).name, self.int(r, TERNARY)),
                    None => self.f.array(a).name.clone(),
                };
                let rank = self.f.array(d.shape).len();
                let call = if d.padded {
                    String::from("swflow_dma_box_padded(")
                } else {
                    format!("swflow_dma_box({}, ", u8::from(d.put))
                };
                if d.class != DmaClass::Data {
                    w.line(format!("SWFLOW_DMA_CLASS({});", class_name(d.class)));
                }
                w.line(format!(
                    "{} += {call}{}, (char *)para.{}, {rank}, {}, {}, {}, sizeof({}), &ldm->reply[{}]);",
                    self.f.var(d.issued).name,
                    self.at_offset(d.buf, &d.half, &d.offset),
                    self.f.field(d.field).name,
                    self.f.array(d.shape).name,
                    row(d.start),
                    row(d.extent),
                    ctype(b.dtype),
                    d.reply
                ));
                if d.class != DmaClass::Data {
                    w.line(format!("SWFLOW_DMA_CLASS({});", class_name(DmaClass::Data)));
                }
            }
            Stmt::Pad(d) => {
                let t = ctype(self.f.buf(d.buf).dtype);
                let row = |a| match &d.row {
                    Some(r) => format!("{}[{}]", self.f.array(a).name, self.int(r, TERNARY)),
                    None => self.f.array(a).name.clone(),
                };
                w.line(format!(
                    "swflow_pad_box({}, {}, {}, {}, {}, sizeof({t}), &(const {t}){{{}}});",
                    self.at_offset(d.buf, &d.half, &d.offset),
                    self.f.array(d.shape).len(),
                    self.f.array(d.shape).name,
                    row(d.start),
                    row(d.extent),
                    literal(d.pad),
                ));
            }
            Stmt::Wait { reply, count } => {
                w.line(format!(
                    "SWFLOW_DMA_WAIT(ldm->reply[{reply}], {});",
                    self.int(count, TERNARY)
                ));
            }
            Stmt::Broadcast {
                line,
                send,
                root,
                buf,
                half,
                offset,
                bytes,
            } => {
                let how = if *send {
                    "SWFLOW_SHARE_SEND"
                } else {
                    "SWFLOW_SHARE_RECV"
                };
                w.line(format!(
                    "{how}({}, {}, {}, {});",
                    line.code(),
                    self.int(root, TERNARY),
                    self.at_offset(*buf, half, offset),
                    self.int(bytes, TERNARY)
                ));
            }
            Stmt::Post {
                line,
                buf,
                half,
                offset,
                bytes,
                sent,
                reply,
            } => {
                w.line(format!(
                    "SWFLOW_SHARE_POST({}, {}, {}, ldm->reply[{sent}], ldm->reply[{}]);",
                    line.code(),
                    self.at_offset(*buf, half, offset),
                    self.int(bytes, TERNARY),
                    self.int(reply, TERNARY)
                ));
            }
            Stmt::ArrivalWait { line, reply, count } => {
                w.line(format!(
                    "SWFLOW_SHARE_WAIT({}, ldm->reply[{}], {});",
                    line.code(),
                    self.int(reply, TERNARY),
                    self.int(count, TERNARY)
                ));
            }
            Stmt::Sync { line } => match line {
                MeshLine::Mesh => w.line("SWFLOW_SYNC_ALL();"),
                _ => w.line(format!("SWFLOW_SYNC_LINE({});", line.code())),
            },
            Stmt::SelectHalf { buf, var, write } => {
                let b = self.f.buf(*buf);
                w.line(format!(
                    "{}{} *const {n}_cur = ldm->{n}[{}];",
                    if *write { "" } else { "const " },
                    ctype(b.dtype),
                    self.f.var(*var).name,
                    n = b.name
                ));
            }
            Stmt::Store { place, value } => w.line(format!("{} = {};", self.place(place), self.value(value))),
            Stmt::VLoad {
                reg,
                place,
                broadcast,
                aligned,
            } => {
                let how = match (broadcast, aligned) {
                    (true, _) => "simd_loade",
                    (false, true) => "simd_load",
                    (false, false) => "simd_loadu",
                };
                w.line(format!("{how}({}, &{});", self.f.vreg(*reg), self.place(place)));
            }
            Stmt::VStore { reg, place, aligned } => {
                let how = if *aligned { "simd_store" } else { "simd_storeu" };
                w.line(format!("{how}({}, &{});", self.f.vreg(*reg), self.place(place)))
            }
            Stmt::VStoreLanes {
                reg,
                place,
                first,
                count,
            } => w.line(format!(
                "SWFLOW_VSTORE_LANES({}, &{}, {}, {}, {});",
                self.f.vreg(*reg),
                self.place(place),
                self.f.lanes,
                self.int(first, TERNARY),
                self.int(count, TERNARY)
            )),
            Stmt::VLoadStrided { reg, place, stride } => w.line(format!(
                "SWFLOW_VLOAD_STRIDED{}({}, &{}, {stride});",
                self.f.lanes,
                self.f.vreg(*reg),
                self.place(place)
            )),
            Stmt::VSplat { reg, value } => w.line(format!(
                "SWFLOW_VSPLAT({}, {});",
                self.f.vreg(*reg),
                self.value(&Value::Const(Scalar::F32(*value)))
            )),
            Stmt::VBinary { op, dst, a, b } => {
                let (dst, a, b) = (self.f.vreg(*dst), self.f.vreg(*a), self.f.vreg(*b));
                w.line(match op {
                    BinaryOp::Add => format!("{dst} = {a} + {b};"),
                    BinaryOp::Sub => format!("{dst} = {a} - {b};"),
                    BinaryOp::Mul => format!("{dst} = {a} * {b};"),
                    BinaryOp::Div => format!("{dst} = {a} / {b};"),
                    BinaryOp::Max => format!("{dst} = SWFLOW_VMAX({a}, {b});"),
                    BinaryOp::Min => format!("{dst} = SWFLOW_VMIN({a}, {b});"),
                    other => unreachable!("no vector form of {other:?}"),
                })
            }
            Stmt::VUnary { op, dst, a } => {
                let (dst, a) = (self.f.vreg(*dst), self.f.vreg(*a));
                w.line(match op {
                    UnaryOp::Sqrt => format!("{dst} = simd_vsqrts({a});"),
                    other => unreachable!("no vector form of {other:?}"),
                })
            }
            Stmt::VFma { acc, a, b } => {
                let (acc, a, b) = (self.f.vreg(*acc), self.f.vreg(*a), self.f.vreg(*b));
                w.line(format!("{acc} = simd_vmas({a}, {b}, {acc});"));
            }
            Stmt::Fold {
                kind,
                dtype,
                place,
                value,
            } => w.line(match fused_product(*kind, *dtype, value) {
                Some((a, b)) => fma(*dtype, &self.place(place), &self.value(a), &self.value(b)),
                None => fold(*kind, *dtype, &self.place(place), &self.value(value)),
            }),
        }
    }

    fn elem(&self, a: super::Array, index: &[Int]) -> String {
        let index: String = index.iter().map(|i| format!("[{}]", self.int(i, TERNARY))).collect();
        format!("{}{index}", self.f.array(a).name)
    }

    /// `e` as C, in parentheses when it binds looser than `min`.
    fn int(&self, e: &Int, min: u8) -> String {
        let (text, strength) = match e {
            Int::Const(c) => (c.to_string(), ATOM),
            Int::Var(v) => (self.f.var(*v).name.clone(), ATOM),
            Int::Cpe => ("cpe".to_string(), ATOM),
            Int::Elem(a, index) => (self.elem(*a, index), ATOM),
            Int::Add(a, b) => (
                format!("{} + {}", self.int(a, ADDITIVE), self.int(b, MULTIPLICATIVE)),
                ADDITIVE,
            ),
            Int::Sub(a, b) => (
                format!("{} - {}", self.int(a, ADDITIVE), self.int(b, MULTIPLICATIVE)),
                ADDITIVE,
            ),
            Int::Mul(a, b) => (
                format!("{} * {}", self.int(a, MULTIPLICATIVE), self.int(b, ATOM)),
                MULTIPLICATIVE,
            ),
            Int::Div(a, b) => (
                format!("{} / {}", self.int(a, MULTIPLICATIVE), self.int(b, ATOM)),
                MULTIPLICATIVE,
            ),
            Int::Rem(a, b) => (
                format!("{} % {}", self.int(a, MULTIPLICATIVE), self.int(b, ATOM)),
                MULTIPLICATIVE,
            ),
            Int::Min(a, b) => {
                let (a, b) = (self.int(a, ADDITIVE), self.int(b, ADDITIVE));
                (format!("{a} < {b} ? {a} : {b}"), TERNARY)
            }
            Int::Gather(v, extent) => (format!("swflow_gather_index({}, {extent})", self.value(v)), ATOM),
        };
        if strength < min {
            format!("({text})")
        } else {
            text
        }
    }

    fn cond(&self, c: &Cond) -> String {
        match c {
            Cond::Lt(a, b) => format!("{} < {}", self.int(a, ADDITIVE), self.int(b, ADDITIVE)),
            Cond::Eq(a, b) => format!("{} == {}", self.int(a, ADDITIVE), self.int(b, ADDITIVE)),
            Cond::All(cs) if cs.is_empty() => "1".to_string(),
            Cond::All(cs) => cs
                .iter()
                .map(|c| match c {
                    Cond::All(_) => format!("({})", self.cond(c)),
                    c => self.cond(c),
                })
                .collect::<Vec<_>>()
                .join(" && "),
        }
    }

    /// The LDM buffer (or its half) as an array.
    fn buffer(&self, buf: super::Buf, half: &Half) -> String {
        let n = &self.f.buf(buf).name;
        match half {
            Half::Single => format!("ldm->{n}"),
            Half::Current => format!("{n}_cur"),
            Half::At(h) => format!("ldm->{n}[{}]", self.int(h, TERNARY)),
        }
    }

    /// The address `offset` elements into buffer `buf` (or its half), or its start.
    fn at_offset(&self, buf: super::Buf, half: &Half, offset: &Option<Int>) -> String {
        match offset {
            Some(o) => format!("{} + {}", self.buffer(buf, half), self.int(o, MULTIPLICATIVE)),
            None => self.buffer(buf, half),
        }
    }

    fn place(&self, p: &Place) -> String {
        match p {
            Place::Ldm { buf, half, index } => format!("{}[{}]", self.buffer(*buf, half), self.int(index, TERNARY)),
            Place::Main { field, index, write } => {
                let how = if *write { "SWFLOW_GSTORE" } else { "SWFLOW_GLOAD" };
                let fd = self.f.field(*field);
                format!(
                    "{how}({}, para.{}, {})",
                    ctype(fd.dtype),
                    fd.name,
                    self.int(index, TERNARY)
                )
            }
        }
    }

    fn value(&self, v: &Value) -> String {
        match v {
            Value::Load(p) => self.place(p),
            Value::Const(c) => literal(*c),
            Value::Unary(op, d, a) => unary(*op, *d, &self.value(a)),
            Value::Binary(op, d, a, b) => binary(*op, *d, &self.value(a), &self.value(b)),
            Value::Select(c, a, b) => format!("({} ? {} : {})", self.value(c), self.value(a), self.value(b)),
            Value::Cast(from, to, a) => cast(*from, *to, &self.value(a)),
            Value::Index(e) => format!("({}){}", ctype(DType::I64), self.int(e, ATOM)),
        }
    }
}
