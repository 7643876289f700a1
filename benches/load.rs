//! Load+verify benchmark (`cargo bench --bench load`): time per corpus file of `format::load`
//! plus every init-time check of every method (`check_all_methods`); when `PTECHECK_ET_PYTHON`
//! names a Python with the executorch package, in the same run, taking turns `ROUNDS` times
//! (default 3), best time per file on each side, with ratios: ExecuTorch's C++ `Program::load`
//! alone (InternalConsistency; benches/et_program_load.cpp, built with `CXX` against the
//! package's headers and `libexecutorch.so`), the same through its pybindings and its Python
//! reader (benches/et_loader.py), and what one call through the pybindings costs by itself.
//! Then the loader's one-pass FlatBuffers reader against the flatbuffers crate's verifier and
//! accessors (`format::oracle`), verify + decode only, on the same files. Then a program with one 30 MB segment against the same program with
//! a 30 KB segment: loading borrows segment bytes, so the ratio should stay near 1.

#![forbid(unsafe_code)]

use ptecheck::format::{self, WriteOptions};
use ptecheck::program::*;
use ptecheck::runtime::check_all_methods;
use std::hint::black_box;

/// The allocator the `ptecheck` binary uses.
#[global_allocator]
static ALLOCATOR: ptecheck::allocator::Chosen = ptecheck::allocator::Chosen;
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

