//! The tolerance model (`ir::bound`): what it allows for summation order and nothing more.

#![forbid(unsafe_code)]

mod common;

use ptecheck::ir::bound::{Bound, SIN_COS_RANGE, approximate, of_op, ulp};
use ptecheck::ir::build::{GraphBuilder, f32_tensor};
use ptecheck::ir::eval::run_method;
use ptecheck::ir::kernels::eval_op;
use ptecheck::ir::value::{Data, Tensor, Val};
use ptecheck::ir::{IrMethod, IrProgram, LoweredModule, Node, Op};
use ptecheck::oracle::values::{Verdict, compare, encode};

fn f(shape: &[usize], v: &[f32]) -> Val {
    Val::Tensor(Tensor { shape: shape.to_vec(), data: Data::F32(v.to_vec()) })
}

fn bound(op: Op, args: &[Val], errs: &[Bound]) -> Bound {
    let a: Vec<&Val> = args.iter().collect();
    let out = eval_op(&op, &a, "t").expect("evaluates");
    of_op(&op, &a, &errs.iter().collect::<Vec<_>>(), &out)
}

#[test]
fn exact_ops_of_exact_values_are_exact() {
    let x = f(&[2], &[1.5, -2.0]);
    for op in [Op::Add, Op::Sub, Op::Mul] {
        assert_eq!(bound(op, &[x.clone(), x.clone()], &[Bound::Exact, Bound::Exact]), Bound::Exact);
    }
    assert_eq!(bound(Op::Relu, std::slice::from_ref(&x), &[Bound::Exact]), Bound::Exact);
    assert_eq!(bound(Op::Cumsum { dim: 0 }, &[x], &[Bound::Exact]), Bound::Exact, "ExecuTorch sums in order");
}

#[test]
fn a_dot_product_allows_twice_gamma_n_times_the_sum_of_magnitudes() {
    // [1, 1e8, -1e8] · [1, 1, 1]: exact sum 1, but an order may give 0 or 2.
    let x = f(&[1, 3], &[1.0, 1e8, -1e8]);
    let w = f(&[3, 1], &[1.0, 1.0, 1.0]);
    let Bound::Abs(b) = bound(Op::Mm, &[x, w], &[Bound::Exact, Bound::Exact]) else { panic!("bounded") };
    let s = 1.0 + 2e8;
    let gamma3 = 3.0 * 2f64.powi(-24) / (1.0 - 3.0 * 2f64.powi(-24));
    assert!(b[0] >= 2.0 * gamma3 * s && b[0] <= 2.0 * gamma3 * s + 1.0, "{}", b[0]);
    // One product is exact: nothing to reorder.
    let one = bound(Op::Mm, &[f(&[1, 1], &[3.0]), f(&[1, 1], &[0.1])], &[Bound::Exact, Bound::Exact]);
    assert_eq!(one, Bound::Exact);
}

#[test]
fn a_division_by_one_element_may_be_a_reciprocal_multiplication() {
    let Bound::Abs(b) = bound(Op::Div, &[f(&[2], &[1.0, 3.0]), f(&[1], &[3.0])], &[Bound::Exact, Bound::Exact]) else {
        panic!("bounded")
    };
    // Two roundings (plus one for the bound's own rounding).
    assert!(b[1] >= 2.0 * ulp(1.0) && b[1] <= 3.0 * ulp(1.0), "{}", b[1]);
    assert_eq!(
        bound(Op::Div, &[f(&[2], &[1.0, 3.0]), f(&[2], &[3.0, 3.0])], &[Bound::Exact, Bound::Exact]),
        Bound::Exact
    );
}

