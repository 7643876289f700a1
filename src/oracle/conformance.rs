//! The conformance corpus (`ptecheck gen`): generated cases written as files any runtime can
//! replay — per case the shared and the unshared emission, the saved program and an `io.json`
//! with inputs, the eager outputs and each output's tolerance (`oracle::replay` reads it back,
//! as does `ptecheck run --expect`).
//! May not touch: execution (`oracle::replay` or any runtime replays the files), the runner.

use super::campaign::{CampaignOptions, case_config, case_input};
use super::replay::bound_to_json;
use super::values::encode_all;
use crate::emit::{EmitError, EmitOptions, emit};
use crate::generator::{Generated, generate};
use crate::ir::eval::{Run, run_method};
use crate::ir::infer::IrError;
use crate::ir::saved;
use crate::runtime::io::{IoError, list_to_json};
use arbitrary::Unstructured;
use serde::Serialize;
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
    let bytes = |share: bool| -> Result<Vec<u8>, EmitError> {
        let opts = EmitOptions { share, delegate_segments: !g.run.inline_blobs, allow_while, fault: None };
        Ok(emit(&g.program, &opts)?.to_bytes()?)
    };
    Ok(Emissions { shared: bytes(true)?, unshared: bytes(false)? })
}

/// The eager run of every method of a case, by name.
pub fn eager_runs(g: &Generated) -> Result<BTreeMap<String, Run>, IrError> {
    g.program
        .methods
        .iter()
        .map(|m| {
            let inputs = g.inputs.get(&m.name).cloned().unwrap_or_default();
            run_method(&g.program, &m.name, &inputs).map(|r| (m.name.clone(), r))
        })
        .collect()
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

/// What `gen` wrote.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CorpusSummary {
    /// Case folders written.
    pub cases: u64,
    /// Methods recorded.
    pub methods: u64,
    /// Outputs recorded exact / with a bound / with nothing known.
    pub exact_outputs: u64,
    /// Outputs with a tolerance.
    pub bounded_outputs: u64,
    /// Outputs no comparison can check.
    pub unverifiable_outputs: u64,
}

/// Writes cases `0..opts.cases` (this shard's) of seed `opts.seed` into `out/case-SEED-NNNNNN`.
pub fn generate_corpus(
    opts: &CampaignOptions,
    out: &Path,
    on_case: &mut dyn FnMut(u64),
) -> Result<CorpusSummary, CorpusError> {
    let (shard, shards) = (opts.shard.0, opts.shard.1.max(1));
    let mut summary = CorpusSummary::default();
    for case in (0..opts.cases).filter(|c| c % shards == shard) {
        let cfg = case_config(opts, case);
        let bytes = case_input(opts.seed, case);
        let g = generate(&cfg, &mut Unstructured::new(&bytes), None);
        let runs = eager_runs(&g).map_err(|source| CorpusError::Eager { case, source })?;
        for r in runs.values() {
            summary.methods += 1;
            for b in &r.bounds {
                match b {
                    b if b.is_exact() => summary.exact_outputs += 1,
                    crate::ir::bound::Bound::Any => summary.unverifiable_outputs += 1,
                    _ => summary.bounded_outputs += 1,
                }
            }
        }
        let about = json!({"seed": opts.seed, "case": case, "config": cfg, "swarm": opts.swarm});
        write_case(&out.join(format!("case-{}-{case:06}", opts.seed)), case, &g, &runs, about)?;
        summary.cases += 1;
        on_case(summary.cases);
    }
    Ok(summary)
}
