//! Fuzz target `runner_lines`: one call of `ptecheck::campaign::fuzz::runner_lines` under the allocation guard.
#![no_main]
#![forbid(unsafe_code)]

#[global_allocator]
static ALLOC: ptecheck_fuzz::Guard = ptecheck_fuzz::guard();

libfuzzer_sys::fuzz_target!(init: ptecheck_fuzz::lift_on_panic(&ALLOC), |data: &[u8]| {
    // Guard rail: reading a line as JSON holds a parsed document beside it (a JSON value is 72
    // bytes, so ~36 per input byte for a list of one-digit numbers, and a line is read twice),
    // so 64 x input + 1 MiB.
    ptecheck_fuzz::within(&ALLOC, 64, data.len(), || ptecheck::campaign::fuzz::runner_lines(data));
});