/// ExecuTorch's C++ `Program::load` alone, per file (`direct`, `direct_minimal`): the timer of
/// benches/et_program_load.cpp, built once against the headers and `libexecutorch.so` of the
/// executorch package that `PTECHECK_ET_PYTHON` has (with `CXX`, default `c++`), then run.
fn et_direct_times(files: &[std::path::PathBuf]) -> Option<serde_json::Map<String, serde_json::Value>> {
    static TIMER: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let timer = TIMER.get_or_init(|| {
        let python = std::env::var_os("PTECHECK_ET_PYTHON")?;
        let ask = |code: &str| {
            let o = std::process::Command::new(&python).args(["-c", code]).output().ok()?;
            o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        let et = ask("import executorch; print(list(executorch.__path__)[0])")?;
        let torch = ask("import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'include'))")?;
        let exe = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("et_program_load");
        let out = std::process::Command::new(std::env::var("CXX").unwrap_or_else(|_| "c++".into()))
            .args(["-O2", "-std=c++17"])
            .arg(format!("-I{et}/include"))
            .arg(format!("-I{et}/include/executorch/runtime/core/portable_type/c10"))
            .args(["-idirafter", &torch])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/benches/et_program_load.cpp"))
            .arg(format!("-L{et}/lib"))
            .arg("-lexecutorch")
            .arg(format!("-Wl,-rpath,{et}/lib"))
            .arg("-o")
            .arg(&exe)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(exe),
            Ok(o) => {
                eprintln!("cannot build the Program::load timer: {}", String::from_utf8_lossy(&o.stderr));
                None
            }
            Err(e) => {
                eprintln!("cannot build the Program::load timer (CXX): {e}");
                None
            }
        }
    });
    let out = std::process::Command::new(timer.as_ref()?).args(files).output().ok()?;
    if !out.status.success() {
        eprintln!("the Program::load timer failed: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
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
        let mut run = et_times(&files);
        // The C++ timer's figures join the Python script's, file by file.
        if let (Some(run), Some(direct)) = (run.as_mut(), et_direct_times(&files)) {
            for (file, times) in direct {
                if let (Some(entry), Some(times)) =
                    (run.get_mut(&file).and_then(|e| e.as_object_mut()), times.as_object())
                {
                    entry.extend(times.clone());
                }
            }
        }
        if let Some(run) = run {
            let best = et.get_or_insert_with(|| run.clone());
            for (file, times) in run {
                for side in ["direct", "direct_minimal", "cpp", "cpp_minimal", "python"] {
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
        "{:34} {:>7} {:>9} {:>11} {:>13} {:>13} {:>12} {:>13}",
        "corpus file",
        "bytes",
        "ours µs",
        "ET load µs",
        "ET pybind µs",
        "ET Python µs",
        "ours/ET load",
        "ours/ET pybind"
    );
    // Sums over the files both sides time (ExecuTorch 1.5.1 rejects the legacy ET 0.2.1 file).
    let (mut ours_sum, mut ours_both, mut cpp_sum, mut py_sum, mut n_et) = (0.0, 0.0, 0.0, 0.0, 0usize);
    let (mut minimal_sum, mut direct_sum, mut direct_minimal_sum, mut n_direct, mut ours_direct) =
        (0.0, 0.0, 0.0, 0usize, 0.0);
    for (k, p) in files.iter().enumerate() {
        let ours = ours_best[k];
        ours_sum += ours;
        let theirs = et.as_ref().and_then(|m| m.get(&p.display().to_string()));
        let cell = |k: &str| theirs.and_then(|v| v[k].as_f64());
        if let (Some(cpp), Some(py)) = (cell("cpp"), cell("python")) {
            ours_both += ours;
            cpp_sum += cpp;
            py_sum += py;
            minimal_sum += cell("cpp_minimal").unwrap_or(f64::NAN);
            n_et += 1;
        }
        if let (Some(d), Some(dm)) = (cell("direct"), cell("direct_minimal")) {
            direct_sum += d;
            direct_minimal_sum += dm;
            ours_direct += ours;
            n_direct += 1;
        }
        let time = |k: &str, digits: usize| {
            cell(k).map_or_else(
                || if theirs.is_some() { "rejects".into() } else { "-".into() },
                |v| format!("{v:.digits$}"),
            )
        };
        println!(
            "{:34} {:>7} {:>9.2} {:>11} {:>13} {:>13} {:>12} {:>13}",
            p.file_stem().unwrap_or_default().to_string_lossy(),
            data[k].len(),
            ours,
            time("direct", 2),
            time("cpp", 2),
            time("python", 0),
            cell("direct").map_or("-".into(), |v| format!("{:.2}x", ours / v)),
            cell("cpp").map_or("-".into(), |v| format!("{:.2}x", ours / v)),
        );
    }
    let n = files.len().max(1) as f64;
    println!("mean ours (load + init checks): {:.2} µs per file over {} files", ours_sum / n, files.len());
    if n_et > 0 {
        let m = n_et as f64;
        if n_direct > 0 {
            let d = n_direct as f64;
            println!(
                "over the {n_direct} files both load: ours {:.2} µs, ExecuTorch's C++ Program::load alone \
                 (InternalConsistency) {:.2} µs (Minimal verification {:.2} µs); ratio ours / Program::load: {:.2}x",
                ours_direct / d,
                direct_sum / d,
                direct_minimal_sum / d,
                ours_direct / direct_sum
            );
        } else {
            println!("(no C++ compiler or no executorch headers: ExecuTorch's Program::load alone was not timed)");
        }
        println!(
            "over the {n_et} files both load: ours {:.2} µs, ExecuTorch through its pybindings \
             (_load_program_from_buffer, InternalConsistency) {:.2} µs, Python reader {:.0} µs per file",
            ours_both / m,
            cpp_sum / m,
            py_sum / m
        );
        println!(
            "ratio ours / ExecuTorch through its pybindings: {:.2}x; ours / ExecuTorch Python: {:.4}x",
            ours_both / cpp_sum,
            ours_both / py_sum
        );
        // What the ExecuTorch figure holds besides the verifier: its time with Minimal
        // verification, and the cheapest call through the pybindings.
        let floor = et.as_ref().and_then(|m| m.get("pybind_call")).and_then(serde_json::Value::as_f64);
        println!(
            "ExecuTorch through its pybindings with Minimal verification: {:.2} µs per file (so its InternalConsistency \
             verifier costs {:.2} µs there); the cheapest pybindings call takes {} µs: the pybindings figures are \
             mostly the call itself (each redirects stdout and stderr), not Program::load",
            minimal_sum / m,
            (cpp_sum - minimal_sum) / m,
            floor.map_or("-".into(), |f| format!("{f:.2}"))
        );
    } else {
        println!("(set PTECHECK_ET_PYTHON to a Python with executorch to compare with ExecuTorch's loaders)");
    }
    // The two FlatBuffers readers alone (verify + decode to the owned model), side by side.
    let (mut one_pass, mut with_crate, mut verify_only) = (0.0, 0.0, 0.0);
    let mut verify_times = Vec::new();
    for d in &data {
        let time = |f: &dyn Fn()| measure(2000, 9, f).as_secs_f64() * 1e6;
        one_pass += time(&|| {
            black_box(format::oracle::one_pass(black_box(d)));
        });
        let verify = time(&|| {
            black_box(format::oracle::verify_only(black_box(d)));
        });
        verify_only += verify;
        verify_times.push(verify);
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
    // What a reader that decodes on demand (as ExecuTorch's Program::load does) would spend up
    // front: the verifier's rules alone.
    println!("the one-pass reader's verify-only pass: {:.2} µs per file", verify_only / n);
    // That floor against ExecuTorch's Program::load, over the files both load.
    let pairs: Vec<(f64, f64)> = files
        .iter()
        .zip(&verify_times)
        .filter_map(|(p, v)| Some((*v, et.as_ref()?.get(&p.display().to_string())?["direct"].as_f64()?)))
        .collect();
    if !pairs.is_empty() {
        let (ours, theirs) = pairs.iter().fold((0.0, 0.0), |(a, b), (v, d)| (a + v, b + d));
        println!(
            "verify-only pass / ExecuTorch's Program::load over the {} files both load: {:.2}x (what a reader \
             that decodes on demand would spend before any init check)",
            pairs.len(),
            ours / theirs
        );
    }
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
