//! Operation counts of the C that code generation writes, for the emulator's timing model.
//!
//! Generated code reports its work through `SWFLOW_CHARGE(n, .class = count, ...)`: `n`
//! executions of a stretch of code whose operations are counted here, by the classes of
//! `struct swflow_ops` (runtime-c's `swflow_emu.h`). The counts describe the C as written,
//! with one convention: values that do not change inside a loop (tile origins and extents,
//! box starts and extents, parameter-struct pointers) are held in registers, so reading them
//! costs nothing, while every operator the C applies per execution is counted:
//! - an LDM element access is one load or store, plus the integer operators of its
//!   subscript as written (per dimension: the affine expression, minus the box start; times
//!   the box extent and plus, for each dimension after the first) and one for the address;
//! - a constant added to an index that vector code already holds (the next vector of a row,
//!   the next step of a written-out window row) costs nothing: the SW64 instruction set, like
//!   the Alpha it derives from, addresses memory as a register plus a signed 16-bit
//!   displacement, so the constant becomes the load's or store's displacement;
//! - a direct main-memory element access costs the integer operators of its address here, and
//!   its latency in the emulator, which sees it happen;
//! - each loop iteration increments, compares and branches;
//! - a charge is one straight-line stretch, timed as its operations issue together; a loop
//!   whose body is straight-line code (the innermost reduction loop of a vector product, with
//!   its written-out steps) is charged with its control in one stretch, as it runs;
//! - float operators are one P0 instruction each; helpers count what their bodies do (NaN
//!   checks of max and min, saturation of float-to-integer casts); libm routines are calls;
//!   integer division is done in software and counts as a division.
//!
//! `flops` counts the floating-point operations of the computation (one per float operator,
//! helper or library routine), for reports.

pub use swflow_emulator::charges::*;
use swflow_emulator::timing::Ops;
use swflow_frontend::ir::{BinaryOp, DType, ReduceKind, UnaryOp};
use swflow_scheduler::loops::Affine;

/// Integer and address operators.
pub fn int(n: u32) -> Ops {
    Ops {
        integer: n,
        ..Ops::default()
    }
}

/// One iteration of a counted loop: increment, compare, branch.
pub const LOOP: Ops = Ops {
    integer: 2,
    branch: 1,
    ..Ops::ZERO
};

/// The `SWFLOW_CHARGE` statement charging `n` executions of `ops`, or `None` when there is
/// nothing to charge.
pub fn charge(ops: &Ops, n: &str) -> Option<String> {
    let set: Vec<String> = ops
        .fields()
        .iter()
        .filter(|(_, v)| *v > 0)
        .map(|(f, v)| format!(".{f} = {v}"))
        .collect();
    (!set.is_empty()).then(|| format!("SWFLOW_CHARGE({n}, {});", set.join(", ")))
}

fn float(fp: u32, flops: u32) -> Ops {
    Ops {
        fp,
        flops,
        ..Ops::default()
    }
}

fn call() -> Ops {
    Ops {
        calls: 1,
        flops: 1,
        ..Ops::default()
    }
}

/// Branches.
pub fn branch(n: u32) -> Ops {
    Ops {
        branch: n,
        ..Ops::default()
    }
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64)
}

/// Operators of an affine subscript as the C of a CPE program writes it: a multiply per coefficient other
/// than ±1, an add or subtract between terms and for the offset.
pub fn affine(x: &Affine) -> Ops {
    let muls = x.terms.iter().filter(|(_, c)| c.abs() != 1).count();
    let adds = x.terms.len().saturating_sub(1) + usize::from(x.offset != 0 && !x.terms.is_empty());
    int((muls + adds) as u32)
}

/// `op(a)` as `scalar::unary` writes it.
pub fn unary(op: UnaryOp, d: DType) -> Ops {
    if !is_float(d) {
        return match op {
            UnaryOp::Abs | UnaryOp::Relu => int(2) + branch(1),
            UnaryOp::Sign => int(3),
            _ => int(1),
        };
    }
    match op {
        UnaryOp::Neg | UnaryOp::Abs => float(1, 1),
        UnaryOp::Sign => float(2, 1) + branch(2),
        UnaryOp::Relu => float(1, 1) + branch(1),
        // 1 / (1 + exp(-a)).
        UnaryOp::Sigmoid => {
            call()
                + float(2, 2)
                + Ops {
                    div: 1,
                    flops: 1,
                    ..Ops::default()
                }
        }
        UnaryOp::Sqrt => Ops {
            sqrt: 1,
            flops: 1,
            ..Ops::default()
        },
        UnaryOp::Recip => Ops {
            div: 1,
            flops: 1,
            ..Ops::default()
        },
        UnaryOp::Exp | UnaryOp::Log | UnaryOp::Erf | UnaryOp::Tanh | UnaryOp::Sin | UnaryOp::Cos => call(),
        UnaryOp::Not => int(1),
    }
}

