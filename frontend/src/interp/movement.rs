//! Data-movement kernels: broadcast, transpose, slice, pad, concat, gather. All are exact copies.

use super::index::{broadcast_to, Strided};
use super::map_data;
use crate::ir::{strides, Data, Tensor};

pub(super) fn broadcast(x: &Tensor, shape: &[usize]) -> Data {
    map_data!(x.data(), v => broadcast_to(v, x.shape(), shape))
}

pub(super) fn transpose(x: &Tensor, perm: &[usize]) -> Data {
    let s = strides(x.shape());
    let out_shape: Vec<usize> = perm.iter().map(|&p| x.shape()[p]).collect();
    let out_strides: Vec<isize> = perm.iter().map(|&p| s[p] as isize).collect();
    map_data!(x.data(), v => Strided::new(&out_shape, out_strides.clone(), 0).map(|i| v[i]).collect())
}

pub(super) fn slice(x: &Tensor, starts: &[usize], steps: &[i64], sizes: &[usize]) -> Data {
    let s = strides(x.shape());
    let base: isize = starts.iter().zip(&s).map(|(&a, &b)| (a * b) as isize).sum();
    let view: Vec<isize> = steps.iter().zip(&s).map(|(&st, &b)| st as isize * b as isize).collect();
    map_data!(x.data(), v => Strided::new(sizes, view.clone(), base).map(|i| v[i]).collect())
}

/// `x` placed at offset `pads[..rank]` in a tensor of `shape` filled with `value`.
pub(super) fn pad(x: &Tensor, pads: &[usize], value: f64, shape: &[usize]) -> Data {
    let s = strides(shape);
    let base: isize = pads.iter().zip(&s).map(|(&p, &st)| (p * st) as isize).sum();
    let view: Vec<isize> = s.iter().map(|&st| st as isize).collect();
    let n: usize = shape.iter().product();
    fn place<T: Copy>(v: &[T], fill: T, n: usize, at: Strided) -> Vec<T> {
        let mut out = vec![fill; n];
        for (i, o) in at.enumerate() {
            out[o] = v[i];
        }
        out
    }
    let at = Strided::new(x.shape(), view, base);
    match x.data() {
        Data::F32(v) => Data::F32(place(v, value as f32, n, at)),
        Data::F64(v) => Data::F64(place(v, value, n, at)),
        Data::I64(v) => Data::I64(place(v, value as i64, n, at)),
        Data::Bool(v) => Data::Bool(place(v, value != 0.0, n, at)),
    }
}

pub(super) fn concat(parts: &[&Tensor], axis: usize) -> Data {
    let outer: usize = parts[0].shape()[..axis].iter().product();
    // Elements each part contributes per outer index.
    let chunk = |t: &Tensor| t.shape()[axis..].iter().product::<usize>();
    fn join<T: Copy>(outer: usize, parts: &[(&[T], usize)]) -> Vec<T> {
        let mut out = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
        for o in 0..outer {
            for &(v, c) in parts {
                out.extend_from_slice(&v[o * c..(o + 1) * c]);
            }
        }
        out
    }
    macro_rules! variant {
        ($var:ident) => {
            Data::$var(join(
                outer,
                &parts
                    .iter()
                    .map(|t| match t.data() {
                        Data::$var(v) => (v.as_slice(), chunk(t)),
                        _ => unreachable!("concat operands share a type"),
                    })
                    .collect::<Vec<_>>(),
            ))
        };
    }
    match parts[0].data() {
        Data::F32(_) => variant!(F32),
        Data::F64(_) => variant!(F64),
        Data::I64(_) => variant!(I64),
        Data::Bool(_) => variant!(Bool),
    }
}

pub(super) fn gather(data: &Tensor, indices: &Tensor, axis: usize) -> Result<Data, String> {
    let Data::I64(idx) = indices.data() else {
        unreachable!("gather indices are i64")
    };
    let dim = data.shape()[axis];
    let resolved = idx
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + dim as i64 } else { i };
            if (0..dim as i64).contains(&j) {
                Ok(j as usize)
            } else {
                Err(format!("index {i} out of range for axis {axis} of extent {dim}"))
            }
        })
        .collect::<Result<Vec<usize>, String>>()?;
    let outer: usize = data.shape()[..axis].iter().product();
    let inner: usize = data.shape()[axis + 1..].iter().product();
    fn pick<T: Copy>(v: &[T], outer: usize, dim: usize, inner: usize, idx: &[usize]) -> Vec<T> {
        let mut out = Vec::with_capacity(outer * idx.len() * inner);
        for o in 0..outer {
            for &i in idx {
                let start = (o * dim + i) * inner;
                out.extend_from_slice(&v[start..start + inner]);
            }
        }
        out
    }
    Ok(map_data!(data.data(), v => pick(v, outer, dim, inner, &resolved)))
}
