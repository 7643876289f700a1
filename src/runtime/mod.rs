//! Reference runtime (issue C, in progress): today the init-time structural checks that run
//! before any backend `init()`, and the operator table they resolve against.
//!
//! Owns: method-level validity (what `Method::init` must reject) and, later, execution and the
//! delegate lifecycle. Reads `format::LoadedProgram`; may not touch bytes or emission.

pub mod check;
pub mod error;
pub mod ops;

pub use check::{check_method, check_program, parse_scratch, ScratchSpec, SCRATCH_KEY};
pub use error::{CheckError, ErrorCode, Site};
