//! XNNPACK delegate blobs (`XnnpackBackend`'s processed bytes): the owned model, a verified
//! loader with typed errors, and a writer.
//!
//! Owns: the blob's byte layout (the `XH00` header, the `XNNGraph` flatbuffer, the constant
//! region), verification of untrusted blobs, and resolution of constants (constant region,
//! deprecated `constant_buffer`, or the program's named data). May not touch: execution (the
//! interpreter is ptecheck's `backends::xnnpack`), the `.pte` program. Only this module sees
//! the generated accessors of `schema/xnnpack.fbs`.

#[forbid(unsafe_code)]
mod error;
#[forbid(unsafe_code)]
pub mod model;
#[forbid(unsafe_code)]
pub mod read;
#[forbid(unsafe_code)]
pub mod verify;
#[forbid(unsafe_code)]
pub mod write;

#[allow(unsafe_code, unused_imports, dead_code, non_camel_case_types, non_snake_case)]
#[allow(clippy::all, clippy::pedantic, clippy::nursery)]
#[rustfmt::skip]
pub(crate) mod generated;

pub use error::XnnError;
pub use model::*;
pub use read::{parse, parse_header};
pub use verify::{LoadedBlob, NamedData, load, verify};
pub use write::{write, write_blob, write_flatbuffer};
