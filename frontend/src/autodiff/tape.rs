//! The saved-value plan: which forward values the backward pass reads, and for each whether
//! it is kept from the forward (the tape) or recomputed in the backward.
//!
//! A forward value some backward node reads must otherwise stay in memory from its forward
//! producer until its last backward use. A value is recomputed instead when that costs only
//! elementwise work on values that stay available anyway: its op is elementwise or a view
//! ([`recomputable_op`]), and each operand is an input, a constant, a kept value or itself
//! recomputed. ReLU masks, biased and scaled values and elementwise activation chains fall in
//! this class; anything with a reduction (convolutions, matrix products, normalisation
//! statistics) is kept. The recomputation is a copy of the forward node placed after the
//! forward pass, which the backward reads instead, so the forward value dies at its last
//! forward use and fusion can inline the copy into the backward kernel that reads it.
//!
//! Whether recomputing is cheaper than storing depends on the kernels both give, which only a
//! target's timing model can say. So the rule's recomputed values that the backward reads,
//! directly or through views, are *storable* ([`storable`]; views themselves are not, since
//! storing one would tape a copy of what main memory already holds), [`plan_storing`] keeps a
//! chosen set instead, and [`choose`] picks the set by a measured cost: from the cheaper of
//! storing none and storing all, the largest values one by one.

use crate::ir::{Graph, NodeId, Op};

/// What the backward pass needs from the forward pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SavedPlan {
    /// Forward values the backward reads from memory: the tape.
    pub kept: Vec<NodeId>,
    /// Forward values the backward computes again from kept ones (with the elementwise
    /// chains they are computed from), in graph order.
    pub recomputed: Vec<NodeId>,
}

/// The sizes behind a [`SavedPlan`], in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapeSummary {
    /// Bytes of the kept values.
    pub tape_bytes: usize,
    /// Bytes of the values the backward computes again.
    pub recomputed_bytes: usize,
    /// Bytes of every value the forward computes (not inputs or constants).
    pub forward_intermediate_bytes: usize,
    /// The forward pass's peak of simultaneously live computed values, evaluated in graph
    /// order: each value lives from its node to its last forward reader, or to the end when it
    /// is an output.
    pub forward_peak_bytes: usize,
}

/// Whether `op` is cheap enough to recompute: elementwise, or a broadcast or reshape (a
/// view of its operand).
fn recomputable_op(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Cast { .. } | Op::Broadcast { .. } | Op::Reshape { .. }
    )
}

fn is_leaf(op: &Op) -> bool {
    matches!(op, Op::Input | Op::Const(_))
}

/// The plan for `g`, whose nodes before `first_backward` are the forward pass.
pub fn plan(g: &Graph, first_backward: usize) -> SavedPlan {
    plan_storing(g, first_backward, &[])
}

/// [`plan`], with the values of `stored` (of [`storable`]) kept even where they could be
/// recomputed.
pub fn plan_storing(g: &Graph, first_backward: usize, stored: &[NodeId]) -> SavedPlan {
    let n = g.nodes().len();
    let mut read_by_backward = vec![false; n];
    for id in g.ids().skip(first_backward) {
        for x in &g.node(id).inputs {
            if x.index() < first_backward {
                read_by_backward[x.index()] = true;
            }
        }
    }
    // A stored value is read from memory, like one the backward reads itself (a view of it may
    // be what the backward reads, and is recomputed from it).
    for id in stored {
        read_by_backward[id.index()] = true;
    }
    // Decided from the last forward node back: a value's decision may lean on its operands
    // being recomputed, and each operand's own decision then checks its operands in turn.
    let mut recompute = vec![false; n];
    for i in (0..first_backward).rev() {
        let node = &g.nodes()[i];
        let store = stored.contains(&NodeId(i as u32));
        if !read_by_backward[i] || is_leaf(&node.op) || !recomputable_op(&node.op) || store {
            continue;
        }
        let mut chain = Vec::new();
        if available(g, NodeId(i as u32), &read_by_backward, &recompute, &mut chain, 0) {
            for c in chain {
                recompute[c.index()] = true;
            }
        }
    }
    let mut plan = SavedPlan::default();
    for i in 0..first_backward {
        let id = NodeId(i as u32);
        if recompute[i] {
            plan.recomputed.push(id);
        } else if read_by_backward[i] && !is_leaf(&g.nodes()[i].op) {
            plan.kept.push(id);
        }
    }
    plan
}

