//! Every operator (and prim op) pinned to hand-computed values — operand order, broadcasting,
//! empty and one-element shapes, int64 wrap-around, NaN and signed zeros — checked against both
//! the eager interpreter (`ir::eval`) and the runtime's kernels (a one-op program emitted, loaded
//! and run). The expected values are literals: neither implementation computes them, so an op
//! computed the same wrong way by both fails here.

#![forbid(unsafe_code)]

use ptecheck::emit::{EmitOptions, emit};
use ptecheck::format;
use ptecheck::ir::kernels::eval_op;
use ptecheck::ir::value::{Data, Tensor, Val};
use ptecheck::ir::{Dtype, Graph, IrMethod, IrProgram, Node, Op, OpKind, ValueType};
use ptecheck::oracle::values::{encode, same, show};
use ptecheck::runtime::Session;
use std::collections::BTreeSet;

fn f(shape: &[usize], v: &[f32]) -> Val {
    Val::Tensor(Tensor { shape: shape.to_vec(), data: Data::F32(v.to_vec()) })
}
fn i(shape: &[usize], v: &[i64]) -> Val {
    Val::Tensor(Tensor { shape: shape.to_vec(), data: Data::I64(v.to_vec()) })
}
fn b(shape: &[usize], v: &[bool]) -> Val {
    Val::Tensor(Tensor { shape: shape.to_vec(), data: Data::Bool(v.to_vec()) })
}

const NAN: f32 = f32::NAN;
const INF: f32 = f32::INFINITY;

fn ty(v: &Val) -> ValueType {
    match v {
        Val::Tensor(t) => ValueType::tensor(t.dtype(), t.shape.clone()),
        Val::Int(_) => ValueType::Int,
        Val::Bool(_) => ValueType::Bool,
        Val::Double(_) => ValueType::Double,
    }
}

/// The op's result on `inputs` from the runtime: a one-op method emitted, loaded and run.
fn on_runtime(op: &Op, inputs: &[Val]) -> Result<Vec<ptecheck::runtime::HostValue>, String> {
    let n = inputs.len();
    let g = Graph {
        constants: vec![],
        inputs: inputs.iter().map(ty).collect(),
        nodes: vec![Node::Op { op: op.clone(), args: (0..n).collect() }],
        outputs: vec![n],
    };
    let p =
        IrProgram { methods: vec![IrMethod { name: "forward".into(), graph: g }], modules: vec![], named_data: vec![] };
    let bytes = emit(&p, &EmitOptions::default()).map_err(|e| e.to_string())?.to_bytes().map_err(|e| e.to_string())?;
    let loaded = format::load(&bytes).map_err(|e| e.to_string())?;
    let rt = ptecheck::backends::default_runtime();
    let host: Vec<_> = inputs.iter().map(encode).collect();
    Session::new(&loaded, &rt).run("forward", Some(&host)).map_err(|e| format!("{e} ({:?})", e.code()))
}

fn case(op: Op, inputs: Vec<Val>, want: Val, seen: &mut BTreeSet<OpKind>) {
    seen.insert(op.kind());
    let refs: Vec<&Val> = inputs.iter().collect();
    let eager = eval_op(&op, &refs, "case").unwrap_or_else(|e| panic!("{op:?}: eager failed: {e}"));
    assert!(
        same(&encode(&eager), &encode(&want)),
        "{op:?} eager: {} != {}",
        show(&encode(&eager)),
        show(&encode(&want))
    );
    let rt = on_runtime(&op, &inputs).unwrap_or_else(|e| panic!("{op:?}: runtime failed: {e}"));
    assert!(
        rt.len() == 1 && same(&rt[0], &encode(&want)),
        "{op:?} runtime: {} != {}",
        show(&rt[0]),
        show(&encode(&want))
    );
}

