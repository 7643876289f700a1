//! The exporter machinery, tested against `ptecheck exporter` (the reference emitter behind the
//! exporter protocol), so no Python is needed: under each rules preset the campaign is clean;
//! each seeded emitter fault is caught by the structure invariants and written with a Python
//! reproducer; an exporter that crashes, hangs or garbles its reply is an outcome and the
//! campaign goes on; the generator keeps to the hello; replies are read strictly.

#![forbid(unsafe_code)]

use ptecheck::backends::compiler_demo;
use ptecheck::campaign::CampaignOptions;
use ptecheck::campaign::export::{ExportOptions, not_announced, restrict, run};
use ptecheck::campaign::export_report::ExportReport;
use ptecheck::child::Garbage;
use ptecheck::emit::Rules;
use ptecheck::exporter::protocol::{ControlFlow, Reply, parse_hello};
use ptecheck::exporter::{Exporter, ExporterConfig};
use ptecheck::generator::{GenConfig, Switch, generate_from_bytes};
use ptecheck::ir::{Graph, Node};
use std::path::PathBuf;
use std::time::Duration;

fn exporter(extra: &str) -> ExporterConfig {
    let mut c = ExporterConfig::new(format!("{} exporter {extra}", env!("CARGO_BIN_EXE_ptecheck")));
    c.request_timeout = Duration::from_secs(10);
    c
}

fn tmp(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("ptecheck-export-test-{tag}-")).tempdir().expect("temporary directory")
}

/// An exporter campaign of `cases` cases (seed 3) against `ptecheck exporter EXTRA`.
fn campaign(extra: &str, cases: u64, tag: &str) -> (ExportReport, tempfile::TempDir) {
    let temp = tmp(tag);
    let opts = ExportOptions {
        campaign: CampaignOptions { cases, seed: 3, ..CampaignOptions::default() },
        exporter: exporter(extra),
        runner: None,
        workdir: temp.path().join("work"),
        out: temp.path().join("out"),
        record: Some(temp.path().join("record")),
        shrink_budget: 60,
        max_reproducers: 2,
        examples: false,
    };
    (run(&opts, &mut |_, _| {}).expect("the exporter starts"), temp)
}

#[test]
fn under_each_rules_preset_the_stand_in_emits_what_the_rules_imply() {
    for rules in ["executorch-1.5.1", "opt-in", "opt-in-body"] {
        let (r, _t) = campaign(&format!("--rules {rules}"), 150, rules);
        assert_eq!((r.cases, r.built), (150, 150), "{rules}: {r:?}");
        assert_eq!(r.failures, 0, "{rules}: {:?}", r.findings);
        assert!(r.failures_by_kind.is_empty(), "{rules}: {:?}", r.failures_by_kind);
        for inv in ["I1", "I2", "I3", "I4", "I6"] {
            assert!(r.checks.get(inv).copied().unwrap_or(0) > 100, "{rules}: {inv} checked {:?}", r.checks);
        }
        // The stand-in is the reference emitter under those rules: one structure.
        assert_eq!((r.emitter_differences, r.sites_dropped), (0, 0), "{rules}: {:?}", r.difference_examples);
        assert_eq!(r.ours.get("mismatch"), None, "{rules}");
    }
}

/// The findings' first kinds, and the first reproducer folder.
fn caught(r: &ExportReport) -> (Vec<&str>, Option<PathBuf>) {
    (r.findings.iter().map(|f| f.kind.as_str()).collect(), r.findings.first().and_then(|f| f.reproducer.clone()))
}

