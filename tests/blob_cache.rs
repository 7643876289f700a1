//! The per-thread cache of what backends compile from delegate blobs: a hit gives what was
//! compiled from the same bytes, different bytes never share, failures are never kept, the size
//! is bounded, and every `init` still reaches the backend (and its ledger) on a hit.

#![forbid(unsafe_code)]

use ptecheck::backends::blob_cache::{BYTE_BUDGET, BlobCache, CAPACITY, ThreadCache, cached, cached_bytes, compiled};
use ptecheck::backends::graph::{self, Flavor, GraphBackend};
use ptecheck::backends::ledger::{Counted, Ledger, LedgerEvent};
use ptecheck::emit::{EmitOptions, emit};
use ptecheck::format;
use ptecheck::generator::examples::example;
use ptecheck::runtime::frame::OpError;
use ptecheck::runtime::{Backend, ErrorCode, Runtime, Trace};
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    static NUMBERS: RefCell<BlobCache<u64>> = RefCell::default();
}

fn get(cache: &'static ThreadCache<u64>, key: &[u8], value: u64) -> Result<u64, OpError> {
    compiled(cache, key, || Ok(value)).map(|v| *v)
}

#[test]
fn a_hit_returns_what_the_same_bytes_compiled_to_and_other_bytes_compile_afresh() {
    assert_eq!(get(&NUMBERS, b"abc", 1).expect("compiles"), 1);
    assert_eq!(get(&NUMBERS, b"abc", 2).expect("hit"), 1, "same bytes: the first compilation");
    assert_eq!(get(&NUMBERS, b"abd", 3).expect("compiles"), 3, "same length, other bytes: compiled");
    assert_eq!(get(&NUMBERS, b"ab", 4).expect("compiles"), 4, "a prefix is other bytes");
    let a = compiled(&NUMBERS, b"abc", || Ok(9)).expect("hit");
    let b = compiled(&NUMBERS, b"abc", || Ok(9)).expect("hit");
    assert!(Arc::ptr_eq(&a, &b), "one compiled value per distinct blob");
}

/// A backend that found a kept value stale (XNNPACK, when the named data differs) compiles again
/// and keeps the new value in place of the old, counted once.
#[test]
fn inserting_again_replaces_what_was_kept() {
    let mut c: BlobCache<u64> = BlobCache::default();
    c.insert(b"blob", Arc::new(1));
    c.insert(b"blob", Arc::new(2));
    assert_eq!(c.get(b"blob").as_deref(), Some(&2));
    assert_eq!((c.len(), c.bytes()), (1, 4));
}

#[test]
fn failures_are_not_kept_and_the_cache_is_per_thread() {
    let err = compiled(&NUMBERS, b"bad", || Err::<u64, _>(OpError::new(ErrorCode::InvalidProgram, "no")));
    assert!(err.is_err());
    assert_eq!(get(&NUMBERS, b"bad", 7).expect("compiled now"), 7, "the failure was not cached");
    let other = std::thread::spawn(|| (cached(&NUMBERS), get(&NUMBERS, b"bad", 8).expect("compiles")));
    assert_eq!(other.join().expect("thread"), (0, 8), "another thread starts empty");
}

#[test]
fn the_cache_holds_at_most_its_capacity_dropping_the_least_recently_used() {
    std::thread::spawn(|| {
        for k in 0..CAPACITY.get() as u64 + 10 {
            get(&NUMBERS, &k.to_le_bytes(), k).expect("compiles");
            // Key 0 stays in use, so it is never the least recently used.
            assert_eq!(get(&NUMBERS, &0u64.to_le_bytes(), 99).expect("hit"), 0);
        }
        assert_eq!(cached(&NUMBERS), CAPACITY.get());
        assert_eq!(get(&NUMBERS, &1u64.to_le_bytes(), 100).expect("recompiled"), 100, "key 1 was dropped");
        assert_eq!(get(&NUMBERS, &0u64.to_le_bytes(), 101).expect("hit"), 0, "key 0 was kept");
    })
    .join()
    .expect("thread");
}

