//! Deterministic pseudo-random tensors, for runs without given inputs and for the noise that
//! draws dropout masks in training programs ([`dropout_noise`]), and numpy's legacy uniform
//! generator ([`numpy_uniform`]) for the ONNX reference's dropout masks.
//!
//! The generator is specified exactly so that other runtimes (the generated C programs) can
//! reproduce it: SplitMix64 seeded with `seed + 0x9E3779B97F4A7C15 * (input_index + 1)`;
//! each element takes the next 64-bit output `r` and maps it to
//! - f32: `(r >> 40) as f32 / 2^24`, uniform in [0, 1);
//! - f64: `(r >> 11) as f64 / 2^53`, uniform in [0, 1);
//! - i64: `(r >> 33) % m`, in `0..m`, where `m` is 10, or the extent of the smallest table
//!   the input indexes when that is less ([`index_values`], [`index_extents`]): so a model's
//!   embedding of 2 rows runs on pseudo-random ids as well as one of 30 000;
//! - bool: `r >> 63 == 1`.

use crate::ir::{DType, Data, Graph, Op, Tensor, TensorType};

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// How many distinct values an i64 input draws: 10, or `extent` when the input indexes a
/// table of fewer positions along the gathered axis (at least 1).
fn index_values(extent: Option<usize>) -> u64 {
    extent.map_or(10, |e| e.clamp(1, 10) as u64)
}

/// For each input of `g`, in input order, the least extent of the axes it indexes: the
/// gathers whose indices are the input itself or a reshape of it (reshapes of reshapes
/// included). `None` for an input that no gather reads so; its values are not bounded.
pub fn index_extents(g: &Graph) -> Vec<Option<usize>> {
    let users = g.users();
    g.inputs()
        .map(|input| {
            let mut least: Option<usize> = None;
            let mut reached = vec![input];
            while let Some(id) = reached.pop() {
                for &u in &users[id.index()] {
                    let node = g.node(u);
                    match node.op {
                        Op::Reshape { .. } => reached.push(u),
                        Op::Gather { axis } if node.inputs[1] == id => {
                            let extent = g.node(node.inputs[0]).ty.shape[axis];
                            least = Some(least.map_or(extent, |l| l.min(extent)));
                        }
                        _ => {}
                    }
                }
            }
            least
        })
        .collect()
}

/// A tensor of type `ty` filled as described in the module documentation, for input
/// `input_index` whose i64 values index at most `index_extent` positions (see
/// [`index_extents`]).
pub fn random_input(ty: &TensorType, seed: u64, input_index: usize, index_extent: Option<usize>) -> Tensor {
    let mut rng = SplitMix64(seed.wrapping_add(GOLDEN.wrapping_mul(input_index as u64 + 1)));
    let n = ty.numel();
    let data = match ty.dtype {
        DType::F32 => Data::F32(
            (0..n)
                .map(|_| (rng.next() >> 40) as f32 / (1u64 << 24) as f32)
                .collect(),
        ),
        DType::F64 => Data::F64(
            (0..n)
                .map(|_| (rng.next() >> 11) as f64 / (1u64 << 53) as f64)
                .collect(),
        ),
        DType::I64 => {
            let values = index_values(index_extent);
            Data::I64((0..n).map(|_| ((rng.next() >> 33) % values) as i64).collect())
        }
        DType::Bool => Data::Bool((0..n).map(|_| rng.next() >> 63 == 1).collect()),
    };
    Tensor::new(ty.shape.clone(), data).expect("the element count matches the type")
}

/// A value for every input of `g`, in input order, each drawn by [`random_input`] with its
/// [`index_extents`]: what `swflow run` and the built program draw when given no inputs.
pub fn random_inputs(g: &Graph, seed: u64) -> Vec<Tensor> {
    let extents = index_extents(g);
    g.inputs()
        .zip(extents)
        .enumerate()
        .map(|(i, (id, extent))| random_input(&g.node(id).ty, seed, i, extent))
        .collect()
}

/// [`random_input`] for a tensor whose values index nothing (i64 values in `0..10`).
pub fn random_tensor(ty: &TensorType, seed: u64, input_index: usize) -> Tensor {
    random_input(ty, seed, input_index, None)
}

/// The uniform noise `[0, 1)` (f32) of dropout stream `stream` at training step `step` (from
/// 0), for a run seeded with `seed`: the f32 [`random_tensor`] of input index `stream` with
/// the seed `r`, where `r` is the first SplitMix64 output from state
/// `seed + 0x9E3779B97F4A7C15 * (step + 1)`. Every step draws fresh noise, and a run resumed
/// at step `t` draws what an uninterrupted run draws there. The generated training programs
/// implement the same function (`swflow_fill_noise`).
pub fn dropout_noise(seed: u64, step: u64, stream: usize, shape: &[usize]) -> Tensor {
    let step_seed = SplitMix64(seed.wrapping_add(GOLDEN.wrapping_mul(step.wrapping_add(1)))).next();
    let ty = TensorType::new(DType::F32, shape.to_vec()).expect("a dropout input's shape is valid");
    random_tensor(&ty, step_seed, stream)
}

