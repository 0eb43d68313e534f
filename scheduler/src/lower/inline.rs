//! Joined producers: the kernel of a node the fusion plan joins into its consumers is kept as
//! a [`Template`], and every kernel that reads the node's tensor computes the template at the
//! subscripts of its read instead.
//!
//! A template's kernel writes each element of its tensor once, at the position given by its
//! loops in order, without a reduction. So reading element `g(i)` of it (subscripts affine in
//! the reader's loops `i`) is its value expression with every loop `l` replaced by `g_l(i)`:
//! its own subscripts compose with the reader's and stay affine.

use std::collections::HashMap;

use crate::loops::{Access, Affine, Expr, Index, Kernel, Program, TensorId, TensorKind};

/// The value of a joined node, over its own loops.
pub(super) struct Template {
    /// Nodes it computes and their ops, in the order they are computed (its own last).
    nodes: Vec<(String, String)>,
    /// Tensors its loads read, by operand slot (slot 0, its target, is never read).
    operands: Vec<TensorId>,
    value: Expr,
}

/// Whether `k` writes each element of its target once, at the position given by its loops in
/// order, without a reduction.
fn elementwise(k: &Kernel) -> bool {
    k.stmt.reduce.is_none()
        && k.stmt.target.index.len() == k.loops.len()
        && k.stmt
            .target
            .index
            .iter()
            .enumerate()
            .all(|(l, i)| matches!(i, Index::Affine(a) if *a == Affine::var(l)))
}

impl Template {
    /// The kernel of joined node `node`, already expanded.
    pub(super) fn of(k: Kernel, node: String) -> Result<Template, String> {
        if !elementwise(&k) {
            return Err("a node joined into its consumers must write each element once, in loop order".into());
        }
        let mut nodes: Vec<(String, String)> = k.fused.into_iter().zip(k.op.split('+').map(String::from)).collect();
        nodes.push((node, k.op.rsplit('+').next().unwrap_or_default().to_string()));
        Ok(Template {
            nodes,
            operands: k.operands,
            value: k.stmt.value,
        })
    }
}

/// Replaces every load of a joined node's tensor in `k`'s value by the node's template at the
/// load's subscripts, adds the template's operands to `k` (dropping slots no longer read) and
/// records the nodes it now holds in `k.fused` and `k.op`.
pub(super) fn expand(k: &mut Kernel, templates: &HashMap<TensorId, Template>) -> Result<(), String> {
    if templates.is_empty() {
        return Ok(());
    }
    let mut used = Vec::new();
    rewrite(&mut k.stmt.value, &mut k.operands, templates, &mut used)?;
    if used.is_empty() {
        return Ok(());
    }
    let mut nodes: Vec<(String, String)> = k.fused.iter().cloned().zip(k.op.split('+').map(String::from)).collect();
    for t in used {
        for n in &templates[&t].nodes {
            if !nodes.iter().any(|m| m.0 == n.0) {
                nodes.push(n.clone());
            }
        }
    }
    let own = k.op.rsplit('+').next().unwrap_or_default().to_string();
    k.op = nodes
        .iter()
        .map(|n| n.1.as_str())
        .chain([own.as_str()])
        .collect::<Vec<_>>()
        .join("+");
    k.fused = nodes.into_iter().map(|n| n.0).collect();
    compact_operands(k);
    Ok(())
}

