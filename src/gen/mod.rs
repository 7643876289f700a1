//! Program generators: `GenConfig` (limits and switches, itself `Arbitrary` for swarm testing),
//! a total generator of valid IR programs from `arbitrary` bytes, and the built-in examples.
//! Builds IR with the backends' preprocess; may not touch emission or the runtime.

pub mod config;
pub mod examples;
pub mod generate;

pub use config::{Features, GenConfig};
pub use generate::{generate, generate_from_bytes, Generated, FEATURES};
