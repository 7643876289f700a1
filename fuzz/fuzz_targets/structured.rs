//! Fuzz target `structured`: a generated program (all invariants checked) is mutated, then
//! loaded and run like `load_pte`; the allocation guard covers the loading half.
#![no_main]
#![forbid(unsafe_code)]

#[global_allocator]
static ALLOC: ptecheck_fuzz::Guard = ptecheck_fuzz::guard();

libfuzzer_sys::fuzz_target!(init: ptecheck_fuzz::lift_on_panic(&ALLOC), |data: &[u8]| {
    let file = ptecheck::campaign::fuzz::structured_file(data);
    // Guard rail: no allocation (indeed no growth) beyond 4 x input + 1 MiB while loading.
    ptecheck_fuzz::within(&ALLOC, 4, file.len(), || ptecheck::campaign::fuzz::load_pte(&file));
});
