//! The campaign loop (`ptecheck campaign`): N generated cases checked by `oracle::check_case`,
//! sequentially or on the worker pool, merged in case order, the first failure shrunk.
//! May not touch: the invariants (`check_case` decides each); of the stages it only empties the
//! backends' caches of compiled blobs between cases.

use super::options::{CampaignId, CampaignOptions, case_config, case_input, check_options, replay_command};
use super::pool::{BLOCK, effective_jobs, pipeline, worker_pool};
use super::result::{CampaignResult, FailingCase, MAX_LISTED_FAILURES, Reproduction};
use super::shrink::{keeps_failing, run_input, shrink_bytes};
use super::watchdog::{InFlight, Overdue};
use crate::generator::{GenConfig, Generated, generate};
use crate::ir::saved;
use crate::oracle::{CheckOptions, Invariant, Report, Timings, check_case, node_count};
use arbitrary::Unstructured;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Runs a campaign.
pub fn run(opts: &CampaignOptions) -> CampaignResult {
    run_with(opts, &mut |_| {})
}

/// Progress of a running campaign, reported after each case.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Cases checked so far.
    pub done: u64,
    /// Cases this run will check.
    pub total: u64,
    /// Failing cases so far.
    pub failures: u64,
}

/// What checking one case left, kept until it is merged in case order.
struct CaseOutcome {
    case: u64,
    features: Vec<String>,
    report: Report,
    generate: Duration,
    /// The case's input and configuration, kept only when it failed.
    failed: Option<(Vec<u8>, GenConfig, Generated)>,
}

/// [`check_one`] with the case in `in_flight` while it runs.
fn check_entered(opts: &CampaignOptions, in_flight: &InFlight, case: u64) -> CaseOutcome {
    let _running = in_flight.enter(case);
    check_one(opts, case)
}

fn check_one(opts: &CampaignOptions, case: u64) -> CaseOutcome {
    let cfg = case_config(opts, case);
    let bytes = case_input(opts.seed, case);
    let check = check_options(opts, case);
    let t = Instant::now();
    let g = generate(&cfg, &mut Unstructured::new(&bytes), check.fault);
    let generate = t.elapsed();
    let report = check_case(&g, &check);
    crate::backends::forget_compiled();
    let features = g.features.iter().cloned().collect();
    let failed = (!report.ok()).then_some((bytes, cfg, g));
    CaseOutcome { case, features, report, generate, failed }
}

/// [`super::shrink::shrink`] of case `case`, each attempt in `in_flight` while it runs (so a watcher sees an
/// attempt that hangs, not the whole shrink as one long case).
fn shrink_entered(
    in_flight: &InFlight,
    case: u64,
    cfg: &GenConfig,
    bytes: &[u8],
    check: &CheckOptions,
    invariant: &str,
    budget: usize,
) -> Vec<u8> {
    let fails = |b: &[u8]| {
        let _running = in_flight.enter(case);
        keeps_failing(cfg, b, check, invariant)
    };
    shrink_bytes(bytes, budget, fails).0
}

/// Runs a campaign, calling `on_case` after every case (the CLI draws its progress bar there).
///
/// Cases run on `opts.jobs` threads in blocks of [`BLOCK`], [`super::pool::BLOCKS_IN_FLIGHT`] blocks at a time;
/// outcomes are merged on this thread in case order, so counts, features and the first failure
/// are the same for any number of jobs.
pub fn run_with(opts: &CampaignOptions, on_case: &mut dyn FnMut(Progress)) -> CampaignResult {
    run_watched(opts, on_case, None)
}

/// What to do about a case that runs too long: the limit, and what is called (once per case, on
/// a watcher thread, while the case goes on running) when a case passes it.
pub type Watch<'a> = (Duration, &'a (dyn Fn(&Overdue) + Sync));

/// [`run_with`], with a watcher that calls `watch.1` for a case running longer than `watch.0`
/// (the CLI reports it as hung and ends the process: a case cannot be stopped from outside).
pub fn run_watched(
    opts: &CampaignOptions,
    on_case: &mut dyn FnMut(Progress),
    watch: Option<Watch<'_>>,
) -> CampaignResult {
    let in_flight = InFlight::default();
    match watch {
        Some((limit, on_overdue)) => {
            super::watchdog::watch(&in_flight, limit, on_overdue, || run_tracked(opts, &in_flight, on_case))
        }
        None => run_tracked(opts, &in_flight, on_case),
    }
}

