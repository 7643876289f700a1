//! Test backends (runtime side): the reader of ExecuTorch's `BackendWithCompilerDemo` blobs and
//! a failure-injecting wrapper. Backends implement `runtime::Backend`; they may not touch the
//! loader or the emitter.

pub mod compiler_demo;
pub mod failing;

use crate::runtime::{Backend, Runtime};
use std::sync::Arc;

/// Every backend the reference runtime ships, for a default registry.
pub fn default_backends() -> Vec<Arc<dyn Backend>> {
    vec![Arc::new(compiler_demo::CompilerDemoBackend)]
}

/// A runtime with [`default_backends`] registered.
pub fn default_runtime() -> Runtime {
    Runtime::with_backends(default_backends())
}
