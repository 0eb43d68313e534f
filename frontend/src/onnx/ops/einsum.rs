//! Einsum: the equation is parsed into labelled axes, then lowered to the primitives a
//! hand-written version would use: a gather for each repeated label within one operand (a
//! diagonal), a sum for labels no one else needs, and for each pair of operands, left to
//! right, one batched matrix product `[batch, free_a, contracted] x [batch, contracted,
//! free_b]` between transposes and reshapes. Ellipses stand for the leading axes that the
//! explicit labels leave, broadcast across operands as numpy does.

use super::{table, Cx};
use crate::ir::{checked_numel, NodeId, Op, ReduceKind};

/// An operand during lowering: its node and one label per axis.
struct Term {
    x: NodeId,
    labels: Vec<char>,
}

/// Labels of one side of the equation, with `...` expanded to `ellipsis` labels.
fn expand(spec: &str, rank: Option<usize>, ellipsis: &mut Vec<char>) -> Result<Vec<char>, String> {
    let explicit: Vec<char> = spec.replace("...", "").chars().collect();
    if let Some(c) = explicit.iter().find(|c| !c.is_ascii_alphabetic()) {
        return Err(format!("'{c}' is not a label"));
    }
    let Some(at) = spec.find("...") else {
        if let Some(r) = rank {
            if r != explicit.len() {
                return Err(format!(
                    "'{spec}' labels {} axes of an operand of rank {r}",
                    explicit.len()
                ));
            }
        }
        return Ok(explicit);
    };
    let n = match rank {
        Some(r) => r
            .checked_sub(explicit.len())
            .ok_or_else(|| format!("'{spec}' labels more axes than the operand's {r}"))?,
        None => ellipsis.len(),
    };
    // Ellipsis labels are private characters, aligned to the right across operands.
    while ellipsis.len() < n {
        ellipsis.insert(
            0,
            char::from_u32(0xE000 + ellipsis.len() as u32).expect("private-use code point"),
        );
    }
    let dots = &ellipsis[ellipsis.len() - n..];
    let before: Vec<char> = spec[..at].chars().collect();
    let after: Vec<char> = spec[at + 3..].chars().collect();
    Ok(before.into_iter().chain(dots.iter().copied()).chain(after).collect())
}

pub(super) fn einsum(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let equation: String = cx
        .attrs
        .string("equation", "")?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let (lhs, rhs) = match equation.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (equation.clone(), None),
    };
    let specs: Vec<&str> = lhs.split(',').collect();
    if specs.len() != cx.n_inputs() {
        return Err(format!(
            "the equation names {} operands, the node has {}",
            specs.len(),
            cx.n_inputs()
        ));
    }
    let mut ellipsis = Vec::new();
    let mut terms = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let x = cx.input(i)?;
        let labels = expand(spec, Some(cx.rank(x)), &mut ellipsis)?;
        terms.push(Term { x, labels });
    }
    let output: Vec<char> = match rhs {
        Some(r) => expand(&r, None, &mut ellipsis)?,
        None => {
            // Implicit output: the ellipsis axes, then the labels used once, sorted.
            let mut once: Vec<char> = ('a'..='z')
                .chain('A'..='Z')
                .filter(|c| terms.iter().flat_map(|t| &t.labels).filter(|l| *l == c).count() == 1)
                .collect();
            once.sort_unstable();
            ellipsis.iter().copied().chain(once).collect()
        }
    };
    // Extents per label, broadcasting 1 against n.
    let mut extent = std::collections::HashMap::new();
    for t in &terms {
        for (&l, &d) in t.labels.iter().zip(&cx.shape(t.x)) {
            let e = extent.entry(l).or_insert(d);
            if *e == 1 {
                *e = d;
            } else if d != 1 && d != *e {
                return Err(format!("label '{l}' has extents {} and {d}", *e));
            }
        }
    }
    if let Some(l) = output.iter().find(|l| !extent.contains_key(l)) {
        return Err(format!("output label '{l}' appears in no operand"));
    }
    for t in &mut terms {
        diagonals(cx, t)?;
    }
    let mut acc: Option<Term> = None;
    for k in 0..terms.len() {
        let later: Vec<char> = terms[k + 1..].iter().flat_map(|t| t.labels.clone()).collect();
        let keep = |l: &char| output.contains(l) || later.contains(l);
        let term = std::mem::replace(
            &mut terms[k],
            Term {
                x: NodeId(0),
                labels: Vec::new(),
            },
        );
        acc = Some(match acc {
            None => {
                let mut t = term;
                sum_out(cx, &mut t, &|l| keep(l))?;
                t
            }
            Some(mut a) => {
                let mut b = term;
                let in_both = |l: &char, t: &Term| t.labels.contains(l);
                sum_out(cx, &mut a, &|l| keep(l) || in_both(l, &b))?;
                sum_out(cx, &mut b, &|l| keep(l) || in_both(l, &a))?;
                contract(cx, a, b, &keep, &extent)?
            }
        });
    }
    let mut t = acc.ok_or("Einsum needs at least one operand")?;
    sum_out(cx, &mut t, &|l| output.contains(l))?;
    let perm: Vec<usize> = output
        .iter()
        .map(|l| {
            t.labels
                .iter()
                .position(|m| m == l)
                .ok_or(format!("label '{l}' was lost"))
        })
        .collect::<Result<_, String>>()?;
    let y = cx.transpose(t.x, perm)?;
    let shape: Vec<usize> = output.iter().map(|l| extent[l]).collect();
    Ok(vec![cx.broadcast(y, shape)?])
}

