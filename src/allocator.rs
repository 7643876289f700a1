//! Which allocator the `ptecheck` binary, its benches and `tests/allocator.rs` declare, named
//! once: mimalloc by default; with the `flat-memory` feature, jemalloc compiled to give freed
//! pages back at once (docs/performance.md, section 4). Owns the choice only: it may not declare
//! a global allocator (the library allocates with whatever its user declares) nor use any other
//! module.

#[cfg(all(feature = "flat-memory", target_env = "msvc"))]
compile_error!("the `flat-memory` feature needs jemalloc, which does not build with MSVC");

#[cfg(not(feature = "flat-memory"))]
pub use mimalloc::MiMalloc as Chosen;

#[cfg(all(feature = "flat-memory", not(target_env = "msvc")))]
pub use tikv_jemallocator::Jemalloc as Chosen;
