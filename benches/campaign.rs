//! Campaign throughput (`cargo bench --bench campaign`): fully checked programs per second on
//! one core, with the split of time across stages, for swarm and `--no-swarm` at three program
//! sizes (default; 2× `max_nodes` and depth 4, both without the program's node budget); then the
//! same campaign on 1 and on 2 jobs, side by side. With `--no-swarm` each size also runs with
//! every negative corruption sent end to end through the runtime (the negative checks before
//! issue K; a tenth of the cases). First it prints how many default programs, swarm and not, the
//! generator's node budget changes.
//!
//! Settings: `CASES`, the cases per row (default 2000); `SIZES=default` keeps only the first
//! rows; `SIZE_ROUNDS`, the alternating pairs of default and 2x `max_nodes` runs (both without
//! the node budget) whose median ratio of time per case is printed (default 3); `JOBS_ROUNDS`,
//! the alternating pairs of 1- and 2-job runs whose median ratio is printed (default 5);
//! `JOBS_CASES`, the cases of each of those runs (default 8000).
//!
//! Every row also prints the CPU time the process spent per case and how busy its jobs were
//! (CPU time / (wall time x jobs)): a 2-job run below 2x can then be told apart into jobs
//! waiting (busy under 100%) and each case costing more CPU time while both cores run (the
//! machine). A 1-job run can be a little over 100% busy: the calling thread merges outcomes
//! beside its one job.

#![forbid(unsafe_code)]

use ptecheck::generator::config::MAX_TOTAL_NODES;
use ptecheck::generator::{GenConfig, generate_from_bytes};

#[global_allocator]
static ALLOCATOR: ptecheck::allocator::Chosen = ptecheck::allocator::Chosen;
use ptecheck::campaign::{CampaignOptions, CampaignResult, case_config, case_input, run};

/// A campaign's result with the CPU time its process spent running it.
struct Row {
    result: CampaignResult,
    cpu_seconds: f64,
}

/// This process's CPU time so far (seconds, all threads).
fn process_cpu_seconds() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn row(label: &str, opts: &CampaignOptions) -> Row {
    let cpu = process_cpu_seconds();
    let r = run(opts);
    let cpu_seconds = process_cpu_seconds() - cpu;
    assert_eq!(r.failures, 0, "the benchmark campaign must be clean ({label})");
    let t = &r.timings;
    let stages = [
        ("gen", r.generate),
        ("emit", t.emit),
        ("write", t.write),
        ("load", t.load),
        ("init", t.init),
        ("execute", t.execute),
        ("eager", t.eager),
        ("compare", t.compare),
        ("negative", t.negative),
    ];
    let total: f64 = stages.iter().map(|(_, d)| d.as_secs_f64()).sum();
    let split: Vec<String> =
        stages.iter().map(|(name, d)| format!("{name} {:.0}%", 100.0 * d.as_secs_f64() / total.max(1e-9))).collect();
    let busy = cpu_seconds / (r.elapsed_seconds * r.jobs as f64).max(1e-9);
    println!(
        "{label:<28} jobs {} {:>6} cases {:>7.2} s {:>8.0} programs/s {:>8.1} µs/case {:>8.1} CPU µs/case busy {:>3.0}%  [{}]",
        opts.jobs,
        r.cases,
        r.elapsed_seconds,
        r.programs_per_second,
        1e6 * r.elapsed_seconds / r.cases.max(1) as f64,
        1e6 * cpu_seconds / r.cases.max(1) as f64,
        100.0 * busy,
        split.join(", ")
    );
    Row { result: r, cpu_seconds }
}

/// The setting `name` from the environment, or `default`.
fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `rounds` alternating pairs of rows: one pair of runs moves by a fifth with the machine's
/// other load, so the figures are medians over the pairs.
fn alternate(rounds: usize, first: impl Fn() -> Row, second: impl Fn() -> Row) -> Vec<(Row, Row)> {
    (0..rounds.max(1)).map(|_| (first(), second())).collect()
}

