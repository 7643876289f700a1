//! Multi-function figures (`cargo bench --bench multifn`), side by side in one run: file bytes
//! with the option on/off; model loads and resident bytes for K = 1, 2, 4, 8 delegates with
//! sharing off and on; and an 8-thread x 50-run stress on one shared model.

#![forbid(unsafe_code)]

use ptecheck::backends::default_backends_with;
use ptecheck::backends::multifn::{ID, MULTIFUNCTION_SPEC, MethodPartitions, MultifnBackend, SHARE_OPTION, export};
use ptecheck::emit::{EmitOptions, emit};
use ptecheck::format;
use ptecheck::generator::examples::{MF_WIDTH, multifunction};
use ptecheck::ir::build::{GraphBuilder, f32_const, f32_tensor};
use ptecheck::ir::eval::{eval_method, sample_inputs};
use ptecheck::ir::{IrMethod, IrProgram, Op};
use ptecheck::oracle::values::encode as to_host;
use ptecheck::runtime::{OptionValue, Runtime, Trace};
use std::sync::Arc;
use std::time::Instant;

/// One method with K partitions sharing one weight set, separated by CPU relus.
fn k_partitions(k: usize, on: bool) -> IrProgram {
    let n = MF_WIDTH;
    let w: Vec<f64> = (0..n * n).map(|i| ((i % 13) as f64 - 6.0) / 64.0).collect();
    let part = || {
        let mut g = GraphBuilder::new(
            vec![f32_const(vec![n, n], w.clone()), f32_const(vec![n], vec![0.0; n])],
            vec![f32_tensor(vec![2, n])],
        );
        let y = g.op(Op::Linear, &[g.input(0), g.constant(0), g.constant(1)]);
        g.finish(&[y])
    };
    let specs = if on { vec![(MULTIFUNCTION_SPEC.to_string(), vec![1u8])] } else { vec![] };
    let (modules, named_data) = export(&[MethodPartitions {
        method: "forward".into(),
        partitions: (0..k).map(|_| (part(), specs.clone())).collect(),
    }])
    .expect("export");
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![2, n])]);
    let mut v = g.input(0);
    for i in 0..k {
        v = g.call(i, &[v], 1)[0];
        v = g.op(Op::Relu, &[v]);
    }
    IrProgram { methods: vec![IrMethod { name: "forward".into(), graph: g.finish(&[v]) }], modules, named_data }
}

fn runtime(share: bool, dir: &std::path::Path) -> (Runtime, Arc<MultifnBackend>) {
    let mf = Arc::new(MultifnBackend::default());
    let mut rt = Runtime::with_backends(default_backends_with(mf.clone()));
    rt.options.set(ID, SHARE_OPTION, OptionValue::Bool(share)).expect("option");
    rt.options.set(ID, "cache_dir", OptionValue::Str(dir.to_string_lossy().into())).expect("option");
    (rt, mf)
}

fn main() {
    // Removed when dropped, also when the bench fails.
    let dir = tempfile::Builder::new().prefix("ptecheck-bench-mf-").tempdir().expect("temporary directory");
    let dir = dir.path();
    let bytes = |p: &IrProgram| emit(p, &EmitOptions::default()).expect("emit").to_bytes().expect("write");
    let (on, off) = (bytes(&multifunction(true)), bytes(&multifunction(false)));
    println!("example multifunction (2 methods x 2 partitions, width {MF_WIDTH}):");
    println!("  option on : {:>7} bytes", on.len());
    println!("  option off: {:>7} bytes  (on/off = {:.2})", off.len(), on.len() as f64 / off.len() as f64);

    println!("\nK delegates of one bundle, all loaded together:");
    println!(
        "  {:>2}  {:>14} {:>16}  {:>13} {:>15}",
        "K", "loads (off)", "resident (off)", "loads (on)", "resident (on)"
    );
    for k in [1usize, 2, 4, 8] {
        let b = bytes(&k_partitions(k, true));
        let l = format::load(&b).expect("load");
        let mut row = Vec::new();
        for share in [false, true] {
            let (rt, mf) = runtime(share, dir);
            let m = rt.load_method(&l, "forward", None, &Trace::default()).expect("loads");
            let (loads, _, resident) = mf.table.totals();
            drop(m);
            row.push((loads, resident));
        }
        println!("  {k:>2}  {:>14} {:>16}  {:>13} {:>15}", row[0].0, row[0].1, row[1].0, row[1].1);
    }

    let p = multifunction(true);
    let l = format::load(&on).expect("load");
    let (rt, mf) = runtime(true, dir);
    let serial: Vec<_> =
        p.methods.iter().map(|m| eval_method(&p, &m.name, &sample_inputs(&m.graph, 5)).expect("eager")).collect();
    let start = Instant::now();
    let mismatches = std::sync::atomic::AtomicUsize::new(0);
    // Every thread holds its methods for the whole run, so the model stays loaded throughout.
    let (loaded_all, done_all) = (std::sync::Barrier::new(8), std::sync::Barrier::new(8));
    std::thread::scope(|s| {
        for t in 0..8 {
            let (rt, l, p, serial, mismatches) = (&rt, &l, &p, &serial, &mismatches);
            let (loaded_all, done_all) = (&loaded_all, &done_all);
            s.spawn(move || {
                let trace = Trace::default();
                let mut ms: Vec<_> =
                    p.methods.iter().map(|m| rt.load_method(l, &m.name, None, &trace).expect("load")).collect();
                loaded_all.wait();
                for run in 0..50 {
                    let k = (t + run) % 2;
                    for (i, v) in sample_inputs(&p.methods[k].graph, 5).iter().enumerate() {
                        ms[k].set_input(i, &to_host(v)).expect("input");
                    }
                    ms[k].execute().expect("run");
                    let want: Vec<_> = serial[k].iter().map(to_host).collect();
                    if ms[k].outputs().expect("outputs") != want {
                        mismatches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                done_all.wait();
            });
        }
    });
    let (loads, live, _) = mf.table.totals();
    println!(
        "\nstress: 8 threads x 50 runs on one shared model: {} mismatches vs serial, {loads} model load(s), {live} live after, {:.1} ms",
        mismatches.into_inner(),
        start.elapsed().as_secs_f64() * 1e3
    );
}
