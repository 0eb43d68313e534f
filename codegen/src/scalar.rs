//! C types, literals and scalar operations for the element types.
//!
//! Every operation maps to the same semantics as the reference interpreter (the frontend's
//! `Num`): floats are IEEE operations or libm calls, integers go through the wrapping helpers
//! of `swflow_slave.h`, `max`/`min` propagate NaN, casts to integers saturate.

use swflow_frontend::ir::{BinaryOp, DType, ReduceKind, UnaryOp};
use swflow_scheduler::loops::Scalar;

/// The C type of an element.
pub fn ctype(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I64 => "int64_t",
        DType::Bool => "unsigned char",
    }
}

/// Suffix of the `swflow_*` helpers for a type.
fn suffix(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::I64 => "i64",
        DType::Bool => "bool",
    }
}

/// The enumerator of `enum swflow_dtype` for a type.
pub fn dtype_enum(d: DType) -> &'static str {
    match d {
        DType::F32 => "SWFLOW_F32",
        DType::F64 => "SWFLOW_F64",
        DType::I64 => "SWFLOW_I64",
        DType::Bool => "SWFLOW_BOOL",
    }
}

/// A C literal of exactly the value of `s`.
pub fn literal(s: Scalar) -> String {
    fn float(v: f64, text: String, suffix: &str) -> String {
        if v.is_nan() {
            format!("({}NAN)", if suffix.is_empty() { "(double)" } else { "" })
        } else if v.is_infinite() {
            let sign = if v < 0.0 { "-" } else { "" };
            format!("({sign}{}INFINITY)", if suffix.is_empty() { "(double)" } else { "" })
        } else {
            // Rust prints the shortest decimal that reads back as the same value.
            let text = if text.contains(['.', 'e']) {
                text
            } else {
                format!("{text}.0")
            };
            format!("{text}{suffix}")
        }
    }
    match s {
        Scalar::F32(v) => float(v as f64, format!("{v:?}"), "f"),
        Scalar::F64(v) => float(v, format!("{v:?}"), ""),
        Scalar::I64(i64::MIN) => "INT64_MIN".to_string(),
        Scalar::I64(v) => format!("INT64_C({v})"),
        Scalar::Bool(b) => (b as u8).to_string(),
    }
}

/// `op(a)` for operands of type `d`.
pub fn unary(op: UnaryOp, d: DType, a: &str) -> String {
    let s = suffix(d);
    let libm = |f: &str| match d {
        DType::F32 => format!("{f}f({a})"),
        _ => format!("{f}({a})"),
    };
    match (op, d) {
        (UnaryOp::Neg, DType::I64) => format!("swflow_neg_i64({a})"),
        // Spaced, so that a negative literal does not make `--`.
        (UnaryOp::Neg, _) => format!("(- {a})"),
        (UnaryOp::Abs, DType::I64) => format!("swflow_abs_i64({a})"),
        (UnaryOp::Abs, _) => libm("fabs"),
        (UnaryOp::Sign, _) => format!("swflow_sign_{s}({a})"),
        (UnaryOp::Relu, _) => format!("swflow_relu_{s}({a})"),
        (UnaryOp::Sigmoid, _) => format!("swflow_sigmoid_{s}({a})"),
        (UnaryOp::Sqrt, _) => libm("sqrt"),
        (UnaryOp::Exp, _) => libm("exp"),
        (UnaryOp::Log, _) => libm("log"),
        (UnaryOp::Erf, _) => libm("erf"),
        (UnaryOp::Tanh, _) => libm("tanh"),
        (UnaryOp::Sin, _) => libm("sin"),
        (UnaryOp::Cos, _) => libm("cos"),
        (UnaryOp::Recip, DType::F32) => format!("(1.0f / {a})"),
        (UnaryOp::Recip, _) => format!("(1.0 / {a})"),
        (UnaryOp::Not, _) => format!("(!{a})"),
    }
}

