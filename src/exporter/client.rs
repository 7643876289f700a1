//! The harness side of an exporter: the exporter protocol as `child` speaks it, and the names the
//! rest of ptecheck uses for it.
//! May not touch: emission, the oracle (it knows only the protocol).

use super::protocol::{Hello, Reply, Request, parse_hello};
use crate::child::{ChildConfig, Client, protocol};
use crate::runtime::io::IoError;

protocol! {
    /// The exporter protocol (docs/exporter-protocol.md).
    ExporterProtocol: "exporter", Hello, Request, Reply, IoError, parse_hello
}

/// An exporter process and its hello.
pub type Exporter = Client<ExporterProtocol>;
/// How to run an exporter.
pub type ExporterConfig = ChildConfig;
/// What happened to one request to an exporter.
pub type ExporterOutcome = crate::child::Outcome<Reply, IoError>;
