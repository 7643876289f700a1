//! The process-wide shared-model table (P11): key -> one loaded model with a reference count.
//!
//! Acquire: Ready -> refcount + 1; Loading -> wait (at most the table's wait limit, then a
//! typed error: a load that never publishes cannot hang its waiters); absent -> insert Loading, load *without*
//! holding the table lock, then publish Ready with refcount 1, or remove the entry and wake
//! every waiter on failure (a woken waiter that finds the key absent becomes the loader).
//! Release: refcount - 1; at 0 remove the entry and drop the model outside the table lock.
//! Its synchronisation primitives come from the sibling `sync` module: std's in the library,
//! loom's in `tests/loom_shared_model.rs`, which includes this file to explore every
//! interleaving.
//! May not touch: the models it holds (it counts and hands them out), any other module.

use super::sync::{Arc, Condvar, Mutex, MutexGuard};

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long an acquire waits, by default, for another thread's load of the same key.
pub const WAIT_LIMIT: Duration = Duration::from_secs(30);

/// Why an acquire did not return a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AcquireError<E> {
    /// This acquire's own load failed.
    Load(E),
    /// Another thread's load of `key` did not finish within `waited`.
    Wait {
        /// The key.
        key: ModelKey,
        /// How long this acquire waited.
        waited: Duration,
    },
}

/// Identity of a loaded model: cache directory (device, inode) and cache key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelKey {
    /// Device of the opened cache directory.
    pub dev: u64,
    /// Inode of the opened cache directory.
    pub ino: u64,
    /// Cache key (export hash and compute units).
    pub cache_key: String,
}

/// What the table knows about a model's size.
pub trait Resident {
    /// Bytes the loaded model keeps in memory (its weights).
    fn resident_bytes(&self) -> usize;
}

enum Slot<M> {
    Loading,
    Ready { model: Arc<M>, refs: usize },
}

/// Accounting per key.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct KeyStats {
    /// Completed loads.
    pub loads: usize,
    /// Failed loads.
    pub failed_loads: usize,
    /// Unloads.
    pub unloads: usize,
    /// Whether a model is loaded now.
    pub live: bool,
    /// Resident bytes of the live model.
    pub resident_bytes: usize,
}

struct State<M> {
    slots: HashMap<ModelKey, Slot<M>>,
    stats: HashMap<ModelKey, KeyStats>,
}

/// The table.
pub struct ModelTable<M> {
    state: Mutex<State<M>>,
    changed: Condvar,
    wait_limit: Duration,
}

impl<M> Default for ModelTable<M> {
    fn default() -> Self {
        ModelTable::with_wait_limit(WAIT_LIMIT)
    }
}

impl<M> ModelTable<M> {
    /// An empty table whose acquires wait at most `wait_limit` for another thread's load.
    pub fn with_wait_limit(wait_limit: Duration) -> Self {
        ModelTable {
            state: Mutex::new(State { slots: HashMap::new(), stats: HashMap::new() }),
            changed: Condvar::new(),
            wait_limit,
        }
    }
}

impl<M: Resident> ModelTable<M> {
    fn lock(&self) -> MutexGuard<'_, State<M>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Returns the model for `key`, loading it with `load` if no delegate holds it.
    pub fn acquire<E>(&self, key: &ModelKey, load: impl FnOnce() -> Result<M, E>) -> Result<Arc<M>, AcquireError<E>> {
        let mut st = self.lock();
        // One deadline for the whole acquire: wakes for other keys do not restart the wait.
        let start = Instant::now();
        loop {
            match st.slots.get_mut(key) {
                Some(Slot::Ready { model, refs }) => {
                    *refs += 1;
                    return Ok(model.clone());
                }
                Some(Slot::Loading) => {
                    let waited = start.elapsed();
                    let Some(left) = self.wait_limit.checked_sub(waited).filter(|l| !l.is_zero()) else {
                        return Err(AcquireError::Wait { key: key.clone(), waited });
                    };
                    st = self.changed.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
                }
                None => {
                    st.slots.insert(key.clone(), Slot::Loading);
                    break;
                }
            }
        }
        drop(st);
        let loaded = load();
        let mut st = self.lock();
        let result = match loaded {
            Ok(m) => {
                let model = Arc::new(m);
                let stats = st.stats.entry(key.clone()).or_default();
                stats.loads += 1;
                stats.live = true;
                stats.resident_bytes = model.resident_bytes();
                st.slots.insert(key.clone(), Slot::Ready { model: model.clone(), refs: 1 });
                Ok(model)
            }
            Err(e) => {
                st.stats.entry(key.clone()).or_default().failed_loads += 1;
                st.slots.remove(key);
                Err(AcquireError::Load(e))
            }
        };
        drop(st);
        self.changed.notify_all();
        result
    }

    /// Releases one reference; the last one unloads the model (dropped outside the lock).
    /// Returns whether this release unloaded it.
    pub fn release(&self, key: &ModelKey) -> bool {
        let mut st = self.lock();
        let last = match st.slots.get_mut(key) {
            Some(Slot::Ready { refs, .. }) => {
                *refs = refs.saturating_sub(1);
                *refs == 0
            }
            _ => false,
        };
        let removed = if last { st.slots.remove(key) } else { None };
        if last {
            let stats = st.stats.entry(key.clone()).or_default();
            stats.unloads += 1;
            stats.live = false;
            stats.resident_bytes = 0;
        }
        drop(st);
        drop(removed);
        last
    }

    /// Accounting per key.
    pub fn stats(&self) -> Vec<(ModelKey, KeyStats)> {
        let st = self.lock();
        let mut v: Vec<(ModelKey, KeyStats)> = st.stats.iter().map(|(k, s)| (k.clone(), s.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Entries in the table, loading or loaded: 0 once every model is released and no load
    /// is under way.
    pub fn entries(&self) -> usize {
        self.lock().slots.len()
    }

    /// Sum over keys: (loads, live models, resident bytes).
    pub fn totals(&self) -> (usize, usize, usize) {
        self.stats()
            .iter()
            .fold((0, 0, 0), |(l, v, b), (_, s)| (l + s.loads, v + usize::from(s.live), b + s.resident_bytes))
    }
}