fn main() {
    let cases = setting("CASES", 2000);
    let only_default = std::env::var("SIZES").is_ok_and(|s| s == "default");
    let base = CampaignOptions { cases, seed: 1, stop_on_failure: false, jobs: 1, ..CampaignOptions::default() };
    // The larger sizes, and the default they are compared with, lift the program's node budget
    // (`max_total_nodes`), which would otherwise cap what doubling `max_nodes` adds.
    let unbudgeted = GenConfig { max_total_nodes: MAX_TOTAL_NODES, ..GenConfig::default() };
    let sizes = [
        ("default", GenConfig::default()),
        ("2x max_nodes, no node budget", GenConfig { max_nodes: unbudgeted.max_nodes * 2, ..unbudgeted.clone() }),
        (
            "depth 4, 2x max_nodes, no node budget",
            GenConfig { max_depth: 4, max_nodes: unbudgeted.max_nodes * 2, ..unbudgeted.clone() },
        ),
    ];
    for swarm in [true, false] {
        let changed = budget_changes(&CampaignOptions { swarm, ..base.clone() });
        let mode = if swarm { "swarm" } else { "no-swarm" };
        println!("the node budget changes {changed} of the first {cases} {mode} default programs");
    }
    println!("one core:");
    for (i, (name, config)) in sizes.iter().enumerate() {
        if only_default && i > 0 {
            break;
        }
        row(&format!("swarm, {name}"), &CampaignOptions { config: config.clone(), ..base.clone() });
        let no_swarm = CampaignOptions { config: config.clone(), swarm: false, ..base.clone() };
        let before = row(
            &format!("no-swarm, {name}, every corruption end to end"),
            &CampaignOptions { negative_end_to_end: true, cases: (cases / 10).max(20), ..no_swarm.clone() },
        );
        let after = row(&format!("no-swarm, {name}"), &no_swarm);
        println!(
            "  per-element negative checks vs every corruption end to end: {:.1}x",
            after.result.programs_per_second / before.result.programs_per_second.max(1e-9)
        );
    }
    if !only_default {
        let rounds = setting("SIZE_ROUNDS", 3usize);
        println!("2x max_nodes vs default, no node budget (no-swarm, time per case), {rounds} alternating pairs:");
        let per_case = |r: &Row| r.result.elapsed_seconds / r.result.cases.max(1) as f64;
        let pairs = alternate(
            rounds,
            || {
                let config = unbudgeted.clone();
                row("no-swarm, default, no node budget", &CampaignOptions { config, swarm: false, ..base.clone() })
            },
            || {
                row(
                    "no-swarm, 2x max_nodes, no node budget",
                    &CampaignOptions { config: sizes[1].1.clone(), swarm: false, ..base.clone() },
                )
            },
        );
        let mut ratios: Vec<f64> = pairs.iter().map(|(one, two)| per_case(two) / per_case(one).max(1e-12)).collect();
        let (ratio, pairs) = median(&mut ratios);
        println!("2x max_nodes vs default: median {ratio:.2}x time per case (pairs, sorted: {pairs})");
    }
    // Each run is long enough (`JOBS_CASES`, default 8,000: seconds) that starting the pool and
    // the first cases' page faults do not weigh on it.
    let rounds = setting("JOBS_ROUNDS", 5usize);
    let base = CampaignOptions { cases: setting("JOBS_CASES", 8000), ..base };
    println!("jobs (no-swarm, default size), {rounds} alternating pairs:");
    let pairs = alternate(
        rounds,
        || row("no-swarm, 1 job", &CampaignOptions { swarm: false, ..base.clone() }),
        || row("no-swarm, 2 jobs", &CampaignOptions { swarm: false, jobs: 2, ..base.clone() }),
    );
    let mut ratios: Vec<f64> = pairs
        .iter()
        .map(|(one, two)| two.result.programs_per_second / one.result.programs_per_second.max(1e-9))
        .collect();
    let mut busy: Vec<f64> =
        pairs.iter().map(|(_, two)| two.cpu_seconds / (2.0 * two.result.elapsed_seconds).max(1e-9)).collect();
    let mut cpu_ratios: Vec<f64> = pairs.iter().map(|(one, two)| two.cpu_seconds / one.cpu_seconds.max(1e-9)).collect();
    let (ratio, pairs) = median(&mut ratios);
    println!("jobs 2 vs 1: median {ratio:.2}x (pairs, sorted: {pairs})");
    let (busy, runs) = median(&mut busy);
    println!("  2 jobs busy (CPU time / (2 x wall time)): median {busy:.2} (sorted: {runs})");
    let (cpu, pairs) = median(&mut cpu_ratios);
    println!("  CPU time per case, 2 jobs vs 1: median {cpu:.2}x (pairs, sorted: {pairs})");
}

/// How many of the first `opts.cases` programs of `opts` the node budget changes: generated
/// again with the budget lifted, they differ.
fn budget_changes(opts: &CampaignOptions) -> usize {
    (0..opts.cases)
        .filter(|&case| {
            let (config, bytes) = (case_config(opts, case), case_input(opts.seed, case));
            let lifted = GenConfig { max_total_nodes: MAX_TOTAL_NODES, ..config.clone() };
            generate_from_bytes(&config, &bytes).program != generate_from_bytes(&lifted, &bytes).program
        })
        .count()
}

/// The median of `values` and the values sorted, as text.
fn median(values: &mut [f64]) -> (f64, String) {
    values.sort_by(f64::total_cmp);
    let shown: Vec<String> = values.iter().map(|v| format!("{v:.2}")).collect();
    (values.get(values.len() / 2).copied().unwrap_or(f64::NAN), shown.join(", "))
}
