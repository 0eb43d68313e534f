//! Text form of the loop IR.
//!
//! ```text
//! kernel conv1 = conv @"conv1" {
//!   tensors y: f32[1,64,112,112], xp: f32[1,3,230,230], w: f32[64,3,7,7]
//!   loops n:1, g:1, m:64, o0:112, o1:112 | c:3, k0:7, k1:7
//!   y[n, m + 64*g, o0, o1] sum(0.0)= (xp[n, c + 3*g, 2*o0 + k0, 2*o1 + k1] * w[m + 64*g, c, k0, k1])
//! }
//! ```
//! Loops after `|` are reduction loops. A kernel with producers fused into it lists its ops in
//! the order they are computed and names the fused nodes: `kernel r = add+relu fuses "a" {`.
//! A guarded read names the value of points outside its tensor after `else`:
//! `xp[n, c, o0 + k0 - 1 else 0.0]`. A reduction's epilogue follows its statement as `then <expr>`, where `acc` is the reduced
//! value: `y[n, m] sum(0.0)= (a[n, k] * w[k, m])` / `then relu((acc + b[m]))`. A reduction
//! that also keeps its reduced value names the tensor on the next line: `keep z`.
//! Tensor names print bare when they are made of `[A-Za-z0-9_./]` (not starting with a
//! digit), quoted otherwise. [`super::parse_kernel`] reads kernels and schedules back.

use std::fmt::Write;

use super::{Access, Affine, Expr, Index, Kernel, LoopKind, Program, Scalar, TensorKind};
use swflow_frontend::ir::ReduceKind;

/// Names made of these characters (and not starting with a digit) print without quotes.
pub(super) fn is_bare(n: &str) -> bool {
    !n.is_empty()
        && !n.starts_with(|c: char| c.is_ascii_digit())
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/'))
}

/// A tensor name as the text form writes it (quoted unless bare).
pub fn quoted_name(n: &str) -> String {
    if is_bare(n) {
        n.to_string()
    } else {
        format!("{n:?}")
    }
}

fn affine(a: &Affine, k: &Kernel) -> String {
    let mut s = String::new();
    for &(l, c) in &a.terms {
        let v = &k.loops[l].name;
        let term = match c {
            1 => v.clone(),
            -1 => format!("-{v}"),
            c => format!("{c}*{v}"),
        };
        if s.is_empty() {
            s = term;
        } else if let Some(neg) = term.strip_prefix('-') {
            let _ = write!(s, " - {neg}");
        } else {
            let _ = write!(s, " + {term}");
        }
    }
    match (s.is_empty(), a.offset) {
        (true, o) => o.to_string(),
        (false, 0) => s,
        (false, o) if o < 0 => format!("{s} - {}", -o),
        (false, o) => format!("{s} + {o}"),
    }
}

fn access(a: &Access, k: &Kernel, p: &Program) -> String {
    let idx: Vec<String> = a
        .index
        .iter()
        .map(|i| match i {
            Index::Affine(x) => affine(x, k),
            Index::Gathered { access: inner, extent } => format!("gather({}, {extent})", access(inner, k, p)),
        })
        .collect();
    let pad = a.pad.map(|v| format!(" else {}", scalar(v))).unwrap_or_default();
    format!(
        "{}[{}{pad}]",
        quoted_name(&p.tensor(k.operands[a.operand]).name),
        idx.join(", ")
    )
}

fn scalar(s: Scalar) -> String {
    match s {
        Scalar::F32(v) => format!("{v:?}"),
        Scalar::F64(v) => format!("{v:?}f64"),
        Scalar::I64(v) => format!("{v}i64"),
        Scalar::Bool(v) => v.to_string(),
    }
}

