//! One file's methods on the reference runtime (`ptecheck run FILE`): which methods a command
//! names, every one loaded first and kept (so delegates of several methods can share a loaded
//! model), then each executed; the outputs in the corpus encoding, the trace and the
//! multi-function model table.
//! May not touch: the program (it runs what it is given), the recordings (`replay`).

use crate::backends::multifn::MultifnBackend;
use crate::exit::Exit;
use crate::runtime::io::{list_to_json, list_to_report_json};
use crate::runtime::{HostValue, RuntimeError, Session, TraceSummary};
use serde_json::{Value, json};
use std::fmt;

/// The methods a command runs: `method` when named; else `forward` when inputs are given (they
/// are one method's), or every method of the program (`all`; `forward` when the program is not
/// loaded). A method `all` does not hold is refused, naming those it holds.
pub fn select_methods(method: Option<&str>, given: bool, all: Option<&[String]>) -> Result<Vec<String>, String> {
    let methods = match (method, all) {
        (Some(m), _) => vec![m.to_string()],
        (None, Some(all)) if !given => all.to_vec(),
        (None, _) => vec!["forward".into()],
    };
    if let Some(all) = all
        && let Some(m) = methods.iter().find(|m| !all.contains(m))
    {
        return Err(format!("no method named `{m}`; methods: {}", all.join(", ")));
    }
    Ok(methods)
}

/// The exit code of one method's failure: a kernel or backend missing here (3); a rule the
/// program breaks at load — an init-time check, a value the runtime refuses, a backend refusing
/// its blob — or a method or input the caller named wrongly (2); a failed run (1).
pub fn exit_of(e: &RuntimeError) -> Exit {
    match e {
        e if e.unsupported_here().is_some() => Exit::Unavailable,
        RuntimeError::MethodNotFound(_)
        | RuntimeError::Input { .. }
        | RuntimeError::Check(_)
        | RuntimeError::Value { .. }
        | RuntimeError::InitFailed { .. } => Exit::Rejected,
        _ => Exit::Failed,
    }
}

pub use crate::runtime::verdict::{CheckReport, LoadVerdict, check_program};

/// What `check` says of a loaded program: every init-time check, then — as `Method::init` does
/// — every method loaded with its delegates initialised by the default backends, so a backend
/// refusing its blob is a broken rule and one lacking a node or dtype is not supported here.
pub fn check_file(loaded: &crate::format::LoadedProgram<'_>) -> CheckReport {
    let rt = crate::backends::default_runtime();
    let mut report = check_program(loaded, &rt.registry.ids());
    if !report.broken.is_empty() {
        return report;
    }
    let session = Session::new(loaded, &rt);
    for name in session.method_names() {
        let Err(e) = session.load(&name) else { continue };
        match e.unsupported_here() {
            Some(u) if !report.unsupported.contains(&u) => report.unsupported.push(u),
            Some(_) => {}
            None => report.broken.push((e.to_string(), e.code())),
        }
    }
    report.unsupported.sort();
    report
}

impl CheckReport {
    /// Rejected (2) when it breaks a rule; else unavailable (3) when it uses what the runtime here
    /// lacks; else ok.
    pub fn exit(&self) -> Exit {
        match self.verdict() {
            LoadVerdict::BreaksARule => Exit::Rejected,
            LoadVerdict::NotSupportedHere => Exit::Unavailable,
            LoadVerdict::Valid => Exit::Ok,
        }
    }
}

/// How one method ended.
#[derive(Clone, Debug)]
pub enum MethodEnding {
    /// It ran: its outputs in the corpus encoding, or, when the encoding cannot hold one, in
    /// the report's encoding with why (`not_encodable`; the run then fails).
    Ran {
        /// The outputs, encoded.
        outputs: Vec<Value>,
        /// Why an output is not in the corpus encoding.
        unencodable: Option<String>,
    },
    /// It could not be loaded or run.
    Failed(RuntimeError),
}

/// The multi-function model table while the methods were loaded.
#[derive(Clone, Debug)]
pub struct ModelTable {
    /// Models loaded.
    pub loads: usize,
    /// Models live while the methods were loaded.
    pub live: usize,
    /// Their resident bytes.
    pub resident: usize,
    /// Per cache key: (key, loads, unloads).
    pub per_key: Vec<(String, usize, usize)>,
    /// Per cache key, the table's statistics as JSON.
    pub per_key_json: Vec<Value>,
}

