//! Campaign throughput (`cargo bench --bench campaign`): programs checked per second on one
//! core with the default configuration, and the split of time across the stages.

use ptecheck::oracle::campaign::{CampaignOptions, run};

fn main() {
    let cases = std::env::var("CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(3000);
    let r = run(&CampaignOptions { cases, seed: 1, stop_on_failure: false, ..CampaignOptions::default() });
    assert_eq!(r.failures, 0, "the benchmark campaign must be clean");
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
    ];
    let total: f64 = stages.iter().map(|(_, d)| d.as_secs_f64()).sum();
    println!("{} cases in {:.2} s: {:.0} programs/s (one thread)", r.cases, r.elapsed_seconds, r.programs_per_second);
    for (name, d) in stages {
        println!("  {name:<8} {:>8.3} s  {:>5.1} %", d.as_secs_f64(), 100.0 * d.as_secs_f64() / total.max(1e-9));
    }
}
