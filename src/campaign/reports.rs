//! Campaign reports beyond one run: merging the JSON reports of shards run apart (nightly CI
//! matrix) into one, and saving a failing campaign's cases as reproducer folders.
//! Reads campaign results and regenerates cases from them; checks nothing itself.

use super::case_files::{CorpusError, eager_runs, write_case};
use super::options::{CampaignId, CampaignOptions};
use super::result::{CampaignResult, FailingCase, MAX_LISTED_FAILURES, Reproduction};
use crate::exit::Exit;
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
    /// A report of another campaign than the first report merged (`differs` names the member).
    #[error("report {report}: another campaign than the first report's: {differs}")]
    OtherCampaign {
        /// Its position among the reports given (from 0).
        report: usize,
        /// The first member that differs, with both values.
        differs: String,
    },
    /// A shard already merged from an earlier report.
    #[error("report {report}: shard {shard} is already in report {first}")]
    DuplicateShard {
        /// Its position among the reports given (from 0).
        report: usize,
        /// The shard reported twice.
        shard: u64,
        /// The earlier report holding it.
        first: usize,
    },
    /// A report covering a shard its campaign does not have.
    #[error("report {report}: shard {shard} is out of range (the campaign has {shards} shards)")]
    ShardOutOfRange {
        /// Its position among the reports given (from 0).
        report: usize,
        /// The shard named.
        shard: u64,
        /// The campaign's shard count.
        shards: u64,
    },
    /// A report that lists one shard twice.
    #[error("report {report}: lists shard {shard} twice")]
    ShardTwice {
        /// Its position among the reports given (from 0).
        report: usize,
        /// The shard listed twice.
        shard: u64,
    },
    /// A report whose counts or times, added to those of the reports merged before it, overflow.
    #[error("report {report}: its {member} overflows when added to the reports before it")]
    Overflow {
        /// Its position among the reports given (from 0).
        report: usize,
        /// The member that overflows (`cases`, `invariants.I1`, `timings`, ...).
        member: String,
    },
    /// A report refused by the merge, named by its file.
    #[error("{path}: {source}")]
    In {
        /// The file.
        path: PathBuf,
        /// Why it was refused.
        source: Box<MergeError>,
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

/// The first member in which `b` differs from `a`, spelled with both values (`None`: equal).
fn first_difference(a: &CampaignId, b: &CampaignId) -> Option<String> {
    let show = |name: &str, x: &dyn std::fmt::Debug, y: &dyn std::fmt::Debug| format!("{name} {x:?}, not {y:?}");
    let members: [(&str, bool, &dyn std::fmt::Debug, &dyn std::fmt::Debug); 8] = [
        ("seed", a.seed == b.seed, &b.seed, &a.seed),
        ("cases", a.cases == b.cases, &b.cases, &a.cases),
        ("shards", a.shards == b.shards, &b.shards, &a.shards),
        ("swarm", a.swarm == b.swarm, &b.swarm, &a.swarm),
        ("config", a.config == b.config, &b.config, &a.config),
        ("fault", a.fault == b.fault, &b.fault, &a.fault),
        (
            "negative_end_to_end",
            a.negative_end_to_end == b.negative_end_to_end,
            &b.negative_end_to_end,
            &a.negative_end_to_end,
        ),
        ("only_case", a.only_case == b.only_case, &b.only_case, &a.only_case),
    ];
    members.iter().find(|(_, same, ..)| !same).map(|(name, _, x, y)| show(name, *x, *y))
}

/// The reports admitted to one merge so far: the campaign of the first, and which report
/// (by its position among those given) holds each shard.
#[derive(Default)]
struct Admitted {
    campaign: Option<CampaignId>,
    shards: std::collections::BTreeMap<u64, usize>,
}

impl Admitted {
    /// Whether report `report`, `r`, may join: of the same campaign as the first admitted,
    /// each shard in range, listed once and not already admitted.
    fn check(&self, report: usize, r: &CampaignResult) -> Result<(), MergeError> {
        if let Some(differs) = self.campaign.as_ref().and_then(|first| first_difference(first, &r.campaign)) {
            return Err(MergeError::OtherCampaign { report, differs });
        }
        if let Some(&shard) = r.shards_run.iter().find(|s| **s >= r.campaign.shards) {
            return Err(MergeError::ShardOutOfRange { report, shard, shards: r.campaign.shards });
        }
        let mut listed = std::collections::BTreeSet::new();
        if let Some(&shard) = r.shards_run.iter().find(|s| !listed.insert(**s)) {
            return Err(MergeError::ShardTwice { report, shard });
        }
        if let Some((shard, first)) = r.shards_run.iter().find_map(|s| self.shards.get(s).map(|f| (*s, *f))) {
            return Err(MergeError::DuplicateShard { report, shard, first });
        }
        Ok(())
    }

    /// Records report `report`, `r`, as admitted (after [`Admitted::check`]).
    fn commit(&mut self, report: usize, r: &CampaignResult) {
        self.campaign.get_or_insert_with(|| r.campaign.clone());
        self.shards.extend(r.shards_run.iter().map(|s| (*s, report)));
    }

    /// Admits report `report`, `r`, into `merged` (the merge of those admitted before it), or
    /// refuses it, changing nothing.
    fn admit(
        &mut self,
        merged: &mut Option<CampaignResult>,
        report: usize,
        r: &CampaignResult,
    ) -> Result<(), MergeError> {
        self.check(report, r)?;
        match merged {
            Some(m) => merge_into(m, r, report)?,
            None => *merged = Some(r.clone()),
        }
        self.commit(report, r);
        Ok(())
    }
}

/// Merges shard reports of one campaign into one: counts, invariant and feature tallies and
/// timings add up; the failing cases are listed in (seed, case) order; the first failure is
/// the one of the smallest (seed, case); shards ran side by side, so the wall time is the
/// longest and the throughput the sum. A report of another campaign (seed, cases, shard count,
/// configuration, …) or of a shard already merged is refused.
pub fn merge(reports: &[CampaignResult]) -> Result<CampaignResult, MergeError> {
    let (mut admitted, mut merged) = (Admitted::default(), None);
    for (i, r) in reports.iter().enumerate() {
        admitted.admit(&mut merged, i, r)?;
    }
    merged.map(finish).ok_or(MergeError::Empty)
}

/// What [`merge_files`] made of a list of report files.
#[derive(Debug)]
pub struct MergeOutcome {
    /// The merge of every report that could be read and belongs with the first one read.
    pub merged: Option<CampaignResult>,
    /// Each report left out, and why.
    pub refused: Vec<MergeError>,
}

/// Missing shards [`MergeOutcome::missing_shards`] lists at most (a report's shard count is
/// input: a campaign of 2^60 shards must not be listed one by one).
pub const MAX_LISTED_MISSING: usize = 64;

impl MergeOutcome {
    /// The first [`MAX_LISTED_MISSING`] shards of the merged campaign no merged report covers
    /// (a single `--case` run has none); [`MergeOutcome::missing_shard_count`] counts them all.
    pub fn missing_shards(&self) -> Vec<u64> {
        let Some(m) = self.merged.as_ref().filter(|m| m.campaign.only_case.is_none()) else { return Vec::new() };
        // The merged shards are sorted and distinct: this stops within as many steps past the
        // listed ones as there are covered shards, each a binary search.
        (0..m.campaign.shards).filter(|s| m.shards_run.binary_search(s).is_err()).take(MAX_LISTED_MISSING).collect()
    }

    /// How many shards of the merged campaign no merged report covers.
    pub fn missing_shard_count(&self) -> u64 {
        let Some(m) = self.merged.as_ref().filter(|m| m.campaign.only_case.is_none()) else { return 0 };
        // Admitted shards are distinct and below the shard count.
        m.campaign.shards.saturating_sub(m.shards_run.len() as u64)
    }

    /// What the merge left out, a line each: every report refused, and the shards no report
    /// covers.
    pub fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = self.refused.iter().map(|e| format!("left out: {e}")).collect();
        let (missing, count) = (self.missing_shards(), self.missing_shard_count());
        if count as usize > missing.len() {
            out.push(format!("no report covers {count} shards of the campaign, the first {missing:?}"));
        } else if !missing.is_empty() {
            out.push(format!("no report covers shards {missing:?} of the campaign"));
        }
        out
    }

    /// Rejected when a report was left out or none could be merged; else the merged report's.
    pub fn exit(&self) -> Exit {
        match &self.merged {
            Some(m) if self.refused.is_empty() => m.exit(),
            _ => Exit::Rejected,
        }
    }
}

