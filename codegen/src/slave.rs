//! The CPE side of one scheduled kernel: its LDM layout and the C body every CPE runs.
//!
//! The body walks the schedule exactly as the loop-IR executor does (`exec::walk`):
//! ```text
//! for each segment of this CPE's chunk of partition points:
//!   fill buffers placed at depth 0
//!   for t0 in tiles(order[0]):            # tile loops, outermost first
//!     fill buffers placed at depth 1      # gets wait at once, or were prefetched
//!     ...
//!       compute every point of the tile on LDM buffers (and direct accesses)
//!     write the target back if it is placed at depth 1
//!   write the target back if it is placed at depth 0
//! ```
//! LDM buffers hold packed boxes (row-major over the box's actual extents), so a load of
//! access `a` at subscripts `s` reads `a[((s0 - a_start[0]) * a_extent[1] + ...)]`.

use swflow_emulator::timing::Ops;
use swflow_frontend::ir::{strides, DType};
use swflow_scheduler::loops::{Access, Affine, Expr, Index, Kernel, LoopKind, Program};
use swflow_scheduler::schedule::{accesses, Residence, Schedule};

use crate::cost::{self, branch, charge, int, LOOP};
use crate::names::{comment, Names};
use crate::scalar::{binary, cast, ctype, fold, literal, unary};
use crate::writer::Writer;
use crate::CodegenError;

/// Fixed identifiers of a kernel body that loop names must not take.
const BODY_LOCALS: &[&str] = &[
    "ldm", "para", "arg", "cpe", "first", "last", "f", "seg_lo", "seg_len", "e",
];

/// Identifiers of one kernel.
pub struct KernelNames {
    /// The kernel function (and prefix of its struct tags and files).
    pub func: String,
    /// Parameter-struct field per operand slot (slots naming one tensor share it).
    pub fields: Vec<String>,
}

/// The C sources of a kernel's CPE side.
pub struct SlaveCode {
    /// Members of the kernel's LDM struct (after `para`), one per line.
    pub ldm_members: Vec<String>,
    /// Reply counters in the LDM struct.
    pub replies: usize,
    /// The function body.
    pub body: String,
}

struct Gen<'a> {
    p: &'a Program,
    k: &'a Kernel,
    s: &'a Schedule,
    names: &'a KernelNames,
    all: Vec<&'a Access>,
    /// Base identifier per access (accesses order).
    bufs: Vec<String>,
    /// Loop variable per loop.
    loops: Vec<String>,
    /// Reply counter index per access (buffered ones); counter 0 is the parameter struct's.
    reply: Vec<usize>,
    /// Reply counters in all.
    replies: usize,
    /// Position in `order` of each loop, if it has several tiles.
    pos: Vec<Option<usize>>,
}

pub fn generate(p: &Program, k: &Kernel, names: &KernelNames) -> Result<SlaveCode, CodegenError> {
    let s = k.schedule.as_ref().ok_or_else(|| CodegenError::Internal {
        kernel: k.name.clone(),
        reason: "kernel is not scheduled".into(),
    })?;
    let all = accesses(k);
    let mut scope = Names::default();
    for l in BODY_LOCALS {
        scope.claim(l);
    }
    let loops: Vec<String> = k.loops.iter().map(|l| scope.fresh(&l.name, "l_")).collect();
    let mut buf_scope = Names::default();
    let bufs: Vec<String> = all
        .iter()
        .map(|a| buf_scope.fresh(&p.tensor(k.operands[a.operand]).name, "t_"))
        .collect();
    let mut reply = vec![0; all.len()];
    let mut replies = 1;
    for (i, b) in s.buffers.iter().enumerate() {
        if b.residence == Residence::Buffer {
            reply[i] = replies;
            replies += 1;
        }
    }
    for a in &all {
        if p.tensor(k.operands[a.operand]).ty.shape.len() > 16 {
            return Err(CodegenError::Unsupported {
                kernel: k.name.clone(),
                reason: "tensors of more than 16 dimensions".into(),
            });
        }
    }
    let mut pos = vec![None; k.loops.len()];
    for (i, &l) in s.order.iter().enumerate() {
        pos[l] = Some(i);
    }
    let g = Gen {
        p,
        k,
        s,
        names,
        all,
        bufs,
        loops,
        reply,
        replies,
        pos,
    };
    Ok(SlaveCode {
        ldm_members: g.ldm_members(),
        replies: g.replies,
        body: g.body(),
    })
}

