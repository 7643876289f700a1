//! Values in the corpus tensor encoding (`{kind, dtype, shape, values, bytes_sha256}`), the
//! form of method inputs and outputs in `NAME.io.json` files, `run --inputs` and the runner
//! protocol.
//! May not touch: execution (it only converts values), IR, emission.

use super::json_text::{self, Scalar};
use super::value::{HostTensor, HostValue, checked_numel, decode_f64, encode_f64, encode_i64, is_float};
use crate::program::{ScalarType, sha256_hex};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use thiserror::Error;

/// A malformed inputs or io.json document: what is wrong, at which JSON path.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{path}: {fault}")]
pub struct IoError {
    /// JSON path.
    pub path: String,
    /// What is wrong.
    pub fault: IoFault,
}

/// What is wrong with a value of the corpus encoding or an io.json document.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum IoFault {
    /// A required member is absent.
    #[error("missing `{0}`")]
    Missing(&'static str),
    /// A member or element is not of the kind it must be (`a size`, `a number`, …).
    #[error("not {0}")]
    Not(&'static str),
    /// A scalar's `value` member is not of the kind its `kind` says.
    #[error("`value` is not {0}")]
    Value(&'static str),
    /// A `kind` this encoding does not have.
    #[error("unknown kind `{0}`")]
    UnknownKind(String),
    /// A dtype name this encoding does not have.
    #[error("unsupported dtype `{0}`")]
    UnsupportedDtype(String),
    /// The shape's element count overflows.
    #[error("shape overflows")]
    ShapeOverflows,
    /// The values do not fill the shape.
    #[error("{values} values for shape {shape:?}")]
    ValueCount {
        /// Values given.
        values: usize,
        /// The shape.
        shape: Vec<usize>,
    },
    /// The values do not fit the dtype's bytes.
    #[error("cannot encode")]
    CannotEncode,
    /// A tensor's bytes do not fill its shape (writing).
    #[error("{bytes} data bytes for shape {shape:?} ({expected} expected)")]
    ByteCount {
        /// Bytes the tensor holds.
        bytes: usize,
        /// Bytes its shape and dtype take.
        expected: usize,
        /// The shape.
        shape: Vec<usize>,
    },
    /// An integer element outside what its dtype holds (it is refused, not wrapped).
    #[error("{value} is not a value of {dtype}")]
    OutOfRange {
        /// The element.
        value: i64,
        /// The tensor's dtype name.
        dtype: &'static str,
    },
    /// A finite float element outside what its dtype holds (it is refused, not read as ±inf).
    #[error("{value} is not a value of {dtype}")]
    FloatOutOfRange {
        /// The element, as written.
        value: String,
        /// The tensor's dtype name.
        dtype: &'static str,
    },
    /// A tolerance of another form than the four an io.json may hold.
    #[error("a tolerance is {{exact}}, {{abs: [..]}}, {{may_differ: [..]}} or {{any}}")]
    Tolerance,
    /// A skipped method records a different number of input lists and output lists.
    #[error("{inputs} runs in `inputs_that_would_be_used`, {outputs} in `eager_torch_outputs`")]
    SkippedRuns {
        /// Input lists.
        inputs: usize,
        /// Output lists.
        outputs: usize,
    },
    /// The document records no run at all (replaying it would compare nothing).
    #[error("no recorded run")]
    NoRuns,
    /// A skipped method lacks what a skip records (`inputs_that_would_be_used`, `eager_torch_outputs`).
    #[error("skipped method without {0}")]
    Skipped(&'static str),
    /// A tensor's `bytes_sha256` is not the SHA-256 of the bytes its values encode to.
    #[error("`bytes_sha256` {recorded} is not the SHA-256 of its values' bytes ({computed})")]
    Sha256 {
        /// The digest the value records.
        recorded: String,
        /// The digest of the bytes its values encode to.
        computed: String,
    },
}

pub(crate) fn ioerr(path: &str, fault: IoFault) -> IoError {
    IoError { path: path.to_string(), fault }
}

/// The dtypes of the corpus encoding with their names; nothing else is in the encoding.
const ENCODED_DTYPES: [(ScalarType, &str); 8] = [
    (ScalarType::FLOAT, "float32"),
    (ScalarType::DOUBLE, "float64"),
    (ScalarType::LONG, "int64"),
    (ScalarType::INT, "int32"),
    (ScalarType::SHORT, "int16"),
    (ScalarType::CHAR, "int8"),
    (ScalarType::BYTE, "uint8"),
    (ScalarType::BOOL, "bool"),
];

/// The corpus name of a dtype (`float32`, `int64`, …), `None` for a dtype outside the encoding.
pub fn dtype_name(t: ScalarType) -> Option<&'static str> {
    ENCODED_DTYPES.iter().find(|(d, _)| *d == t).map(|(_, n)| *n)
}

/// The dtype of a corpus dtype name.
pub fn dtype_from_name(s: &str) -> Option<ScalarType> {
    encoded(s).map(|(d, _)| d)
}

/// The dtype of a corpus dtype name, with the name as the encoding declares it.
fn encoded(s: &str) -> Option<(ScalarType, &'static str)> {
    ENCODED_DTYPES.iter().find(|(_, n)| *n == s).copied()
}

/// A float in the corpus encoding: a JSON number, or `"NaN"`, `"inf"`, `"-inf"`.
fn float_json(x: f64) -> Value {
    if x.is_finite() { json!(x) } else { json!(x.to_string()) }
}

/// The strings a reader takes for a non-finite float: the writer's `"NaN"`, `"inf"`, `"-inf"`,
/// and the spellings the ExecuTorch runner also reads (`runners/executorch_runner.py`,
/// `_NONFINITE_IN`), so both readers refuse the same strings.
const NON_FINITE: [(&str, f64); 6] = [
    ("NaN", f64::NAN),
    ("nan", f64::NAN),
    ("inf", f64::INFINITY),
    ("Infinity", f64::INFINITY),
    ("-inf", f64::NEG_INFINITY),
    ("-Infinity", f64::NEG_INFINITY),
];

/// A float from the corpus encoding: a number, or one of the [`NON_FINITE`] strings. Every NaN
/// reads as the one NaN the writer writes, so a value reads back as read.
fn float_from(v: &Scalar<'_>) -> Option<f64> {
    match v {
        Scalar::Text(s) => NON_FINITE.iter().find(|(name, _)| name == s).map(|(_, x)| *x),
        _ => v.as_number(),
    }
}

/// Encodes a value in the corpus encoding. Refuses a tensor whose dtype the encoding does not
/// have (float16, bfloat16, …) or whose bytes do not fill its shape: nothing is written short.
pub fn to_json(v: &HostValue) -> Result<Value, IoFault> {
    Ok(match v {
        HostValue::Tensor(t) => {
            let name = dtype_name(t.dtype).ok_or_else(|| IoFault::UnsupportedDtype(t.dtype.to_string()))?;
            let expected = checked_numel(&t.sizes)
                .and_then(|n| n.checked_mul(t.dtype.element_size().unwrap_or(1)))
                .ok_or(IoFault::ShapeOverflows)?;
            if t.data.len() != expected {
                return Err(IoFault::ByteCount { bytes: t.data.len(), expected, shape: t.sizes.clone() });
            }
            let values: Vec<Value> = match t.dtype {
                ScalarType::BOOL => t.data.iter().map(|b| json!(*b != 0)).collect(),
                d if is_float(d) => t.to_f64().into_iter().map(float_json).collect(),
                _ => super::value::decode_i64(t.dtype, &t.data)
                    .map_err(|_| IoFault::CannotEncode)?
                    .into_iter()
                    .map(|x| json!(x))
                    .collect(),
            };
            // The digest of the bytes the values read back as: a bool byte other than 0 or 1 is
            // written `true`, which reads back as 1.
            let digest = if t.dtype == ScalarType::BOOL {
                sha256_hex(&t.data.iter().map(|b| u8::from(*b != 0)).collect::<Vec<u8>>())
            } else {
                sha256_hex(&t.data)
            };
            json!({"kind": "tensor", "dtype": name, "shape": t.sizes, "values": values, "bytes_sha256": digest})
        }
        HostValue::Int(i) => json!({"kind": "int", "value": i}),
        HostValue::Bool(b) => json!({"kind": "bool", "value": b}),
        HostValue::Double(d) => json!({"kind": "float", "value": float_json(*d)}),
        HostValue::None => json!({"kind": "none"}),
    })
}

/// Encodes a list of values; a value the encoding cannot hold is refused at `path[i]`.
pub fn list_to_json(values: &[HostValue], path: &str) -> Result<Vec<Value>, IoError> {
    values.iter().enumerate().map(|(i, v)| to_json(v).map_err(|f| ioerr(&format!("{path}[{i}]"), f))).collect()
}

/// [`list_to_json`] for reports read by people: a value the encoding cannot hold appears as
/// `{"kind": "not_encodable", "why": …}` (which no reader accepts), never dropped or shortened.
pub fn list_to_report_json(values: &[HostValue]) -> Vec<Value> {
    values
        .iter()
        .map(|v| to_json(v).unwrap_or_else(|f| json!({"kind": "not_encodable", "why": f.to_string()})))
        .collect()
}

/// The values an integer or bool dtype holds (`None`: every i64).
fn integer_range(dtype: ScalarType) -> Option<std::ops::RangeInclusive<i64>> {
    Some(match dtype {
        ScalarType::BOOL => 0..=1,
        ScalarType::BYTE => 0..=i64::from(u8::MAX),
        ScalarType::CHAR => i64::from(i8::MIN)..=i64::from(i8::MAX),
        ScalarType::SHORT => i64::from(i16::MIN)..=i64::from(i16::MAX),
        ScalarType::INT => i64::from(i32::MIN)..=i64::from(i32::MAX),
        _ => return None,
    })
}

/// Decodes a value from the corpus encoding.
pub fn from_json(v: &Value, path: &str) -> Result<HostValue, IoError> {
    let text = serde_json::value::to_raw_value(v).map_err(|_| ioerr(path, IoFault::Not("JSON")))?;
    from_raw(&text, path)
}

/// Decodes a value from its JSON text in the corpus encoding, keeping nothing of the text but
/// the value: a tensor's values go straight into its bytes (`runtime::json_text`). `raw` lies in
/// a text read whole already (`json_text::members`, or a `Value`): only the crate makes one.
pub(crate) fn from_raw(raw: &RawValue, path: &str) -> Result<HostValue, IoError> {
    let members = json_text::members_of(raw, ["kind", "dtype", "shape", "values", "value", "bytes_sha256"]);
    let [kind, dtype, shape, values, value, digest] = members.unwrap_or_default();
    let kind = kind.map(Scalar::of);
    let kind = kind.as_ref().and_then(Scalar::as_str).ok_or_else(|| ioerr(path, IoFault::Missing("kind")))?;
    let value = value.map(Scalar::of).unwrap_or(Scalar::Other);
    match kind {
        "tensor" => {
            let dname = dtype.map(Scalar::of);
            let dname =
                dname.as_ref().and_then(Scalar::as_str).ok_or_else(|| ioerr(path, IoFault::Missing("dtype")))?;
            let (dtype, name) = encoded(dname)
                .ok_or_else(|| ioerr(&format!("{path}.dtype"), IoFault::UnsupportedDtype(dname.to_string())))?;
            let shape = shape.ok_or_else(|| ioerr(path, IoFault::Missing("shape")))?;
            let mut sizes = Vec::new();
            let mut bad = None;
            json_text::for_each_element(shape, |d| match (bad, d.as_u64()) {
                (None, Some(d)) => sizes.push(d as usize),
                (None, None) => bad = Some(sizes.len()),
                (Some(_), _) => {}
            })
            .ok_or_else(|| ioerr(path, IoFault::Missing("shape")))?;
            if let Some(i) = bad {
                return Err(ioerr(&format!("{path}.shape[{i}]"), IoFault::Not("a size")));
            }
            let values =
                values.filter(|v| v.get().starts_with('[')).ok_or_else(|| ioerr(path, IoFault::Missing("values")))?;
            let numel = checked_numel(&sizes).ok_or_else(|| ioerr(path, IoFault::ShapeOverflows))?;
            let mut sink = ValuesSink::new(dtype, name, path, numel);
            json_text::for_each_element(values, |x| sink.push(&x))
                .ok_or_else(|| ioerr(path, IoFault::Missing("values")))?;
            let data = sink.finish(&sizes)?;
            recorded_digest_holds(digest, dtype, &data, path)?;
            Ok(HostValue::Tensor(HostTensor { dtype, sizes, data }))
        }
        "int" => value.as_i64().map(HostValue::Int).ok_or_else(|| ioerr(path, IoFault::Value("an integer"))),
        "bool" => value.as_bool().map(HostValue::Bool).ok_or_else(|| ioerr(path, IoFault::Value("a bool"))),
        "float" => float_from(&value).map(HostValue::Double).ok_or_else(|| ioerr(path, IoFault::Value("a number"))),
        "none" => Ok(HostValue::None),
        other => Err(ioerr(path, IoFault::UnknownKind(other.to_string()))),
    }
}

/// Elements read before they are encoded into a tensor's bytes together.
const ENCODED_AT_ONCE: usize = 4096;

/// A tensor's values on their way into its bytes: each element checked as it is read, encoded
/// a block at a time; past the shape's count or after a refused element only counted.
struct ValuesSink<'p> {
    dtype: ScalarType,
    name: &'static str,
    path: &'p str,
    numel: usize,
    count: usize,
    refused: Option<IoError>,
    floats: Vec<f64>,
    ints: Vec<i64>,
    data: Vec<u8>,
}

impl<'p> ValuesSink<'p> {
    fn new(dtype: ScalarType, name: &'static str, path: &'p str, numel: usize) -> Self {
        ValuesSink {
            dtype,
            name,
            path,
            numel,
            count: 0,
            refused: None,
            floats: Vec::new(),
            ints: Vec::new(),
            data: Vec::new(),
        }
    }

    fn push(&mut self, x: &Scalar<'_>) {
        let i = self.count;
        self.count += 1;
        if self.refused.is_some() || self.count > self.numel {
            return;
        }
        let at = || format!("{}.values[{i}]", self.path);
        let (dtype, name) = (self.dtype, self.name);
        if is_float(dtype) {
            let Some(v) = float_from(x) else { return self.refused = Some(ioerr(&at(), IoFault::Not("a number"))) };
            // A finite value float32 cannot hold is refused, not read as ±inf.
            if dtype == ScalarType::FLOAT && v.is_finite() && (v as f32).is_infinite() {
                return self.refused =
                    Some(ioerr(&at(), IoFault::FloatOutOfRange { value: format!("{v:e}"), dtype: name }));
            }
            self.floats.push(v);
        } else {
            let Some(v) = x.as_i64().or_else(|| x.as_bool().map(i64::from)) else {
                return self.refused = Some(ioerr(&at(), IoFault::Not("an integer or bool")));
            };
            // Kept as given, never wrapped or narrowed into the dtype's bytes.
            if integer_range(dtype).is_some_and(|r| !r.contains(&v)) {
                return self.refused = Some(ioerr(&at(), IoFault::OutOfRange { value: v, dtype: name }));
            }
            self.ints.push(v);
        }
        if self.floats.len() + self.ints.len() >= ENCODED_AT_ONCE {
            self.encode();
        }
    }

    /// Encodes the elements read since the last block.
    fn encode(&mut self) {
        let encoded = if is_float(self.dtype) {
            encode_f64(self.dtype, &self.floats)
        } else {
            encode_i64(self.dtype, &self.ints)
        };
        match encoded {
            Ok(bytes) => self.data.extend_from_slice(&bytes),
            Err(_) => self.refused = Some(ioerr(self.path, IoFault::CannotEncode)),
        }
        self.floats.clear();
        self.ints.clear();
    }

    /// The tensor's bytes, or the first fault: too few or too many values first, then the
    /// first refused element.
    fn finish(mut self, shape: &[usize]) -> Result<Vec<u8>, IoError> {
        if self.count != self.numel {
            return Err(ioerr(
                &format!("{}.values", self.path),
                IoFault::ValueCount { values: self.count, shape: shape.to_vec() },
            ));
        }
        if self.refused.is_none() {
            self.encode();
        }
        match self.refused {
            Some(e) => Err(e),
            None => Ok(self.data),
        }
    }
}

/// A tensor's `bytes_sha256`, when it has one, must be the SHA-256 of `data`, the bytes its
/// values encode to: a value whose values were edited, or read back other than written, is
/// refused rather than used (a null digest is none; any other must be 64 lowercase hex digits).
/// A float tensor holding a NaN is not held to it: the encoding writes every NaN as `"NaN"`, so
/// bytes recorded with another NaN's bits cannot be told apart.
fn recorded_digest_holds(
    recorded: Option<&RawValue>,
    dtype: ScalarType,
    data: &[u8],
    path: &str,
) -> Result<(), IoError> {
    let Some(recorded) = recorded.filter(|r| !json_text::is_null(r)).map(Scalar::of) else { return Ok(()) };
    let at = || format!("{path}.bytes_sha256");
    let recorded = recorded.as_str().ok_or_else(|| ioerr(&at(), IoFault::Not("a string")))?;
    // Well formed whatever the tensor holds: the NaN exemption below is no licence for any text.
    if recorded.len() != 64 || !recorded.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(ioerr(&at(), IoFault::Not("a SHA-256 digest (64 lowercase hex digits)")));
    }
    let computed = sha256_hex(data);
    if recorded == computed {
        return Ok(());
    }
    if is_float(dtype) && decode_f64(dtype, data).is_ok_and(|f| f.iter().any(|x| x.is_nan())) {
        return Ok(());
    }
    Err(ioerr(&at(), IoFault::Sha256 { recorded: recorded.to_string(), computed }))
}