fn expr(e: &Expr, k: &Kernel, p: &Program) -> String {
    match e {
        Expr::Load(a) => access(a, k, p),
        Expr::Const(s) => scalar(*s),
        Expr::Acc => "acc".to_string(),
        Expr::Unary(u, a) => format!("{}({})", u.name(), expr(a, k, p)),
        Expr::Binary(b, x, y) => {
            let infix = match b.name() {
                "add" => Some("+"),
                "sub" => Some("-"),
                "mul" => Some("*"),
                "div" => Some("/"),
                _ => None,
            };
            match infix {
                Some(op) => format!("({} {op} {})", expr(x, k, p), expr(y, k, p)),
                None => format!("{}({}, {})", b.name(), expr(x, k, p), expr(y, k, p)),
            }
        }
        Expr::Select(c, a, b) => format!("select({}, {}, {})", expr(c, k, p), expr(a, k, p), expr(b, k, p)),
        Expr::Cast(d, a) => format!("cast<{d}>({})", expr(a, k, p)),
    }
}

/// One kernel, with its schedule when it has one.
pub fn print_kernel(k: &Kernel, p: &Program) -> String {
    let mut s = String::new();
    let origin = k.origin.as_ref().map(|o| format!(" @{o:?}")).unwrap_or_default();
    let fused = if k.fused.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = k.fused.iter().map(|n| format!("{n:?}")).collect();
        format!(" fuses {}", names.join(", "))
    };
    let _ = writeln!(s, "kernel {} = {}{origin}{fused} {{", quoted_name(&k.name), k.op);
    let tensors: Vec<String> = k
        .operands
        .iter()
        .map(|&t| format!("{}: {}", quoted_name(&p.tensor(t).name), p.tensor(t).ty))
        .collect();
    let _ = writeln!(s, "  tensors {}", tensors.join(", "));
    let par: Vec<String> = k
        .loops
        .iter()
        .filter(|l| l.kind == LoopKind::Parallel)
        .map(|l| format!("{}:{}", l.name, l.extent))
        .collect();
    let red: Vec<String> = k
        .loops
        .iter()
        .filter(|l| l.kind == LoopKind::Reduce)
        .map(|l| format!("{}:{}", l.name, l.extent))
        .collect();
    let reds = if red.is_empty() {
        String::new()
    } else {
        format!(" | {}", red.join(", "))
    };
    let _ = writeln!(s, "  loops {}{reds}", par.join(", "));
    let assign = match &k.stmt.reduce {
        None => "=".to_string(),
        Some(r) => {
            let kind = match r.kind {
                ReduceKind::Sum => "sum",
                ReduceKind::Max => "max",
                ReduceKind::Min => "min",
                ReduceKind::Prod => "prod",
            };
            format!("{kind}({})=", scalar(r.init))
        }
    };
    let _ = writeln!(
        s,
        "  {} {assign} {}",
        access(&k.stmt.target, k, p),
        expr(&k.stmt.value, k, p)
    );
    if let Some(e) = &k.stmt.epilogue {
        let _ = writeln!(s, "  then {}", expr(e, k, p));
    }
    if let Some(a) = &k.stmt.keep {
        let _ = writeln!(s, "  keep {}", quoted_name(&p.tensor(k.operands[a.operand]).name));
    }
    if let Some(sched) = &k.schedule {
        s.push_str(&sched.describe(k, p));
    }
    s.push_str("}\n");
    s
}

/// The whole program: tensors, then kernels in order.
pub fn print_program(p: &Program) -> String {
    let mut s = format!("program {:?} {{\n", p.name);
    for t in &p.tensors {
        let kind = match &t.kind {
            TensorKind::Input => "input".to_string(),
            TensorKind::Const(_) => "const".to_string(),
            TensorKind::Temp => "temp".to_string(),
            TensorKind::View(of) => format!("view of {}", quoted_name(&p.tensor(*of).name)),
        };
        let _ = writeln!(s, "  tensor {}: {} {kind}", quoted_name(&t.name), t.ty);
    }
    for (n, t) in &p.outputs {
        let _ = writeln!(s, "  output {n:?} = {}", quoted_name(&p.tensor(*t).name));
    }
    s.push_str("}\n");
    for k in &p.kernels {
        s.push_str(&print_kernel(k, p));
    }
    s
}
