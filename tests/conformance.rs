//! The conformance corpus (`ptecheck gen`): every case folder holds both emissions, the saved
//! program and an io.json with tolerances, and replays against our runtime with no failure.

#![forbid(unsafe_code)]

use ptecheck::campaign::CampaignOptions;
use ptecheck::campaign::conformance::generate_corpus;
use ptecheck::campaign::replay::run_expect;
use ptecheck::runtime::Session;

#[test]
fn every_generated_case_replays_against_our_runtime() {
    let tmp = tempfile::Builder::new().prefix("ptecheck-gen-").tempdir().expect("temporary directory");
    let out = tmp.path().join("corpus");
    let opts = CampaignOptions { cases: 40, seed: 7, ..CampaignOptions::default() };
    let s = generate_corpus(&opts, &out, &mut |_| {}).expect("writes");
    assert_eq!(s.cases, 40);
    assert!(s.methods >= 40 && s.exact_outputs > 0);
    let rt = ptecheck::backends::default_runtime();
    let mut runs = 0;
    for case in std::fs::read_dir(&out).expect("dir").flatten() {
        let dir = case.path();
        let io: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("io.json")).expect("io")).expect("json");
        assert!(ptecheck::ir::saved::load(&std::fs::read_to_string(dir.join("program.json")).expect("p")).is_ok());
        for pte in ["shared.pte", "unshared.pte"] {
            let bytes = std::fs::read(dir.join(pte)).expect("pte");
            let loaded = ptecheck::format::load(&bytes).expect("loads");
            let outcomes = run_expect(&Session::new(&loaded, &rt), &io).expect("well-formed io.json");
            assert!(!outcomes.is_empty());
            for o in outcomes {
                assert!(o.ok && o.verdict.is_some(), "{} {pte}: {o:?}", dir.display());
                runs += 1;
            }
        }
    }
    assert!(runs >= 80);
    // The command line does the same.
    let bin = env!("CARGO_BIN_EXE_ptecheck");
    let first = std::fs::read_dir(&out).expect("dir").flatten().next().expect("a case").path();
    let status = std::process::Command::new(bin)
        .args([
            "run",
            &first.join("shared.pte").display().to_string(),
            "--expect",
            &first.join("io.json").display().to_string(),
        ])
        .output()
        .expect("runs");
    assert_eq!(status.status.code(), Some(0), "{}", String::from_utf8_lossy(&status.stdout));
}

#[test]
fn a_recorded_tolerance_is_enforced() {
    // A bounded output outside its bound is a mismatch; inside it, "within bound".
    use ptecheck::ir::bound::Bound;
    use ptecheck::oracle::values::{Verdict, compare};
    use ptecheck::runtime::{HostTensor, HostValue};
    let t = |v: &[f32]| HostValue::Tensor(HostTensor::f32(vec![v.len()], v));
    let b = Bound::Abs(vec![0.5, 0.0]);
    assert_eq!(compare(&t(&[1.0, 2.0]), &b, &t(&[1.0, 2.0])), Verdict::Exact);
    assert_eq!(compare(&t(&[1.0, 2.0]), &b, &t(&[1.4, 2.0])), Verdict::WithinBound);
    assert_eq!(compare(&t(&[1.0, 2.0]), &b, &t(&[1.6, 2.0])), Verdict::Mismatch);
    assert_eq!(
        compare(&t(&[1.0, 2.0]), &b, &t(&[1.0, 2.0000002])),
        Verdict::Mismatch,
        "an exact element must be exact"
    );
    assert_eq!(
        compare(&t(&[1.0, 2.0]), &b, &t(&[f32::NAN, 2.0])),
        Verdict::Mismatch,
        "NaN is not within a finite bound"
    );
    assert_eq!(compare(&t(&[1.0]), &Bound::Any, &t(&[9.0])), Verdict::WithinBound);
}

#[test]
fn a_replay_refuses_a_document_it_cannot_compare_faithfully() {
    use ptecheck::campaign::case_files::bound_from_json;
    use ptecheck::runtime::io::IoFault;
    use ptecheck::runtime::{ErrorCode, HostTensor, HostValue};
    use serde_json::json;
    let bytes = std::fs::read(format!("{}/corpus/real/cpu_add_mul.pte", env!("CARGO_MANIFEST_DIR"))).expect("read");
    let loaded = ptecheck::format::load(&bytes).expect("loads");
    let rt = ptecheck::backends::default_runtime();
    let session = Session::new(&loaded, &rt);
    let fault = |io: serde_json::Value| {
        let e = run_expect(&session, &io).expect_err("refused");
        (e.path, e.fault)
    };
    // Nothing recorded: refused, instead of passing having compared nothing.
    assert_eq!(fault(json!({"methods": {}})), ("$.methods".into(), IoFault::NoRuns));
    assert_eq!(fault(json!({"methods": {"forward": {"runs": []}}})), ("$.methods".into(), IoFault::NoRuns));
    // A skipped method with more input lists than output lists: no run is dropped unread.
    let x = json!({"kind": "tensor", "dtype": "float32", "shape": [2, 3], "values": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]});
    let skipped = json!({"methods": {"forward": {"status": "skipped",
        "inputs_that_would_be_used": [[x, x], [x, x]], "eager_torch_outputs": [[x]]}}});
    assert_eq!(fault(skipped), ("$.methods.forward".into(), IoFault::SkippedRuns { inputs: 2, outputs: 1 }));
    // A tolerance is read by its value, not by which key is present.
    assert!(bound_from_json(&json!({"any": true}), "$.t").is_ok());
    let any_false = bound_from_json(&json!({"any": false}), "$.t").expect_err("refused");
    assert_eq!((any_false.path.as_str(), any_false.fault), ("$.t.any", IoFault::Not("true")));
    assert!(bound_from_json(&json!({"exact": "yes"}), "$.t").is_err());
    // Inputs are exactly the method's: a third one is not dropped.
    let t = HostValue::Tensor(HostTensor::f32(vec![2, 3], &[1.0; 6]));
    assert!(session.run("forward", Some(&[t.clone(), t.clone()])).is_ok());
    let three = session.run("forward", Some(&[t.clone(), t.clone(), t])).expect_err("refused");
    assert_eq!(three.code(), ErrorCode::InvalidArgument, "{three}");
}
