//! Each bound rule at its edge: a hand-built program whose output is bounded by the rule, the
//! rule's bound written out here from its statement (docs/xnnpack.md, `ir::bound`), a recorded
//! value exactly at the edge that passes, and the next float32 past it that fails.

#![forbid(unsafe_code)]

mod common;

use pte::xnnpack::{
    ConstantEntry, FLAG_EXTERNAL_INPUT, FLAG_EXTERNAL_OUTPUT, NodeType, Payload, TensorValue, XNode, XValue, XnnGraph,
};
use ptecheck::backends::{default_runtime, xnnpack};
use ptecheck::bounds::{self, Bounded};
use ptecheck::emit::{EmitOptions, emit};
use ptecheck::format;
use ptecheck::ir::bound::{Bound, XNNPACK_ACCURACY, ulp};
use ptecheck::ir::build::{GraphBuilder, f32_const, f32_tensor};
use ptecheck::ir::value::{Data, Tensor, Val};
use ptecheck::ir::{Graph, IrMethod, IrProgram, LoweredModule, Node, Op};
use ptecheck::oracle::values::{Verdict, compare, encode};
use ptecheck::runtime::Session;
use ptecheck::runtime::verdict::LoadVerdict;

/// Sigmoid's measured ulps.
const SIGMOID_ULPS: f64 = 4.0;

/// Unit roundoff of float32.
const U: f64 = 1.0 / (1u64 << 24) as f64;

fn gamma(n: usize) -> f64 {
    n as f64 * U / (1.0 - n as f64 * U)
}

fn vec_val(v: &[f32]) -> Val {
    Val::Tensor(Tensor { shape: vec![v.len()], data: Data::F32(v.to_vec()) })
}

/// `forward(x) = module(x)`, or `graph` itself when there is no module.
fn program(method: Graph, module: Option<LoweredModule>, named: Vec<ptecheck::ir::NamedBlob>) -> IrProgram {
    IrProgram {
        methods: vec![IrMethod { name: "forward".into(), graph: method }],
        modules: module.into_iter().collect(),
        named_data: named,
    }
}

/// Runs `forward` of `p` on `inputs` in the reference runtime and bounds its outputs.
fn bounded(p: &IrProgram, inputs: &[Val]) -> Bounded {
    let bytes = emit(p, &EmitOptions::default()).expect("emits").to_bytes().expect("writes");
    let loaded = format::load(&bytes).expect("loads");
    let rt = default_runtime();
    let session = Session::new(&loaded, &rt);
    let host: Vec<_> = inputs.iter().map(encode).collect();
    bounds::run(&session, "forward", &host, false).expect("runs")
}

/// A method that calls module 0 on one float32 input of `n` elements.
fn calling(n: usize) -> Graph {
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![n])]);
    let out = g.node(Node::Call { module: 0, args: vec![g.input(0)] }, 1)[0];
    g.finish(&[out])
}

/// An fp32 XNNPACK value `id` of shape `dims`, external `ext` with `flags`.
fn xvalue(id: u32, ext: u32, flags: u32, dims: Vec<u32>) -> XValue {
    XValue::Tensor(TensorValue {
        datatype: 1,
        num_dims: dims.len() as u32,
        dims: Some(dims),
        constant_buffer_idx: 0,
        external_id: ext,
        flags,
        id_out: id,
        dq_datatype: 0,
    })
}

/// A hand-built XNNPACK blob: x[n] (external 0) → one `node_type` node → y[n] (external 1).
fn one_node_blob(node_type: NodeType, n: usize) -> LoweredModule {
    chain_blob(&[node_type], n)
}

