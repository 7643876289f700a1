//! What a backend compiled from a delegate blob, by the blob's bytes: a bounded per-thread
//! cache, so that one program initialised many times (each method run, injection, the model
//! table's checks, the negative checks) compiles each distinct blob once per thread. A backend
//! whose compilation also reads something else checks that on a hit (XNNPACK: the named data
//! the blob read) and compiles again, in place of the kept value, where it differs.
//!
//! Compilation is a pure function of what it reads, so a hit returns what a miss would compute;
//! only successes are kept (an invalid blob is rejected afresh at every `init`). The cache sits
//! inside the backends' `init`, behind the ledger: every `init` is still seen and counted.
//! A campaign empties it after each case (`backends::forget_compiled`), so a long campaign
//! holds one case's compilations, never a growing share of its history.
//! Owns: the cache. May not touch: handle state, the ledger, the runtime.

use crate::runtime::frame::OpResult;
use lru::LruCache;
use std::cell::RefCell;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::thread::LocalKey;

/// Compiled blobs each thread keeps, per cache.
pub const CAPACITY: NonZeroUsize = NonZeroUsize::new(64).unwrap();

/// Blob bytes each thread keeps, per cache (what is compiled from a blob grows with it, so
/// memory stays bounded whatever sizes a long campaign draws).
pub const BYTE_BUDGET: usize = 512 << 10;

/// A bounded map from blob bytes to what was compiled from them (least recently used out first).
pub struct BlobCache<T> {
    entries: LruCache<Box<[u8]>, Arc<T>>,
    /// Sum of the cached blobs' lengths.
    bytes: usize,
}

impl<T> Default for BlobCache<T> {
    fn default() -> Self {
        BlobCache { entries: LruCache::new(CAPACITY), bytes: 0 }
    }
}

impl<T> BlobCache<T> {
    /// What `key` compiled to, if it is cached.
    pub fn get(&mut self, key: &[u8]) -> Option<Arc<T>> {
        self.entries.get(key).cloned()
    }

    /// Keeps `value` as what `key` compiles to (in place of what was kept for it), dropping the
    /// least recently used blobs while the count or the bytes would exceed their bounds (a blob
    /// above the byte budget is not kept).
    pub fn insert(&mut self, key: &[u8], value: Arc<T>) {
        if key.len() > BYTE_BUDGET {
            return;
        }
        if let Some(kept) = self.entries.get_mut(key) {
            *kept = value;
            return;
        }
        while self.entries.len() >= CAPACITY.get() || self.bytes + key.len() > BYTE_BUDGET {
            match self.entries.pop_lru() {
                Some((k, _)) => self.bytes -= k.len(),
                None => break,
            }
        }
        self.bytes += key.len();
        self.entries.put(key.into(), value);
    }

    /// Sum of the cached blobs' lengths.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Drops every cached blob.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    /// Number of cached blobs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A per-thread cache, declared with `thread_local!`.
pub type ThreadCache<T> = LocalKey<RefCell<BlobCache<T>>>;

/// Looks `key` up in the thread's `cache`, compiling with `compile` on a miss (outside the
/// cache's borrow, so `compile` may use other caches).
pub fn compiled<T>(
    cache: &'static ThreadCache<T>,
    key: &[u8],
    compile: impl FnOnce() -> OpResult<T>,
) -> OpResult<Arc<T>> {
    compiled_where(cache, key, |_| true, compile)
}

/// [`compiled`] for a compilation that also reads something besides `key`: a kept value is
/// used only where `still` holds of it; otherwise `compile` runs and its value replaces it.
pub fn compiled_where<T>(
    cache: &'static ThreadCache<T>,
    key: &[u8],
    still: impl FnOnce(&T) -> bool,
    compile: impl FnOnce() -> OpResult<T>,
) -> OpResult<Arc<T>> {
    if let Some(hit) = cache.with_borrow_mut(|c| c.get(key)).filter(|hit| still(hit)) {
        return Ok(hit);
    }
    let value = Arc::new(compile()?);
    cache.with_borrow_mut(|c| c.insert(key, value.clone()));
    Ok(value)
}

/// Empties the thread's `cache`.
pub fn forget<T>(cache: &'static ThreadCache<T>) {
    cache.with_borrow_mut(BlobCache::clear);
}

/// Number of blobs the thread's `cache` holds.
pub fn cached<T>(cache: &'static ThreadCache<T>) -> usize {
    cache.with_borrow(BlobCache::len)
}

/// Blob bytes the thread's `cache` holds.
pub fn cached_bytes<T>(cache: &'static ThreadCache<T>) -> usize {
    cache.with_borrow(BlobCache::bytes)
}
