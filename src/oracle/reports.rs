//! Campaign reports beyond one run: merging the JSON reports of shards run apart (nightly CI
//! matrix) into one, and saving a failing campaign's cases as reproducer folders.
//! Reads campaign results and regenerates cases from them; checks nothing itself.

use super::campaign::{CampaignOptions, CampaignResult, FailingCase, MAX_LISTED_FAILURES, Reproduction};
use super::conformance::{CorpusError, eager_runs, write_case};
use crate::generator::generate;
use arbitrary::Unstructured;
use serde_json::json;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why reports could not be merged.
#[derive(Debug, Error)]
pub enum MergeError {
    /// No report given.
    #[error("no reports to merge")]
    Empty,
    /// A report file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A report file is not a campaign report (`campaign --json`).
    #[error("{path}: not a campaign report: at {at}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// JSON path of the offending member.
        at: String,
        /// What serde found.
        message: String,
    },
}

/// Reads one `campaign --json` report.
pub fn read_report(path: &Path) -> Result<CampaignResult, MergeError> {
    let text = std::fs::read_to_string(path).map_err(|source| MergeError::Read { path: path.into(), source })?;
    let de = &mut serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize(de).map_err(|e| MergeError::Parse {
        path: path.into(),
        at: e.path().to_string(),
        message: e.inner().to_string(),
    })
}

/// Merges shard reports into one: counts, invariant and feature tallies and timings add up;
/// the failing cases are listed in (seed, case) order; the first failure is the one of the
/// smallest (seed, case); shards ran side by side, so the wall time is the longest and the
/// throughput the sum.
pub fn merge(reports: &[CampaignResult]) -> Result<CampaignResult, MergeError> {
    let (head, rest) = reports.split_first().ok_or(MergeError::Empty)?;
    let mut m = head.clone();
    for r in rest {
        m.cases += r.cases;
        m.failures += r.failures;
        m.programs_per_second += r.programs_per_second;
        m.elapsed_seconds = m.elapsed_seconds.max(r.elapsed_seconds);
        m.jobs = m.jobs.max(r.jobs);
        for (k, v) in &r.invariants {
            *m.invariants.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &r.features {
            *m.features.entry(k.clone()).or_default() += v;
        }
        m.timings.add(&r.timings);
        m.generate += r.generate;
        m.failing_cases.extend(r.failing_cases.iter().cloned());
        let key = |f: &Reproduction| (f.seed, f.case);
        if let Some(f) = &r.failure
            && m.failure.as_ref().is_none_or(|g| key(f) < key(g))
        {
            m.failure = Some(f.clone());
            m.first_failing_case = Some(f.case);
        }
    }
    m.failing_cases.sort_by_key(|f: &FailingCase| (f.seed, f.case));
    m.failing_cases.dedup();
    m.failing_cases.truncate(MAX_LISTED_FAILURES);
    Ok(m)
}

/// Writes the campaign's first failure, shrunk, as a reproducer folder under `dir`
/// (`case-SEED-CASE/`: `program.json`, `shared.pte`, `unshared.pte`, `io.json` when the
/// program emits, `failure.json` with the violations and the replay command), and
/// `failing-cases.json` listing every failing case. Returns the folders written.
pub fn save_failures(opts: &CampaignOptions, r: &CampaignResult, dir: &Path) -> Result<Vec<PathBuf>, CorpusError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CorpusError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut written = Vec::new();
    if let Some(f) = &r.failure {
        let folder = dir.join(format!("case-{}-{:06}", f.seed, f.case));
        std::fs::create_dir_all(&folder).map_err(io(&folder))?;
        let bytes = hex::decode(&f.input_hex).unwrap_or_default();
        let g = generate(&f.config, &mut Unstructured::new(&bytes), opts.fault);
        // The program files are best effort: a program the emitter rejects (the failure itself)
        // still gets its JSON and the violations.
        if let Ok(runs) = eager_runs(&g) {
            let about = json!({"seed": f.seed, "case": f.case, "invariant": f.invariant, "command": f.command});
            let _ = write_case(&folder, f.case, &g, &runs, about);
        }
        let path = folder.join("program.json");
        std::fs::write(&path, &f.program_json).map_err(io(&path))?;
        let path = folder.join("failure.json");
        std::fs::write(&path, serde_json::to_string_pretty(f).unwrap_or_default()).map_err(io(&path))?;
        written.push(folder);
    }
    let path = dir.join("failing-cases.json");
    std::fs::write(&path, serde_json::to_string_pretty(&r.failing_cases).unwrap_or_default()).map_err(io(&path))?;
    Ok(written)
}
