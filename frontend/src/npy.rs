//! Reading and writing NumPy `.npy` files (format versions 1 to 3, little-endian, C order).
//!
//! Supported element types: `<f4`, `<f8`, `<i8` and `|b1`, matching [`DType`]. Anything else
//! is a clear error; nothing is allocated before the header's shape has been checked against
//! the file's length.

use std::path::Path;

use crate::ir::{checked_numel, DType, Data, Tensor};

#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: not a valid .npy file: {reason}")]
    Format { path: String, reason: String },
}

/// Reads a `.npy` file.
pub fn read(path: &Path) -> Result<Tensor, NpyError> {
    let bytes = std::fs::read(path).map_err(|source| NpyError::Io {
        path: path.display().to_string(),
        source,
    })?;
    decode(&bytes).map_err(|reason| NpyError::Format {
        path: path.display().to_string(),
        reason,
    })
}

/// Writes a tensor as a version 1.0 `.npy` file.
pub fn write(path: &Path, t: &Tensor) -> Result<(), NpyError> {
    std::fs::write(path, encode(t)).map_err(|source| NpyError::Io {
        path: path.display().to_string(),
        source,
    })
}

fn descr(d: DType) -> &'static str {
    match d {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::I64 => "<i8",
        DType::Bool => "|b1",
    }
}

/// The bytes of a version 1.0 `.npy` file holding `t`.
pub fn encode(t: &Tensor) -> Vec<u8> {
    let shape = match t.shape() {
        [d] => format!("({d},)"),
        s => format!("({})", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr(t.dtype())
    );
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    match t.data() {
        Data::F32(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Data::F64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Data::I64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Data::Bool(v) => out.extend(v.iter().map(|&b| b as u8)),
    }
    out
}

/// Parses the bytes of a `.npy` file.
pub fn decode(bytes: &[u8]) -> Result<Tensor, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("missing the \\x93NUMPY magic".into());
    }
    let (header_len, start): (usize, usize) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!("unsupported format version {v}")),
    };
    let header = bytes
        .get(start..start.saturating_add(header_len))
        .ok_or("header runs past the end of the file")?;
    let header = std::str::from_utf8(header).map_err(|_| "header is not text")?;
    let descr = dict_value(header, "descr").ok_or("header has no 'descr'")?;
    let dtype = match descr.trim().trim_matches(|c| c == '\'' || c == '"') {
        "<f4" => DType::F32,
        "<f8" => DType::F64,
        "<i8" => DType::I64,
        "|b1" => DType::Bool,
        other => {
            return Err(format!(
                "element type {other} is not supported (use float32, float64, int64 or bool)"
            ))
        }
    };
    if dict_value(header, "fortran_order").is_some_and(|v| v.trim() != "False") {
        return Err("Fortran-ordered arrays are not supported".into());
    }
    let shape_text = dict_value(header, "shape").ok_or("header has no 'shape'")?;
    let shape = shape_text
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| format!("bad dimension '{s}' in shape")))
        .collect::<Result<Vec<_>, _>>()?;
    let n = checked_numel(&shape).map_err(|e| e.0)?;
    let body = &bytes[start + header_len..];
    let size = dtype.size_bytes();
    if body.len() != n * size {
        return Err(format!(
            "shape {shape:?} needs {} data bytes, file has {}",
            n * size,
            body.len()
        ));
    }
    let data = match dtype {
        DType::F32 => Data::F32(
            body.chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect(),
        ),
        DType::F64 => Data::F64(
            body.chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect(),
        ),
        DType::I64 => Data::I64(
            body.chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect(),
        ),
        DType::Bool => Data::Bool(body.iter().map(|&b| b != 0).collect()),
    };
    Tensor::new(shape, data).map_err(|e| e.0)
}

/// The text after `'key':` in a Python dict literal, up to the next top-level comma.
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?;
    let mut depth = 0;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' | '}' if depth == 0 => return Some(&rest[..i]),
            _ => {}
        }
    }
    None
}

/// File names for outputs written one `.npy` per output, in order: characters outside
/// `[A-Za-z0-9_.-]` become `_`, names that would be empty or hidden get an `output` prefix,
/// and a numeric suffix keeps them distinct. Every tool that writes outputs uses these names.
pub fn output_file_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut taken = std::collections::HashSet::new();
    names
        .into_iter()
        .map(|name| {
            let base: String = name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let base = if base.is_empty() || base.starts_with('.') {
                format!("output{base}")
            } else {
                base
            };
            let mut candidate = base.clone();
            let mut k = 1;
            while !taken.insert(candidate.clone()) {
                candidate = format!("{base}_{k}");
                k += 1;
            }
            format!("{candidate}.npy")
        })
        .collect()
}