#[test]
fn the_cache_holds_at_most_its_byte_budget_of_blobs() {
    std::thread::spawn(|| {
        let big = BYTE_BUDGET / 4 + 1;
        for k in 0..8u8 {
            get(&NUMBERS, &vec![k; big], u64::from(k)).expect("compiles");
            assert!(cached_bytes(&NUMBERS) <= BYTE_BUDGET, "{} bytes kept", cached_bytes(&NUMBERS));
        }
        assert_eq!(cached(&NUMBERS), 3, "three blobs of a quarter of the budget and a byte fit");
        assert_eq!(get(&NUMBERS, &vec![7u8; big], 70).expect("hit"), 7, "the newest is kept");
        assert_eq!(get(&NUMBERS, &vec![0u8; big], 50).expect("recompiled"), 50, "the oldest went");
        // A blob larger than the whole budget is compiled but never kept.
        assert_eq!(get(&NUMBERS, &vec![9u8; BYTE_BUDGET + 1], 9).expect("compiles"), 9);
        assert_eq!(get(&NUMBERS, &vec![9u8; BYTE_BUDGET + 1], 10).expect("compiles again"), 10);
        assert!(cached_bytes(&NUMBERS) <= BYTE_BUDGET);
    })
    .join()
    .expect("thread");
}

#[test]
fn an_invalid_graph_blob_is_rejected_at_every_init_and_a_valid_one_is_compiled_once() {
    // The denoise loop calls one `demo` delegate per call site (sharing off): ten blobs, equal.
    let bytes =
        emit(&example("denoise-loop").expect("example"), &EmitOptions { share: false, ..EmitOptions::default() })
            .expect("emits")
            .to_bytes()
            .expect("writes");
    let loaded = format::load(&bytes).expect("loads");
    let blob = loaded.delegate_blobs[0][0].expect("a blob");
    let mut bad = blob.to_vec();
    bad.truncate(bad.len() / 2);
    let backend = GraphBackend(Flavor::Demo);
    for _ in 0..2 {
        assert!(graph::parse(&bad).is_err());
    }
    let before = cached(&graph::PLANS);
    // Two runs of the method: every init reaches the backend's ledger, the blob is compiled once.
    let ledger = Ledger::default();
    let inner: Vec<Arc<dyn Backend>> = vec![Arc::new(backend)];
    let rt = Runtime::with_backends(Counted::all(inner, &ledger));
    let name = loaded.program.plans()[0].name_str().to_string();
    for _ in 0..2 {
        let m = rt.load_method(&loaded, &name, None, &Trace::default()).expect("loads");
        drop(m);
    }
    let inits = ledger.events().iter().filter(|e| matches!(e, LedgerEvent::Init { .. })).count();
    let per_run = loaded.program.plans()[0].delegate_list().len();
    assert!(per_run > 1, "several delegates with one blob");
    assert_eq!(inits, 2 * per_run, "a cached compilation still counts as an init");
    assert_eq!(cached(&graph::PLANS), before + 1, "one distinct blob, compiled once");
}

/// A campaign empties the caches after each case, so a long campaign holds no more than one
/// case's compilations: `forget_compiled` empties every backend's caches on this thread.
#[test]
fn forgetting_empties_this_threads_caches_of_every_backend() {
    use ptecheck::backends::{forget_compiled, multifn};
    let rt = ptecheck::backends::default_runtime();
    for name in ["multifunction", "denoise-loop"] {
        let ir = example(name).expect("example");
        let bytes = emit(&ir, &EmitOptions::default()).expect("emits").to_bytes().expect("writes");
        let loaded = format::load(&bytes).expect("loads");
        for plan in loaded.program.plans() {
            drop(rt.load_method(&loaded, plan.name_str(), None, &Trace::default()).expect("loads"));
        }
    }
    get(&NUMBERS, b"own", 1).expect("compiles");
    assert!(cached(&multifn::FUNCTIONS) > 0 && cached(&graph::PLANS) > 0, "bundles and graphs were compiled");
    assert!(cached(&multifn::MANIFESTS) > 0, "manifests were read");
    forget_compiled();
    assert_eq!((cached(&graph::PLANS), cached(&multifn::FUNCTIONS), cached(&multifn::MANIFESTS)), (0, 0, 0));
    assert_eq!((cached_bytes(&graph::PLANS), cached_bytes(&multifn::FUNCTIONS)), (0, 0));
    assert_eq!(cached(&NUMBERS), 1, "other caches are left alone");
}
