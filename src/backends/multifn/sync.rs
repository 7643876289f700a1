//! The synchronisation primitives the shared-model table (`table`) is built on: std's here;
//! `tests/loom_shared_model.rs` includes the table with loom's in their place.

pub use std::sync::{Arc, Condvar, Mutex, MutexGuard};