impl Gen<'_> {
    fn dtype(&self, i: usize) -> DType {
        self.p.tensor(self.k.operands[self.all[i].operand]).ty.dtype
    }

    fn shape(&self, i: usize) -> &[usize] {
        &self.p.tensor(self.k.operands[self.all[i].operand]).ty.shape
    }

    fn tensor_name(&self, i: usize) -> &str {
        &self.p.tensor(self.k.operands[self.all[i].operand]).name
    }

    fn field(&self, i: usize) -> &str {
        &self.names.fields[self.all[i].operand]
    }

    fn buffered(&self, i: usize) -> bool {
        self.s.buffers[i].residence == Residence::Buffer
    }

    fn rank(&self, i: usize) -> usize {
        self.shape(i).len().max(1)
    }

    fn ldm_members(&self) -> Vec<String> {
        (0..self.all.len())
            .filter(|&i| self.buffered(i))
            .map(|i| {
                let b = &self.s.buffers[i];
                let dims: Vec<String> = b.dims.iter().map(|d| d.to_string()).collect();
                let tile = if dims.is_empty() {
                    "scalar".into()
                } else {
                    dims.join("x")
                };
                let (half, note) = if b.double {
                    ("[2]", ", double-buffered")
                } else {
                    ("", "")
                };
                format!(
                    "{} {}{half}[{}]; /* '{}': tile {tile}{note} */",
                    ctype(self.dtype(i)),
                    self.bufs[i],
                    b.elements(),
                    comment(self.tensor_name(i))
                )
            })
            .collect()
    }

    /// Where this CPE is: the start and extent of loop `l`'s current tile.
    fn origin(&self, l: usize) -> String {
        format!("{}_0", self.loops[l])
    }

    fn extent(&self, l: usize) -> String {
        format!("{}_n", self.loops[l])
    }

    fn is_inner_partition(&self, l: usize) -> bool {
        self.s.partition.last() == Some(&l)
    }

    /// Bounds of tile loop `l` within the segment.
    fn bounds(&self, l: usize) -> (String, String) {
        if self.is_inner_partition(l) {
            ("seg_lo".into(), "seg_lo + seg_len".into())
        } else {
            ("0".into(), self.k.loops[l].extent.to_string())
        }
    }

    /// Whether no reduction tile loop among `order[..depth]` has moved: the condition as C.
    fn first_visit(&self, depth: usize) -> Option<String> {
        let conds: Vec<String> = self.s.order[..depth]
            .iter()
            .filter(|&&l| self.k.loops[l].kind == LoopKind::Reduce)
            .map(|&l| format!("{} == 0", self.origin(l)))
            .collect();
        (!conds.is_empty()).then(|| conds.join(" && "))
    }

    fn body(&self) -> String {
        let k = self.k;
        let s = self.s;
        let mut w = Writer::new(1);
        w.line(format!(
            "struct {f}_ldm *const ldm = &swflow_ldm.{f};",
            f = self.names.func
        ));
        w.line("const long cpe = SWFLOW_CPE_ID;");
        w.line(format!("struct {}_para para;", self.names.func));
        if s.partition.is_empty() {
            w.line("long first, last, f, seg_len;");
        } else {
            w.line("long first, last, f, seg_lo, seg_len;");
        }
        for l in &self.loops {
            w.line(format!("long {l}, {l}_0, {l}_n;"));
        }
        let mut fill_loop = false;
        for i in (0..self.all.len()).filter(|&i| self.buffered(i)) {
            let (b, r) = (&self.s.buffers[i], self.rank(i));
            let name = &self.bufs[i];
            let half = if b.double { "[2]" } else { "" };
            w.line(format!(
                "long {name}_start{half}[{r}], {name}_extent{half}[{r}], {name}_issued = 0;"
            ));
            if b.double {
                w.line(format!("int {name}_h = 0;"));
            }
            let shape = self.shape(i);
            let dims: Vec<String> = if shape.is_empty() {
                vec!["1".into()]
            } else {
                shape.iter().map(|d| d.to_string()).collect()
            };
            w.line(format!("const long {name}_shape[{r}] = {{{}}};", dims.join(", ")));
            fill_loop |= i == 0 && k.stmt.reduce.is_some() && k.target_is_dense();
        }
        if fill_loop {
            w.line("long e;");
        }
        w.line("");
        w.line("SWFLOW_LDM_BUFFER(&ldm->para, sizeof ldm->para, \"para\");");
        for i in (0..self.all.len()).filter(|&i| self.buffered(i)) {
            let name = &self.bufs[i];
            w.line(format!(
                "SWFLOW_LDM_BUFFER(ldm->{name}, sizeof ldm->{name}, \"{name}\");"
            ));
        }
        let fields = self.names.fields.len() as u32;
        let prologue = LOOP * self.replies as u32
            + Ops {
                store: self.replies as u32 + fields,
                load: fields,
                ..int(4)
            };
        charge_once(&mut w, prologue);
        w.open(format!("for (f = 0; f < {}; f++) {{", self.replies));
        w.line("ldm->reply[f] = 0;");
        w.close();
        w.line("swflow_dma(0, &ldm->para, (char *)arg, sizeof ldm->para, 0, 0, &ldm->reply[0]);");
        w.line("SWFLOW_DMA_WAIT(ldm->reply[0], 1);");
        w.line("para = ldm->para;");
        w.line("");
        let points = s.partition_points;
        w.line(format!(
            "/* This CPE's chunk of the {points} points of the partition loops ({}). */",
            comment(
                &s.partition
                    .iter()
                    .map(|&l| k.loops[l].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        ));
        w.line(format!("first = cpe * {};", s.chunk));
        w.line(format!(
            "last = first + {c} < {points} ? first + {c} : {points};",
            c = s.chunk
        ));
        w.open("for (f = first; f < last; f += seg_len) {");
        let extents = k.extents();
        // Each partition loop's origin is a quotient and a remainder (one when it is the
        // innermost), done in software; then the segment's length.
        let divisions = (2 * s.partition.len()).saturating_sub(1) as u32;
        let segment = LOOP
            + Ops {
                div: divisions,
                branch: 1,
                ..int(5)
            };
        charge_once(&mut w, segment);
        let mut inner_product = 1usize;
        for (j, &l) in s.partition.iter().enumerate().rev() {
            let ext = extents[l];
            let value = if inner_product == 1 {
                format!("f % {ext}")
            } else {
                format!("f / {inner_product} % {ext}")
            };
            if j + 1 == s.partition.len() {
                w.line(format!("seg_lo = {value};"));
                w.line(format!(
                    "seg_len = last - f < {ext} - seg_lo ? last - f : {ext} - seg_lo;"
                ));
            } else {
                w.line(format!("{} = {value};", self.origin(l)));
                w.line(format!("{} = 1;", self.extent(l)));
            }
            inner_product *= ext;
        }
        if s.partition.is_empty() {
            w.line("seg_len = 1;");
        }
        for (l, &ext) in extents.iter().enumerate() {
            if self.pos[l].is_some() || (s.partition.contains(&l) && !self.is_inner_partition(l)) {
                continue;
            }
            if self.is_inner_partition(l) {
                w.line(format!("{} = seg_lo;", self.origin(l)));
                w.line(format!("{} = seg_len;", self.extent(l)));
            } else {
                w.line(format!("{} = 0;", self.origin(l)));
                w.line(format!("{} = {ext};", self.extent(l)));
            }
        }
        self.fills(&mut w, 0);
        self.level(&mut w, 0);
        self.write_back(&mut w, 0);
        w.close();
        w.finish()
    }

    /// Tile loop at position `pos` of the order, and everything inside it.
    fn level(&self, w: &mut Writer, pos: usize) {
        if pos == self.s.order.len() {
            self.compute(w);
            return;
        }
        let l = self.s.order[pos];
        let t = self.s.tiles[l];
        let (lo, hi) = self.bounds(l);
        let (o, n) = (self.origin(l), self.extent(l));
        w.open(format!("for ({o} = {lo}; {o} < {hi}; {o} += {t}) {{"));
        w.line(format!("{n} = {hi} - {o} < {t} ? {hi} - {o} : {t};"));
        // The loop's control and the line above (twice the bound when it is the segment's).
        let bound = u32::from(self.is_inner_partition(l));
        charge_once(w, LOOP + int(3 + 2 * bound) + branch(1));
        self.fills(w, pos + 1);
        self.level(w, pos + 1);
        self.write_back(w, pos + 1);
        for i in 1..self.all.len() {
            let b = &self.s.buffers[i];
            if self.buffered(i) && b.double && b.depth == pos + 1 {
                w.line(format!("{name}_h = 1 - {name}_h;", name = self.bufs[i]));
            }
        }
        w.close();
    }

    /// Lines computing the box access `i` spans over the tile into `start`/`extent` arrays,
    /// with loop `l`'s origin and extent given by `at`; returns their operations.
    fn box_lines(
        &self,
        w: &mut Writer,
        i: usize,
        start: &str,
        extent: &str,
        at: &dyn Fn(usize) -> (String, String),
    ) -> Ops {
        let stores = Ops {
            store: 2,
            ..Ops::default()
        };
        if self.shape(i).is_empty() {
            w.line(format!("{start}[0] = 0;"));
            w.line(format!("{extent}[0] = 1;"));
            return stores;
        }
        let mut ops = Ops::default();
        for (d, idx) in self.all[i].index.iter().enumerate() {
            let Index::Affine(x) = idx else {
                unreachable!("buffered accesses have affine subscripts")
            };
            let mut lo: Vec<(i64, String)> = Vec::new();
            let mut span: Vec<(i64, String)> = Vec::new();
            for &(l, c) in &x.terms {
                let (o, n) = at(l);
                lo.push((c, o));
                if c < 0 {
                    lo.push((c, format!("({n} - 1)")));
                    ops += int(1);
                }
                span.push((c.abs(), format!("({n} - 1)")));
            }
            ops += int(linear_ops(&lo, x.offset)) + stores;
            let lo = linear(&lo, x.offset);
            // One loop with a unit step spans exactly that loop's tile.
            let span = match x.terms.as_slice() {
                [(l, c)] if c.abs() == 1 => at(*l).1,
                _ => {
                    ops += int(span.len() as u32 + linear_ops(&span, 1));
                    linear(&span, 1)
                }
            };
            w.line(format!("{start}[{d}] = {lo};"));
            w.line(format!("{extent}[{d}] = {span};"));
        }
        ops
    }

    /// The DMA of access `i`'s box (`put` for the target's write-back), into `buf`.
    fn dma_call(&self, i: usize, put: bool, buf: &str, start: &str, extent: &str) -> String {
        let name = &self.bufs[i];
        format!(
            "{name}_issued += swflow_dma_box({}, {buf}, (char *)para.{}, {}, {name}_shape, {start}, {extent}, sizeof({}), &ldm->reply[{}]);",
            put as u8,
            self.field(i),
            self.rank(i),
            ctype(self.dtype(i)),
            self.reply[i]
        )
    }

    fn wait(&self, i: usize) -> String {
        format!(
            "SWFLOW_DMA_WAIT(ldm->reply[{}], {}_issued);",
            self.reply[i], self.bufs[i]
        )
    }

    /// Fills of the buffers placed at `depth`.
    fn fills(&self, w: &mut Writer, depth: usize) {
        let here = |l: usize| (self.origin(l), self.extent(l));
        for i in 0..self.all.len() {
            let b = &self.s.buffers[i];
            if !self.buffered(i) || b.depth != depth {
                continue;
            }
            let name = &self.bufs[i];
            let tensor = comment(self.tensor_name(i));
            if i == 0 {
                self.fill_target(w, depth, &here);
            } else if b.double {
                let l = self.s.order[depth - 1];
                let (lo, hi) = self.bounds(l);
                let t = self.s.tiles[l];
                w.line(format!(
                    "/* '{tensor}': double-buffered over {} tiles. */",
                    self.loops[l]
                ));
                w.open(format!("if ({} == {lo}) {{", self.origin(l)));
                w.line(format!("{name}_h = 0;"));
                let ops = self.box_lines(w, i, &format!("{name}_start[0]"), &format!("{name}_extent[0]"), &here);
                charge_once(w, ops);
                w.line(self.dma_call(
                    i,
                    false,
                    &format!("ldm->{name}[0]"),
                    &format!("{name}_start[0]"),
                    &format!("{name}_extent[0]"),
                ));
                w.close();
                w.line(self.wait(i));
                let next = format!("{}_0 + {t}", self.loops[l]);
                w.open(format!("if ({next} < {hi}) {{"));
                let next_n = format!("({hi} - ({next}) < {t} ? {hi} - ({next}) : {t})");
                let at = |m: usize| {
                    if m == l {
                        (format!("({next})"), next_n.clone())
                    } else {
                        here(m)
                    }
                };
                let other = format!("1 - {name}_h");
                let ops = self.box_lines(
                    w,
                    i,
                    &format!("{name}_start[{other}]"),
                    &format!("{name}_extent[{other}]"),
                    &at,
                );
                charge_once(w, ops + int(3) + branch(1));
                w.line(self.dma_call(
                    i,
                    false,
                    &format!("ldm->{name}[{other}]"),
                    &format!("{name}_start[{other}]"),
                    &format!("{name}_extent[{other}]"),
                ));
                w.close();
            } else {
                w.line(format!("/* '{tensor}' */"));
                let ops = self.box_lines(w, i, &format!("{name}_start"), &format!("{name}_extent"), &here);
                charge_once(w, ops);
                w.line(self.dma_call(
                    i,
                    false,
                    &format!("ldm->{name}"),
                    &format!("{name}_start"),
                    &format!("{name}_extent"),
                ));
                w.line(self.wait(i));
            }
        }
    }

    /// The target's box: read first where the kernel writes it in part or revisits partial
    /// sums, set to the reduction's initial value on a dense first visit.
    fn fill_target(&self, w: &mut Writer, depth: usize, here: &dyn Fn(usize) -> (String, String)) {
        let k = self.k;
        let name = &self.bufs[0];
        let (start, extent) = (format!("{name}_start"), format!("{name}_extent"));
        w.line(format!("/* '{}' (target) */", comment(self.tensor_name(0))));
        let ops = self.box_lines(w, 0, &start, &extent, here);
        charge_once(w, ops);
        let get = self.dma_call(0, false, &format!("ldm->{name}"), &start, &extent);
        let get_and_wait = |w: &mut Writer| {
            w.line(get.clone());
            w.line(self.wait(0));
        };
        if !k.target_is_dense() {
            get_and_wait(w);
            return;
        }
        let Some(r) = k.stmt.reduce else { return };
        let elems: Vec<String> = (0..self.rank(0)).map(|d| format!("{extent}[{d}]")).collect();
        let init = |w: &mut Writer| {
            let fill = Ops {
                store: 1,
                ..int(1) + LOOP
            };
            if let Some(c) = charge(&fill, &elems.join(" * ")) {
                w.line(c);
            }
            w.open(format!("for (e = 0; e < {}; e++) {{", elems.join(" * ")));
            w.line(format!("ldm->{name}[e] = {};", literal(r.init)));
            w.close();
        };
        match self.first_visit(depth) {
            None => init(w),
            Some(cond) => {
                w.open(format!("if ({cond}) {{"));
                init(w);
                w.close();
                w.open("else {");
                get_and_wait(w);
                w.close();
            }
        }
    }

    fn write_back(&self, w: &mut Writer, depth: usize) {
        if !self.buffered(0) || self.s.buffers[0].depth != depth {
            return;
        }
        let name = &self.bufs[0];
        w.line(self.dma_call(
            0,
            true,
            &format!("ldm->{name}"),
            &format!("{name}_start"),
            &format!("{name}_extent"),
        ));
        w.line(self.wait(0));
    }

    fn compute(&self, w: &mut Writer) {
        let k = self.k;
        let origin = match &k.origin {
            Some(node) => format!(" from node '{}'", comment(node)),
            None => String::new(),
        };
        w.line(format!("/* {}{origin}: every point of the tile. */", comment(&k.op)));
        // The current half of each double-buffered tile, chosen once per tile.
        for i in (0..self.all.len()).filter(|&i| self.buffered(i) && self.s.buffers[i].double) {
            let name = &self.bufs[i];
            w.line(format!(
                "const {} *const {name}_cur = ldm->{name}[{name}_h];",
                ctype(self.dtype(i))
            ));
            charge_once(w, int(1));
        }
        let (target, target_ops) = self.access_ref(0);
        let buffered = u32::from(self.buffered(0));
        if let Some(r) = k.stmt.reduce {
            if !(self.buffered(0) && k.target_is_dense()) {
                let cond = self.first_visit(self.s.order.len());
                if let Some(c) = &cond {
                    w.open(format!("if ({c}) {{"));
                }
                let parallel: Vec<usize> = (0..k.loops.len())
                    .filter(|&l| k.loops[l].kind == LoopKind::Parallel)
                    .collect();
                let store = Ops {
                    store: buffered,
                    ..target_ops
                };
                self.charge_nest(w, &parallel, store);
                for &l in &parallel {
                    self.open_point_loop(w, l);
                }
                for l in (0..k.loops.len()).filter(|l| !parallel.contains(l)) {
                    w.line(format!("{} = {};", self.loops[l], self.origin(l)));
                }
                w.line(format!("{target} = {};", literal(r.init)));
                for _ in &parallel {
                    w.close();
                }
                if cond.is_some() {
                    w.close();
                }
            }
        }
        let (value, _, value_ops) = self.expr(&k.stmt.value);
        let statement = match k.stmt.reduce {
            Some(r) => {
                let carried = k.loops.last().is_some_and(|l| l.kind == LoopKind::Reduce);
                let update = Ops {
                    load: buffered,
                    store: buffered,
                    ..cost::fold(r.kind, self.dtype(0), carried)
                };
                value_ops + target_ops + update
            }
            None => {
                value_ops
                    + target_ops
                    + Ops {
                        store: buffered,
                        ..Ops::default()
                    }
            }
        };
        let all: Vec<usize> = (0..k.loops.len()).collect();
        self.charge_nest(w, &all, statement);
        for l in 0..k.loops.len() {
            self.open_point_loop(w, l);
        }
        match k.stmt.reduce {
            Some(r) => w.line(fold(r.kind, self.dtype(0), &target, &value)),
            None => w.line(format!("{target} = {value};")),
        }
        for _ in 0..k.loops.len() {
            w.close();
        }
    }

    /// Charges a nest of point loops over `loops` (outermost first) whose innermost body does
    /// `body`: the body and its loop control once per point, and the control of every outer
    /// loop (with the start of the loop inside it) once per its own iteration.
    fn charge_nest(&self, w: &mut Writer, loops: &[usize], body: Ops) {
        let extents: Vec<String> = loops.iter().map(|&l| self.extent(l)).collect();
        let points = if extents.is_empty() {
            "1".to_string()
        } else {
            extents.join(" * ")
        };
        if let Some(c) = charge(&(body + LOOP * u32::from(!loops.is_empty())), &points) {
            w.line(c);
        }
        if loops.len() > 1 {
            let outer: Vec<String> = (1..loops.len()).map(|j| extents[..j].join(" * ")).collect();
            if let Some(c) = charge(&(LOOP + int(1)), &outer.join(" + ")) {
                w.line(c);
            }
        }
    }

    fn open_point_loop(&self, w: &mut Writer, l: usize) {
        let v = &self.loops[l];
        w.open(format!("for ({v} = {v}_0; {v} < {v}_0 + {v}_n; {v}++) {{"));
    }

    fn affine(&self, x: &Affine) -> String {
        let mut s = String::new();
        for &(l, c) in &x.terms {
            let v = &self.loops[l];
            match (c, s.is_empty()) {
                (1, true) => s.push_str(v),
                (-1, true) => s.push_str(&format!("-{v}")),
                (c, true) => s.push_str(&format!("{c} * {v}")),
                (1, false) => s.push_str(&format!(" + {v}")),
                (-1, false) => s.push_str(&format!(" - {v}")),
                (c, false) if c < 0 => s.push_str(&format!(" - {} * {v}", -c)),
                (c, false) => s.push_str(&format!(" + {c} * {v}")),
            }
        }
        match (x.offset, s.is_empty()) {
            (o, true) => o.to_string(),
            (0, false) => s,
            (o, false) if o < 0 => format!("{s} - {}", -o),
            (o, false) => format!("{s} + {o}"),
        }
    }

    /// The lvalue of access `i`, its element in an LDM buffer or in main memory directly, and
    /// the operations of its subscript and address (not of the access itself).
    fn access_ref(&self, i: usize) -> (String, Ops) {
        let a = self.all[i];
        let name = &self.bufs[i];
        if self.buffered(i) {
            if self.shape(i).is_empty() {
                return (format!("ldm->{name}[0]"), Ops::default());
            }
            let (half, base) = if self.s.buffers[i].double {
                (format!("[{name}_h]"), format!("{name}_cur"))
            } else {
                (String::new(), format!("ldm->{name}"))
            };
            let mut ops = int(1);
            let mut idx = String::new();
            for (d, x) in a.index.iter().enumerate() {
                let Index::Affine(x) = x else {
                    unreachable!("buffered accesses have affine subscripts")
                };
                let term = format!("({} - {name}_start{half}[{d}])", self.affine(x));
                ops += cost::affine(x) + int(1);
                idx = if d == 0 {
                    term
                } else {
                    ops += int(2);
                    format!("({idx}) * {name}_extent{half}[{d}] + {term}")
                };
            }
            (format!("{base}[{idx}]"), ops)
        } else {
            let st = strides(self.shape(i));
            let mut ops = int(1 + a.index.len().saturating_sub(1) as u32);
            let terms: Vec<String> = a
                .index
                .iter()
                .zip(&st)
                .map(|(x, &stride)| {
                    let sub = match x {
                        Index::Affine(x) => {
                            ops += cost::affine(x);
                            format!("({})", self.affine(x))
                        }
                        Index::Gathered { access, extent } => {
                            let (pos, _, pos_ops) = self.load(access);
                            // The helper's two range checks and its wrap of negative positions.
                            ops += pos_ops + int(3) + branch(2);
                            format!("swflow_gather_index({pos}, {extent})")
                        }
                    };
                    if stride == 1 {
                        sub
                    } else {
                        ops += int(1);
                        format!("{sub} * {stride}")
                    }
                })
                .collect();
            let idx = if terms.is_empty() {
                "0".to_string()
            } else {
                terms.join(" + ")
            };
            let how = if i == 0 { "SWFLOW_GSTORE" } else { "SWFLOW_GLOAD" };
            (
                format!("{how}({}, para.{}, {idx})", ctype(self.dtype(i)), self.field(i)),
                ops,
            )
        }
    }

    /// A load of `a`: its C, its type, and its operations (an LDM load when buffered).
    fn load(&self, a: &Access) -> (String, DType, Ops) {
        let i = self
            .all
            .iter()
            .position(|x| std::ptr::eq(*x, a))
            .expect("every load is one of the kernel's accesses");
        let (text, ops) = self.access_ref(i);
        let load = Ops {
            load: u32::from(self.buffered(i)),
            ..Ops::default()
        };
        (text, self.dtype(i), ops + load)
    }

    /// An expression as C, its type, and the operations that evaluate it.
    fn expr(&self, e: &Expr) -> (String, DType, Ops) {
        match e {
            Expr::Load(a) => self.load(a),
            Expr::Const(c) => (literal(*c), c.dtype(), Ops::default()),
            Expr::Unary(op, a) => {
                let (a, d, o) = self.expr(a);
                (unary(*op, d, &a), d, o + cost::unary(*op, d))
            }
            Expr::Binary(op, a, b) => {
                let (a, d, oa) = self.expr(a);
                let (b, _, ob) = self.expr(b);
                let out = if op.is_comparison() { DType::Bool } else { d };
                (binary(*op, d, &a, &b), out, oa + ob + cost::binary(*op, d))
            }
            Expr::Select(c, a, b) => {
                let (c, _, oc) = self.expr(c);
                let (a, d, oa) = self.expr(a);
                let (b, _, ob) = self.expr(b);
                let pick = branch(1);
                (format!("({c} ? {a} : {b})"), d, oc + oa + ob + pick)
            }
            Expr::Cast(to, a) => {
                let (a, from, o) = self.expr(a);
                (cast(from, *to, &a), *to, o + cost::cast(from, *to))
            }
        }
    }
}

/// Charges one execution of `ops`, when there is anything to charge.
fn charge_once(w: &mut Writer, ops: Ops) {
    if let Some(c) = charge(&ops, "1") {
        w.line(c);
    }
}

/// Operators of [`linear`]'s C: a multiply per coefficient other than ±1, an add or subtract
/// between terms and for a nonzero constant.
fn linear_ops(terms: &[(i64, String)], k: i64) -> u32 {
    let muls = terms.iter().filter(|(c, _)| c.abs() != 1).count();
    let adds = terms.len().saturating_sub(1) + usize::from(k != 0 && !terms.is_empty());
    (muls + adds) as u32
}

/// `Σ c * e + k` as C, without unit coefficients or zero terms.
fn linear(terms: &[(i64, String)], k: i64) -> String {
    let mut s = String::new();
    for (c, e) in terms {
        let mag = if c.abs() == 1 {
            e.clone()
        } else {
            format!("{} * {e}", c.abs())
        };
        match (*c < 0, s.is_empty()) {
            (false, true) => s = mag,
            (true, true) => s = format!("-{mag}"),
            (false, false) => s = format!("{s} + {mag}"),
            (true, false) => s = format!("{s} - {mag}"),
        }
    }
    match (k, s.is_empty()) {
        (k, true) => k.to_string(),
        (0, false) => s,
        (k, false) if k < 0 => format!("{s} - {}", -k),
        (k, false) => format!("{s} + {k}"),
    }
}
