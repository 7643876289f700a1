//! Values in the corpus tensor encoding (`{kind, dtype, shape, values, bytes_sha256}`), the
//! form of method inputs and outputs in `NAME.io.json` files, `run --inputs` and the runner
//! protocol.
//! May not touch: execution (it only converts values), IR, emission.

use super::value::{HostTensor, HostValue, checked_numel, encode_f64, encode_i64, is_float};
use crate::program::{ScalarType, sha256_hex};
use serde_json::{Value, json};
use thiserror::Error;

/// A malformed inputs or io.json document.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{path}: {detail}")]
pub struct IoError {
    /// JSON path.
    pub path: String,
    /// What is wrong.
    pub detail: String,
}

fn ioerr(path: &str, detail: impl Into<String>) -> IoError {
    IoError { path: path.to_string(), detail: detail.into() }
}

/// The corpus name of a dtype (`float32`, `int64`, …).
pub fn dtype_name(t: ScalarType) -> &'static str {
    match t {
        ScalarType::FLOAT => "float32",
        ScalarType::DOUBLE => "float64",
        ScalarType::LONG => "int64",
        ScalarType::INT => "int32",
        ScalarType::SHORT => "int16",
        ScalarType::CHAR => "int8",
        ScalarType::BYTE => "uint8",
        ScalarType::BOOL => "bool",
        ScalarType::HALF => "float16",
        _ => "unsupported",
    }
}

/// The dtype of a corpus dtype name.
pub fn dtype_from_name(s: &str) -> Option<ScalarType> {
    Some(match s {
        "float32" => ScalarType::FLOAT,
        "float64" => ScalarType::DOUBLE,
        "int64" => ScalarType::LONG,
        "int32" => ScalarType::INT,
        "int16" => ScalarType::SHORT,
        "int8" => ScalarType::CHAR,
        "uint8" => ScalarType::BYTE,
        "bool" => ScalarType::BOOL,
        _ => return None,
    })
}

/// A float in the corpus encoding: a JSON number, or `"NaN"`, `"inf"`, `"-inf"`.
fn float_json(x: f64) -> Value {
    if x.is_finite() { json!(x) } else { json!(x.to_string()) }
}

/// A float from the corpus encoding (a number, or a string such as `"NaN"` or `"-inf"`).
fn float_from(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse::<f64>().ok(),
        _ => None,
    }
}

/// Encodes a value in the corpus encoding.
pub fn to_json(v: &HostValue) -> Value {
    match v {
        HostValue::Tensor(t) => {
            let values: Vec<Value> = match t.dtype {
                ScalarType::BOOL => t.data.iter().map(|b| json!(*b != 0)).collect(),
                d if is_float(d) => t.to_f64().into_iter().map(float_json).collect(),
                _ => super::value::decode_i64(t.dtype, &t.data)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|x| json!(x))
                    .collect(),
            };
            json!({"kind": "tensor", "dtype": dtype_name(t.dtype), "shape": t.sizes, "values": values, "bytes_sha256": sha256_hex(&t.data)})
        }
        HostValue::Int(i) => json!({"kind": "int", "value": i}),
        HostValue::Bool(b) => json!({"kind": "bool", "value": b}),
        HostValue::Double(d) => json!({"kind": "float", "value": float_json(*d)}),
        HostValue::None => json!({"kind": "none"}),
    }
}

/// Decodes a value from the corpus encoding.
pub fn from_json(v: &Value, path: &str) -> Result<HostValue, IoError> {
    let kind = v.get("kind").and_then(Value::as_str).ok_or_else(|| ioerr(path, "missing `kind`"))?;
    match kind {
        "tensor" => {
            let dname = v.get("dtype").and_then(Value::as_str).ok_or_else(|| ioerr(path, "missing `dtype`"))?;
            let dtype = dtype_from_name(dname)
                .ok_or_else(|| ioerr(&format!("{path}.dtype"), format!("unsupported dtype `{dname}`")))?;
            let shape: Vec<usize> = v
                .get("shape")
                .and_then(Value::as_array)
                .ok_or_else(|| ioerr(path, "missing `shape`"))?
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    d.as_u64().map(|d| d as usize).ok_or_else(|| ioerr(&format!("{path}.shape[{i}]"), "not a size"))
                })
                .collect::<Result<_, _>>()?;
            let values = v.get("values").and_then(Value::as_array).ok_or_else(|| ioerr(path, "missing `values`"))?;
            let numel = checked_numel(&shape).ok_or_else(|| ioerr(path, "shape overflows"))?;
            if values.len() != numel {
                return Err(ioerr(&format!("{path}.values"), format!("{} values for shape {shape:?}", values.len())));
            }
            let data = if is_float(dtype) {
                let f: Vec<f64> = values
                    .iter()
                    .enumerate()
                    .map(|(i, x)| float_from(x).ok_or_else(|| ioerr(&format!("{path}.values[{i}]"), "not a number")))
                    .collect::<Result<_, _>>()?;
                encode_f64(dtype, &f).map_err(|_| ioerr(path, "cannot encode"))?
            } else {
                let iv: Vec<i64> = values
                    .iter()
                    .enumerate()
                    .map(|(i, x)| {
                        x.as_i64()
                            .or_else(|| x.as_bool().map(i64::from))
                            .ok_or_else(|| ioerr(&format!("{path}.values[{i}]"), "not an integer or bool"))
                    })
                    .collect::<Result<_, _>>()?;
                encode_i64(dtype, &iv).map_err(|_| ioerr(path, "cannot encode"))?
            };
            Ok(HostValue::Tensor(HostTensor { dtype, sizes: shape, data }))
        }
        "int" => v
            .get("value")
            .and_then(Value::as_i64)
            .map(HostValue::Int)
            .ok_or_else(|| ioerr(path, "`value` is not an integer")),
        "bool" => v
            .get("value")
            .and_then(Value::as_bool)
            .map(HostValue::Bool)
            .ok_or_else(|| ioerr(path, "`value` is not a bool")),
        "float" => v
            .get("value")
            .and_then(float_from)
            .map(HostValue::Double)
            .ok_or_else(|| ioerr(path, "`value` is not a number")),
        "none" => Ok(HostValue::None),
        other => Err(ioerr(path, format!("unknown kind `{other}`"))),
    }
}

/// Decodes a list of values.
pub fn list_from_json(v: &Value, path: &str) -> Result<Vec<HostValue>, IoError> {
    v.as_array()
        .ok_or_else(|| ioerr(path, "not an array"))?
        .iter()
        .enumerate()
        .map(|(i, x)| from_json(x, &format!("{path}[{i}]")))
        .collect()
}
