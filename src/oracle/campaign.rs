//! `campaign`: `check_program` over N generated cases. Case `i` of seed `S` is fully determined
//! by `(S, i)`: a swarm configuration drawn from one ChaCha stream and the program bytes from
//! another, so `--seed S --case i` replays it. On the first failure the input bytes are shrunk
//! (chunk deletion, then byte zeroing) while the same invariant keeps failing; since the
//! generator is total, every shrink step is a valid program.
//! May not touch: the invariants (`check_case` decides each); of the stages it only empties the
//! backends' caches of compiled blobs between cases.

use super::watchdog::{InFlight, Overdue};
use super::{CheckOptions, Failure, Invariant, Report, Timings, check_case, node_count};
use crate::fault::Fault;
use crate::generator::{GenConfig, Generated, generate};
use crate::ir::saved;
use arbitrary::Unstructured;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Campaign settings.
#[derive(Clone, Debug)]
pub struct CampaignOptions {
    /// Cases to run (before sharding).
    pub cases: u64,
    /// Campaign seed.
    pub seed: u64,
    /// Base generator configuration (swarm draws below it).
    pub config: GenConfig,
    /// Where the configuration came from (`--config FILE`), for the replay command.
    pub config_path: Option<String>,
    /// This shard's index and the shard count.
    pub shard: (u64, u64),
    /// Swarm testing: each case switches a random subset of the base features on.
    pub swarm: bool,
    /// A seeded bug (mutation testing).
    pub fault: Option<Fault>,
    /// Run only this case index.
    pub only_case: Option<u64>,
    /// Stop at the first failing case.
    pub stop_on_failure: bool,
    /// Shrink the first failure.
    pub shrink: bool,
    /// Most shrink attempts.
    pub shrink_budget: usize,
    /// Worker threads (0: one per core). The report does not depend on it.
    pub jobs: usize,
    /// Every negative corruption through the whole runtime ([`CheckOptions::negative_end_to_end`]).
    pub negative_end_to_end: bool,
}

impl Default for CampaignOptions {
    fn default() -> Self {
        CampaignOptions {
            cases: 10_000,
            seed: 0,
            config: GenConfig::default(),
            config_path: None,
            shard: (0, 1),
            swarm: true,
            fault: None,
            only_case: None,
            stop_on_failure: true,
            shrink: true,
            shrink_budget: 400,
            jobs: 0,
            negative_end_to_end: false,
        }
    }
}

/// Everything needed to reproduce a failure.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Reproduction {
    /// The invariant the case failed first (the one shrinking preserved).
    pub invariant: String,
    /// Campaign seed.
    pub seed: u64,
    /// Case index.
    pub case: u64,
    /// The command that replays the case.
    pub command: String,
    /// Violations of the shrunk program.
    pub failures: Vec<Failure>,
    /// Shrunk generator input (hex).
    pub input_hex: String,
    /// The case's generator configuration.
    pub config: GenConfig,
    /// The shrunk program as saved JSON (`ptecheck emit FILE -o out.pte`).
    pub program_json: String,
    /// The shrunk program in text form.
    pub program_text: String,
    /// Nodes of the shrunk program.
    pub shrunk_nodes: usize,
    /// Nodes before shrinking.
    pub original_nodes: usize,
}

/// What makes shard reports parts of one campaign: the cases they split, and everything that
/// decides what case `i` is and how it is checked. Shards of one campaign report equal ones.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CampaignId {
    /// Campaign seed.
    pub seed: u64,
    /// Cases of the whole campaign, before sharding.
    pub cases: u64,
    /// Shards the campaign is split into.
    pub shards: u64,
    /// Swarm testing on.
    pub swarm: bool,
    /// Base generator configuration.
    pub config: GenConfig,
    /// The seeded bug exhibited, by name.
    pub fault: Option<String>,
    /// Every negative corruption sent end to end.
    pub negative_end_to_end: bool,
    /// The one case run (`--case`), if only one was.
    pub only_case: Option<u64>,
}

impl CampaignId {
    /// The identity of the campaign `opts` runs a shard of.
    pub fn of(opts: &CampaignOptions) -> CampaignId {
        CampaignId {
            seed: opts.seed,
            cases: opts.cases,
            shards: opts.shard.1.max(1),
            swarm: opts.swarm,
            config: opts.config.clone(),
            fault: opts.fault.map(|f| f.name().to_string()),
            negative_end_to_end: opts.negative_end_to_end,
            only_case: opts.only_case,
        }
    }
}

