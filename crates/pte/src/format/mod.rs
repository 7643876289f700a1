//! Bytes <-> model: the `.pte` reader and writer, and the `.ptd` external-data reader.
//!
//! Owns: the byte layout (preamble, `eh00` header, FlatBuffers data, segments), verification of
//! untrusted input, and resolution of every data reference into slices of the input.
//! May not touch: execution, emission rules, backends. Only this module sees the generated
//! FlatBuffers accessors; everything else works on [`crate::program`].

#[forbid(unsafe_code)]
mod builder;
#[forbid(unsafe_code)]
mod decode;
#[forbid(unsafe_code)]
mod error;
#[forbid(unsafe_code)]
pub mod header;
#[forbid(unsafe_code)]
pub mod oracle;
#[forbid(unsafe_code)]
pub mod ptd;
#[forbid(unsafe_code)]
mod read;
#[forbid(unsafe_code)]
mod wire;
#[forbid(unsafe_code)]
pub(crate) mod write;

#[allow(unsafe_code, unused_imports, dead_code, non_camel_case_types, non_snake_case)]
#[allow(clippy::all, clippy::pedantic, clippy::nursery)]
#[rustfmt::skip]
pub(crate) mod generated;

pub use error::FormatError;
pub use header::ExtendedHeader;
pub use ptd::{LoadedPtd, PtdEntry, TensorLayout, load_ptd, write_ptd};
pub use read::{ConstantSource, LoadLimits, LoadedProgram, MAX_DEPTH, MAX_TABLES, load, load_with, verifier_options};
pub use write::{Layout, MAX_SEGMENT_GAP, WriteOptions, layout_segments, write, write_flatbuffer, write_loaded};
