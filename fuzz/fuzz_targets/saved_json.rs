//! Fuzz target `saved_json`: one call of `ptecheck::campaign::fuzz::saved_json` under the allocation guard.
#![no_main]
#![forbid(unsafe_code)]

#[global_allocator]
static ALLOC: ptecheck_fuzz::Guard = ptecheck_fuzz::guard();

libfuzzer_sys::fuzz_target!(init: ptecheck_fuzz::lift_on_panic(&ALLOC), |data: &[u8]| {
    // Guard rail: no allocation (indeed no growth) beyond 4 x input + 1 MiB for this input.
    ptecheck_fuzz::within(&ALLOC, 4, data.len(), || ptecheck::campaign::fuzz::saved_json(data));
});
