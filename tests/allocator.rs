//! The allocator the binary is built with (`ptecheck::allocator`) is the one its features ask
//! for, and gives the pages of freed small objects back to the system at once, as its setting
//! asks: what stays resident after a case is then what is still live. Run it for each build:
//! `cargo test --test allocator` (mimalloc) and `cargo test --features flat-memory --test
//! allocator` (jemalloc). mimalloc's setting is `MIMALLOC_PURGE_DELAY=0`, which cargo passes to
//! what it runs (`.cargo/config.toml`), so run this through cargo; jemalloc's is compiled in.
//! It fails when the setting is not applied (mimalloc with `MIMALLOC_PURGE_DELAY=10000`,
//! jemalloc with `_RJEM_MALLOC_CONF=dirty_decay_ms:10000`) or the other allocator is chosen.

#![forbid(unsafe_code)]

#[global_allocator]
static ALLOCATOR: ptecheck::allocator::Chosen = ptecheck::allocator::Chosen;

#[test]
fn the_feature_chooses_the_allocator() {
    let chosen = std::any::type_name::<ptecheck::allocator::Chosen>();
    let expected = if cfg!(feature = "flat-memory") { "Jemalloc" } else { "MiMalloc" };
    assert!(chosen.ends_with(expected), "{chosen} chosen, not {expected}");
}

#[cfg(target_os = "linux")]
#[test]
fn the_pages_of_freed_small_objects_go_back_at_once() {
    use ptecheck::campaign::resident::status_kib;
    let anon = || status_kib("RssAnon").expect("RssAnon on Linux");
    let before = anon();
    // About 46 MiB of 48-byte objects (and 7.6 MiB of pointers to them), each written so its
    // page is resident.
    let objects: Vec<Box<[u8; 48]>> = (0..1_000_000u32).map(|i| Box::new([i as u8; 48])).collect();
    assert_eq!(objects.iter().map(|o| u64::from(o[47])).sum::<u64>(), (0..1_000_000u64).map(|i| i % 256).sum::<u64>());
    let held = anon();
    drop(objects);
    let after = anon();
    let grew = held.saturating_sub(before);
    assert!(grew >= 40 << 10, "{grew} KiB resident for 1,000,000 small objects");
    let kept = after.saturating_sub(before);
    assert!(kept <= grew / 4, "{kept} of the {grew} KiB the freed objects used is still resident");
}
