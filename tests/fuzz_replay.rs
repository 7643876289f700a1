//! Replays every committed fuzz input (`corpus/<target>/**`) through the same library function
//! the fuzz target calls, under the same allocation guard (no growth beyond 4 times the loaded
//! file plus 1 MiB; 64 times for `runner_lines`, whose lines are read as JSON), and asserts each input's recorded outcome class
//! (`corpus/<target>/outcomes.txt`: rejected at load with its error kind, refused at init,
//! failed at execute, ran). A seed (an input outside `crashes/`, `edge/` and `regressions/`,
//! which are there to be refused) that does not run is marked meant to be refused, with why, in
//! a third column; an unmarked one fails the test, so a seed that rots is seen.
//!
//! The guard is a global allocator: this binary holds one test, so nothing else allocates while
//! a limit is set. `PTECHECK_WRITE_CORPUS=1 cargo test --test fuzz_replay` records the outcomes
//! of new inputs (review the diff).

#![forbid(unsafe_code)]

use ptecheck::campaign::fuzz::{self, Outcome};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[global_allocator]
static ALLOC: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| !n.to_string_lossy().starts_with('.') && n != "README.md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Inputs kept to be refused: what a fuzzer once failed on, hand-made malformed edges, crafted
/// regressions.
fn meant_to_be_refused(input: &str) -> bool {
    ["crashes/", "edge/", "regressions/"].iter().any(|d| input.starts_with(d))
}

/// Runs `entry` on `data` under the guard: no growth beyond `factor` times the input plus 1 MiB.
fn under_guard(factor: usize, data: &[u8], entry: fn(&[u8]) -> Outcome) -> Outcome {
    let _ = ALLOC.set_limit(ALLOC.allocated() + factor * data.len() + (1 << 20));
    let outcome = entry(data);
    let _ = ALLOC.set_limit(usize::MAX);
    outcome
}

/// `load_pte` of `file` under the guard sized from it.
fn guarded(file: &[u8]) -> Outcome {
    under_guard(4, file, fuzz::load_pte)
}

/// One fuzz target's entry: the unguarded preparation half, then the guarded load.
fn replay(target: &str, data: &[u8]) -> Outcome {
    match target {
        "load_pte" => guarded(data),
        // Generation and the invariant check run outside the guard, as in the fuzz target.
        "structured" => guarded(&fuzz::structured_file(data)),
        "saved_json" => under_guard(4, data, fuzz::saved_json),
        "mutate_real" => match fuzz::mutate_real_file(data) {
            Some(file) => guarded(&file),
            None => Outcome::NotAProgram,
        },
        "load_xnnpack" => {
            // The shared named data is built once, outside the guard (as in the fuzz target).
            fuzz::load_xnnpack(&[]);
            under_guard(4, data, fuzz::load_xnnpack)
        }
        "load_ptd" => under_guard(4, data, fuzz::load_ptd),
        // A line read as JSON holds its parsed document beside it: the target's guard is wider.
        "runner_lines" => under_guard(64, data, fuzz::runner_lines),
        other => panic!("unknown target {other}"),
    }
}

#[test]
fn every_committed_fuzz_input_replays_to_its_recorded_outcome_under_the_allocation_guard() {
    let write = std::env::var("PTECHECK_WRITE_CORPUS").is_ok();
    for target in ["load_pte", "structured", "saved_json", "mutate_real", "load_xnnpack", "load_ptd", "runner_lines"] {
        let dir = corpus().join(target);
        let inputs: Vec<PathBuf> = files(&dir).into_iter().filter(|p| !p.ends_with("outcomes.txt")).collect();
        assert!(!inputs.is_empty(), "corpus/{target} has no inputs");
        let record = dir.join("outcomes.txt");
        // input -> (class, why it is meant to be refused)
        let recorded: BTreeMap<String, (String, String)> = std::fs::read_to_string(&record)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let mut cols = l.splitn(3, '\t');
                let (input, class) = (cols.next()?, cols.next()?);
                Some((input.to_string(), (class.to_string(), cols.next().unwrap_or("").to_string())))
            })
            .collect();
        let mut got = BTreeMap::new();
        for path in &inputs {
            let data = std::fs::read(path).expect("read");
            let rel = path.strip_prefix(&dir).expect("under dir").to_string_lossy().to_string();
            let outcome = std::panic::catch_unwind(|| replay(target, &data));
            let _ = ALLOC.set_limit(usize::MAX);
            let class = match outcome {
                Ok(o) => o.class(),
                Err(_) => panic!("{target}: {} crashed", path.display()),
            };
            got.insert(rel, class);
        }
        if write {
            // A reason already given is kept.
            let line = |k: &String, v: &String| match recorded.get(k).map(|(_, why)| why.as_str()) {
                Some(why) if !why.is_empty() => format!("{k}\t{v}\t{why}\n"),
                _ => format!("{k}\t{v}\n"),
            };
            let text: String = got.iter().map(|(k, v)| line(k, v)).collect();
            std::fs::write(&record, text).expect("write outcomes");
            continue;
        }
        for (input, class) in &got {
            let (want, why) = recorded
                .get(input)
                .unwrap_or_else(|| panic!("{target}/{input}: no recorded outcome (PTECHECK_WRITE_CORPUS=1)"));
            assert_eq!(class, want, "{target}/{input}");
            assert!(
                class == "ran" || !why.is_empty() || meant_to_be_refused(input),
                "{target}/{input}: a seed that replays as `{class}`, below `ran`: re-make it, or mark it \
                 meant to be refused with why (a third column in outcomes.txt)"
            );
        }
        assert_eq!(got.len(), recorded.len(), "{target}: outcomes.txt lists inputs that are gone");
    }
}
