//! The graph verifier: structural and type invariants every pass must preserve.

use std::collections::HashSet;

use super::{infer::infer, Graph, Op, TensorType};

/// A broken invariant, naming the node.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("graph '{graph}': node '{node}' ({op}): {reason}")]
pub struct VerifyError {
    pub graph: String,
    pub node: String,
    pub op: String,
    pub reason: String,
}

/// Checks that node names are unique, operands come before their users, every node's type is
/// what [`infer`] gives for its operands, and outputs name existing nodes with unique names.
pub fn verify(g: &Graph) -> Result<(), VerifyError> {
    let fail = |node: &str, op: &str, reason: String| VerifyError {
        graph: g.name.clone(),
        node: node.to_string(),
        op: op.to_string(),
        reason,
    };
    let mut names = HashSet::new();
    for (i, n) in g.nodes().iter().enumerate() {
        if !names.insert(n.name.as_str()) {
            return Err(fail(&n.name, n.op.name(), "name defined twice".into()));
        }
        if let Some(bad) = n.inputs.iter().find(|x| x.index() >= i) {
            return Err(fail(
                &n.name,
                n.op.name(),
                format!("operand %{} is not defined before its use", bad.0),
            ));
        }
        let expected = match &n.op {
            Op::Input => {
                TensorType::new(n.ty.dtype, n.ty.shape.clone()).map_err(|e| fail(&n.name, "input", e.0))?;
                continue;
            }
            op => {
                let types: Vec<&TensorType> = n.inputs.iter().map(|&x| &g.node(x).ty).collect();
                infer(op, &types).map_err(|e| fail(&n.name, op.name(), e.0))?
            }
        };
        if expected != n.ty {
            return Err(fail(
                &n.name,
                n.op.name(),
                format!("declared type {} but operands give {expected}", n.ty),
            ));
        }
    }
    let mut out_names = HashSet::new();
    for o in &g.outputs {
        if o.node.index() >= g.nodes().len() {
            return Err(fail(&o.name, "output", "refers to a missing node".into()));
        }
        if !out_names.insert(o.name.as_str()) {
            return Err(fail(&o.name, "output", "output name used twice".into()));
        }
    }
    Ok(())
}