/// A value the plan recomputes that could be stored instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Storable {
    /// Its forward node.
    pub id: NodeId,
    pub name: String,
    pub bytes: usize,
}

fn is_view(op: &Op) -> bool {
    matches!(op, Op::Reshape { .. } | Op::Broadcast { .. })
}

/// The values of `plan` that could be kept instead of recomputed, largest first (ties in
/// graph order): recomputed values a backward node reads, directly or through recomputed
/// views ([`Op::Reshape`], [`Op::Broadcast`]). Views themselves are not: storing one would
/// tape a copy of what main memory holds.
pub fn storable(g: &Graph, first_backward: usize, plan: &SavedPlan) -> Vec<Storable> {
    let mut read = vec![false; first_backward];
    for id in g.ids().skip(first_backward) {
        for x in g.node(id).inputs.iter().filter(|x| x.index() < first_backward) {
            read[x.index()] = true;
        }
    }
    // Later views first, so that a view of a view passes the reading on.
    for &id in plan.recomputed.iter().rev() {
        if read[id.index()] && is_view(&g.node(id).op) {
            for x in &g.node(id).inputs {
                read[x.index()] = true;
            }
        }
    }
    let mut out: Vec<Storable> = plan
        .recomputed
        .iter()
        .filter(|id| read[id.index()] && !is_view(&g.node(**id).op))
        .map(|&id| Storable {
            id,
            name: g.node(id).name.clone(),
            bytes: g.node(id).ty.size_bytes(),
        })
        .collect();
    out.sort_by_key(|s| std::cmp::Reverse(s.bytes));
    out
}

/// What [`choose`] measured for one storable value.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub value: Storable,
    /// The cost with the value recomputed, and with it stored, every other value as decided
    /// when it came to this one.
    pub recompute_cost: f64,
    pub store_cost: f64,
    pub stored: bool,
}

/// The stored values [`choose`] settled on, and its measurements.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Choice {
    /// The values to keep although they could be recomputed.
    pub stored: Vec<NodeId>,
    /// One per value decided, in decision order.
    pub decisions: Vec<Decision>,
    /// The cost with every storable value recomputed (the rule's plan), with every one
    /// stored, and with those of `stored` stored.
    pub rule_cost: f64,
    pub all_stored_cost: f64,
    pub chosen_cost: f64,
}

/// The most values [`choose`] decides one by one. Each decision measures a program once; a
/// program of many similar values (a dynamic program's rows) would otherwise take as many
/// compilations.
pub const MAX_DECISIONS: usize = 8;

/// Decides which values of `candidates` (as [`storable`] orders them) to store, by `cost` of
/// the program that stores a given set of them: starting from the cheaper of storing none and
/// storing all, each of the first [`MAX_DECISIONS`] values in turn changes side when that
/// costs strictly less, given the decisions before it; the others stay with the start. Calls
/// `cost` once for each start and once per decision.
pub fn choose<E>(candidates: &[Storable], mut cost: impl FnMut(&[NodeId]) -> Result<f64, E>) -> Result<Choice, E> {
    let all: Vec<NodeId> = candidates.iter().map(|c| c.id).collect();
    let rule_cost = cost(&[])?;
    let all_stored_cost = cost(&all)?;
    let (mut stored, mut current) = if all_stored_cost < rule_cost {
        (all, all_stored_cost)
    } else {
        (Vec::new(), rule_cost)
    };
    let mut decisions = Vec::new();
    for c in candidates.iter().take(MAX_DECISIONS) {
        let is_stored = stored.contains(&c.id);
        let trial: Vec<NodeId> = if is_stored {
            stored.iter().copied().filter(|&id| id != c.id).collect()
        } else {
            stored.iter().copied().chain([c.id]).collect()
        };
        let trial_cost = cost(&trial)?;
        let change = trial_cost < current;
        let (recompute_cost, store_cost) = if is_stored {
            (trial_cost, current)
        } else {
            (current, trial_cost)
        };
        if change {
            stored = trial;
            current = trial_cost;
        }
        decisions.push(Decision {
            value: c.clone(),
            recompute_cost,
            store_cost,
            stored: is_stored != change,
        });
    }
    Ok(Choice {
        stored,
        decisions,
        rule_cost,
        all_stored_cost,
        chosen_cost: current,
    })
}

