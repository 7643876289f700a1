//! Real programs run on the reference runtime and match what ExecuTorch (or eager PyTorch, for
//! the demo-backend files the pip runtime cannot run) recorded, via the same code as
//! `ptecheck run --expect`. The XNNPACK files run on the reference XNNPACK interpreter and
//! match real XNNPACK's recorded outputs bit for bit.

#![forbid(unsafe_code)]

use ptecheck::backends::default_runtime;
use ptecheck::campaign::replay::{BoundSource, RunOutcome, run_expect, run_expect_scaled};
use ptecheck::format;
use ptecheck::runtime::{Session, Trace, check_all_methods};

fn read(name: &str, ext: &str) -> Vec<u8> {
    std::fs::read(format!("{}/corpus/real/{name}.{ext}", env!("CARGO_MANIFEST_DIR"))).expect("corpus file")
}

fn expect(name: &str) -> (Vec<RunOutcome>, Trace) {
    expect_scaled(name, 1.0)
}

/// Every recorded run of `name` replayed with its bounds multiplied by `scale`.
fn expect_scaled(name: &str, scale: f64) -> (Vec<RunOutcome>, Trace) {
    let data = read(name, "pte");
    let loaded = format::load(&data).expect("loads");
    let io: serde_json::Value = serde_json::from_slice(&read(name, "io.json")).expect("io json");
    let rt = default_runtime();
    let session = Session::new(&loaded, &rt);
    let outcomes = run_expect_scaled(&session, &io, scale).expect("well-formed io.json");
    (outcomes, session.trace().clone())
}

/// The largest gap over every run and output, as a fraction of its bound.
fn largest_ratio(outcomes: &[RunOutcome]) -> f64 {
    outcomes.iter().flat_map(|o| &o.gaps).flatten().map(|g| g.ratio).fold(0.0, f64::max)
}

/// Every program of `corpus/real` with the largest gap to its recording that we claim: in ulps,
/// and as thousandths of its bound. ExecuTorch recorded them all; none carries a tolerance, so
/// every bound is the program's. A subnormal result XNNPACK flushes to zero counts its whole
/// value: its gap is all of its bound (1,000) and a great many ulps.
const RUNNABLE: [(&str, u64, u32); 21] = [
    ("cpu_add_mul", 0, 0),
    ("cpu_linear_relu", 0, 0),
    ("multi_method_cpu_shared_weights", 0, 0),
    ("cond_cpu", 0, 0),
    ("map_cpu", 0, 0),
    ("cpu_dynamic_batch", 0, 0),
    ("cpu_int_bool_dtypes", 0, 0),
    ("legacy_et021_inline_constants", 0, 0),
    ("demo_backend_whole_module", 0, 0),
    ("demo_repeated_call_3x", 0, 0),
    ("xnn_single_partition", 0, 0),
    ("xnn_two_partitions_graph_break", 0, 0),
    ("xnn_repeated_call_3x", 0, 0),
    ("xnn_lowered_in_map_loop", 0, 0),
    ("xnn_identical_blobs_dedup", 0, 0),
    ("xnn_delegate_inline", 0, 0),
    ("xnn_dynamic_batch", 0, 0),
    ("xnn_fc_256_cancellation", 0, 0),
    ("xnn_transcendentals", 867941678, 1000),
    ("xnn_unary_exact", 1065353216, 1000),
    ("xnn_softmax_bmm", 2381297, 112),
];

#[test]
fn every_corpus_program_replays_within_the_bounds_its_instructions_give() {
    for (name, gap, thousandths) in RUNNABLE {
        let (outcomes, trace) = expect(name);
        assert!(!outcomes.is_empty(), "{name}: no runs");
        for o in &outcomes {
            assert!(o.ok, "{name} {} run {}: {:?} (max {:?} ulp)", o.method, o.run, o.detail, o.max_ulps);
            assert_eq!(o.bounds_from, Some(BoundSource::Program), "{name}: ExecuTorch recordings carry no bounds");
            // Every element bounded: none may be anything, so no gap hides in a blanket allowance.
            assert!(o.unbounded.is_empty(), "{name} {} run {}: {:?}", o.method, o.run, o.unbounded);
        }
        let largest = outcomes.iter().filter_map(|o| o.max_ulps).max();
        let ratio = largest_ratio(&outcomes);
        println!("{name}: largest gap {largest:?} ulp, {ratio:.3} of its bound");
        assert_eq!(largest, Some(gap), "{name}: largest gap");
        assert_eq!((ratio * 1000.0).round() as u32, thousandths, "{name}: {ratio} of its bound");
        let s = trace.summary();
        assert_eq!(s.inits, s.destroys, "{name}: every handle destroyed");
        assert!(s.bad_destroys.is_empty(), "{name}");
    }
}

