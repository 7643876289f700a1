//! Fuzz target `load_ptd`: one call of `ptecheck::oracle::fuzz::load_ptd` under the allocation guard.
#![no_main]
#![forbid(unsafe_code)]

#[global_allocator]
static ALLOC: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // Guard rail: no allocation beyond 4 x input + 1 MiB for this input.
    let _ = ALLOC.set_limit(ALLOC.allocated() + 4 * data.len() + (1 << 20));
    ptecheck::oracle::fuzz::load_ptd(data);
    let _ = ALLOC.set_limit(usize::MAX);
});