/// Campaign outcome.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CampaignResult {
    /// The campaign this report is (part of).
    pub campaign: CampaignId,
    /// The shards it covers, ascending (one for a run, each merged shard for a merged report).
    pub shards_run: Vec<u64>,
    /// Cases run.
    pub cases: u64,
    /// Failing cases.
    pub failures: u64,
    /// Programs checked per second.
    pub programs_per_second: f64,
    /// Invariant -> times checked.
    pub invariants: BTreeMap<String, usize>,
    /// Feature -> programs that had it.
    pub features: BTreeMap<String, usize>,
    /// First failure, shrunk.
    pub failure: Option<Reproduction>,
    /// Index of the first failing case.
    pub first_failing_case: Option<u64>,
    /// The failing cases, in case order (at most [`MAX_LISTED_FAILURES`]).
    pub failing_cases: Vec<FailingCase>,
    /// Worker threads used.
    pub jobs: usize,
    /// Wall time.
    pub elapsed_seconds: f64,
    /// Time per stage, including generation.
    pub timings: Timings,
    /// Time generating programs.
    pub generate: Duration,
    /// The process's peak RSS in KiB when the report was made (merged: the largest shard's).
    #[serde(default)]
    pub peak_rss_kib: Option<u64>,
}

fn rng(seed: u64, case: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ case.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    r.set_stream(stream);
    r
}

/// The generator configuration of case `case`: the base configuration, or under swarm testing
/// a draw below it from the case's own random stream.
pub fn case_config(opts: &CampaignOptions, case: u64) -> GenConfig {
    if !opts.swarm {
        return opts.config.clone();
    }
    let mut bytes = [0u8; 64];
    rng(opts.seed, case, 1).fill_bytes(&mut bytes);
    opts.config.swarm(&mut Unstructured::new(&bytes))
}

/// The generator input bytes of case `case`.
pub fn case_input(seed: u64, case: u64) -> Vec<u8> {
    let mut r = rng(seed, case, 2);
    let len = 256 + (r.next_u32() % 1792) as usize;
    let mut v = vec![0u8; len];
    r.fill_bytes(&mut v);
    v
}

fn check_options(opts: &CampaignOptions, case: u64) -> CheckOptions {
    CheckOptions {
        fault: opts.fault,
        inject_seed: case.wrapping_mul(31).wrapping_add(opts.seed),
        negative: true,
        negative_end_to_end: opts.negative_end_to_end,
        allow_while: true,
        instruction_budget: 1_000_000,
    }
}

/// Generates (with the fault plan's preprocess) and checks one input.
pub fn run_input(cfg: &GenConfig, bytes: &[u8], check: &CheckOptions) -> (Generated, Report) {
    let g = generate(cfg, &mut Unstructured::new(bytes), check.fault);
    let r = check_case(&g, check);
    (g, r)
}

/// Shrinks `bytes` while the program keeps failing `invariant`.
pub fn shrink(cfg: &GenConfig, bytes: &[u8], check: &CheckOptions, invariant: &str, budget: usize) -> Vec<u8> {
    shrink_entered(&InFlight::default(), 0, cfg, bytes, check, invariant, budget)
}

/// [`shrink`] of case `case`, each attempt in `in_flight` while it runs (so a watcher sees an
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
        run_input(cfg, b, check).1.failures.iter().any(|f| f.invariant == invariant)
    };
    shrink_bytes(bytes, budget, fails).0
}

/// Shrinks `bytes` while `fails` holds: chunk deletion (halving chunk sizes, from the end),
/// then zeroing single bytes, repeated while either improves; at most `budget` calls of
/// `fails`. Returns the smallest failing input found and the calls made.
pub fn shrink_bytes(bytes: &[u8], budget: usize, mut fails: impl FnMut(&[u8]) -> bool) -> (Vec<u8>, usize) {
    let mut best = bytes.to_vec();
    let mut tries = 0usize;
    let mut improved = true;
    while improved && tries < budget {
        improved = false;
        let mut chunk = best.len().max(1).next_power_of_two() / 2;
        while chunk >= 1 && tries < budget {
            let mut i = best.len().saturating_sub(chunk);
            loop {
                if tries >= budget {
                    break;
                }
                let mut cand = best.clone();
                cand.drain(i..(i + chunk).min(cand.len()));
                tries += 1;
                if fails(&cand) {
                    best = cand;
                    improved = true;
                }
                if i == 0 {
                    break;
                }
                i = i.saturating_sub(chunk);
                if i >= best.len() {
                    i = best.len().saturating_sub(chunk);
                }
            }
            chunk /= 2;
        }
        for i in 0..best.len() {
            if tries >= budget {
                break;
            }
            if best[i] == 0 {
                continue;
            }
            let mut cand = best.clone();
            cand[i] = 0;
            tries += 1;
            if fails(&cand) {
                best = cand;
                improved = true;
            }
        }
    }
    (best, tries)
}

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

