//! Lowering IR sub-graphs to XNNPACK blobs: what the writer puts where (FullyConnected weights
//! in the blob's constant region, every other constant in named data, a constant read both
//! ways twice), the blob round trip, and lowered modules checked end to end — called
//! repeatedly, from two methods and in a map body, shared and unshared — by every invariant.

#![forbid(unsafe_code)]

use pte::xnnpack::{self as blob, NodeType, Payload, XValue};
use ptecheck::backends::xnnpack::{self, lower::to_blob};
use ptecheck::ir::build::{GraphBuilder, f32_const, f32_tensor};
use ptecheck::ir::{Graph, IrMethod, IrProgram, Node, Op};
use ptecheck::oracle::{CheckOptions, check_ir};

fn w() -> ptecheck::ir::ConstTensor {
    f32_const(vec![3, 2], vec![1.0, -1.0, 0.5, 2.0, -0.25, 0.0])
}
fn b() -> ptecheck::ir::ConstTensor {
    f32_const(vec![3], vec![0.5, -0.5, 1.0])
}

/// relu(linear(x, W, b) + b) on x: [2, 2] (b read as bias and by the Add).
fn linear_add() -> Graph {
    let mut g = GraphBuilder::new(vec![w(), b()], vec![f32_tensor(vec![2, 2])]);
    let l = g.op(Op::Linear, &[g.input(0), g.constant(0), g.constant(1)]);
    let a = g.op(Op::Add, &[l, g.constant(1)]);
    let r = g.op(Op::Relu, &[a]);
    g.finish(&[r])
}

fn named_pairs(named: &[ptecheck::ir::NamedBlob]) -> Vec<(&str, &[u8])> {
    named.iter().map(|n| (n.key.as_str(), n.data.as_slice())).collect()
}

#[test]
fn fully_connected_weights_go_in_the_blob_other_constants_in_named_data() {
    let lowered = to_blob(&linear_add()).expect("lowers");
    let g = &lowered.graph;
    let types: Vec<NodeType> = g.nodes.iter().map(|n| n.node_type).collect();
    assert_eq!(types, [NodeType::XNNFullyConnected, NodeType::XNNAdd, NodeType::XNNClamp]);
    // W and b (as bias) in the region; b again (for the Add) in named data under its sha256.
    let cd = g.constant_data.as_ref().expect("constant_data");
    let inline: Vec<u64> = cd.iter().skip(1).filter(|e| e.named_key.is_none()).map(|e| e.size).collect();
    assert_eq!(inline, [24, 12]);
    let named: Vec<&str> = cd.iter().filter_map(|e| e.named_key.as_deref()).collect();
    assert_eq!(named.len(), 1);
    assert_eq!(lowered.named.len(), 1);
    assert_eq!(lowered.named[0].key, named[0]);
    assert_eq!(lowered.named[0].key, ptecheck::program::sha256_hex(&lowered.named[0].data));
    // W at 0 (24 bytes), b at the next 16-aligned offset, 32.
    let offsets: Vec<u64> = cd.iter().skip(1).filter(|e| e.named_key.is_none()).map(|e| e.offset).collect();
    assert_eq!(offsets, [0, 32]);
    assert_eq!(lowered.region.len(), 32 + 12);
    // The FullyConnected reads the region's b, the Add the named b: two values.
    let Payload::FullyConnected { bias_id, .. } = g.nodes[0].payload else { panic!("fc") };
    let Payload::Node2x1 { input2_id, .. } = g.nodes[1].payload else { panic!("add") };
    assert_ne!(bias_id, input2_id);
    // Relu is a clamp to [0, +inf].
    let mm = g.nodes[2].output_min_max.expect("clamp bounds");
    assert_eq!((mm.output_min, mm.output_max), (0.0, f32::INFINITY));
    // Externals: input 0, output 1 (the DelegateCall's argument positions).
    let ext: Vec<(u32, u32)> =
        g.values.iter().map(XValue::tensor).filter(|t| t.flags != 0).map(|t| (t.external_id, t.flags)).collect();
    assert_eq!(ext, [(0, 1), (1, 2)]);
}

#[test]
fn a_lowered_blob_round_trips_with_stable_bytes_and_verifies_against_its_named_data() {
    let (m, named) = xnnpack::lower(linear_add(), vec![], None).expect("lowers");
    let pairs = named_pairs(&named);
    let loaded = blob::load(&m.processed, Some(&pairs)).expect("verifies");
    assert_eq!(blob::write_blob(&loaded.blob), m.processed, "write(load(bytes)) == bytes");
    let again = xnnpack::lower(linear_add(), vec![], None).expect("lowers");
    assert_eq!(again.0.processed, m.processed, "lowering is deterministic");
    // Without its named data the blob is refused, naming the key.
    let e = blob::load(&m.processed, None).unwrap_err();
    assert!(matches!(e, blob::XnnError::NoNamedData { .. }), "{e}");
}

#[test]
fn outputs_that_are_inputs_or_repeated_get_their_own_copies() {
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![2, 2])]);
    let (x, s) = (g.input(0), g.op(Op::Sin, &[g.input(0)]));
    let graph = g.finish(&[s, s, x]);
    let lowered = to_blob(&graph).expect("lowers");
    let types: Vec<NodeType> = lowered.graph.nodes.iter().map(|n| n.node_type).collect();
    assert_eq!(types, [NodeType::XNNSin, NodeType::XNNCopy, NodeType::XNNCopy]);
    assert_eq!(lowered.graph.num_externs, 4);
}

