//! Exporters: other emitters in the loop. An exporter is a long-lived child process speaking JSON
//! Lines (docs/exporter-protocol.md): `protocol` holds the messages, `client` the harness side
//! (the process machinery is `child`'s), `server` ptecheck's own emitter behind the protocol
//! (`ptecheck exporter`), with the rules it is told and seeded emitter faults.
//! May not touch: what is checked of an exported program (`oracle`), the campaigns.

pub mod client;
pub mod protocol;
pub mod server;

pub use client::{Exporter, ExporterConfig, ExporterOutcome, ExporterProtocol};
pub use protocol::{ControlFlow, ExportStage, Exported, Hello, Reply, Request, Rules, Sharing};
