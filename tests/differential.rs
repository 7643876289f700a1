//! The real-runtime machinery, tested against `ptecheck runner` (our reference runtime behind
//! the runner protocol), so no Python is needed: the differential campaign agrees with a
//! correct runner, finds, shrinks and writes a planted numeric fault, the negative campaign
//! finds exactly a planted skipped check, and runners that crash, hang, reply garbage or never
//! say hello become typed outcomes while the campaign goes on.

#![forbid(unsafe_code)]

use ptecheck::campaign::CampaignOptions;
use ptecheck::campaign::diff_report::DiffReport;
use ptecheck::campaign::differential::{DiffOptions, run};
use ptecheck::runner::{Outcome, Reply, Request, Runner, RunnerConfig, StartError};
use std::path::PathBuf;
use std::time::Duration;

fn runner(extra: &str) -> RunnerConfig {
    let mut c = RunnerConfig::new(format!("{} runner {extra}", env!("CARGO_BIN_EXE_ptecheck")));
    c.request_timeout = Duration::from_secs(10);
    c
}

/// A fresh temporary directory, removed when dropped (also when a test fails).
fn tmp(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("ptecheck-diff-test-{tag}-")).tempdir().expect("temporary directory")
}

/// The report, and the folder holding its `out` directory (removed when dropped).
fn campaign(extra: &str, cases: u64, negative: bool, tag: &str) -> (DiffReport, tempfile::TempDir) {
    let temp = tmp(tag);
    let dir = temp.path();
    let opts = DiffOptions {
        campaign: CampaignOptions { cases, ..CampaignOptions::default() },
        runner: runner(extra),
        workdir: dir.join("work"),
        out: dir.join("out"),
        negative,
        shrink_budget: 60,
        max_reproducers: 2,
    };
    (run(&opts, &mut |_, _| {}).expect("runner starts"), temp)
}

#[test]
fn a_correct_runner_agrees_on_every_method_of_every_case() {
    let (r, _tmp) = campaign("", 60, false, "agree");
    assert_eq!(r.cases, 60);
    assert!(r.methods_run >= 120, "{r:?}");
    assert_eq!((r.exact, r.within_bound, r.mismatch), (r.methods_run, 0, 0), "{r:?}");
    assert!(r.refused.is_empty() && r.crashes + r.hangs + r.garbage == 0, "{r:?}");
}

#[test]
fn a_planted_numeric_fault_is_found_shrunk_and_written() {
    let (r, temp) = campaign("--fault sub_swaps_operands", 60, false, "numeric");
    let out = temp.path().join("out");
    assert!(r.mismatch > 0, "{r:?}");
    let first = r.mismatches[0].reproducer.clone().expect("a reproducer folder");
    assert!(first.starts_with(&out));
    for f in ["program.json", "shared.pte", "unshared.pte", "io.json", "reply.json", "replay.txt"] {
        assert!(first.join(f).is_file(), "{f} missing in {}", first.display());
    }
    let replay = std::fs::read_to_string(first.join("replay.txt")).expect("replay");
    assert!(
        replay.starts_with("ptecheck campaign --runner ")
            && replay.contains(&format!("--case {}", r.mismatches[0].case))
    );
    // The shrunk program still uses `sub` and is no bigger than the case it came from.
    let p =
        ptecheck::ir::saved::load(&std::fs::read_to_string(first.join("program.json")).expect("json")).expect("loads");
    let text = ptecheck::ir::pretty::program(&p);
    assert!(text.contains("Sub"), "{text}");
    let opts = CampaignOptions::default();
    let case = r.mismatches[0].case;
    let original = ptecheck::generator::generate(
        &ptecheck::campaign::case_config(&opts, case),
        &mut arbitrary::Unstructured::new(&ptecheck::campaign::case_input(opts.seed, case)),
        None,
    );
    let (shrunk, before) = (ptecheck::oracle::node_count(&p), ptecheck::oracle::node_count(&original.program));
    assert!(shrunk < before, "shrunk to {shrunk} nodes from {before}");
    // Replayed against our (correct) runtime, the recorded io.json holds.
    let pte = std::fs::read(first.join("shared.pte")).expect("pte");
    let loaded = ptecheck::format::load(&pte).expect("loads");
    let io: serde_json::Value =
        serde_json::from_slice(&std::fs::read(first.join("io.json")).expect("io")).expect("json");
    let rt = ptecheck::backends::default_runtime();
    let outcomes =
        ptecheck::campaign::replay::run_expect(&ptecheck::runtime::Session::new(&loaded, &rt), &io).expect("io");
    assert!(outcomes.iter().all(|o| o.ok), "{outcomes:?}");
}

#[test]
fn a_planted_skipped_check_is_found_as_exactly_its_class() {
    let (r, _tmp) = campaign("--fault delegate_index_at_execute_only", 40, true, "negative");
    let found: Vec<(String, String)> = r.findings.iter().map(|f| (f.class.clone(), f.outcome.clone())).collect();
    assert_eq!(found, vec![("delegate_index".to_string(), "rejects_at_execute".to_string())], "{r:?}");
    assert!(r.findings[0].reproducer.as_ref().is_some_and(|d| d.join("corrupted.pte").is_file()));
    assert_eq!(r.mismatch, 0);
    // Against a correct runner the same campaign finds nothing.
    let (clean, _clean_tmp) = campaign("", 40, true, "negative-clean");
    assert!(clean.findings.is_empty() && clean.corruptions_sent > 0, "{clean:?}");
}

