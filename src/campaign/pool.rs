//! The campaign's workers: one shared pool per job count, and the pipeline that checks blocks of
//! cases on it and hands their outcomes back in case order.
//! May not touch: what a case is or how it is checked (the caller's `check` decides).

use rayon::prelude::*;
use std::collections::BTreeMap;

/// Most worker threads a campaign may be asked for (`--jobs`); a pool that cannot be built
/// runs the campaign on one, and its report says so (`jobs`).
pub const MAX_JOBS: usize = 1024;

/// The worker count `jobs` stands for (0: one per core).
pub fn effective_jobs(jobs: usize) -> usize {
    if jobs == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { jobs }
}

/// The process's pool of `jobs` workers, built by the first campaign that asks for it (`None`:
/// it cannot be built). Campaigns share pools rather than start threads of their own: a thread
/// that exits leaves the allocator the pages it used, partly occupied, and a process that ran
/// campaign after campaign on fresh threads held more memory with each.
pub fn worker_pool(jobs: usize) -> Option<std::sync::Arc<rayon::ThreadPool>> {
    static POOLS: std::sync::Mutex<BTreeMap<usize, std::sync::Arc<rayon::ThreadPool>>> =
        std::sync::Mutex::new(BTreeMap::new());
    let mut pools = POOLS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(pool) = pools.get(&jobs) {
        return Some(pool.clone());
    }
    let pool = std::sync::Arc::new(rayon::ThreadPoolBuilder::new().num_threads(jobs).build().ok()?);
    pools.insert(jobs, pool.clone());
    Some(pool)
}

/// Cases handed to the workers as one unit and merged in case order once all are checked.
/// Fixed, so that which cases a run merges before it stops does not depend on the number of jobs.
pub const BLOCK: usize = 64;
/// Blocks handed out and not yet merged. While the calling thread merges one block the workers
/// check the next, and the merge is done before they finish it, so the block after is there
/// for a worker that is through with its share while the other finishes the last case; what is
/// in flight stays bounded. With three, the 2-job threads were no busier (98%) and a
/// 100,000-case campaign's peak RSS was higher.
pub const BLOCKS_IN_FLIGHT: usize = 2;

/// Checks `next_block`'s blocks on `scope`'s pool, [`BLOCKS_IN_FLIGHT`] at a time, and hands
/// their outcomes to `merge` on this thread in case order until it returns true (stop) or the
/// blocks run out. A case that panics re-raises its panic here, in block order (the other
/// outcomes of its block are not merged).
pub fn pipeline<'s, T: Send + 's>(
    scope: &rayon::Scope<'s>,
    check: &'s (dyn Fn(u64) -> T + Sync),
    next_block: &mut dyn FnMut() -> Option<Vec<u64>>,
    merge: &mut dyn FnMut(T) -> bool,
) {
    let (done, finished) = std::sync::mpsc::channel::<(usize, std::thread::Result<Vec<T>>)>();
    let (mut sent, mut merged) = (0usize, 0usize);
    let mut arrived: BTreeMap<usize, std::thread::Result<Vec<T>>> = BTreeMap::new();
    loop {
        while sent < merged + BLOCKS_IN_FLIGHT {
            let Some(block) = next_block() else { break };
            let (done, index) = (done.clone(), sent);
            scope.spawn(move |_| {
                let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    block.par_iter().map(|&case| check(case)).collect()
                }));
                // After a stop or a re-raised panic the receiver is gone while the scope still
                // waits for this block: its outcomes are not wanted then, and are dropped here.
                let _ = done.send((index, checked));
            });
            sent += 1;
        }
        if merged == sent {
            return;
        }
        // Every spawned block sends exactly once (a panic is caught and sent), so this waits only
        // for blocks still being checked.
        let Ok((index, checked)) = finished.recv() else { return };
        arrived.insert(index, checked);
        while let Some(checked) = arrived.remove(&merged) {
            merged += 1;
            let outcomes = checked.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            for o in outcomes {
                if merge(o) {
                    return;
                }
            }
        }
    }
}
