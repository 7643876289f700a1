//! Multi-function bundles and one shared loaded model (semantics.md C.3, P8-P11).

#![forbid(unsafe_code)]

use ptecheck::backends::multifn::table::{AcquireError, ModelKey, ModelTable, Resident};
use ptecheck::backends::multifn::{
    ExportError, MULTIFUNCTION_SPEC, MethodPartitions, MultifnBackend, export, parse_manifest,
};
use ptecheck::backends::{default_backends_with, multifn};
use ptecheck::emit::{EmitOptions, emit};
use ptecheck::format;
use ptecheck::generator::examples::{MF_WIDTH, example, multifunction};
use ptecheck::ir::build::{GraphBuilder, f32_const, f32_tensor};
use ptecheck::ir::eval::{eval_method, sample_inputs};
use ptecheck::ir::{Graph, IrMethod, IrProgram, Op};
use ptecheck::oracle::values::encode as to_host;
use ptecheck::runtime::{ErrorCode, HostValue, OptionValue, Runtime, RuntimeError, Trace};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

/// A fresh temporary directory, removed when dropped (also when a test fails).
fn tmpdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("ptecheck-mf-{name}-")).tempdir().expect("temporary directory")
}

fn bytes_of(p: &IrProgram) -> Vec<u8> {
    emit(p, &EmitOptions::default()).expect("emits").to_bytes().expect("writes")
}

fn runtime(share: bool, dir: &Path, units: &str) -> (Runtime, Arc<MultifnBackend>) {
    let mf = Arc::new(MultifnBackend::default());
    let mut rt = Runtime::with_backends(default_backends_with(mf.clone()));
    rt.options.set(multifn::ID, multifn::SHARE_OPTION, OptionValue::Bool(share)).expect("opt");
    rt.options.set(multifn::ID, "cache_dir", OptionValue::Str(dir.to_string_lossy().into())).expect("opt");
    rt.options.set(multifn::ID, "compute_units", OptionValue::Str(units.into())).expect("opt");
    (rt, mf)
}

#[test]
fn mf2_one_bundle_one_function_per_partition_named_method_index() {
    let p = multifunction(true);
    let functions: Vec<String> =
        p.modules.iter().map(|m| parse_manifest(&m.processed).expect("manifest").function).collect();
    assert_eq!(functions, ["forward_0", "forward_1", "prefill_0", "prefill_1"]);
    let hashes: std::collections::BTreeSet<String> =
        p.modules.iter().map(|m| parse_manifest(&m.processed).expect("m").export_hash).collect();
    assert_eq!(hashes.len(), 1, "one bundle");
    let keys: Vec<&str> = p.named_data.iter().map(|n| n.key.as_str()).collect();
    let h = hashes.iter().next().expect("hash");
    assert_eq!(keys, [format!("{h}/model.json"), format!("{h}/weights.bin")]);
}

#[test]
fn mf3_the_bundle_is_stored_once_and_weights_once() {
    let on = bytes_of(&multifunction(true));
    let off = bytes_of(&multifunction(false));
    let l = format::load(&on).expect("loads");
    assert_eq!(l.named_data.len(), 2);
    let weights =
        l.named_data_map().iter().find(|(k, _)| k.ends_with("weights.bin")).map(|(_, b)| b.len()).expect("weights");
    assert_eq!(
        weights,
        2 * (MF_WIDTH * MF_WIDTH + MF_WIDTH) * 4,
        "two layers' weights, each stored once for both methods"
    );
    assert!(on.len() * 10 < off.len() * 7, "on {} B vs off {} B", on.len(), off.len());
    // A two-method bundle is about a one-method one plus small per-function overhead.
    let one = {
        let mut p = multifunction(true);
        p.methods.truncate(1);
        let (modules, named) = export(&[MethodPartitions {
            method: "forward".into(),
            partitions: p
                .modules
                .iter()
                .take(2)
                .map(|m| (m.graph.clone(), vec![(MULTIFUNCTION_SPEC.into(), vec![1])]))
                .collect(),
        }])
        .expect("exports");
        IrProgram { methods: p.methods, modules, named_data: named }
    };
    let one = bytes_of(&one);
    assert!(on.len() < one.len() + one.len() / 2, "two methods {} B vs one method {} B", on.len(), one.len());
}

