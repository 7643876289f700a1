//! Replaying recorded runs (`NAME.io.json`, `run --expect`): every run of every method executed
//! in a session and compared with its recording. A recording made by the conformance corpus
//! (`ptecheck gen`) carries each output's tolerance (the eager interpreter's bound); one made
//! by ExecuTorch does not, and is compared bit for bit where every kernel is exact, else within
//! [`INEXACT_ULPS`]. The largest ulp gap is always reported.
//! May not touch: the recording it replays, generation, emission.

use super::case_files::bound_from_json;
use crate::exit::Exit;
use crate::ir::bound::Bound;
use crate::oracle::values::{Verdict, compare};
use crate::program::{ExecutionPlan, ScalarType};
use crate::runtime::io::{IoError, IoFault, ioerr, list_from_json};
use crate::runtime::value::decode_f64;
use crate::runtime::{HostValue, RuntimeError, Session, TraceSummary};
use serde::Serialize;
use serde_json::{Value, json};
use std::fmt;

/// Ulp gap tolerated for methods whose ops may round differently from PyTorch.
pub const INEXACT_ULPS: u64 = 4;

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

/// Ulps a method may differ from PyTorch by: 0 when every operator's kernel is exact and no
/// delegate runs, else [`INEXACT_ULPS`].
pub fn tolerance(plan: &ExecutionPlan) -> u64 {
    let exact_ops =
        plan.operator_list().iter().all(|o| crate::runtime::kernels::lookup(&o.qualified()).is_some_and(|k| k.exact));
    if exact_ops && plan.delegate_list().is_empty() { 0 } else { INEXACT_ULPS }
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
    /// Whether every output matched (within its recorded tolerance, or `tolerance_ulps`).
    pub ok: bool,
    /// Under recorded tolerances: exact, within bound or mismatch (`None`: none recorded).
    pub verdict: Option<Verdict>,
    /// Largest ulp gap over the outputs (`None` when kind/shape/dtype differ).
    pub max_ulps: Option<u64>,
    /// Allowed gap when no tolerance is recorded.
    pub tolerance_ulps: u64,
    /// Why it did not run or did not match.
    pub detail: Option<String>,
    /// Whether the failure was a backend that is not available here.
    pub backend_unavailable: bool,
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

    /// Ok when every run matched; unavailable when every run that did not failed for a backend
    /// missing here; failed otherwise.
    pub fn exit(&self) -> Exit {
        if self.all_ok() {
            Exit::Ok
        } else if self.runs.iter().all(|o| o.ok || o.backend_unavailable) {
            Exit::Unavailable
        } else {
            Exit::Failed
        }
    }

    /// `{"runs", "all_ok", "max_ulps", "trace"}`.
    pub fn to_json(&self) -> Value {
        json!({"runs": self.runs, "all_ok": self.all_ok(), "max_ulps": self.worst(), "trace": self.trace})
    }
}

/// A line per run (`ok`, `backend not available` or `MISMATCH`, with its gap), the largest
/// gap, and the trace when asked for.
impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for o in &self.runs {
            let status = if o.ok {
                "ok"
            } else if o.backend_unavailable {
                "backend not available"
            } else {
                "MISMATCH"
            };
            writeln!(
                f,
                "{} run {} vs {}: {status} (max gap {} ulp, allowed {}){}",
                o.method,
                o.run,
                o.against,
                o.max_ulps.map_or("-".into(), |u| u.to_string()),
                o.tolerance_ulps,
                o.detail.as_ref().map(|d| format!(": {d}")).unwrap_or_default()
            )?;
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
        let tol = loaded.program.plan(name).map_or(INEXACT_ULPS, tolerance);
        let outcome = |run: usize| RunOutcome {
            method: name.clone(),
            run,
            against,
            ok: false,
            verdict: None,
            max_ulps: None,
            tolerance_ulps: tol,
            detail: None,
            backend_unavailable: false,
        };
        // One loaded method serves every run, in order, as the recording did.
        let mut method = match session.load(name) {
            Ok(m) => m,
            Err(e) => {
                for run in 0..runs.len() {
                    out.push(RunOutcome {
                        detail: Some(e.to_string()),
                        backend_unavailable: matches!(e, RuntimeError::BackendNotAvailable { .. }),
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
            let bounds = match rec.tolerance {
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
            let result = Session::execute(&mut method, Some(&inputs));
            let o = match result {
                Err(e) => RunOutcome { detail: Some(e.to_string()), ..outcome(run) },
                Ok(actual) => judge(&expected, bounds.as_deref(), &actual, outcome(run)),
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

/// Compares one run's outputs: under recorded bounds when there are any, else by ulp gap.
fn judge(expected: &[HostValue], bounds: Option<&[Bound]>, actual: &[HostValue], base: RunOutcome) -> RunOutcome {
    let tol = base.tolerance_ulps;
    let gaps: Vec<Option<u64>> = if actual.len() == expected.len() {
        expected.iter().zip(actual).map(|(e, a)| ulp_gap(e, a)).collect()
    } else {
        vec![None]
    };
    let max = gaps.iter().try_fold(0u64, |m, g| g.map(|g| m.max(g)));
    if actual.len() != expected.len() {
        let detail = format!("{} outputs, {} recorded", actual.len(), expected.len());
        return RunOutcome { detail: Some(detail), verdict: bounds.map(|_| Verdict::Mismatch), ..base };
    }
    match bounds {
        Some(b) if b.len() == expected.len() => {
            let verdict =
                expected.iter().zip(b).zip(actual).map(|((e, b), a)| compare(e, b, a)).max().unwrap_or(Verdict::Exact);
            let ok = verdict != Verdict::Mismatch;
            let detail = (!ok).then(|| format!("outside the recorded tolerance (largest gap {max:?} ulp)"));
            RunOutcome { ok, verdict: Some(verdict), max_ulps: max, detail, ..base }
        }
        Some(_) => RunOutcome { detail: Some("tolerance count differs from the outputs".into()), ..base },
        None => {
            let ok = max.is_some_and(|m| m <= tol);
            let detail = (!ok).then(|| match max {
                None => "outputs differ in kind, dtype or shape".to_string(),
                Some(m) => format!("largest gap {m} ulp exceeds {tol}"),
            });
            RunOutcome { ok, max_ulps: max, detail, ..base }
        }
    }
}
