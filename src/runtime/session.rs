//! `Session`: one loaded program, a runtime and (optionally) external data, with one trace —
//! "load a method, set its inputs, execute, read the outputs" written once for the CLI, the
//! oracle, the fuzz entries, `run --expect`, the runner and the tests.
//! May not touch: bytes (it takes a loaded program), IR, emission.

use super::backend::Trace;
use super::error::RuntimeError;
use super::method::{Method, Runtime, Watcher};
use super::value::HostValue;
use crate::format::{LoadedProgram, LoadedPtd};

/// A program ready to run on a runtime.
pub struct Session<'s, 'a> {
    loaded: &'a LoadedProgram<'a>,
    runtime: &'s Runtime,
    external: Option<&'s LoadedPtd<'s>>,
    trace: Trace,
}

impl<'s, 'a> Session<'s, 'a> {
    /// A session over `loaded` on `runtime`, recording into a fresh trace.
    pub fn new(loaded: &'a LoadedProgram<'a>, runtime: &'s Runtime) -> Self {
        Session { loaded, runtime, external: None, trace: Trace::default() }
    }

    /// The same session resolving EXTERNAL tensors from `ptd`.
    pub fn with_external(mut self, ptd: Option<&'s LoadedPtd<'s>>) -> Self {
        self.external = ptd;
        self
    }

    /// The same session recording into `trace` (shared with the caller).
    pub fn with_trace(mut self, trace: Trace) -> Self {
        self.trace = trace;
        self
    }

    /// The program.
    pub fn loaded(&self) -> &'a LoadedProgram<'a> {
        self.loaded
    }

    /// The trace every method of this session records into.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Method names, in plan order.
    pub fn method_names(&self) -> Vec<String> {
        self.loaded.program.plans().iter().map(|p| p.name_str().to_string()).collect()
    }

    /// Loads and initialises method `name`.
    pub fn load(&self, name: &str) -> Result<Method<'a>, RuntimeError> {
        self.runtime.load_method(self.loaded, name, self.external, &self.trace)
    }

    /// Sets the inputs of a loaded method (`None`: zero-filled, at each input's declared shape),
    /// executes it once and copies its outputs out. Given inputs must be exactly the method's,
    /// as ExecuTorch's `set_inputs` takes them (else InvalidArgument): none is dropped.
    pub fn execute(method: &mut Method<'_>, inputs: Option<&[HostValue]>) -> Result<Vec<HostValue>, RuntimeError> {
        Self::execute_watched(method, inputs, None)
    }

    /// [`Session::execute`] with `watcher` shown every instruction ([`Method::execute_watched`]).
    pub fn execute_watched(
        method: &mut Method<'_>,
        inputs: Option<&[HostValue]>,
        watcher: Option<&mut dyn Watcher>,
    ) -> Result<Vec<HostValue>, RuntimeError> {
        if let Some(given) = inputs.filter(|g| g.len() != method.num_inputs()) {
            return Err(RuntimeError::Input {
                method: method.name().to_string(),
                index: given.len().min(method.num_inputs()),
                code: super::error::ErrorCode::InvalidArgument,
                detail: format!("{} inputs given, the method takes {}", given.len(), method.num_inputs()),
            });
        }
        for i in 0..method.num_inputs() {
            let v = match inputs {
                Some(given) => given.get(i).cloned().unwrap_or(HostValue::None),
                None => method.input_template(i).unwrap_or(HostValue::None),
            };
            method.set_input(i, &v)?;
        }
        method.execute_watched(watcher)?;
        method.outputs()
    }

    /// Loads method `name`, runs it once on `inputs` (see [`Session::execute`]) and drops it.
    pub fn run(&self, name: &str, inputs: Option<&[HostValue]>) -> Result<Vec<HostValue>, RuntimeError> {
        let mut m = self.load(name)?;
        Self::execute(&mut m, inputs)
    }
}