/// Makes reduction kernel `r` take the statement of `consumer` (the kernel of elementwise node
/// `node`, which reads `r`'s tensor once, at the element it writes) as its epilogue: `r` then
/// writes the consumer's tensor, and the consumer's other loads read at `r`'s target
/// subscripts; with `keep`, `r` also keeps its reduced value in its own tensor. A kernel whose
/// reduction was empty (it writes the initial value) takes the consumer's statement into its
/// value instead (and must not keep it).
pub(super) fn attach_epilogue(mut r: Kernel, consumer: Kernel, node: String, keep: bool) -> Result<Kernel, String> {
    let reduced = r.operands[0];
    if keep && r.stmt.reduce.is_none() {
        return Err("a kernel without a reduction cannot keep its reduced value".into());
    }
    if r.stmt.epilogue.is_some() {
        return Err("a reduction with an epilogue of its own (an average pool's division) takes no other".into());
    }
    if !elementwise(&consumer) {
        return Err("an epilogue must write each element once, in loop order".into());
    }
    let args = affine_subscripts(&r.stmt.target).ok_or("a gathered target")?;
    let mut e = consumer.stmt.value;
    let mut reads = 0;
    replace_loads(&mut e, &mut |a| {
        if consumer.operands[a.operand] != reduced {
            return None;
        }
        reads += 1;
        let at_element = a
            .index
            .iter()
            .enumerate()
            .all(|(l, i)| *i == Index::Affine(Affine::var(l)));
        Some(if at_element { Expr::Acc } else { Expr::Load(a.clone()) })
    });
    let mut acc_reads = 0;
    e.visit(&mut |x| acc_reads += usize::from(matches!(x, Expr::Acc)));
    if reads != 1 || acc_reads != 1 {
        return Err("an epilogue must read the reduced value once, at the element it writes".into());
    }
    remap(&mut e, &consumer.operands, &args, &mut r.operands);
    r.operands[0] = consumer.operands[0];
    r.op = format!("{}+{}", r.op, consumer.op);
    r.fused.extend(consumer.fused);
    r.fused.push(node);
    if keep {
        r.operands.push(reduced);
        r.stmt.keep = Some(Access {
            operand: r.operands.len() - 1,
            index: r.stmt.target.index.clone(),
            pad: None,
            spread: Vec::new(),
        });
    }
    match r.stmt.reduce {
        Some(_) => r.stmt.epilogue = Some(e),
        None => {
            let value = std::mem::replace(&mut r.stmt.value, Expr::Acc);
            replace_acc(&mut e, &value);
            r.stmt.value = e;
        }
    }
    compact_operands(&mut r);
    Ok(r)
}

/// The subscripts of `a`, when all are affine.
fn affine_subscripts(a: &Access) -> Option<Vec<Affine>> {
    a.index
        .iter()
        .map(|i| match i {
            Index::Affine(x) => Some(x.clone()),
            Index::Gathered { .. } => None,
        })
        .collect()
}

/// Replaces each load for which `f` returns an expression.
fn replace_loads(e: &mut Expr, f: &mut impl FnMut(&Access) -> Option<Expr>) {
    e.rewrite(&mut |x| {
        if let Expr::Load(a) = x {
            if let Some(y) = f(a) {
                *x = y;
            }
        }
    });
}

pub(super) fn replace_acc(e: &mut Expr, value: &Expr) {
    e.rewrite(&mut |x| {
        if matches!(x, Expr::Acc) {
            *x = value.clone();
        }
    });
}

/// `e` with each load of a templated tensor replaced; `used` collects those tensors in order.
fn rewrite(
    e: &mut Expr,
    operands: &mut Vec<TensorId>,
    templates: &HashMap<TensorId, Template>,
    used: &mut Vec<TensorId>,
) -> Result<(), String> {
    let mut failed = None;
    e.rewrite(&mut |x| {
        let Expr::Load(a) = x else { return };
        match instantiate(a, operands, templates, used) {
            Ok(Some(value)) => *x = value,
            Ok(None) => {}
            Err(m) => failed = Some(m),
        }
    });
    failed.map_or(Ok(()), Err)
}

/// The template of the tensor `a` loads, at `a`'s subscripts, when it has one.
fn instantiate(
    a: &Access,
    operands: &mut Vec<TensorId>,
    templates: &HashMap<TensorId, Template>,
    used: &mut Vec<TensorId>,
) -> Result<Option<Expr>, String> {
    if positions_read_templates(a, operands, templates) {
        return Err("a joined node's value is used as gather positions".into());
    }
    let t = operands[a.operand];
    let Some(template) = templates.get(&t) else {
        return Ok(None);
    };
    if a.pad.is_some() {
        return Err("a joined node is read through padding".into());
    }
    let args = affine_subscripts(a).ok_or("a joined node is read at gathered positions")?;
    if !used.contains(&t) {
        used.push(t);
    }
    let mut value = template.value.clone();
    remap(&mut value, &template.operands, &args, operands);
    Ok(Some(value))
}

