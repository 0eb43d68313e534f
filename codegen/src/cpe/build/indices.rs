//! The scalar compute nest's LDM indices, kept in variables across its innermost loop.
//!
//! Each point of the scalar nest reads its operands and writes its target at indices that
//! its subscripts give, and computing those anew at every point costs more integer work than
//! the statement itself (a 4-D box's index takes a dozen operations). The index of every place
//! of the statement in an LDM buffer of its own (not a tape arena) is affine in the point
//! variables, so it moves by a constant stride from one point of the innermost loop to the
//! next: the nest computes each index once at the innermost loop's first point and adds its
//! stride after every point, as a compiler's strength reduction would.
//! ```text
//! strides, once per tile
//! for the outer points:
//!   index[j] = place j's index at the innermost loop's origin
//!   for every point of the innermost loop:
//!     statement, reading and writing at index[j]
//!     index[j] += stride of place j's access along the innermost loop   (those that move)
//! ```

use std::borrow::Cow;

use swflow_scheduler::loops::{Access, Expr, Index, Kernel};
use swflow_scheduler::schedule::blocking::extent_values;
use swflow_scheduler::schedule::{window_of, Schedule};

use crate::cpe::{Func, Local, Var, VarDecl};

/// The places of a kernel's scalar statement whose indices the nest keeps.
pub(super) struct Indices {
    /// The innermost loop.
    pub inner: usize,
    /// Per kept place: its access, its displacement in the access's window, the load (or the
    /// target's access) that reads it, and the variable holding its index.
    pub kept: Vec<(usize, Vec<usize>, Access, Var)>,
    /// Per access of a kept place that moves along the innermost loop: the variable holding
    /// its stride.
    pub strides: Vec<(usize, Var)>,
}

impl Indices {
    /// The stride variable of access `i`, if it moves along the innermost loop.
    pub fn stride(&self, i: usize) -> Option<Var> {
        self.strides.iter().find(|s| s.0 == i).map(|s| s.1)
    }

    /// The variable holding the index of access `i` at displacement `shift`, if kept.
    pub fn kept(&self, i: usize, shift: &[usize]) -> Option<Var> {
        self.kept.iter().find(|x| x.0 == i && x.1 == shift).map(|x| x.3)
    }
}

/// The indices kernel `k`'s scalar statement keeps under schedule `s`, declared in `f` with
/// names from `prefix`: those of its target and loads (`all`: the kernel's accesses) in an LDM
/// buffer of their own (`in_ldm`), when some tile has several points of the innermost loop.
pub(super) fn plan(
    k: &Kernel,
    s: &Schedule,
    all: &[Cow<'_, Access>],
    in_ldm: &[bool],
    f: &mut Func,
    prefix: &str,
) -> Option<Indices> {
    let inner = k.loops.len().checked_sub(1)?;
    let several = extent_values(k, s, inner).is_none_or(|ns| ns.iter().any(|&n| n > 1));
    if !several {
        return None;
    }
    let mut places: Vec<(usize, Vec<usize>, Access)> =
        vec![(0, vec![0; all[0].index.len()], all[0].clone().into_owned())];
    let mut found = true;
    k.stmt.value.visit(&mut |e| {
        if let Expr::Load(a) = e {
            match window_of(all, a) {
                Some((i, shift)) if !places.iter().any(|p| p.0 == i && p.1 == shift) => {
                    places.push((i, shift, a.clone()))
                }
                Some(_) => {}
                None => found = false,
            }
        }
    });
    if !found {
        return None;
    }
    places.retain(|(i, _, _)| {
        let index = &all[*i].index;
        in_ldm[*i] && !index.is_empty() && index.iter().all(|x| matches!(x, Index::Affine(_)))
    });
    if places.is_empty() {
        return None;
    }
    let mut line = Vec::new();
    let mut var = |name: String| {
        f.vars.push(VarDecl { name, init: None });
        let v = Var(f.vars.len() as u32 - 1);
        line.push(Local::Var(v));
        v
    };
    let moves = |i: usize| {
        all[i]
            .index
            .iter()
            .any(|x| matches!(x, Index::Affine(x) if x.terms.iter().any(|&(l, c)| l == inner && c != 0)))
    };
    let mut strides = Vec::new();
    let mut kept = Vec::new();
    for (j, (i, shift, a)) in places.into_iter().enumerate() {
        if moves(i) && !strides.iter().any(|s: &(usize, Var)| s.0 == i) {
            strides.push((i, var(format!("{prefix}step{i}"))));
        }
        kept.push((i, shift, a, var(format!("{prefix}at{j}"))));
    }
    f.decl_lines.push(line);
    Some(Indices { inner, kept, strides })
}
