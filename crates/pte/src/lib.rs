//! `pte`: read and write ExecuTorch programs.
//!
//! * [`program`] — an owned model of a `.pte` program, one plain type per schema table, with
//!   `Option` for every field that may be absent on the wire and serde in the shape of
//!   ExecuTorch's own JSON dumps.
//! * [`format`] — the bytes: a verified loader ([`format::load`]) that never panics, bounds
//!   every allocation by the input size and names the field, index or offset of each rejection;
//!   a writer ([`format::write`]) that reproduces ExecuTorch's layout byte for byte; and the
//!   `.ptd` external-data file.
//! * [`xnnpack`] — XNNPACK delegate blobs: model, verified loader, writer.
//!
//! Depends on nothing else of ptecheck's. The FlatBuffers code generated from `schema/*.fbs`
//! is the only `unsafe` code; nothing outside `format` sees it.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod format;
#[forbid(unsafe_code)]
pub mod program;
pub mod xnnpack;

/// The README's example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctest;
