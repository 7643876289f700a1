//! The conformance corpus (`ptecheck gen`): generated cases written as files any runtime can
//! replay — per case the shared and the unshared emission, the saved program and an `io.json`
//! with inputs, the eager outputs and each output's tolerance (`campaign::replay` reads it back,
//! as does `ptecheck run --expect`).
//! May not touch: execution (`campaign::replay` or any runtime replays the files), the runner.

use super::case_files::{CorpusError, eager_runs, write_case};
use super::options::{CampaignOptions, case_config, case_input};
use crate::generator::generate;
use arbitrary::Unstructured;
use serde::Serialize;
use serde_json::json;
use std::path::Path;

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

/// `N cases (M methods; outputs: …)`.
impl std::fmt::Display for CorpusSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cases ({} methods; outputs: {} exact, {} with a tolerance, {} unverifiable)",
            self.cases, self.methods, self.exact_outputs, self.bounded_outputs, self.unverifiable_outputs
        )
    }
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
