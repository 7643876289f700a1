//! The `ptecheck inspect` command: summary, corpus-shaped JSON, Graphviz, and exit codes.

#![forbid(unsafe_code)]

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
    let dir = tmp("inspect");
    let dir = dir.path();
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
fn a_folder_inspects_every_file_in_it_and_no_argument_is_a_usage_error() {
    let dir = format!("{}/corpus/real", env!("CARGO_MANIFEST_DIR"));
    let out = bin().args(["inspect", &dir]).output().expect("runs");
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert_eq!(s.matches("== ").count(), 21, "{s}");
    // An installed binary has no corpus to fall back on: FILE is required.
    let none = bin().arg("inspect").output().expect("runs");
    assert_eq!(none.status.code(), Some(2));
}

/// A fresh temporary directory, removed when dropped (also when a test fails).
fn tmp(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("ptecheck-cli-{tag}-")).tempdir().expect("temporary directory")
}

/// cpu_linear_relu with its weight moved to a `.ptd` (EXTERNAL, fqn `linear.weight`): the
/// program, the `.ptd` and the original recording.
fn external_weight_case(dir: &std::path::Path) -> (String, String, String) {
    use ptecheck::program::{EValue, ExtraTensorInfo, TensorDataLocation};
    let data = std::fs::read(corpus("cpu_linear_relu")).expect("read");
    let loaded = ptecheck::format::load(&data).expect("loads");
    let mut p = loaded.program.clone();
    let plan = &mut p.execution_plan.as_mut().expect("plans")[0];
    let (idx, t) = plan
        .values
        .as_mut()
        .expect("values")
        .iter_mut()
        .filter_map(|v| match v {
            EValue::Tensor(t) if t.data_buffer_idx > 0 && t.sizes.as_ref().is_some_and(|s| s.len() == 2) => Some(t),
            _ => None,
        })
        .map(|t| (t.data_buffer_idx as usize, t))
        .next()
        .expect("a 2-d constant");
    let n: usize = t.sizes.iter().flatten().map(|s| *s as usize).product::<usize>() * 4;
    let weight = loaded.constants[idx][..n].to_vec();
    let layout = ptecheck::format::TensorLayout {
        scalar_type: t.scalar_type,
        sizes: t.sizes.clone().unwrap_or_default(),
        dim_order: t.dim_order.clone().unwrap_or_default(),
    };
    t.data_buffer_idx = 0;
    t.extra_tensor_info = Some(ExtraTensorInfo {
        location: TensorDataLocation::EXTERNAL,
        fully_qualified_name: Some("linear.weight".into()),
        ..Default::default()
    });
    let pte = ptecheck::format::write(&p, &loaded.segments, &Default::default()).expect("writes");
    let ptd = ptecheck::format::write_ptd(&[("linear.weight", Some(&layout), &weight[..])], 16);
    let (a, b) = (dir.join("ext.pte"), dir.join("ext.ptd"));
    std::fs::write(&a, pte).expect("write");
    std::fs::write(&b, ptd).expect("write");
    let io = format!("{}/corpus/real/cpu_linear_relu.io.json", env!("CARGO_MANIFEST_DIR"));
    (a.display().to_string(), b.display().to_string(), io)
}

#[test]
fn run_expect_uses_the_external_data_file() {
    let dir = tmp("ptd");
    let dir = dir.path();
    let (pte, ptd, io) = external_weight_case(dir);
    let with = bin().args(["run", &pte, "--data", &ptd, "--expect", &io]).output().expect("runs");
    assert_eq!(
        with.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&with.stdout),
        String::from_utf8_lossy(&with.stderr)
    );
    assert!(String::from_utf8_lossy(&with.stdout).contains("largest ulp gap: 0"));
    let without = bin().args(["run", &pte, "--expect", &io]).output().expect("runs");
    // Without the .ptd the weight is missing: the method does not load (rejected, as `run`
    // says of a method refused at load).
    assert_eq!(without.status.code(), Some(2), "without the .ptd the weight is missing");
    assert!(String::from_utf8_lossy(&without.stdout).contains("linear.weight"));
}

#[test]
fn inspect_shows_a_ptd_file() {
    let dir = tmp("ptd-inspect");
    let dir = dir.path();
    let (_, ptd, _) = external_weight_case(dir);
    let out = bin().args(["inspect", &ptd]).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("external data (.ptd)") && text.contains("linear.weight: segment 0 128 B"), "{text}");
    let json = bin().args(["inspect", "--json", &ptd]).output().expect("runs");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(v["entries"][0]["key"], "linear.weight");
    assert_eq!(v["entries"][0]["len"], 128);
}

