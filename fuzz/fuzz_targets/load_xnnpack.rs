//! Fuzz target `load_xnnpack`: one call of `ptecheck::campaign::fuzz::load_xnnpack` under the allocation guard.
#![no_main]
#![forbid(unsafe_code)]

#[global_allocator]
static ALLOC: ptecheck_fuzz::Guard = ptecheck_fuzz::guard();

libfuzzer_sys::fuzz_target!(init: ptecheck_fuzz::lift_on_panic(&ALLOC), |data: &[u8]| {
    // Guard rail: no allocation beyond 4 x input + 1 MiB for this input (the named data of the
    // corpus files is loaded once, before the first limit).
    ptecheck::campaign::fuzz::load_xnnpack(&[]);
    ptecheck_fuzz::within(&ALLOC, 4, data.len(), || ptecheck::campaign::fuzz::load_xnnpack(data));
});
