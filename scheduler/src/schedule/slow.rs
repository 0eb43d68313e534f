//! The operators of a kernel's statement that hold a CPE for many cycles each: library calls
//! (exponentials, logarithms, powers), divisions and square roots. They cost the same per
//! element whether or not the rest of the statement runs in vectors (code generation charges
//! a vector division per lane, and calls the library per element), so they bound a kernel's
//! compute from below beside its one instruction per point. Code generation charges each as
//! classified here (`swflow_codegen::cost`, which tests that the two agree).

use swflow_frontend::ir::{BinaryOp, DType, UnaryOp};

use crate::loops::{Expr, Kernel, Program};
use crate::target::Target;

/// Counts of slow operators.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slow {
    pub calls: u32,
    pub div: u32,
    pub sqrt: u32,
}

impl std::ops::Add for Slow {
    type Output = Slow;
    fn add(self, o: Slow) -> Slow {
        Slow {
            calls: self.calls + o.calls,
            div: self.div + o.div,
            sqrt: self.sqrt + o.sqrt,
        }
    }
}

impl Slow {
    /// Cycles they hold a CPE on `target`.
    pub fn cycles(self, target: &Target) -> f64 {
        let t = &target.timing;
        self.calls as f64 * t.call_cycles + self.div as f64 * t.div_cycles + self.sqrt as f64 * t.sqrt_cycles
    }
}

/// `op` on a float (`float`) or integer operand (a sigmoid is `1 / (1 + exp(-a))`).
pub fn unary(op: UnaryOp, float: bool) -> Slow {
    if !float {
        return Slow::default();
    }
    Slow {
        calls: u32::from(op.calls_library()),
        div: u32::from(matches!(op, UnaryOp::Sigmoid | UnaryOp::Recip)),
        sqrt: u32::from(op == UnaryOp::Sqrt),
    }
}

/// `op` on float (`float`) or integer operands: integer division is done in software and
/// counts as a division.
pub fn binary(op: BinaryOp, float: bool) -> Slow {
    let call = Slow {
        calls: 1,
        ..Slow::default()
    };
    let div = Slow {
        div: 1,
        ..Slow::default()
    };
    match op {
        BinaryOp::Pow => call,
        BinaryOp::Rem if float => call,
        BinaryOp::Div | BinaryOp::Rem => div,
        _ => Slow::default(),
    }
}

/// The slow operators of one evaluation of `e` in kernel `k` of `p`.
pub fn of(e: &Expr, k: &Kernel, p: &Program) -> Slow {
    let float = |d: DType| matches!(d, DType::F32 | DType::F64);
    match e {
        Expr::Load(_) | Expr::Const(_) | Expr::Acc => Slow::default(),
        Expr::Unary(op, a) => unary(*op, float(dtype(a, k, p))) + of(a, k, p),
        Expr::Binary(op, a, b) => binary(*op, float(dtype(a, k, p))) + of(a, k, p) + of(b, k, p),
        Expr::Select(c, a, b) => of(c, k, p) + of(a, k, p) + of(b, k, p),
        Expr::Cast(_, a) => of(a, k, p),
    }
}

/// The element type of `e`'s value.
fn dtype(e: &Expr, k: &Kernel, p: &Program) -> DType {
    match e {
        Expr::Load(a) => p.tensor(k.operands[a.operand]).ty.dtype,
        Expr::Const(s) => s.dtype(),
        Expr::Acc => p.tensor(k.operands[k.stmt.target.operand]).ty.dtype,
        Expr::Cast(d, _) => *d,
        Expr::Unary(_, a) | Expr::Select(_, a, _) => dtype(a, k, p),
        Expr::Binary(BinaryOp::Less | BinaryOp::Greater | BinaryOp::Equal, ..) => DType::Bool,
        Expr::Binary(_, a, _) => dtype(a, k, p),
    }
}
