//! ptecheck: property-based verification and fuzzing harness for ExecuTorch `.pte` programs
//! and their backend delegates.
//!
//! Stages, data flowing one way: [`format`] (bytes <-> model) and [`program`] (owned model),
//! then the CLI-facing [`inspect`] reports and the [`runtime`]'s init-time checks.
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[forbid(unsafe_code)]
pub mod program;

pub mod format;

#[forbid(unsafe_code)]
pub mod inspect;

#[forbid(unsafe_code)]
pub mod runtime;

#[forbid(unsafe_code)]
pub mod backends;
