//! One program against a runner (`run FILE --runner CMD`): each method run by the reference
//! runtime and by the runner process on the same inputs, and whether the two end alike.
//! Owns: the two endings of a method and the rule that says they agree. May not touch:
//! generation, emission, the campaigns.

use crate::exit::Exit;
use crate::format::{FormatError, LoadedProgram, LoadedPtd};
use crate::oracle::values;
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
    },
    /// The runner process crashed, hung, exited or replied garbage.
    RunnerFailed(String),
}

impl Ending {
    /// The ending as JSON: `{"outputs": [...]}`, `{"stage", "code", "error"}` or `{"runner_failed"}`.
    pub fn to_json(&self) -> Value {
        match self {
            Ending::Outputs(outs) => json!({"outputs": list_to_report_json(outs)}),
            Ending::Refused { stage, code, message } => json!({"stage": stage, "code": code, "error": message}),
            Ending::RunnerFailed(why) => json!({"runner_failed": why}),
        }
    }

    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            Ending::Outputs(outs) => {
                format!("ran: {}", serde_json::to_string(&list_to_report_json(outs)).unwrap_or_default())
            }
            Ending::Refused { stage, code: Some(c), message } => format!("{stage:?} 0x{c:02x}: {message}"),
            Ending::Refused { stage, code: None, message } => format!("{stage:?}: {message}"),
            Ending::RunnerFailed(why) => format!("runner failed: {why}"),
        }
    }
}

/// Whether the reference's ending `ours` and the runner's `theirs` agree: equal outputs (NaN
/// equals NaN, -0.0 is not +0.0), or refusals at the same stage with the same code where both
/// give one. A refusal by the reference loader (no code) agrees with the runner's refusal to
/// load the program or its method: that loader checks at load what ExecuTorch checks at init
/// (docs/pte-format.md). A runner that refused the request itself never agrees.
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

/// One method's two endings.
#[derive(Clone, Debug)]
pub struct Versus {
    /// Method name.
    pub method: String,
    /// The reference runtime's ending.
    pub ours: Ending,
    /// The runner's ending.
    pub theirs: Ending,
}

impl Versus {
    /// Whether the two endings agree (see [`agree`]).
    pub fn same(&self) -> bool {
        agree(&self.ours, &self.theirs)
    }
}

fn refused(stage: Stage, e: &RuntimeError) -> Ending {
    Ending::Refused { stage, code: Some(e.code() as u32), message: e.to_string() }
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
/// runner will be sent), with the inputs it used.
fn ours(
    rt: &Runtime,
    loaded: &LoadedProgram<'_>,
    ptd: Option<&LoadedPtd<'_>>,
    method: &str,
    given: Option<&[HostValue]>,
) -> (Ending, Vec<HostValue>) {
    let session = Session::new(loaded, rt).with_external(ptd);
    let mut m = match session.load(method) {
        Ok(m) => m,
        Err(e) => {
            let inputs = given.map_or_else(|| declared_inputs(loaded, method), <[_]>::to_vec);
            return (refused(Stage::LoadMethod, &e), inputs);
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
            Ending::Refused { stage: Stage::SetInputs, code: Some(ErrorCode::InvalidArgument as u32), message },
            inputs,
        );
    }
    for (i, v) in inputs.iter().enumerate() {
        if let Err(e) = m.set_input(i, v) {
            return (refused(Stage::SetInputs, &e), inputs);
        }
    }
    let ending = match m.execute().and_then(|()| m.outputs()) {
        Ok(outs) => Ending::Outputs(outs),
        Err(e) => refused(Stage::Execute, &e),
    };
    (ending, inputs)
}

fn theirs(o: Outcome) -> Ending {
    match o {
        Outcome::Reply(Reply::Outputs(outs)) => Ending::Outputs(outs),
        Outcome::Reply(Reply::Error { message, stage, code }) => Ending::Refused { stage, code, message },
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
    let (ours, inputs): (Vec<Ending>, Vec<Vec<HostValue>>) = methods
        .iter()
        .map(|m| match loaded {
            Ok(l) => self::ours(rt, l, ptd.map(|(_, d)| d), m, given),
            Err(e) => (
                Ending::Refused { stage: Stage::LoadProgram, code: None, message: e.to_string() },
                given.map(<[_]>::to_vec).unwrap_or_default(),
            ),
        })
        .unzip();
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
        .map(|((m, ours), o)| Versus { method: m.clone(), ours, theirs: theirs(o) })
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

    /// Ok when every method ended alike, else failed (whatever the endings).
    pub fn exit(&self) -> Exit {
        Exit::failed_if(!self.all_same())
    }

    /// `{"runner", "methods": {NAME: {"same", "ours", "runner"}}, "all_same"}`.
    pub fn to_json(&self) -> Value {
        let methods: serde_json::Map<String, Value> = self
            .methods
            .iter()
            .map(|v| {
                (v.method.clone(), json!({"same": v.same(), "ours": v.ours.to_json(), "runner": v.theirs.to_json()}))
            })
            .collect();
        json!({"runner": self.runner, "methods": methods, "all_same": self.all_same()})
    }
}

/// Per method: `NAME: same` or `NAME: DIFFERENT`, then both endings.
impl fmt::Display for VersusReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for v in &self.methods {
            let verdict = if v.same() { "same" } else { "DIFFERENT" };
            writeln!(f, "{}: {verdict}\n  ours:   {}\n  runner: {}", v.method, v.ours.describe(), v.theirs.describe())?;
        }
        Ok(())
    }
}