#[test]
fn mf4_manifests_are_distinct_per_delegate_and_validated() {
    let p = multifunction(true);
    let blobs: std::collections::BTreeSet<&Vec<u8>> = p.modules.iter().map(|m| &m.processed).collect();
    assert_eq!(blobs.len(), 4, "distinct manifests, so no BackendDelegate sharing arises");
    // Each rejection says what is wrong (a well-formed manifest takes a faster path).
    let err = |b: &[u8]| parse_manifest(b).expect_err("rejected").to_string();
    let e = err(br#"{"function":"f","input_names":[],"output_names":[],"multifunction":"yes","export_hash":"h","path":"h","files":[]}"#);
    assert!(e.contains("`multifunction` is not a boolean"), "{e}");
    let e = err(br#"{"function":"f"}"#);
    assert!(e.contains("missing field `input_names`"), "{e}");
    let e = err(b"not json");
    assert!(e.contains("manifest is not JSON"), "{e}");
    let ok = parse_manifest(
        br#"{"function":"f","input_names":[],"output_names":[],"export_hash":"h","path":"h","files":[]}"#,
    )
    .expect("ok");
    assert_eq!(ok.multifunction, None, "absent means false");
}

fn partition() -> Graph {
    let mut g = GraphBuilder::new(vec![f32_const(vec![4], vec![1.0; 4])], vec![f32_tensor(vec![2, 4])]);
    let y = g.op(Op::Mul, &[g.input(0), g.constant(0)]);
    g.finish(&[y])
}

fn mp(method: &str, specs: Vec<(&str, Vec<u8>)>) -> MethodPartitions {
    MethodPartitions {
        method: method.into(),
        partitions: vec![(partition(), specs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())],
    }
}

#[test]
fn mf6_export_errors_name_the_methods() {
    let on = || vec![(MULTIFUNCTION_SPEC, vec![1])];
    let e = export(&[mp("forward", on()), mp("prefill", vec![])]).expect_err("mixed");
    assert_eq!(e, ExportError::MixedOption { with: vec!["forward".into()], without: vec!["prefill".into()] });
    let mut other = on();
    other.push(("precision", vec![16]));
    let e = export(&[mp("forward", on()), mp("prefill", other)]).expect_err("specs");
    assert_eq!(e, ExportError::DifferentSpecs { first: "forward".into(), second: "prefill".into() });
    let mut en = on();
    en.push(("input_enumerations", vec![2]));
    let e = export(&[mp("forward", en.clone()), mp("prefill", en)]).expect_err("enumerations");
    assert!(
        matches!(&e, ExportError::InputEnumerations { methods } if methods == &["forward".to_string(), "prefill".to_string()])
    );
    assert!(export(&[mp("forward", vec![]), mp("prefill", vec![])]).is_ok(), "option off: one model per delegate");
    // The weights file holds float32: a constant it cannot hold exactly (an int64 above 2^24,
    // 0.1 as a double) is refused, with or without the option, not stored rounded.
    for value in [16_777_217.0, 0.1] {
        let mut m = mp("forward", on());
        m.partitions[0].0.constants[0].values[1] = value;
        for specs in [on(), vec![]] {
            m.partitions[0].1 = specs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            let e = export(std::slice::from_ref(&m)).expect_err("not a float32");
            assert_eq!(
                e,
                ExportError::WeightNotFloat32 { function: "forward_0".into(), constant: 0, value: value.to_string() }
            );
        }
    }
}

/// (loads, live, resident) while loaded, and each method's outputs.
type Loaded = ((usize, usize, usize), Vec<Vec<HostValue>>);

/// Loads both methods (4 delegates) together; returns (loads, live, resident) while loaded,
/// and the outputs.
fn load_all(bytes: &[u8], rt: &Runtime, mf: &MultifnBackend) -> Result<Loaded, RuntimeError> {
    let l = format::load(bytes).expect("loads");
    let p = multifunction(true);
    let trace = Trace::default();
    let mut methods = Vec::new();
    for m in &p.methods {
        methods.push(rt.load_method(&l, &m.name, None, &trace)?);
    }
    let mut outs = Vec::new();
    for (m, ir) in methods.iter_mut().zip(&p.methods) {
        for (i, v) in sample_inputs(&ir.graph, 5).iter().enumerate() {
            m.set_input(i, &to_host(v))?;
        }
        m.execute()?;
        outs.push(m.outputs()?);
    }
    let totals = mf.table.totals();
    drop(methods);
    assert_eq!(mf.table.totals().1, 0, "the last release unloads");
    Ok((totals, outs))
}

fn eager() -> Vec<Vec<HostValue>> {
    let p = multifunction(true);
    p.methods
        .iter()
        .map(|m| eval_method(&p, &m.name, &sample_inputs(&m.graph, 5)).expect("eager").iter().map(to_host).collect())
        .collect()
}

#[test]
fn mf7_mf9_sharing_off_loads_per_delegate_on_loads_once() {
    let dir = tmpdir("share");
    let dir = dir.path();
    let bytes = bytes_of(&multifunction(true));
    let (rt, mf) = runtime(false, dir, "all");
    let ((loads, live, resident), outs) = load_all(&bytes, &rt, &mf).expect("runs");
    assert_eq!((loads, live), (4, 4));
    assert_eq!(outs, eager());
    let (rt, mf) = runtime(true, dir, "all");
    let ((loads_on, live_on, resident_on), outs_on) = load_all(&bytes, &rt, &mf).expect("runs");
    assert_eq!((loads_on, live_on), (1, 1));
    assert_eq!(resident_on * 4, resident, "one resident copy instead of four");
    assert_eq!(outs_on, outs);
}

#[test]
fn mf8_option_on_a_non_multifunction_delegate_or_of_the_wrong_type_is_invalid_argument() {
    let dir = tmpdir("p8");
    let dir = dir.path();
    let off = bytes_of(&multifunction(false));
    let (rt, mf) = runtime(true, dir, "all");
    let e = load_all(&off, &rt, &mf).expect_err("rejected");
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    let (mut rt, mf) = runtime(true, dir, "all");
    rt.options.set(multifn::ID, multifn::SHARE_OPTION, OptionValue::Int(1)).expect("opt");
    let e = load_all(&bytes_of(&multifunction(true)), &rt, &mf).expect_err("rejected");
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
}

#[test]
fn mf10_symlinked_directory_shares_other_directories_or_units_do_not() {
    let dir = tmpdir("real");
    let dir = dir.path();
    let links = tmpdir("link");
    let link = links.path().join("link");
    std::os::unix::fs::symlink(dir, &link).expect("symlink");
    let other = tmpdir("other");
    let other = other.path();
    let bytes = bytes_of(&multifunction(true));
    let l = format::load(&bytes).expect("loads");
    let mf = Arc::new(MultifnBackend::default());
    let make = |d: &Path, units: &str| {
        let mut rt = Runtime::with_backends(default_backends_with(mf.clone()));
        rt.options.set(multifn::ID, multifn::SHARE_OPTION, OptionValue::Bool(true)).expect("opt");
        rt.options.set(multifn::ID, "cache_dir", OptionValue::Str(d.to_string_lossy().into())).expect("opt");
        rt.options.set(multifn::ID, "compute_units", OptionValue::Str(units.into())).expect("opt");
        rt
    };
    let t = Trace::default();
    let a = make(dir, "all").load_method(&l, "forward", None, &t).expect("a");
    let b = make(&link, "all").load_method(&l, "prefill", None, &t).expect("b");
    assert_eq!(mf.table.totals().0, 1, "a symlink to the same directory shares");
    let c = make(other, "all").load_method(&l, "forward", None, &t).expect("c");
    let d = make(dir, "cpu_only").load_method(&l, "forward", None, &t).expect("d");
    assert_eq!(mf.table.totals(), (3, 3, 3 * mf.table.stats()[0].1.resident_bytes));
    drop((a, b, c, d));
    assert_eq!(mf.table.totals().1, 0);
}

#[test]
fn p11_unopenable_cache_directory_is_access_failed() {
    let bytes = bytes_of(&multifunction(true));
    let (rt, mf) = runtime(true, Path::new("/nonexistent/ptecheck/cache"), "all");
    let e = load_all(&bytes, &rt, &mf).expect_err("rejected");
    assert_eq!(e.code(), ErrorCode::AccessFailed, "{e}");
    assert_eq!(mf.table.totals(), (0, 0, 0));
}

#[derive(Debug)]
struct Dummy(usize);
impl Resident for Dummy {
    fn resident_bytes(&self) -> usize {
        self.0
    }
}

fn key(k: &str) -> ModelKey {
    ModelKey { dev: 1, ino: 2, cache_key: k.into() }
}

#[test]
fn mf11_concurrent_first_acquisitions_load_exactly_once() {
    for _ in 0..20 {
        // A bounded wait: a load that never publishes fails this test in seconds, not never.
        let table = Arc::new(ModelTable::<Dummy>::with_wait_limit(std::time::Duration::from_secs(5)));
        let loads = Arc::new(AtomicUsize::new(0));
        let barrier = Arc::new(Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (table, loads, barrier) = (table.clone(), loads.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let m = table.acquire(&key("k"), || {
                        loads.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, ()>(Dummy(64))
                    });
                    assert!(m.is_ok());
                })
            })
            .collect();
        for h in handles {
            h.join().expect("thread");
        }
        assert_eq!(loads.load(Ordering::SeqCst), 1);
        assert_eq!(table.totals(), (1, 1, 64));
        for _ in 0..7 {
            assert!(!table.release(&key("k")));
        }
        assert!(table.release(&key("k")), "the eighth release unloads");
        assert_eq!(table.totals(), (1, 0, 0));
    }
}

