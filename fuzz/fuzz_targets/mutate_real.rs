//! Fuzz target `mutate_real`: a real file with mutated fields (`mutate_real_file`), loaded and
//! run like `load_pte` under the allocation guard sized from that file.
#![no_main]
#![forbid(unsafe_code)]

#[global_allocator]
static ALLOC: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some(file) = ptecheck::oracle::fuzz::mutate_real_file(data) else { return };
    // Guard rail: no allocation (indeed no growth) beyond 4 x file + 1 MiB while loading.
    let _ = ALLOC.set_limit(ALLOC.allocated() + 4 * file.len() + (1 << 20));
    ptecheck::oracle::fuzz::load_pte(&file);
    let _ = ALLOC.set_limit(usize::MAX);
});
