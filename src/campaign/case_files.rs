//! A case as files any runtime can replay: both emissions' bytes, the eager runs by method, the
//! `io.json` (inputs, eager outputs, each output's tolerance) and the saved program; the steps
//! the conformance corpus, the differential campaign and reproducer folders share.
//! May not touch: execution (a runtime replays the files), the runner.

use crate::emit::EmitError;
use crate::generator::Generated;
use crate::ir::bound::Bound;
use crate::ir::eval::Run;
use crate::ir::infer::IrError;
use crate::ir::saved;
use crate::oracle::case::{eager_run_each, emission};
use crate::oracle::values::encode_all;
use crate::runtime::io::{IoError, IoFault, ioerr, list_to_json};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a case could not be written.
#[derive(Debug, Error)]
pub enum CorpusError {
    /// The program does not emit.
    #[error("case {case}: {source}")]
    Emit {
        /// Case index.
        case: u64,
        /// The emitter's error.
        source: EmitError,
    },
    /// The eager interpreter failed.
    #[error("case {case}: eager interpreter: {source}")]
    Eager {
        /// Case index.
        case: u64,
        /// Its error.
        source: IrError,
    },
    /// A value the corpus encoding cannot hold.
    #[error("case {case}: io.json: {source}")]
    Encode {
        /// Case index.
        case: u64,
        /// What cannot be encoded, where.
        source: IoError,
    },
    /// A file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The two emissions of a case: sharing honoured, and as if no backend opted in.
pub struct Emissions {
    /// `share = true`.
    pub shared: Vec<u8>,
    /// `share = false`.
    pub unshared: Vec<u8>,
}

/// Emits both forms of a generated case (with its blob placement).
pub fn emit_both(g: &Generated, allow_while: bool) -> Result<Emissions, EmitError> {
    let bytes =
        |share: bool| -> Result<Vec<u8>, EmitError> { Ok(emission(g, share, allow_while, None, None)?.to_bytes()?) };
    Ok(Emissions { shared: bytes(true)?, unshared: bytes(false)? })
}

/// The eager run of every method of a case, by name (the first method, in program order, the
/// interpreter fails on is the error).
pub fn eager_runs(g: &Generated) -> Result<BTreeMap<String, Run>, IrError> {
    eager_run_each(g).into_iter().map(|(name, run)| run.map(|r| (name, r))).collect()
}

/// The case's `io.json`: one run per method, with inputs, eager outputs and tolerances (a value
/// the corpus encoding cannot hold is refused with its path).
pub fn io_json(g: &Generated, runs: &BTreeMap<String, Run>, about: Value) -> Result<Value, IoError> {
    let methods: serde_json::Map<String, Value> = runs
        .iter()
        .map(|(name, r)| {
            let inputs = encode_all(g.inputs.get(name).map_or(&[][..], Vec::as_slice));
            let at = format!("$.methods.{name}.runs[0]");
            let run = json!({
                "inputs": list_to_json(&inputs, &format!("{at}.inputs"))?,
                "outputs": list_to_json(&encode_all(&r.outputs), &format!("{at}.outputs"))?,
                "tolerance": r.bounds.iter().map(bound_to_json).collect::<Vec<_>>(),
            });
            Ok((name.clone(), json!({"runs": [run]})))
        })
        .collect::<Result<_, IoError>>()?;
    Ok(json!({"generated_by": about, "methods": methods}))
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), CorpusError> {
    std::fs::write(path, bytes).map_err(|source| CorpusError::Io { path: path.to_path_buf(), source })
}

/// Writes one case's files into `dir` (created): `shared.pte`, `unshared.pte`, `program.json`,
/// `io.json`.
pub fn write_case(
    dir: &Path,
    case: u64,
    g: &Generated,
    runs: &BTreeMap<String, Run>,
    about: Value,
) -> Result<(), CorpusError> {
    std::fs::create_dir_all(dir).map_err(|source| CorpusError::Io { path: dir.to_path_buf(), source })?;
    let e = emit_both(g, true).map_err(|source| CorpusError::Emit { case, source })?;
    write(&dir.join("shared.pte"), &e.shared)?;
    write(&dir.join("unshared.pte"), &e.unshared)?;
    write(&dir.join("program.json"), saved::save(&g.program).as_bytes())?;
    let io = io_json(g, runs, about).map_err(|source| CorpusError::Encode { case, source })?;
    write(&dir.join("io.json"), serde_json::to_string_pretty(&io).unwrap_or_default().as_bytes())
}

/// The JSON form of a tolerance (`io.json` `runs[k].tolerance[i]`).
pub fn bound_to_json(b: &Bound) -> Value {
    let f = |x: &f64| if x.is_finite() { json!(x) } else { json!("inf") };
    match b {
        Bound::Exact => json!({"exact": true}),
        Bound::Abs(v) => json!({"abs": v.iter().map(f).collect::<Vec<_>>()}),
        Bound::Flags(v) => json!({"may_differ": v}),
        Bound::Any => json!({"any": true}),
    }
}

/// Reads a tolerance.
pub fn bound_from_json(v: &Value, path: &str) -> Result<Bound, IoError> {
    // `{"exact": true}` and `{"any": true}`; any other value of theirs is refused, not read
    // by the key alone (`{"any": false}` is not a licence to accept anything).
    for (key, bound) in [("exact", Bound::Exact), ("any", Bound::Any)] {
        if let Some(x) = v.get(key) {
            return if x.as_bool() == Some(true) {
                Ok(bound)
            } else {
                Err(ioerr(&format!("{path}.{key}"), IoFault::Not("true")))
            };
        }
    }
    if let Some(a) = v.get("abs").and_then(Value::as_array) {
        return a
            .iter()
            .enumerate()
            .map(|(i, x)| match x {
                Value::String(s) if s == "inf" => Ok(f64::INFINITY),
                _ => x.as_f64().ok_or_else(|| ioerr(&format!("{path}.abs[{i}]"), IoFault::Not("a bound"))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Bound::Abs);
    }
    if let Some(a) = v.get("may_differ").and_then(Value::as_array) {
        return a
            .iter()
            .enumerate()
            .map(|(i, x)| x.as_bool().ok_or_else(|| ioerr(&format!("{path}.may_differ[{i}]"), IoFault::Not("a bool"))))
            .collect::<Result<Vec<_>, _>>()
            .map(Bound::Flags);
    }
    Err(ioerr(path, IoFault::Tolerance))
}
