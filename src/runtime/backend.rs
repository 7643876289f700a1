//! Backend interface, registry, per-backend runtime options and the lifecycle trace.
//!
//! A backend is a trait object: `is_available`, `init` (processed bytes + compile specs +
//! runtime options -> handle), `execute` (handle + the DelegateCall's argument slots) and
//! `destroy` (releases the handle). As in ExecuTorch, where a handle is a pointer, nothing in
//! the interface stops a faulty runtime from destroying a handle twice or never: that is what
//! the backends' own ledgers (`crate::backends::ledger`) count. The runtime records what it
//! believes it did in a [`Trace`] shared with the caller, which outlives the method.
//! May not touch: the backends' ledgers (they count on the backends' side), IR, emission.

use super::error::{ErrorCode, Site};
use super::frame::{Frame, OpError};
use crate::program::CompileSpec;
use serde::Serialize;
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use thiserror::Error;

/// Maximum number of registered backends (G1).
pub const MAX_BACKENDS: usize = 16;

/// A runtime option value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum OptionValue {
    /// Boolean.
    Bool(bool),
    /// Integer.
    Int(i64),
    /// String.
    Str(String),
}

impl OptionValue {
    /// Parses `true`/`false`, an integer, or else a string.
    pub fn parse(s: &str) -> Self {
        match s {
            "true" => OptionValue::Bool(true),
            "false" => OptionValue::Bool(false),
            _ => s.parse().map(OptionValue::Int).unwrap_or_else(|_| OptionValue::Str(s.to_string())),
        }
    }
}

/// Options registered for one backend id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BackendOptions(pub BTreeMap<String, OptionValue>);

impl BackendOptions {
    /// A bool option: missing -> NotFound, wrong type -> InvalidArgument (D5).
    pub fn get_bool(&self, key: &str) -> Result<bool, ErrorCode> {
        match self.0.get(key) {
            None => Err(ErrorCode::NotFound),
            Some(OptionValue::Bool(b)) => Ok(*b),
            Some(_) => Err(ErrorCode::InvalidArgument),
        }
    }
    /// An int option.
    pub fn get_int(&self, key: &str) -> Result<i64, ErrorCode> {
        match self.0.get(key) {
            None => Err(ErrorCode::NotFound),
            Some(OptionValue::Int(i)) => Ok(*i),
            Some(_) => Err(ErrorCode::InvalidArgument),
        }
    }
    /// A string option.
    pub fn get_str(&self, key: &str) -> Result<&str, ErrorCode> {
        match self.0.get(key) {
            None => Err(ErrorCode::NotFound),
            Some(OptionValue::Str(s)) => Ok(s),
            Some(_) => Err(ErrorCode::InvalidArgument),
        }
    }
}

/// A bad `--option` or registry operation.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum OptionError {
    /// Not of the form `BACKEND.KEY=VALUE`.
    #[error("option `{0}` is not BACKEND.KEY=VALUE")]
    Syntax(String),
    /// Backend id empty or 64 bytes or longer (G2).
    #[error("backend id `{0}` must be 1..63 bytes")]
    BackendId(String),
    /// More than 8 backends (G2).
    #[error("options for more than 8 backends")]
    TooManyBackends,
    /// Registry full or duplicate (G1).
    #[error("cannot register backend `{id}`: {why}")]
    Register {
        /// Backend id.
        id: String,
        /// Why.
        why: &'static str,
    },
}

/// Runtime options per backend id (the `LoadBackendOptionsMap` analogue).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RuntimeOptions(pub BTreeMap<String, BackendOptions>);

impl RuntimeOptions {
    /// Sets one option.
    pub fn set(&mut self, backend: &str, key: &str, value: OptionValue) -> Result<(), OptionError> {
        if backend.is_empty() || backend.len() >= 64 {
            return Err(OptionError::BackendId(backend.to_string()));
        }
        if !self.0.contains_key(backend) && self.0.len() >= 8 {
            return Err(OptionError::TooManyBackends);
        }
        self.0.entry(backend.to_string()).or_default().0.insert(key.to_string(), value);
        Ok(())
    }
    /// Parses and sets `BACKEND.KEY=VALUE`.
    pub fn parse_and_set(&mut self, spec: &str) -> Result<(), OptionError> {
        let (lhs, value) = spec.split_once('=').ok_or_else(|| OptionError::Syntax(spec.to_string()))?;
        let (backend, key) = lhs.rsplit_once('.').ok_or_else(|| OptionError::Syntax(spec.to_string()))?;
        if key.is_empty() {
            return Err(OptionError::Syntax(spec.to_string()));
        }
        self.set(backend, key, OptionValue::parse(value))
    }
    /// The options of one backend (empty when none).
    pub fn for_backend(&self, id: &str) -> BackendOptions {
        self.0.get(id).cloned().unwrap_or_default()
    }
}