/// What `run FILE` found.
#[derive(Clone, Debug)]
pub struct MethodRuns {
    /// Each method run, in the order named.
    pub methods: Vec<(String, MethodEnding)>,
    /// The trace and the model table, when asked for.
    pub trace: Option<(TraceSummary, ModelTable)>,
}

/// Loads every method of `methods` first and keeps them together, then executes each on
/// `given` inputs (zero-filled when `None`); `multifn` is the backend whose model table is
/// reported with `trace`.
pub fn run_methods(
    session: &Session<'_, '_>,
    methods: &[String],
    given: Option<&[HostValue]>,
    multifn: &MultifnBackend,
    trace: bool,
) -> MethodRuns {
    let mut loaded: Vec<_> = methods.iter().map(|name| session.load(name)).collect();
    let mut out = Vec::new();
    for (name, m) in methods.iter().zip(loaded.iter_mut()) {
        let ending = match m.as_mut().map_err(|e| e.clone()).and_then(|m| Session::execute(m, given)) {
            Ok(outs) => match list_to_json(&outs, "outputs") {
                Ok(outputs) => MethodEnding::Ran { outputs, unencodable: None },
                Err(e) => MethodEnding::Ran { outputs: list_to_report_json(&outs), unencodable: Some(e.to_string()) },
            },
            Err(e) => MethodEnding::Failed(e),
        };
        out.push((name.clone(), ending));
    }
    let (loads, live, resident) = multifn.table.totals();
    drop(loaded);
    let trace = trace.then(|| {
        let stats = multifn.table.stats();
        let table = ModelTable {
            loads,
            live,
            resident,
            per_key: stats.iter().map(|(k, s)| (k.cache_key.clone(), s.loads, s.unloads)).collect(),
            per_key_json: stats.iter().map(|(k, s)| json!({"cache_key": k.cache_key, "stats": s})).collect(),
        };
        (session.trace().summary(), table)
    });
    MethodRuns { methods: out, trace }
}

impl MethodRuns {
    /// What goes to stderr: one line per method that failed or has an output the encoding does
    /// not hold.
    pub fn errors(&self) -> Vec<String> {
        self.methods
            .iter()
            .filter_map(|(name, e)| match e {
                MethodEnding::Ran { unencodable: Some(why), .. } => {
                    Some(format!("{name}: {why} (not in the corpus encoding)"))
                }
                MethodEnding::Ran { .. } => None,
                MethodEnding::Failed(e) => Some(e.to_string()),
            })
            .collect()
    }

    /// The worst ending: failed for an unencodable output, else by [`exit_of`] each failure.
    pub fn exit(&self) -> Exit {
        self.methods.iter().fold(Exit::Ok, |x, (_, e)| match e {
            MethodEnding::Ran { unencodable: Some(_), .. } => x.max(Exit::Failed),
            MethodEnding::Ran { .. } => x,
            MethodEnding::Failed(e) => x.max(exit_of(e)),
        })
    }

    /// `{"methods": {NAME: {"outputs"} | {"error", "code"}}, "trace", "multifn_models"}`.
    pub fn to_json(&self) -> Value {
        let methods: serde_json::Map<String, Value> = self
            .methods
            .iter()
            .map(|(name, e)| {
                let v = match e {
                    MethodEnding::Ran { outputs, .. } => json!({"outputs": outputs}),
                    MethodEnding::Failed(e) => json!({"error": e.to_string(), "code": format!("{:?}", e.code())}),
                };
                (name.clone(), v)
            })
            .collect();
        let (summary, models) = match &self.trace {
            Some((s, t)) => (
                Some(s),
                Some(json!({"loads": t.loads, "live_while_loaded": t.live, "resident_bytes_while_loaded": t.resident,
                            "per_key": t.per_key_json})),
            ),
            None => (None, None),
        };
        json!({"methods": methods, "trace": summary, "multifn_models": models})
    }
}

/// `NAME: [outputs]` per method that ran, then the trace and the model table when asked for.
impl fmt::Display for MethodRuns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, e) in &self.methods {
            if let MethodEnding::Ran { outputs, .. } = e {
                writeln!(f, "{name}: {}", serde_json::to_string(outputs).unwrap_or_default())?;
            }
        }
        if let Some((summary, t)) = &self.trace {
            write!(f, "{summary}")?;
            if t.loads > 0 {
                writeln!(
                    f,
                    "multifn models: {} load(s); {} live, {} resident bytes while the methods were loaded",
                    t.loads, t.live, t.resident
                )?;
                for (key, loads, unloads) in &t.per_key {
                    writeln!(f, "  {key}: {loads} load(s), {unloads} unload(s)")?;
                }
            }
        }
        Ok(())
    }
}
