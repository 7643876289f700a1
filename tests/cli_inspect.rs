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
