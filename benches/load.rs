//! Load+verify benchmark (`cargo bench --bench load`): time per corpus file of `format::load`
//! plus every init-time check of every method (`check_all_methods`); when `PTECHECK_ET_PYTHON`
//! names a Python with the executorch package, ExecuTorch's C++ `Program::load`
//! (InternalConsistency) and its Python reader on the same files in the same run, taking turns
//! `ROUNDS` times (default 3), best time per file on each side, with ratios (benches/et_loader.py).
//! Then the loader's one-pass FlatBuffers reader against the flatbuffers crate's verifier and
//! accessors (`format::oracle`), verify + decode only, on the same files. Then a program with one 30 MB segment against the same program with
//! a 30 KB segment: loading borrows segment bytes, so the ratio should stay near 1.

use ptecheck::format::{self, WriteOptions};
use ptecheck::program::*;
use ptecheck::runtime::check_all_methods;
use std::hint::black_box;

/// The allocator the `ptecheck` binary uses.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::time::{Duration, Instant};

/// Median time of one `f()` call over `rounds` rounds of `iters` calls each.
fn measure(iters: u32, rounds: usize, mut f: impl FnMut()) -> Duration {
    let mut samples: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed() / iters
        })
        .collect();
    samples.sort();
    samples[rounds / 2]
}

fn with_segment(size: usize) -> Vec<u8> {
    let data = vec![0xabu8; size];
    let program = Program {
        execution_plan: Some(vec![ExecutionPlan {
            name: Some("forward".into()),
            values: Some(vec![EValue::Int(0)]),
            inputs: Some(vec![]),
            outputs: Some(vec![0]),
            chains: Some(vec![Chain { instructions: Some(vec![]), ..Chain::default() }]),
            operators: Some(vec![]),
            delegates: Some(vec![BackendDelegate {
                id: Some("demo".into()),
                processed: Some(BackendDelegateDataReference { location: DataLocation::SEGMENT, index: 1 }),
                compile_specs: Some(vec![]),
            }]),
            non_const_buffer_sizes: Some(vec![0]),
            ..ExecutionPlan::default()
        }]),
        constant_buffer: Some(vec![]),
        backend_delegate_data: Some(vec![]),
        segments: Some(format::layout_segments(&[(0, 1), (size as u64, 1)], 128)),
        constant_segment: Some(SubsegmentOffsets { segment_index: 0, offsets: Some(vec![0]) }),
        ..Program::default()
    };
    format::write(&program, &[&[], &data], &WriteOptions::default()).expect("writes")
}

/// ExecuTorch's loader times per file, from benches/et_loader.py under `PTECHECK_ET_PYTHON`.
fn et_times(files: &[std::path::PathBuf]) -> Option<serde_json::Map<String, serde_json::Value>> {
    let python = std::env::var_os("PTECHECK_ET_PYTHON")?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/et_loader.py");
    let out = std::process::Command::new(python).arg(script).args(files).output();
    match out {
        Ok(o) if o.status.success() => serde_json::from_slice(&o.stdout).ok(),
        Ok(o) => {
            eprintln!("et_loader.py failed: {}", String::from_utf8_lossy(&o.stderr));
            None
        }
        Err(e) => {
            eprintln!("cannot run PTECHECK_ET_PYTHON: {e}");
            None
        }
    }
}