/// A hand-built XNNPACK blob: x[n] (external 0) → each of `kinds` in turn → y[n] (external 1).
fn chain_blob(kinds: &[NodeType], n: usize) -> LoweredModule {
    let last = kinds.len() as u32;
    let values = (0..=last)
        .map(|id| match id {
            0 => xvalue(0, 0, FLAG_EXTERNAL_INPUT, vec![n as u32]),
            id if id == last => xvalue(id, 1, FLAG_EXTERNAL_OUTPUT, vec![n as u32]),
            id => xvalue(id, u32::MAX, 0, vec![n as u32]),
        })
        .collect();
    let nodes = kinds
        .iter()
        .zip(0u32..)
        .map(|(node_type, i)| XNode {
            node_type: *node_type,
            payload: Payload::Node1x1 { input_id: i, output_id: i + 1, flags: 0 },
            debug_handle: 0,
            output_min_max: None,
        })
        .collect();
    let g = XnnGraph {
        version: Some("0".into()),
        nodes,
        values,
        num_externs: 2,
        input_ids: Some(vec![0]),
        output_ids: Some(vec![last]),
        constant_buffer: None,
        mem_buffer_sizes: None,
        constant_data: Some(vec![ConstantEntry { offset: 0, size: 0, named_key: None }]),
    };
    let mut m = GraphBuilder::new(vec![], vec![f32_tensor(vec![n])]);
    let r = m.op(Op::Relu, &[m.input(0)]);
    xnnpack_module(m.finish(&[r]), &g)
}

/// An XNNPACK module running `blob`. Its own `graph` is what the eager interpreter would run;
/// only its types matter here, where the runtime runs the blob.
fn xnnpack_module(graph: Graph, blob: &XnnGraph) -> LoweredModule {
    LoweredModule {
        backend: xnnpack::ID.into(),
        graph,
        processed: pte::xnnpack::write(blob, &[]),
        compile_specs: vec![],
        share_handle_across_calls: true,
        scratch_specs: vec![],
    }
}

fn f32_out(v: &Val) -> Vec<f32> {
    match v {
        Val::Tensor(Tensor { data: Data::F32(d), .. }) => d.clone(),
        other => panic!("not a float32 tensor: {other:?}"),
    }
}

/// The output of element `i` of `r`'s first output.
fn output(r: &Bounded, i: usize) -> f64 {
    let v = ptecheck::bounds::host::decode_numeric(&r.outputs[0]).expect("float output");
    f64::from(f32_out(&v)[i])
}

/// A rule's error `e` with one rounding of the perturbed result `y`, as every elementwise rule
/// adds it.
fn rounded(e: f64, y: f64) -> f64 {
    if e > 0.0 { e + ulp(y.abs() + e) } else { e }
}

/// The bound of element `i` as the rule states it (`want`), then the recorded value exactly at
/// the edge (the float32 at most `want` above the output) passes and the next float32 fails.
fn at_the_edge(rule: &str, r: &Bounded, i: usize, want: f64) {
    let got = ptecheck::bounds::host::decode_numeric(&r.outputs[0]).expect("float output");
    let got = f32_out(&got);
    let b = r.bounds[0].abs_of(got.len())[i];
    assert!(
        (b - want).abs() <= want * 1e-9,
        "{rule}: element {i} ({}) has bound {b:e}, the rule says {want:e}",
        got[i]
    );
    let mut inside = (f64::from(got[i]) + b) as f32;
    if f64::from(inside) - f64::from(got[i]) > b {
        inside = inside.next_down();
    }
    let past = inside.next_up();
    let with = |x: f32| {
        let mut v = got.clone();
        v[i] = x;
        encode(&vec_val(&v))
    };
    let ours = encode(&vec_val(&got));
    let edge = compare(&with(inside), &r.bounds[0], &ours);
    assert_ne!(edge, Verdict::Mismatch, "{rule}: {inside:e} is within {b:e} of {}", got[i]);
    assert_eq!(
        compare(&with(past), &r.bounds[0], &ours),
        Verdict::Mismatch,
        "{rule}: {past:e} is past {b:e} of {}",
        got[i]
    );
}

#[test]
fn an_exact_cpu_kernel_allows_nothing() {
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![2]), f32_tensor(vec![2])]);
    let s = g.op(Op::Add, &[g.input(0), g.input(1)]);
    let r = bounded(&program(g.finish(&[s]), None, vec![]), &[vec_val(&[1.5, 3.0]), vec_val(&[0.1, -2.0])]);
    assert_eq!(r.bounds[0], Bound::Exact);
    at_the_edge("add", &r, 0, 0.0);
}

