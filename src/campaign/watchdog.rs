//! The cases a campaign is checking and how long each has run, and a watcher that reports a
//! case that runs past a limit. A case cannot be stopped from outside its thread, so the
//! watcher only reports: what to do then (the CLI prints the case's replay command and ends the
//! process) is its caller's. Owns the in-flight table and the watcher thread; it may not check
//! cases or touch their outcomes.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// Longest the watcher sleeps between looks at the table.
const MOST_BETWEEN_LOOKS: Duration = Duration::from_secs(1);

/// A case that has run past the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overdue {
    /// The case's index.
    pub case: u64,
    /// How long it had run when the watcher saw it.
    pub running: Duration,
}

/// The cases being checked, each with the moment it started.
#[derive(Debug, Default)]
pub struct InFlight {
    started: Mutex<BTreeMap<u64, Instant>>,
}

/// A case's entry in [`InFlight`], removed when it is dropped (a panicking case included).
pub struct Entered<'a> {
    table: &'a InFlight,
    case: u64,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.table.started.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.case);
    }
}

impl InFlight {
    /// Records that `case` starts now, until the returned entry is dropped.
    pub fn enter(&self, case: u64) -> Entered<'_> {
        self.started.lock().unwrap_or_else(|p| p.into_inner()).insert(case, Instant::now());
        Entered { table: self, case }
    }

    /// Every case that has run longer than `limit`, by case index.
    pub fn overdue(&self, limit: Duration) -> Vec<Overdue> {
        let started = self.started.lock().unwrap_or_else(|p| p.into_inner());
        started
            .iter()
            .map(|(&case, at)| Overdue { case, running: at.elapsed() })
            .filter(|o| o.running > limit)
            .collect()
    }
}

/// Runs `body` while a watcher thread looks at `table` (at least every `limit / 4`, at most
/// every second) and calls `on_overdue` once for each case it finds running longer than `limit`.
/// Returns what `body` returns, once the watcher has stopped.
pub fn watch<R>(
    table: &InFlight,
    limit: Duration,
    on_overdue: &(dyn Fn(&Overdue) + Sync),
    body: impl FnOnce() -> R,
) -> R {
    let (stop, stopped) = channel::<()>();
    let every = (limit / 4).clamp(Duration::from_millis(1), MOST_BETWEEN_LOOKS);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut reported = std::collections::BTreeSet::new();
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                // Collected first: the table is not locked while `on_overdue` runs.
                for o in table.overdue(limit) {
                    if reported.insert(o.case) {
                        on_overdue(&o);
                    }
                }
            }
        });
        let out = body();
        // Dropping the sender ends the watcher's wait; the scope then joins it.
        drop(stop);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_past_the_limit_is_reported_once_and_quick_ones_never() {
        let table = InFlight::default();
        let seen = Mutex::new(Vec::new());
        let record = |o: &Overdue| seen.lock().expect("lock").push(o.clone());
        let limit = Duration::from_millis(40);
        let out = watch(&table, limit, &record, || {
            for case in 0..20 {
                let _quick = table.enter(case);
            }
            let _slow = table.enter(7_000);
            let _slower = table.enter(8_000);
            std::thread::sleep(limit * 6);
            "done"
        });
        assert_eq!(out, "done");
        let seen = seen.into_inner().expect("lock");
        // Both slow cases, each once, though neither ended before the watch did.
        assert_eq!(seen.iter().map(|o| o.case).collect::<Vec<_>>(), [7_000, 8_000], "{seen:?}");
        assert!(seen[0].running > limit, "{seen:?}");
        // The entries of finished cases are gone.
        assert_eq!(table.overdue(Duration::ZERO), []);
    }

    #[test]
    fn a_case_is_overdue_while_entered_and_gone_once_dropped() {
        let table = InFlight::default();
        let first = table.enter(9);
        std::thread::sleep(Duration::from_millis(2));
        let _second = table.enter(3);
        let cases = |limit| table.overdue(limit).iter().map(|o| o.case).collect::<Vec<_>>();
        assert_eq!(cases(Duration::ZERO), [3, 9]);
        assert_eq!(cases(Duration::from_millis(1)), [9]);
        drop(first);
        assert_eq!(cases(Duration::ZERO), [3]);
    }
}