fn main() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/real");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("corpus")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pte"))
        .collect();
    files.sort();
    // Ours and ExecuTorch's take turns, ROUNDS times (default 3), and each keeps its best time
    // per file: both sides see the same machine, and a slow moment on either side is dropped.
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(3);
    let data: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).expect("read")).collect();
    let mut ours_best = vec![f64::INFINITY; files.len()];
    let mut et: Option<serde_json::Map<String, serde_json::Value>> = None;
    for _ in 0..rounds.max(1) {
        if let Some(run) = et_times(&files) {
            let best = et.get_or_insert_with(|| run.clone());
            for (file, times) in run {
                for side in ["cpp", "python"] {
                    let (Some(new), Some(entry)) = (times[side].as_f64(), best.get_mut(&file)) else { continue };
                    if entry[side].as_f64().is_none_or(|old| new < old) {
                        entry[side] = new.into();
                    }
                }
            }
        }
        for (k, d) in data.iter().enumerate() {
            let t = measure(2000, 9, || {
                let loaded = format::load(black_box(d)).expect("loads");
                black_box(check_all_methods(&loaded));
            });
            ours_best[k] = ours_best[k].min(t.as_secs_f64() * 1e6);
        }
    }
    println!(
        "{:34} {:>7} {:>12} {:>12} {:>12} {:>9}",
        "corpus file", "bytes", "ours µs", "ET C++ µs", "ET Python µs", "ours/C++"
    );
    // Sums over the files both sides time (ExecuTorch 1.5.1 rejects the legacy ET 0.2.1 file).
    let (mut ours_sum, mut ours_both, mut cpp_sum, mut py_sum, mut n_et) = (0.0, 0.0, 0.0, 0.0, 0usize);
    for (k, p) in files.iter().enumerate() {
        let ours = ours_best[k];
        ours_sum += ours;
        let theirs = et.as_ref().and_then(|m| m.get(&p.display().to_string()));
        let cell = |k: &str| theirs.and_then(|v| v[k].as_f64());
        if let (Some(cpp), Some(py)) = (cell("cpp"), cell("python")) {
            ours_both += ours;
            cpp_sum += cpp;
            py_sum += py;
            n_et += 1;
        }
        println!(
            "{:34} {:>7} {:>12.2} {:>12} {:>12} {:>9}",
            p.file_stem().unwrap_or_default().to_string_lossy(),
            data[k].len(),
            ours,
            cell("cpp")
                .map_or_else(|| if theirs.is_some() { "rejects".into() } else { "-".into() }, |v| format!("{v:.2}")),
            cell("python").map_or("-".into(), |v| format!("{v:.0}")),
            cell("cpp").map_or("-".into(), |v| format!("{:.2}x", ours / v)),
        );
    }
    let n = files.len().max(1) as f64;
    println!("mean ours (load + init checks): {:.2} µs per file over {} files", ours_sum / n, files.len());
    if n_et > 0 {
        let m = n_et as f64;
        println!(
            "over the {n_et} files both load: ours {:.2} µs, ExecuTorch C++ Program::load (InternalConsistency) {:.2} µs, \
             Python reader {:.0} µs per file",
            ours_both / m,
            cpp_sum / m,
            py_sum / m
        );
        println!(
            "ratio ours / ExecuTorch C++: {:.2}x; ours / ExecuTorch Python: {:.4}x",
            ours_both / cpp_sum,
            ours_both / py_sum
        );
    } else {
        println!("(set PTECHECK_ET_PYTHON to a Python with executorch to compare with ExecuTorch's loaders)");
    }
    // The two FlatBuffers readers alone (verify + decode to the owned model), side by side.
    let (mut one_pass, mut with_crate) = (0.0, 0.0);
    for d in &data {
        let time = |f: &dyn Fn()| measure(2000, 9, f).as_secs_f64() * 1e6;
        one_pass += time(&|| {
            black_box(format::oracle::one_pass(black_box(d)));
        });
        with_crate += time(&|| {
            black_box(format::oracle::with_crate(black_box(d)));
        });
    }
    println!(
        "\nverify + decode only, mean over {} files: one-pass reader {:.2} µs, flatbuffers crate's verifier + \
         accessors {:.2} µs, ratio {:.2}x",
        data.len(),
        one_pass / n,
        with_crate / n,
        one_pass / with_crate
    );
    let small = with_segment(30 * 1024);
    let large = with_segment(30 * 1024 * 1024);
    let ts = measure(2000, 15, || {
        black_box(format::load(black_box(&small)).expect("loads"));
    });
    let tl = measure(2000, 15, || {
        black_box(format::load(black_box(&large)).expect("loads"));
    });
    println!("\nsegment size   file bytes  load+verify");
    println!("30 KB     {:>15} {:>10.2}µs", small.len(), ts.as_secs_f64() * 1e6);
    println!("30 MB     {:>15} {:>10.2}µs", large.len(), tl.as_secs_f64() * 1e6);
    println!(
        "ratio 30 MB / 30 KB: {:.2}x (segment bytes are borrowed, never copied or scanned)",
        tl.as_secs_f64() / ts.as_secs_f64()
    );
}
