//! Peak live heap of the default campaign at two lengths (`cargo bench --bench peak_heap`):
//! the most bytes allocated and not yet freed at any moment, counted by a `cap` wrapper around
//! the binary's allocator, for a SHORT- and a LONG-case campaign (defaults 10,000 and 100,000;
//! seed 1) on 1 and on 2 jobs. Each campaign runs in a child process of its own, so each peak
//! is that campaign's alone. Unlike peak RSS (`benches/peak_rss.sh`), it does not move with
//! where the allocator placed pages or which code pages a run touched (with one job, three runs
//! on 2026-12-02 printed the same bytes). Each run also names the block of cases that set its
//! peak, and the most heap it held at the end of a block in its first and in its second half:
//! a campaign that kept something from each case would hold more in the second half.

#[global_allocator]
static ALLOCATOR: cap::Cap<mimalloc::MiMalloc> = cap::Cap::new(mimalloc::MiMalloc, usize::MAX);

use ptecheck::oracle::campaign::{BLOCK, CampaignOptions, run_with};
use std::process::Command;

/// Runs one campaign in this process and prints: its peak live heap (bytes); the first case of
/// the block of cases during which the peak last rose (`end` when it rose after the last case,
/// while the report was put together); and the most bytes held as each block's last outcome is
/// merged (what the campaign keeps, plus that one outcome) in the first and the second half.
fn child(cases: u64, jobs: usize) {
    let opts = CampaignOptions { cases, seed: 1, jobs, ..CampaignOptions::default() };
    let (mut top, mut set_at, mut held) = (0, 0, [0usize; 2]);
    let r = run_with(&opts, &mut |p| {
        let peak = ALLOCATOR.max_allocated();
        if peak > top {
            // A block's outcomes are merged in case order after the whole block ran, so the
            // peak rose while the block ran or while its outcomes were being merged.
            (top, set_at) = (peak, (p.done - 1) / BLOCK as u64 * BLOCK as u64);
        }
        if p.done % BLOCK as u64 == 0 || p.done == p.total {
            let half = usize::from(2 * p.done > p.total);
            held[half] = held[half].max(ALLOCATOR.allocated());
        }
    });
    assert_eq!(r.failures, 0, "the benchmark campaign must be clean");
    let peak = ALLOCATOR.max_allocated();
    let set_at = if peak > top { "end".to_string() } else { set_at.to_string() };
    println!("{peak} {set_at} {} {}", held[0], held[1]);
}

/// What a child reported of its campaign (bytes; the block that set the peak, by its first case).
struct Figures {
    peak: u64,
    set_at: String,
    held_first_half: u64,
    held_second_half: u64,
}

/// The figures of a campaign of `cases` on `jobs`, run by a child process.
fn measure(cases: u64, jobs: usize) -> Result<Figures, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let out = Command::new(exe)
        .args(["--child", &cases.to_string(), &jobs.to_string()])
        .output()
        .map_err(|e| format!("start: {e}"))?;
    if !out.status.success() {
        return Err(format!("child failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr)));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<&str> = text.split_whitespace().collect();
    let num = |k: usize| fields.get(k).and_then(|f| f.parse::<u64>().ok());
    match (fields.len(), num(0), fields.get(1), num(2), num(3)) {
        (4, Some(peak), Some(set_at), Some(held_first_half), Some(held_second_half)) => {
            Ok(Figures { peak, set_at: set_at.to_string(), held_first_half, held_second_half })
        }
        _ => Err(format!("child printed {text:?}, not its four figures")),
    }
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let num = |k: usize| args.get(i + k).and_then(|a| a.parse().ok()).ok_or("--child CASES JOBS");
        child(num(1)?, num(2)? as usize);
        return Ok(());
    }
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let (short, long) = (env("SHORT", 10_000), env("LONG", 100_000));
    let kib = |b: u64| b as f64 / 1024.0;
    println!(
        "peak live heap of the default campaign (seed 1), the block of {BLOCK} cases (by its first case) that set it,"
    );
    println!("and the most heap held at the end of a block, in the first / the second half of the run");
    for jobs in [1, 2] {
        let (s, l) = (measure(short, jobs)?, measure(long, jobs)?);
        for (cases, f) in [(short, &s), (long, &l)] {
            println!(
                "jobs {jobs}: {cases:>7} cases  peak {:>7.1} KiB (set in the block from case {:>6})  held {:>6.1} / {:>6.1} KiB",
                kib(f.peak),
                f.set_at,
                kib(f.held_first_half),
                kib(f.held_second_half)
            );
        }
        println!("jobs {jobs}: peak long/short {:.3}", l.peak as f64 / s.peak as f64);
    }
    Ok(())
}
