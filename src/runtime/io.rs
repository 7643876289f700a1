//! Method inputs and outputs in the corpus tensor encoding (`{kind, dtype, shape, values,
//! bytes_sha256}`), recorded-run files (`NAME.io.json`), and the comparison `run --expect` makes:
//! bit-exact for methods of exact ops, within 4 ulp where summation order or libm may differ,
//! always reporting the largest ulp gap.

use super::error::RuntimeError;
use super::session::Session;
use super::value::{HostTensor, HostValue, decode_f64, encode_f64, encode_i64, is_float};
use crate::program::{ExecutionPlan, ScalarType, sha256_hex};
use serde::Serialize;
use serde_json::{Value, json};
use thiserror::Error;

/// Ulp gap tolerated for methods whose ops may round differently from PyTorch.
pub const INEXACT_ULPS: u64 = 4;

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

/// Encodes a value in the corpus encoding.
pub fn to_json(v: &HostValue) -> Value {
    match v {
        HostValue::Tensor(t) => {
            let values: Vec<Value> = match t.dtype {
                ScalarType::BOOL => t.data.iter().map(|b| json!(*b != 0)).collect(),
                d if is_float(d) => t
                    .to_f64()
                    .into_iter()
                    .map(|x| if x.is_finite() { json!(x) } else { json!(x.to_string()) })
                    .collect(),
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
        HostValue::Double(d) => json!({"kind": "float", "value": d}),
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
            let numel = shape
                .iter()
                .try_fold(1usize, |a, s| a.checked_mul(*s))
                .ok_or_else(|| ioerr(path, "shape overflows"))?;
            if values.len() != numel {
                return Err(ioerr(&format!("{path}.values"), format!("{} values for shape {shape:?}", values.len())));
            }
            let data = if is_float(dtype) {
                let f: Vec<f64> = values
                    .iter()
                    .enumerate()
                    .map(|(i, x)| match x {
                        Value::Number(n) => {
                            n.as_f64().ok_or_else(|| ioerr(&format!("{path}.values[{i}]"), "not a number"))
                        }
                        Value::String(s) => {
                            s.parse::<f64>().map_err(|_| ioerr(&format!("{path}.values[{i}]"), "not a number"))
                        }
                        _ => Err(ioerr(&format!("{path}.values[{i}]"), "not a number")),
                    })
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
            .and_then(Value::as_f64)
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

fn ordered_f32(x: f32) -> i64 {
    let b = x.to_bits() as i32 as i64;
    if b < 0 { i64::from(i32::MIN) - b } else { b }
}

fn ordered_f64(x: f64) -> i128 {
    let b = x.to_bits() as i64 as i128;
    if b < 0 { i128::from(i64::MIN) - b } else { b }
}

/// Largest ulp gap between two values of the same kind, dtype and shape (`None` = they differ
/// in kind, dtype, shape, or non-float contents).
pub fn ulp_gap(expected: &HostValue, actual: &HostValue) -> Option<u64> {
    match (expected, actual) {
        (HostValue::Tensor(e), HostValue::Tensor(a)) => {
            if e.dtype != a.dtype || e.sizes != a.sizes || e.data.len() != a.data.len() {
                return None;
            }
            // Distance in units in the last place of the element type; NaN equals NaN.
            let single = match e.dtype {
                ScalarType::FLOAT => true,
                ScalarType::DOUBLE => false,
                _ => return (e.data == a.data).then_some(0),
            };
            let (ev, av) = (decode_f64(e.dtype, &e.data).ok()?, decode_f64(a.dtype, &a.data).ok()?);
            let gap = |x: f64, y: f64| -> u64 {
                if x.is_nan() && y.is_nan() {
                    0
                } else if single {
                    ordered_f32(x as f32).abs_diff(ordered_f32(y as f32))
                } else {
                    u64::try_from(ordered_f64(x).abs_diff(ordered_f64(y))).unwrap_or(u64::MAX)
                }
            };
            Some(ev.iter().zip(&av).map(|(x, y)| gap(*x, *y)).max().unwrap_or(0))
        }
        (HostValue::Double(x), HostValue::Double(y)) => u64::try_from(ordered_f64(*x).abs_diff(ordered_f64(*y))).ok(),
        (x, y) => (x == y).then_some(0),
    }
}

/// Ulps a method may differ from PyTorch by: 0 when every operator's kernel is exact and no
/// delegate runs, else [`INEXACT_ULPS`].
pub fn tolerance(plan: &ExecutionPlan) -> u64 {
    let exact_ops =
        plan.operator_list().iter().all(|o| super::kernels::lookup(&o.qualified()).is_some_and(|k| k.exact));
    if exact_ops && plan.delegate_list().is_empty() { 0 } else { INEXACT_ULPS }
}

/// Outcome of one recorded run.
#[derive(Clone, Debug, Serialize)]
pub struct RunOutcome {
    /// Method.
    pub method: String,
    /// Run number within the method.
    pub run: usize,
    /// What the expected outputs are (`runtime` or `eager_torch`).
    pub against: &'static str,
    /// Whether every output matched within `tolerance_ulps`.
    pub ok: bool,
    /// Largest ulp gap over the outputs (`None` when kind/shape/dtype differ).
    pub max_ulps: Option<u64>,
    /// Allowed gap.
    pub tolerance_ulps: u64,
    /// Why it did not run or did not match.
    pub detail: Option<String>,
    /// Whether the failure was a backend that is not available here.
    pub backend_unavailable: bool,
}

/// Runs every recorded run of every method of an io.json document in `session`.
pub fn run_expect(session: &Session<'_, '_>, io: &Value) -> Result<Vec<RunOutcome>, IoError> {
    let loaded = session.loaded();
    let methods = io.get("methods").and_then(Value::as_object).ok_or_else(|| ioerr("$", "missing `methods` object"))?;
    let mut out = Vec::new();
    for (name, m) in methods {
        let path = format!("$.methods.{name}");
        let skipped = m.get("status").and_then(Value::as_str) == Some("skipped");
        let (ins, outs, against): (Vec<&Value>, Vec<&Value>, &'static str) = if skipped {
            let i = m
                .get("inputs_that_would_be_used")
                .and_then(Value::as_array)
                .ok_or_else(|| ioerr(&path, "skipped method without inputs_that_would_be_used"))?;
            let o = m
                .get("eager_torch_outputs")
                .and_then(Value::as_array)
                .ok_or_else(|| ioerr(&path, "skipped method without eager_torch_outputs"))?;
            (i.iter().collect(), o.iter().collect(), "eager_torch")
        } else {
            let runs = m.get("runs").and_then(Value::as_array).ok_or_else(|| ioerr(&path, "missing `runs`"))?;
            let mut i = Vec::new();
            let mut o = Vec::new();
            for (k, r) in runs.iter().enumerate() {
                i.push(r.get("inputs").ok_or_else(|| ioerr(&format!("{path}.runs[{k}]"), "missing inputs"))?);
                o.push(r.get("outputs").ok_or_else(|| ioerr(&format!("{path}.runs[{k}]"), "missing outputs"))?);
            }
            (i, o, "runtime")
        };
        let tol = loaded.program.plan(name).map_or(INEXACT_ULPS, tolerance);
        // One loaded method serves every run, in order, as the recording did.
        let mut method = match session.load(name) {
            Ok(m) => Some(m),
            Err(e) => {
                for run in 0..ins.len() {
                    out.push(RunOutcome {
                        method: name.clone(),
                        run,
                        against,
                        ok: false,
                        max_ulps: None,
                        tolerance_ulps: tol,
                        detail: Some(e.to_string()),
                        backend_unavailable: matches!(e, RuntimeError::BackendNotAvailable { .. }),
                    });
                }
                None
            }
        };
        let Some(method) = method.as_mut() else { continue };
        for (run, (i, o)) in ins.iter().zip(&outs).enumerate() {
            let inputs = list_from_json(i, &format!("{path}.runs[{run}].inputs"))?;
            let expected = list_from_json(o, &format!("{path}.runs[{run}].outputs"))?;
            let result = Session::execute(method, Some(&inputs));
            let outcome = match result {
                Err(e) => RunOutcome {
                    method: name.clone(),
                    run,
                    against,
                    ok: false,
                    max_ulps: None,
                    tolerance_ulps: tol,
                    detail: Some(e.to_string()),
                    backend_unavailable: false,
                },
                Ok(actual) => {
                    let gaps: Vec<Option<u64>> = if actual.len() == expected.len() {
                        expected.iter().zip(&actual).map(|(e, a)| ulp_gap(e, a)).collect()
                    } else {
                        vec![None]
                    };
                    let max = gaps.iter().try_fold(0u64, |m, g| g.map(|g| m.max(g)));
                    let ok = max.is_some_and(|m| m <= tol);
                    let detail = (!ok).then(|| match max {
                        None => format!(
                            "outputs differ in count, kind, dtype or shape: expected {}, got {}",
                            expected.len(),
                            actual.len()
                        ),
                        Some(m) => format!("largest gap {m} ulp exceeds {tol}"),
                    });
                    RunOutcome {
                        method: name.clone(),
                        run,
                        against,
                        ok,
                        max_ulps: max,
                        tolerance_ulps: tol,
                        detail,
                        backend_unavailable: false,
                    }
                }
            };
            out.push(outcome);
        }
    }
    Ok(out)
}
