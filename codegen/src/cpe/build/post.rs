//! Posted shared buffers (`swflow_scheduler::schedule::Buffer::posted`, SW26010-Pro): each
//! box is broadcast a tile ahead of its compute, into the next of three halves, by remote-LDM
//! broadcasts that only their senders call, while the line computes; its fetchers get each box
//! two tiles ahead. At every tile:
//! ```text
//! the next box's fetchers wait for its get and finish their boxes or slices
//! sync the line (across the mesh, every CPE): no CPE still reads the next half
//! post the next box's blocks (across the mesh: the first stage, then, once its block has
//! landed, the second stage from every CPE that received it)
//! get the box after it into the third half
//! wait until this half's reply counter has counted every block of this tile's box
//! ```
//! Each line a buffer's blocks travel has three reply counters, one per half, each counting
//! the blocks that landed in its half, and this CPE's expected counts of them: the next box's
//! blocks may land while this CPE still waits for this one's. The successor of a tile along
//! the prefetch chain is computed from the origins kept for the next one, so that the fetchers
//! know the box two tiles ahead.

use swflow_emulator::timing::Ops;
use swflow_scheduler::schedule::share::{MeshLine, MESH_SIDE, REGISTER_BYTES};

use super::super::{Array, ArrayDecl, Cond, Func, Half, Int, Local, Stmt, Var, VarDecl};
use super::{charge_once, charged, first_tiles_test, owner, position, BufVars, Gen};
use crate::cost::{branch, int};
use crate::names::comment;

/// A posted shared buffer's state (`swflow_scheduler::schedule::Buffer::posted`): each box is
/// posted a tile ahead of its compute, into the next of three halves, and its fetchers get it
/// two tiles ahead.
pub(super) struct PostVars {
    /// The lines its blocks travel, in order (across the mesh, the first stage's line, then
    /// the second's), each with the first of its three reply counters (one per half) and the
    /// counts this CPE expects in them so far (an array of three).
    lines: Vec<(MeshLine, usize, Array)>,
    /// The reply counter of this CPE's sends.
    sent: usize,
    /// The prefetch chain's loops, innermost first ([`Gen::prefetch_chain`]); the origins
    /// along them of the tile whose box the next half holds, and of the tile after it.
    chain: Vec<usize>,
    ahead: Vec<Var>,
    after: Vec<Var>,
    /// Whether a tile follows this one along the chain (its box is in the next half).
    has_ahead: Var,
    /// Transfers issued on the buffer's counter with the first box's get.
    mark: Var,
}

/// The variables of posted buffer `v`, shared along `line`, whose prefetch chain is `chain`:
/// its reply counters (taken from `f`'s), its expected counts, and the tiles ahead.
pub(super) fn declare(f: &mut Func, v: &BufVars, line: MeshLine, chain: Vec<usize>) -> PostVars {
    let name = f.bufs[v.buf.0 as usize].name.clone();
    let lines = match (line, v.slice.is_some()) {
        (MeshLine::Mesh, false) => vec![MeshLine::Row, MeshLine::Column],
        (MeshLine::Mesh, true) => vec![MeshLine::Column, MeshLine::Row],
        (line, _) => vec![line],
    };
    let lines = lines
        .into_iter()
        .map(|l| {
            let first = f.replies;
            f.replies += 3;
            let noun = match l {
                MeshLine::Column => "col",
                _ => "row",
            };
            f.arrays.push(ArrayDecl {
                name: format!("{name}_{noun}_expect"),
                dims: vec![3],
                values: None,
            });
            let expect = Array(f.arrays.len() as u32 - 1);
            f.decl_lines.push(vec![Local::Array(expect)]);
            (l, first, expect)
        })
        .collect();
    let sent = f.replies;
    f.replies += 1;
    // Set on some paths only, which the C compiler takes for maybe uninitialized.
    let mut var = |name: String| {
        f.vars.push(VarDecl { name, init: Some(0) });
        Var(f.vars.len() as u32 - 1)
    };
    let ahead: Vec<Var> = (0..chain.len()).map(|j| var(format!("{name}_ahead{j}"))).collect();
    let after: Vec<Var> = (0..chain.len()).map(|j| var(format!("{name}_after{j}"))).collect();
    let has_ahead = var(format!("{name}_has_ahead"));
    let mark = var(format!("{name}_mark"));
    f.decl_lines.push(
        ahead
            .iter()
            .chain(&after)
            .chain([&has_ahead, &mark])
            .map(|&v| Local::Var(v))
            .collect(),
    );
    PostVars {
        lines,
        sent,
        chain,
        ahead,
        after,
        has_ahead,
        mark,
    }
}

