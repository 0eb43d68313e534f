//! The scalar compute nest's LDM indices, kept in variables across its loops.
//!
//! Each point of the scalar nest reads its operands and writes its target at indices that
//! its subscripts give, and computing those anew at every point costs more integer work than
//! the statement itself (a 4-D box's index takes a dozen operations). The index of every place
//! of the statement in an LDM buffer of its own (not a tape arena) is affine in the point
//! variables, so it moves by a constant stride from one point of a loop to the next: the nest
//! computes each index once per tile, with every loop at its origin, and walks it through the
//! loops as a compiler's strength reduction would, each loop starting from the index of the
//! loop around it and adding its stride after every point.
//! ```text
//! strides, and index[j][0] = place j's index with every loop at its origin, once per tile
//! for loop 0:
//!   index[j][1] = index[j][0]
//!   for loop 1:
//!     ...
//!       for the innermost loop:
//!         statement, reading and writing at index[j][innermost]
//!         index[j][innermost] += stride of place j's access along it   (those that move)
//!     ...
//!     index[j][1] += stride along loop 1
//!   index[j][0] += stride along loop 0
//! ```

use std::borrow::Cow;

use swflow_scheduler::loops::{Access, Expr, Index, Kernel};
use swflow_scheduler::schedule::blocking::extent_values;
use swflow_scheduler::schedule::{window_of, Schedule};

use crate::cpe::{Func, Local, Var, VarDecl};

/// The places of a kernel's scalar statement whose indices the nest keeps.
pub(super) struct Indices {
    /// Per kept place: its access, its displacement in the access's window, the load (or the
    /// target's access) that reads it, and per loop of the nest the variable holding its index
    /// inside that loop.
    pub kept: Vec<(usize, Vec<usize>, Access, Vec<Var>)>,
    /// Per access of a kept place and loop along which it moves: the variable holding its
    /// stride along that loop.
    pub strides: Vec<(usize, usize, Var)>,
}

impl Indices {
    /// The stride variable of access `i` along loop `l`, if it moves along it.
    pub fn stride(&self, i: usize, l: usize) -> Option<Var> {
        self.strides.iter().find(|s| s.0 == i && s.1 == l).map(|s| s.2)
    }

    /// The variable holding the index of access `i` at displacement `shift` at the
    /// statement, if kept.
    pub fn kept(&self, i: usize, shift: &[usize]) -> Option<Var> {
        self.kept
            .iter()
            .find(|x| x.0 == i && x.1 == shift)
            .and_then(|x| x.3.last().copied())
    }
}

/// The indices kernel `k`'s scalar statement keeps under schedule `s`, declared in `f` with
/// names from `prefix`: those of its target and loads (`all`: the kernel's accesses) in an LDM
/// buffer of their own (`in_ldm`), when some tile has several points of some loop.
pub(super) fn plan(
    k: &Kernel,
    s: &Schedule,
    all: &[Cow<'_, Access>],
    in_ldm: &[bool],
    f: &mut Func,
    prefix: &str,
) -> Option<Indices> {
    let several = |l: usize| extent_values(k, s, l).is_none_or(|ns| ns.iter().any(|&n| n > 1));
    if !(0..k.loops.len()).any(several) {
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
    let mut strides: Vec<(usize, usize, Var)> = Vec::new();
    let mut kept = Vec::new();
    for (j, (i, shift, a)) in places.into_iter().enumerate() {
        for l in 0..k.loops.len() {
            if all[i].uses_loop(l) && !strides.iter().any(|s| s.0 == i && s.1 == l) {
                strides.push((i, l, var(format!("{prefix}step{i}_{l}"))));
            }
        }
        let walk = (0..k.loops.len()).map(|l| var(format!("{prefix}at{j}_{l}"))).collect();
        kept.push((i, shift, a, walk));
    }
    f.decl_lines.push(line);
    Some(Indices { kept, strides })
}