#[test]
fn init_errors_with_other_codes_than_ours_are_found() {
    // A runner that reports every init failure as Internal (0x01): each corruption the reference
    // runtime refuses at init is a finding of its class, with both codes in its detail.
    let (r, _tmp) = campaign("--chaos init-code:1", 20, true, "negative-codes");
    assert!(!r.findings.is_empty(), "{r:?}");
    for f in &r.findings {
        assert_eq!(f.outcome, "rejects_with_another_code", "{f:?}");
        assert!(f.detail.contains("(0x01)") && f.detail.contains("ours: InvalidProgram"), "{f:?}");
    }
    assert!(r.findings.iter().any(|f| f.class == "value_index"), "{:?}", r.findings);
}

fn request(runner: &mut Runner, pte: &str) -> Request {
    let path = PathBuf::from(format!("{}/corpus/real/{pte}.pte", env!("CARGO_MANIFEST_DIR")));
    let x = ptecheck::runtime::HostValue::Tensor(ptecheck::runtime::HostTensor::f32(vec![2, 3], &[1.0; 6]));
    Request { id: runner.next_id(), pte: path, method: "forward".into(), inputs: vec![x.clone(), x], ptd: None }
}

fn classes(chaos: &str, n: usize, timeout: Duration) -> (Vec<&'static str>, u64) {
    let mut cfg = runner(&format!("--chaos {chaos}"));
    cfg.request_timeout = timeout;
    let mut r = Runner::start(cfg).expect("starts");
    let reqs: Vec<Request> = (0..n).map(|_| request(&mut r, "cpu_add_mul")).collect();
    let out = r.run(&reqs);
    (out.iter().map(Outcome::class).collect(), r.stats().starts)
}

#[test]
fn a_request_longer_than_the_protocol_allows_is_not_sent_and_the_runner_goes_on() {
    use ptecheck::runner::protocol::MAX_LINE;
    let mut r = Runner::start(runner("")).expect("starts");
    let first = request(&mut r, "cpu_add_mul");
    // Its program path alone makes the line longer than a runner reads.
    let mut long = request(&mut r, "cpu_add_mul");
    long.pte = PathBuf::from("p".repeat(MAX_LINE + 1));
    let last = request(&mut r, "cpu_add_mul");
    let out = r.run(&[first, long.clone(), last]);
    assert_eq!(out.iter().map(Outcome::class).collect::<Vec<_>>(), ["ok", "too_long", "ok"], "{:?}", out[1]);
    assert!(matches!(out[1], Outcome::TooLong { bytes } if bytes > MAX_LINE), "{:?}", out[1]);
    // Sent, it would have drawn an id-less refusal (garbage) and a restart.
    assert_eq!(r.stats().starts, 1);
    assert!(r.stats().ended.is_empty(), "{:?}", r.stats());
    // First and last, one request in flight at a time.
    let mut cfg = runner("");
    cfg.window = 1;
    let mut r = Runner::start(cfg).expect("starts");
    let reqs: Vec<Request> = (0..3).map(|_| request(&mut r, "cpu_add_mul")).collect();
    let [mut a, b, mut c] = <[Request; 3]>::try_from(reqs).expect("three");
    (a.pte, c.pte) = (long.pte.clone(), long.pte.clone());
    let out = r.run(&[a, b, c]);
    assert_eq!(out.iter().map(Outcome::class).collect::<Vec<_>>(), ["too_long", "ok", "too_long"]);
    assert_eq!(r.stats().starts, 1);
    // After a request that ends the runner, no runner is started for one that is not sent.
    let mut r = Runner::start(runner("--chaos crash-on:1")).expect("starts");
    let crash = request(&mut r, "cpu_add_mul");
    let mut too_long = request(&mut r, "cpu_add_mul");
    too_long.pte = long.pte.clone();
    let out = r.run(&[crash, too_long]);
    assert_eq!(out.iter().map(Outcome::class).collect::<Vec<_>>(), ["signalled", "too_long"]);
    assert_eq!(r.stats().starts, 1, "{:?}", r.stats());
}

#[test]
fn a_crash_is_recorded_against_its_request_and_the_runner_restarts() {
    let (c, starts) = classes("crash-on:2", 3, Duration::from_secs(10));
    // Request 2 kills the process (SIGABRT); request 3 goes to a new one, where it is the
    // first request.
    assert_eq!(c, vec!["ok", "signalled", "ok"]);
    assert_eq!(starts, 2);
}

#[test]
fn an_exit_is_recorded_with_its_status_and_a_runner_that_cannot_restart_is_no_runner() {
    let (c, starts) = classes("exit-on:2", 3, Duration::from_secs(10));
    assert_eq!(c, vec!["ok", "exited", "ok"]);
    assert_eq!(starts, 2);
    // Starts once, crashes on its first request, and every restart fails.
    let dir = tmp("no-restart");
    let dir = dir.path();
    let marker = dir.join("started");
    let cmd = format!(
        "if [ -e {m} ]; then exit 9; fi; touch {m}; exec {} runner --chaos crash-on:1",
        env!("CARGO_BIN_EXE_ptecheck"),
        m = marker.display()
    );
    let mut cfg = RunnerConfig::new(cmd);
    cfg.start_timeout = Duration::from_secs(10);
    let mut r = Runner::start(cfg).expect("starts");
    let reqs: Vec<Request> = (0..3).map(|_| request(&mut r, "cpu_add_mul")).collect();
    let c: Vec<&str> = r.run(&reqs).iter().map(Outcome::class).collect();
    assert_eq!(c, vec!["signalled", "no_runner", "no_runner"]);
}

