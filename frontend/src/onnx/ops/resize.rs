//! Resize and Upsample: separable resampling, one axis at a time, as the ONNX definition
//! computes it. For every output position of an axis the importer works out (in f64, at
//! import) the input positions that contribute and their weights; the graph then gathers each
//! tap along the axis and sums the weighted taps. Nearest-neighbour resampling has a single
//! tap of weight one and becomes one gather: an exact copy.

use super::{table, Cx};

/// Most input positions one output position may draw on: antialiased downsampling widens the
/// filter with the reduction factor, and every tap is a gather in the graph.
const MAX_TAPS: usize = 64;
use crate::ir::{checked_numel, BinaryOp, DType, Data, NodeId, Op, Tensor};

/// How output coordinates map back to input coordinates.
#[derive(Clone, Copy, PartialEq)]
enum Transform {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

#[derive(Clone, Copy, PartialEq)]
enum Nearest {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Nearest(Nearest),
    Linear,
    Cubic { a: f64 },
}

/// Everything that decides the taps of one axis.
struct Sampling {
    mode: Mode,
    transform: Transform,
    antialias: bool,
    exclude_outside: bool,
}

/// The taps of one axis: for output position `o`, input positions `index[o * n + t]` with
/// weights `weight[o * n + t]`, `t < n`; and which positions take the extrapolation value.
struct Taps {
    n: usize,
    index: Vec<i64>,
    weight: Vec<f64>,
    extrapolated: Vec<bool>,
}

impl Sampling {
    /// The weights of the taps around a source coordinate whose distance to the tap left of it
    /// is `ratio` (in `(0, 1]`), for an axis scaled by `scale`.
    fn coeffs(&self, ratio: f64, scale: f64) -> Vec<f64> {
        match self.mode {
            Mode::Nearest(rule) => {
                let right = if ratio == 1.0 {
                    true
                } else {
                    match rule {
                        Nearest::RoundPreferFloor => ratio > 0.5,
                        Nearest::RoundPreferCeil => ratio >= 0.5,
                        Nearest::Floor => false,
                        Nearest::Ceil => true,
                    }
                };
                if right {
                    vec![0.0, 1.0]
                } else {
                    vec![1.0, 0.0]
                }
            }
            Mode::Linear if self.antialias => {
                let scale = scale.min(1.0);
                let start = (-1.0 / scale).floor() as i64 + 1;
                let footprint = 2 - 2 * start;
                let c: Vec<f64> = (start..start + footprint)
                    .map(|i| (1.0 - ((i as f64 - ratio) * scale).abs()).clamp(0.0, 1.0))
                    .collect();
                normalized(c)
            }
            Mode::Linear => vec![1.0 - ratio, ratio],
            Mode::Cubic { a } if self.antialias => {
                let scale = scale.min(1.0);
                let start = (-2.0 / scale).floor() as i64 + 1;
                let end = 2 - start;
                let c: Vec<f64> = (start..end).map(|i| cubic(a, scale * (i as f64 - ratio))).collect();
                normalized(c)
            }
            Mode::Cubic { a } => {
                let r = ratio;
                vec![
                    ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                    ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                    ((a + 2.0) * (1.0 - r) - (a + 3.0)) * (1.0 - r) * (1.0 - r) + 1.0,
                    ((a * ((1.0 - r) + 1.0) - 5.0 * a) * ((1.0 - r) + 1.0) + 8.0 * a) * ((1.0 - r) + 1.0) - 4.0 * a,
                ]
            }
        }
    }

