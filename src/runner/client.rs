//! The harness side of a runner: the runner protocol as `child` speaks it, and the names the
//! rest of ptecheck uses for it.
//! May not touch: the runtime, the backends, the oracle (it knows only the protocol).

use super::protocol::{Hello, Reply, Request, parse_hello};
use crate::child::{ChildConfig, ChildStats, Client, Garbage, Protocol};
use crate::runtime::io::IoError;

/// The runner protocol (docs/runner-protocol.md).
pub struct RunnerProtocol;

impl Protocol for RunnerProtocol {
    const ROLE: &'static str = "runner";
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

/// A runner process and its hello.
pub type Runner = Client<RunnerProtocol>;
/// How to run a runner.
pub type RunnerConfig = ChildConfig;
/// Counts over a runner's life.
pub type RunnerStats = ChildStats;
/// What happened to one request to a runner.
pub type Outcome = crate::child::Outcome<Reply, IoError>;
pub use crate::child::StartError;