#[test]
fn a_hang_is_cut_at_the_deadline_and_the_runner_restarts() {
    let (c, starts) = classes("hang-on:2", 3, Duration::from_millis(500));
    assert_eq!(c, vec!["ok", "hung", "ok"]);
    assert_eq!(starts, 2);
}

#[test]
fn a_hung_runner_is_killed_with_everything_its_shell_started() {
    // The shell starts a sleeper in the background, then the runner (not exec'd): killing only
    // the shell would leave both running.
    let dir = tmp("group");
    let dir = dir.path();
    let pidfile = dir.join("sleeper.pid");
    let cmd = format!(
        "sleep 600 & echo $! > {}; {} runner --chaos hang-on:1",
        pidfile.display(),
        env!("CARGO_BIN_EXE_ptecheck")
    );
    let mut cfg = RunnerConfig::new(cmd);
    cfg.request_timeout = Duration::from_millis(500);
    let mut r = Runner::start(cfg).expect("starts");
    let req = request(&mut r, "cpu_add_mul");
    assert_eq!(r.run(&[req]).iter().map(Outcome::class).collect::<Vec<_>>(), ["hung"]);
    let pid = std::fs::read_to_string(&pidfile).expect("pid written").trim().to_string();
    std::thread::sleep(Duration::from_millis(200));
    // Gone, or a zombie nobody reaped (a container's init may not reap orphans).
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let running = state.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()).is_some_and(|st| st != "Z");
    assert!(!running, "the sleeper {pid} started by the runner's shell survived: {state}");
}

#[test]
fn garbage_is_recorded_and_the_runner_restarts() {
    let (c, starts) = classes("garbage-on:2", 3, Duration::from_secs(10));
    assert_eq!(c, vec!["ok", "garbage", "ok"]);
    assert_eq!(starts, 2);
}

#[test]
fn a_runner_that_exits_before_its_hello_is_a_typed_start_error() {
    let mut cfg = runner("--chaos exit-before-hello");
    cfg.start_timeout = Duration::from_secs(10);
    match Runner::start(cfg) {
        Err(StartError::NoHello { why, stderr, .. }) => {
            assert!(why.contains("exited with status Some(3)"), "{why}");
            assert!(stderr.iter().any(|l| l.contains("exiting before the hello")), "{stderr:?}");
        }
        other => panic!("expected NoHello, got {:?}", other.err()),
    }
    // A command that cannot run at all is reported the same way.
    assert!(matches!(Runner::start(RunnerConfig::new("/nonexistent/runner")), Err(StartError::NoHello { .. })));
}

#[test]
fn typed_errors_name_their_stage() {
    let mut r = Runner::start(runner("")).expect("starts");
    let mut bad_method = request(&mut r, "cpu_add_mul");
    bad_method.method = "nope".into();
    let mut bad_file = request(&mut r, "cpu_add_mul");
    bad_file.pte = PathBuf::from("/nonexistent.pte");
    let mut bad_inputs = request(&mut r, "cpu_add_mul");
    bad_inputs.inputs.pop();
    let out = r.run(&[bad_method, bad_file, bad_inputs]);
    let stages: Vec<String> = out
        .iter()
        .map(|o| match o {
            Outcome::Reply(Reply::Error { stage, .. }) => format!("{stage:?}"),
            other => other.class().to_string(),
        })
        .collect();
    assert_eq!(stages, ["LoadMethod", "LoadProgram", "SetInputs"]);
}

#[test]
fn a_campaign_against_a_crashing_runner_finishes_and_counts_the_crashes() {
    let (r, _tmp) = campaign("--chaos crash-on:5", 12, false, "crashing");
    assert_eq!(r.cases, 12, "every case was run");
    assert!(r.crashes >= 1 && r.runner_starts >= 2, "{r:?}");
    assert_eq!(r.mismatch, 0);
}

#[test]
fn non_finite_float_scalars_and_elements_survive_the_corpus_encoding() {
    use ptecheck::runtime::io::{from_json, to_json};
    use ptecheck::runtime::{HostTensor, HostValue};
    for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 1.5] {
        let v = to_json(&HostValue::Double(x)).expect("encodes");
        // Non-finite floats are the strings the ExecuTorch runner writes, not JSON null.
        if !x.is_finite() {
            assert!(v["value"].is_string(), "{v}");
        }
        let HostValue::Double(back) = from_json(&v, "v").expect("decodes") else { panic!("kind") };
        assert!(back.to_bits() == x.to_bits() || (x.is_nan() && back.is_nan()), "{x} -> {v} -> {back}");
    }
    let t = HostValue::Tensor(HostTensor::f32(vec![3], &[f32::NAN, f32::NEG_INFINITY, -0.0]));
    let v = to_json(&t).expect("encodes");
    assert_eq!(v["values"], serde_json::json!(["NaN", "-inf", -0.0]));
    assert_eq!(from_json(&v, "v").expect("decodes"), t);
}