#[test]
fn each_seeded_emitter_fault_is_caught_under_every_rules_preset_it_breaks() {
    for (args, kind) in [
        ("--rules executorch-1.5.1 --fault share-across-bodies", "I2"),
        ("--rules executorch-1.5.1 --fault dedup-by-module", "I3"),
        ("--rules opt-in --fault dedup-by-module", "I3"),
        ("--rules opt-in-body --fault dedup-by-module", "I3"),
    ] {
        let (r, _t) = campaign(args, 300, "presets");
        let (kinds, _) = caught(&r);
        assert!(r.failures > 0 && kinds.iter().all(|k| *k == kind), "{args}: {kinds:?}");
        // The emitter differential sees the same fault as a structural difference.
        let aspect = if kind == "I2" { "call sites" } else { "stored" };
        assert!(r.emitter_differences > 0, "{args}");
        assert!(r.differences_by_aspect.contains_key(aspect), "{args}: {:?}", r.differences_by_aspect);
    }
    // Under rules that already share across the method, sharing across bodies breaks nothing:
    // the stand-in refuses to start so.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ptecheck"))
        .args(["exporter", "--rules", "opt-in", "--fault", "share-across-bodies"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("breaks nothing"));
}

#[test]
fn sharing_across_control_flow_bodies_is_caught_by_the_delegate_count_with_a_python_reproducer() {
    let (r, _t) = campaign("--rules opt-in-body --fault share-across-bodies", 300, "bodies");
    let (kinds, folder) = caught(&r);
    assert!(r.failures > 0 && kinds.iter().all(|k| *k == "I2"), "{kinds:?}");
    let folder = folder.expect("a reproducer folder");
    for f in ["program.json", "inputs.json", "exported.pte", "reply.json", "failures.txt", "replay.txt", "repro.py"] {
        assert!(folder.join(f).is_file(), "{f} missing in {}", folder.display());
    }
    let failures = std::fs::read_to_string(folder.join("failures.txt")).expect("failures");
    assert!(failures.contains("the rules do not share them"), "{failures}");
    // The reproducer needs only torch and executorch: the builder, the program, the inputs and
    // what the rules imply are in it, and it says what is wrong.
    let script = std::fs::read_to_string(folder.join("repro.py")).expect("repro.py");
    for needle in
        ["import torch", "def export_program(", "PROGRAM_JSON = ", "INPUTS_JSON = ", "EXPECTED_JSON = ", "WRONG: "]
    {
        assert!(script.contains(needle), "repro.py lacks {needle:?}");
    }
    assert!(!script.contains("ptecheck::") && !script.contains("import ptecheck"), "repro.py uses ptecheck");
    // The shrunk program is small.
    let f = &r.findings[0];
    assert!(f.nodes.1.is_some_and(|n| n <= f.nodes.0 && n <= 12), "{:?}", f.nodes);
}

#[test]
fn deduplicating_blobs_by_module_is_caught_by_the_blob_check() {
    let (r, _t) = campaign("--fault dedup-by-module", 300, "dedup");
    let (kinds, folder) = caught(&r);
    assert!(r.failures > 0 && kinds.iter().all(|k| *k == "I3"), "{kinds:?}");
    let failures = std::fs::read_to_string(folder.expect("folder").join("failures.txt")).expect("failures");
    assert!(failures.contains("not deduplicated by bytes"), "{failures}");
}

#[test]
fn an_exporter_that_crashes_hangs_or_garbles_is_an_outcome_and_the_campaign_goes_on() {
    // Each process counts its own requests: after a restart the count begins again.
    for (chaos, class, n) in
        [("crash-on:2", "signalled", 3), ("garbage-on:3", "garbage", 2), ("exit-on:4", "exited", 1)]
    {
        let (r, _t) = campaign(&format!("--chaos {chaos}"), 6, "chaos");
        assert_eq!(r.cases, 6, "{chaos}");
        assert_eq!(r.exporter_failures.get(class), Some(&n), "{chaos}: {:?}", r.exporter_failures);
        assert_eq!(r.built, 6 - n, "{chaos}: the others are built by a restarted exporter");
        assert!(r.findings.iter().any(|f| f.kind == format!("exporter:{class}") && f.reproducer.is_some()), "{chaos}");
    }
    let temp = tmp("hang");
    let mut cfg = exporter("--chaos hang-on:2");
    cfg.request_timeout = Duration::from_millis(1500);
    let opts = ExportOptions {
        campaign: CampaignOptions { cases: 3, seed: 3, ..CampaignOptions::default() },
        exporter: cfg,
        runner: None,
        workdir: temp.path().join("work"),
        out: temp.path().join("out"),
        record: None,
        shrink_budget: 10,
        max_reproducers: 1,
        examples: false,
    };
    let r = run(&opts, &mut |_, _| {}).expect("starts");
    assert_eq!((r.exporter_failures.get("hung"), r.built), (Some(&1), 2), "{r:?}");
}

#[test]
fn the_generator_keeps_to_what_the_exporter_announced_and_to_what_torch_exports() {
    let mut hello = ptecheck::exporter::server::hello(Rules::EXECUTORCH_1_5_1);
    hello.control_flow = vec![ControlFlow::Cond, ControlFlow::Map, ControlFlow::Scan];
    hello.backends.retain(|b| b != "multifn" && b != "scratch");
    hello.multimethod.clear();
    hello.operators.retain(|o| o != "div");
    let mut cfg = GenConfig::default();
    cfg.features.set(Switch::WhileLoop, true);
    let kept = restrict(&cfg, &hello);
    for s in [Switch::WhileLoop, Switch::Scratch, Switch::Multifunction] {
        assert!(!kept.features.on(s), "{s:?}");
    }
    // The compiler demo is off by default and on wherever the exporter lowers to it.
    assert!(!cfg.features.on(Switch::CompilerDemo) && kept.features.on(Switch::CompilerDemo));
    let mut without = hello.clone();
    without.backends.retain(|b| b != compiler_demo::ID);
    assert!(!restrict(&cfg, &without).features.on(Switch::CompilerDemo));
    assert!(not_announced(&cfg, &without).iter().any(|m| m == "backend:BackendWithCompilerDemo"));
    let mut chains = 0;
    let missing = not_announced(&cfg, &hello);
    for name in ["op:div", "backend:scratch", "backend:multifn", "feature:while_loop"] {
        assert!(missing.iter().any(|m| m == name), "{name} not reported: {missing:?}");
    }
    for case in 0..400u64 {
        let bytes = ptecheck::campaign::case_input(11, case);
        let g = generate_from_bytes(&kept, &bytes);
        for m in &g.program.methods {
            assert_exportable(&m.graph, true);
        }
        for module in &g.program.modules {
            assert!(module.backend != "multifn" && module.backend != "scratch", "{}", module.backend);
            if module.backend == compiler_demo::ID {
                let ops = compiler_demo::chain(&module.graph).expect("a chain as the backend runs it");
                assert_eq!(module.processed, compiler_demo::preprocess(&module.graph).unwrap(), "{ops:?}");
                chains += 1;
            }
            assert_exportable(&module.graph, false);
            let c = module.graph.constants.len();
            let inputs = c..c + module.graph.inputs.len();
            assert!(module.graph.outputs.iter().all(|o| !inputs.contains(o)), "a module passes an input through");
        }
    }
    assert!(chains > 20, "{chains} compiler-demo modules in 400 cases");
}

/// No while loop, no div, and no body returning one of its inputs (or a view of one).
fn assert_exportable(g: &Graph, top: bool) {
    let c = g.constants.len();
    let inputs = c..c + g.inputs.len();
    if !top {
        assert!(g.outputs.iter().all(|o| !inputs.contains(o)), "a body returns its input: {g:?}");
    }
    for n in &g.nodes {
        match n {
            Node::While { .. } => panic!("a while loop"),
            Node::Op { op, .. } => assert_ne!(op.kind().name(), "div"),
            Node::Cond { then_graph, else_graph, .. } => {
                assert_exportable(then_graph, false);
                assert_exportable(else_graph, false);
            }
            Node::Map { body, .. } | Node::Scan { body, .. } => assert_exportable(body, false),
            Node::Call { .. } => {}
        }
    }
}

#[test]
fn a_reply_is_read_strictly_and_a_runners_hello_is_not_an_exporters() {
    let ok = r#"{"id":4,"pte":"UFRFAA==","ptd":null,"eager":{"forward":[]},"delegates":{"forward":[0,null]}}"#;
    let (id, reply) = Reply::parse(ok).expect("a reply");
    let Reply::Exported(e) = reply else { panic!("exported") };
    assert_eq!((id, e.pte.as_slice(), e.delegates["forward"].clone()), (4, &b"PTE\0"[..], vec![Some(0), None]));
    let failed = Reply::parse(r#"{"id":5,"stage":"export","error":"while_loop"}"#).expect("a failure");
    assert_eq!(
        failed.1,
        Reply::Failed { stage: ptecheck::exporter::ExportStage::Export, message: "while_loop".into() }
    );
    for (line, why) in [
        (r#"{"id":1,"pte":"UFRF","error":"x","stage":"emit"}"#, "both"),
        (r#"{"id":1,"pte":"not base64!","eager":{},"delegates":{}}"#, "base64"),
        (r#"{"id":1,"pte":"UFRF","delegates":{}}"#, "eager"),
        (r#"{"id":1,"pte":"UFRF","eager":{}}"#, "delegates"),
        (r#"{"id":1,"error":"x","stage":"compile"}"#, "stage"),
        (r#"{"id":1,"pte":"UFRF","eager":{"forward":[{"kind":"tensor"}]},"delegates":{}}"#, "eager"),
        (r#"{"pte":"UFRF","eager":{},"delegates":{}}"#, "id"),
    ] {
        match Reply::parse(line) {
            Err(Garbage(w)) => assert!(w.contains(why), "{line}: {w}"),
            Ok(r) => panic!("{line} read as {r:?}"),
        }
    }
    // A backend the runtime here lacks is named, not skipped silently.
    let mut h = ptecheck::exporter::server::hello(Rules::OPT_IN);
    h.backends.push("QnnBackend".into());
    assert_eq!(ptecheck::campaign::export::not_runnable_here(&h), ["QnnBackend"]);
    let runner_hello = r#"{"hello":{"protocol":1,"name":"r","version":"1","backends":[],"operators":[]}}"#;
    assert!(parse_hello(runner_hello).is_err());
    let exporter_hello = ptecheck::exporter::protocol::hello_line(&ptecheck::exporter::server::hello(Rules::OPT_IN));
    assert!(parse_hello(&exporter_hello).is_ok());
    assert!(ptecheck::runner::protocol::parse_hello(&exporter_hello).is_err(), "a runner client takes an exporter");
    // A runner given as an exporter gives no hello an exporter client takes.
    let cfg = ExporterConfig::new(format!("{} runner", env!("CARGO_BIN_EXE_ptecheck")));
    assert!(Exporter::start(cfg).is_err());
}
