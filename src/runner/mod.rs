//! Runners: other runtimes in the loop. A runner is a long-lived child process speaking JSON
//! Lines (docs/runner-protocol.md): `protocol` holds the messages, `client` the harness side
//! (process, pipelining, deadlines, crash and hang handling, restarts), `server` the protocol
//! served from our reference runtime (`ptecheck runner`).
//! May not touch: generation, the oracle.

pub mod client;
pub mod protocol;
pub mod server;

pub use client::{Outcome, Runner, RunnerConfig, RunnerProtocol, RunnerStats, StartError};
pub use protocol::{Hello, Reply, Request, Stage};