#[test]
fn a_reciprocal_that_is_not_a_normal_float_or_a_quotient_that_overflows_allows_anything() {
    // a · (1/b) against a / b, where the reciprocal is inexact (values checked in float32):
    let hex = |bits: u32| f32::from_bits(bits);
    let div = |a: f32, b: f32| bound(Op::Div, &[f(&[1], &[a]), f(&[1], &[b])], &[Bound::Exact, Bound::Exact]);
    let unbounded = |b: Bound| matches!(b, Bound::Abs(v) if v[0].is_infinite());
    // 0x1.829868p+127 / 0x1.829868p-1 is 2^128: +inf, but a · (1/b) is the largest float32.
    assert!(unbounded(div(hex(0x7f41_4c34), hex(0x3f41_4c34))), "{:?}", div(hex(0x7f41_4c34), hex(0x3f41_4c34)));
    // 1e-40 / 1e-40 is 1, but 1/1e-40 overflows: a · (1/b) is inf.
    assert!(unbounded(div(1e-40, 1e-40)));
    // 1/b subnormal for |b| > 2^126: 0x1.cdb502p+127 / 0x1.e3b984p+127 is 0.95448315 and a · (1/b)
    // 0.9544834, 4 ulp away.
    assert!(unbounded(div(hex(0x7f66_da81), hex(0x7f71_dcc2))));
    // In the normal range the two roundings stay the bound; zero and infinite operands give the
    // same special value either way.
    let Bound::Abs(b) = div(1.0, 3.0) else { panic!("bounded") };
    assert!(b[0] > 0.0 && b[0] <= 3.0 * ulp(1.0 / 3.0), "{}", b[0]);
    assert!(div(0.0, 3.0).is_exact() && div(1.0, 0.0).is_exact() && div(f32::INFINITY, 3.0).is_exact());
}

#[test]
fn a_nan_bias_that_may_be_anything_leaves_a_dot_product_unbounded() {
    // bias NaN with an unbounded bound (e.g. 0 · inf where the 0 was inexact): another
    // implementation's bias, hence its sum, may be finite. A NaN sum once made the bound 0.
    let (x, w) = (f(&[1, 2], &[1.0, 1.0]), f(&[2, 1], &[1.0, 1.0]));
    let nan = f(&[1], &[f32::NAN]);
    let b = bound(
        Op::Addmm,
        &[nan.clone(), x.clone(), w.clone()],
        &[Bound::Abs(vec![f64::INFINITY]), Bound::Exact, Bound::Exact],
    );
    assert!(matches!(&b, Bound::Abs(v) if v[0].is_infinite()), "{b:?}");
    // An exact NaN bias gives NaN in every order.
    assert!(bound(Op::Addmm, &[nan, x, w], &[Bound::Exact, Bound::Exact, Bound::Exact]).is_exact());
}

#[test]
fn bounds_propagate_and_comparisons_near_the_edge_may_flip() {
    let x = f(&[2], &[1.0, 5.0]);
    let e = Bound::Abs(vec![0.25, 0.25]);
    let Bound::Abs(b) = bound(Op::Add, &[x.clone(), x.clone()], &[e.clone(), e.clone()]) else { panic!() };
    assert!(b[0] >= 0.5 && b[0] < 0.5 + 1e-6);
    // 1.0 > 1.1 may flip within 0.25; 5.0 > 1.1 may not.
    assert_eq!(bound(Op::Gt { other: 1.1 }, &[x], &[e]), Bound::Flags(vec![true, false]));
}

#[test]
fn a_cond_on_a_predicate_that_may_flip_says_nothing_of_its_result() {
    // pred = mm(x, w) > 0 where the dot product cancels to 0: the branch may go either way.
    let p = IrProgram {
        methods: vec![IrMethod { name: "forward".into(), graph: common::cond_on_a_cancelling_product() }],
        ..Default::default()
    };
    let r = run_method(&p, "forward", &[f(&[1, 3], &[1.0, 1e8, -1e8])]).expect("runs");
    assert_eq!(r.bounds[0], Bound::Any);
    assert!(matches!(r.bounds[1], Bound::Abs(_)));
    // With values far from the edge the decision is certain and the branch's result exact.
    let r = run_method(&p, "forward", &[f(&[1, 3], &[1.0, 2.0, 3.0])]).expect("runs");
    assert_eq!(r.bounds[0], Bound::Exact);
}