/// Reads and merges report files, leaving out (and naming) each one that cannot be read or
/// does not belong: a shard whose report was cut short does not cost the others their merge.
pub fn merge_files(paths: &[PathBuf]) -> MergeOutcome {
    let (mut refused, mut merged, mut admitted) = (Vec::new(), None, Admitted::default());
    for (i, path) in paths.iter().enumerate() {
        let admission = read_report(path).and_then(|r| {
            admitted.admit(&mut merged, i, &r).map_err(|e| MergeError::In { path: path.clone(), source: Box::new(e) })
        });
        if let Err(e) = admission {
            refused.push(e);
        }
    }
    if paths.is_empty() {
        refused.push(MergeError::Empty);
    }
    MergeOutcome { merged: merged.map(finish), refused }
}

/// Adds report `report`, `r`, to `m`, the merge of the reports before it (already found to
/// belong together), or refuses it with the member whose sum overflows, changing nothing.
fn merge_into(m: &mut CampaignResult, r: &CampaignResult, report: usize) -> Result<(), MergeError> {
    let over = |member: String| MergeError::Overflow { report, member };
    let sum = |a: u64, b: u64, member: &str| a.checked_add(b).ok_or_else(|| over(member.into()));
    let tally = |into: &std::collections::BTreeMap<String, usize>,
                 from: &std::collections::BTreeMap<String, usize>,
                 what: &str| {
        let mut out = into.clone();
        for (k, v) in from {
            let n = out.entry(k.clone()).or_default();
            *n = n.checked_add(*v).ok_or_else(|| over(format!("{what}.{k}")))?;
        }
        Ok(out)
    };
    let cases = sum(m.cases, r.cases, "cases")?;
    let failures = sum(m.failures, r.failures, "failures")?;
    let invariants = tally(&m.invariants, &r.invariants, "invariants")?;
    let failures_by_kind = tally(&m.failures_by_kind, &r.failures_by_kind, "failures_by_kind")?;
    let features = tally(&m.features, &r.features, "features")?;
    let timings = m.timings.checked_add(&r.timings).ok_or_else(|| over("timings".into()))?;
    let generate = m.generate.checked_add(r.generate).ok_or_else(|| over("generate".into()))?;
    // A sum that is no longer a finite number would be written as `null`, unreadable.
    let rate = Some(m.programs_per_second + r.programs_per_second)
        .filter(|p| p.is_finite())
        .ok_or_else(|| over("programs_per_second".into()))?;
    (m.cases, m.failures, m.invariants, m.failures_by_kind, m.features, m.timings, m.generate) =
        (cases, failures, invariants, failures_by_kind, features, timings, generate);
    m.shards_run.extend(&r.shards_run);
    m.programs_per_second = rate;
    m.elapsed_seconds = m.elapsed_seconds.max(r.elapsed_seconds);
    m.jobs = m.jobs.max(r.jobs);
    // Shards run in processes of their own: the merged peak is the largest shard's.
    m.peak_rss_kib = m.peak_rss_kib.max(r.peak_rss_kib);
    m.failing_cases.extend(r.failing_cases.iter().cloned());
    let key = |f: &Reproduction| (f.seed, f.case);
    if let Some(f) = &r.failure
        && m.failure.as_ref().is_none_or(|g| key(f) < key(g))
    {
        m.failure = Some(f.clone());
        m.first_failing_case = Some(f.case);
    }
    Ok(())
}

/// The merged report put in order: shards sorted, failing cases listed in (seed, case) order
/// without repeats, up to [`MAX_LISTED_FAILURES`].
fn finish(mut m: CampaignResult) -> CampaignResult {
    m.shards_run.sort_unstable();
    m.failing_cases.sort_by_key(|f: &FailingCase| (f.seed, f.case));
    m.failing_cases.dedup();
    m.failing_cases.truncate(MAX_LISTED_FAILURES);
    m
}

/// Writes the campaign's first failure, shrunk, as a reproducer folder under `dir`
/// (`case-SEED-CASE/`: `program.json`, `shared.pte`, `unshared.pte`, `io.json` when the
/// program emits, `failure.json` with the violations and the replay command), and
/// `failing-cases.json` listing the failing cases (the first [`MAX_LISTED_FAILURES`]; the
/// report counts all). A campaign without failures writes nothing into `dir`. Returns the
/// folders written.
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
    if !r.failing_cases.is_empty() {
        let path = dir.join("failing-cases.json");
        std::fs::write(&path, serde_json::to_string_pretty(&r.failing_cases).unwrap_or_default()).map_err(io(&path))?;
    }
    Ok(written)
}
