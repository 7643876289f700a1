//! The backends' own account of their lifecycle: every `init`, `execute` and `destroy` a
//! backend receives, per handle, counted on the backend's side of the `Backend` trait.
//!
//! [`Counted`] wraps any backend: it gives each handle it creates a ledger id (kept inside the
//! handle's state, invisible to the runtime), and records, in one global order, each init (with
//! the method and delegate index the runtime named), each execute (the call site and a copy of
//! every argument before and after the call) and each destroy (a second destroy of one handle is
//! recorded, not prevented). The oracle compares this ledger with the runtime's self-reported
//! `Trace` and with the counts the IR implies; the runtime never sees it.
//! May not touch: the runtime's trace, the loader, the emitter.

use crate::program::CompileSpec;
use crate::runtime::error::Site;
use crate::runtime::frame::OpError;
use crate::runtime::{Backend, BackendHandle, DelegateArgs, HostValue, InitContext};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One thing a backend was asked to do.
#[derive(Clone, Debug, PartialEq)]
pub enum LedgerEvent {
    /// A successful `init` made handle `handle`.
    Init {
        /// Ledger id of the new handle.
        handle: u64,
        /// Backend id.
        backend: String,
        /// Method the runtime named.
        method: String,
        /// Delegate index the runtime named.
        delegate: usize,
    },
    /// An `execute` on handle `handle`.
    Execute {
        /// Ledger id of the handle.
        handle: u64,
        /// The calling instruction.
        site: Site,
        /// Every argument slot's value before the call.
        before: Vec<HostValue>,
        /// Every argument slot's value after the call (`None`: the call failed).
        after: Option<Vec<HostValue>>,
    },
    /// A `destroy` of handle `handle` (any number of times: each call is one event).
    Destroy {
        /// Ledger id of the handle.
        handle: u64,
    },
}

/// Per-handle totals of a ledger.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HandleCounts {
    /// Backend id.
    pub backend: String,
    /// Method named at init.
    pub method: String,
    /// Delegate index named at init.
    pub delegate: usize,
    /// Executes.
    pub executes: usize,
    /// Destroys (1 is right; 0 is a leak; 2 or more a double destroy).
    pub destroys: usize,
}

/// A shared, append-only ledger (cheap to clone; clones share it).
#[derive(Clone, Debug, Default)]
pub struct Ledger(Arc<Mutex<Vec<LedgerEvent>>>);

impl Ledger {
    fn log(&self) -> std::sync::MutexGuard<'_, Vec<LedgerEvent>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every event so far, in order.
    pub fn events(&self) -> Vec<LedgerEvent> {
        self.log().clone()
    }

    /// Every event so far, in order, leaving the ledger empty (what [`Ledger::events`] then
    /// [`Ledger::clear`] give, without copying the events).
    pub fn take(&self) -> Vec<LedgerEvent> {
        std::mem::take(&mut *self.log())
    }

    /// Inits recorded so far.
    pub fn inits(&self) -> usize {
        self.log().iter().filter(|e| matches!(e, LedgerEvent::Init { .. })).count()
    }

    /// Forgets every event (between independent runs that share the wrapped backends).
    pub fn clear(&self) {
        self.log().clear();
    }

    /// Totals per handle, by ledger id; executes and destroys of unknown handles are kept under
    /// their id with an empty backend name.
    pub fn counts(&self) -> BTreeMap<u64, HandleCounts> {
        let mut out: BTreeMap<u64, HandleCounts> = BTreeMap::new();
        for e in self.log().iter() {
            match e {
                LedgerEvent::Init { handle, backend, method, delegate } => {
                    let c = out.entry(*handle).or_default();
                    c.backend.clone_from(backend);
                    c.method.clone_from(method);
                    c.delegate = *delegate;
                }
                LedgerEvent::Execute { handle, .. } => out.entry(*handle).or_default().executes += 1,
                LedgerEvent::Destroy { handle } => out.entry(*handle).or_default().destroys += 1,
            }
        }
        out
    }

    fn record(&self, e: LedgerEvent) -> u64 {
        let mut l = self.log();
        l.push(e);
        l.len() as u64
    }

    fn new_handle(&self, backend: &str, method: &str, delegate: usize) -> u64 {
        let mut l = self.log();
        let id = 1 + l.iter().filter(|e| matches!(e, LedgerEvent::Init { .. })).count() as u64;
        l.push(LedgerEvent::Init { handle: id, backend: backend.into(), method: method.into(), delegate });
        id
    }
}

/// A backend whose calls are counted in a [`Ledger`].
pub struct Counted {
    inner: Arc<dyn Backend>,
    ledger: Ledger,
}

impl Counted {
    /// Wraps `inner`, recording into `ledger`.
    pub fn new(inner: Arc<dyn Backend>, ledger: Ledger) -> Self {
        Counted { inner, ledger }
    }

    /// Wraps every backend of `backends` into one ledger.
    pub fn all(backends: Vec<Arc<dyn Backend>>, ledger: &Ledger) -> Vec<Arc<dyn Backend>> {
        backends.into_iter().map(|b| Arc::new(Counted::new(b, ledger.clone())) as Arc<dyn Backend>).collect()
    }
}

/// What a counted handle holds: its ledger id and the wrapped backend's handle.
struct CountedState {
    id: u64,
    inner: BackendHandle,
}

fn unwrap(handle: &mut BackendHandle) -> Result<&mut CountedState, OpError> {
    handle.state.downcast_mut::<CountedState>().ok_or_else(|| {
        OpError::new(crate::runtime::ErrorCode::DelegateInvalidHandle, "handle was not made by this backend")
    })
}

fn snapshot(args: &DelegateArgs<'_, '_>) -> Vec<HostValue> {
    args.args.iter().map(|v| args.frame.host_value(*v).unwrap_or(HostValue::None)).collect()
}

impl Backend for Counted {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn is_available(&self) -> bool {
        self.inner.is_available()
    }

    fn init(&self, ctx: &InitContext<'_>, processed: &[u8], specs: &[CompileSpec]) -> Result<BackendHandle, OpError> {
        let inner = self.inner.init(ctx, processed, specs)?;
        let id = self.ledger.new_handle(self.inner.id(), ctx.method, ctx.delegate_index);
        let bytes = inner.bytes;
        Ok(BackendHandle { state: Box::new(CountedState { id, inner }), bytes })
    }

    fn execute(&self, handle: &mut BackendHandle, args: &mut DelegateArgs<'_, '_>) -> Result<(), OpError> {
        let st = unwrap(handle)?;
        let before = snapshot(args);
        let result = self.inner.execute(&mut st.inner, args);
        let after = result.is_ok().then(|| snapshot(args));
        self.ledger.record(LedgerEvent::Execute { handle: st.id, site: args.site, before, after });
        result
    }

    fn destroy(&self, handle: &mut BackendHandle) {
        if let Ok(st) = unwrap(handle) {
            self.ledger.record(LedgerEvent::Destroy { handle: st.id });
            self.inner.destroy(&mut st.inner);
        }
    }
}