#[test]
fn a_fully_connected_layer_allows_its_reduction_length_times_its_magnitudes() {
    // x[1, 256] @ w[256, 1], a FullyConnected in XNNPACK, accumulated from its bias (zeros when
    // it has none): 2·γ(257)·Σ|xᵢwᵢ| for the summation order, one rounding, and a smallest
    // normal per partial product (and the result) that may be flushed.
    let k = 256;
    let w: Vec<f64> = (0..k).map(|i| if i % 2 == 0 { 0.75 } else { -0.75 }).collect();
    let x: Vec<f32> = (0..k).map(|i| 1.0 + i as f32 / 64.0).collect();
    let mut m = GraphBuilder::new(vec![f32_const(vec![k, 1], w.clone())], vec![f32_tensor(vec![1, k])]);
    let l = m.op(Op::Mm, &[m.input(0), m.constant(0)]);
    let (module, named) = xnnpack::lower(m.finish(&[l]), vec![], None).expect("lowers");
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![1, k])]);
    let out = g.node(Node::Call { module: 0, args: vec![g.input(0)] }, 1)[0];
    let p = program(g.finish(&[out]), Some(module), named);
    let input = Val::Tensor(Tensor { shape: vec![1, k], data: Data::F32(x.clone()) });
    let r = bounded(&p, &[input]);
    let s: f64 = x.iter().zip(&w).map(|(a, b)| (f64::from(*a) * b).abs()).sum();
    let want = rounded(2.0 * gamma(k + 1) * s, output(&r, 0)) + (k as f64 + 1.0) * f64::from(f32::MIN_POSITIVE);
    at_the_edge("fully connected", &r, 0, want);
}

#[test]
fn sin_in_xnnpack_allows_eight_ulps_of_one_and_its_range_reduction() {
    let mut m = GraphBuilder::new(vec![], vec![f32_tensor(vec![2])]);
    let s = m.op(Op::Sin, &[m.input(0)]);
    let (module, named) = xnnpack::lower(m.finish(&[s]), vec![], None).expect("lowers");
    let r = bounded(&program(calling(2), Some(module), named), &[vec_val(&[0.5, 1000.0])]);
    for (i, x) in [0.5f64, 1000.0].into_iter().enumerate() {
        at_the_edge("sin", &r, i, rounded(8.0 * U + x * 2f64.powi(-36), output(&r, i)));
    }
}

/// One node of `kind` on `x`: its output and bounds.
fn node(kind: NodeType, x: &[f32]) -> Bounded {
    bounded(&program(calling(x.len()), Some(one_node_blob(kind, x.len())), vec![]), &[vec_val(x)])
}

#[test]
fn each_approximated_function_allows_its_measured_ulps() {
    let a = &XNNPACK_ACCURACY;
    // As measured over every float32 input (docs/xnnpack.md, "Accuracy of XNNPACK's nodes").
    assert_eq!((a.exp_ulps, a.sqrt_ulps, a.tanh_ulps, a.sigmoid_ulps), (3.0, 2.0, 5.0, SIGMOID_ULPS));
    let x = [0.75f32, -3.5, 20.0];
    for (kind, f, ulps) in [
        (NodeType::XNNTanh, f64::tanh as fn(f64) -> f64, [a.tanh_ulps; 3]),
        (NodeType::XNNSigmoid, |v: f64| 1.0 / (1.0 + (-v).exp()), [a.sigmoid_ulps; 3]),
        // exp's error grows with |x|.
        (NodeType::XNNExp, f64::exp, [a.exp_ulps + 0.75, a.exp_ulps + 3.5, a.exp_ulps + 20.0]),
    ] {
        let r = node(kind, &x);
        for i in 0..x.len() {
            let y = output(&r, i);
            assert!((y - f(f64::from(x[i]))).abs() <= ulp(y), "{}({}) = {y}", kind.name(), x[i]);
            at_the_edge(kind.name(), &r, i, rounded(ulps[i] * ulp(y), y));
        }
    }
    let r = node(NodeType::XNNSquareRoot, &[2.0, 1.0e30]);
    for i in 0..2 {
        let y = output(&r, i);
        at_the_edge("sqrt", &r, i, rounded(a.sqrt_ulps * ulp(y), y));
    }
}

