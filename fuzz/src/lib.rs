//! What every fuzz target shares: the allocation guard each declares as its global allocator,
//! running one input under a limit, and a panic hook that lifts the limit first, so that a
//! panic under the guard is reported with its message and backtrace (the report allocates)
//! rather than dying in a failed allocation that libFuzzer then sees as a timeout.
//! May not touch: what a target checks (`ptecheck::campaign::fuzz` owns that).
#![forbid(unsafe_code)]

/// The allocator every target declares: the system allocator with a limit.
pub type Guard = cap::Cap<std::alloc::System>;

/// A guard without a limit yet.
pub const fn guard() -> Guard {
    cap::Cap::new(std::alloc::System, usize::MAX)
}

/// Runs `f` allowing at most `factor` × `len` + 1 MiB bytes beyond what is allocated now.
pub fn within<T>(guard: &Guard, factor: usize, len: usize, f: impl FnOnce() -> T) -> T {
    let _ = guard.set_limit(guard.allocated().saturating_add(factor.saturating_mul(len)).saturating_add(1 << 20));
    let out = f();
    let _ = guard.set_limit(usize::MAX);
    out
}

/// Lifts `guard`'s limit before any panic is reported (run after libFuzzer's own hook, which
/// aborts once the report is printed, is installed).
pub fn lift_on_panic(guard: &'static Guard) {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = guard.set_limit(usize::MAX);
        report(info);
    }));
}