#[test]
fn the_generator_keeps_to_what_the_runner_announced() {
    use ptecheck::campaign::differential::restrict;
    use ptecheck::campaign::{case_config, case_input};
    use ptecheck::ir::{Node, OpKind};
    use strum::IntoEnumIterator;
    let allowed = [OpKind::Add, OpKind::Mul, OpKind::Relu];
    let hello = ptecheck::runner::Hello {
        protocol: 1,
        name: "test".into(),
        version: "0".into(),
        backends: vec!["XnnpackBackend".into(), "NotOurs".into()],
        operators: allowed.iter().map(|k| k.qualified_kernel()).chain(["aten::nope.out".to_string()]).collect(),
    };
    let opts = CampaignOptions::default();
    let (mut ops, mut backends, mut loops) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new(), 0);
    for case in 0..150 {
        let cfg = restrict(&case_config(&opts, case), &hello);
        let g = ptecheck::generator::generate(&cfg, &mut arbitrary::Unstructured::new(&case_input(0, case)), None);
        let mut visit = |n: &Node, _: usize| match n {
            Node::Op { op, .. } => {
                ops.insert(op.kind());
            }
            Node::Map { .. } | Node::Scan { .. } | Node::While { .. } => loops += 1,
            _ => {}
        };
        for m in &g.program.methods {
            m.graph.walk(0, &mut visit);
        }
        for m in &g.program.modules {
            m.graph.walk(0, &mut visit);
            backends.insert(m.backend.clone());
        }
    }
    assert!(ops.iter().all(|k| allowed.contains(k)), "{ops:?}");
    assert!(ops.len() >= 2, "{ops:?}");
    assert_eq!(loops, 0, "loops need kernels the runner lacks");
    assert!(backends.iter().all(|b| b == "XnnpackBackend"), "{backends:?}");
    assert!(!backends.is_empty());
    assert!(OpKind::iter().count() > allowed.len());
    // What is left out is reported, one entry per operator, backend and feature.
    let left = ptecheck::campaign::differential::not_announced(&opts.config, &hello);
    let ops_left = left.iter().filter(|x| x.starts_with("op:")).count();
    assert_eq!(ops_left, OpKind::iter().count() - allowed.len(), "{left:?}");
    assert!(left.contains(&"backend:demo".to_string()) && !left.contains(&"backend:XnnpackBackend".to_string()));
    assert!(left.iter().any(|x| x.starts_with("feature:")), "{left:?}");
    // A hello that misspells `operators` leaves every operator out, in plain sight.
    let misspelled: ptecheck::runner::Hello = serde_json::from_str(
        r#"{"protocol": 1, "name": "x", "version": "0", "backends": [], "operator": ["aten::add.out"]}"#,
    )
    .expect("a hello");
    let left = ptecheck::campaign::differential::not_announced(&opts.config, &misspelled);
    assert_eq!(left.iter().filter(|x| x.starts_with("op:")).count(), OpKind::iter().count());
}

#[test]
fn a_case_that_cannot_be_prepared_is_a_failure_with_its_reason() {
    // The work directory lies under a regular file: no case's program can be written.
    let temp = tmp("unprepared");
    let file = temp.path().join("a-file");
    std::fs::write(&file, b"").expect("write");
    let opts = DiffOptions {
        campaign: CampaignOptions { cases: 3, ..CampaignOptions::default() },
        runner: runner(""),
        workdir: file.join("work"),
        out: temp.path().join("out"),
        negative: false,
        shrink_budget: 0,
        max_reproducers: 0,
    };
    let r = run(&opts, &mut |_, _| {}).expect("runner starts");
    assert_eq!((r.cases, r.unprepared), (0, 3), "{r:?}");
    assert!(r.unprepared_reasons[0].contains("cannot write"), "{:?}", r.unprepared_reasons);
}

#[test]
fn a_runner_writing_endless_or_invalid_stderr_is_still_heard() {
    // Before its hello the runner writes invalid UTF-8, then 1 MiB on one stderr line (far
    // more than a pipe holds), then a short line, then exits. The harness keeps reading
    // stderr whatever it holds (a reader that stopped would leave the child blocked on a full
    // pipe, reported as a missing hello after the whole start timeout), and keeps only the
    // start of each line.
    let cmd = "printf '\\377\\376 not utf-8\\n' >&2; head -c 1048576 /dev/zero | tr '\\0' x >&2; \
               printf '\\nlast words\\n' >&2; exit 3";
    let mut cfg = RunnerConfig::new(cmd);
    cfg.start_timeout = Duration::from_secs(20);
    let start = std::time::Instant::now();
    match Runner::start(cfg) {
        Err(StartError::NoHello { why, stderr, .. }) => {
            assert!(why.contains("exited with status Some(3)"), "{why}");
            assert!(stderr.iter().any(|l| l.contains("not utf-8")), "{stderr:?}");
            assert!(stderr.iter().any(|l| l == "last words"), "{stderr:?}");
            assert!(stderr.iter().all(|l| l.len() <= 500), "lines are kept short");
        }
        other => panic!("expected NoHello, got {:?}", other.err()),
    }
    assert!(start.elapsed() < Duration::from_secs(15), "heard at once, not at the start timeout");
}

