//! Peak live heap of the default campaign at two lengths (`cargo bench --bench peak_heap`):
//! the most bytes allocated and not yet freed at any moment, counted by a `cap` wrapper around
//! the binary's allocator, for a SHORT- and a LONG-case campaign (defaults 10,000 and 100,000;
//! seed 1) on 1 and on 2 jobs. Each campaign runs in a child process of its own, so each peak
//! is that campaign's alone. Unlike peak RSS (`benches/peak_rss.sh`), it does not move with
//! where the allocator placed pages or which code pages a run touched: with one job it is the
//! same from run to run.

#[global_allocator]
static ALLOCATOR: cap::Cap<mimalloc::MiMalloc> = cap::Cap::new(mimalloc::MiMalloc, usize::MAX);

use ptecheck::oracle::campaign::{CampaignOptions, run};
use std::process::Command;

/// Runs one campaign in this process and prints its peak live heap in bytes.
fn child(cases: u64, jobs: usize) {
    let r = run(&CampaignOptions { cases, seed: 1, jobs, ..CampaignOptions::default() });
    assert_eq!(r.failures, 0, "the benchmark campaign must be clean");
    println!("{}", ALLOCATOR.max_allocated());
}

/// The peak live heap of a campaign of `cases` on `jobs`, run by a child process.
fn peak(cases: u64, jobs: usize) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let out = Command::new(exe)
        .args(["--child", &cases.to_string(), &jobs.to_string()])
        .output()
        .map_err(|e| format!("start: {e}"))?;
    if !out.status.success() {
        return Err(format!("child failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr)));
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().map_err(|e| format!("child printed no peak: {e}"))
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
    println!("peak live heap of the default campaign (seed 1)");
    for jobs in [1, 2] {
        let (s, l) = (peak(short, jobs)?, peak(long, jobs)?);
        println!(
            "jobs {jobs}: {short:>7} cases {:>8.1} KiB   {long:>7} cases {:>8.1} KiB   long/short {:.3}",
            kib(s),
            kib(l),
            l as f64 / s as f64
        );
    }
    Ok(())
}