#[test]
fn outside_its_measured_range_a_function_may_give_anything_and_inside_it_may_not() {
    let a = &XNNPACK_ACCURACY;
    let below = (a.sqrt_range as f32).next_down();
    let r = node(NodeType::XNNSquareRoot, &[below, a.sqrt_range as f32]);
    let b = r.bounds[0].abs_of(2);
    assert!(b[0].is_finite() && b[1].is_infinite(), "{b:?} {:?}", r.outputs);
    let got = f32_out(&ptecheck::bounds::host::decode_numeric(&r.outputs[0]).expect("float"));
    let nan_at = |i: usize| {
        let mut v = got.clone();
        v[i] = f32::NAN;
        compare(&encode(&vec_val(&v)), &r.bounds[0], &encode(&vec_val(&got)))
    };
    assert_eq!(nan_at(1), Verdict::WithinBound, "NaN where the bound allows anything");
    assert_eq!(nan_at(0), Verdict::Mismatch, "NaN against a number inside the range");
    for (kind, edge) in [(NodeType::XNNExp, a.exp_overflow), (NodeType::XNNSigmoid, a.sigmoid_range)] {
        let over = edge as f32;
        assert_eq!(f64::from(over), edge, "{}: the measured edge is a float32", kind.name());
        let r = node(kind, &[over.next_down(), over]);
        let b = r.bounds[0].abs_of(2);
        assert!(b[0].is_finite() && b[1].is_infinite(), "{}: {b:?}", kind.name());
    }
}

#[test]
fn exactly_rounded_nodes_allow_nothing_but_a_flushed_subnormal() {
    for kind in [NodeType::XNNNegate, NodeType::XNNAbs, NodeType::XNNCeiling, NodeType::XNNFloor] {
        let r = node(kind, &[1.25, -7.5]);
        assert_eq!(r.bounds[0], Bound::Exact, "{}", kind.name());
        at_the_edge(kind.name(), &r, 1, 0.0);
    }
    // A subnormal operand may be read as zero: |x| (XNNPACK runs with denormals-are-zero).
    let tiny = 1.0e-40f32;
    let r = node(NodeType::XNNNegate, &[tiny, 2.0]);
    at_the_edge("negate of a subnormal", &r, 0, rounded(f64::from(tiny), f64::from(tiny)));
    at_the_edge("negate of a normal", &r, 1, 0.0);
    // ceil of a flushed positive subnormal is 0 rather than 1: one step.
    let r = node(NodeType::XNNCeiling, &[tiny]);
    at_the_edge("ceiling of a subnormal", &r, 0, rounded(1.0, 1.0));
}

#[test]
fn softmax_allows_its_argument_rounding_exponentials_sum_and_floor() {
    // One row of 4: yᵢ·(2·2·exp_ulps·u + γ(4) + u + |xᵢ − max|·u) + ulp(yᵢ) + the exp floor.
    let x = [1.0f32, -2.0, 0.5, -20.0];
    let r = node(NodeType::XNNSoftmax, &x);
    let max = 1.0f64;
    for (i, xi) in x.iter().enumerate() {
        let y = output(&r, i);
        let own = 2.0 * (XNNPACK_ACCURACY.exp_ulps * 2.0 * U) + gamma(4) + U;
        let want = y * (own + (f64::from(*xi) - max).abs() * U) + ulp(y) + ptecheck::ir::bound::APPROX_EXP_FLOOR;
        at_the_edge("softmax", &r, i, want);
    }
}

#[test]
fn a_node_the_interpreter_lacks_makes_the_program_not_supported_here_not_wrong() {
    // XNNGelu is a node ExecuTorch's XNNPACK runs and the reference interpreter does not.
    let p = program(calling(2), Some(one_node_blob(NodeType::XNNGelu, 2)), vec![]);
    let bytes = emit(&p, &EmitOptions::default()).expect("emits").to_bytes().expect("writes");
    let loaded = format::load(&bytes).expect("loads");
    let rt = default_runtime();
    let e = Session::new(&loaded, &rt).load("forward").err().expect("refused at init");
    assert_eq!(e.unsupported_here().as_deref(), Some("backend:XnnpackBackend node XNNGelu"), "{e}");
    // `check` and `inspect` initialise the delegates too, and say the same.
    let r = ptecheck::campaign::methods::check_file(&loaded);
    assert_eq!(r.verdict(), LoadVerdict::NotSupportedHere, "{r}");
    assert_eq!(r.unsupported, ["backend:XnnpackBackend node XNNGelu"]);
}

