//! Failure injection: wraps any backend and makes `init` fail for chosen delegate indices, so
//! tests can check that every handle initialised before the failure is destroyed exactly once.
//! May not touch: the wrapped backend's handles (execute and destroy pass through as they are).

use crate::program::CompileSpec;
use crate::runtime::frame::OpError;
use crate::runtime::{Backend, BackendHandle, DelegateArgs, ErrorCode, InitContext};
use std::sync::Arc;

/// A backend whose `init` fails at delegate `fail_at` (of any method) and otherwise defers to
/// `inner`.
pub struct FailingBackend {
    /// The wrapped backend.
    pub inner: Arc<dyn Backend>,
    /// Delegate index whose init fails.
    pub fail_at: usize,
    /// Code returned by the failing init.
    pub code: ErrorCode,
}

impl Backend for FailingBackend {
    fn id(&self) -> &str {
        self.inner.id()
    }
    fn is_available(&self) -> bool {
        self.inner.is_available()
    }
    fn init(&self, ctx: &InitContext<'_>, processed: &[u8], specs: &[CompileSpec]) -> Result<BackendHandle, OpError> {
        if ctx.delegate_index == self.fail_at {
            return Err(OpError::new(self.code, format!("injected init failure at delegate {}", self.fail_at)));
        }
        self.inner.init(ctx, processed, specs)
    }
    fn execute(&self, handle: &mut BackendHandle, args: &mut DelegateArgs<'_, '_>) -> Result<(), OpError> {
        self.inner.execute(handle, args)
    }
    fn destroy(&self, handle: &mut BackendHandle) {
        self.inner.destroy(handle)
    }
}
