//! The loop-IR verifier: bounds, races and types, checked statically.

use swflow_frontend::ir::{infer::infer, DType, Op, TensorType};

use super::{Access, Expr, Index, Kernel, LoopKind, Program, TensorKind};

/// A broken invariant, naming the kernel.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("kernel '{kernel}': {reason}")]
pub struct LoopVerifyError {
    pub kernel: String,
    pub reason: String,
}

/// Checks every kernel of the program, and that kernels write only computed tensors.
pub fn verify_program(p: &Program) -> Result<(), LoopVerifyError> {
    for k in &p.kernels {
        verify_kernel(k, p)?;
        let target = k.operands[0];
        if !matches!(p.tensor(target).kind, TensorKind::Temp) {
            return Err(LoopVerifyError {
                kernel: k.name.clone(),
                reason: format!("writes '{}', which is not a computed tensor", p.tensor(target).name),
            });
        }
    }
    Ok(())
}

/// Checks one kernel:
/// - every access names an operand and has one subscript per dimension;
/// - every affine subscript stays inside its dimension over the whole domain;
/// - the target has affine subscripts using each parallel loop exactly once, in mixed-radix
///   form, and no reduction loop, so distinct parallel points write distinct elements;
/// - a kernel with reduction loops has a reduction;
/// - no read may touch an element the target writes (see [`Kernel::reads_target`]): a kernel
///   may read other parts of its target's tensor, which then hold their values throughout;
/// - the value's type is the target's;
/// - only a reduction has an epilogue, `acc` appears only there, the epilogue's loads use
///   parallel loops only, and its type is the target's;
/// - only a reduction with an epilogue keeps its reduced value, in a computed tensor of the
///   target's type other than the target and every operand the kernel reads, at the target's
///   subscripts.
pub fn verify_kernel(k: &Kernel, p: &Program) -> Result<(), LoopVerifyError> {
    let fail = |reason: String| LoopVerifyError {
        kernel: k.name.clone(),
        reason,
    };
    let extents = k.extents();
    if k.operands.is_empty() {
        return Err(fail("has no target".into()));
    }
    if k.loops.iter().any(|l| l.extent == 0) {
        return Err(fail("has an empty loop".into()));
    }
    let check_access = |a: &Access| -> Result<(), LoopVerifyError> {
        let t = k
            .operands
            .get(a.operand)
            .ok_or_else(|| fail(format!("access to missing operand {}", a.operand)))?;
        let ty = &p.tensor(*t).ty;
        if a.index.len() != ty.rank() {
            return Err(fail(format!(
                "access to '{}' has {} subscripts for rank {}",
                p.tensor(*t).name,
                a.index.len(),
                ty.rank()
            )));
        }
        if let Some(v) = a.pad {
            if v.dtype() != ty.dtype {
                return Err(fail(format!(
                    "'{}' is {} but pads with a {} value",
                    p.tensor(*t).name,
                    ty.dtype,
                    v.dtype()
                )));
            }
        }
        for (d, i) in a.index.iter().enumerate() {
            match i {
                Index::Affine(x) if a.pad.is_some() => {
                    if x.terms.iter().any(|&(l, c)| l >= k.loops.len() || c == 0) {
                        return Err(fail(format!(
                            "subscript {d} of '{}' names a missing loop",
                            p.tensor(*t).name
                        )));
                    }
                }
                Index::Gathered { .. } if a.pad.is_some() => {
                    return Err(fail(format!(
                        "the guarded read of '{}' has a gathered subscript",
                        p.tensor(*t).name
                    )));
                }
                Index::Affine(x) => {
                    if x.terms.iter().any(|&(l, c)| l >= k.loops.len() || c == 0) {
                        return Err(fail(format!(
                            "subscript {d} of '{}' names a missing loop",
                            p.tensor(*t).name
                        )));
                    }
                    let (lo, hi) = x.range(&extents);
                    if lo < 0 || hi >= ty.shape[d] as i64 {
                        return Err(fail(format!(
                            "subscript {d} of '{}' spans {lo}..={hi}, outside 0..{}",
                            p.tensor(*t).name,
                            ty.shape[d]
                        )));
                    }
                }
                Index::Gathered { access, extent } => {
                    if *extent != ty.shape[d] {
                        return Err(fail(format!(
                            "gathered subscript {d} of '{}' has extent {extent}, not {}",
                            p.tensor(*t).name,
                            ty.shape[d]
                        )));
                    }
                    let positions = k
                        .operands
                        .get(access.operand)
                        .ok_or_else(|| fail(format!("access to missing operand {}", access.operand)))?;
                    if p.tensor(*positions).ty.dtype != DType::I64 {
                        return Err(fail("gathered positions must be i64".into()));
                    }
                }
            }
        }
        Ok(())
    };
    for a in k.stmt.read_accesses().into_iter().chain([&k.stmt.target]) {
        check_access(a)?;
    }
    let mut used = vec![0; k.loops.len()];
    if k.stmt.target.pad.is_some() {
        return Err(fail("the target cannot be a guarded read".into()));
    }
    for i in &k.stmt.target.index {
        let Index::Affine(x) = i else {
            return Err(fail("the target cannot have gathered subscripts".into()));
        };
        if !mixed_radix(x, &extents) {
            return Err(fail(format!(
                "target subscript {} may write one element from two points",
                print_affine_terms(x, k)
            )));
        }
        x.terms.iter().for_each(|&(l, _)| used[l] += 1);
    }
    for (l, lp) in k.loops.iter().enumerate() {
        match (lp.kind, used[l]) {
            (LoopKind::Parallel, 1) | (LoopKind::Reduce, 0) => {}
            (LoopKind::Parallel, _) => {
                return Err(fail(format!(
                    "parallel loop '{}' must index the target exactly once",
                    lp.name
                )))
            }
            (LoopKind::Reduce, _) => return Err(fail(format!("reduction loop '{}' indexes the target", lp.name))),
        }
    }
    if k.loops.iter().any(|l| l.kind == LoopKind::Reduce) && k.stmt.reduce.is_none() {
        return Err(fail("has reduction loops but no reduction".into()));
    }
    if k.stmt.read_accesses().into_iter().any(|a| k.reads_target(p, a)) {
        return Err(fail(format!(
            "reads elements of '{}' that it writes",
            p.tensor(k.operands[0]).name
        )));
    }
    let value = expr_type(&k.stmt.value, k, p, false).map_err(fail)?;
    let target = p.tensor(k.operands[0]).ty.dtype;
    if let Some(e) = &k.stmt.epilogue {
        if k.stmt.reduce.is_none() {
            return Err(fail("has an epilogue but no reduction".into()));
        }
        let reduce_loop = |a: &Access| {
            a.index.iter().any(|i| match i {
                Index::Affine(x) => x.terms.iter().any(|&(l, _)| k.loops[l].kind == LoopKind::Reduce),
                Index::Gathered { .. } => true,
            })
        };
        if e.accesses().into_iter().any(reduce_loop) {
            return Err(fail("the epilogue reads with reduction loops or gathers".into()));
        }
        let ty = expr_type(e, k, p, true).map_err(fail)?;
        if ty != target {
            return Err(fail(format!("epilogue is {ty} but the target is {target}")));
        }
    }
    if value != target {
        return Err(fail(format!("value is {value} but the target is {target}")));
    }
    if let Some(keep) = &k.stmt.keep {
        check_keep(k, p, keep).map_err(fail)?;
    }
    if let Some(r) = &k.stmt.reduce {
        if r.init.dtype() != target {
            return Err(fail(format!(
                "reduction starts from a {} value for a {target} target",
                r.init.dtype()
            )));
        }
    }
    Ok(())
}

