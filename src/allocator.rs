//! The allocator of the `ptecheck` binary, its benches and `tests/allocator.rs`, chosen once
//! here: mimalloc (fast on every core), or with the `flat-memory` feature jemalloc compiled to
//! give freed pages back at once (`.cargo/config.toml`), whose peak RSS does not grow with a
//! campaign's length (README, "Flat memory"). The library itself allocates with whatever its
//! user declares; this module only names the choice.

/// The chosen allocator's type, for a `#[global_allocator]` static.
#[cfg(not(all(feature = "flat-memory", not(target_env = "msvc"))))]
pub type Chosen = mimalloc::MiMalloc;

/// The chosen allocator's type, for a `#[global_allocator]` static.
#[cfg(all(feature = "flat-memory", not(target_env = "msvc")))]
pub type Chosen = tikv_jemallocator::Jemalloc;

/// The chosen allocator, for a `#[global_allocator]` static.
#[cfg(not(all(feature = "flat-memory", not(target_env = "msvc"))))]
pub const CHOSEN: Chosen = mimalloc::MiMalloc;

/// The chosen allocator, for a `#[global_allocator]` static.
#[cfg(all(feature = "flat-memory", not(target_env = "msvc")))]
pub const CHOSEN: Chosen = tikv_jemallocator::Jemalloc;