/// `a op b` as `scalar::binary` writes it.
pub fn binary(op: BinaryOp, d: DType) -> Ops {
    if !is_float(d) {
        return match op {
            // The helpers check for zero and -1 before dividing in software.
            BinaryOp::Div | BinaryOp::Rem => {
                int(2)
                    + branch(2)
                    + Ops {
                        div: 1,
                        ..Ops::default()
                    }
            }
            BinaryOp::Pow => call(),
            BinaryOp::Max | BinaryOp::Min => int(1) + branch(1),
            _ => int(1),
        };
    }
    match op {
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => float(1, 1),
        BinaryOp::Less | BinaryOp::Greater | BinaryOp::Equal => float(1, 1),
        BinaryOp::Div => Ops {
            div: 1,
            flops: 1,
            ..Ops::default()
        },
        BinaryOp::Rem | BinaryOp::Pow => call(),
        // Two NaN checks, then the comparison.
        BinaryOp::Max | BinaryOp::Min => float(3, 1) + branch(3),
    }
}

/// `a` of type `from` converted to `to`, as `scalar::cast` writes it.
pub fn cast(from: DType, to: DType) -> Ops {
    match (from, to) {
        _ if from == to => Ops::default(),
        (f, DType::Bool) if is_float(f) => float(1, 0),
        (_, DType::Bool) => int(1),
        // NaN and both saturation checks, then the conversion (from f32, through double).
        (DType::F32, DType::I64) => float(5, 0) + branch(3),
        (DType::F64, DType::I64) => float(4, 0) + branch(3),
        (_, t) if is_float(t) => float(1, 0),
        _ => int(1),
    }
}

/// The fold of a reduction, as `scalar::fold` writes it; `carried` when the fold's target is
/// the same element on consecutive iterations of the innermost loop (an accumulator).
pub fn fold(kind: ReduceKind, d: DType, carried: bool) -> Ops {
    let op = match kind {
        ReduceKind::Sum => binary(BinaryOp::Add, d),
        ReduceKind::Prod => binary(BinaryOp::Mul, d),
        ReduceKind::Max => binary(BinaryOp::Max, d),
        ReduceKind::Min => binary(BinaryOp::Min, d),
    };
    Ops {
        carried: u32::from(carried && is_float(d)),
        ..op
    }
}

