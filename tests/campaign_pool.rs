//! Campaigns in one process share their worker threads: a second campaign on as many jobs runs
//! on the threads the first started (fresh threads for each campaign left the allocator the
//! pages of every exited thread, and a process running campaign after campaign held more memory
//! with each). Alone in its test binary so that no other test starts or ends threads meanwhile.
//! Linux: threads are read from /proc/self/task.

#![forbid(unsafe_code)]
#![cfg(target_os = "linux")]

use ptecheck::campaign::{CampaignOptions, run};
use std::collections::BTreeSet;

/// The process's threads, by id (Linux).
fn threads() -> BTreeSet<u64> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task lists this process's threads")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

#[test]
fn a_second_campaign_on_as_many_jobs_runs_on_the_threads_of_the_first() {
    let opts = CampaignOptions { cases: 40, seed: 5, jobs: 3, ..CampaignOptions::default() };
    let before = threads();
    let first = run(&opts);
    let after_first = threads();
    let started: BTreeSet<u64> = after_first.difference(&before).copied().collect();
    assert_eq!(started.len(), 3, "the first campaign starts its 3 workers: {before:?} -> {after_first:?}");
    let second = run(&opts);
    assert_eq!(threads(), after_first, "the second campaign starts no thread and ends none");
    assert_eq!((first.cases, first.failures), (second.cases, second.failures));
    // Another number of jobs is another pool; the first stays for the next campaign that asks.
    run(&CampaignOptions { jobs: 2, ..opts.clone() });
    assert_eq!(threads().difference(&after_first).count(), 2);
    assert!(after_first.is_subset(&threads()));
}