#[test]
fn a_wait_for_another_threads_load_is_bounded() {
    // A load that takes longer than the wait limit: the waiter gets a typed error naming the
    // key, the loader still publishes its model.
    let limit = std::time::Duration::from_millis(200);
    let table = Arc::new(ModelTable::<Dummy>::with_wait_limit(limit));
    let started = Arc::new(Barrier::new(2));
    let loader = {
        let (table, started) = (table.clone(), started.clone());
        std::thread::spawn(move || {
            table
                .acquire(&key("k"), || {
                    started.wait();
                    std::thread::sleep(limit * 5);
                    Ok::<_, ()>(Dummy(8))
                })
                .is_ok()
        })
    };
    started.wait();
    // Unbounded, it would wait for the load and get the model.
    let waited = table.acquire(&key("k"), || Ok::<_, ()>(Dummy(8)));
    assert!(
        matches!(&waited, Err(AcquireError::Wait { key: k, waited }) if k.cache_key == "k" && *waited >= limit),
        "{:?}",
        waited.err()
    );
    assert!(loader.join().expect("loader"));
    assert_eq!(table.totals(), (1, 1, 8));
}

#[test]
fn mf11_a_failed_load_leaves_no_entry_and_the_next_acquire_loads() {
    let table = ModelTable::<Dummy>::with_wait_limit(std::time::Duration::from_secs(5));
    assert_eq!(
        table.acquire(&key("k"), || Err::<Dummy, &str>("disk on fire")).err(),
        Some(AcquireError::Load("disk on fire"))
    );
    assert_eq!(table.totals(), (0, 0, 0));
    assert_eq!(table.entries(), 0, "no entry left behind");
    assert!(table.acquire(&key("k"), || Ok::<_, &str>(Dummy(8))).is_ok());
    assert_eq!(table.stats()[0].1.failed_loads, 1);
    assert_eq!(table.totals(), (1, 1, 8));
}

