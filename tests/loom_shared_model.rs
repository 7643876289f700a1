//! Model checking of the shared-model table protocol (P11) under every interleaving loom
//! explores: `RUSTFLAGS="--cfg loom" cargo test --release --test loom_shared_model`.
//! The table's source is included here with loom's primitives as its `sync` module.

#![forbid(unsafe_code)]
#![cfg(loom)]

mod sync {
    pub use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
}

#[allow(dead_code)]
#[path = "../src/backends/multifn/table.rs"]
mod table;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use table::{ModelKey, ModelTable, Resident};

struct Model;
impl Resident for Model {
    fn resident_bytes(&self) -> usize {
        16
    }
}

fn key() -> ModelKey {
    ModelKey { dev: 1, ino: 1, cache_key: "k".into() }
}

#[test]
fn concurrent_first_acquires_load_once() {
    loom::model(|| {
        let table = Arc::new(ModelTable::<Model>::default());
        let loads = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (t, l) = (table.clone(), loads.clone());
                loom::thread::spawn(move || {
                    t.acquire(&key(), || {
                        l.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, ()>(Model)
                    })
                    .is_ok()
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().expect("join"));
        }
        assert_eq!(loads.load(Ordering::SeqCst), 1);
        assert_eq!(table.totals(), (1, 1, 16));
    });
}

#[test]
fn a_failed_load_leaves_no_entry_and_a_waiter_retries() {
    loom::model(|| {
        let table = Arc::new(ModelTable::<Model>::default());
        let attempts = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (t, a) = (table.clone(), attempts.clone());
                loom::thread::spawn(move || {
                    t.acquire(&key(), || {
                        // The first attempt fails; any later one succeeds.
                        if a.fetch_add(1, Ordering::SeqCst) == 0 { Err(()) } else { Ok(Model) }
                    })
                    .is_ok()
                })
            })
            .collect();
        let ok: Vec<bool> = threads.into_iter().map(|t| t.join().expect("join")).collect();
        // Exactly the first loader fails; the other thread either waited and retried, or came
        // after the failed load and loaded itself.
        assert_eq!(ok.iter().filter(|o| **o).count(), 1);
        assert_eq!(attempts.load(Ordering::SeqCst), 2);
        let (loads, live, _) = table.totals();
        assert_eq!((loads, live), (1, 1));
    });
}

#[test]
fn the_last_release_unloads_exactly_once() {
    loom::model(|| {
        let table = Arc::new(ModelTable::<Model>::default());
        assert!(table.acquire(&key(), || Ok::<_, ()>(Model)).is_ok());
        assert!(table.acquire(&key(), || Ok::<_, ()>(Model)).is_ok());
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let t = table.clone();
                loom::thread::spawn(move || t.release(&key()))
            })
            .collect();
        let unloaded = threads.into_iter().map(|t| t.join().expect("join")).filter(|u| *u).count();
        assert_eq!(unloaded, 1);
        assert_eq!(table.stats()[0].1.unloads, 1);
        assert_eq!(table.totals().1, 0);
    });
}

#[test]
fn executions_on_one_model_are_serialised() {
    loom::model(|| {
        // The per-model execution lock: two executors never overlap.
        let exec = Arc::new(loom::sync::Mutex::new(()));
        let inside = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (e, i) = (exec.clone(), inside.clone());
                loom::thread::spawn(move || {
                    let _turn = e.lock().expect("lock");
                    assert_eq!(i.fetch_add(1, Ordering::SeqCst), 0, "another execute is running");
                    i.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for t in threads {
            t.join().expect("join");
        }
    });
}