/// The bounds are tight where a file uses them: halved, exactly the files whose gap uses more
/// than half of its bound fail, and the others still pass.
#[test]
fn halving_the_bounds_fails_exactly_the_files_that_use_more_than_half() {
    let mut sharp = Vec::new();
    for (name, ..) in RUNNABLE {
        let ratio = largest_ratio(&expect(name).0);
        let (halved, _) = expect_scaled(name, 0.5);
        let passes = halved.iter().all(|o| o.ok);
        println!("{name}: {ratio:.3} of its bound; halved: {}", if passes { "passes" } else { "fails" });
        assert_eq!(passes, ratio <= 0.5, "{name}: {ratio:.3} of its bound, halved passes = {passes}");
        if ratio > 0.5 {
            sharp.push(name);
        }
    }
    assert!(!sharp.is_empty(), "some file uses more than half of its bound");
}

#[test]
fn demo_repeated_call_initialises_three_handles_and_executes_each_once() {
    let (outcomes, trace) = expect("demo_repeated_call_3x");
    assert!(outcomes.iter().all(|o| o.ok && o.against == "eager_torch"));
    let s = trace.summary();
    assert_eq!((s.inits, s.executes, s.destroys, s.live_handles), (3, 3, 3, 0));
    assert_eq!(s.executes_per_site.len(), 3, "{:?}", s.executes_per_site);
}

#[test]
fn xnnpack_handles_per_file_one_init_per_delegate_one_execute_per_call() {
    // (file, inits, executes per run summed over the recorded runs)
    for (name, inits) in [
        ("xnn_single_partition", 1),
        ("xnn_two_partitions_graph_break", 2),
        ("xnn_repeated_call_3x", 3),
        ("xnn_lowered_in_map_loop", 1),
        ("xnn_identical_blobs_dedup", 2),
    ] {
        let data = read(name, "pte");
        let loaded = format::load(&data).expect("loads");
        assert_eq!(check_all_methods(&loaded), vec![], "{name}");
        let (outcomes, trace) = expect(name);
        assert!(outcomes.iter().all(|o| o.ok), "{name}: {outcomes:?}");
        let s = trace.summary();
        assert_eq!(s.inits, inits, "{name}: one init per BackendDelegate");
        assert_eq!((s.destroys, s.live_handles), (inits, 0), "{name}");
    }
    // The map body's delegate runs once per iteration (3 rows), per recorded run.
    let (outcomes, trace) = expect("xnn_lowered_in_map_loop");
    assert_eq!(trace.summary().executes, 3 * outcomes.len());
}

/// `xnn_repeated_call_3x` rewritten so its three call sites share delegate 0 (the other two
/// entries dropped): one handle, initialised once, executed three times per run, and the
/// recorded outputs still come out.
#[test]
fn xnnpack_one_handle_shared_by_three_call_sites() {
    let data = read("xnn_repeated_call_3x", "pte");
    let loaded = format::load(&data).expect("loads");
    let mut program = loaded.program.clone();
    let plan = &mut program.execution_plan.as_mut().expect("plans")[0];
    plan.delegates.as_mut().expect("delegates").truncate(1);
    for chain in plan.chains.iter_mut().flatten() {
        for ins in chain.instructions.iter_mut().flatten() {
            if let ptecheck::program::Instruction::DelegateCall(d) = ins {
                d.delegate_index = 0;
            }
        }
    }
    let bytes = format::write(&program, &loaded.segments, &format::WriteOptions::default()).expect("writes");
    let shared = format::load(&bytes).expect("rewritten file loads");
    assert_eq!(check_all_methods(&shared), vec![]);
    let io: serde_json::Value = serde_json::from_slice(&read("xnn_repeated_call_3x", "io.json")).expect("io");
    let rt = default_runtime();
    let session = Session::new(&shared, &rt);
    let outcomes = run_expect(&session, &io).expect("runs");
    assert!(outcomes.iter().all(|o| o.ok && o.max_ulps == Some(0)), "{outcomes:?}");
    let s = session.trace().summary();
    assert_eq!((s.inits, s.destroys), (1, 1), "one handle for three call sites");
    assert_eq!(s.executes, 3 * outcomes.len());
    assert_eq!(s.executes_per_site.len(), 3, "three call sites: {:?}", s.executes_per_site);
}

/// `run --expect` says, for each output of each run, that it is equal or its largest gap as a
/// fraction of its bound with the element, and where the bounds came from.
#[test]
fn each_output_of_each_run_is_reported_with_its_gap_and_bound() {
    let data = read("xnn_softmax_bmm", "pte");
    let loaded = format::load(&data).expect("loads");
    let io: serde_json::Value = serde_json::from_slice(&read("xnn_softmax_bmm", "io.json")).expect("io json");
    let rt = default_runtime();
    let session = Session::new(&loaded, &rt);
    let text = ptecheck::campaign::replay::replay(&session, &io, false).expect("replays").to_string();
    let first: Vec<&str> = text.lines().take(3).collect();
    assert_eq!(first[0], "forward run 0 vs runtime: within bound (bounds from the program)", "{text}");
    assert!(
        first[1].starts_with("  output 0: largest gap ") && first[1].contains(" at element 363, 0.112 of its bound "),
        "{text}"
    );
    assert_eq!(first[2], "  output 1: equal", "{text}");
}