#[test]
fn mf12_eight_threads_fifty_runs_each_on_one_shared_model_equal_serial() {
    let dir = tmpdir("stress");
    let dir = dir.path();
    let bytes = bytes_of(&multifunction(true));
    let l = format::load(&bytes).expect("loads");
    let (rt, mf) = runtime(true, dir, "all");
    let p = multifunction(true);
    let serial = eager();
    // Every thread holds its methods for the whole run, so the model stays loaded throughout.
    let loaded_all = Barrier::new(8);
    let done_all = Barrier::new(8);
    std::thread::scope(|s| {
        for t in 0..8 {
            let (rt, l, p, serial, loaded_all, done_all) = (&rt, &l, &p, &serial, &loaded_all, &done_all);
            s.spawn(move || {
                let trace = Trace::default();
                let mut methods: Vec<_> =
                    p.methods.iter().map(|m| rt.load_method(l, &m.name, None, &trace).expect("loads")).collect();
                loaded_all.wait();
                for run in 0..50 {
                    let k = (t + run) % 2;
                    for (i, v) in sample_inputs(&p.methods[k].graph, 5).iter().enumerate() {
                        methods[k].set_input(i, &to_host(v)).expect("input");
                    }
                    methods[k].execute().expect("runs");
                    assert_eq!(methods[k].outputs().expect("outputs"), serial[k], "thread {t} run {run}");
                }
                done_all.wait();
            });
        }
    });
    let stats = mf.table.stats();
    assert_eq!(stats.len(), 1);
    assert_eq!(
        (stats[0].1.loads, stats[0].1.live),
        (1, false),
        "one load for 8 threads x 4 delegates; unloaded at the end"
    );
}