/// The bound of `op` inside an approximating backend (XNNPACK).
fn approx(op: Op, args: &[Val], errs: &[Bound]) -> Bound {
    let a: Vec<&Val> = args.iter().collect();
    let out = eval_op(&op, &a, "t").expect("evaluates");
    let e: Vec<&Bound> = errs.iter().collect();
    approximate(&op, &a, &e, &out, of_op(&op, &a, &e, &out))
}

#[test]
fn inside_xnnpack_subnormals_may_be_flushed() {
    // x + x with a subnormal x: the eager sum is 2x; XNNPACK (denormals-are-zero) gives 0.
    let tiny = f32::from_bits(0x0020_0000); // about 2.9e-39, subnormal
    let x = f(&[2], &[tiny, 1.0]);
    let Bound::Abs(b) = approx(Op::Add, &[x.clone(), x.clone()], &[Bound::Exact, Bound::Exact]) else {
        panic!("bounded")
    };
    assert!(b[0] >= 2.0 * f64::from(tiny), "{}", b[0]);
    assert_eq!(b[1], 0.0, "normal elements stay exact");
    // The same op outside XNNPACK is exact.
    assert_eq!(bound(Op::Add, &[x.clone(), x], &[Bound::Exact, Bound::Exact]), Bound::Exact);
}

#[test]
fn inside_xnnpack_sin_is_approximate_and_unconstrained_beyond_its_range() {
    let x = f(&[3], &[1.0, 1.0e8, (SIN_COS_RANGE * 2.0) as f32]);
    let Bound::Abs(b) = approx(Op::Sin, &[x], &[Bound::Exact]) else { panic!("bounded") };
    assert!(b[0] > 0.0 && b[0] < 1e-6, "{}", b[0]);
    // Measured: at most 1.63e-12 per unit of |x| up to 2π·2^24 (1.7e-4 at 1.04e8).
    assert!(b[1] > 1e8 * 1.5e-12 && b[1] < 1e-2, "{}", b[1]);
    assert!(b[2].is_infinite(), "XNNPACK's sin far beyond its range is not sin: {}", b[2]);
    // The range ends where the reduction's quotient x / 2π passes 2^24 (measured: 0.06 off at
    // 1.07e8, 1.9 off at 1.59e8 in ExecuTorch 1.5.1, seed 777 case 52583).
    let x = f(&[2], &[1.05e8, 1.07e8]);
    let Bound::Abs(b) = approx(Op::Cos, &[x], &[Bound::Exact]) else { panic!("bounded") };
    assert!(b[0].is_finite() && b[0] < 2e-3, "{}", b[0]);
    assert!(b[1].is_infinite(), "cos of 1.07e8 in XNNPACK is 0.06 off: {}", b[1]);
}

#[test]
fn a_comparison_of_two_infinities_either_of_which_may_be_anything_may_flip() {
    // inf > inf is false, but a value whose bound is unbounded may be finite elsewhere: the
    // difference of the two infinities is NaN, which must not read as "far apart". Seed
    // 20261206, case 365792: a scan compared mm(c, k) > c on rows that overflowed to +inf in
    // the eager run and not in ExecuTorch's (XNNPACK linear), which said true.
    let inf = f(&[2], &[f32::INFINITY, f32::INFINITY]);
    let unbounded = Bound::Abs(vec![f64::INFINITY, 0.0]);
    assert_eq!(
        bound(Op::GtTensor, &[inf.clone(), inf.clone()], &[unbounded.clone(), Bound::Exact]),
        Bound::Flags(vec![true, false]),
        "an unbounded infinity may be anything; an exact one compared with an exact one is decided"
    );
    assert_eq!(
        bound(Op::GtTensor, &[inf.clone(), inf.clone()], &[Bound::Exact, unbounded]),
        Bound::Flags(vec![true, false])
    );
    // With finite bounds an infinity stays that infinity: inf > inf stays false.
    let finite = Bound::Abs(vec![0.5, 0.5]);
    assert!(bound(Op::GtTensor, &[inf.clone(), inf], &[finite.clone(), finite]).is_exact());
}

