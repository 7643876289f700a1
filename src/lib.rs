//! ptecheck: property-based verification and fuzzing harness for ExecuTorch `.pte` programs
//! and their backend delegates.
//!
//! Stages, data flowing one way (ARCHITECTURE.md): [`generator`] builds cases of [`ir`]
//! programs; [`emit`] turns IR into a [`program`] that [`format`] writes as bytes; [`format`]
//! loads bytes back; [`runtime`] checks and runs a loaded program with [`backends`]; [`ir`]'s
//! eager interpreter predicts the outputs; [`oracle`] judges one case; [`campaign`] drives cases
//! through it. The file format and the
//! program model live in the `pte` crate, re-exported here as [`format`] and [`program`].
//! May not touch: any stage's work (it declares the modules and re-exports `pte`'s).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use pte::{format, program};

pub mod allocator;
pub mod backends;
pub mod bounds;
pub mod campaign;
pub mod child;
pub mod emit;
pub mod exit;
pub mod exporter;
pub mod fault;
pub mod generator;
pub mod inspect;
pub mod ir;
pub mod oracle;
pub mod runner;
pub mod runtime;