#[test]
fn every_op_matches_hand_computed_values_in_both_implementations() {
    let mut seen = BTreeSet::new();
    let s = &mut seen;
    // add: broadcasting a row, an empty batch, one element, int64 wrap, signed zeros.
    case(
        Op::Add,
        vec![f(&[2, 3], &[1., 2., 3., 4., 5., 6.]), f(&[3], &[10., 20., 30.])],
        f(&[2, 3], &[11., 22., 33., 14., 25., 36.]),
        s,
    );
    case(Op::Add, vec![f(&[0, 3], &[]), f(&[3], &[1., 2., 3.])], f(&[0, 3], &[]), s);
    case(Op::Add, vec![f(&[1], &[1.5]), f(&[1], &[2.0])], f(&[1], &[3.5]), s);
    case(Op::Add, vec![i(&[2], &[i64::MAX, -3]), i(&[2], &[1, 3])], i(&[2], &[i64::MIN, 0]), s);
    case(Op::Add, vec![f(&[2], &[-0.0, -0.0]), f(&[2], &[-0.0, 0.0])], f(&[2], &[-0.0, 0.0]), s);
    case(Op::Add, vec![f(&[2], &[INF, 1.0]), f(&[2], &[-INF, NAN])], f(&[2], &[NAN, NAN]), s);
    // sub: operand order, column broadcast, int64 wrap.
    case(Op::Sub, vec![f(&[2], &[5., 1.]), f(&[2], &[2., 4.])], f(&[2], &[3., -3.]), s);
    case(Op::Sub, vec![f(&[2, 1], &[10., 20.]), f(&[3], &[1., 2., 3.])], f(&[2, 3], &[9., 8., 7., 19., 18., 17.]), s);
    case(Op::Sub, vec![i(&[1], &[i64::MIN]), i(&[1], &[1])], i(&[1], &[i64::MAX]), s);
    case(Op::Sub, vec![f(&[1], &[0.0]), f(&[1], &[0.0])], f(&[1], &[0.0]), s);
    // mul: a scalar-shaped operand, int64 wrap, -0.
    case(Op::Mul, vec![f(&[2, 2], &[1., -2., 3., 4.]), f(&[], &[0.5])], f(&[2, 2], &[0.5, -1., 1.5, 2.]), s);
    case(Op::Mul, vec![i(&[2], &[i64::MAX, 1 << 62]), i(&[2], &[2, 4])], i(&[2], &[-2, 0]), s);
    case(Op::Mul, vec![f(&[2], &[-1., 0.]), f(&[2], &[0., -3.])], f(&[2], &[-0.0, -0.0]), s);
    // div: order, division by zero, 0/0.
    case(Op::Div, vec![f(&[4], &[1., 2., -1., 0.]), f(&[4], &[4., 0., 0., 0.])], f(&[4], &[0.25, INF, -INF, NAN]), s);
    case(Op::Div, vec![f(&[1], &[1.0]), f(&[2], &[2., 8.])], f(&[2], &[0.5, 0.125]), s);
    // relu: NaN stays, -0.0 stays (ExecuTorch: `isnan(v) || v >= 0 ? v : 0`), int64.
    case(Op::Relu, vec![f(&[5], &[-1., 0., -0.0, 2., NAN])], f(&[5], &[0., 0., -0.0, 2., NAN]), s);
    case(Op::Relu, vec![i(&[3], &[-5, 7, i64::MIN])], i(&[3], &[0, 7, 0]), s);
    // sin / cos in float32 (correctly rounded values of sin(1), cos(1); sin(-0) = -0).
    case(Op::Sin, vec![f(&[3], &[0., -0.0, 1.])], f(&[3], &[0., -0.0, f32::from_bits(0x3F57_6AA4)]), s);
    case(Op::Sin, vec![f(&[1], &[INF])], f(&[1], &[NAN]), s);
    case(Op::Cos, vec![f(&[2], &[0., 1.])], f(&[2], &[1., f32::from_bits(0x3F0A_5140)]), s);
    // linear: x @ w.T + b; an empty batch.
    let w = f(&[3, 2], &[1., 0., 0., 1., 1., 1.]);
    let bias = f(&[3], &[10., 20., 30.]);
    case(Op::Linear, vec![f(&[1, 2], &[1., 2.]), w.clone(), bias.clone()], f(&[1, 3], &[11., 22., 33.]), s);
    case(Op::Linear, vec![f(&[0, 2], &[]), w, bias], f(&[0, 3], &[]), s);
    // addmm: bias + m1 @ m2 (bias broadcast over rows).
    case(
        Op::Addmm,
        vec![f(&[2], &[1., -1.]), f(&[1, 2], &[1., 2.]), f(&[2, 2], &[3., 4., 5., 6.])],
        f(&[1, 2], &[14., 15.]),
        s,
    );
    // mm: operand order (a column times a row).
    case(Op::Mm, vec![f(&[2, 1], &[1., 2.]), f(&[1, 2], &[3., 4.])], f(&[2, 2], &[3., 4., 6., 8.]), s);
    case(Op::Mm, vec![f(&[1, 2], &[3., 4.]), f(&[2, 1], &[1., 2.])], f(&[1, 1], &[11.]), s);
    case(
        Op::Mm,
        vec![f(&[2, 2], &[1., 2., 3., 4.]), f(&[2, 3], &[5., 6., 7., 8., 9., 10.])],
        f(&[2, 3], &[21., 24., 27., 47., 54., 61.]),
        s,
    );
    // permute_copy: a transpose, int64 kept exactly.
    case(
        Op::PermuteCopy { dims: vec![1, 0] },
        vec![f(&[2, 3], &[1., 2., 3., 4., 5., 6.])],
        f(&[3, 2], &[1., 4., 2., 5., 3., 6.]),
        s,
    );
    case(
        Op::PermuteCopy { dims: vec![1, 0] },
        vec![i(&[1, 2], &[i64::MAX - 1, i64::MIN + 1])],
        i(&[2, 1], &[i64::MAX - 1, i64::MIN + 1]),
        s,
    );
    // cumsum along each dimension; int64 wrap.
    let m = f(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    case(Op::Cumsum { dim: 1 }, vec![m.clone()], f(&[2, 3], &[1., 3., 6., 4., 9., 15.]), s);
    case(Op::Cumsum { dim: 0 }, vec![m.clone()], f(&[2, 3], &[1., 2., 3., 5., 7., 9.]), s);
    case(Op::Cumsum { dim: 0 }, vec![i(&[2], &[i64::MAX, 1])], i(&[2], &[i64::MAX, i64::MIN]), s);
    // The first element is copied (ExecuTorch: out[0] = in[0]): a leading -0.0 stays.
    case(Op::Cumsum { dim: 0 }, vec![f(&[2], &[-0.0, -0.0])], f(&[2], &[-0.0, -0.0]), s);
    // select_copy: a negative index; the leading dimension.
    case(Op::SelectCopy { dim: 1, index: -1 }, vec![m.clone()], f(&[2], &[3., 6.]), s);
    case(Op::SelectCopy { dim: 0, index: 1 }, vec![m.clone()], f(&[3], &[4., 5., 6.]), s);
    // index_select: repeated and reordered rows.
    case(
        Op::IndexSelect { dim: 0 },
        vec![f(&[2, 2], &[1., 2., 3., 4.]), i(&[3], &[1, 0, 1])],
        f(&[3, 2], &[3., 4., 1., 2., 3., 4.]),
        s,
    );
    case(Op::IndexSelect { dim: 1 }, vec![f(&[2, 2], &[1., 2., 3., 4.]), i(&[1], &[1])], f(&[2, 1], &[2., 4.]), s);
    // argmax: the first NaN wins, ties keep the first, exact int64.
    case(Op::Argmax { dim: None, keepdim: false }, vec![f(&[4], &[1., NAN, 3., NAN])], i(&[], &[1]), s);
    case(
        Op::Argmax { dim: Some(1), keepdim: true },
        vec![f(&[2, 3], &[1., 5., 5., 7., 2., 7.])],
        i(&[2, 1], &[1, 0]),
        s,
    );
    case(Op::Argmax { dim: Some(0), keepdim: false }, vec![i(&[2], &[i64::MAX - 1, i64::MAX])], i(&[], &[1]), s);
    // gt: with a double scalar (NaN compares false), and between tensors with broadcasting.
    case(Op::Gt { other: 1.5 }, vec![f(&[3], &[1., 2., NAN])], b(&[3], &[false, true, false]), s);
    // In float32: 0.1f32 is not greater than 0.1 rounded to float32 (it is greater than 0.1 in f64).
    case(Op::Gt { other: 0.1 }, vec![f(&[2], &[0.1, 0.100_000_01])], b(&[2], &[false, true]), s);
    case(Op::GtTensor, vec![f(&[2, 1], &[1., 3.]), f(&[2], &[2., 0.])], b(&[2, 2], &[false, true, true, true]), s);
    case(
        Op::GtTensor,
        vec![i(&[2], &[i64::MAX, i64::MIN]), i(&[2], &[i64::MAX - 1, i64::MIN])],
        b(&[2], &[true, false]),
        s,
    );
    // view: the same elements in row-major order under another shape.
    case(Op::View { shape: vec![3, 2] }, vec![m.clone()], f(&[3, 2], &[1., 2., 3., 4., 5., 6.]), s);
    case(Op::View { shape: vec![6] }, vec![m.clone()], f(&[6], &[1., 2., 3., 4., 5., 6.]), s);
    // sym_size.
    case(Op::SymSize { dim: 1 }, vec![m.clone()], Val::Int(3), s);
    case(Op::SymSize { dim: 0 }, vec![f(&[0, 3], &[])], Val::Int(0), s);
    // Scalar prim ops: wrap-around, Python floor division, comparisons.
    let int = |x: i64| Val::Int(x);
    case(Op::ScalarAdd, vec![int(i64::MAX), int(1)], int(i64::MIN), s);
    case(Op::ScalarSub, vec![int(2), int(5)], int(-3), s);
    case(Op::ScalarSub, vec![int(i64::MIN), int(1)], int(i64::MAX), s);
    case(Op::ScalarMul, vec![int(i64::MAX), int(2)], int(-2), s);
    case(Op::ScalarFloordiv, vec![int(-7), int(2)], int(-4), s);
    case(Op::ScalarFloordiv, vec![int(7), int(-2)], int(-4), s);
    case(Op::ScalarFloordiv, vec![int(-7), int(-2)], int(3), s);
    case(Op::ScalarFloordiv, vec![int(6), int(3)], int(2), s);
    for (op, lt, eq, gt) in [
        (Op::ScalarEq, false, true, false),
        (Op::ScalarLt, true, false, false),
        (Op::ScalarGt, false, false, true),
        (Op::ScalarGe, false, true, true),
        (Op::ScalarLe, true, true, false),
    ] {
        case(op.clone(), vec![int(2), int(3)], Val::Bool(lt), s);
        case(op.clone(), vec![int(3), int(3)], Val::Bool(eq), s);
        case(op, vec![int(4), int(3)], Val::Bool(gt), s);
    }
    let missing: Vec<&str> =
        <OpKind as strum::IntoEnumIterator>::iter().filter(|k| !seen.contains(k)).map(|k| k.name()).collect();
    assert!(missing.is_empty(), "ops without a pinned value: {missing:?}");
    let _ = Dtype::F32;
}

#[test]
fn the_output_comparison_equates_nans_and_separates_signed_zeros() {
    assert!(same(&encode(&f(&[2], &[NAN, 1.0])), &encode(&f(&[2], &[-NAN, 1.0]))), "any NaN equals any NaN");
    assert!(same(&encode(&f(&[1], &[f32::from_bits(0x7fc0_0001)])), &encode(&f(&[1], &[NAN]))), "payload ignored");
    assert!(!same(&encode(&f(&[1], &[-0.0])), &encode(&f(&[1], &[0.0]))), "-0.0 differs from +0.0");
    assert!(!same(&encode(&f(&[1], &[1.0])), &encode(&f(&[1], &[f32::from_bits(0x3f80_0001)]))), "one ulp differs");
    assert!(!same(&encode(&f(&[2], &[1., 2.])), &encode(&f(&[1, 2], &[1., 2.]))), "shapes differ");
    assert!(!same(&encode(&i(&[1], &[1])), &encode(&f(&[1], &[1.0]))), "dtypes differ");
}

#[test]
fn every_ir_op_calls_a_kernel_the_runtime_has() {
    for k in <OpKind as strum::IntoEnumIterator>::iter() {
        let q = k.qualified_kernel();
        assert!(ptecheck::runtime::kernels::lookup(&q).is_some(), "{} -> {q} has no kernel", k.name());
    }
}

#[test]
fn integer_floor_division_by_zero_is_a_typed_error_in_both() {
    for (x, y) in [(7, 0), (i64::MIN, -1)] {
        let args = [Val::Int(x), Val::Int(y)];
        assert!(eval_op(&Op::ScalarFloordiv, &[&args[0], &args[1]], "case").is_err(), "{x} // {y}");
        let e = on_runtime(&Op::ScalarFloordiv, &args).expect_err("refused");
        assert!(e.contains("integer division") && e.ends_with("(InvalidArgument)"), "{e}");
    }
}

/// One prim kernel on two scalar inputs, in a program built by hand (the IR's scalar ops are
/// int64; ExecuTorch's exporter also emits them on doubles).
fn prim_on_runtime(
    op: &str,
    a: ptecheck::runtime::HostValue,
    b: ptecheck::runtime::HostValue,
) -> Vec<ptecheck::runtime::HostValue> {
    use ptecheck::program::*;
    let scalar = |v: &ptecheck::runtime::HostValue| match v {
        ptecheck::runtime::HostValue::Double(_) => EValue::Double(0.0),
        _ => EValue::Int(0),
    };
    let (name, overload) = op.split_once('.').expect("qualified");
    let program = Program {
        execution_plan: Some(vec![ExecutionPlan {
            name: Some("forward".into()),
            values: Some(vec![scalar(&a), scalar(&b), EValue::Double(0.0)]),
            inputs: Some(vec![0, 1]),
            outputs: Some(vec![2]),
            chains: Some(vec![Chain {
                instructions: Some(vec![Instruction::KernelCall(KernelCall {
                    op_index: 0,
                    args: Some(vec![0, 1, 2]),
                })]),
                ..Chain::default()
            }]),
            operators: Some(vec![Operator { name: Some(name.into()), overload: Some(overload.into()) }]),
            delegates: Some(vec![]),
            non_const_buffer_sizes: Some(vec![0]),
            ..ExecutionPlan::default()
        }]),
        constant_buffer: Some(vec![]),
        backend_delegate_data: Some(vec![]),
        ..Program::default()
    };
    let bytes = format::write(&program, &[], &format::WriteOptions::default()).expect("writes");
    let loaded = format::load(&bytes).expect("loads");
    let rt = ptecheck::backends::default_runtime();
    Session::new(&loaded, &rt).run("forward", Some(&[a, b])).expect("runs")
}

#[test]
fn prim_ops_on_doubles_compute_in_double() {
    use ptecheck::runtime::HostValue::{Double, Int};
    let cases = [
        ("executorch_prim::add.Scalar", Double(1.5), Double(0.25), Double(1.75)),
        ("executorch_prim::sub.Scalar", Double(1.5), Double(0.25), Double(1.25)),
        ("executorch_prim::sub.Scalar", Int(2), Double(0.5), Double(1.5)),
        ("executorch_prim::mul.Scalar", Double(1.5), Double(-2.0), Double(-3.0)),
    ];
    for (op, a, b, want) in cases {
        let got = prim_on_runtime(op, a.clone(), b.clone());
        assert_eq!(got, vec![want.clone()], "{op}({a:?}, {b:?})");
    }
}

/// An eager failure names where it happened, through sub-graphs: a floor division by zero
/// inside a cond's taken branch, in a method's second node.
#[test]
fn an_eager_failure_names_the_node_and_the_sub_graph_it_is_in() {
    use ptecheck::ir::build::GraphBuilder;
    use ptecheck::ir::eval::run_method;
    let branch = |divide: bool| {
        let mut b = GraphBuilder::new(vec![], vec![ValueType::Int, ValueType::Int]);
        let r = if divide { b.op(Op::ScalarFloordiv, &[b.input(0), b.input(1)]) } else { b.input(0) };
        b.finish(&[r])
    };
    let mut g = GraphBuilder::new(vec![], vec![ValueType::Bool, ValueType::Int, ValueType::Int]);
    let first = g.op(Op::ScalarFloordiv, &[g.input(1), g.input(1)]);
    let out = g.node(
        Node::Cond {
            pred: g.input(0),
            then_graph: branch(true),
            else_graph: branch(false),
            operands: vec![first, g.input(2)],
        },
        1,
    )[0];
    let graph = g.finish(&[out]);
    let p = IrProgram {
        methods: vec![
            IrMethod { name: "other".into(), graph: graph.clone() },
            IrMethod { name: "forward".into(), graph },
        ],
        modules: vec![],
        named_data: vec![],
    };
    let e = run_method(&p, "forward", &[Val::Bool(true), Val::Int(7), Val::Int(0)]).expect_err("divides by zero");
    assert_eq!(e.path, "methods[1].graph.nodes[1].then_graph.nodes[0]", "{e}");
    let e = run_method(&p, "forward", &[Val::Bool(false), Val::Int(0), Val::Int(0)]).expect_err("divides by zero");
    assert_eq!(e.path, "methods[1].graph.nodes[0]", "{e}");
    let ok = run_method(&p, "forward", &[Val::Bool(false), Val::Int(7), Val::Int(0)]).expect("the else branch passes");
    assert_eq!(ok.outputs, [Val::Int(1)]);
}

/// The same inside a lowered module (its own graph's path), a map body and at a map node whose
/// mapped operand is not a tensor.
#[test]
fn an_eager_failure_inside_a_module_or_a_map_names_its_place() {
    use ptecheck::ir::LoweredModule;
    use ptecheck::ir::build::{GraphBuilder, f32_tensor};
    use ptecheck::ir::eval::run_method;
    let divide = |first: Vec<ValueType>| {
        let n = first.len();
        let mut b = GraphBuilder::new(vec![], [first, vec![ValueType::Int, ValueType::Int]].concat());
        let r = b.op(Op::ScalarFloordiv, &[b.input(n), b.input(n + 1)]);
        b.finish(&[r])
    };
    let module = LoweredModule {
        backend: "demo".into(),
        graph: divide(vec![]),
        processed: vec![],
        compile_specs: vec![],
        share_handle_across_calls: false,
        scratch_specs: vec![],
    };
    let run = |graph: Graph, inputs: &[Val]| {
        let p = IrProgram {
            methods: vec![IrMethod { name: "forward".into(), graph }],
            modules: vec![module.clone()],
            named_data: vec![],
        };
        run_method(&p, "forward", inputs).expect_err("fails").to_string()
    };
    let ints = [Val::Int(7), Val::Int(0)];
    // A call of module 0 dividing by zero.
    let mut g = GraphBuilder::new(vec![], vec![ValueType::Int, ValueType::Int]);
    let out = g.call(0, &[g.input(0), g.input(1)], 1)[0];
    let e = run(g.finish(&[out]), &ints);
    assert!(e.starts_with("modules[0].graph.nodes[0]: "), "{e}");
    // A map body dividing by zero, at the method's second node.
    let rows = Val::Tensor(Tensor { shape: vec![2, 2], data: Data::F32(vec![0.0; 4]) });
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![2, 2]), ValueType::Int, ValueType::Int]);
    let first = g.op(Op::Relu, &[g.input(0)]);
    let body = divide(vec![f32_tensor(vec![2])]);
    let out = g.node(Node::Map { body, xs: first, args: vec![g.input(1), g.input(2)] }, 1)[0];
    let e = run(g.finish(&[out]), &[rows, ints[0].clone(), ints[1].clone()]);
    assert!(e.starts_with("methods[0].graph.nodes[1].body.nodes[0]: "), "{e}");
    // A map over an integer: the map node itself.
    let mut g = GraphBuilder::new(vec![], vec![ValueType::Int]);
    let out = g.node(Node::Map { body: divide(vec![ValueType::Int]), xs: g.input(0), args: vec![] }, 1)[0];
    let e = run(g.finish(&[out]), &ints[..1]);
    assert!(e.starts_with("methods[0].graph.nodes[0]: expected a tensor"), "{e}");
}
