//! Fuzz target `structured`: a generated program (all invariants checked) is mutated, then
//! loaded and run like `load_pte`; the allocation guard covers the loading half.
#![no_main]
#![forbid(unsafe_code)]

#[global_allocator]
static ALLOC: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let file = ptecheck::oracle::fuzz::structured_file(data);
    // Guard rail: no allocation (indeed no growth) beyond 4 x input + 1 MiB while loading.
    let _ = ALLOC.set_limit(ALLOC.allocated() + 4 * file.len() + (1 << 20));
    ptecheck::oracle::fuzz::load_pte(&file);
    let _ = ALLOC.set_limit(usize::MAX);
});
