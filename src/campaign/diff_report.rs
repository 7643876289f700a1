//! What a differential campaign found (`campaign --runner`): counts by verdict and outcome,
//! mismatches, runner failures and negative findings, each with its reproducer folder.
//! May not touch: running cases (`differential` fills it).

use crate::exit::Exit;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// One deduplicated negative finding.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// The corruption class.
    pub class: String,
    /// What the runner did: `accepts`, `rejects_at_execute`, `crash`, `hang`, `garbage`.
    pub outcome: String,
    /// How many corruptions had this outcome.
    pub count: u64,
    /// The smallest reproducer's folder.
    pub reproducer: Option<PathBuf>,
    /// The corruption, described.
    pub corruption: String,
    /// The runner's message, signal or reply.
    pub detail: String,
    #[serde(skip)]
    pub(crate) smallest: usize,
}

/// One mismatch, as written.
#[derive(Clone, Debug, Serialize)]
pub struct Mismatch {
    /// Case index.
    pub case: u64,
    /// Method.
    pub method: String,
    /// Which emission.
    pub shared: bool,
    /// Its reproducer folder (for the first few).
    pub reproducer: Option<PathBuf>,
}

/// A valid program whose run crashed, hung or garbled the runner.
#[derive(Clone, Debug, Serialize)]
pub struct RunnerFailure {
    /// Case index.
    pub case: u64,
    /// Method.
    pub method: String,
    /// Which emission.
    pub shared: bool,
    /// `crash`, `hang`, `garbage`, `no_runner`, or `too_long` / `unencodable` (not sent).
    pub outcome: String,
    /// Signal or exit status and the last line of the runner's stderr.
    pub detail: String,
    /// Its reproducer folder (for the first few).
    pub reproducer: Option<PathBuf>,
}

/// What a differential campaign found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DiffReport {
    /// The runner's hello.
    pub runner: Value,
    /// What the configuration could generate but no case used, because the runner did not
    /// announce its kernel or backend ([`not_announced`]).
    pub not_generated: Vec<String>,
    /// Cases run.
    pub cases: u64,
    /// Method runs (requests on valid programs).
    pub methods_run: u64,
    /// Runs whose every output was exact.
    pub exact: u64,
    /// Runs with an output that differs within its bound.
    pub within_bound: u64,
    /// Runs with an output outside its bound.
    pub mismatch: u64,
    /// Delegate calls the runner executed in methods that returned outputs, by backend.
    pub delegate_calls: BTreeMap<String, u64>,
    /// Valid programs the runner refused (typed errors), by stage; `not_supported:STAGE` for a
    /// kernel or backend the runner lacks (OperatorMissing, NotFound at load_method), apart from
    /// a refusal that calls the program invalid.
    pub refused: BTreeMap<String, u64>,
    /// Requests that crashed the runner.
    pub crashes: u64,
    /// Requests the runner hung on.
    pub hangs: u64,
    /// Requests answered with garbage.
    pub garbage: u64,
    /// Requests not sent, corruptions included: their line is longer than the protocol's
    /// [`MAX_LINE`], or it cannot be written in the protocol (`unencodable`).
    pub unsent: u64,
    /// Cases (or corruptions) that could not be prepared: the generated program does not emit
    /// or evaluate, or its file cannot be written. Each is a failure of the campaign.
    pub unprepared: u64,
    /// Why, for the first few.
    pub unprepared_reasons: Vec<String>,
    /// Runner processes started.
    pub runner_starts: u64,
    /// Corruptions sent (negative).
    pub corruptions_sent: u64,
    /// Corruptions the runner rejected at load, by class.
    pub rejected: BTreeMap<String, u64>,
    /// Negative findings.
    pub findings: Vec<Finding>,
    /// Mismatches.
    pub mismatches: Vec<Mismatch>,
    /// Valid programs that crashed, hung or garbled the runner.
    pub runner_failures: Vec<RunnerFailure>,
    /// Refusals of valid programs, first few described.
    pub refusals: Vec<String>,
    /// Cases per second.
    pub programs_per_second: f64,
    /// Wall time.
    pub elapsed_seconds: f64,
    /// Whether corruptions were sent (`--negative`).
    #[serde(skip)]
    pub negative: bool,
}

impl DiffReport {
    /// Counts a case (or corruption) of `case` that could not be prepared, and why (the first 20).
    pub(crate) fn not_prepared(&mut self, case: u64, why: String) {
        self.unprepared += 1;
        if self.unprepared_reasons.len() < 20 {
            self.unprepared_reasons.push(format!("case {case}: {why}"));
        }
    }

    /// How the campaign ends: failed on any mismatch, crash, hang, garbage reply, request not
    /// sent, case not prepared or negative finding.
    pub fn exit(&self) -> Exit {
        Exit::failed_if(
            self.mismatch > 0
                || self.crashes > 0
                || self.hangs > 0
                || self.garbage > 0
                || self.unsent > 0
                || self.unprepared > 0
                || !self.findings.is_empty(),
        )
    }
}

/// The text report.
impl fmt::Display for DiffReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = &self.runner;
        writeln!(
            f,
            "runner: {} {} (backends {}, {} operators)",
            h["name"].as_str().unwrap_or("?"),
            h["version"].as_str().unwrap_or("?"),
            h["backends"],
            h["operators"].as_array().map_or(0, Vec::len)
        )?;
        writeln!(
            f,
            "cases {}  methods run {}  exact {}  within bound {}  mismatch {}  ({:.1} programs/s, {:.1} s)",
            self.cases,
            self.methods_run,
            self.exact,
            self.within_bound,
            self.mismatch,
            self.programs_per_second,
            self.elapsed_seconds
        )?;
        writeln!(
            f,
            "valid programs refused: {:?}  crashes {}  hangs {}  garbage {}  unsent {}  runner starts {}",
            self.refused, self.crashes, self.hangs, self.garbage, self.unsent, self.runner_starts
        )?;
        writeln!(f, "delegate calls executed by the runner: {:?}", self.delegate_calls)?;
        if !self.not_generated.is_empty() {
            writeln!(
                f,
                "not generated, the runner did not announce them ({}): {}",
                self.not_generated.len(),
                self.not_generated.join(", ")
            )?;
        }
        if self.unprepared > 0 {
            writeln!(f, "CASES NOT PREPARED: {}", self.unprepared)?;
            for x in &self.unprepared_reasons {
                writeln!(f, "  {x}")?;
            }
        }
        for x in &self.refusals {
            writeln!(f, "  refused: {x}")?;
        }
        let folder = |p: &Option<PathBuf>| p.as_ref().map(|p| format!(" ({})", p.display())).unwrap_or_default();
        for m in &self.mismatches {
            let at = m.reproducer.as_ref().map_or("-".into(), |p| p.display().to_string());
            writeln!(f, "MISMATCH case {} {} shared={}: {at}", m.case, m.method, m.shared)?;
        }
        for x in &self.runner_failures {
            let what = x.outcome.to_uppercase();
            writeln!(
                f,
                "{what} case {} {} shared={}: {}{}",
                x.case,
                x.method,
                x.shared,
                x.detail,
                folder(&x.reproducer)
            )?;
        }
        if self.negative {
            writeln!(f, "corruptions sent {}  rejected at load {:?}", self.corruptions_sent, self.rejected)?;
            for x in &self.findings {
                writeln!(
                    f,
                    "FINDING {} {}: {} time(s); e.g. {} -> {}{}",
                    x.outcome,
                    x.class,
                    x.count,
                    x.corruption,
                    x.detail,
                    folder(&x.reproducer)
                )?;
            }
        }
        Ok(())
    }
}