/// The inputs of method `name`'s first run in a case's `io.json` (float32 tensors only).
fn recorded_inputs(io: &serde_json::Value, name: &str) -> Vec<Val> {
    let inputs = io["methods"][name]["runs"][0]["inputs"].as_array().expect("inputs");
    inputs
        .iter()
        .map(|t| {
            assert_eq!(t["dtype"], "float32", "only float32 inputs are read here");
            let shape: Vec<usize> =
                t["shape"].as_array().expect("shape").iter().map(|d| d.as_u64().expect("dim") as usize).collect();
            let values: Vec<f32> = t["values"]
                .as_array()
                .expect("values")
                .iter()
                .map(|v| match v.as_str() {
                    Some(word) => word.parse::<f32>().expect("inf, -inf or NaN"),
                    None => v.as_f64().expect("number") as f32,
                })
                .collect();
            f(&shape, &values)
        })
        .collect()
}

#[test]
fn executorchs_recorded_answers_are_within_the_recomputed_tolerances() {
    // corpus/tolerance/: each reply once read as a mismatch because of the model, not ExecuTorch.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/tolerance");
    let mut cases = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus/tolerance") {
        let case = entry.expect("entry").path();
        if !case.is_dir() {
            continue;
        }
        let read = |f: &str| std::fs::read_to_string(case.join(f)).expect(f);
        let program = ptecheck::ir::saved::load(&read("program.json")).expect("a saved program");
        let io: serde_json::Value = serde_json::from_str(&read("io.json")).expect("io.json");
        let reply: serde_json::Value = serde_json::from_str(&read("reply.json")).expect("reply.json");
        let got = ptecheck::runtime::io::list_from_json(&reply["outputs"], "outputs").expect("the reply's outputs");
        let run = run_method(&program, "forward", &recorded_inputs(&io, "forward")).expect("runs");
        assert_eq!(run.outputs.len(), got.len(), "{}", case.display());
        let verdicts: Vec<Verdict> =
            run.outputs.iter().zip(&run.bounds).zip(&got).map(|((w, b), g)| compare(&encode(w), b, g)).collect();
        assert!(!verdicts.contains(&Verdict::Mismatch), "{}: {verdicts:?}", case.display());
        cases += 1;
    }
    assert!(cases > 0, "no case under {}", dir.display());
}

#[test]
fn an_infinite_operand_times_an_uncertain_one_is_unbounded_not_exact() {
    // inf * y with y uncertain: inf * 0 in the propagation formula is NaN, which must count as
    // "anything" (it once read as 0 and hid a real difference).
    let x = f(&[1], &[f32::INFINITY]);
    let y = f(&[1], &[2.0]);
    let Bound::Abs(b) = bound(Op::Mul, &[x, y], &[Bound::Exact, Bound::Abs(vec![0.5])]) else { panic!("bounded") };
    assert!(b[0].is_infinite(), "{}", b[0]);
}

#[test]
fn inside_xnnpack_a_value_that_may_be_subnormal_where_it_is_computed_may_be_flushed() {
    // Eager x = 2e-38 is normal, but within its bound (1e-38) the value an implementation
    // computes may be subnormal; XNNPACK then reads it as zero, and x + x is 0, not 4e-38
    // (ExecuTorch 1.5.1, seed 1202 case 12000). Far from the subnormal range nothing changes.
    let x = f(&[2], &[2.0e-38, 1.0]);
    let e = Bound::Abs(vec![1.0e-38, 0.25]);
    let Bound::Abs(b) = approx(Op::Add, &[x.clone(), x], &[e.clone(), e]) else { panic!("bounded") };
    assert!(b[0] >= 4.0e-38, "a flushed operand must allow 0: {}", b[0]);
    assert!(b[1] >= 0.5 && b[1] < 0.5 + 1e-6, "{}", b[1]);
}