#[test]
fn a_value_without_a_datatype_breaks_a_rule_and_is_not_called_unsupported() {
    let mut m = one_node_blob(NodeType::XNNAbs, 2);
    let mut g = pte::xnnpack::load(&m.processed, None).expect("loads").blob.graph;
    if let XValue::Tensor(t) = &mut g.values[1] {
        t.datatype = 0;
    }
    m.processed = pte::xnnpack::write(&g, &[]);
    let bytes = emit(&program(calling(2), Some(m), vec![]), &EmitOptions::default())
        .expect("emits")
        .to_bytes()
        .expect("writes");
    let loaded = format::load(&bytes).expect("loads");
    let r = ptecheck::campaign::methods::check_file(&loaded);
    assert_eq!(r.verdict(), LoadVerdict::BreaksARule, "{r}");
    assert!(r.broken[0].0.contains("datatype invalid"), "{r}");
}

#[test]
fn a_cpu_matrix_product_allows_its_summation_order() {
    // x[1, 64] @ w[64, 1] on the CPU: 2·γ(64)·Σ|xᵢwᵢ| and one rounding; no flush on the CPU.
    let k = 64;
    let w: Vec<f64> = (0..k).map(|i| if i % 3 == 0 { -1.25 } else { 0.5 }).collect();
    let x: Vec<f32> = (0..k).map(|i| 0.25 + i as f32 / 32.0).collect();
    let mut g = GraphBuilder::new(vec![f32_const(vec![k, 1], w.clone())], vec![f32_tensor(vec![1, k])]);
    let out = g.op(Op::Mm, &[g.input(0), g.constant(0)]);
    let input = Val::Tensor(Tensor { shape: vec![1, k], data: Data::F32(x.clone()) });
    let r = bounded(&program(g.finish(&[out]), None, vec![]), &[input]);
    let s: f64 = x.iter().zip(&w).map(|(a, b)| (f64::from(*a) * b).abs()).sum();
    at_the_edge("cpu mm", &r, 0, rounded(2.0 * gamma(k) * s, output(&r, 0)));
}

#[test]
fn a_batched_product_in_xnnpack_allows_each_batchs_reduction() {
    // bmm of a[2, 1, 8] and b[2, 8, 1]: per batch 2·γ(8)·Σ|aᵢbᵢ|, one rounding and a
    // smallest normal per partial product and the result.
    let value = xvalue;
    let g = XnnGraph {
        version: Some("0".into()),
        nodes: vec![XNode {
            node_type: NodeType::XNNBatchMatrixMultiply,
            payload: Payload::Node2x1 { input1_id: 0, input2_id: 1, output_id: 2, flags: 0 },
            debug_handle: 0,
            output_min_max: None,
        }],
        values: vec![
            value(0, 0, FLAG_EXTERNAL_INPUT, vec![2, 1, 8]),
            value(1, 1, FLAG_EXTERNAL_INPUT, vec![2, 8, 1]),
            value(2, 2, FLAG_EXTERNAL_OUTPUT, vec![2, 1, 1]),
        ],
        num_externs: 3,
        input_ids: Some(vec![0, 1]),
        output_ids: Some(vec![2]),
        constant_buffer: None,
        mem_buffer_sizes: None,
        constant_data: Some(vec![ConstantEntry { offset: 0, size: 0, named_key: None }]),
    };
    // The IR has no batched product: the module's graph gives the output's type only.
    let shape_only = f32_const(vec![2, 1, 1], vec![0.0; 2]);
    let m = GraphBuilder::new(vec![shape_only], vec![f32_tensor(vec![2, 1, 8]), f32_tensor(vec![2, 8, 1])]);
    let r = m.constant(0);
    let module = xnnpack_module(m.finish(&[r]), &g);
    let mut c = GraphBuilder::new(vec![], vec![f32_tensor(vec![2, 1, 8]), f32_tensor(vec![2, 8, 1])]);
    let out = c.node(Node::Call { module: 0, args: vec![c.input(0), c.input(1)] }, 1)[0];
    let a: Vec<f32> = (0..16).map(|i| 1.0 + i as f32 / 8.0).collect();
    let b: Vec<f32> = (0..16).map(|i| if i % 2 == 0 { 0.75 } else { -0.5 }).collect();
    let t = |shape: Vec<usize>, v: &[f32]| Val::Tensor(Tensor { shape, data: Data::F32(v.to_vec()) });
    let r = bounded(&program(c.finish(&[out]), Some(module), vec![]), &[t(vec![2, 1, 8], &a), t(vec![2, 8, 1], &b)]);
    for batch in 0..2 {
        let s: f64 = (0..8).map(|i| (f64::from(a[batch * 8 + i]) * f64::from(b[batch * 8 + i])).abs()).sum();
        let want = rounded(2.0 * gamma(8) * s, output(&r, batch)) + 9.0 * f64::from(f32::MIN_POSITIVE);
        at_the_edge("batch matrix multiply", &r, batch, want);
    }
}