/// The longest elementwise chain recomputed for one value.
const MAX_CHAIN: usize = 8;

/// Whether `id` can be recomputed from values available after the forward pass, collecting
/// into `chain` the nodes that would be recomputed with it.
fn available(
    g: &Graph,
    id: NodeId,
    read_by_backward: &[bool],
    recompute: &[bool],
    chain: &mut Vec<NodeId>,
    depth: usize,
) -> bool {
    let node = g.node(id);
    if !recomputable_op(&node.op) || depth >= MAX_CHAIN {
        return false;
    }
    chain.push(id);
    node.inputs.iter().all(|&x| {
        let op = &g.node(x).op;
        // A value the backward reads is available whether it ends up kept or recomputed.
        is_leaf(op)
            || read_by_backward[x.index()]
            || recompute[x.index()]
            || chain.contains(&x)
            || available(g, x, read_by_backward, recompute, chain, depth + 1)
    })
}

/// `g` with the plan applied: a copy of every recomputed value is placed after the forward
/// pass, and the backward nodes read the copies. Node ids of the forward pass are unchanged;
/// `roots` (ids of `g`) are renumbered to the result's.
pub fn apply(g: &Graph, first_backward: usize, plan: &SavedPlan, roots: &mut [NodeId]) -> Graph {
    let mut out = Graph::new(g.name.clone());
    out.outputs = g.outputs.clone();
    let mut map: Vec<NodeId> = Vec::with_capacity(g.nodes().len());
    for id in g.ids().take(first_backward) {
        map.push(out.push_unchecked(g.node(id).clone()));
    }
    // Backward readers see the copy of a recomputed value; the copies read each other.
    let mut backward_map = map.clone();
    for &id in &plan.recomputed {
        let mut node = g.node(id).clone();
        node.inputs = node.inputs.iter().map(|x| backward_map[x.index()]).collect();
        node.origin = Some(format!("recomputed {}", node.name));
        node.name = format!("recompute/{}", node.name);
        node.recomputed = true;
        backward_map[id.index()] = out.push_unchecked(node);
    }
    for id in g.ids().skip(first_backward) {
        let mut node = g.node(id).clone();
        node.inputs = node.inputs.iter().map(|x| backward_map[x.index()]).collect();
        backward_map.push(out.push_unchecked(node));
    }
    for o in &mut out.outputs {
        o.node = backward_map[o.node.index()];
    }
    for r in roots.iter_mut() {
        *r = backward_map[r.index()];
    }
    out
}

