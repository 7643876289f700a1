//! What the reference runtime says of a loaded program before running it, as one of three
//! verdicts: it breaks a rule ExecuTorch enforces at load, it is valid but uses a kernel or
//! backend this runtime lacks, or it is valid.
//! May not touch: running methods, the exit codes a command gives (the CLI maps verdicts).

use super::check::check_all_methods;
use super::error::ErrorCode;
use serde::Serialize;
use serde_json::{Value, json};
use std::fmt;

/// One of the three kinds of verdict on a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadVerdict {
    /// It breaks a rule ExecuTorch enforces (exit 2).
    BreaksARule,
    /// It is valid but uses a kernel or backend the reference runtime lacks (exit 3).
    NotSupportedHere,
    /// It is valid and the reference runtime has all it uses.
    Valid,
}

/// What `check FILE` found: the rules the program breaks, and the kernels and backends it uses
/// that the runtime here lacks.
#[derive(Clone, Debug)]
pub struct CheckReport {
    /// Its methods.
    pub methods: Vec<String>,
    /// Each init-time check it fails that is a rule ExecuTorch enforces, with its code.
    pub broken: Vec<(String, ErrorCode)>,
    /// What it uses that the runtime here lacks (`kernel:NAME`, `backend:ID`).
    pub unsupported: Vec<String>,
}

/// Every init-time check of every method, each failure sorted into a broken rule or something
/// the runtime here lacks; `registered`: the backend ids the runtime here has.
pub fn check_program(loaded: &crate::format::LoadedProgram<'_>, registered: &[String]) -> CheckReport {
    let mut report = CheckReport {
        methods: loaded.program.plans().iter().map(|p| p.name_str().to_string()).collect(),
        broken: Vec::new(),
        unsupported: Vec::new(),
    };
    for v in check_all_methods(loaded) {
        match v.unsupported_here() {
            Some(u) => report.unsupported.push(u),
            None => report.broken.push((v.to_string(), v.code())),
        }
    }
    for d in loaded.program.plans().iter().flat_map(|p| p.delegate_list()) {
        if let Some(id) = d.id.as_deref().filter(|id| !registered.iter().any(|r| r == id)) {
            report.unsupported.push(format!("backend:{id}"));
        }
    }
    report.unsupported.sort();
    report.unsupported.dedup();
    report
}

impl CheckReport {
    /// A broken rule outweighs what is missing here.
    pub fn verdict(&self) -> LoadVerdict {
        if !self.broken.is_empty() {
            LoadVerdict::BreaksARule
        } else if !self.unsupported.is_empty() {
            LoadVerdict::NotSupportedHere
        } else {
            LoadVerdict::Valid
        }
    }

    /// `{"verdict", "broken": [{"rule", "code"}], "unsupported"}`.
    pub fn to_json(&self) -> Value {
        let broken: Vec<Value> =
            self.broken.iter().map(|(rule, code)| json!({"rule": rule, "code": format!("{code:?}")})).collect();
        json!({"verdict": self.verdict(), "broken": broken, "unsupported": self.unsupported})
    }
}

/// One line: the rules broken, or what is not supported here, or that every check passes.
impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.broken.is_empty() {
            writeln!(f, "{} violation(s)", self.broken.len())?;
        }
        if !self.unsupported.is_empty() {
            let what = if self.broken.is_empty() { "valid, but not supported here" } else { "also not supported here" };
            writeln!(f, "{what}: {}", self.unsupported.join(", "))?;
        }
        if self.broken.is_empty() && self.unsupported.is_empty() {
            writeln!(
                f,
                "ok: {} method(s) pass every init-time check: {}",
                self.methods.len(),
                self.methods.join(", ")
            )?;
        }
        Ok(())
    }
}
