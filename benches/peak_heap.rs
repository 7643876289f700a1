//! Peak live heap of the default campaign at two lengths (`cargo bench --bench peak_heap`):
//! the most bytes allocated and not yet freed at any moment, counted by a `cap` wrapper around
//! the binary's allocator, for a SHORT- and a LONG-case campaign (defaults 10,000 and 100,000;
//! seed 1) on 1 and on 2 jobs. Each campaign runs in a child process of its own, so each peak
//! is that campaign's alone. Unlike peak RSS (`benches/peak_rss.sh`), it does not move with
//! where the allocator placed pages or which code pages a run touched (with one job, three runs
//! on 2026-12-02 printed the same bytes). Each run also names the block of cases that set its
//! peak, and the least heap it held at the end of a block in its first half (after the first
//! tenth of its cases, a warm-up) and in its second half (the least, since the next block is
//! being checked meanwhile): a campaign that kept something from each case would hold more in
//! the second half. Beside the heap it prints the most anonymous resident memory (`RssAnon`,
//! Linux) at a block's end in each half: memory the allocator kept resident after the cases
//! that used it were freed. Last, one process runs the SHORT campaign AGAIN times (default 3)
//! on 1 and on 2 jobs and prints the peak live heap and peak RSS (`VmHWM`) after each run: the
//! same cases on the same threads.

#![forbid(unsafe_code)]

#[global_allocator]
static ALLOCATOR: cap::Cap<ptecheck::allocator::Chosen> = cap::Cap::new(ptecheck::allocator::Chosen, usize::MAX);

use ptecheck::campaign::{BLOCK, CampaignOptions, run_with};
use std::process::Command;

/// Runs one campaign in this process and prints: its peak live heap (bytes); the first case of
/// the block of cases during which the peak last rose (`end` when it rose after the last case,
/// while the report was put together); and the fewest bytes held as each block's last outcome
/// is merged (what the campaign keeps, plus that one outcome and the cases of the next block
/// being checked meanwhile) in the first and the second half, then the most anonymous resident
/// KiB at those moments in each half.
fn child(cases: u64, jobs: usize) {
    let opts = CampaignOptions { cases, seed: 1, jobs, ..CampaignOptions::default() };
    let (mut top, mut set_at, mut held, mut resident) = (0, 0, [usize::MAX; 2], [0u64; 2]);
    let r = run_with(&opts, &mut |p| {
        let peak = ALLOCATOR.max_allocated();
        if peak > top {
            // A block's outcomes are merged in case order after the whole block ran, so the
            // peak rose while the block or the next one (checked meanwhile) ran, or while its
            // outcomes were being merged.
            (top, set_at) = (peak, (p.done - 1) / BLOCK as u64 * BLOCK as u64);
        }
        if p.done % BLOCK as u64 == 0 || p.done == p.total {
            let half = usize::from(2 * p.done > p.total);
            // The first tenth warms up (caches, the feature tally, lazily built tables).
            if 10 * p.done > p.total {
                held[half] = held[half].min(ALLOCATOR.allocated());
            }
            resident[half] = resident[half].max(anonymous_resident_kib().unwrap_or(0));
        }
    });
    assert_eq!(r.failures, 0, "the benchmark campaign must be clean");
    let peak = ALLOCATOR.max_allocated();
    let set_at = if peak > top { "end".to_string() } else { set_at.to_string() };
    println!("{peak} {set_at} {} {} {} {}", held[0], held[1], resident[0], resident[1]);
}

/// Runs the same campaign `times` times in this process and prints, after each, the peak live
/// heap (bytes) and the peak resident memory (`VmHWM`, KiB) so far.
fn child_again(cases: u64, jobs: usize, times: u64) {
    let opts = CampaignOptions { cases, seed: 1, jobs, ..CampaignOptions::default() };
    for _ in 0..times {
        let r = run_with(&opts, &mut |_| {});
        assert_eq!(r.failures, 0, "the benchmark campaign must be clean");
        println!("{} {}", ALLOCATOR.max_allocated(), r.peak_rss_kib.unwrap_or(0));
    }
}

/// This process's anonymous resident memory in KiB (`RssAnon` of `/proc/self/status`), where
/// the system reports it.
fn anonymous_resident_kib() -> Option<u64> {
    ptecheck::campaign::resident::status_kib("RssAnon")
}