/// What a backend's `init` sees besides its blob and compile specs.
pub struct InitContext<'c> {
    /// Method name.
    pub method: &'c str,
    /// Index of the BackendDelegate being initialised.
    pub delegate_index: usize,
    /// Runtime options registered under this backend's id.
    pub options: &'c BackendOptions,
    /// Named data visible to delegates (PTE named data).
    pub named_data: &'c [(&'c str, &'c [u8])],
}

/// A backend's per-delegate state.
pub struct BackendHandle {
    /// Backend-defined state.
    pub state: Box<dyn Any + Send>,
    /// Bytes the handle keeps resident (for the trace's peak figure).
    pub bytes: usize,
}

/// The DelegateCall's argument slots, in order, over the method's frame.
pub struct DelegateArgs<'f, 'a> {
    /// The frame.
    pub frame: &'f mut Frame<'a>,
    /// Value indices of the arguments.
    pub args: &'f [usize],
    /// Where the call is.
    pub site: Site,
}

/// A backend.
pub trait Backend: Send + Sync {
    /// Registry name (exact match with `BackendDelegate.id`).
    fn id(&self) -> &str;
    /// Whether the backend can run here.
    fn is_available(&self) -> bool {
        true
    }
    /// Prepares one BackendDelegate.
    fn init(&self, ctx: &InitContext<'_>, processed: &[u8], specs: &[CompileSpec]) -> Result<BackendHandle, OpError>;
    /// Runs one DelegateCall.
    fn execute(&self, handle: &mut BackendHandle, args: &mut DelegateArgs<'_, '_>) -> Result<(), OpError>;
    /// Releases a handle's resources. The runtime calls it exactly once per handle and then
    /// drops the handle; a backend must tolerate (and may count) a second call.
    fn destroy(&self, handle: &mut BackendHandle) {
        handle.state = Box::new(());
        handle.bytes = 0;
    }
}

/// The registry of backends, looked up by exact id.
#[derive(Clone, Default)]
pub struct BackendRegistry {
    backends: Vec<Arc<dyn Backend>>,
}

impl BackendRegistry {
    /// Registers a backend (at most 16, ids unique).
    pub fn register(&mut self, b: Arc<dyn Backend>) -> Result<(), OptionError> {
        if self.backends.iter().any(|x| x.id() == b.id()) {
            return Err(OptionError::Register { id: b.id().to_string(), why: "already registered" });
        }
        if self.backends.len() >= MAX_BACKENDS {
            return Err(OptionError::Register { id: b.id().to_string(), why: "registry full (16)" });
        }
        self.backends.push(b);
        Ok(())
    }
    /// The backend registered as `id`.
    pub fn get(&self, id: &str) -> Option<Arc<dyn Backend>> {
        self.backends.iter().find(|b| b.id() == id).cloned()
    }
    /// Registered ids.
    pub fn ids(&self) -> Vec<String> {
        self.backends.iter().map(|b| b.id().to_string()).collect()
    }
}

/// One lifecycle event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event")]
pub enum TraceEvent {
    /// A successful `init`.
    Init {
        /// Method.
        method: String,
        /// BackendDelegate index.
        delegate: usize,
        /// Backend id.
        backend: String,
        /// Handle id (unique per trace).
        handle: u64,
        /// Resident bytes of the handle.
        bytes: usize,
    },
    /// A failed `init` (no handle, never destroyed).
    InitFailed {
        /// Method.
        method: String,
        /// BackendDelegate index.
        delegate: usize,
        /// Backend id.
        backend: String,
        /// Error code.
        code: ErrorCode,
    },
    /// A `destroy`.
    Destroy {
        /// Method.
        method: String,
        /// BackendDelegate index.
        delegate: usize,
        /// Handle id.
        handle: u64,
    },
}

/// Where executes happened: method, BackendDelegate index, calling instruction, handle id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExecuteSite {
    /// Method.
    pub method: String,
    /// BackendDelegate index.
    pub delegate: usize,
    /// Calling instruction.
    pub site: Site,
    /// Handle id.
    pub handle: u64,
}