/// Failing cases listed in a report beyond the first (the count covers all of them).
pub const MAX_LISTED_FAILURES: usize = 100;

/// One failing case, as listed in a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingCase {
    /// Campaign seed.
    pub seed: u64,
    /// Case index.
    pub case: u64,
    /// The first invariant it failed.
    pub invariant: String,
    /// The command that replays it.
    pub command: String,
}

/// Cases handed to the workers as one unit and merged in case order once all are checked.
/// Fixed, so that which cases a run merges before it stops does not depend on the number of jobs.
pub const BLOCK: usize = 64;

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

/// The command that replays case `case` of this campaign.
pub fn replay_command(opts: &CampaignOptions, case: u64) -> String {
    let mut command = format!("ptecheck campaign --seed {} --case {case}", opts.seed);
    for flag in case_flags(opts) {
        command.push(' ');
        command.push_str(&flag);
    }
    command
}

/// The `campaign` arguments besides seed, cases and shard that decide what each case checks
/// (configuration file, swarm, fault, negative mode), as the CLI spells them.
pub fn case_flags(opts: &CampaignOptions) -> Vec<String> {
    let mut flags = Vec::new();
    if let Some(p) = &opts.config_path {
        flags.extend(["--config".to_string(), p.clone()]);
    }
    if !opts.swarm {
        flags.push("--no-swarm".into());
    }
    if let Some(f) = opts.fault {
        flags.extend(["--fault".to_string(), f.name().to_string()]);
    }
    if opts.negative_end_to_end {
        flags.push("--negative-end-to-end".into());
    }
    flags
}

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
fn worker_pool(jobs: usize) -> Option<std::sync::Arc<rayon::ThreadPool>> {
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

/// Blocks handed out and not yet merged. While the calling thread merges one block the workers
/// check the next, and the merge is done before they finish it, so the block after is there
/// for a worker that is through with its share while the other finishes the last case; what is
/// in flight stays bounded. With three, the 2-job threads were no busier (98%) and a
/// 100,000-case campaign's peak RSS was higher.
const BLOCKS_IN_FLIGHT: usize = 2;

/// Checks `next_block`'s blocks on `scope`'s pool, [`BLOCKS_IN_FLIGHT`] at a time, and hands
/// their outcomes to `merge` on this thread in case order until it returns true (stop) or the
/// blocks run out. A case that panics re-raises its panic here, in block order (the other
/// outcomes of its block are not merged).
fn pipeline<'s>(
    scope: &rayon::Scope<'s>,
    opts: &'s CampaignOptions,
    in_flight: &'s InFlight,
    next_block: &mut dyn FnMut() -> Option<Vec<u64>>,
    merge: &mut dyn FnMut(CaseOutcome) -> bool,
) {
    let (done, finished) = std::sync::mpsc::channel::<(usize, std::thread::Result<Vec<CaseOutcome>>)>();
    let (mut sent, mut merged) = (0usize, 0usize);
    let mut arrived: BTreeMap<usize, std::thread::Result<Vec<CaseOutcome>>> = BTreeMap::new();
    loop {
        while sent < merged + BLOCKS_IN_FLIGHT {
            let Some(block) = next_block() else { break };
            let (done, index) = (done.clone(), sent);
            scope.spawn(move |_| {
                let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    block.par_iter().map(|&case| check_entered(opts, in_flight, case)).collect()
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

/// Runs a campaign, calling `on_case` after every case (the CLI draws its progress bar there).
///
/// Cases run on `opts.jobs` threads in blocks of [`BLOCK`], [`BLOCKS_IN_FLIGHT`] blocks at a time;
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
    let mut invariants: BTreeMap<String, usize> = Invariant::all().iter().map(|i| (i.name().to_string(), 0)).collect();
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
        Some(pool) => pool.in_place_scope(|scope| pipeline(scope, opts, in_flight, &mut next_block, &mut merge)),
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
