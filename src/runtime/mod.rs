//! Reference runtime: `Method::init` with every load-time check before any backend call,
//! execution of the five instruction kinds on CPU kernels and delegates, and a delegate
//! lifecycle (init once per BackendDelegate, destroy exactly once) recorded in a trace.
//!
//! Owns: method-level validity, values and memory at run time, kernels, the backend interface.
//! Reads `format::LoadedProgram`; may not touch bytes or emission. Test backends live in
//! `crate::backends`.

pub mod backend;
pub mod check;
pub mod error;
pub mod frame;
pub mod io;
pub(crate) mod json_text;
pub mod kernels;
pub mod method;
pub mod nested;
pub mod ops;
pub mod session;
pub mod value;
pub mod verdict;

pub use backend::{
    Backend, BackendHandle, BackendOptions, BackendRegistry, DelegateArgs, ExecuteSite, InitContext, OptionValue,
    RuntimeOptions, Trace, TraceEvent, TraceSummary,
};
pub use check::{check_all_methods, check_method};
pub use error::{CheckError, ErrorCode, RuntimeError, Site};
pub use frame::{Frame, OpError};
pub use method::{DEFAULT_INSTRUCTION_BUDGET, DEFAULT_WORK_BUDGET, DataSources, Method, Runtime, Watcher};
pub use nested::NestedPlan;
pub use session::Session;
pub use value::{HostTensor, HostValue};
