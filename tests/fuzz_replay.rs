//! Replays every committed fuzz input (`corpus/<target>/**`) through the same library function
//! the fuzz target calls, under the same allocation guard (no growth beyond 4 times the loaded
//! file plus 1 MiB; 64 times for `runner_lines`, whose lines are read as JSON), and asserts each input's recorded outcome class
//! (`corpus/<target>/outcomes.txt`: rejected at load with its error kind, refused at init,
//! failed at execute, ran).
//!
//! The guard is a global allocator: this binary holds one test, so nothing else allocates while
//! a limit is set. `PTECHECK_WRITE_CORPUS=1 cargo test --test fuzz_replay` records the outcomes
//! of new inputs (review the diff).

#![forbid(unsafe_code)]

use ptecheck::oracle::fuzz::{self, Outcome};
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

/// Runs `load` under the guard sized from `file`.
fn guarded(file: &[u8]) -> Outcome {
    let _ = ALLOC.set_limit(ALLOC.allocated() + 4 * file.len() + (1 << 20));
    let outcome = fuzz::load_pte(file);
    let _ = ALLOC.set_limit(usize::MAX);
    outcome
}

/// One fuzz target's entry: the unguarded preparation half, then the guarded load.
fn replay(target: &str, data: &[u8]) -> Outcome {
    match target {
        "load_pte" => guarded(data),
        // Generation and the invariant check run outside the guard, as in the fuzz target.
        "structured" => guarded(&fuzz::structured_file(data)),
        "saved_json" => {
            let _ = ALLOC.set_limit(ALLOC.allocated() + 4 * data.len() + (1 << 20));
            let outcome = fuzz::saved_json(data);
            let _ = ALLOC.set_limit(usize::MAX);
            outcome
        }
        "mutate_real" => match fuzz::mutate_real_file(data) {
            Some(file) => guarded(&file),
            None => Outcome::NotAProgram,
        },
        "load_xnnpack" => {
            // The shared named data is built once, outside the guard (as in the fuzz target).
            fuzz::load_xnnpack(&[]);
            let _ = ALLOC.set_limit(ALLOC.allocated() + 4 * data.len() + (1 << 20));
            let outcome = fuzz::load_xnnpack(data);
            let _ = ALLOC.set_limit(usize::MAX);
            outcome
        }
        "load_ptd" => {
            let _ = ALLOC.set_limit(ALLOC.allocated() + 4 * data.len() + (1 << 20));
            let outcome = fuzz::load_ptd(data);
            let _ = ALLOC.set_limit(usize::MAX);
            outcome
        }
        // A line read as JSON holds its parsed document beside it: the target's guard is wider.
        "runner_lines" => {
            let _ = ALLOC.set_limit(ALLOC.allocated() + 64 * data.len() + (1 << 20));
            let outcome = fuzz::runner_lines(data);
            let _ = ALLOC.set_limit(usize::MAX);
            outcome
        }
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
        let recorded: BTreeMap<String, String> = std::fs::read_to_string(&record)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once('\t').map(|(a, b)| (a.to_string(), b.to_string())))
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
            let text: String = got.iter().map(|(k, v)| format!("{k}\t{v}\n")).collect();
            std::fs::write(&record, text).expect("write outcomes");
            continue;
        }
        for (input, class) in &got {
            let want = recorded
                .get(input)
                .unwrap_or_else(|| panic!("{target}/{input}: no recorded outcome (PTECHECK_WRITE_CORPUS=1)"));
            assert_eq!(class, want, "{target}/{input}");
        }
        assert_eq!(got.len(), recorded.len(), "{target}: outcomes.txt lists inputs that are gone");
    }
}
