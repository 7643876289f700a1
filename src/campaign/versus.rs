//! One program against a runner (`run FILE --runner CMD`): each method run by the reference
//! runtime and by the runner process on the same inputs, and whether the two end alike: the
//! runner's outputs exact, within the bounds the program gives ours (`crate::bounds`), or
//! different.
//! Owns: the two endings of a method and the rule that says they agree. May not touch:
//! generation, emission, the campaigns.

use crate::exit::Exit;
use crate::format::{FormatError, LoadedProgram, LoadedPtd};
use crate::ir::bound::Bound;
use crate::oracle::values::{self, Gap, Verdict};
use crate::runner::{Outcome, Reply, Request, Runner, Stage};
use crate::runtime::io::list_to_report_json;
use crate::runtime::{ErrorCode, HostTensor, HostValue, Runtime, RuntimeError, Session};
use serde_json::{Value, json};
use std::fmt;
use std::path::{Path, PathBuf};

/// How one side ended one method.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    /// Ran; its outputs.
    Outputs(Vec<HostValue>),
    /// Refused at `stage`, with an ExecuTorch error code where one is known.
    Refused {
        /// Where.
        stage: Stage,
        /// ExecuTorch code (`None`: the reference loader's typed errors have none).
        code: Option<u32>,
        /// Why.
        message: String,
        /// What the reference runtime lacks, when that is why (`kernel:NAME`, `backend:ID`).
        unsupported_here: Option<String>,
    },
    /// The runner process crashed, hung, exited or replied garbage.
    RunnerFailed(String),
}

impl Ending {
    /// The ending as JSON: `{"outputs": [...]}`, `{"stage", "code", "error"}` or `{"runner_failed"}`.
    pub fn to_json(&self) -> Value {
        match self {
            Ending::Outputs(outs) => json!({"outputs": list_to_report_json(outs)}),
            Ending::Refused { stage, code, message, .. } => json!({"stage": stage, "code": code, "error": message}),
            Ending::RunnerFailed(why) => json!({"runner_failed": why}),
        }
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            Ending::Outputs(outs) => {
                format!("ran: {}", serde_json::to_string(&list_to_report_json(outs)).unwrap_or_default())
            }
            Ending::Refused { stage, code: Some(c), message, .. } => format!("{stage:?} 0x{c:02x}: {message}"),
            Ending::Refused { stage, code: None, message, .. } => format!("{stage:?}: {message}"),
            Ending::RunnerFailed(why) => format!("runner failed: {why}"),
        }
    }
}

/// Whether the reference's ending `ours` and the runner's `theirs` agree: equal outputs (NaN
/// equals NaN, -0.0 is not +0.0), or refusals at the same stage with the same code where both
/// give one. A refusal by the reference loader (no code) agrees with the runner's refusal to
/// load the program or its method: that loader checks at load what ExecuTorch checks at init
/// (docs/pte-format.md). A runner that refused the request itself never agrees. (Outputs within
/// their bounds agree too: [`Versus::verdict`].)
pub fn agree(ours: &Ending, theirs: &Ending) -> bool {
    match (ours, theirs) {
        (Ending::Outputs(a), Ending::Outputs(b)) => values::same_all(a, b),
        (Ending::Refused { stage: Stage::LoadProgram, code: None, .. }, Ending::Refused { stage, .. }) => {
            matches!(stage, Stage::LoadProgram | Stage::LoadMethod)
        }
        (Ending::Refused { stage: s1, code: c1, .. }, Ending::Refused { stage: s2, code: c2, .. }) => {
            s1 == s2 && *s2 != Stage::Request && (c1.is_none() || c2.is_none() || c1 == c2)
        }
        _ => false,
    }
}

/// Each output's bound, and why any is unbounded.
pub type Bounds = (Vec<Bound>, Vec<String>);

/// One method's two endings.
#[derive(Clone, Debug)]
pub struct Versus {
    /// Method name.
    pub method: String,
    /// The reference runtime's ending.
    pub ours: Ending,
    /// The runner's ending.
    pub theirs: Ending,
    /// Our outputs' bounds from the program (when ours ran), and why any is unbounded.
    pub bounds: Option<Bounds>,
    /// What the reference runtime lacks to run the method (`kernel:NAME`, `backend:ID`), when
    /// that is why it did not: the method is valid but not supported here, whatever the runner
    /// did.
    pub unsupported_here: Option<String>,
}

impl Versus {
    /// Where both ran: the runner's outputs against ours under the program's bounds.
    pub fn verdict(&self) -> Option<Verdict> {
        match (&self.ours, &self.theirs, &self.bounds) {
            (Ending::Outputs(a), Ending::Outputs(b), Some((bounds, _))) => Some(values::verdict_of(a, bounds, b)),
            _ => None,
        }
    }

    /// Each output's largest gap as a fraction of its bound, where both ran.
    pub fn gaps(&self) -> Vec<Option<Gap>> {
        match (&self.ours, &self.theirs, &self.bounds) {
            (Ending::Outputs(a), Ending::Outputs(b), Some((bounds, _))) if a.len() == b.len() => {
                a.iter().zip(bounds).zip(b).map(|((x, e), y)| values::largest_gap(x, e, y)).collect()
            }
            _ => vec![],
        }
    }

