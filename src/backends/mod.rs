//! Test backends, both sides: preprocess (IR sub-graph -> lowered module with processed bytes
//! and flags) and runtime (`runtime::Backend`). `demo`, `argkeep` and `scratch` carry their
//! sub-graph; `BackendWithCompilerDemo` reads ExecuTorch's own demo blobs; `failing` injects
//! init failures; `XnnpackBackend` lowers float32 sub-graphs to XNNPACK blobs and interprets
//! them (and ExecuTorch's own). Backends may not touch the loader or the emitter.

pub mod blob_cache;
pub mod compiler_demo;
pub mod failing;
pub mod graph;
pub mod ledger;
pub mod multifn;
pub mod xnnpack;

use crate::fault::Fault;
use crate::ir::infer::IrError;
use crate::ir::{Graph, LoweredModule, NamedBlob};
use crate::runtime::{Backend, Runtime};
use std::sync::Arc;

/// Empties this thread's caches of compiled blobs (a campaign does so after each case, so its
/// memory does not grow with its length).
pub fn forget_compiled() {
    blob_cache::forget(&graph::PLANS);
    blob_cache::forget(&multifn::FUNCTIONS);
    blob_cache::forget(&multifn::MANIFESTS);
    blob_cache::forget(&xnnpack::COMPILED);
}

/// Every backend the reference runtime ships, for a default registry.
pub fn default_backends() -> Vec<Arc<dyn Backend>> {
    default_backends_with(Arc::new(multifn::MultifnBackend::default()))
}

/// [`default_backends`] around a given `multifn` backend (whose model table the caller reads).
pub fn default_backends_with(multifn: Arc<multifn::MultifnBackend>) -> Vec<Arc<dyn Backend>> {
    vec![
        multifn,
        Arc::new(compiler_demo::CompilerDemoBackend),
        Arc::new(graph::GraphBackend(graph::Flavor::Demo)),
        Arc::new(graph::GraphBackend(graph::Flavor::ArgKeep)),
        Arc::new(graph::GraphBackend(graph::Flavor::Scratch)),
        Arc::new(xnnpack::XnnpackBackend),
    ]
}

/// A runtime with [`default_backends`] registered.
pub fn default_runtime() -> Runtime {
    Runtime::with_backends(default_backends())
}

/// Runs backend `backend`'s preprocess on `g` (`fault`: a seeded preprocess bug, or `None`):
/// the lowered module and the named data it adds to the program.
pub fn lower(
    backend: &str,
    g: Graph,
    compile_specs: Vec<(String, Vec<u8>)>,
    fault: Option<Fault>,
) -> Result<(LoweredModule, Vec<NamedBlob>), IrError> {
    match graph::Flavor::from_id(backend) {
        Some(f) => graph::lower(f, g, compile_specs, fault).map(|m| (m, vec![])),
        None if backend == xnnpack::ID => xnnpack::lower(g, compile_specs, fault),
        None => Err(IrError { path: "backend".into(), detail: format!("no preprocess for backend `{backend}`") }),
    }
}
