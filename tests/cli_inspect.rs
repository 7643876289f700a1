//! The `ptecheck inspect` command: summary, corpus-shaped JSON, Graphviz, and exit codes.

use std::io::Write;
use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ptecheck"))
}

fn corpus(name: &str) -> String {
    format!("{}/corpus/real/{name}.pte", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn summary_names_delegates_call_sites_and_segments() {
    let out = bin().args(["inspect", &corpus("demo_repeated_call_3x")]).output().expect("runs");
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("delegates: 3"), "{s}");
    assert!(s.contains("BackendWithCompilerDemo blob segment[1] 82 B"), "{s}");
    assert!(s.contains("called by: chain 0 instr 0"), "{s}");
    assert!(s.contains("delegate:forward[0], delegate:forward[1], delegate:forward[2]"), "{s}");
}

#[test]
fn json_program_member_matches_the_corpus_dump() {
    let out = bin().args(["inspect", "--json", &corpus("xnn_identical_blobs_dedup")]).output().expect("runs");
    assert!(out.status.success());
    let ours: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let path = format!("{}/corpus/real/xnn_identical_blobs_dedup.json", env!("CARGO_MANIFEST_DIR"));
    let reference: serde_json::Value = serde_json::from_slice(&std::fs::read(path).expect("read")).expect("json");
    assert_eq!(ours["program"], reference["program"]);
}

#[test]
fn dot_links_methods_call_sites_delegates_and_one_shared_blob() {
    let out = bin().args(["inspect", "--dot", &corpus("xnn_repeated_call_3x")]).output().expect("runs");
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.starts_with("digraph pte {"));
    assert_eq!(s.matches("shape=component").count(), 3, "three delegates");
    assert_eq!(s.matches("shape=note").count(), 1, "one shared blob");
    assert_eq!(s.matches("-> \"blob:").count(), 3);
}

#[test]
fn stdin_input_works() {
    let mut child = bin().args(["inspect", "-"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("spawns");
    let data = std::fs::read(corpus("cpu_add_mul")).expect("read");
    child.stdin.take().expect("stdin").write_all(&data).expect("writes");
    let out = child.wait_with_output().expect("waits");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("operators: [aten::add.out, aten::mul.out]"));
}

#[test]
fn rejected_file_exits_2_with_one_error_line() {
    let dir = std::env::temp_dir().join(format!("ptecheck-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let bad = dir.join("bad.pte");
    let mut data = std::fs::read(corpus("cond_cpu")).expect("read");
    data[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(&bad, &data).expect("write");
    let out = bin().args(["inspect", bad.to_str().expect("utf8")]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: program_size"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn default_inspects_every_shipped_sample() {
    let out = bin().arg("inspect").output().expect("runs");
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert_eq!(s.matches("== ").count(), 17, "{s}");
}

#[test]
fn check_passes_a_real_file_and_lists_violations_of_a_bad_one() {
    let ok = bin().args(["check", &corpus("map_cpu")]).output().expect("runs");
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let dir = std::env::temp_dir().join(format!("ptecheck-cli-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let data = std::fs::read(corpus("xnn_repeated_call_3x")).expect("read");
    let loaded = ptecheck::format::load(&data).expect("loads");
    let mut p = loaded.program.clone();
    let plan = &mut p.execution_plan.as_mut().expect("plans")[0];
    for ins in plan.chains.as_mut().expect("chains")[0].instructions.as_mut().expect("instrs") {
        if let ptecheck::program::Instruction::DelegateCall(d) = ins {
            d.delegate_index += 10;
        }
    }
    let bad = dir.join("bad_delegate_index.pte");
    let bytes = ptecheck::format::write(&p, &loaded.segments, &Default::default()).expect("writes");
    std::fs::write(&bad, bytes).expect("write");
    let out = bin().args(["check", bad.to_str().expect("utf8")]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().filter(|l| l.starts_with("error: ") && l.contains("names delegate")).count(), 3, "{err}");
}

#[test]
fn emit_example_save_json_and_emit_it_back_byte_identical() {
    let dir = std::env::temp_dir().join(format!("ptecheck-cli-emit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    for name in ["denoise-loop", "cond-delegates", "multi-method"] {
        let json = bin().args(["emit", "--example", name, "--save-json"]).output().expect("runs");
        assert!(json.status.success());
        let jpath = dir.join(format!("{name}.json"));
        std::fs::write(&jpath, &json.stdout).expect("write");
        let (a, b) = (dir.join(format!("{name}-a.pte")), dir.join(format!("{name}-b.pte")));
        assert!(bin()
            .args(["emit", "--example", name, "-o", a.to_str().expect("p")])
            .status()
            .expect("runs")
            .success());
        assert!(bin()
            .args(["emit", jpath.to_str().expect("p"), "-o", b.to_str().expect("p")])
            .status()
            .expect("runs")
            .success());
        assert_eq!(std::fs::read(&a).expect("a"), std::fs::read(&b).expect("b"), "{name}");
    }
    let run = |share: &[&str]| {
        let p = dir.join("denoise.pte");
        let mut args = vec!["emit", "--example", "denoise-loop", "-o", p.to_str().expect("p")];
        args.extend_from_slice(share);
        assert!(bin().args(&args).status().expect("runs").success());
        let out = bin().args(["run", p.to_str().expect("p"), "--trace"]).output().expect("runs");
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(run(&[]).contains("trace: 1 init"), "shared");
    assert!(run(&["--no-share"]).contains("trace: 10 init"), "unshared");
    let bad = bin().args(["emit", "--example", "nope", "-o", "/dev/null"]).output().expect("runs");
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn run_expect_reports_match_and_unavailable_backends() {
    let ok = bin()
        .args(["run", &corpus("cpu_linear_relu"), "--expect", &corpus("cpu_linear_relu").replace(".pte", ".io.json")])
        .output()
        .expect("runs");
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stdout));
    assert!(String::from_utf8_lossy(&ok.stdout).contains("largest ulp gap: 0"));
    let xnn = bin()
        .args([
            "run",
            &corpus("xnn_single_partition"),
            "--expect",
            &corpus("xnn_single_partition").replace(".pte", ".io.json"),
        ])
        .output()
        .expect("runs");
    assert_eq!(xnn.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&xnn.stdout).contains("backend not available"));
}

#[test]
fn campaign_json_has_the_documented_members_and_exit_codes() {
    let out = bin().args(["campaign", "--cases", "20", "--json"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    for k in ["cases", "failures", "programs_per_second", "invariants", "features", "failure"] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["cases"], 20);
    assert!(v["failure"].is_null());
    let bad = bin().args(["campaign", "--cases", "256", "--fault", "init_per_call_site"]).output().expect("runs");
    assert_eq!(bad.status.code(), Some(1));
    let text = String::from_utf8_lossy(&bad.stdout);
    assert!(
        text.contains("FAILURE at seed 0") && text.contains("reproduce: ptecheck campaign --seed 0 --case"),
        "{text}"
    );
    let m = bin().args(["mutants", "--json", "--cases", "64"]).output().expect("runs");
    let list: serde_json::Value = serde_json::from_slice(&m.stdout).expect("json");
    assert_eq!(list.as_array().map(Vec::len), Some(ptecheck::fault::Fault::all().len()));
    for item in list.as_array().into_iter().flatten() {
        for k in ["name", "caught", "cases_to_catch", "shrunk_nodes"] {
            assert!(item.get(k).is_some(), "missing {k}");
        }
    }
}
