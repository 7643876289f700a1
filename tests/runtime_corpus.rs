//! Real programs run on the reference runtime and match what ExecuTorch (or eager PyTorch, for
//! the demo-backend files the pip runtime cannot run) recorded, via the same code as
//! `ptecheck run --expect`.

use ptecheck::backends::default_runtime;
use ptecheck::format;
use ptecheck::oracle::replay::run_expect;
use ptecheck::runtime::{Session, Trace, check_all_methods};

fn read(name: &str, ext: &str) -> Vec<u8> {
    std::fs::read(format!("{}/corpus/real/{name}.{ext}", env!("CARGO_MANIFEST_DIR"))).expect("corpus file")
}

fn expect(name: &str) -> (Vec<ptecheck::oracle::replay::RunOutcome>, Trace) {
    let data = read(name, "pte");
    let loaded = format::load(&data).expect("loads");
    let io: serde_json::Value = serde_json::from_slice(&read(name, "io.json")).expect("io json");
    let rt = default_runtime();
    let session = Session::new(&loaded, &rt);
    let outcomes = run_expect(&session, &io).expect("well-formed io.json");
    (outcomes, session.trace().clone())
}

/// Every corpus program the reference runtime runs, with the largest ulp gap to its recording
/// that we claim (and the tolerance the comparison allows).
const RUNNABLE: [(&str, u64, u64); 10] = [
    ("cpu_add_mul", 0, 0),
    ("cpu_linear_relu", 0, 4),
    ("multi_method_cpu_shared_weights", 0, 4),
    ("cond_cpu", 0, 4),
    ("map_cpu", 0, 0),
    ("cpu_dynamic_batch", 0, 4),
    ("cpu_int_bool_dtypes", 0, 0),
    ("legacy_et021_inline_constants", 0, 4),
    ("demo_backend_whole_module", 0, 4),
    ("demo_repeated_call_3x", 0, 4),
];

#[test]
fn every_runnable_corpus_program_matches_its_recording_with_the_claimed_gap() {
    for (name, gap, tolerance) in RUNNABLE {
        let (outcomes, trace) = expect(name);
        assert!(!outcomes.is_empty(), "{name}: no runs");
        for o in &outcomes {
            assert!(o.ok, "{name} {} run {}: {:?} (max {:?} ulp)", o.method, o.run, o.detail, o.max_ulps);
            assert_eq!(o.tolerance_ulps, tolerance, "{name} {} run {}", o.method, o.run);
        }
        let largest = outcomes.iter().filter_map(|o| o.max_ulps).max();
        assert_eq!(largest, Some(gap), "{name}: largest gap");
        let s = trace.summary();
        assert_eq!(s.inits, s.destroys, "{name}: every handle destroyed");
        assert!(s.bad_destroys.is_empty(), "{name}");
    }
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
fn xnnpack_programs_load_pass_check_and_report_backend_not_available() {
    for name in [
        "xnn_single_partition",
        "xnn_two_partitions_graph_break",
        "xnn_repeated_call_3x",
        "xnn_lowered_in_map_loop",
        "xnn_identical_blobs_dedup",
        "xnn_delegate_inline",
        "xnn_dynamic_batch",
    ] {
        let data = read(name, "pte");
        let loaded = format::load(&data).expect("loads");
        assert_eq!(check_all_methods(&loaded), vec![], "{name}");
        let (outcomes, trace) = expect(name);
        assert!(outcomes.iter().all(|o| !o.ok && o.backend_unavailable), "{name}: {outcomes:?}");
        assert_eq!(trace.summary().inits, 0, "{name}");
    }
}
