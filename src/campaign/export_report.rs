//! What an exporter campaign found (`campaign --exporter`): programs built and failed by stage,
//! checks performed and failures by kind, what the runtime here could not run, the kernels the
//! exporter's programs call, the runner's verdicts, and the findings with their reproducers.
//! Shard reports of one campaign merge into its report.
//! May not touch: running cases (`export` fills it).

use crate::exit::Exit;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// Failure messages listed per stage (the counts cover all).
pub const LISTED_PER_STAGE: usize = 5;

/// One case whose exported program broke a check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportFinding {
    /// Case index.
    pub case: u64,
    /// The kind of the first failure (an invariant, or `runner` for the runner's outputs).
    pub kind: String,
    /// The failures, described.
    pub detail: Vec<String>,
    /// Its reproducer folder (program, inputs, the exported program, `repro.py`).
    pub reproducer: Option<PathBuf>,
    /// Nodes of the program, and of the shrunk one when it was shrunk.
    pub nodes: (usize, Option<usize>),
}

/// What an exporter campaign found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExportReport {
    /// The exporter's hello.
    pub exporter: Value,
    /// The runner's hello, with `--runner`.
    pub runner: Option<Value>,
    /// The shards it covers.
    pub shards_run: Vec<u64>,
    /// Shards of the campaign.
    pub shards: u64,
    /// What the configuration could generate but the exporter did not announce.
    pub not_generated: Vec<String>,
    /// Backends the exporter lowers to whose blobs the reference runtime cannot run (their
    /// programs are checked, but not run here).
    #[serde(default)]
    pub not_runnable_here: Vec<String>,
    /// Cases generated and sent.
    pub cases: u64,
    /// Programs the exporter built.
    pub built: u64,
    /// Programs it could not build, by stage.
    pub failed_by_stage: BTreeMap<String, u64>,
    /// The first messages of each stage's failures.
    pub stage_messages: BTreeMap<String, Vec<String>>,
    /// Requests that crashed, hung or garbled the exporter, or were not sent, by outcome.
    pub exporter_failures: BTreeMap<String, u64>,
    /// Checks performed on built programs, by invariant.
    pub checks: BTreeMap<String, usize>,
    /// Violations, by kind.
    pub failures_by_kind: BTreeMap<String, usize>,
    /// Built programs the runtime here could not run, by what it lacks (`kernel:NAME`,
    /// `backend:ID`): valid, not supported here.
    pub unsupported_here: BTreeMap<String, u64>,
    /// Kernels the built programs call: programs calling each.
    pub kernels: BTreeMap<String, u64>,
    /// Delegates in the built programs, and distinct stored blobs.
    pub delegates: u64,
    /// Distinct stored blobs in the built programs.
    pub blobs: u64,
    /// Method outputs here against the eager interpreter: exact, within bound, mismatch.
    pub ours: BTreeMap<String, u64>,
    /// Method outputs here against the exporter's eager outputs.
    pub ours_vs_exporter: BTreeMap<String, u64>,
    /// With `--runner`: the runner's method outputs against the eager interpreter, and its
    /// refusals and failures by class.
    pub runner_outcomes: BTreeMap<String, u64>,
    /// Built programs whose structure differs from the reference emitter's under the same rules,
    /// over the call sites both emitted.
    pub emitter_differences: u64,
    /// Those differences by aspect (`delegates`, `call`, `blob`, `compile`, `inputs`, …).
    pub differences_by_aspect: BTreeMap<String, u64>,
    /// The first few, described.
    pub difference_examples: Vec<String>,
    /// Call sites the exporter dropped (export removed them) that the reference emitter keeps.
    pub sites_dropped: u64,
    /// Cases with a finding.
    pub failures: u64,
    /// The findings, in case order (the first few).
    pub findings: Vec<ExportFinding>,
    /// Wall time.
    pub elapsed_seconds: f64,
    /// Cases per second.
    pub programs_per_second: f64,
}

impl ExportReport {
    /// Failed when a case has a finding or the exporter crashed, hung, garbled a reply or
    /// could not be sent a request.
    pub fn exit(&self) -> Exit {
        Exit::failed_if(self.failures > 0 || !self.exporter_failures.is_empty())
    }