#[test]
fn ops_without_an_xnnpack_node_are_not_lowered() {
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![2, 2])]);
    let c = g.op(Op::Cumsum { dim: 0 }, &[g.input(0)]);
    assert!(to_blob(&g.finish(&[c])).is_err());
    let mut g = GraphBuilder::new(vec![], vec![ptecheck::ir::ValueType::tensor(ptecheck::ir::Dtype::I64, vec![2])]);
    let r = g.op(Op::Relu, &[g.input(0)]);
    assert!(!xnnpack::lowerable(&g.finish(&[r])), "int64 is not lowered");
}

/// A program calling one XNNPACK module three times in `forward` (once inside a map body) and
/// once in `other`.
fn program() -> IrProgram {
    let (m, named) = xnnpack::lower(linear_add(), vec![], None).expect("lowers");
    let x = f32_tensor(vec![2, 2]);
    let mut f = GraphBuilder::new(vec![], vec![x.clone(), f32_tensor(vec![3, 2, 2])]);
    let a = f.call(0, &[f.input(0)], 1)[0];
    let v = f.op(Op::View { shape: vec![3, 2] }, &[a]);
    let p = f.op(Op::PermuteCopy { dims: vec![1, 0] }, &[v]);
    let c = f.call(0, &[f.input(0)], 1)[0];
    let body = {
        let mut bb = GraphBuilder::new(vec![], vec![x.clone()]);
        let r = bb.call(0, &[bb.input(0)], 1)[0];
        bb.finish(&[r])
    };
    let mapped = f.node(Node::Map { body, xs: f.input(1), args: vec![] }, 1)[0];
    let forward = f.finish(&[p, c, mapped]);
    let mut o = GraphBuilder::new(vec![], vec![x]);
    let r = o.call(0, &[o.input(0)], 1)[0];
    let other = o.finish(&[r]);
    IrProgram {
        methods: vec![
            IrMethod { name: "forward".into(), graph: forward },
            IrMethod { name: "other".into(), graph: other },
        ],
        modules: vec![m],
        named_data: named,
    }
}

#[test]
fn a_shared_xnnpack_module_passes_every_invariant() {
    let p = program();
    ptecheck::ir::infer::typecheck_program(&p).expect("types");
    let r = check_ir(&p, &CheckOptions { negative: true, ..CheckOptions::default() });
    assert!(r.ok(), "{:#?}", r.failures);
}

/// The runtime keeps what an XNNPACK blob compiled to in a per-thread cache, by the blob's
/// bytes, and uses it only where the named data the blob reads is the same. The same blob over
/// other named data (the Add's `b` under the same key, plus one) computes with the new data;
/// the first program, run again, still computes with its own.
#[test]
fn an_xnnpack_blob_over_other_named_data_is_compiled_again() {
    use ptecheck::backends::blob_cache::cached;
    use ptecheck::emit::{EmitOptions, emit};
    use ptecheck::runtime::{HostTensor, HostValue, Session};
    ptecheck::backends::forget_compiled();
    let p = program();
    let mut q = program();
    assert_eq!(q.named_data.len(), 1, "the Add's b is the only named constant");
    for x in q.named_data[0].data.chunks_exact_mut(4) {
        let v = f32::from_le_bytes([x[0], x[1], x[2], x[3]]) + 1.0;
        x.copy_from_slice(&v.to_le_bytes());
    }
    let written: Vec<Vec<u8>> = [&p, &q]
        .iter()
        .map(|ir| emit(ir, &EmitOptions::default()).expect("emits").to_bytes().expect("writes"))
        .collect();
    let loaded: Vec<_> = written.iter().map(|b| ptecheck::format::load(b).expect("loads")).collect();
    assert_eq!(loaded[0].delegate_blobs, loaded[1].delegate_blobs, "one blob, byte for byte");
    let rt = ptecheck::backends::default_runtime();
    let x = [HostValue::Tensor(HostTensor::f32(vec![2, 2], &[1.0, 2.0, -3.0, 0.5]))];
    let run = |l: &ptecheck::format::LoadedProgram<'_>| Session::new(l, &rt).run("other", Some(&x)).expect("runs");
    let before = cached(&xnnpack::COMPILED);
    let (first, second, again) = (run(&loaded[0]), run(&loaded[1]), run(&loaded[0]));
    assert_eq!(cached(&xnnpack::COMPILED), before + 1, "one blob, kept once");
    assert_ne!(first, second, "the second program reads its own named data");
    assert_eq!(first, again, "and the first still reads its own");
    ptecheck::backends::forget_compiled();
    assert_eq!(cached(&xnnpack::COMPILED), 0, "a campaign's forgetting empties it");
    // relu(linear + b + 1) = relu(linear + b) + 1 wherever the first is positive.
    let floats = |v: &[HostValue]| match &v[0] {
        HostValue::Tensor(t) => t.to_f64(),
        other => panic!("a tensor output, got {other:?}"),
    };
    let (a, b) = (floats(&first), floats(&second));
    assert!(a.iter().any(|x| *x > 0.0), "some outputs pass the relu: {a:?}");
    for (a, b) in a.iter().zip(&b) {
        if *a > 0.0 {
            assert_eq!(a + 1.0, *b);
        }
    }
}