/// The first `n` doubles of numpy's legacy generator after `numpy.random.seed(seed)`:
/// `numpy.random.uniform(0, 1, n)`, as the ONNX reference draws dropout masks.
///
/// The generator is MT19937 with its reference initialisation from one 32-bit seed; each
/// double takes two 32-bit outputs `a`, `b` as `((a >> 5) * 2^26 + (b >> 6)) / 2^53`.
pub fn numpy_uniform(seed: u32, n: usize) -> Vec<f64> {
    let mut mt = Mt19937::new(seed);
    (0..n)
        .map(|_| {
            let a = (mt.next() >> 5) as f64;
            let b = (mt.next() >> 6) as f64;
            (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
        })
        .collect()
}

/// The 32-bit Mersenne Twister (Matsumoto and Nishimura, 1998).
struct Mt19937 {
    state: [u32; 624],
    pos: usize,
}

impl Mt19937 {
    fn new(seed: u32) -> Mt19937 {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { state, pos: 624 }
    }

    fn next(&mut self) -> u32 {
        if self.pos == 624 {
            for i in 0..624 {
                let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % 624] & 0x7fff_ffff);
                let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
                self.state[i] = self.state[(i + 397) % 624] ^ (y >> 1) ^ mag;
            }
            self.pos = 0;
        }
        let mut y = self.state[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Published SplitMix64 outputs for seed 1234567 (from the reference C implementation).
    #[test]
    fn splitmix64_matches_reference_sequence() {
        let mut r = SplitMix64(1234567);
        let got: Vec<u64> = (0..3).map(|_| r.next()).collect();
        assert_eq!(got, [6457827717110365317, 3203168211198807973, 9817491932198370423]);
    }

    #[test]
    fn f32_values_are_in_unit_interval_and_seed_dependent() {
        let ty = TensorType::new(DType::F32, vec![1000]).unwrap();
        let a = random_tensor(&ty, 0, 0).to_f64_vec();
        let b = random_tensor(&ty, 1, 0).to_f64_vec();
        assert!(a.iter().all(|&x| (0.0..1.0).contains(&x)));
        assert_ne!(a, b);
        assert_eq!(a, random_tensor(&ty, 0, 0).to_f64_vec());
    }

    /// An input indexing a table of 3 rows directly and one of 2 through a reshape draws
    /// values below 2; one that a gather reads only after arithmetic, or none reads, is not
    /// bounded.
    #[test]
    fn index_inputs_draw_within_the_least_table_they_index() {
        use crate::ir::{BinaryOp, Tensor};
        use std::sync::Arc;
        let mut g = Graph::new("embeddings");
        let i64s = |shape: Vec<usize>| TensorType::new(DType::I64, shape).unwrap();
        let ids = g.add_input("ids", i64s(vec![4, 64]));
        let other = g.add_input("other", i64s(vec![64]));
        let plain = g.add_input("plain", i64s(vec![64]));
        let table = |g: &mut Graph, name: &str, rows: usize| {
            let t = Tensor::new(vec![rows, 3], Data::F32(vec![0.5; rows * 3])).unwrap();
            g.add_const(name, Arc::new(t))
        };
        let (three, two) = (table(&mut g, "three", 3), table(&mut g, "two", 2));
        g.add_node("g3", Op::Gather { axis: 0 }, vec![three, ids], None)
            .unwrap();
        let flat = g
            .add_node("flat", Op::Reshape { shape: vec![256] }, vec![ids], None)
            .unwrap();
        g.add_node("g2", Op::Gather { axis: 0 }, vec![two, flat], None).unwrap();
        let shifted = g
            .add_node("shifted", Op::Binary(BinaryOp::Add), vec![other, other], None)
            .unwrap();
        g.add_node("g4", Op::Gather { axis: 0 }, vec![two, shifted], None)
            .unwrap();
        let extents = index_extents(&g);
        assert_eq!(extents, [Some(2), None, None]);
        let drawn = random_input(&g.node(ids).ty, 0, 0, extents[0]).to_f64_vec();
        assert!(drawn.iter().all(|&v| v == 0.0 || v == 1.0), "{drawn:?}");
        assert!(drawn.contains(&0.0) && drawn.contains(&1.0));
        let free = random_input(&g.node(plain).ty, 0, 2, extents[2]).to_f64_vec();
        assert_eq!(free, random_tensor(&g.node(plain).ty, 0, 2).to_f64_vec());
        assert!(free.iter().any(|&v| v >= 2.0) && free.iter().all(|&v| (0.0..10.0).contains(&v)));
    }

    #[test]
    fn numpy_uniform_matches_numpy() {
        // numpy 2.4: `np.random.seed(0); np.random.uniform(0, 1, 3)`, and element 999 after
        // `np.random.seed(1234567)` (past the first regeneration of the state).
        assert_eq!(
            numpy_uniform(0, 3),
            [0.5488135039273248, 0.7151893663724195, 0.6027633760716439]
        );
        assert_eq!(numpy_uniform(1_234_567, 1000)[999], 0.7367113465158037);
    }
}