/// `a op b` for operands of type `d`.
pub fn binary(op: BinaryOp, d: DType, a: &str, b: &str) -> String {
    let s = suffix(d);
    let int = d == DType::I64;
    match op {
        BinaryOp::Add if int => format!("swflow_add_i64({a}, {b})"),
        BinaryOp::Sub if int => format!("swflow_sub_i64({a}, {b})"),
        BinaryOp::Mul if int => format!("swflow_mul_i64({a}, {b})"),
        BinaryOp::Div if int => format!("swflow_div_i64({a}, {b})"),
        BinaryOp::Rem if int => format!("swflow_rem_i64({a}, {b})"),
        BinaryOp::Rem if d == DType::F32 => format!("fmodf({a}, {b})"),
        BinaryOp::Rem => format!("fmod({a}, {b})"),
        BinaryOp::Pow if int => format!("swflow_pow_i64({a}, {b})"),
        BinaryOp::Add => format!("({a} + {b})"),
        BinaryOp::Sub => format!("({a} - {b})"),
        BinaryOp::Mul => format!("({a} * {b})"),
        BinaryOp::Div => format!("({a} / {b})"),
        BinaryOp::Pow if d == DType::F32 => format!("powf({a}, {b})"),
        BinaryOp::Pow => format!("pow({a}, {b})"),
        BinaryOp::Max => format!("swflow_max_{s}({a}, {b})"),
        BinaryOp::Min => format!("swflow_min_{s}({a}, {b})"),
        BinaryOp::Less => format!("({a} < {b})"),
        BinaryOp::Greater => format!("({a} > {b})"),
        BinaryOp::Equal => format!("({a} == {b})"),
    }
}

/// `a` of type `from` converted to `to`.
pub fn cast(from: DType, to: DType, a: &str) -> String {
    match (from, to) {
        _ if from == to => a.to_string(),
        (_, DType::Bool) => format!("({a} != 0)"),
        (DType::F32, DType::I64) => format!("swflow_f64_to_i64((double){a})"),
        (DType::F64, DType::I64) => format!("swflow_f64_to_i64({a})"),
        (_, to) => format!("(({}){a})", ctype(to)),
    }
}

/// The statement folding `v` into `t` for a reduction of type `d`.
pub fn fold(kind: ReduceKind, d: DType, t: &str, v: &str) -> String {
    let s = suffix(d);
    match kind {
        ReduceKind::Sum if d == DType::I64 => format!("{t} = swflow_add_i64({t}, {v});"),
        ReduceKind::Sum => format!("{t} += {v};"),
        ReduceKind::Max => format!("{t} = swflow_max_{s}({t}, {v});"),
        ReduceKind::Min => format!("{t} = swflow_min_{s}({t}, {v});"),
        ReduceKind::Prod if d == DType::I64 => format!("{t} = swflow_mul_i64({t}, {v});"),
        ReduceKind::Prod => format!("{t} *= {v};"),
    }
}

/// The statement `t = a * b + t` for float type `d`, rounded once (runtime-c's
/// `swflow_fma_<type>`, C99's `fma`; `t` is evaluated once).
pub fn fma(d: DType, t: &str, a: &str, b: &str) -> String {
    format!("swflow_fma_{}(&{t}, {a}, {b});", suffix(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_exact() {
        assert_eq!(literal(Scalar::F32(0.1)), "0.1f");
        assert_eq!(literal(Scalar::F32(1.0)), "1.0f");
        assert_eq!(literal(Scalar::F32(-0.0)), "-0.0f");
        assert_eq!(literal(Scalar::F32(1e-7)), "1e-7f");
        assert_eq!(literal(Scalar::F32(f32::NEG_INFINITY)), "(-INFINITY)");
        assert_eq!(literal(Scalar::F64(f64::NAN)), "((double)NAN)");
        assert_eq!(literal(Scalar::F64(3.0)), "3.0");
        assert_eq!(literal(Scalar::I64(-3)), "INT64_C(-3)");
        assert_eq!(literal(Scalar::I64(i64::MIN)), "INT64_MIN");
        assert_eq!(literal(Scalar::Bool(true)), "1");
    }

    #[test]
    fn negated_negative_literals_stay_two_tokens() {
        let a = literal(Scalar::F32(-1.5));
        assert_eq!(unary(UnaryOp::Neg, DType::F32, &a), "(- -1.5f)");
    }
}