#[derive(Debug, Default)]
struct TraceLog {
    events: Vec<TraceEvent>,
    /// Executes are counted where they happened, not logged one by one: a loop that calls a
    /// delegate a million times holds one entry, so the trace grows with the program, not with
    /// how long it runs.
    executes: BTreeMap<ExecuteSite, usize>,
    next_handle: u64,
}

/// A shared record of delegate lifecycle events (inits, failed inits and destroys in order)
/// and of how many executes each call site made on each handle.
#[derive(Clone, Debug, Default)]
pub struct Trace(Arc<Mutex<TraceLog>>);

/// Counts derived from a trace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TraceSummary {
    /// Successful inits.
    pub inits: usize,
    /// Failed inits.
    pub init_failures: usize,
    /// Executes.
    pub executes: usize,
    /// Destroys.
    pub destroys: usize,
    /// Handles initialised and not yet destroyed.
    pub live_handles: usize,
    /// Largest sum of resident handle bytes at any point.
    pub peak_handle_bytes: usize,
    /// Handles destroyed more than once, or destroyed without an init (must be empty).
    pub bad_destroys: Vec<u64>,
    /// Executes per call site, as `method chain:instruction -> count`.
    pub executes_per_site: BTreeMap<String, usize>,
}

/// `trace: N init, …` and the executes per call site, a line each.
impl std::fmt::Display for TraceSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "trace: {} init, {} init failed, {} execute, {} destroy, {} live, peak handle bytes {}",
            self.inits, self.init_failures, self.executes, self.destroys, self.live_handles, self.peak_handle_bytes
        )?;
        for (site, n) in &self.executes_per_site {
            writeln!(f, "  executes at {site}: {n}")?;
        }
        Ok(())
    }
}

impl Trace {
    fn log(&self) -> std::sync::MutexGuard<'_, TraceLog> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Appends an event.
    pub fn record(&self, e: TraceEvent) {
        self.log().events.push(e);
    }
    /// Counts one `execute` from a DelegateCall.
    pub fn executed(&self, at: ExecuteSite) {
        *self.log().executes.entry(at).or_default() += 1;
    }
    /// Executes so far, leaving none.
    pub fn take_executes(&self) -> BTreeMap<ExecuteSite, usize> {
        std::mem::take(&mut self.log().executes)
    }
    /// A new unique handle id.
    pub fn next_handle(&self) -> u64 {
        let mut l = self.log();
        l.next_handle += 1;
        l.next_handle
    }
    /// All events so far.
    pub fn events(&self) -> Vec<TraceEvent> {
        self.log().events.clone()
    }
    /// All events so far, leaving none (handle numbering goes on).
    pub fn take_events(&self) -> Vec<TraceEvent> {
        std::mem::take(&mut self.log().events)
    }
    /// Counts over all events so far.
    pub fn summary(&self) -> TraceSummary {
        let mut s = TraceSummary::default();
        let mut live: BTreeMap<u64, usize> = BTreeMap::new();
        let mut destroyed = std::collections::BTreeSet::new();
        let mut bytes = 0usize;
        let log = self.log();
        for e in log.events.iter() {
            match e {
                TraceEvent::Init { handle, bytes: b, .. } => {
                    s.inits += 1;
                    live.insert(*handle, *b);
                    bytes += b;
                    s.peak_handle_bytes = s.peak_handle_bytes.max(bytes);
                }
                TraceEvent::InitFailed { .. } => s.init_failures += 1,
                TraceEvent::Destroy { handle, .. } => {
                    s.destroys += 1;
                    match live.remove(handle) {
                        Some(b) => bytes -= b,
                        None => s.bad_destroys.push(*handle),
                    }
                    if !destroyed.insert(*handle) {
                        s.bad_destroys.push(*handle);
                    }
                }
            }
        }
        s.live_handles = live.len();
        for (at, n) in log.executes.iter() {
            s.executes += n;
            *s.executes_per_site
                .entry(format!("{} {}:{}", at.method, at.site.chain, at.site.instruction))
                .or_default() += n;
        }
        s
    }
}