/// Decodes a list of values.
pub fn list_from_json(v: &Value, path: &str) -> Result<Vec<HostValue>, IoError> {
    let text = serde_json::value::to_raw_value(v).map_err(|_| ioerr(path, IoFault::Not("JSON")))?;
    list_from_raw(&text, path)
}

/// Decodes a list of values from its JSON text, up to the first value refused (`raw` as for
/// [`from_raw`]).
pub(crate) fn list_from_raw(raw: &RawValue, path: &str) -> Result<Vec<HostValue>, IoError> {
    let mut out = Vec::new();
    json_text::try_each(raw, |i, x| from_raw(x, &format!("{path}[{i}]")).map(|v| out.push(v)))
        .ok_or_else(|| ioerr(path, IoFault::Not("an array")))??;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(v: Value) -> IoError {
        from_json(&v, "$.x").expect_err("refused")
    }

    #[test]
    fn a_malformed_value_is_refused_with_its_kind_of_fault_at_its_path() {
        let tensor = |values: Value| json!({"kind": "tensor", "dtype": "float32", "shape": [2], "values": values});
        let cases = [
            (json!({"value": 1}), "$.x", IoFault::Missing("kind")),
            (json!({"kind": "complex"}), "$.x", IoFault::UnknownKind("complex".into())),
            (json!({"kind": "int", "value": 1.5}), "$.x", IoFault::Value("an integer")),
            (json!({"kind": "bool", "value": 1}), "$.x", IoFault::Value("a bool")),
            (json!({"kind": "float", "value": "many"}), "$.x", IoFault::Value("a number")),
            (
                json!({"kind": "tensor", "dtype": "qint8", "shape": [], "values": []}),
                "$.x.dtype",
                IoFault::UnsupportedDtype("qint8".into()),
            ),
            (
                json!({"kind": "tensor", "dtype": "int32", "shape": [1, -1], "values": []}),
                "$.x.shape[1]",
                IoFault::Not("a size"),
            ),
            (json!({"kind": "tensor", "dtype": "int32", "shape": [1]}), "$.x", IoFault::Missing("values")),
            (tensor(json!([1.0])), "$.x.values", IoFault::ValueCount { values: 1, shape: vec![2] }),
            (tensor(json!([1.0, "one"])), "$.x.values[1]", IoFault::Not("a number")),
            // Only the NON_FINITE spellings, which the ExecuTorch runner reads too.
            (tensor(json!(["-NaN", 1.0])), "$.x.values[0]", IoFault::Not("a number")),
            (tensor(json!([1.0, "+inf"])), "$.x.values[1]", IoFault::Not("a number")),
            (tensor(json!([1.0, "1.5"])), "$.x.values[1]", IoFault::Not("a number")),
            (json!({"kind": "float", "value": "infinity"}), "$.x", IoFault::Value("a number")),
            (
                json!({"kind": "tensor", "dtype": "int64", "shape": [2], "values": [1, 2.5]}),
                "$.x.values[1]",
                IoFault::Not("an integer or bool"),
            ),
            (
                json!({"kind": "tensor", "dtype": "int8", "shape": [2], "values": [-128, 300]}),
                "$.x.values[1]",
                IoFault::OutOfRange { value: 300, dtype: "int8" },
            ),
            (
                json!({"kind": "tensor", "dtype": "uint8", "shape": [1], "values": [-1]}),
                "$.x.values[0]",
                IoFault::OutOfRange { value: -1, dtype: "uint8" },
            ),
            (
                json!({"kind": "tensor", "dtype": "bool", "shape": [2], "values": [true, 2]}),
                "$.x.values[1]",
                IoFault::OutOfRange { value: 2, dtype: "bool" },
            ),
            (
                json!({"kind": "tensor", "dtype": "float32", "shape": [2], "values": [3.4e38, 1e39]}),
                "$.x.values[1]",
                IoFault::FloatOutOfRange { value: "1e39".into(), dtype: "float32" },
            ),
            (
                json!({"kind": "tensor", "dtype": "int32", "shape": [u64::MAX, 4], "values": []}),
                "$.x",
                IoFault::ShapeOverflows,
            ),
        ];
        for (v, path, want) in cases {
            let e = fault(v.clone());
            assert_eq!((e.path.as_str(), &e.fault), (path, &want), "{v}");
        }
        // The message names the path and the fault as before the faults had kinds.
        assert_eq!(fault(tensor(json!([1.0]))).to_string(), "$.x.values: 1 values for shape [2]");
        let list = list_from_json(&json!({"kind": "none"}), "$.inputs").expect_err("not a list");
        assert_eq!((list.path.as_str(), list.fault), ("$.inputs", IoFault::Not("an array")));
        // Well-formed values still decode.
        assert_eq!(from_json(&json!({"kind": "int", "value": 3}), "$").expect("an int"), HostValue::Int(3));
        assert!(from_json(&tensor(json!([1.0, "NaN"])), "$").is_ok());
        let edges = json!({"kind": "tensor", "dtype": "int32", "shape": [2], "values": [i32::MIN, i32::MAX]});
        assert!(from_json(&edges, "$").is_ok());
        let bools = json!({"kind": "tensor", "dtype": "bool", "shape": [3], "values": [true, 0, 1]});
        assert!(from_json(&bools, "$").is_ok());
    }

    #[test]
    fn a_tensor_is_held_to_the_digest_it_records() {
        let t = HostValue::Tensor(HostTensor {
            dtype: ScalarType::FLOAT,
            sizes: vec![2],
            data: [1.5f32, -0.0].iter().flat_map(|x| x.to_le_bytes()).collect(),
        });
        let written = to_json(&t).expect("encodes");
        assert_eq!(from_json(&written, "$.x"), Ok(t.clone()), "what the writer wrote reads back");
        // An edited value, or a sign lost on the way, no longer matches the recorded digest.
        for values in [json!([1.5, 0.0]), json!([1.25, -0.0])] {
            let mut edited = written.clone();
            edited["values"] = values.clone();
            let e = fault(edited);
            assert_eq!(e.path, "$.x.bytes_sha256", "{values}");
            let IoFault::Sha256 { recorded, computed } = e.fault else { panic!("{values}: {:?}", e.fault) };
            assert_eq!(recorded, written["bytes_sha256"].as_str().expect("a string"));
            assert_ne!(computed, recorded);
        }
        let mut not_text = written.clone();
        not_text["bytes_sha256"] = json!(7);
        assert_eq!(fault(not_text).fault, IoFault::Not("a string"));
        // Without a digest (or with a null one, as the ExecuTorch runner reads it) nothing is
        // compared; with a NaN the recorded bits cannot be known.
        let mut bare = written.clone();
        bare.as_object_mut().expect("an object").remove("bytes_sha256");
        assert!(from_json(&bare, "$").is_ok());
        bare["values"] = json!([1.25, 0.0]);
        bare["bytes_sha256"] = Value::Null;
        assert!(from_json(&bare, "$").is_ok());
        let mut nan = written;
        nan["values"] = json!(["NaN", -0.0]);
        assert!(from_json(&nan, "$").is_ok());
        // Whatever the tensor holds, a digest is 64 lowercase hex digits.
        for text in ["00", "", &"A".repeat(64), &"g".repeat(64), &"0".repeat(65)] {
            nan["bytes_sha256"] = json!(text);
            assert_eq!(
                fault(nan.clone()).fault,
                IoFault::Not("a SHA-256 digest (64 lowercase hex digits)"),
                "{text:?}"
            );
        }
        // Integers and bools are held to it too.
        let ints = json!({"kind": "tensor", "dtype": "int64", "shape": [1], "values": [3], "bytes_sha256": sha256_hex(&4i64.to_le_bytes())});
        assert!(matches!(fault(ints).fault, IoFault::Sha256 { .. }));
    }

    #[test]
    fn the_writer_refuses_what_the_encoding_does_not_hold_and_names_where() {
        let tensor = |dtype: ScalarType, sizes: Vec<usize>, bytes: usize| {
            HostValue::Tensor(HostTensor { dtype, sizes, data: vec![0; bytes] })
        };
        let unsupported = |name: &str| IoFault::UnsupportedDtype(name.into());
        assert_eq!(to_json(&tensor(ScalarType::HALF, vec![2], 4)), Err(unsupported("HALF")));
        assert_eq!(to_json(&tensor(ScalarType::BFLOAT16, vec![2], 4)), Err(unsupported("BFLOAT16")));
        assert_eq!(to_json(&tensor(ScalarType(100), vec![1], 1)), Err(unsupported("UNKNOWN(100)")));
        // Bytes that do not fill the shape are refused, not written as fewer values.
        assert_eq!(
            to_json(&tensor(ScalarType::FLOAT, vec![2, 2], 15)),
            Err(IoFault::ByteCount { bytes: 15, expected: 16, shape: vec![2, 2] })
        );
        assert_eq!(to_json(&tensor(ScalarType::INT, vec![usize::MAX, 2], 0)), Err(IoFault::ShapeOverflows));
        // In a list, the refusal names the element.
        let list = [HostValue::Int(1), tensor(ScalarType::HALF, vec![], 2)];
        let e = list_to_json(&list, "$.outputs").expect_err("refused");
        assert_eq!(e.to_string(), "$.outputs[1]: unsupported dtype `HALF`");
        // Every dtype of the encoding is written under its name and reads back.
        for (dtype, name) in ENCODED_DTYPES {
            let v = tensor(dtype, vec![3], 3 * dtype.element_size().expect("sized"));
            let json = to_json(&v).expect("encodes");
            assert_eq!(json["dtype"], name);
            assert_eq!(from_json(&json, "$").expect("reads"), v);
        }
        // Reports show what they cannot encode in its place.
        assert_eq!(list_to_report_json(&list)[1]["kind"], "not_encodable");
    }
}