#[test]
fn a_runner_that_stops_reading_cannot_block_the_harness() {
    // The runner hangs on its first request and reads no more; the requests queued behind it
    // are far larger than a pipe holds. Writing them must not block the harness: the hang is
    // cut at the deadline like any other.
    let mut cfg = runner("--chaos hang-on:1");
    cfg.request_timeout = Duration::from_millis(500);
    let mut r = Runner::start(cfg).expect("starts");
    let big = ptecheck::runtime::HostValue::Tensor(ptecheck::runtime::HostTensor::f32(vec![100_000], &[0.5; 100_000]));
    let reqs: Vec<Request> = (0..3)
        .map(|_| {
            let mut q = request(&mut r, "cpu_add_mul");
            q.inputs = vec![big.clone(), big.clone()];
            q
        })
        .collect();
    assert!(reqs[1].to_line().expect("writes").len() > 1 << 17, "each request is more than a pipe holds");
    // Run on a thread of its own, so that a harness that blocks fails this test, not hangs it.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let c: Vec<&str> = r.run(&reqs).iter().map(Outcome::class).collect();
        let _ = done.send(c);
    });
    let c = finished.recv_timeout(Duration::from_secs(30)).expect("the harness blocked writing requests");
    assert_eq!(c, ["hung", "hung", "hung"]);
}

/// A program computing `a - b` on two float32 [2] inputs, written to `dir`.
fn sub_program(dir: &std::path::Path) -> (PathBuf, Vec<u8>) {
    use ptecheck::emit::{EmitOptions, emit};
    use ptecheck::ir::build::{GraphBuilder, f32_tensor};
    use ptecheck::ir::{IrMethod, IrProgram, Op};
    let mut b = GraphBuilder::new(vec![], vec![f32_tensor(vec![2]), f32_tensor(vec![2])]);
    let (x, y) = (b.input(0), b.input(1));
    let r = b.op(Op::Sub, &[x, y]);
    let ir = IrProgram {
        methods: vec![IrMethod { name: "forward".into(), graph: b.finish(&[r]) }],
        modules: vec![],
        named_data: vec![],
    };
    let bytes = emit(&ir, &EmitOptions::default()).expect("emits").to_bytes().expect("writes");
    let path = dir.join("sub.pte");
    std::fs::write(&path, &bytes).expect("write");
    (path, bytes)
}

#[test]
fn one_file_versus_a_runner_agrees_or_says_how_the_two_end() {
    use ptecheck::campaign::versus::{Ending, versus};
    use ptecheck::runner::Stage;
    let dir = tmp("versus");
    let dir = dir.path();
    let (path, bytes) = sub_program(dir);
    let x = |v: [f32; 2]| ptecheck::runtime::HostValue::Tensor(ptecheck::runtime::HostTensor::f32(vec![2], &v));
    let inputs = [x([5.0, 1.0]), x([2.0, 3.0])];
    let methods = ["forward".to_string()];
    let rt = ptecheck::backends::default_runtime();
    // A correct runner: the same outputs.
    let mut r = Runner::start(runner("")).expect("starts");
    let v = versus(&rt, &path, &ptecheck::format::load(&bytes), None, &methods, Some(&inputs), &mut r);
    assert!(v[0].same(), "{v:?}");
    assert!(matches!(&v[0].ours, Ending::Outputs(o) if *o == vec![x([3.0, -2.0])]), "{v:?}");
    // A runner whose sub swaps its operands: other outputs.
    let mut r = Runner::start(runner("--fault sub_swaps_operands")).expect("starts");
    let v = versus(&rt, &path, &ptecheck::format::load(&bytes), None, &methods, Some(&inputs), &mut r);
    assert!(!v[0].same(), "{v:?}");
    assert!(matches!(&v[0].theirs, Ending::Outputs(o) if *o == vec![x([-3.0, 2.0])]), "{v:?}");
    // Too few inputs: both refuse while setting them, with the same code.
    let mut r = Runner::start(runner("")).expect("starts");
    let v = versus(&rt, &path, &ptecheck::format::load(&bytes), None, &methods, Some(&inputs[..1]), &mut r);
    assert!(v[0].same(), "{v:?}");
    for side in [&v[0].ours, &v[0].theirs] {
        assert!(matches!(side, Ending::Refused { stage: Stage::SetInputs, code: Some(0x12), .. }), "{v:?}");
    }
    // Too many: the same (ExecuTorch's set_inputs takes exactly the method's inputs).
    let three = [inputs[0].clone(), inputs[1].clone(), inputs[1].clone()];
    let v = versus(&rt, &path, &ptecheck::format::load(&bytes), None, &methods, Some(&three), &mut r);
    assert!(matches!(v[0].ours, Ending::Refused { stage: Stage::SetInputs, code: Some(0x12), .. }), "{v:?}");
    // A file the reference loader refuses is still sent; the runner refusing it too agrees.
    let bad = dir.join("bad.pte");
    std::fs::write(&bad, &bytes[..40]).expect("write");
    let v = versus(&rt, &bad, &ptecheck::format::load(&bytes[..40]), None, &methods, None, &mut r);
    assert!(v[0].same(), "{v:?}");
    assert!(matches!(v[0].ours, Ending::Refused { stage: Stage::LoadProgram, code: None, .. }), "{v:?}");
    assert!(matches!(v[0].theirs, Ending::Refused { stage: Stage::LoadProgram, .. }), "{v:?}");
    // A program the reference refuses at init goes to the runner with inputs made from its
    // declaration: a runner that checks delegate indices only at execute gets that far.
    let real = std::fs::read(format!("{}/corpus/real/demo_backend_whole_module.pte", env!("CARGO_MANIFEST_DIR")))
        .expect("real file");
    let l = ptecheck::format::load(&real).expect("loads");
    let mut p = l.program.clone();
    let plan = &mut p.execution_plan.as_mut().expect("plans")[0];
    for ins in plan.chains.as_mut().expect("chains")[0].instructions.as_mut().expect("instructions") {
        if let ptecheck::program::Instruction::DelegateCall(d) = ins {
            d.delegate_index = 7;
        }
    }
    let corrupt = ptecheck::format::write(&p, &l.segments, &Default::default()).expect("writes");
    let path = dir.join("delegate-index.pte");
    std::fs::write(&path, &corrupt).expect("write");
    let mut r = Runner::start(runner("--fault delegate_index_at_execute_only")).expect("starts");
    let v = versus(&rt, &path, &ptecheck::format::load(&corrupt), None, &methods, None, &mut r);
    assert!(!v[0].same(), "{v:?}");
    assert!(matches!(v[0].ours, Ending::Refused { stage: Stage::LoadMethod, .. }), "{v:?}");
    assert!(matches!(v[0].theirs, Ending::Refused { stage: Stage::Execute, .. }), "{v:?}");
}