#[test]
fn after_a_jump_that_may_go_the_other_way_only_what_it_may_write_is_free() {
    // A cond on a product that cancels to 0: its result may be anything (noted); the product,
    // written before the jump, keeps its bound.
    let p = program(common::cond_on_a_cancelling_product(), None, vec![]);
    let x = |v: &[f32]| Val::Tensor(Tensor { shape: vec![1, 3], data: Data::F32(v.to_vec()) });
    let r = bounded(&p, &[x(&[1.0, 1e8, -1e8])]);
    assert_eq!(r.bounds[0], Bound::Any, "{:?}", r.notes);
    let product = r.bounds[1].abs_of(1)[0];
    assert!(product.is_finite() && product > 0.0, "{:?}", r.bounds[1]);
    assert!(r.notes.iter().any(|n| n.contains("may differ") && n.contains("1 of 2 outputs")), "{:?}", r.notes);
    assert!(r.notes.iter().any(|n| n.contains("output 0: 3 of 3 elements may be anything")), "{:?}", r.notes);
    // Far from the edge the decision is certain: nothing is free.
    let r = bounded(&p, &[x(&[1.0, 2.0, 3.0])]);
    assert_eq!(r.bounds[0], Bound::Exact, "{:?}", r.bounds);
    assert!(r.bounds[1].abs_of(1)[0].is_finite(), "{:?}", r.bounds);
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}

#[test]
fn an_inexact_operand_carries_through_a_function_by_its_slope() {
    // sin then tanh in XNNPACK: tanh's slope is at most 1, so its bound is sin's bound, its own
    // 5 ulp, and one rounding.
    let x = [0.5f32, 1000.0];
    let r = bounded(
        &program(calling(2), Some(chain_blob(&[NodeType::XNNSin, NodeType::XNNTanh], 2)), vec![]),
        &[vec_val(&x)],
    );
    for (i, xi) in x.iter().enumerate() {
        let s = f64::from(f64::from(*xi).sin() as f32);
        let e_sin = rounded(8.0 * U + f64::from(*xi) * 2f64.powi(-36), s);
        let y = output(&r, i);
        at_the_edge("tanh of sin", &r, i, rounded(e_sin + XNNPACK_ACCURACY.tanh_ulps * ulp(y), y));
    }
}

#[test]
fn a_division_by_one_element_may_be_a_reciprocal_product() {
    // x / c with a one-element c: the kernel may multiply by 1/c, two roundings: 2 ulp, and
    // one rounding of the perturbed result.
    let mut g = GraphBuilder::new(vec![f32_const(vec![1], vec![3.0])], vec![f32_tensor(vec![2])]);
    let q = g.op(Op::Div, &[g.input(0), g.constant(0)]);
    let r = bounded(&program(g.finish(&[q]), None, vec![]), &[vec_val(&[1.0, 10.0])]);
    for i in 0..2 {
        let y = output(&r, i);
        at_the_edge("division by one element", &r, i, rounded(2.0 * ulp(y), y));
    }
}