    /// Whether the two endings agree: outputs exact or within their bounds, or refusals as
    /// [`agree`] says. A method not supported here is not compared.
    pub fn same(&self) -> bool {
        if self.unsupported_here.is_some() {
            return true;
        }
        match self.verdict() {
            Some(v) => v != Verdict::Mismatch,
            None => agree(&self.ours, &self.theirs),
        }
    }
}

fn refused(stage: Stage, e: &RuntimeError) -> Ending {
    Ending::Refused {
        stage,
        code: Some(e.code() as u32),
        message: e.to_string(),
        unsupported_here: e.unsupported_here(),
    }
}

/// Most bytes of all the zero-filled inputs made from a refused program's declaration (each is
/// sent as JSON, many times its size).
const MAX_DECLARED_INPUTS: usize = 16 << 20;

/// Inputs of `method` read from its plan (zeros of each tensor's declared dtype and sizes, each
/// scalar's value), for a program the reference refuses before it has its own templates: the
/// runner is then still asked to run the method, not to take a wrong number of inputs.
fn declared_inputs(loaded: &LoadedProgram<'_>, method: &str) -> Vec<HostValue> {
    use crate::program::EValue;
    let Some(plan) = loaded.program.plan(method) else { return vec![] };
    let values = plan.values.as_deref().unwrap_or(&[]);
    let mut left = MAX_DECLARED_INPUTS;
    plan.inputs
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .map(|i| match usize::try_from(*i).ok().and_then(|i| values.get(i)) {
            Some(EValue::Tensor(t)) => {
                let sizes: Option<Vec<usize>> = t.sizes.iter().flatten().map(|s| usize::try_from(*s).ok()).collect();
                let elem = t.scalar_type.element_size().unwrap_or(1);
                let bytes = sizes.as_deref().and_then(crate::program::checked_numel).and_then(|n| n.checked_mul(elem));
                match (sizes, bytes) {
                    (Some(sizes), Some(b)) if b <= left => {
                        left -= b;
                        HostTensor::zeros(t.scalar_type, sizes).map_or(HostValue::None, HostValue::Tensor)
                    }
                    _ => HostValue::None,
                }
            }
            Some(EValue::Int(x)) => HostValue::Int(*x),
            Some(EValue::Bool(x)) => HostValue::Bool(*x),
            Some(EValue::Double(x)) => HostValue::Double(*x),
            _ => HostValue::None,
        })
        .collect()
}

/// The reference runtime's ending of `method` on `inputs` (`None`: each input's template, as the
/// runner will be sent), with the inputs it used and, when it ran, its outputs' bounds.
fn ours(
    rt: &Runtime,
    loaded: &LoadedProgram<'_>,
    ptd: Option<&LoadedPtd<'_>>,
    method: &str,
    given: Option<&[HostValue]>,
) -> (Ending, Vec<HostValue>, Option<Bounds>) {
    let session = Session::new(loaded, rt).with_external(ptd);
    let mut m = match session.load(method) {
        Ok(m) => m,
        Err(e) => {
            let inputs = given.map_or_else(|| declared_inputs(loaded, method), <[_]>::to_vec);
            return (refused(Stage::LoadMethod, &e), inputs, None);
        }
    };
    let inputs: Vec<HostValue> = match given {
        Some(g) => g.to_vec(),
        None => (0..m.num_inputs()).map(|i| m.input_template(i).unwrap_or(HostValue::None)).collect(),
    };
    if inputs.len() != m.num_inputs() {
        // ExecuTorch's `set_inputs` takes exactly the method's inputs (InvalidArgument).
        let message = format!("{} inputs given, the method takes {}", inputs.len(), m.num_inputs());
        return (
            Ending::Refused {
                stage: Stage::SetInputs,
                code: Some(ErrorCode::InvalidArgument as u32),
                message,
                unsupported_here: None,
            },
            inputs,
            None,
        );
    }
    match crate::bounds::run_loaded(&mut m, loaded, &inputs, false) {
        Ok(b) => (Ending::Outputs(b.outputs), inputs, Some((b.bounds, b.notes))),
        Err(e @ RuntimeError::Input { .. }) => (refused(Stage::SetInputs, &e), inputs, None),
        Err(e) => (refused(Stage::Execute, &e), inputs, None),
    }
}

fn theirs(o: Outcome) -> Ending {
    match o {
        Outcome::Reply(Reply::Outputs(outs)) => Ending::Outputs(outs),
        Outcome::Reply(Reply::Error { message, stage, code }) => {
            Ending::Refused { stage, code, message, unsupported_here: None }
        }
        other => Ending::RunnerFailed(format!("{} ({other:?})", other.class())),
    }
}

