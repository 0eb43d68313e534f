//! Transposing copies: point nests that store f32 values into an LDM target contiguous along
//! the innermost loop, from loads contiguous along the loop outside it (a transpose, or any
//! lane-wise function of such loads), walk 4 × 4 blocks of points. Each block takes four
//! vector loads per place along the outer loop, computes lane by lane, transposes the four
//! results in registers and stores four vectors along the inner loop: where the plain nest
//! would gather every vector from four scalar loads.
//!
//! Every point stores the value the plain nest stores there, computed by the same lane-wise
//! operations. The loads never read the target's buffer, and the code checks at entry that
//! the target's rows do not overlap (else the plain loops run), so the order of the stores
//! does not matter: the results are equal bit for bit.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::ConstantData;
use cranelift_codegen::ir::{types, Endianness, Immediate, InstBuilder, MemFlagsData, Value as Val};

use super::{lane_wise, ldm_places, vector_flags, Lower, Strided, LANES};
use crate::cpe::{Place, Stmt, Var};

/// Whether the two innermost levels of a point nest (of `levels` levels) can run in 4 × 4
/// transposed blocks: the body is one f32 store into an LDM target that moves by one element
/// along the innermost level; its value is lane-wise (see [`lane_wise`]) in f32 LDM loads
/// from other buffers that move by one element along the level outside it; and some load
/// does not move by one element along the innermost level (else the plain vector loop reads
/// contiguous vectors already).
pub(super) fn transposable(body: &[Stmt], strided: &[Strided], levels: usize) -> bool {
    let [Stmt::Store { place, value }] = body else {
        return false;
    };
    let Place::Ldm { buf: target, .. } = place else {
        return false;
    };
    if levels < 2 {
        return false;
    }
    let (outer, inner) = (levels - 2, levels - 1);
    let find = |p: &Place| strided.iter().find(|s| std::ptr::eq(s.place, p) && s.f32);
    let Some(target_strided) = find(place) else {
        return false;
    };
    if target_strided.slopes[inner] != Some(1) {
        return false;
    }
    let mut loads = Vec::new();
    ldm_places(value, &mut loads);
    let own_buffers = loads
        .iter()
        .all(|p| matches!(p, Place::Ldm { buf, .. } if buf != target));
    let gathered = loads
        .iter()
        .any(|p| find(p).is_some_and(|s| s.slopes[inner] != Some(1)));
    let along_outer = |p: &Place| find(p).and_then(|s| s.slopes[outer]).filter(|&d| d == 1);
    !loads.is_empty() && own_buffers && gathered && lane_wise(value, &along_outer)
}

/// The 16 bytes of a shuffle that takes 32-bit lanes `lanes` (0 to 3 from the first vector,
/// 4 to 7 from the second).
fn lanes_mask(lanes: [u8; 4]) -> ConstantData {
    let bytes: Vec<u8> = lanes.iter().flat_map(|&l| (0..4).map(move |b| l * 4 + b)).collect();
    ConstantData::from(bytes)
}

