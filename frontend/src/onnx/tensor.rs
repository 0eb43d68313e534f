//! `TensorProto` to [`Tensor`]: raw little-endian bytes, typed repeated fields, or external
//! data files confined to the model's folder.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

use super::proto::{tensor_proto::DataLocation, TensorProto};
use crate::ir::{checked_numel, DType, Data, Tensor};

/// ONNX `TensorProto.DataType` codes swflow reads.
mod code {
    pub const FLOAT: i32 = 1;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const BOOL: i32 = 9;
    pub const DOUBLE: i32 = 11;
}

/// Maps an ONNX element type to a [`DType`].
pub fn dtype_from_onnx(code: i32) -> Result<DType, String> {
    Ok(match code {
        code::FLOAT => DType::F32,
        code::DOUBLE => DType::F64,
        code::INT64 => DType::I64,
        code::BOOL => DType::Bool,
        other => {
            return Err(format!(
                "element type {} is not supported (supported: float, double, int64, bool)",
                onnx_type_name(other)
            ))
        }
    })
}

fn onnx_type_name(code: i32) -> String {
    let name = match code {
        0 => "UNDEFINED",
        1 => "FLOAT",
        2 => "UINT8",
        3 => "INT8",
        4 => "UINT16",
        5 => "INT16",
        6 => "INT32",
        7 => "INT64",
        8 => "STRING",
        9 => "BOOL",
        10 => "FLOAT16",
        11 => "DOUBLE",
        12 => "UINT32",
        13 => "UINT64",
        14 => "COMPLEX64",
        15 => "COMPLEX128",
        16 => "BFLOAT16",
        _ => return format!("code {code}"),
    };
    name.to_string()
}

/// Decodes a tensor. `dir` is the model's folder, where external data may live.
///
/// INT32 tensors (used by some exporters for indices and shapes) are widened to i64.
pub fn tensor_from_proto(t: &TensorProto, dir: Option<&Path>) -> Result<Tensor, String> {
    if t.segment.is_some() {
        return Err("segmented tensors are not supported".into());
    }
    let shape = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
        .collect::<Result<Vec<_>, _>>()?;
    let n = checked_numel(&shape).map_err(|e| e.0)?;
    let elem = t.data_type();
    let width = match elem {
        code::INT32 => 4,
        other => dtype_from_onnx(other)?.size_bytes(),
    };
    let external;
    let raw: Option<&[u8]> = if t.data_location() == DataLocation::External {
        external = read_external(t, dir, n * width)?;
        Some(&external)
    } else if t.raw_data.as_ref().is_some_and(|r| !r.is_empty()) || n == 0 {
        t.raw_data.as_deref()
    } else {
        None
    };
    let data = match raw {
        Some(bytes) => {
            if bytes.len() != n * width {
                return Err(format!(
                    "{} data bytes for {n} elements of {} bytes",
                    bytes.len(),
                    width
                ));
            }
            from_raw(elem, bytes)
        }
        None => from_fields(t, elem, n)?,
    };
    Tensor::new(shape, data).map_err(|e| e.0)
}

fn from_raw(elem: i32, b: &[u8]) -> Data {
    fn le<const W: usize, T>(b: &[u8], f: fn([u8; W]) -> T) -> Vec<T> {
        b.chunks_exact(W)
            .map(|c| f(c.try_into().expect("chunks_exact yields W bytes")))
            .collect()
    }
    match elem {
        code::FLOAT => Data::F32(le(b, f32::from_le_bytes)),
        code::DOUBLE => Data::F64(le(b, f64::from_le_bytes)),
        code::INT64 => Data::I64(le(b, i64::from_le_bytes)),
        code::INT32 => Data::I64(le(b, |c| i32::from_le_bytes(c) as i64)),
        _ => Data::Bool(b.iter().map(|&x| x != 0).collect()),
    }
}

fn from_fields(t: &TensorProto, elem: i32, n: usize) -> Result<Data, String> {
    let check = |len: usize, field: &str| {
        if len == n {
            Ok(())
        } else {
            Err(format!("{field} holds {len} values for {n} elements"))
        }
    };
    Ok(match elem {
        code::FLOAT => {
            check(t.float_data.len(), "float_data")?;
            Data::F32(t.float_data.clone())
        }
        code::DOUBLE => {
            check(t.double_data.len(), "double_data")?;
            Data::F64(t.double_data.clone())
        }
        code::INT64 => {
            check(t.int64_data.len(), "int64_data")?;
            Data::I64(t.int64_data.clone())
        }
        code::INT32 => {
            check(t.int32_data.len(), "int32_data")?;
            Data::I64(t.int32_data.iter().map(|&x| x as i64).collect())
        }
        _ => {
            check(t.int32_data.len(), "int32_data")?;
            Data::Bool(t.int32_data.iter().map(|&x| x != 0).collect())
        }
    })
}

/// Reads `expected` bytes of external data. The location must be a relative path inside the
/// model's folder (no `..`, no absolute paths, no symlink leading out of it).
fn read_external(t: &TensorProto, dir: Option<&Path>, expected: usize) -> Result<Vec<u8>, String> {
    let dir = dir.ok_or("external data needs the model's folder, but the model was not read from a file")?;
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for kv in &t.external_data {
        match kv.key() {
            "location" => location = Some(kv.value()),
            "offset" => {
                offset = kv
                    .value()
                    .parse()
                    .map_err(|_| format!("bad external data offset '{}'", kv.value()))?
            }
            "length" => {
                length = Some(
                    kv.value()
                        .parse::<u64>()
                        .map_err(|_| format!("bad external data length '{}'", kv.value()))?,
                )
            }
            _ => {}
        }
    }
    let location = location.ok_or("external data without a location")?;
    let rel = Path::new(location);
    if rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "external data location '{location}' escapes the model's folder"
        ));
    }
    let full = dir.join(rel);
    let canon_dir = dir.canonicalize().map_err(|e| format!("model folder: {e}"))?;
    let canon = full
        .canonicalize()
        .map_err(|e| format!("external data '{location}': {e}"))?;
    if !canon.starts_with(&canon_dir) {
        return Err(format!(
            "external data location '{location}' escapes the model's folder"
        ));
    }
    if let Some(len) = length {
        if len != expected as u64 {
            return Err(format!(
                "external data length {len} does not match the {expected} bytes the shape needs"
            ));
        }
    }
    let mut f = std::fs::File::open(&canon).map_err(|e| format!("external data '{location}': {e}"))?;
    let size = f
        .metadata()
        .map_err(|e| format!("external data '{location}': {e}"))?
        .len();
    if offset.checked_add(expected as u64).is_none_or(|end| end > size) {
        return Err(format!(
            "external data '{location}' is {size} bytes, too short for {expected} bytes at offset {offset}"
        ));
    }
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| format!("external data '{location}': {e}"))?;
    let mut buf = vec![0; expected];
    f.read_exact(&mut buf)
        .map_err(|e| format!("external data '{location}': {e}"))?;
    Ok(buf)
}