/// Replaces each label repeated within the term by its diagonal: the two axes moved last,
/// merged, and every `(n + 1)`-th element gathered.
fn diagonals(cx: &mut Cx, t: &mut Term) -> Result<(), String> {
    while let Some((p, q)) = (0..t.labels.len())
        .flat_map(|p| ((p + 1)..t.labels.len()).map(move |q| (p, q)))
        .find(|&(p, q)| t.labels[p] == t.labels[q])
    {
        let shape = cx.shape(t.x);
        if shape[p] != shape[q] {
            return Err(format!(
                "label '{}' has extents {} and {} in one operand",
                t.labels[p], shape[p], shape[q]
            ));
        }
        let n = shape[p];
        table(Some(n), "the diagonal")?;
        let mut perm: Vec<usize> = (0..shape.len()).filter(|&a| a != p && a != q).collect();
        perm.extend([p, q]);
        let moved = cx.transpose(t.x, perm.clone())?;
        let mut flat: Vec<usize> = perm[..perm.len() - 2].iter().map(|&a| shape[a]).collect();
        flat.push(n * n);
        let merged = cx.reshape(moved, flat)?;
        let idx = cx.i64_const(vec![n], (0..n as i64).map(|i| i * (n as i64 + 1)).collect())?;
        let axis = perm.len() - 2;
        t.x = cx.op(Op::Gather { axis }, &[merged, idx])?;
        let mut labels: Vec<char> = perm[..perm.len() - 2].iter().map(|&a| t.labels[a]).collect();
        labels.push(t.labels[p]);
        t.labels = labels;
    }
    Ok(())
}

/// Sums the term over the labels `keep` rejects, dropping their axes.
fn sum_out(cx: &mut Cx, t: &mut Term, keep: &dyn Fn(&char) -> bool) -> Result<(), String> {
    let axes: Vec<usize> = (0..t.labels.len()).filter(|&a| !keep(&t.labels[a])).collect();
    if axes.is_empty() {
        return Ok(());
    }
    let s = cx.reduce(ReduceKind::Sum, t.x, axes.clone())?;
    let kept: Vec<usize> = (0..t.labels.len()).filter(|a| !axes.contains(a)).collect();
    let shape: Vec<usize> = kept.iter().map(|&a| cx.shape(t.x)[a]).collect();
    t.x = cx.reshape(s, shape)?;
    t.labels = kept.iter().map(|&a| t.labels[a]).collect();
    Ok(())
}

/// One batched matrix product of two terms. Labels in both are batch axes when still needed
/// (`keep`) and contracted otherwise; the rest are free.
fn contract(
    cx: &mut Cx,
    a: Term,
    b: Term,
    keep: &dyn Fn(&char) -> bool,
    extent: &std::collections::HashMap<char, usize>,
) -> Result<Term, String> {
    let shared: Vec<char> = a.labels.iter().filter(|l| b.labels.contains(l)).copied().collect();
    let batch: Vec<char> = shared.iter().filter(|l| keep(l)).copied().collect();
    let summed: Vec<char> = shared.iter().filter(|l| !keep(l)).copied().collect();
    let free_a: Vec<char> = a.labels.iter().filter(|l| !shared.contains(l)).copied().collect();
    let free_b: Vec<char> = b.labels.iter().filter(|l| !shared.contains(l)).copied().collect();
    let size = |ls: &[char]| -> Result<usize, String> {
        checked_numel(&ls.iter().map(|l| extent[l]).collect::<Vec<_>>()).map_err(|e| e.0)
    };
    let (nb, m, k, n) = (size(&batch)?, size(&free_a)?, size(&summed)?, size(&free_b)?);
    let arrange = |cx: &mut Cx, t: &Term, order: Vec<char>, rows: usize, cols: usize| -> Result<NodeId, String> {
        let perm: Vec<usize> = order
            .iter()
            .map(|l| t.labels.iter().position(|m| m == l).expect("label of the term"))
            .collect();
        let moved = cx.transpose(t.x, perm)?;
        let full: Vec<usize> = order.iter().map(|l| extent[l]).collect();
        let wide = cx.broadcast(moved, full)?;
        cx.reshape(wide, vec![nb, rows, cols])
    };
    let order_a: Vec<char> = batch.iter().chain(&free_a).chain(&summed).copied().collect();
    let order_b: Vec<char> = batch.iter().chain(&summed).chain(&free_b).copied().collect();
    let xa = arrange(cx, &a, order_a, m, k)?;
    let xb = arrange(cx, &b, order_b, k, n)?;
    let p = cx.op(Op::MatMul, &[xa, xb])?;
    let labels: Vec<char> = batch.iter().chain(&free_a).chain(&free_b).copied().collect();
    let shape: Vec<usize> = labels.iter().map(|l| extent[l]).collect();
    Ok(Term {
        x: cx.reshape(p, shape)?,
        labels,
    })
}