#[test]
fn an_unknown_method_is_a_bad_argument() {
    let out = bin().args(["run", &corpus("cpu_add_mul"), "--method", "nope"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no method named `nope`"));
}

#[test]
fn a_failure_found_with_a_config_and_no_swarm_replays_from_its_printed_command() {
    let dir = tmp("replay");
    let dir = dir.path();
    let cfg = dir.join("cfg.json");
    std::fs::write(&cfg, r#"{"max_nodes": 12}"#).expect("write");
    let cfg = cfg.display().to_string();
    let out = bin()
        .args(["campaign", "--cases", "256", "--config", &cfg, "--no-swarm", "--fault", "drop_last_delegate_output"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let cmd = text.lines().find_map(|l| l.strip_prefix("reproduce: ptecheck ")).expect("replay line");
    assert!(cmd.contains(&format!("--config {cfg}")) && cmd.contains("--no-swarm"), "{cmd}");
    let again = bin().args(cmd.split(' ')).output().expect("runs");
    assert_eq!(again.status.code(), Some(1), "{}", String::from_utf8_lossy(&again.stdout));
    assert!(String::from_utf8_lossy(&again.stdout).starts_with("cases 1  failures 1"));
}

#[test]
fn check_passes_a_real_file_and_lists_violations_of_a_bad_one() {
    let ok = bin().args(["check", &corpus("map_cpu")]).output().expect("runs");
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let dir = tmp("check");
    let dir = dir.path();
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
    let dir = tmp("emit");
    let dir = dir.path();
    for name in ptecheck::generator::examples::EXAMPLES {
        let json = bin().args(["emit", "--example", name, "--save-json"]).output().expect("runs");
        assert!(json.status.success());
        let jpath = dir.join(format!("{name}.json"));
        std::fs::write(&jpath, &json.stdout).expect("write");
        let (a, b) = (dir.join(format!("{name}-a.pte")), dir.join(format!("{name}-b.pte")));
        assert!(
            bin().args(["emit", "--example", name, "-o", a.to_str().expect("p")]).status().expect("runs").success()
        );
        assert!(
            bin()
                .args(["emit", jpath.to_str().expect("p"), "-o", b.to_str().expect("p")])
                .status()
                .expect("runs")
                .success()
        );
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
    assert_eq!(xnn.status.code(), Some(0), "{}", String::from_utf8_lossy(&xnn.stdout));
    assert!(String::from_utf8_lossy(&xnn.stdout).contains("largest ulp gap: 0"));
    // A delegate of a backend nobody registered: exit 3, named.
    let data = std::fs::read(corpus("xnn_single_partition")).expect("read");
    let loaded = ptecheck::format::load(&data).expect("loads");
    let mut program = loaded.program.clone();
    program.execution_plan.as_mut().expect("plans")[0].delegates.as_mut().expect("delegates")[0].id =
        Some("NoSuchBackend".into());
    let bytes = ptecheck::format::write(&program, &loaded.segments, &Default::default()).expect("writes");
    let dir = tmp("unknown");
    let dir = dir.path();
    let path = dir.join("unknown_backend.pte");
    std::fs::write(&path, bytes).expect("write");
    let io = corpus("xnn_single_partition").replace(".pte", ".io.json");
    let unknown = bin().args(["run", path.to_str().expect("utf8"), "--expect", &io]).output().expect("runs");
    assert_eq!(unknown.status.code(), Some(3));
    let said = String::from_utf8_lossy(&unknown.stdout);
    assert!(said.contains("not supported here (backend:NoSuchBackend)"), "{said}");
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

#[test]
fn inspect_lists_xnnpack_blob_values_nodes_and_constants() {
    let out = bin().args(["inspect", &corpus("xnn_single_partition")]).output().expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("xnnpack XN01 (header: flatbuffer 32+1144, constants 1184+0); 7 values, 2 nodes, 4 constants"),
        "{text}"
    );
    assert!(
        text.contains("node 0: XNNFullyConnected(input1=0, filter=1, bias=2 -> 3) flags 0x0 clamp [0, inf]"),
        "{text}"
    );
    assert!(text.contains("value 6: id 6 Fp32 [2, 4] external output 1"), "{text}");
    assert!(text.contains("constant 4: named \"1b26f8bd"), "{text}");
    let out = bin().args(["inspect", "--json", &corpus("xnn_single_partition")]).output().expect("runs");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let x = &v["delegates_resolved"]["forward"][0]["xnnpack"];
    assert!(x["verify_error"].is_null(), "{x}");
    assert_eq!(x["blob"]["graph"]["nodes"].as_array().map(Vec::len), Some(2));
    assert_eq!(x["blob"]["graph"]["nodes"][0]["node_type"], "XNNFullyConnected");
    assert_eq!(x["blob"]["graph"]["values"][1]["constant_buffer_idx"], 1);
    // Not an XNNPACK delegate: no member.
    let out = bin().args(["inspect", "--json", &corpus("demo_backend_whole_module")]).output().expect("runs");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(v["delegates_resolved"]["forward"][0]["xnnpack"].is_null());
}

#[test]
fn flags_a_command_would_ignore_are_refused_as_usage_errors() {
    let pte = corpus("cpu_add_mul");
    let io = format!("{}/corpus/real/cpu_add_mul.io.json", env!("CARGO_MANIFEST_DIR"));
    // --expect replays the document's methods and inputs: --method and --inputs would be ignored.
    for extra in [["--method", "forward"], ["--inputs", io.as_str()]] {
        let out = bin().args(["run", &pte, "--expect", &io]).args(extra).output().expect("runs");
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"), "{extra:?}");
    }
    // --save-json prints JSON and emits nothing: -o and --listing would be ignored.
    let dir = tmp("save-json");
    let out_pte = dir.path().join("x.pte").display().to_string();
    for extra in [vec!["-o", out_pte.as_str()], vec!["--listing"]] {
        let example = ptecheck::generator::examples::EXAMPLES[0];
        let out = bin().args(["emit", "--example", example, "--save-json"]).args(&extra).output().expect("runs");
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(!dir.path().join("x.pte").exists());
}

#[test]
fn inspecting_several_files_as_json_names_the_file_of_every_document() {
    let dir = tmp("several");
    let good = std::fs::read(corpus("cpu_add_mul")).expect("read");
    std::fs::write(dir.path().join("a-bad.pte"), &good[..100]).expect("write");
    std::fs::write(dir.path().join("b-good.pte"), &good).expect("write");
    let out = bin().args(["inspect", "--json", &dir.path().display().to_string()]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2), "one file is refused");
    let docs: Vec<serde_json::Value> = serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("json documents");
    assert_eq!(docs.len(), 2, "a refused file has a document too");
    assert!(docs[0]["file"].as_str().is_some_and(|f| f.ends_with("a-bad.pte")) && docs[0]["error"].is_string());
    assert!(docs[1]["file"].as_str().is_some_and(|f| f.ends_with("b-good.pte")) && docs[1]["error"].is_null());
    // One file: the document is as before, without a `file` member.
    let one = bin().args(["inspect", "--json", &corpus("cpu_add_mul")]).output().expect("runs");
    let v: serde_json::Value = serde_json::from_slice(&one.stdout).expect("json");
    assert!(v.get("file").is_none());
}

/// `corpus/kernels/NAME.pte` with `edit` applied to its program, written to `dir/out`.
fn edited_kernel_file(
    name: &str,
    dir: &std::path::Path,
    out: &str,
    edit: impl FnOnce(&mut ptecheck::program::Program),
) -> String {
    let path = format!("{}/corpus/kernels/{name}.pte", env!("CARGO_MANIFEST_DIR"));
    let data = std::fs::read(path).expect("read");
    let loaded = ptecheck::format::load(&data).expect("loads");
    let mut p = loaded.program.clone();
    edit(&mut p);
    let bytes = ptecheck::format::write(&p, &loaded.segments, &Default::default()).expect("writes");
    let file = dir.join(out);
    std::fs::write(&file, bytes).expect("write");
    file.to_str().expect("utf8").to_string()
}

#[test]
fn a_valid_file_using_what_the_runtime_lacks_is_unsupported_not_invalid() {
    let dir = tmp("unsupported");
    let dir = dir.path();
    // A kernel the runtime here lacks: exit 3, naming it; `run` says the same.
    let missing = edited_kernel_file("clone_dim_order", dir, "missing_kernel.pte", |p| {
        let plan = &mut p.execution_plan.as_mut().expect("plans")[0];
        for o in plan.operators.as_mut().expect("operators") {
            if o.name.as_deref() == Some("dim_order_ops::_clone_dim_order") {
                o.name = Some("aten::erfinv".into());
            }
        }
    });
    let out = bin().args(["check", &missing]).output().expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("valid, but not supported here: kernel:aten::erfinv.out"), "{text}");
    assert!(!text.contains("violation"), "{text}");
    let run = bin().args(["run", &missing]).output().expect("runs");
    assert_eq!(run.status.code(), Some(3), "{}", String::from_utf8_lossy(&run.stderr));
    // Against a runner: not compared, not "DIFFERENT", whatever the runner did.
    let runner = format!("{} runner", env!("CARGO_BIN_EXE_ptecheck"));
    let vs = bin().args(["run", &missing, "--runner", &runner]).output().expect("runs");
    let said = String::from_utf8_lossy(&vs.stdout);
    assert_eq!(vs.status.code(), Some(3), "{said}");
    assert!(said.contains("forward: not supported here (kernel:aten::erfinv.out)"), "{said}");
    assert!(!said.contains("DIFFERENT"), "{said}");
    // `inspect --json` gives the same verdict.
    let doc = bin().args(["inspect", "--json", &missing]).output().expect("runs");
    let doc: serde_json::Value = serde_json::from_slice(&doc.stdout).expect("json");
    assert_eq!(doc["verdict"]["verdict"], "not_supported_here", "{doc}");
    assert_eq!(doc["verdict"]["unsupported"], serde_json::json!(["kernel:aten::erfinv.out"]));
    // A rule broken as well: exit 2, with the rule.
    let broken = edited_kernel_file("clone_dim_order", dir, "missing_and_broken.pte", |p| {
        let plan = &mut p.execution_plan.as_mut().expect("plans")[0];
        for o in plan.operators.as_mut().expect("operators") {
            o.name = Some("aten::erfinv".into());
        }
        if let Some(ptecheck::program::Instruction::KernelCall(k)) =
            plan.chains.as_mut().expect("chains")[0].instructions.as_mut().expect("instrs").first_mut()
        {
            k.op_index = 99;
        }
    });
    let out = bin().args(["check", &broken]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
    let doc = bin().args(["inspect", "--json", &broken]).output().expect("runs");
    let doc: serde_json::Value = serde_json::from_slice(&doc.stdout).expect("json");
    assert_eq!(doc["verdict"]["verdict"], "breaks_a_rule", "{doc}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("names operator 99"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A backend the runtime here lacks: exit 3, naming it.
    let data = std::fs::read(corpus("xnn_single_partition")).expect("read");
    let loaded = ptecheck::format::load(&data).expect("loads");
    let mut p = loaded.program.clone();
    for d in p.execution_plan.as_mut().expect("plans")[0].delegates.as_mut().expect("delegates") {
        d.id = Some("QnnBackend".into());
    }
    let file = dir.join("qnn.pte");
    std::fs::write(&file, ptecheck::format::write(&p, &loaded.segments, &Default::default()).expect("writes"))
        .expect("write");
    let out = bin().args(["check", file.to_str().expect("utf8")]).output().expect("runs");
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("backend:QnnBackend"));
}

/// `ptecheck diff`: the reference emitter's denoise loop (one shared delegate) against what
/// ExecuTorch 1.5.1 emitted (one per call) differs in delegates and in each site's delegate; the
/// same example emitted without sharing has ExecuTorch's structure; a non-program is refused.
#[test]
fn diff_shows_how_two_emitters_structure_one_program() {
    let dir = tempfile::tempdir().expect("tempdir");
    let theirs = format!("{}/corpus/emitted/examples/example-denoise-loop/exported.pte", env!("CARGO_MANIFEST_DIR"));
    let emit = |name: &str, extra: &[&str]| {
        let path = dir.path().join(name).display().to_string();
        let mut args = vec!["emit", "--example", "denoise-loop", "-o", &path];
        args.extend(extra);
        assert!(bin().args(&args).output().expect("runs").status.success());
        path
    };
    let (shared, apart) = (emit("shared.pte", &[]), emit("apart.pte", &["--no-share"]));
    let out = bin().args(["diff", &shared, &theirs]).output().expect("runs");
    let s = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{s}");
    assert_eq!(
        s.lines().collect::<Vec<_>>(),
        [
            "plan forward: 1 delegates vs 10",
            "plan forward: call sites name delegates [0, 0, 0, 0, 0, 0, 0, 0, 0, 0] vs [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"
        ]
    );
    let out = bin().args(["diff", &apart, &theirs]).output().expect("runs");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "same structure: 1 plan(s), 1 distinct blob(s)");
    let readme = format!("{}/README.md", env!("CARGO_MANIFEST_DIR"));
    let out = bin().args(["diff", &apart, &readme]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("README.md"));
}