impl Gen<'_> {
    /// Zeroes this CPE's expected counts of every posted buffer, at the kernel's start.
    pub(super) fn posted_start(&self, out: &mut Vec<Stmt>) {
        for v in self.bufs.iter().flatten() {
            if let Some(pv) = &v.post {
                out.push(Stmt::Comment("No blocks posted to this CPE have arrived yet.".into()));
                for &(_, _, expect) in &pv.lines {
                    charged(
                        out,
                        (0..3)
                            .map(|h| Stmt::SetElem(expect, vec![Int::Const(h)], Int::Const(0)))
                            .collect(),
                    );
                }
            }
        }
    }

    /// A posted buffer's fills (see [`PostVars`]). At the first tiles of its chain, after a
    /// sync (no CPE still reads a half), the boxes of the first two tiles are fetched into
    /// halves 0 and 1 and the first is posted. At every tile the next box (in the next half)
    /// is waited for, finished and posted after a sync, and the box after it fetched into the
    /// third half; then this tile's box is waited for. Into `out` go the first gets, into
    /// `arrivals` the rest.
    pub(super) fn posted_fill(
        &self,
        out: &mut Vec<Stmt>,
        arrivals: &mut Vec<Stmt>,
        i: usize,
        here: &dyn Fn(usize) -> (Int, Int),
    ) {
        let v = self.buf_vars(i);
        let pv = v.post.as_ref().expect("a posted buffer");
        let h = v.half.expect("a double buffer has a half");
        let line = self.shared[i].expect("a posted buffer is shared");
        let chain = &pv.chain;
        let names: Vec<&str> = chain.iter().map(|&l| self.loop_names[l].as_str()).collect();
        out.push(Stmt::Comment(format!(
            "'{}': in three halves over the tiles of {}, each box posted to the mesh a tile ahead.",
            comment(self.tensor_name(i)),
            names.join(" within ")
        )));
        // The box of the tile at `origins` along the chain (the other loops here), into
        // `half`.
        let fetch = |origins: &[Var], half: Int| {
            let at = |m: usize| match chain.iter().position(|&l| l == m) {
                Some(j) => {
                    let (_, hi) = self.bounds(m);
                    let o = Int::Var(origins[j]);
                    (o.clone(), Int::min(hi - o, Int::Const(self.s.tiles[m] as i64)))
                }
                None => here(m),
            };
            let mut out = Vec::new();
            let ops = self.box_lines(&mut out, i, Some(half.clone()), &at);
            charge_once(&mut out, ops);
            out.extend(self.get_box(i, Half::At(half.clone()), Some(half)));
            out
        };
        let mut first = vec![Stmt::Set(h, Int::Const(0)), Stmt::Sync { line }];
        charge_once(&mut first, int(3) + branch(1));
        let ops = self.box_lines(&mut first, i, Some(Int::Const(0)), here);
        charge_once(&mut first, ops);
        first.extend(self.get_box(i, Half::At(Int::Const(0)), Some(Int::Const(0))));
        charged(&mut first, vec![Stmt::Set(pv.mark, Int::Var(v.issued))]);
        let origins: Vec<Int> = chain.iter().map(|&l| self.origin(l)).collect();
        first.extend(self.successor(chain, &origins, &pv.ahead, pv.has_ahead));
        charge_once(&mut first, int(1) + branch(1));
        first.push(Stmt::If {
            cond: Cond::Eq(Int::Var(pv.has_ahead), Int::Const(1)),
            then: fetch(&pv.ahead, Int::Const(1)),
            otherwise: Vec::new(),
        });
        charge_once(out, first_tiles_test(chain));
        out.push(Stmt::If {
            cond: self.at_first_tiles(chain),
            then: first,
            otherwise: Vec::new(),
        });
        let mut posted_first = self.post_box(i, Int::Const(0), Int::Var(pv.mark), false);
        charge_once(arrivals, first_tiles_test(chain));
        arrivals.push(Stmt::If {
            cond: self.at_first_tiles(chain),
            then: std::mem::take(&mut posted_first),
            otherwise: Vec::new(),
        });
        // Every tile: the next box posted, the one after it fetched into the third half.
        let third = |k: i64| (Int::Var(h) + Int::Const(k)) % Int::Const(3);
        let mut next = self.post_box(i, third(1), Int::Var(v.issued), true);
        let ahead: Vec<Int> = pv.ahead.iter().map(|&a| Int::Var(a)).collect();
        next.extend(self.successor(chain, &ahead, &pv.after, pv.has_ahead));
        let mut after = fetch(&pv.after, third(2));
        charged(
            &mut after,
            pv.ahead
                .iter()
                .zip(&pv.after)
                .map(|(&a, &b)| Stmt::Set(a, Int::Var(b)))
                .collect(),
        );
        charge_once(&mut next, int(1) + branch(1));
        next.push(Stmt::If {
            cond: Cond::Eq(Int::Var(pv.has_ahead), Int::Const(1)),
            then: after,
            otherwise: Vec::new(),
        });
        charge_once(arrivals, int(1) + branch(1));
        arrivals.push(Stmt::If {
            cond: Cond::Eq(Int::Var(pv.has_ahead), Int::Const(1)),
            then: next,
            otherwise: Vec::new(),
        });
        // This tile's box: every block of it in this half.
        let (arrival, reply, expect) = *pv.lines.last().expect("a posted buffer has a line");
        let blocks = match &v.slice {
            Some(sv) => {
                let at = vec![Int::Var(h), Int::Const(sv.dim as i64)];
                let units = (Int::Elem(v.extent, at) + Int::Const(sv.unit - 1)) / Int::Const(sv.unit);
                Int::min(units, Int::Const(MESH_SIDE as i64))
            }
            None => Int::Const(1),
        };
        arrivals.extend(self.arrival_wait(arrival, reply, expect, Int::Var(h), blocks));
    }

    /// Sets `to` to the origins along `chain` (innermost first) of the tile after the one at
    /// `from`, and `exists` to whether there is one: the innermost loop's next tile, or its
    /// first with the next loop's next tile, and so on.
    fn successor(&self, chain: &[usize], from: &[Int], to: &[Var], exists: Var) -> Vec<Stmt> {
        let mut out = vec![Stmt::Set(exists, Int::Const(0))];
        for (j, &l) in chain.iter().enumerate().rev() {
            let (_, hi) = self.bounds(l);
            let next = from[j].clone() + Int::Const(self.s.tiles[l] as i64);
            // The next tile of loop `j`, the loops inside it at their first tiles.
            let mut then: Vec<Stmt> = (0..j).map(|m| Stmt::Set(to[m], self.bounds(chain[m]).0)).collect();
            then.push(Stmt::Set(to[j], next.clone()));
            then.extend((j + 1..chain.len()).map(|m| Stmt::Set(to[m], from[m].clone())));
            then.push(Stmt::Set(exists, Int::Const(1)));
            charge_once(&mut then, int(chain.len() as u32 + 1));
            charge_once(&mut out, int(2) + branch(1));
            out.push(Stmt::If {
                cond: Cond::Lt(next, hi),
                then,
                otherwise: Vec::new(),
            });
        }
        out
    }

    /// Adds `blocks` to this CPE's expected count of half `half`'s reply counter along
    /// `line` (the first of the line's three at `reply`, the counts in `expect`), and waits
    /// for it.
    fn arrival_wait(&self, line: MeshLine, reply: usize, expect: Array, half: Int, blocks: Int) -> Vec<Stmt> {
        let at = vec![half.clone()];
        let count = Int::Elem(expect, at.clone()) + blocks;
        let mut out = vec![
            Stmt::SetElem(expect, at.clone(), count),
            Stmt::ArrivalWait {
                line,
                reply: Int::Const(reply as i64) + half,
                count: Int::Elem(expect, at),
            },
        ];
        // The count's update, and the counter's load and test.
        charge_once(
            &mut out,
            Ops {
                load: 2,
                store: 1,
                ..int(3) + branch(1)
            },
        );
        out
    }

    /// A post of `registers` registers of access `i`'s buffer (half `half`, from `offset`
    /// elements) along `line`, counted in half `half`'s reply counter of the line (the first
    /// of three at `reply`), with its cost: the remote access's set-up and issue.
    fn post(
        &self,
        i: usize,
        line: MeshLine,
        reply: usize,
        half: &Int,
        offset: Option<Int>,
        registers: Int,
    ) -> Vec<Stmt> {
        let pv = self.buf_vars(i).post.as_ref().expect("a posted buffer");
        let mut out = vec![Stmt::Post {
            line,
            buf: self.buf_vars(i).buf,
            half: Half::At(half.clone()),
            offset,
            bytes: registers * Int::Const(REGISTER_BYTES as i64),
            sent: pv.sent,
            reply: Int::Const(reply as i64) + half.clone(),
        }];
        charge_once(
            &mut out,
            Ops {
                store: 2,
                ..int(6) + branch(1)
            },
        );
        out
    }

    /// The box of posted access `i` in half `half` (box row `half`) sent on: its fetchers
    /// wait for their gets (until `count` transfers) and finish their boxes or slices; with
    /// `sync`, the line (across the mesh, every CPE) syncs, so that no CPE still reads the
    /// half; then the blocks are posted, across the mesh in two stages, the second's senders
    /// waiting for the first's block.
    fn post_box(&self, i: usize, half: Int, count: Int, sync: bool) -> Vec<Stmt> {
        let v = self.buf_vars(i);
        let pv = v.post.as_ref().expect("a posted buffer");
        let line = self.shared[i].expect("a posted buffer is shared");
        let row = Some(half.clone());
        let mut arrived = vec![Stmt::Wait {
            reply: self.reply[i],
            count,
        }];
        arrived.extend(self.pad(i, Half::At(half.clone()), row.clone()));
        let mut out = Vec::new();
        let fetchers = match (line, &v.slice) {
            (MeshLine::Mesh, Some(_)) => Some(owner(MeshLine::Column)),
            (_, Some(_)) => None,
            (line, None) => Some(owner(line)),
        };
        match fetchers {
            Some(cond) => {
                charge_once(&mut out, int(2) + branch(1));
                out.push(Stmt::If {
                    cond,
                    then: arrived,
                    otherwise: Vec::new(),
                });
            }
            None => out.extend(arrived),
        }
        if sync {
            charge_once(&mut out, int(2) + branch(1));
            out.push(Stmt::Sync { line });
        }
        let reply = |l: MeshLine| pv.lines.iter().find(|x| x.0 == l).expect("a line of the buffer");
        let whole = || {
            let elements = Int::product(
                (0..self.rank(i))
                    .map(|d| Int::Elem(v.extent, vec![half.clone(), Int::Const(d as i64)]))
                    .collect(),
            );
            self.registers(i, elements)
        };
        match (&v.slice, line) {
            (None, MeshLine::Mesh) => {
                let (row_reply, col_reply) = (reply(MeshLine::Row), reply(MeshLine::Column));
                let mut relay = self.arrival_wait(MeshLine::Row, row_reply.1, row_reply.2, half.clone(), Int::Const(1));
                relay.extend(self.post(i, MeshLine::Column, col_reply.1, &half, None, whole()));
                charge_once(&mut out, int(2) + branch(2));
                out.push(Stmt::If {
                    cond: owner(MeshLine::Mesh),
                    then: self.post(i, MeshLine::Row, row_reply.1, &half, None, whole()),
                    otherwise: Vec::new(),
                });
                out.push(Stmt::If {
                    cond: owner(MeshLine::Column),
                    then: relay,
                    otherwise: Vec::new(),
                });
            }
            (None, line) => {
                charge_once(&mut out, int(2) + branch(1));
                out.push(Stmt::If {
                    cond: owner(line),
                    then: self.post(i, line, reply(line).1, &half, None, whole()),
                    otherwise: Vec::new(),
                });
            }
            (Some(sv), line) => {
                let rows = Some(half.clone());
                let (lo, hi) = self.slice_range(i, sv, &rows, position(line));
                let mut slice = vec![Stmt::Set(sv.lo, lo), Stmt::Set(sv.hi, hi)];
                charge_once(&mut slice, int(14) + branch(1));
                let (lo, hi) = (Int::Var(sv.lo), Int::Var(sv.hi));
                let plane = self.plane(i, sv, &rows);
                let registers = self.registers(i, (hi.clone() - lo.clone()) * plane.clone());
                let offset = Some(lo.clone() * plane);
                let mut sends = Vec::new();
                let along = match line {
                    MeshLine::Mesh => {
                        let col = reply(MeshLine::Column);
                        charge_once(&mut sends, int(2) + branch(1));
                        sends.push(Stmt::If {
                            cond: owner(MeshLine::Column),
                            then: self.post(i, MeshLine::Column, col.1, &half, offset.clone(), registers.clone()),
                            otherwise: Vec::new(),
                        });
                        sends.extend(self.arrival_wait(MeshLine::Column, col.1, col.2, half.clone(), Int::Const(1)));
                        MeshLine::Row
                    }
                    line => line,
                };
                sends.extend(self.post(i, along, reply(along).1, &half, offset, registers));
                slice.push(Stmt::If {
                    cond: Cond::Lt(lo, hi),
                    then: sends,
                    otherwise: Vec::new(),
                });
                out.extend(slice);
            }
        }
        out
    }
}