#[test]
fn multifunction_examples_emit_and_run_against_eager() {
    for name in ["multifunction", "multifunction-off"] {
        let p = example(name).expect("example");
        let r = ptecheck::oracle::check_ir(&p, &Default::default());
        assert!(r.ok(), "{name}: {:?}", r.failures);
    }
    let p = IrProgram {
        methods: vec![IrMethod { name: "forward".into(), graph: partition() }],
        modules: vec![],
        named_data: vec![],
    };
    assert!(ptecheck::oracle::check_ir(&p, &Default::default()).ok());
}

#[test]
fn compiled_bundles_are_cached_by_index_and_weights_together() {
    // Same bundle index, other weights: the functions must be compiled again (a cache keyed by
    // the index alone would run the old weights).
    let dir = tmpdir("cache-key");
    let dir = dir.path();
    let mut emitted = emit(&multifunction(true), &EmitOptions::default()).expect("emits");
    let (rt, mf) = runtime(true, dir, "all");
    let (_, first) = load_all(&emitted.to_bytes().expect("writes"), &rt, &mf).expect("runs");
    assert_eq!(first, eager());
    let named = emitted.program.named_data.clone().unwrap_or_default();
    let weights = named
        .iter()
        .find(|n| n.key.as_deref().is_some_and(|k| k.ends_with("/weights.bin")))
        .expect("a weights blob")
        .segment_index as usize;
    for w in emitted.segment_data[weights].chunks_exact_mut(4) {
        let x = f32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        w.copy_from_slice(&(x * 0.5 + 0.25).to_le_bytes());
    }
    let (rt, mf) = runtime(true, dir, "all");
    let (_, other) = load_all(&emitted.to_bytes().expect("writes"), &rt, &mf).expect("runs");
    assert_ne!(other, first, "other weights, other outputs");
    // Exactly what the new weights give compiled afresh, with an empty cache.
    let fresh_dir = tmpdir("cache-key-fresh");
    let (rt, mf) = runtime(true, fresh_dir.path(), "all");
    let (_, fresh) = load_all(&emitted.to_bytes().expect("writes"), &rt, &mf).expect("runs");
    assert_eq!(other, fresh, "the cached run computes what a fresh compile of the new weights does");
}

#[test]
fn a_bundle_function_with_more_or_fewer_weight_references_than_constants_is_refused() {
    let dir = tmpdir("weight-refs");
    let dir = dir.path();
    let emitted = emit(&multifunction(true), &EmitOptions::default()).expect("emits");
    let named = emitted.program.named_data.clone().unwrap_or_default();
    let index = named
        .iter()
        .find(|n| n.key.as_deref().is_some_and(|k| k.ends_with("/model.json")))
        .expect("a bundle index")
        .segment_index as usize;
    for edit in [-1i32, 1] {
        let mut e = emitted.clone();
        let mut doc: serde_json::Value = serde_json::from_slice(&e.segment_data[index]).expect("json");
        let function = doc["functions"].as_object_mut().expect("functions").values_mut().next().expect("a function");
        // One reference fewer, or one constant fewer (so one reference more than constants).
        let list = if edit < 0 { &mut function["weights"] } else { &mut function["graph"]["constants"] };
        list.as_array_mut().expect("a list").pop();
        // Padded with JSON whitespace to the segment's recorded size.
        let mut edited = serde_json::to_vec(&doc).expect("json");
        edited.resize(e.segment_data[index].len(), b' ');
        e.segment_data[index] = edited;
        let (rt, mf) = runtime(true, dir, "all");
        let err = load_all(&e.to_bytes().expect("writes"), &rt, &mf).expect_err("refused");
        assert!(err.to_string().contains("weight references for"), "{edit}: {err}");
    }
}