fn positions_read_templates(a: &Access, operands: &[TensorId], templates: &HashMap<TensorId, Template>) -> bool {
    a.index.iter().any(|i| match i {
        Index::Affine(_) => false,
        Index::Gathered { access, .. } => {
            templates.contains_key(&operands[access.operand]) || positions_read_templates(access, operands, templates)
        }
    })
}

/// Moves a template's value into a reader: operand slots of `from` become slots of `operands`
/// (reusing a slot that reads the same tensor), and subscripts over the template's loops
/// become subscripts over the reader's (`args`, one per template loop).
fn remap(e: &mut Expr, from: &[TensorId], args: &[Affine], operands: &mut Vec<TensorId>) {
    fn access(a: &mut Access, from: &[TensorId], args: &[Affine], operands: &mut Vec<TensorId>) {
        let t = from[a.operand];
        a.operand = match operands.iter().skip(1).position(|&o| o == t) {
            Some(i) => i + 1,
            None => {
                operands.push(t);
                operands.len() - 1
            }
        };
        for i in &mut a.index {
            match i {
                Index::Affine(x) => *x = x.compose(args),
                Index::Gathered { access: inner, .. } => access(inner, from, args, operands),
            }
        }
    }
    e.rewrite(&mut |x| {
        if let Expr::Load(a) = x {
            access(a, from, args, operands);
        }
    });
}

/// Drops operand slots no access uses, renumbering the rest in order.
pub(crate) fn compact_operands(k: &mut Kernel) {
    fn slots(a: &mut Access, f: &mut impl FnMut(&mut usize)) {
        f(&mut a.operand);
        for i in &mut a.index {
            if let Index::Gathered { access, .. } = i {
                slots(access, f);
            }
        }
    }
    let mut used = vec![false; k.operands.len()];
    used[0] = true;
    for a in k.stmt.read_accesses().into_iter().chain(&k.stmt.keep) {
        used[a.operand] = true;
    }
    let mut new_slot = vec![0; used.len()];
    let mut kept = Vec::new();
    for (s, &t) in k.operands.iter().enumerate() {
        if used[s] {
            new_slot[s] = kept.len();
            kept.push(t);
        }
    }
    k.operands = kept;
    for a in k.stmt.value_accesses_mut() {
        slots(a, &mut |s| *s = new_slot[*s]);
    }
    if let Some(a) = &mut k.stmt.keep {
        slots(a, &mut |s| *s = new_slot[*s]);
    }
}

/// Removes the tensors that no kernel, input or output touches (those of joined nodes, and
/// constants only they read), renumbering the rest in order.
pub(crate) fn drop_untouched(p: &mut Program) {
    let mut touched = vec![false; p.tensors.len()];
    let mark = |t: TensorId, touched: &mut Vec<bool>| touched[t.index()] = true;
    for &t in p.inputs.iter().chain(p.outputs.iter().map(|(_, t)| t)) {
        mark(t, &mut touched);
    }
    for k in &p.kernels {
        for &t in &k.operands {
            mark(t, &mut touched);
        }
    }
    // Views keep their sources (views come after their sources).
    for i in (0..p.tensors.len()).rev() {
        if let (true, TensorKind::View(of)) = (touched[i], &p.tensors[i].kind) {
            touched[of.index()] = true;
        }
    }
    if touched.iter().all(|&t| t) {
        return;
    }
    let mut new_id = vec![TensorId(u32::MAX); p.tensors.len()];
    let mut kept = Vec::new();
    for (i, t) in std::mem::take(&mut p.tensors).into_iter().enumerate() {
        if touched[i] {
            new_id[i] = TensorId(kept.len() as u32);
            kept.push(t);
        }
    }
    let id = |t: TensorId| new_id[t.index()];
    for t in &mut kept {
        if let TensorKind::View(of) = &mut t.kind {
            *of = id(*of);
        }
    }
    p.tensors = kept;
    for t in p.inputs.iter_mut().chain(p.outputs.iter_mut().map(|(_, t)| t)) {
        *t = id(*t);
    }
    for (i, o) in &mut p.updates {
        (*i, *o) = (id(*i), id(*o));
    }
    for k in &mut p.kernels {
        for t in &mut k.operands {
            *t = id(*t);
        }
    }
}