#[test]
fn run_with_a_runner_exits_one_when_an_init_code_differs() {
    let exe = env!("CARGO_BIN_EXE_ptecheck");
    let file = format!("{}/corpus/load_pte/regressions/delegate-without-processed.pte", env!("CARGO_MANIFEST_DIR"));
    let run = |chaos: &str| {
        std::process::Command::new(exe)
            .args(["run", &file, "--runner", &format!("{exe} runner {chaos}")])
            .output()
            .expect("runs")
    };
    let same = run("");
    assert_eq!(same.status.code(), Some(0), "{}", String::from_utf8_lossy(&same.stdout));
    let other = run("--chaos init-code:1");
    assert_eq!(other.status.code(), Some(1));
    let text = String::from_utf8_lossy(&other.stdout);
    assert!(
        text.contains("forward: DIFFERENT") && text.contains("LoadMethod 0x20") && text.contains("LoadMethod 0x01"),
        "{text}"
    );
}

#[test]
fn endings_agree_only_at_the_same_stage_with_the_same_code() {
    use ptecheck::campaign::versus::{Ending, agree};
    use ptecheck::runner::Stage;
    let at = |stage, code| Ending::Refused { stage, code, message: String::new(), unsupported_here: None };
    let cases = [
        (at(Stage::LoadMethod, Some(0x23)), at(Stage::LoadMethod, Some(0x23)), true),
        (at(Stage::LoadMethod, Some(0x23)), at(Stage::LoadMethod, Some(0x20)), false),
        (at(Stage::LoadMethod, Some(0x23)), at(Stage::LoadMethod, None), true),
        (at(Stage::LoadMethod, Some(0x23)), at(Stage::Execute, Some(0x23)), false),
        (at(Stage::SetInputs, Some(0x12)), at(Stage::LoadMethod, Some(0x12)), false),
        // The reference loader checks at load what ExecuTorch checks at init.
        (at(Stage::LoadProgram, None), at(Stage::LoadMethod, Some(0x20)), true),
        (at(Stage::LoadProgram, None), at(Stage::LoadProgram, Some(0x23)), true),
        (at(Stage::LoadProgram, None), at(Stage::SetInputs, Some(0x12)), false),
        // A runner that refused the request itself says nothing about the program.
        (at(Stage::LoadMethod, Some(0x12)), at(Stage::Request, None), false),
        (at(Stage::LoadMethod, Some(0x12)), Ending::RunnerFailed("signalled".into()), false),
        (Ending::Outputs(vec![]), Ending::Outputs(vec![]), true),
        (Ending::Outputs(vec![]), at(Stage::Execute, Some(0x12)), false),
    ];
    for (ours, theirs, want) in cases {
        assert_eq!(agree(&ours, &theirs), want, "{ours:?} vs {theirs:?}");
    }
}

#[test]
fn the_server_answers_a_bad_line_and_goes_on_within_bounded_memory() {
    use ptecheck::runner::protocol::MAX_LINE;
    use std::io::Read;
    // A line that is not UTF-8, one longer than MAX_LINE (never held whole), then a request
    // that parses but names no program: each gets its reply, in order, and the server ends
    // when its input does.
    let input =
        b"\xff\xfe not utf-8\n".chain(std::io::repeat(b'x').take(MAX_LINE as u64 + 10)).chain(&b"\n{\"id\": 7}\n"[..]);
    let mut output = Vec::new();
    ptecheck::runner::server::serve(std::io::BufReader::new(input), &mut output, None, None).expect("serves");
    let lines: Vec<serde_json::Value> =
        String::from_utf8(output).expect("UTF-8").lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    let stage = |l: &serde_json::Value| l["stage"].as_str().map(str::to_string);
    for (line, says) in [(&lines[1], "not UTF-8"), (&lines[2], "longer than")] {
        assert_eq!(stage(line).as_deref(), Some("request"), "{line}");
        assert!(line.to_string().contains(says), "{line}");
    }
    assert_eq!(lines[3]["id"], 7, "{}", lines[3]);
    assert_eq!(lines[3]["error"], "missing `pte`", "{}", lines[3]);
}

#[test]
fn the_server_skips_the_lines_the_executorch_runner_skips() {
    // Blank is ASCII white space, as the ExecuTorch runner's `bytes.strip()` sees it: a line of
    // vertical tabs and form feeds is skipped, a line of no-break spaces is a bad request.
    let input = "\u{b}\u{c} \t\r\n\u{a0}\u{a0}\n{\"id\": 7}\n";
    let mut output = Vec::new();
    ptecheck::runner::server::serve(std::io::BufReader::new(input.as_bytes()), &mut output, None, None)
        .expect("serves");
    let lines: Vec<serde_json::Value> =
        String::from_utf8(output).expect("UTF-8").lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    assert_eq!(lines.len(), 3, "the hello, the bad line's reply, request 7's: {lines:?}");
    assert_eq!(lines[1]["stage"], "request", "{}", lines[1]);
    assert_eq!(lines[2]["id"], 7, "{}", lines[2]);
}

