//! Program generators: the vocabulary of switches and features, `GenConfig` (limits and
//! switches, with the swarm draw), a total generator of valid cases from `arbitrary` bytes
//! (program, inputs, run choices), what a case is observed to exercise, and the built-in
//! examples. Builds IR with the backends' preprocess; may not touch emission or the runtime.

pub mod config;
pub mod examples;
pub mod features;
pub mod generate;
pub mod inputs;
pub mod observe;
pub mod recipes;

pub use config::GenConfig;
pub use features::{Feature, Switch, Switches, feature_names};
pub use generate::{Generated, RunChoices, generate, generate_counted, generate_from_bytes};
