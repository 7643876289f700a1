//! Program generators: the built-in examples today; random valid programs (issue E) next.
//! Builds IR with the backends' preprocess; may not touch emission or the runtime.

pub mod examples;