/// What a child reported of its campaign (bytes; the block that set the peak, by its first case).
struct Figures {
    peak: u64,
    set_at: String,
    held_first_half: u64,
    held_second_half: u64,
    /// The most anonymous resident memory at a block's end in each half (KiB; 0: not reported).
    resident: [u64; 2],
}

/// The figures of a campaign of `cases` on `jobs`, run by a child process.
fn measure(cases: u64, jobs: usize) -> Result<Figures, String> {
    let text = in_child(&["--child", &cases.to_string(), &jobs.to_string()])?;
    let fields: Vec<&str> = text.split_whitespace().collect();
    let num = |k: usize| fields.get(k).and_then(|f| f.parse::<u64>().ok());
    match (fields.len(), num(0), fields.get(1), num(2), num(3), num(4), num(5)) {
        (6, Some(peak), Some(set_at), Some(held_first_half), Some(held_second_half), Some(r0), Some(r1)) => {
            Ok(Figures { peak, set_at: set_at.to_string(), held_first_half, held_second_half, resident: [r0, r1] })
        }
        _ => Err(format!("child printed {text:?}, not its six figures")),
    }
}

/// What this bench printed when run as a child with `args`.
fn in_child(args: &[&str]) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    // Freed memory goes back to the system at once, so resident memory is what the allocator
    // keeps, not what it has yet to return (an explicit setting is left as it is).
    let purge = std::env::var("MIMALLOC_PURGE_DELAY").unwrap_or_else(|_| "0".into());
    let out =
        Command::new(exe).env("MIMALLOC_PURGE_DELAY", purge).args(args).output().map_err(|e| format!("start: {e}"))?;
    if !out.status.success() {
        return Err(format!("child failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Peak live heap (bytes) and peak RSS (KiB) after each of `times` runs of the same campaign in
/// one child process.
fn measure_again(cases: u64, jobs: usize, times: u64) -> Result<Vec<(u64, u64)>, String> {
    let text = in_child(&["--again", &cases.to_string(), &jobs.to_string(), &times.to_string()])?;
    let passes: Option<Vec<(u64, u64)>> = text
        .lines()
        .map(|l| {
            let mut f = l.split_whitespace().map(|x| x.parse::<u64>().ok());
            Some((f.next()??, f.next()??))
        })
        .collect();
    passes.filter(|p| p.len() as u64 == times).ok_or_else(|| format!("child printed {text:?}, not {times} passes"))
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let num = |k: usize| args.get(i + k).and_then(|a| a.parse().ok()).ok_or("--child CASES JOBS");
        child(num(1)?, num(2)? as usize);
        return Ok(());
    }
    if let Some(i) = args.iter().position(|a| a == "--again") {
        let num = |k: usize| args.get(i + k).and_then(|a| a.parse().ok()).ok_or("--again CASES JOBS TIMES");
        child_again(num(1)?, num(2)? as usize, num(3)?);
        return Ok(());
    }
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let (short, long) = (env("SHORT", 10_000), env("LONG", 100_000));
    let kib = |b: u64| b as f64 / 1024.0;
    println!(
        "peak live heap of the default campaign (seed 1), the block of {BLOCK} cases (by its first case) that set it,"
    );
    println!(
        "and the least heap held / the most anonymous memory resident at the end of a block, in the first / the second half"
    );
    for jobs in [1, 2] {
        let (s, l) = (measure(short, jobs)?, measure(long, jobs)?);
        for (cases, f) in [(short, &s), (long, &l)] {
            println!(
                "jobs {jobs}: {cases:>7} cases  peak {:>7.1} KiB (set in the block from case {:>6})  held {:>6.1} / {:>6.1} KiB  resident {:>5} / {:>5} KiB",
                kib(f.peak),
                f.set_at,
                kib(f.held_first_half),
                kib(f.held_second_half),
                f.resident[0],
                f.resident[1]
            );
        }
        println!("jobs {jobs}: peak long/short {:.3}", l.peak as f64 / s.peak as f64);
    }
    // The same cases again on the same threads: what a campaign's length adds by itself, apart
    // from the larger programs a longer campaign draws.
    let times = env("AGAIN", 3);
    for jobs in [1, 2] {
        let passes = measure_again(short, jobs, times)?;
        let shown: Vec<String> =
            passes.iter().map(|(heap, rss)| format!("{:.1} KiB heap, {rss} KiB RSS", kib(*heap))).collect();
        println!(
            "jobs {jobs}: the same {short} cases {times} times in one process, peaks after each: {}",
            shown.join("; ")
        );
    }
    Ok(())
}