#[test]
fn a_refused_request_says_what_is_wrong_and_keeps_its_id_when_it_has_one() {
    use ptecheck::runner::protocol::{RequestError, RequestFault};
    let refused = |line: &str| Request::parse(line).expect_err("refused");
    assert!(matches!(refused("{"), RequestError { id: None, fault: RequestFault::NotJson(_) }));
    assert_eq!(refused("{}"), RequestError { id: None, fault: RequestFault::NoId });
    assert_eq!(refused(r#"{"id": 3, "op": "stop"}"#), RequestError { id: Some(3), fault: RequestFault::UnsupportedOp });
    assert_eq!(
        refused(r#"{"id": 3, "pte": "a.pte"}"#),
        RequestError { id: Some(3), fault: RequestFault::Missing("method") }
    );
    let e = refused(r#"{"id": 4, "pte": "a.pte", "method": "forward", "inputs": [{"dtype": "float32"}]}"#);
    assert!(matches!(&e.fault, RequestFault::Inputs(io) if io.path.starts_with("$.inputs")), "{e:?}");
    assert_eq!(e.id, Some(4));
}

#[test]
fn a_chaos_value_that_does_not_parse_says_why() {
    use ptecheck::runner::server::{Chaos, ChaosError};
    assert_eq!(Chaos::parse("crash-on:3"), Ok(Chaos::CrashOn(3)));
    assert_eq!(Chaos::parse("crash-on:x"), Err(ChaosError::BadRequestNumber("crash-on:x".into())));
    assert_eq!(Chaos::parse("init-code:-1"), Err(ChaosError::BadCode("init-code:-1".into())));
    assert_eq!(Chaos::parse("melt"), Err(ChaosError::Unknown("melt".into())));
}

/// cpu_linear_relu reduced to returning its 2-d weight (a constant) retyped float16: a program
/// that loads and runs and whose output the corpus encoding cannot hold. Written into `dir`.
fn float16_output_program(dir: &std::path::Path) -> PathBuf {
    use ptecheck::program::{EValue, ScalarType};
    let path = format!("{}/corpus/real/cpu_linear_relu.pte", env!("CARGO_MANIFEST_DIR"));
    let data = std::fs::read(path).expect("read");
    let loaded = ptecheck::format::load(&data).expect("loads");
    let mut p = loaded.program.clone();
    let plan = &mut p.execution_plan.as_mut().expect("plans")[0];
    let values = plan.values.as_mut().expect("values");
    let weight = values
        .iter()
        .position(|v| matches!(v, EValue::Tensor(t) if t.data_buffer_idx > 0 && t.sizes.as_ref().is_some_and(|s| s.len() == 2)))
        .expect("a 2-d constant");
    if let EValue::Tensor(t) = &mut values[weight] {
        t.scalar_type = ScalarType::HALF;
    }
    // No inputs and no instructions: the method returns the constant.
    (plan.inputs, plan.outputs) = (Some(vec![]), Some(vec![weight as i32]));
    for chain in plan.chains.iter_mut().flatten() {
        chain.instructions = Some(vec![]);
    }
    let out = dir.join("float16_output.pte");
    std::fs::write(&out, ptecheck::format::write(&p, &loaded.segments, &Default::default()).expect("writes"))
        .expect("write");
    out
}

#[test]
fn a_value_the_encoding_does_not_hold_is_refused_by_its_writer_not_written_short() {
    use ptecheck::program::ScalarType;
    use ptecheck::runtime::{HostTensor, HostValue};
    let temp = tmp("float16");
    let mut r = Runner::start(runner("")).expect("starts");
    // A float16 input cannot be written: the request is not sent, and the runner goes on.
    let mut half_input = request(&mut r, "cpu_add_mul");
    half_input.inputs[1] =
        HostValue::Tensor(HostTensor { dtype: ScalarType::HALF, sizes: vec![2, 3], data: vec![0; 12] });
    let reqs = [request(&mut r, "cpu_add_mul"), half_input, request(&mut r, "cpu_add_mul")];
    let out = r.run(&reqs);
    assert_eq!(out.iter().map(Outcome::class).collect::<Vec<_>>(), ["ok", "unencodable", "ok"], "{:?}", out[1]);
    match &out[1] {
        Outcome::Unencodable(e) => assert_eq!(e.to_string(), "$.inputs[1]: unsupported dtype `HALF`"),
        other => panic!("{other:?}"),
    }
    assert_eq!(r.stats().starts, 1, "{:?}", r.stats());
    // A float16 output is a `read_outputs` error naming it, not a reply with its values dropped.
    let pte = float16_output_program(temp.path());
    let half_output = Request { id: r.next_id(), pte, method: "forward".into(), inputs: vec![], ptd: None };
    let out = r.run(&[half_output]);
    match &out[0] {
        Outcome::Reply(Reply::Error { stage, message, .. }) => {
            assert_eq!(*stage, ptecheck::runner::Stage::ReadOutputs);
            assert!(message.starts_with("$.outputs[0]: unsupported dtype `HALF`"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_reply_that_is_not_utf8_or_both_outputs_and_error_is_garbage() {
    // A scripted runner: its hello, then for each request one of the two bad replies (a reply
    // line with invalid UTF-8 inside a string, read lossily it would parse as a valid error;
    // a reply with both members, one of which would have been dropped).
    let hello = r#"{"hello":{"protocol":1,"name":"scripted","version":"0"}}"#;
    let bad_utf8 = r#"{"id":0,"error":"bad \377 byte","stage":"execute"}"#;
    let both = r#"{"id":0,"outputs":[],"error":"and failed","stage":"execute"}"#;
    for (reply, why) in [(bad_utf8, "not UTF-8"), (both, "both `outputs` and `error`")] {
        let cmd = format!("printf '%s\\n' '{hello}'; read -r line; printf '{reply}\\n'; sleep 5");
        let mut r = Runner::start(RunnerConfig::new(cmd)).expect("starts");
        let mut req = request(&mut r, "cpu_add_mul");
        req.id = 0;
        match &r.run(&[req])[0] {
            Outcome::Garbage { why: got, .. } => assert!(got.contains(why), "{got}"),
            other => panic!("{why}: {other:?}"),
        }
    }
}

#[test]
fn a_runner_lacking_a_kernel_or_backend_does_not_call_the_program_invalid() {
    use ptecheck::campaign::differential::refusal_class;
    use ptecheck::runner::Stage;
    assert_eq!(refusal_class(Stage::LoadMethod, Some(0x14)), "not_supported:LoadMethod");
    assert_eq!(refusal_class(Stage::LoadMethod, Some(0x20)), "not_supported:LoadMethod");
    assert_eq!(refusal_class(Stage::LoadMethod, Some(0x23)), "LoadMethod");
    assert_eq!(refusal_class(Stage::LoadMethod, None), "LoadMethod");
    assert_eq!(refusal_class(Stage::Execute, Some(0x14)), "Execute");
}

/// The differential's verdict on a runner's reply reads every part of it: a reply wrong in one
/// part only (its kind, dtype, shape, one element, or the number of outputs) is different,
/// although a reading that skipped that part would find the values equal.
#[test]
fn a_reply_wrong_in_one_part_only_is_different() {
    use ptecheck::ir::bound::Bound;
    use ptecheck::oracle::values::{Verdict, verdict_of};
    use ptecheck::runtime::io::list_to_json;
    use ptecheck::runtime::{HostTensor, HostValue};
    let bytes: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
    let want = vec![HostValue::Tensor(HostTensor::f32(vec![2], &[1.5, -2.0]))];
    let bounds = [Bound::Abs(vec![1e-3, 1e-3])];
    let out = |v: serde_json::Value| format!(r#"{{"id": 7, "outputs": {v}}}"#);
    let exact = serde_json::Value::Array(list_to_json(&want, "$").expect("encodes"));
    // The same bytes read as int32: equal to a reader that takes the expected dtype.
    let as_int32: Vec<i64> =
        bytes.chunks_exact(4).map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect();
    let tensor = |dtype: &str, shape: serde_json::Value, values: serde_json::Value| {
        let mut t = exact[0].clone();
        t["dtype"] = dtype.into();
        t["shape"] = shape;
        t["values"] = values;
        // The checksum of the bytes is the sender's own check; this test changes the values.
        t.as_object_mut().expect("object").remove("bytes_sha256");
        t
    };
    let f = |v: f64| serde_json::json!(v);
    let cases: Vec<(&str, serde_json::Value, Verdict)> = vec![
        ("equal", exact.clone(), Verdict::Exact),
        (
            "within its bound",
            serde_json::json!([tensor("float32", serde_json::json!([2]), serde_json::json!([1.5005, -2.0]))]),
            Verdict::WithinBound,
        ),
        (
            "kind",
            serde_json::Value::Array(list_to_json(&[HostValue::Int(1)], "$").expect("encodes")),
            Verdict::Mismatch,
        ),
        (
            "dtype",
            serde_json::json!([tensor("int32", serde_json::json!([2]), serde_json::json!(as_int32))]),
            Verdict::Mismatch,
        ),
        (
            "shape",
            serde_json::json!([tensor("float32", serde_json::json!([2, 1]), serde_json::json!([1.5, -2.0]))]),
            Verdict::Mismatch,
        ),
        (
            "element",
            serde_json::json!([tensor("float32", serde_json::json!([2]), serde_json::json!([f(1.5), f(-2.002)]))]),
            Verdict::Mismatch,
        ),
        ("count: one more", serde_json::json!([exact[0].clone(), exact[0].clone()]), Verdict::Mismatch),
        ("count: none", serde_json::json!([]), Verdict::Mismatch),
    ];
    for (part, outputs, verdict) in cases {
        let line = out(outputs);
        let (id, reply) = Reply::parse(&line).unwrap_or_else(|e| panic!("{part}: {e}: {line}"));
        assert_eq!(id, 7);
        let Reply::Outputs(got) = reply else { panic!("{part}: not outputs") };
        assert_eq!(verdict_of(&want, &bounds, &got), verdict, "{part}: {line}");
    }
    // An output with no bound is compared exactly, not skipped.
    let two = vec![want[0].clone(), want[0].clone()];
    let mut other = two.clone();
    if let HostValue::Tensor(t) = &mut other[1] {
        t.data[0] ^= 1;
    }
    assert_eq!(verdict_of(&two, &bounds, &other), Verdict::Mismatch);
}
