//! Replaying recorded runs (`NAME.io.json`, `run --expect`): every run of every method executed
//! in a session and compared with its recording. A recording made by the conformance corpus
//! (`ptecheck gen`) carries each output's tolerance (the eager interpreter's bound); for one
//! made by ExecuTorch, which carries none, the bounds come from the program itself
//! (`crate::bounds`). Each run's verdict is exact, within the bound, or different, with each
//! output's largest gap as a fraction of its bound and where that bound came from.
//! May not touch: the recording it replays, generation, emission.

use super::case_files::bound_from_json;
use crate::exit::Exit;
use crate::ir::bound::Bound;
use crate::oracle::values::{Gap, Verdict, compare, largest_gap};
use crate::program::ScalarType;
use crate::runtime::io::{IoError, IoFault, ioerr, list_from_json};
use crate::runtime::value::decode_f64;
use crate::runtime::{HostValue, RuntimeError, Session, TraceSummary};
use serde::Serialize;
use serde_json::{Value, json};
use std::fmt;

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

/// Where a run's bounds came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundSource {
    /// The recording's own tolerances (a `ptecheck gen` corpus).
    Recording,
    /// Derived from the program's instructions (`crate::bounds`).
    Program,
}

impl fmt::Display for BoundSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BoundSource::Recording => "the recording",
            BoundSource::Program => "the program",
        })
    }
}

/// Outcome of one recorded run.
#[derive(Clone, Debug, Serialize)]
pub struct RunOutcome {
    /// Method.
    pub method: String,
    /// Run number within the method.
    pub run: usize,
    /// What the expected outputs are (`runtime`, `eager_torch`, or `eager` for a generated
    /// recording).
    pub against: &'static str,
    /// Whether every output is exact or within its bound.
    pub ok: bool,
    /// Exact, within the bound, or different (`None`: it did not run).
    pub verdict: Option<Verdict>,
    /// Where the bounds came from.
    pub bounds_from: Option<BoundSource>,
    /// Each output's largest gap as a fraction of its bound (`None`: kind, dtype or shape
    /// differ).
    pub gaps: Vec<Option<Gap>>,
    /// Largest ulp gap over the outputs (`None` when kind/shape/dtype differ).
    pub max_ulps: Option<u64>,
    /// Why some output is unbounded (no rule for an instruction, a decision that may differ).
    pub unbounded: Vec<String>,
    /// Why it did not run or did not match.
    pub detail: Option<String>,
    /// What the reference runtime lacks to run it (`kernel:NAME`, `backend:ID`), when that
    /// is why it did not run.
    pub unsupported_here: Option<String>,
    /// Why the method did not load, when it did not: a rule the program breaks, or what is
    /// not supported here (`campaign::methods::exit_of` says which).
    #[serde(skip)]
    pub load_error: Option<RuntimeError>,
}

/// One recorded run: inputs, expected outputs, and their tolerances if recorded.
struct Recorded<'v> {
    inputs: &'v Value,
    outputs: &'v Value,
    tolerance: Option<&'v Value>,
}

/// What `run --expect` found: every recorded run's outcome, and the session's trace when asked.
#[derive(Clone, Debug)]
pub struct ReplayReport {
    /// One outcome per recorded run, in method and run order.
    pub runs: Vec<RunOutcome>,
    /// The delegate trace of the whole replay, when asked for.
    pub trace: Option<TraceSummary>,
}

impl ReplayReport {
    /// Whether every run matched.
    pub fn all_ok(&self) -> bool {
        self.runs.iter().all(|o| o.ok)
    }

    /// The largest ulp gap over every run.
    pub fn worst(&self) -> Option<u64> {
        self.runs.iter().filter_map(|o| o.max_ulps).max()
    }

    /// The worst over the runs: a method that did not load as `run` says it (a broken rule 2,
    /// not supported here 3); any other run that did not match failed (1); else ok.
    pub fn exit(&self) -> Exit {
        self.runs.iter().fold(Exit::Ok, |x, o| match (&o.load_error, o.ok) {
            (_, true) => x,
            (Some(e), false) => x.max(super::methods::exit_of(e)),
            (None, false) if o.unsupported_here.is_some() => x.max(Exit::Unavailable),
            (None, false) => x.max(Exit::Failed),
        })
    }

    /// `{"runs", "all_ok", "max_ulps", "trace"}`.
    pub fn to_json(&self) -> Value {
        json!({"runs": self.runs, "all_ok": self.all_ok(), "max_ulps": self.worst(), "trace": self.trace})
    }
}