/// Runs `methods` of the program at `pte` (what the reference loader made of it: `loaded`;
/// external data at `ptd`'s path, loaded) on the reference runtime `rt` and on `runner`, with
/// `given` inputs or each input's template. A program the reference loader refuses is still
/// sent to the runner, with `given` inputs or none.
pub fn versus(
    rt: &Runtime,
    pte: &Path,
    loaded: &Result<LoadedProgram<'_>, FormatError>,
    ptd: Option<(&Path, &LoadedPtd<'_>)>,
    methods: &[String],
    given: Option<&[HostValue]>,
    runner: &mut Runner,
) -> Vec<Versus> {
    let mut ours = Vec::with_capacity(methods.len());
    let mut inputs = Vec::with_capacity(methods.len());
    for m in methods {
        let (ending, used, bounds) = match loaded {
            Ok(l) => self::ours(rt, l, ptd.map(|(_, d)| d), m, given),
            Err(e) => (
                Ending::Refused {
                    stage: Stage::LoadProgram,
                    code: None,
                    message: e.to_string(),
                    unsupported_here: None,
                },
                given.map(<[_]>::to_vec).unwrap_or_default(),
                None,
            ),
        };
        ours.push((ending, bounds));
        inputs.push(used);
    }
    let requests: Vec<Request> = methods
        .iter()
        .zip(inputs)
        .map(|(m, inputs)| Request {
            id: runner.next_id(),
            pte: pte.to_path_buf(),
            method: m.clone(),
            inputs,
            ptd: ptd.map(|(p, _)| PathBuf::from(p)),
        })
        .collect();
    let outs = runner.run(&requests);
    methods
        .iter()
        .zip(ours)
        .zip(outs)
        .map(|((m, (ours, bounds)), o)| {
            let unsupported_here = match &ours {
                Ending::Refused { unsupported_here, .. } => unsupported_here.clone(),
                _ => None,
            };
            Versus { method: m.clone(), ours, theirs: theirs(o), bounds, unsupported_here }
        })
        .collect()
}

/// `run FILE --runner CMD`'s report: the runner's hello and each method's two endings.
#[derive(Clone, Debug)]
pub struct VersusReport {
    /// The runner's hello.
    pub runner: Value,
    /// Each method compared.
    pub methods: Vec<Versus>,
}

impl VersusReport {
    /// Whether every method ended alike on both sides.
    pub fn all_same(&self) -> bool {
        self.methods.iter().all(Versus::same)
    }

    /// Failed when some method ended differently; else unavailable when some method is not
    /// supported here; else ok.
    pub fn exit(&self) -> Exit {
        if !self.all_same() {
            Exit::Failed
        } else if self.methods.iter().any(|v| v.unsupported_here.is_some()) {
            Exit::Unavailable
        } else {
            Exit::Ok
        }
    }

    /// `{"runner", "methods": {NAME: {"same", "verdict", "bounds_from", "gaps", "unbounded",
    /// "ours", "runner"}}, "all_same"}`.
    pub fn to_json(&self) -> Value {
        let methods: serde_json::Map<String, Value> = self
            .methods
            .iter()
            .map(|v| {
                let unbounded = v.bounds.as_ref().map(|(_, n)| n.clone()).unwrap_or_default();
                (
                    v.method.clone(),
                    json!({"same": v.same(), "verdict": v.verdict(), "unsupported_here": v.unsupported_here,
                           "bounds_from": v.bounds.as_ref().map(|_| "program"),
                           "gaps": v.gaps(), "unbounded": unbounded,
                           "ours": v.ours.to_json(), "runner": v.theirs.to_json()}),
                )
            })
            .collect();
        json!({"runner": self.runner, "methods": methods, "all_same": self.all_same()})
    }
}

/// Per method: `NAME: exact`, `within bound` (bounds from the program), `same` (both refused
/// alike) or `DIFFERENT`, each output equal or its largest gap as a fraction of its bound, then
/// both endings.
impl fmt::Display for VersusReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for v in &self.methods {
            let unsupported = v.unsupported_here.as_ref().map(|u| format!("not supported here ({u})"));
            let verdict = match v.verdict() {
                _ if unsupported.is_some() => unsupported.as_deref().unwrap_or_default(),
                Some(Verdict::Exact) => "exact (bounds from the program)",
                Some(Verdict::WithinBound) => "within bound (bounds from the program)",
                Some(Verdict::Mismatch) => "DIFFERENT (bounds from the program)",
                None if v.same() => "same",
                None => "DIFFERENT",
            };
            writeln!(f, "{}: {verdict}", v.method)?;
            for (i, g) in v.gaps().iter().enumerate() {
                match g {
                    Some(g) if g.gap > 0.0 => writeln!(f, "  output {i}: {g}")?,
                    Some(_) => writeln!(f, "  output {i}: equal")?,
                    None => writeln!(f, "  output {i}: kind, dtype or shape differ")?,
                }
            }
            for n in v.bounds.iter().flat_map(|(_, n)| n) {
                writeln!(f, "  unbounded: {n}")?;
            }
            writeln!(f, "  ours:   {}\n  runner: {}", v.ours.describe(), v.theirs.describe())?;
        }
        Ok(())
    }
}
