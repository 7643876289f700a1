//! The harness side of an exporter: the exporter protocol as `child` speaks it, and the names the
//! rest of ptecheck uses for it.
//! May not touch: emission, the oracle (it knows only the protocol).

use super::protocol::{Hello, Reply, Request, parse_hello};
use crate::child::{ChildConfig, Client, Garbage, Protocol};
use crate::runtime::io::IoError;

/// The exporter protocol (docs/exporter-protocol.md).
pub struct ExporterProtocol;

impl Protocol for ExporterProtocol {
    const ROLE: &'static str = "exporter";
    type Hello = Hello;
    type Request = Request;
    type Reply = Reply;
    type Unwritable = IoError;

    fn parse_hello(line: &str) -> Result<Hello, Garbage> {
        parse_hello(line)
    }

    fn request_line(r: &Request) -> Result<String, IoError> {
        r.to_line()
    }

    fn request_id(r: &Request) -> u64 {
        r.id
    }

    fn parse_reply(line: &str) -> Result<(u64, Reply), Garbage> {
        Reply::parse(line)
    }
}

/// An exporter process and its hello.
pub type Exporter = Client<ExporterProtocol>;
/// How to run an exporter.
pub type ExporterConfig = ChildConfig;
/// What happened to one request to an exporter.
pub type ExporterOutcome = crate::child::Outcome<Reply, IoError>;