    /// Adds a shard's report (the exporter's and runner's hellos are the first's).
    pub fn merge(&mut self, o: &ExportReport) {
        fn add<K: Ord + Clone, V: Copy + std::ops::AddAssign + Default>(a: &mut BTreeMap<K, V>, b: &BTreeMap<K, V>) {
            for (k, v) in b {
                *a.entry(k.clone()).or_default() += *v;
            }
        }
        if self.shards_run.is_empty() {
            self.exporter = o.exporter.clone();
            self.runner = o.runner.clone();
            self.not_generated = o.not_generated.clone();
            self.not_runnable_here = o.not_runnable_here.clone();
            self.shards = o.shards;
        }
        self.shards_run.extend(&o.shards_run);
        self.shards_run.sort_unstable();
        self.cases += o.cases;
        self.built += o.built;
        add(&mut self.failed_by_stage, &o.failed_by_stage);
        for (k, v) in &o.stage_messages {
            let e = self.stage_messages.entry(k.clone()).or_default();
            e.extend(v.iter().take(LISTED_PER_STAGE.saturating_sub(e.len())).cloned());
        }
        add(&mut self.exporter_failures, &o.exporter_failures);
        add(&mut self.checks, &o.checks);
        add(&mut self.failures_by_kind, &o.failures_by_kind);
        add(&mut self.unsupported_here, &o.unsupported_here);
        add(&mut self.kernels, &o.kernels);
        self.delegates += o.delegates;
        self.blobs += o.blobs;
        add(&mut self.ours, &o.ours);
        add(&mut self.ours_vs_exporter, &o.ours_vs_exporter);
        add(&mut self.runner_outcomes, &o.runner_outcomes);
        self.emitter_differences += o.emitter_differences;
        add(&mut self.differences_by_aspect, &o.differences_by_aspect);
        self.difference_examples.extend(
            o.difference_examples.iter().take(LISTED_PER_STAGE.saturating_sub(self.difference_examples.len())).cloned(),
        );
        self.sites_dropped += o.sites_dropped;
        self.failures += o.failures;
        self.findings.extend(o.findings.iter().cloned());
        self.findings.sort_by_key(|f| f.case);
        self.elapsed_seconds = self.elapsed_seconds.max(o.elapsed_seconds);
        self.programs_per_second += o.programs_per_second;
    }
}

/// The text report.
impl fmt::Display for ExportReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = &self.exporter;
        let text = |v: &Value| v.as_str().map_or("-".to_string(), str::to_string);
        writeln!(
            f,
            "exporter: {} (executorch {}, torch {}), rules {}",
            text(&h["name"]),
            text(&h["executorch"]),
            text(&h["torch"]),
            h["rules"]
        )?;
        if let Some(r) = &self.runner {
            writeln!(f, "runner: {} {}", text(&r["name"]), text(&r["version"]))?;
        }
        writeln!(
            f,
            "cases {}  built {}  failures {}  ({:.2} programs/s, {:.1} s)",
            self.cases, self.built, self.failures, self.programs_per_second, self.elapsed_seconds
        )?;
        if !self.not_runnable_here.is_empty() {
            writeln!(
                f,
                "backends the exporter lowers to that the runtime here cannot run: {}",
                self.not_runnable_here.join(", ")
            )?;
        }
        if !self.not_generated.is_empty() {
            writeln!(
                f,
                "not generated, the exporter did not announce them ({}): {}",
                self.not_generated.len(),
                self.not_generated.join(", ")
            )?;
        }
        writeln!(f, "not built, by stage: {:?}", self.failed_by_stage)?;
        for (stage, messages) in &self.stage_messages {
            for m in messages {
                writeln!(f, "  {stage}: {m}")?;
            }
        }
        if !self.exporter_failures.is_empty() {
            writeln!(f, "EXPORTER FAILURES: {:?}", self.exporter_failures)?;
        }
        writeln!(f, "checks performed:")?;
        for (k, v) in &self.checks {
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
        writeln!(f, "outputs here vs the eager interpreter: {:?}", self.ours)?;
        writeln!(f, "outputs here vs the exporter's eager outputs: {:?}", self.ours_vs_exporter)?;
        if !self.runner_outcomes.is_empty() {
            writeln!(f, "runner outcomes: {:?}", self.runner_outcomes)?;
        }
        if !self.unsupported_here.is_empty() {
            writeln!(f, "valid, not supported here (programs): {:?}", self.unsupported_here)?;
        }
        writeln!(f, "delegates {}  distinct blobs {}", self.delegates, self.blobs)?;
        writeln!(
            f,
            "against the reference emitter under the same rules: {} programs differ in structure {:?}; {} call sites dropped by the export",
            self.emitter_differences, self.differences_by_aspect, self.sites_dropped
        )?;
        for x in &self.difference_examples {
            writeln!(f, "  {x}")?;
        }
        writeln!(f, "kernels called (programs): {:?}", self.kernels)?;
        for x in &self.findings {
            let at = x.reproducer.as_ref().map_or("-".into(), |p| p.display().to_string());
            writeln!(f, "FINDING case {} {}: {}  ({at})", x.case, x.kind, x.detail.first().map_or("", String::as_str))?;
        }
        Ok(())
    }
}
