//! Fuzz target `mutate_real`: a real file with mutated fields (`mutate_real_file`), loaded and
//! run like `load_pte` under the allocation guard sized from that file.
#![no_main]
#![forbid(unsafe_code)]

#[global_allocator]
static ALLOC: ptecheck_fuzz::Guard = ptecheck_fuzz::guard();

libfuzzer_sys::fuzz_target!(init: ptecheck_fuzz::lift_on_panic(&ALLOC), |data: &[u8]| {
    let Some(file) = ptecheck::campaign::fuzz::mutate_real_file(data) else { return };
    // Guard rail: no allocation (indeed no growth) beyond 4 x file + 1 MiB while loading.
    ptecheck_fuzz::within(&ALLOC, 4, file.len(), || ptecheck::campaign::fuzz::load_pte(&file));
});