/// `forward(x) = relu_xnnpack(x) * relu(x)` (or with both relus on the CPU), as in seed 1202
/// case 44 of a campaign against ExecuTorch 1.5.1.
fn relu_times_relu(xnnpack: bool) -> IrProgram {
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![1, 1])]);
    let cpu = g.op(Op::Relu, &[g.input(0)]);
    let other = if xnnpack {
        g.node(Node::Call { module: 0, args: vec![g.input(0)] }, 1)[0]
    } else {
        g.op(Op::Relu, &[g.input(0)])
    };
    let out = g.op(Op::Mul, &[other, cpu]);
    let mut m = GraphBuilder::new(vec![], vec![f32_tensor(vec![1, 1])]);
    let r = m.op(Op::Relu, &[m.input(0)]);
    IrProgram {
        methods: vec![IrMethod { name: "forward".into(), graph: g.finish(&[out]) }],
        modules: vec![LoweredModule {
            backend: "XnnpackBackend".into(),
            graph: m.finish(&[r]),
            processed: vec![],
            compile_specs: vec![],
            share_handle_across_calls: true,
            scratch_specs: vec![],
        }],
        ..Default::default()
    }
}

#[test]
fn the_sign_of_a_zero_computed_from_an_inexact_value_may_differ_and_only_then() {
    // x is a negative subnormal: eager relu(x) * relu(x) is +0.0. XNNPACK reads x as -0.0 and
    // its relu returns -0.0, and -0.0 * +0.0 is -0.0. The magnitude bound of the product is 0
    // (one factor is exactly 0), but its sign is not fixed.
    let x = f(&[1, 1], &[-7.327_656e-39]);
    let zero = |v: f32| encode(&f(&[1, 1], &[v]));
    let r = run_method(&relu_times_relu(true), "forward", std::slice::from_ref(&x)).expect("runs");
    assert_eq!(encode(&r.outputs[0]), zero(0.0));
    assert_eq!(compare(&zero(0.0), &r.bounds[0], &zero(-0.0)), Verdict::WithinBound);
    assert_eq!(compare(&zero(0.0), &r.bounds[0], &zero(1.0e-30)), Verdict::Mismatch, "only the sign of zero");
    // On the CPU alone nothing is inexact: the sign of zero is still checked.
    let r = run_method(&relu_times_relu(false), "forward", &[x]).expect("runs");
    assert_eq!(r.bounds[0], Bound::Exact);
    assert_eq!(compare(&zero(0.0), &r.bounds[0], &zero(-0.0)), Verdict::Mismatch);
}

#[test]
fn a_zero_whose_sign_may_differ_is_exact_to_every_op_but_a_division() {
    // z = relu_xnnpack(x) * relu(x) for a negative subnormal x: +0.0 eagerly, -0.0 in
    // ExecuTorch. z + 1 and z > 0 do not see the sign of z (they stay exact, so a cond on
    // z > 0 stays decided); 1 / z is +inf or -inf.
    let p = relu_times_relu(true);
    let x = f(&[1, 1], &[-7.327_656e-39]);
    let r = run_method(&p, "forward", &[x]).expect("runs");
    let (z, ez) = (&r.outputs[0], &r.bounds[0]);
    assert!(!ez.is_exact() && ez.is_exact_in_magnitude(), "{ez:?}");
    let one = f(&[1, 1], &[1.0]);
    let plus = bound(Op::Add, &[z.clone(), one.clone()], &[ez.clone(), Bound::Exact]);
    assert_eq!(plus, Bound::Exact, "z + 1 is 1 whatever the sign of z");
    assert_eq!(bound(Op::Gt { other: 0.0 }, std::slice::from_ref(z), std::slice::from_ref(ez)), Bound::Exact);
    let Bound::Abs(q) = bound(Op::Div, &[one, z.clone()], &[Bound::Exact, ez.clone()]) else { panic!("bounded") };
    assert!(q[0].is_infinite(), "1 / ±0 is ±inf: {}", q[0]);
    // Beside an element that is inexact in magnitude, a zero of uncertain sign still compares
    // as zero: only the inexact element's comparison may flip.
    let zw = f(&[2], &[0.0, 0.25]);
    let e = Bound::Abs(vec![ptecheck::ir::bound::SIGN_OF_ZERO, 0.5]);
    assert_eq!(bound(Op::Gt { other: 0.0 }, &[zw], &[e]), Bound::Flags(vec![false, true]));
}
