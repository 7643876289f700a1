//! The harness side of a runner: the runner protocol as `child` speaks it, and the names the
//! rest of ptecheck uses for it.
//! May not touch: the runtime, the backends, the oracle (it knows only the protocol).

use super::protocol::{Hello, Reply, Request, parse_hello};
use crate::child::{ChildConfig, ChildStats, Client, protocol};
use crate::runtime::io::IoError;

protocol! {
    /// The runner protocol (docs/runner-protocol.md).
    RunnerProtocol: "runner", Hello, Request, Reply, IoError, parse_hello
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
