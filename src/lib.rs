//! ptecheck: property-based verification and fuzzing harness for ExecuTorch `.pte` programs
//! and their backend delegates.
//!
//! Stages, data flowing one way: [`format`] (bytes <-> model) and [`program`] (owned model),
//! [`ir`] (input programs, eager interpreter) -> [`emit`] -> [`format`]; [`format`] -> [`runtime`]
//! with [`backends`]; [`gen`] builds programs; [`inspect`] renders reports.
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[forbid(unsafe_code)]
pub mod program;

#[forbid(unsafe_code)]
pub mod ir;

#[forbid(unsafe_code)]
pub mod fault;

pub mod format;

#[forbid(unsafe_code)]
pub mod inspect;

#[forbid(unsafe_code)]
pub mod runtime;

#[forbid(unsafe_code)]
pub mod backends;

#[forbid(unsafe_code)]
pub mod emit;

#[forbid(unsafe_code)]
pub mod gen;

#[forbid(unsafe_code)]
pub mod oracle;