fn check_keep(k: &Kernel, p: &Program, keep: &Access) -> Result<(), String> {
    if k.stmt.epilogue.is_none() {
        return Err("keeps its reduced value but has no epilogue".into());
    }
    let t = *k
        .operands
        .get(keep.operand)
        .ok_or_else(|| format!("keeps its reduced value in missing operand {}", keep.operand))?;
    if keep.index != k.stmt.target.index || keep.pad.is_some() {
        return Err("keeps its reduced value at subscripts other than the target's".into());
    }
    let name = &p.tensor(t).name;
    if !matches!(p.tensor(t).kind, TensorKind::Temp) {
        return Err(format!(
            "keeps its reduced value in '{name}', which is not a computed tensor"
        ));
    }
    if p.tensor(t).ty != p.tensor(k.operands[0]).ty {
        return Err(format!(
            "keeps its reduced value in '{name}', whose type is not the target's"
        ));
    }
    let storage = p.storage(t);
    let read = k
        .stmt
        .read_accesses()
        .iter()
        .chain([&&k.stmt.target])
        .any(|a| p.storage(k.operands[a.operand]) == storage);
    if read {
        return Err(format!(
            "keeps its reduced value in '{name}', which it also reads or writes"
        ));
    }
    Ok(())
}

/// True when distinct values of the subscript's loops give distinct values: positive
/// coefficients that, in increasing order, each exceed the span of all smaller terms
/// (`g*64 + m` with `m < 64`).
fn mixed_radix(x: &super::Affine, extents: &[usize]) -> bool {
    let mut terms: Vec<(i64, i64)> = x.terms.iter().map(|&(l, c)| (c, extents[l] as i64)).collect();
    terms.sort_unstable();
    let mut span = 0;
    for (c, e) in terms {
        if c <= span {
            return false;
        }
        span += c * (e - 1);
    }
    true
}

fn print_affine_terms(x: &super::Affine, k: &Kernel) -> String {
    x.terms
        .iter()
        .map(|&(l, c)| format!("{c}*{}", k.loops[l].name))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// Element type of an expression, with the graph IR's typing rules; `acc` says whether
/// [`Expr::Acc`] may appear (in an epilogue, where it has the target's type).
fn expr_type(e: &Expr, k: &Kernel, p: &Program, acc: bool) -> Result<DType, String> {
    let scalar = |d: DType| TensorType::scalar(d);
    let expr_type = |e: &Expr, k: &Kernel, p: &Program| expr_type(e, k, p, acc);
    Ok(match e {
        Expr::Acc if acc => p.tensor(k.operands[0]).ty.dtype,
        Expr::Acc => return Err("'acc' outside an epilogue".into()),
        Expr::Load(a) => p.tensor(k.operands[a.operand]).ty.dtype,
        Expr::Const(s) => s.dtype(),
        Expr::Unary(u, a) => {
            infer(&Op::Unary(*u), &[&scalar(expr_type(a, k, p)?)])
                .map_err(|e| e.0)?
                .dtype
        }
        Expr::Binary(b, x, y) => {
            let (tx, ty) = (scalar(expr_type(x, k, p)?), scalar(expr_type(y, k, p)?));
            infer(&Op::Binary(*b), &[&tx, &ty]).map_err(|e| e.0)?.dtype
        }
        Expr::Select(c, a, b) => {
            let (tc, ta, tb) = (
                scalar(expr_type(c, k, p)?),
                scalar(expr_type(a, k, p)?),
                scalar(expr_type(b, k, p)?),
            );
            infer(&Op::Select, &[&tc, &ta, &tb]).map_err(|e| e.0)?.dtype
        }
        Expr::Cast(d, a) => {
            expr_type(a, k, p)?;
            *d
        }
    })
}