/// A line per run (`exact`, `within bound`, `DIFFERENT`, or why it did not run) with where its
/// bounds came from, a line per output (equal, or its largest gap as a fraction of its bound),
/// the largest ulp gap, and the trace when asked for.
impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for o in &self.runs {
            let status = match (o.verdict, &o.unsupported_here) {
                (_, Some(what)) => format!("not supported here ({what})"),
                (Some(Verdict::Exact), _) => "exact".to_string(),
                (Some(Verdict::WithinBound), _) => "within bound".to_string(),
                (Some(Verdict::Mismatch), _) => "DIFFERENT".to_string(),
                (None, _) => "did not run".to_string(),
            };
            let from = o.bounds_from.map(|b| format!(" (bounds from {b})")).unwrap_or_default();
            let detail = o.detail.as_ref().map(|d| format!(": {d}")).unwrap_or_default();
            writeln!(f, "{} run {} vs {}: {status}{from}{detail}", o.method, o.run, o.against)?;
            for (i, g) in o.gaps.iter().enumerate() {
                match g {
                    Some(g) if g.gap > 0.0 => writeln!(f, "  output {i}: {g}")?,
                    Some(_) => writeln!(f, "  output {i}: equal")?,
                    None => writeln!(f, "  output {i}: kind, dtype or shape differ")?,
                }
            }
            for n in &o.unbounded {
                writeln!(f, "  unbounded: {n}")?;
            }
        }
        writeln!(f, "largest ulp gap: {}", self.worst().map_or("-".into(), |u| u.to_string()))?;
        match &self.trace {
            Some(t) => write!(f, "{t}"),
            None => Ok(()),
        }
    }
}

/// Replays every recorded run of an io.json document in `session` (`trace`: report the
/// session's delegate trace too).
pub fn replay(session: &Session<'_, '_>, io: &Value, trace: bool) -> Result<ReplayReport, IoError> {
    let runs = run_expect(session, io)?;
    Ok(ReplayReport { runs, trace: trace.then(|| session.trace().summary()) })
}

/// Runs every recorded run of every method of an io.json document in `session`.
pub fn run_expect(session: &Session<'_, '_>, io: &Value) -> Result<Vec<RunOutcome>, IoError> {
    run_expect_scaled(session, io, 1.0)
}

