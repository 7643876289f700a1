//! A campaign's report: counts per invariant and feature, the failing cases, the first one
//! shrunk with what reproduces it, and the time per stage.
//! May not touch: running cases (it is what they leave).

use super::options::CampaignId;
use crate::exit::Exit;
use crate::generator::{GenConfig, feature_names};
use crate::oracle::{Failure, Timings};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// Everything needed to reproduce a failure.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Reproduction {
    /// The invariant the case failed first (the one shrinking preserved).
    pub invariant: String,
    /// Campaign seed.
    pub seed: u64,
    /// Case index.
    pub case: u64,
    /// The command that replays the case.
    pub command: String,
    /// Violations of the shrunk program.
    pub failures: Vec<Failure>,
    /// Shrunk generator input (hex).
    pub input_hex: String,
    /// The case's generator configuration.
    pub config: GenConfig,
    /// The shrunk program as saved JSON (`ptecheck emit FILE -o out.pte`).
    pub program_json: String,
    /// The shrunk program in text form.
    pub program_text: String,
    /// Nodes of the shrunk program.
    pub shrunk_nodes: usize,
    /// Nodes before shrinking.
    pub original_nodes: usize,
}

/// Campaign outcome.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CampaignResult {
    /// The campaign this report is (part of).
    pub campaign: CampaignId,
    /// The shards it covers, ascending (one for a run, each merged shard for a merged report).
    pub shards_run: Vec<u64>,
    /// Cases run.
    pub cases: u64,
    /// Failing cases.
    pub failures: u64,
    /// Programs checked per second.
    pub programs_per_second: f64,
    /// Invariant -> times checked.
    pub invariants: BTreeMap<String, usize>,
    /// Kind of failure (an invariant, or `emit`) -> violations found, over every case.
    #[serde(default)]
    pub failures_by_kind: BTreeMap<String, usize>,
    /// Feature -> programs that had it.
    pub features: BTreeMap<String, usize>,
    /// First failure, shrunk.
    pub failure: Option<Reproduction>,
    /// Index of the first failing case.
    pub first_failing_case: Option<u64>,
    /// The failing cases, in case order (at most [`MAX_LISTED_FAILURES`]).
    pub failing_cases: Vec<FailingCase>,
    /// Worker threads used.
    pub jobs: usize,
    /// Wall time.
    pub elapsed_seconds: f64,
    /// Time per stage, including generation.
    pub timings: Timings,
    /// Time generating programs.
    pub generate: Duration,
    /// The process's peak RSS in KiB when the report was made (merged: the largest shard's).
    #[serde(default)]
    pub peak_rss_kib: Option<u64>,
}

impl CampaignResult {
    /// How the command that made the report ends: failed when a case failed.
    pub fn exit(&self) -> Exit {
        Exit::failed_if(self.failures > 0)
    }
}

/// The text report: counts, checks performed, failures by kind, features, time per stage, the
/// failing cases, and the first failure shrunk with its program.
impl fmt::Display for CampaignResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let peak = self.peak_rss_kib.map_or(String::new(), |kib| format!(", peak RSS {:.1} MiB", kib as f64 / 1024.0));
        writeln!(
            f,
            "cases {}  failures {}  {:.1} programs/s  ({:.1} s, {} jobs{peak})",
            self.cases, self.failures, self.programs_per_second, self.elapsed_seconds, self.jobs
        )?;
        writeln!(f, "checks performed:")?;
        for (k, v) in &self.invariants {
            writeln!(f, "  {k:<9} {v}")?;
        }
        if self.failures_by_kind.is_empty() {
            writeln!(f, "failures by kind: none")?;
        } else {
            writeln!(f, "failures by kind:")?;
            for (k, v) in &self.failures_by_kind {
                writeln!(f, "  {k:<9} {v}")?;
            }
        }
        writeln!(f, "features generated (programs):")?;
        let mut names: Vec<String> = feature_names();
        names.extend(self.features.keys().filter(|k| !names.contains(k)).cloned().collect::<Vec<_>>());
        for n in &names {
            writeln!(f, "  {n:<34} {}", self.features.get(n.as_str()).copied().unwrap_or(0))?;
        }
        let t = &self.timings;
        writeln!(
            f,
            "time: generate {:.3}s emit {:.3}s write {:.3}s load {:.3}s init {:.3}s execute {:.3}s eager {:.3}s compare {:.3}s negative {:.3}s",
            self.generate.as_secs_f64(),
            t.emit.as_secs_f64(),
            t.write.as_secs_f64(),
            t.load.as_secs_f64(),
            t.init.as_secs_f64(),
            t.execute.as_secs_f64(),
            t.eager.as_secs_f64(),
            t.compare.as_secs_f64(),
            t.negative.as_secs_f64()
        )?;
        if self.failing_cases.len() > 1 {
            writeln!(f, "failing cases:")?;
            for c in &self.failing_cases {
                writeln!(f, "  seed {} case {}: {}  ({})", c.seed, c.case, c.invariant, c.command)?;
            }
        }
        if let Some(x) = &self.failure {
            writeln!(
                f,
                "\nFAILURE at seed {} case {} (shrunk from {} to {} nodes)",
                x.seed, x.case, x.original_nodes, x.shrunk_nodes
            )?;
            for v in &x.failures {
                writeln!(f, "  {}: {}", v.invariant, v.detail)?;
            }
            writeln!(f, "reproduce: {}", x.command)?;
            writeln!(f, "\nprogram (text form):\n{}", x.program_text)?;
            writeln!(f, "program (saved JSON; `ptecheck emit FILE.json --listing`):\n{}", x.program_json)?;
        }
        Ok(())
    }
}

/// Failing cases listed in a report beyond the first (the count covers all of them).
pub const MAX_LISTED_FAILURES: usize = 100;

/// One failing case, as listed in a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingCase {
    /// Campaign seed.
    pub seed: u64,
    /// Case index.
    pub case: u64,
    /// The first invariant it failed.
    pub invariant: String,
    /// The command that replays it.
    pub command: String,
}