/// The sizes of `plan`'s values, and the forward pass's own memory.
pub fn summary(g: &Graph, first_backward: usize, plan: &SavedPlan) -> TapeSummary {
    let bytes = |id: &NodeId| g.node(*id).ty.size_bytes();
    let computed = |i: usize| !is_leaf(&g.nodes()[i].op);
    let mut last_use: Vec<usize> = (0..first_backward).collect();
    for id in g.ids().take(first_backward) {
        for x in &g.node(id).inputs {
            last_use[x.index()] = last_use[x.index()].max(id.index());
        }
    }
    for o in &g.outputs {
        if o.node.index() < first_backward {
            last_use[o.node.index()] = first_backward;
        }
    }
    let mut live = 0usize;
    let mut peak = 0usize;
    let mut dying: Vec<Vec<usize>> = vec![Vec::new(); first_backward + 1];
    for i in (0..first_backward).filter(|&i| computed(i)) {
        dying[last_use[i]].push(i);
    }
    for (i, dead) in dying.iter().take(first_backward).enumerate() {
        if computed(i) {
            live += g.nodes()[i].ty.size_bytes();
            peak = peak.max(live);
        }
        for &d in dead {
            live -= g.nodes()[d].ty.size_bytes();
        }
    }
    TapeSummary {
        tape_bytes: plan.kept.iter().map(bytes).sum(),
        recomputed_bytes: plan.recomputed.iter().map(bytes).sum(),
        forward_intermediate_bytes: (0..first_backward)
            .filter(|&i| computed(i))
            .map(|i| g.nodes()[i].ty.size_bytes())
            .sum(),
        forward_peak_bytes: peak,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autodiff::gradients;
    use crate::ir::{BinaryOp, DType, ReduceKind, TensorType, UnaryOp};

    /// `loss = sum(tanh(h)^2)` with `h = x ⊙ w` (elementwise) or `x · w` (a matrix product),
    /// differentiated with respect to `w`; returns the graph, the id of `tanh(h)` and the
    /// number of forward nodes.
    fn network(elementwise: bool) -> (Graph, NodeId, usize) {
        let mut g = Graph::new("net");
        let ty = TensorType::new(DType::F32, vec![4, 4]).unwrap();
        let x = g.add_input("x", ty.clone());
        let w = g.add_input("w", ty);
        let op = if elementwise {
            Op::Binary(BinaryOp::Mul)
        } else {
            Op::MatMul
        };
        let h = g.add_node("h", op, vec![x, w], None).unwrap();
        let t = g.add_node("t", Op::Unary(UnaryOp::Tanh), vec![h], None).unwrap();
        let sq = g.add_node("sq", Op::Binary(BinaryOp::Mul), vec![t, t], None).unwrap();
        let reduce = Op::Reduce {
            kind: ReduceKind::Sum,
            axes: vec![0, 1],
        };
        let loss = g.add_node("loss", reduce, vec![sq], None).unwrap();
        let first = g.nodes().len();
        (gradients(&g, loss, &[w]).unwrap().graph, t, first)
    }

    #[test]
    fn a_value_computed_by_a_reduction_is_kept() {
        let (g, t, first) = network(false);
        let plan = plan(&g, first);
        assert_eq!(plan.kept, [t]);
        assert!(plan.recomputed.is_empty());
        let s = summary(&g, first, &plan);
        assert_eq!(s.tape_bytes, 64);
        assert_eq!(s.recomputed_bytes, 0);
        // h, t, sq (64 bytes each) and the scalar loss.
        assert_eq!(s.forward_intermediate_bytes, 3 * 64 + 4);
        // h and t live together when t is computed; so do t and sq.
        assert_eq!(s.forward_peak_bytes, 128);
    }

    #[test]
    fn an_elementwise_chain_on_inputs_is_recomputed() {
        let (g, t, first) = network(true);
        let plan = plan(&g, first);
        assert!(plan.kept.is_empty(), "kept {:?}", plan.kept);
        assert_eq!(plan.recomputed, [NodeId(t.0 - 1), t]);
        let mut roots = [g.outputs.first().map_or(t, |o| o.node)];
        let applied = apply(&g, first, &plan, &mut roots);
        // h and t are copied after the forward pass, and no backward node reads the
        // originals any more.
        let copies: Vec<&str> = applied.nodes()[first..first + 2]
            .iter()
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(copies, ["recompute/h", "recompute/t"]);
        let h = NodeId(t.0 - 1);
        for n in &applied.nodes()[first + 2..] {
            assert!(
                !n.inputs.contains(&h) && !n.inputs.contains(&t),
                "{} reads a forward value",
                n.name
            );
        }
    }
    #[test]
    fn a_stored_value_is_kept_and_its_chain_is_not_recomputed() {
        let (g, t, first) = network(true);
        let rule = plan(&g, first);
        let candidates = storable(&g, first, &rule);
        // The backward reads tanh(h) only; h is recomputed for it alone.
        assert_eq!(
            candidates,
            [Storable {
                id: t,
                name: "t".into(),
                bytes: 64
            }]
        );
        let stored = plan_storing(&g, first, &[t]);
        assert_eq!(stored.kept, [t]);
        assert!(stored.recomputed.is_empty(), "recomputed {:?}", stored.recomputed);
    }

    #[test]
    fn a_value_read_through_a_view_is_storable_and_the_view_is_not() {
        // loss = sum(reshape(tanh(x ⊙ w))^2): the backward reads the reshaped value.
        let mut g = Graph::new("view");
        let ty = TensorType::new(DType::F32, vec![4, 4]).unwrap();
        let x = g.add_input("x", ty.clone());
        let w = g.add_input("w", ty);
        let h = g.add_node("h", Op::Binary(BinaryOp::Mul), vec![x, w], None).unwrap();
        let t = g.add_node("t", Op::Unary(UnaryOp::Tanh), vec![h], None).unwrap();
        let v = g.add_node("v", Op::Reshape { shape: vec![16] }, vec![t], None).unwrap();
        let sq = g.add_node("sq", Op::Binary(BinaryOp::Mul), vec![v, v], None).unwrap();
        let reduce = Op::Reduce {
            kind: ReduceKind::Sum,
            axes: vec![0],
        };
        let loss = g.add_node("loss", reduce, vec![sq], None).unwrap();
        let first = g.nodes().len();
        let g = gradients(&g, loss, &[w]).unwrap().graph;
        let rule = plan(&g, first);
        assert!(rule.recomputed.contains(&v), "{rule:?}");
        let names: Vec<String> = storable(&g, first, &rule).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["t"]);
        // Stored, tanh(h) is kept and its view recomputed from it.
        let stored = plan_storing(&g, first, &[t]);
        assert_eq!(stored.kept, [t]);
        assert_eq!(stored.recomputed, [v]);
    }

    fn candidate(id: u32) -> Storable {
        Storable {
            id: NodeId(id),
            name: format!("v{id}"),
            bytes: 4,
        }
    }

    /// Runs [`choose`] on candidates 1 and 2 with the costs of `table` (by the stored set,
    /// in order), recording the sets it measured.
    fn choose_by(table: &[(&[u32], f64)]) -> (Choice, Vec<Vec<u32>>) {
        let mut asked = Vec::new();
        let choice = choose(&[candidate(1), candidate(2)], |stored: &[NodeId]| {
            let mut key: Vec<u32> = stored.iter().map(|id| id.0).collect();
            key.sort();
            asked.push(key.clone());
            table
                .iter()
                .find(|(set, _)| *set == key.as_slice())
                .map(|(_, c)| *c)
                .ok_or(format!("no cost for {key:?}"))
        })
        .unwrap();
        (choice, asked)
    }

    #[test]
    fn choose_starts_from_none_stored_when_that_is_cheaper_and_stores_what_pays() {
        let (choice, asked) = choose_by(&[(&[], 10.0), (&[1, 2], 12.0), (&[1], 8.0)]);
        assert_eq!(asked, [vec![], vec![1, 2], vec![1], vec![1, 2]]);
        assert_eq!(choice.stored, [NodeId(1)]);
        assert_eq!(
            (choice.rule_cost, choice.all_stored_cost, choice.chosen_cost),
            (10.0, 12.0, 8.0)
        );
        let d: Vec<(f64, f64, bool)> = choice
            .decisions
            .iter()
            .map(|d| (d.recompute_cost, d.store_cost, d.stored))
            .collect();
        assert_eq!(d, [(10.0, 8.0, true), (8.0, 12.0, false)]);
    }

    #[test]
    fn choose_starts_from_all_stored_when_that_is_cheaper_and_recomputes_what_pays() {
        let (choice, asked) = choose_by(&[(&[], 10.0), (&[1, 2], 6.0), (&[2], 5.0)]);
        assert_eq!(asked, [vec![], vec![1, 2], vec![2], vec![]]);
        assert_eq!(choice.stored, [NodeId(2)]);
        assert_eq!(choice.chosen_cost, 5.0);
        let d: Vec<(f64, f64, bool)> = choice
            .decisions
            .iter()
            .map(|d| (d.recompute_cost, d.store_cost, d.stored))
            .collect();
        assert_eq!(d, [(5.0, 6.0, false), (10.0, 5.0, true)]);
    }

    #[test]
    fn choose_decides_the_largest_values_and_leaves_the_rest_with_the_start() {
        let candidates: Vec<Storable> = (1..=MAX_DECISIONS as u32 + 3).map(candidate).collect();
        let mut calls = 0;
        // Storing everything is cheaper, and recomputing any one value is cheaper still.
        let choice = choose(&candidates, |stored: &[NodeId]| {
            calls += 1;
            Ok::<f64, ()>(match stored.len() {
                0 => 100.0,
                n => n as f64,
            })
        })
        .unwrap();
        assert_eq!(calls, 2 + MAX_DECISIONS);
        assert_eq!(choice.decisions.len(), MAX_DECISIONS);
        assert!(choice.decisions.iter().all(|d| !d.stored));
        let undecided: Vec<NodeId> = candidates[MAX_DECISIONS..].iter().map(|c| c.id).collect();
        assert_eq!(choice.stored, undecided);
        assert_eq!(choice.chosen_cost, 3.0);
    }

    #[test]
    fn choose_keeps_the_current_side_on_a_tie() {
        let (choice, _) = choose_by(&[(&[], 10.0), (&[1, 2], 10.0), (&[1], 10.0), (&[2], 10.0)]);
        assert!(choice.stored.is_empty());
        assert!(choice.decisions.iter().all(|d| !d.stored));
    }
}