/// [`run_with`], each case entered in `in_flight` while it is checked.
fn run_tracked(opts: &CampaignOptions, in_flight: &InFlight, on_case: &mut dyn FnMut(Progress)) -> CampaignResult {
    let start = Instant::now();
    let jobs = effective_jobs(opts.jobs);
    let (shard, shards) = (opts.shard.0, opts.shard.1.max(1));
    let (mut cases, total): (Box<dyn Iterator<Item = u64>>, u64) = match opts.only_case {
        Some(c) => (Box::new(std::iter::once(c)), 1),
        None => {
            let total = opts.cases / shards + u64::from(shard < opts.cases % shards);
            (Box::new((0..opts.cases).filter(move |c| c % shards == shard)), total)
        }
    };
    // On one of the pool's own workers, waiting for blocks would keep that worker from checking
    // them: a campaign started there checks its cases on its own thread, as does one whose pool
    // cannot be built. The report says so.
    let pool = worker_pool(jobs).filter(|pool| pool.current_thread_index().is_none());
    let jobs = pool.as_ref().map_or(1, |p| p.current_num_threads());
    let mut invariants: BTreeMap<String, usize> =
        Invariant::all().into_iter().filter(|i| i.is_check()).map(|i| (i.name().to_string(), 0)).collect();
    let mut failures_by_kind: BTreeMap<String, usize> = BTreeMap::new();
    let mut features: BTreeMap<String, usize> = BTreeMap::new();
    let mut timings = Timings::default();
    let mut gen_time = Duration::ZERO;
    let mut failures = 0u64;
    let mut failing_cases = Vec::new();
    let mut first: Option<(u64, Vec<u8>, GenConfig, Report, Generated)> = None;
    let mut ran = 0u64;
    // Merges one outcome, in case order; true when the campaign stops there.
    let mut merge = |o: CaseOutcome| -> bool {
        ran += 1;
        gen_time += o.generate;
        for f in o.features {
            *features.entry(f).or_default() += 1;
        }
        for (k, v) in o.report.checked.iter() {
            match invariants.get_mut(k.name()) {
                Some(n) => *n += v,
                None => {
                    invariants.insert(k.name().to_string(), v);
                }
            }
        }
        timings.add(&o.report.timings);
        for x in &o.report.failures {
            *failures_by_kind.entry(x.invariant.clone()).or_default() += 1;
        }
        if let Some((bytes, cfg, g)) = o.failed {
            failures += 1;
            if failing_cases.len() < MAX_LISTED_FAILURES {
                failing_cases.push(FailingCase {
                    seed: opts.seed,
                    case: o.case,
                    invariant: o.report.first_invariant().unwrap_or_default().to_string(),
                    command: replay_command(opts, o.case),
                });
            }
            if first.is_none() {
                first = Some((o.case, bytes, cfg, o.report, g));
            }
        }
        on_case(Progress { done: ran, total, failures });
        failures > 0 && opts.stop_on_failure
    };
    let mut next_block = || Some(cases.by_ref().take(BLOCK).collect::<Vec<u64>>()).filter(|b| !b.is_empty());
    match &pool {
        Some(pool) => {
            let check = |case: u64| check_entered(opts, in_flight, case);
            pool.in_place_scope(|scope| pipeline(scope, &check, &mut next_block, &mut merge))
        }
        None => {
            'blocks: while let Some(block) = next_block() {
                for case in block {
                    if merge(check_entered(opts, in_flight, case)) {
                        break 'blocks;
                    }
                }
            }
        }
    }
    let elapsed = start.elapsed();
    let failure = first.as_ref().map(|(case, bytes, cfg, report, g)| {
        let check = check_options(opts, *case);
        let inv = report.failures[0].invariant.clone();
        let shrunk = if opts.shrink {
            shrink_entered(in_flight, *case, cfg, bytes, &check, &inv, opts.shrink_budget)
        } else {
            bytes.clone()
        };
        let (sg, sr) = {
            let _running = in_flight.enter(*case);
            run_input(cfg, &shrunk, &check)
        };
        Reproduction {
            invariant: inv.clone(),
            seed: opts.seed,
            case: *case,
            command: replay_command(opts, *case),
            failures: if sr.ok() { report.failures.clone() } else { sr.failures },
            input_hex: hex::encode(&shrunk),
            config: cfg.clone(),
            program_json: saved::save(&sg.program),
            program_text: crate::ir::pretty::program(&sg.program),
            shrunk_nodes: node_count(&sg.program),
            original_nodes: node_count(&g.program),
        }
    });
    CampaignResult {
        campaign: CampaignId::of(opts),
        shards_run: vec![shard],
        cases: ran,
        failures,
        programs_per_second: ran as f64 / elapsed.as_secs_f64().max(1e-9),
        invariants,
        failures_by_kind,
        features,
        failure,
        first_failing_case: first.map(|f| f.0),
        failing_cases,
        jobs,
        elapsed_seconds: elapsed.as_secs_f64(),
        timings,
        generate: gen_time,
        peak_rss_kib: super::resident::peak_kib(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_campaign_started_on_a_worker_of_its_own_pool_checks_its_cases_on_that_thread() {
        let opts = CampaignOptions { cases: 150, seed: 3, jobs: 2, ..CampaignOptions::default() };
        let pool = worker_pool(2).expect("a pool of two workers");
        let inside = pool.install(|| run(&opts));
        let outside = run(&opts);
        assert_eq!((inside.jobs, outside.jobs), (1, 2));
        assert_eq!(
            (inside.cases, inside.failures, &inside.features, &inside.invariants),
            (outside.cases, outside.failures, &outside.features, &outside.invariants)
        );
    }
}