/// [`run_expect`] with every bound multiplied by `scale` (1: as recorded or derived): how much
/// of its bounds a recording uses.
pub fn run_expect_scaled(session: &Session<'_, '_>, io: &Value, scale: f64) -> Result<Vec<RunOutcome>, IoError> {
    let loaded = session.loaded();
    let methods =
        io.get("methods").and_then(Value::as_object).ok_or_else(|| ioerr("$", IoFault::Missing("methods")))?;
    let mut out = Vec::new();
    for (name, m) in methods {
        let path = format!("$.methods.{name}");
        let skipped = m.get("status").and_then(Value::as_str) == Some("skipped");
        let (runs, against): (Vec<Recorded<'_>>, &'static str) = if skipped {
            // One entry per run: the inputs that would be used, and eager PyTorch's outputs.
            let i = m
                .get("inputs_that_would_be_used")
                .and_then(Value::as_array)
                .ok_or_else(|| ioerr(&path, IoFault::Skipped("inputs_that_would_be_used")))?;
            let o = m
                .get("eager_torch_outputs")
                .and_then(Value::as_array)
                .ok_or_else(|| ioerr(&path, IoFault::Skipped("eager_torch_outputs")))?;
            if i.len() != o.len() {
                return Err(ioerr(&path, IoFault::SkippedRuns { inputs: i.len(), outputs: o.len() }));
            }
            let runs = i.iter().zip(o).map(|(inputs, outputs)| Recorded { inputs, outputs, tolerance: None }).collect();
            (runs, "eager_torch")
        } else {
            let runs = m.get("runs").and_then(Value::as_array).ok_or_else(|| ioerr(&path, IoFault::Missing("runs")))?;
            let mut v = Vec::new();
            for (k, r) in runs.iter().enumerate() {
                let at = format!("{path}.runs[{k}]");
                v.push(Recorded {
                    inputs: r.get("inputs").ok_or_else(|| ioerr(&at, IoFault::Missing("inputs")))?,
                    outputs: r.get("outputs").ok_or_else(|| ioerr(&at, IoFault::Missing("outputs")))?,
                    tolerance: r.get("tolerance"),
                });
            }
            let generated = runs.iter().any(|r| r.get("tolerance").is_some());
            (v, if generated { "eager" } else { "runtime" })
        };
        let outcome = |run: usize| RunOutcome {
            method: name.clone(),
            run,
            against,
            ok: false,
            verdict: None,
            bounds_from: None,
            gaps: Vec::new(),
            max_ulps: None,
            unbounded: Vec::new(),
            detail: None,
            unsupported_here: None,
            load_error: None,
        };
        // One loaded method serves every run, in order, as the recording did.
        let mut method = match session.load(name) {
            Ok(m) => m,
            Err(e) => {
                for run in 0..runs.len() {
                    out.push(RunOutcome {
                        detail: Some(e.to_string()),
                        unsupported_here: e.unsupported_here(),
                        load_error: Some(e.clone()),
                        ..outcome(run)
                    });
                }
                continue;
            }
        };
        for (run, rec) in runs.iter().enumerate() {
            let at = format!("{path}.runs[{run}]");
            let inputs = list_from_json(rec.inputs, &format!("{at}.inputs"))?;
            let expected = list_from_json(rec.outputs, &format!("{at}.outputs"))?;
            let recorded = match rec.tolerance {
                None => None,
                Some(t) => Some(
                    t.as_array()
                        .ok_or_else(|| ioerr(&format!("{at}.tolerance"), IoFault::Not("an array")))?
                        .iter()
                        .enumerate()
                        .map(|(i, b)| bound_from_json(b, &format!("{at}.tolerance[{i}]")))
                        .collect::<Result<Vec<_>, _>>()?,
                ),
            };
            let result = match recorded {
                Some(b) => Session::execute(&mut method, Some(&inputs)).map(|a| (a, b, BoundSource::Recording, vec![])),
                None => crate::bounds::run_loaded(&mut method, loaded, &inputs, against == "eager_torch")
                    .map(|r| (r.outputs, r.bounds, BoundSource::Program, r.notes)),
            };
            let o = match result {
                Err(e) => {
                    RunOutcome { detail: Some(e.to_string()), unsupported_here: e.unsupported_here(), ..outcome(run) }
                }
                Ok((actual, bounds, from, notes)) => RunOutcome {
                    bounds_from: Some(from),
                    unbounded: notes,
                    ..judge(
                        &expected,
                        &bounds.iter().map(|b| b.scaled(scale)).collect::<Vec<_>>(),
                        &actual,
                        outcome(run),
                    )
                },
            };
            out.push(o);
        }
    }
    // Every recorded run has one outcome; a document that records none would pass having
    // compared nothing.
    if out.is_empty() {
        return Err(ioerr("$.methods", IoFault::NoRuns));
    }
    Ok(out)
}

/// Compares one run's outputs with the recorded ones under `bounds` (one per output).
fn judge(expected: &[HostValue], bounds: &[Bound], actual: &[HostValue], base: RunOutcome) -> RunOutcome {
    if actual.len() != expected.len() || bounds.len() != expected.len() {
        let detail = format!("{} outputs, {} recorded, {} bounds", actual.len(), expected.len(), bounds.len());
        return RunOutcome { detail: Some(detail), verdict: Some(Verdict::Mismatch), ..base };
    }
    let max = expected.iter().zip(actual).try_fold(0u64, |m, (e, a)| ulp_gap(e, a).map(|g| m.max(g)));
    let gaps: Vec<Option<Gap>> =
        expected.iter().zip(bounds).zip(actual).map(|((e, b), a)| largest_gap(e, b, a)).collect();
    let verdict =
        expected.iter().zip(bounds).zip(actual).map(|((e, b), a)| compare(e, b, a)).max().unwrap_or(Verdict::Exact);
    let ok = verdict != Verdict::Mismatch;
    let detail = (!ok).then(|| {
        let worst = gaps
            .iter()
            .enumerate()
            .filter_map(|(i, g)| Some((i, (*g)?)))
            .max_by(|a, b| a.1.ratio.total_cmp(&b.1.ratio));
        match worst {
            Some((i, g)) => format!("output {i} element {} is {:e} away, its bound {:e}", g.index, g.gap, g.bound),
            None => "outputs differ in kind, dtype or shape".to_string(),
        }
    });
    RunOutcome { ok, verdict: Some(verdict), gaps, max_ulps: max, detail, ..base }
}