    /// The taps of an axis of `input` elements resampled to `output` with `scale`, and the
    /// region of interest `roi` (start, end) for crop-and-resize.
    fn taps(&self, input: usize, output: usize, scale: f64, roi: (f64, f64)) -> Taps {
        let (w, wf, of) = (input as i64, input as f64, scale * input as f64);
        let mut taps = Taps {
            n: 0,
            index: Vec::new(),
            weight: Vec::new(),
            extrapolated: Vec::new(),
        };
        for o in 0..output {
            let y = o as f64;
            let x = match self.transform {
                Transform::AlignCorners if of == 1.0 => 0.0,
                Transform::AlignCorners => y * (wf - 1.0) / (of - 1.0),
                Transform::Asymmetric => y / scale,
                Transform::TfCropAndResize => {
                    let x = if of == 1.0 {
                        (roi.1 - roi.0) * (wf - 1.0) / 2.0
                    } else {
                        y * (roi.1 - roi.0) * (wf - 1.0) / (of - 1.0)
                    };
                    x + roi.0 * (wf - 1.0)
                }
                Transform::PytorchHalfPixel if of == 1.0 => -0.5,
                Transform::PytorchHalfPixel | Transform::HalfPixel => (y + 0.5) / scale - 0.5,
                Transform::HalfPixelSymmetric => {
                    let adjustment = output as f64 / of;
                    let offset = wf / 2.0 * (1.0 - adjustment);
                    offset + (y + 0.5) / scale - 0.5
                }
            };
            taps.extrapolated
                .push(self.transform == Transform::TfCropAndResize && (x < 0.0 || x > wf - 1.0));
            let floor = x.floor();
            let ratio = if x == floor { 1.0 } else { x - floor };
            let mut c = self.coeffs(ratio, scale);
            let n = c.len();
            taps.n = n;
            // The n positions nearest to x, ties to the smaller, as the definition picks
            // them from the edge-padded axis.
            let pad = n.div_ceil(2) as f64;
            let xp = x + pad;
            let p = xp.floor();
            let frac = xp - p;
            let half = (n / 2) as i64;
            let offset = if n % 2 == 0 {
                if frac == 0.0 {
                    -half
                } else {
                    -half + 1
                }
            } else {
                let base = -(((n - 1) / 2) as i64);
                if frac <= 0.5 {
                    base
                } else {
                    base + 1
                }
            };
            let start = p as i64 + offset - pad as i64;
            if self.exclude_outside {
                for (t, ct) in c.iter_mut().enumerate() {
                    let i = start + t as i64;
                    if i < 0 || i >= w {
                        *ct = 0.0;
                    }
                }
                let sum: f64 = c.iter().sum();
                let sum = if sum == 0.0 { 1.0 } else { sum };
                c.iter_mut().for_each(|v| *v /= sum);
            }
            for (t, ct) in c.into_iter().enumerate() {
                taps.index.push((start + t as i64).clamp(0, w - 1));
                taps.weight.push(ct);
            }
        }
        taps
    }
}

fn normalized(c: Vec<f64>) -> Vec<f64> {
    let sum: f64 = c.iter().sum();
    c.into_iter().map(|v| v / sum).collect()
}

/// The cubic convolution kernel with parameter `a` at distance `x`.
fn cubic(a: f64, x: f64) -> f64 {
    let x = x.abs();
    let (x2, x3) = (x * x, x * x * x);
    if x <= 1.0 {
        (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
    } else if x < 2.0 {
        a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
    } else {
        0.0
    }
}

/// `x` resampled along `axis` by `taps`.
fn resample_axis(cx: &mut Cx, x: NodeId, axis: usize, taps: &Taps, extrapolation: f64) -> Result<NodeId, String> {
    let shape = cx.shape(x);
    let output = taps.extrapolated.len();
    let dtype = cx.ty(x).dtype;
    let mut out_shape = shape.clone();
    out_shape[axis] = output;
    checked_numel(&out_shape).map_err(|e| e.0)?;
    let mut weight_shape = vec![1; shape.len()];
    weight_shape[axis] = output;
    let single = taps
        .weight
        .chunks(taps.n)
        .all(|w| w.iter().filter(|&&v| v == 1.0).count() == 1 && w.iter().all(|&v| v == 0.0 || v == 1.0));
    let y = if single {
        let pick: Vec<i64> = taps
            .weight
            .chunks(taps.n)
            .zip(taps.index.chunks(taps.n))
            .map(|(w, i)| i[w.iter().position(|&v| v == 1.0).unwrap_or(0)])
            .collect();
        let idx = cx.i64_const(vec![output], pick)?;
        cx.op(Op::Gather { axis }, &[x, idx])?
    } else {
        let mut acc = None;
        for t in 0..taps.n {
            let idx: Vec<i64> = (0..output).map(|o| taps.index[o * taps.n + t]).collect();
            let w: Vec<f64> = (0..output).map(|o| taps.weight[o * taps.n + t]).collect();
            let idx = cx.i64_const(vec![output], idx)?;
            let g = cx.op(Op::Gather { axis }, &[x, idx])?;
            let data = match dtype {
                DType::F64 => Data::F64(w),
                _ => Data::F32(w.into_iter().map(|v| v as f32).collect()),
            };
            let w = cx.constant(Tensor::new(weight_shape.clone(), data).map_err(|e| e.0)?);
            let term = cx.binary(BinaryOp::Mul, g, w)?;
            acc = Some(match acc {
                None => term,
                Some(a) => cx.binary(BinaryOp::Add, a, term)?,
            });
        }
        acc.ok_or("resampling with no taps")?
    };
    if !taps.extrapolated.iter().any(|&e| e) {
        return Ok(y);
    }
    let mask = cx.bool_const(weight_shape, taps.extrapolated.clone())?;
    let fill = cx.scalar(dtype, extrapolation);
    cx.select(mask, fill, y)
}

/// Optional float operand `i` (roi, scales); empty tensors count as absent.
fn floats(cx: &mut Cx, i: usize) -> Result<Option<Vec<f64>>, String> {
    Ok(cx.const_input(i)?.map(|t| t.to_f64_vec()).filter(|v| !v.is_empty()))
}

pub(super) fn resize(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x);
    let rank = shape.len();
    if !cx.ty(x).dtype.is_float() {
        return Err(format!("input {} must be floating point", cx.ty(x)));
    }
    let upsample = cx.op_type() == "Upsample";
    let legacy = upsample || cx.opset < 11;
    let mode_name = cx.attrs.string("mode", "nearest")?;
    let mode = match mode_name.as_str() {
        "nearest" if legacy => Mode::Nearest(Nearest::Floor),
        "nearest" => Mode::Nearest(match cx.attrs.string("nearest_mode", "round_prefer_floor")?.as_str() {
            "round_prefer_floor" => Nearest::RoundPreferFloor,
            "round_prefer_ceil" => Nearest::RoundPreferCeil,
            "floor" => Nearest::Floor,
            "ceil" => Nearest::Ceil,
            other => return Err(format!("nearest_mode '{other}' is not supported")),
        }),
        "linear" | "bilinear" | "trilinear" => Mode::Linear,
        "cubic" if !legacy => Mode::Cubic {
            a: cx.attrs.float("cubic_coeff_a", -0.75)? as f64,
        },
        other => return Err(format!("mode '{other}' is not supported")),
    };
    let transform = if legacy {
        Transform::Asymmetric
    } else {
        match cx
            .attrs
            .string("coordinate_transformation_mode", "half_pixel")?
            .as_str()
        {
            "half_pixel" => Transform::HalfPixel,
            "half_pixel_symmetric" => Transform::HalfPixelSymmetric,
            "pytorch_half_pixel" => Transform::PytorchHalfPixel,
            "align_corners" => Transform::AlignCorners,
            "asymmetric" => Transform::Asymmetric,
            "tf_crop_and_resize" => Transform::TfCropAndResize,
            other => return Err(format!("coordinate_transformation_mode '{other}' is not supported")),
        }
    };
    let antialias = cx.opset >= 18 && cx.attrs.flag("antialias", false)?;
    if antialias && matches!(mode, Mode::Nearest(_)) {
        return Err("antialias applies to linear and cubic modes only".into());
    }
    let sampling = Sampling {
        mode,
        transform,
        antialias,
        exclude_outside: !legacy && cx.attrs.flag("exclude_outside", false)?,
    };
    let extrapolation = cx.attrs.float("extrapolation_value", 0.0)? as f64;

    // Axes, scales or sizes, and the region of interest, all per resized axis.
    let axes: Vec<usize> = match cx.opset >= 18 && !upsample {
        true => match cx.attrs.ints("axes")? {
            Some(a) => a.iter().map(|&a| super::axis(a, rank)).collect::<Result<_, _>>()?,
            None => (0..rank).collect(),
        },
        false => (0..rank).collect(),
    };
    let (roi, scales, sizes) = if upsample && cx.opset < 9 {
        let s = cx.attrs.floats("scales")?.ok_or("attribute 'scales' is required")?;
        (None, Some(s.into_iter().map(|v| v as f64).collect()), None)
    } else if legacy {
        (None, floats(cx, 1)?, None)
    } else {
        let roi = floats(cx, 1)?;
        let scales = floats(cx, 2)?;
        let sizes = cx.const_ints(3)?.filter(|v| !v.is_empty());
        (roi, scales, sizes)
    };
    let k = axes.len();
    let (scale, out): (Vec<f64>, Vec<usize>) = match (scales, sizes) {
        (Some(s), None) => {
            if s.len() != k {
                return Err(format!("{} scales for {k} axes", s.len()));
            }
            if s.iter().any(|&v| !(v > 0.0 && v.is_finite())) {
                return Err(format!("scales must be positive, got {s:?}"));
            }
            let out = axes
                .iter()
                .zip(&s)
                .map(|(&a, &v)| (v * shape[a] as f64) as usize)
                .collect();
            (s, out)
        }
        (None, Some(sz)) => {
            if sz.len() != k || sz.iter().any(|&v| v < 0) {
                return Err(format!("sizes {sz:?} do not give {k} extents"));
            }
            let mut scale: Vec<f64> = axes
                .iter()
                .zip(&sz)
                .map(|(&a, &v)| v as f64 / shape[a] as f64)
                .collect();
            let mut out: Vec<usize> = sz.iter().map(|&v| v as usize).collect();
            let policy = if cx.opset >= 18 {
                cx.attrs.string("keep_aspect_ratio_policy", "stretch")?
            } else {
                "stretch".to_string()
            };
            let pick = match policy.as_str() {
                "stretch" => None,
                "not_larger" => Some(scale.iter().copied().fold(f64::INFINITY, f64::min)),
                "not_smaller" => Some(scale.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
                other => return Err(format!("keep_aspect_ratio_policy '{other}' is not supported")),
            };
            if let Some(s) = pick {
                scale = vec![s; k];
                out = axes.iter().map(|&a| (s * shape[a] as f64 + 0.5) as usize).collect();
            }
            (scale, out)
        }
        (Some(_), Some(_)) => return Err("only one of scales and sizes may be given".into()),
        (None, None) => return Err("one of scales and sizes is required".into()),
    };
    if let Some(r) = &roi {
        if r.len() != 2 * k {
            return Err(format!("roi has {} values for {k} axes", r.len()));
        }
    }
    let mut final_shape = shape.clone();
    for (i, &a) in axes.iter().enumerate() {
        final_shape[a] = out[i];
    }
    crate::ir::TensorType::new(cx.ty(x).dtype, final_shape).map_err(|e| e.0)?;
    let mut y = x;
    for (i, &a) in axes.iter().enumerate() {
        let roi_a = roi.as_ref().map_or((0.0, 1.0), |r| (r[i], r[k + i]));
        let identity = (scale[i] - 1.0).abs() <= 1e-9 * scale[i].abs().max(1.0)
            && out[i] == shape[a]
            && (roi.is_none() || (roi_a.0.abs() <= 1e-9 && (roi_a.1 - 1.0).abs() <= 1e-9));
        if identity {
            continue;
        }
        if shape[a] == 0 {
            return Err(format!("axis {a} to resize is empty"));
        }
        let width = sampling.coeffs(0.5, scale[i]).len();
        if width > MAX_TAPS {
            return Err(format!(
                "resampling axis {a} by {} needs {width} taps per output, more than {MAX_TAPS}",
                scale[i]
            ));
        }
        table(out[i].checked_mul(width), "the resampling taps")?;
        let taps = sampling.taps(shape[a], out[i], scale[i], roi_a);
        y = resample_axis(cx, y, a, &taps, extrapolation)?;
    }
    Ok(vec![y])
}