impl<'f> Lower<'f, '_> {
    /// Runs the two innermost levels of a [`transposable`] nest in 4 × 4 blocks while four
    /// rows of the outer level remain, each row's last columns point by point; the plain
    /// levels after it do the remaining rows. The outer level's variable and addresses hold
    /// the first row's on entry, and the first row not done on exit.
    pub(super) fn transposed_rows(
        &mut self,
        vars: &[Var],
        from: &[Val],
        to: &[Val],
        body: &'f [Stmt],
        strided: &[Strided],
    ) {
        let (outer, inner) = (vars.len() - 2, vars.len() - 1);
        let Stmt::Store { place, value } = &body[0] else {
            unreachable!("transposable bodies are one store")
        };
        let var_o = self.vars[vars[outer].0 as usize];
        let var_i = self.vars[vars[inner].0 as usize];
        let target = strided
            .iter()
            .position(|s| std::ptr::eq(s.place, place))
            .expect("the target is strided");
        // Per place, its address steps over zero to three points along each level.
        let multiples = |l: &mut Self, level: usize| -> Vec<[Val; 4]> {
            strided
                .iter()
                .map(|s| {
                    let step = s.step[level];
                    let zero = l.b.ins().iconst(types::I64, 0);
                    let two = l.b.ins().iadd(step, step);
                    let three = l.b.ins().iadd(two, step);
                    [zero, step, two, three]
                })
                .collect()
        };
        let along_o = multiples(self, outer);
        let along_i = multiples(self, inner);

        // The blocks store a row's points after those of the next rows' first columns, which
        // changes nothing only when the target's rows do not overlap.
        let row_step = self.b.ins().iabs(strided[target].step[outer]);
        let trip = self.b.ins().isub(to[inner], from[inner]);
        let row_bytes = self.b.ins().imul_imm_s(trip, strided[target].elem_bytes);
        let apart = self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, row_step, row_bytes);

        let (head, rows, after) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let four = self.fits(var_o, LANES, to[outer]);
        let go = self.b.ins().band(four, apart);
        self.b.ins().brif(go, rows, &[], after, &[]);
        self.b.switch_to_block(rows);
        self.enter(var_i, from[inner], inner, strided);

        // Blocks of four columns.
        let (chead, block, rest) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
        self.b.ins().jump(chead, &[]);
        self.b.switch_to_block(chead);
        let go = self.fits(var_i, LANES, to[inner]);
        self.b.ins().brif(go, block, &[], rest, &[]);
        self.b.switch_to_block(block);
        // Column k's value over the block's four rows, then row m's over its four columns.
        let columns: Vec<Val> = (0..LANES as usize)
            .map(|k| {
                self.lane_value(value, true, &mut |l, p| {
                    let s = strided
                        .iter()
                        .position(|s| std::ptr::eq(s.place, p))
                        .expect("loads are strided");
                    let at = l.b.use_var(strided[s].addr[inner]);
                    let at = l.b.ins().iadd(at, along_i[s][k]);
                    l.b.ins().load(types::F32X4, vector_flags(), at, 0)
                })
            })
            .collect();
        let rows_of_block = self.transpose4(&columns);
        for (m, row) in rows_of_block.into_iter().enumerate() {
            let at = self.b.use_var(strided[target].addr[inner]);
            let at = self.b.ins().iadd(at, along_o[target][m]);
            self.b.ins().store(vector_flags(), row, at, 0);
        }
        self.advance(var_i, inner, LANES, strided);
        self.b.ins().jump(chead, &[]);

        // The last columns, point by point.
        self.b.switch_to_block(rest);
        let (point, done) = (self.b.create_block(), self.b.create_block());
        let i = self.b.use_var(var_i);
        let go = self.b.ins().icmp(IntCC::SignedLessThan, i, to[inner]);
        self.b.ins().brif(go, point, &[], done, &[]);
        self.b.switch_to_block(point);
        for row in 0..LANES as usize {
            // Each place's address offset to this row.
            let down: Vec<Val> = along_o.iter().map(|m| m[row]).collect();
            let x = self.lane_value(value, false, &mut |l, p| {
                let s = strided
                    .iter()
                    .position(|s| std::ptr::eq(s.place, p))
                    .expect("loads are strided");
                let at = l.b.use_var(strided[s].addr[inner]);
                let at = l.b.ins().iadd(at, down[s]);
                l.b.ins().load(types::F32, vector_flags(), at, 0)
            });
            let at = self.b.use_var(strided[target].addr[inner]);
            let at = self.b.ins().iadd(at, down[target]);
            self.b.ins().store(vector_flags(), x, at, 0);
        }
        self.advance(var_i, inner, 1, strided);
        self.b.ins().jump(rest, &[]);

        self.b.switch_to_block(done);
        self.advance(var_o, outer, LANES, strided);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(after);
    }

    /// The 4 × 4 transpose of four f32 vectors: lane `j` of result `m` is lane `m` of `x[j]`.
    fn transpose4(&mut self, x: &[Val]) -> Vec<Val> {
        let little = MemFlagsData::new().with_endianness(Endianness::Little);
        let bytes: Vec<Val> = x
            .iter()
            .map(|&v| self.b.ins().bitcast(types::I8X16, little, v))
            .collect();
        let shuffle = |l: &mut Self, a: Val, b: Val, lanes: [u8; 4]| {
            let mask: Immediate = l.b.func.dfg.immediates.push(lanes_mask(lanes));
            l.b.ins().shuffle(a, b, mask)
        };
        // Interleave pairs of rows, then pairs of halves.
        let t0 = shuffle(self, bytes[0], bytes[1], [0, 4, 1, 5]);
        let t1 = shuffle(self, bytes[0], bytes[1], [2, 6, 3, 7]);
        let t2 = shuffle(self, bytes[2], bytes[3], [0, 4, 1, 5]);
        let t3 = shuffle(self, bytes[2], bytes[3], [2, 6, 3, 7]);
        let rows = [
            shuffle(self, t0, t2, [0, 1, 4, 5]),
            shuffle(self, t0, t2, [2, 3, 6, 7]),
            shuffle(self, t1, t3, [0, 1, 4, 5]),
            shuffle(self, t1, t3, [2, 3, 6, 7]),
        ];
        rows.iter()
            .map(|&r| self.b.ins().bitcast(types::F32X4, little, r))
            .collect()
    }
}