/// A fused multiply-add folding a product into a float accumulator (`swflow_fma_<type>`, or
/// one lane group of `simd_vmas`): one pipelined instruction, two flops a lane, on the
/// loop-carried dependence when `carried`.
pub fn fma(lanes: u32, carried: bool) -> Ops {
    Ops {
        carried: u32::from(carried),
        ..float(1, 2 * lanes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scheduler's estimate counts the slow operators code generation charges.
    #[test]
    fn slow_operators_are_the_ones_the_estimate_counts() {
        use swflow_scheduler::schedule::slow;
        let slow_of = |o: Ops| slow::Slow {
            calls: o.calls,
            div: o.div,
            sqrt: o.sqrt,
        };
        for d in [DType::F32, DType::F64, DType::I64] {
            let f = is_float(d);
            for op in UnaryOp::ALL {
                assert_eq!(slow_of(super::unary(op, d)), slow::unary(op, f), "{op:?} on {d:?}");
            }
            for op in BinaryOp::ALL {
                assert_eq!(slow_of(super::binary(op, d)), slow::binary(op, f), "{op:?} on {d:?}");
            }
        }
    }

    #[test]
    fn charges_name_only_what_is_counted() {
        let ops = float(2, 2) + int(3) + LOOP;
        assert_eq!(
            charge(&ops, "n").as_deref(),
            Some("SWFLOW_CHARGE(n, .flops = 2, .fp = 2, .integer = 5, .branch = 1);")
        );
        assert_eq!(charge(&Ops::default(), "n"), None);
    }

    #[test]
    fn affine_subscripts_count_their_operators() {
        let x = Affine {
            terms: vec![(0, 2), (1, 1)],
            offset: -1,
        };
        // 2 * a + b - 1: one multiply, two adds.
        assert_eq!(affine(&x), int(3));
        let y = Affine {
            terms: vec![(0, 1)],
            offset: 0,
        };
        assert_eq!(affine(&y), int(0));
    }

    #[test]
    fn box_dma_charges_equal_runtime_c() {
        // The JIT's box DMA charges these; the C helper must charge the same, in this order.
        let header = include_str!("../../runtime-c/include/swflow_slave.h");
        let start = header.find("swflow_dma_box(").expect("the helper");
        let charges: Vec<&str> = header[start..]
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("SWFLOW_CHARGE("))
            .take(3)
            .collect();
        let expected = [
            charge(&DMA_BOX_SETUP_OPS, "rank").unwrap(),
            charge(&DMA_BOX_PER_DIM_OPS, "rank").unwrap(),
            charge(&DMA_BOX_TRANSFER_OPS, "1").unwrap(),
        ];
        assert_eq!(charges, expected);
    }

    #[test]
    fn padded_box_dma_charges_equal_runtime_c() {
        // The JIT's mirrors of the guarded-read helpers charge these, in this order.
        let header = include_str!("../../runtime-c/include/swflow_slave.h");
        let charges = |from: &str, n: usize| -> Vec<String> {
            let start = header.find(from).expect("the helper");
            header[start..]
                .lines()
                .map(str::trim)
                .filter(|l| l.starts_with("SWFLOW_CHARGE("))
                .take(n)
                .map(String::from)
                .collect()
        };
        let expect = |ops: &[(&Ops, &str)]| -> Vec<String> { ops.iter().map(|(o, n)| charge(o, n).unwrap()).collect() };
        assert_eq!(
            charges("swflow_pad_row(char", 1),
            expect(&[(&DMA_PAD_FILL_OPS, "to - from")])
        );
        assert_eq!(
            charges("swflow_move_up(char", 4),
            expect(&[
                (&DMA_MOVE_VECTOR_OPS, "n / SWFLOW_F32_LANES"),
                (&DMA_MOVE_HEAD_OPS, "rest != 0"),
                (&DMA_MOVE_SHORT_OPS, "1"),
                (&DMA_MOVE_OPS, "n")
            ])
        );
        assert_eq!(charges("swflow_clip(int", 1), expect(&[(&DMA_PAD_SETUP_OPS, "rank")]));
        assert_eq!(
            charges("swflow_clip_packed(int", 1),
            expect(&[(&DMA_PACK_CHECK_OPS, "rank")])
        );
        assert_eq!(
            charges("swflow_clip_first(int", 1),
            expect(&[(&DMA_PACK_FIRST_OPS, "rank")])
        );
        assert_eq!(
            charges("swflow_dma_box_padded(void", 3),
            expect(&[
                (&DMA_CLIP_SETUP_OPS, "rank"),
                (&DMA_CLIP_PER_DIM_OPS, "rank"),
                (&DMA_BOX_TRANSFER_OPS, "1")
            ])
        );
        assert_eq!(
            charges("swflow_pad_box(void", 5),
            expect(&[
                (&DMA_PAD_EMPTY_OPS, "rank"),
                (&DMA_SPREAD_SETUP_OPS, "rank"),
                (&DMA_SPREAD_PLANE_OPS, "rank"),
                (&DMA_SPREAD_ROW_OPS, "rows"),
                (&DMA_PAD_DEEP_OPS, "rank")
            ])
        );
        assert_eq!(
            charges("swflow_pad_run(char", 3),
            expect(&[
                (&DMA_PAD_RUN_OPS, "1"),
                (&DMA_PAD_SPLAT_OPS, "1"),
                (&DMA_PAD_VECTOR_OPS, "(n + SWFLOW_F32_LANES - 1) / SWFLOW_F32_LANES")
            ])
        );
        assert_eq!(
            charges("swflow_pad_outside(char", 2),
            expect(&[(&DMA_PAD_SLAB_OPS, "1"), (&DMA_PAD_STEP_OPS, "sub[j]")])
        );
    }

    #[test]
    fn accumulators_carry_only_float_folds() {
        assert_eq!(fold(ReduceKind::Sum, DType::F32, true).carried, 1);
        assert_eq!(fold(ReduceKind::Sum, DType::F32, false).carried, 0);
        assert_eq!(fold(ReduceKind::Sum, DType::I64, true).carried, 0);
    }
}
