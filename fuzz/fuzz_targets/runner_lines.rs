//! Fuzz target `runner_lines`: one call of `ptecheck::oracle::fuzz::runner_lines` under the allocation guard.
#![no_main]
#![forbid(unsafe_code)]

#[global_allocator]
static ALLOC: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // Guard rail: reading a line as JSON holds a parsed document beside it (a JSON value is 72
    // bytes, so ~36 per input byte for a list of one-digit numbers, and a line is read twice),
    // so 64 x input + 1 MiB.
    let _ = ALLOC.set_limit(ALLOC.allocated() + 64 * data.len() + (1 << 20));
    ptecheck::oracle::fuzz::runner_lines(data);
    let _ = ALLOC.set_limit(usize::MAX);
});
