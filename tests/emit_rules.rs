//! One test per emitter rule of semantics.md (A: E*/S*, C.1: BD*, C.2: SH*, D: P1, P4-P7, P12),
//! named after the rule. Each asserts on the emitted program, and where the rule has run-time
//! consequences, on the reference runtime's trace and outputs against the eager interpreter.

#![forbid(unsafe_code)]

use ptecheck::backends::default_runtime;
use ptecheck::backends::graph::{Flavor, lower};
use ptecheck::emit::{EmitError, EmitOptions, emit};
use ptecheck::format;
use ptecheck::generator::examples::{example, step_graph};
use ptecheck::ir::build::{GraphBuilder, f32_const, f32_tensor};
use ptecheck::ir::eval::{eval_method, sample_inputs};
use ptecheck::ir::saved::SavedFault;
use ptecheck::ir::{Dtype, Graph, IrMethod, IrProgram, LoweredModule, Node, Op, ValueType, saved};
use ptecheck::oracle::values::encode as to_host;
use ptecheck::program::*;
use ptecheck::runtime::{HostValue, RuntimeError, Trace, TraceSummary};

fn opts(share: bool) -> EmitOptions {
    EmitOptions { share, ..EmitOptions::default() }
}

fn emitted(p: &IrProgram, share: bool) -> Program {
    emit(p, &opts(share)).expect("emits").program
}

fn plan<'a>(p: &'a Program, name: &str) -> &'a ExecutionPlan {
    p.plan(name).expect("plan")
}

fn instrs(p: &ExecutionPlan) -> &[Instruction] {
    p.chain_list()[0].instruction_list()
}

fn delegate_calls(p: &ExecutionPlan) -> Vec<(i32, Vec<i32>)> {
    instrs(p)
        .iter()
        .filter_map(|i| match i {
            Instruction::DelegateCall(d) => Some((d.delegate_index, d.args.clone().unwrap_or_default())),
            _ => None,
        })
        .collect()
}

fn kernel_names(p: &ExecutionPlan) -> Vec<String> {
    instrs(p)
        .iter()
        .map(|i| match i {
            Instruction::KernelCall(k) => p.operator_list()[k.op_index as usize].qualified(),
            other => other.kind().to_string(),
        })
        .collect()
}

fn demo() -> LoweredModule {
    lower(Flavor::Demo, step_graph(), vec![], None).expect("lowers")
}

fn program(methods: Vec<(&str, Graph)>, modules: Vec<LoweredModule>) -> IrProgram {
    IrProgram {
        methods: methods.into_iter().map(|(n, g)| IrMethod { name: n.into(), graph: g }).collect(),
        modules,
        named_data: vec![],
    }
}

fn x() -> ValueType {
    f32_tensor(vec![2, 4])
}

/// `forward(x)` calling the given modules in sequence (module indices), e.g. `[0, 0, 1]`.
fn chain_of(calls: &[usize], modules: Vec<LoweredModule>) -> IrProgram {
    let mut g = GraphBuilder::new(vec![], vec![x()]);
    let mut v = g.input(0);
    for m in calls {
        v = g.call(*m, &[v], 1)[0];
    }
    program(vec![("forward", g.finish(&[v]))], modules)
}

/// Emits, writes, loads and runs `method` on sample inputs; returns (runtime outputs, eager
/// outputs, trace summary after the method is dropped).
fn run(
    p: &IrProgram,
    o: EmitOptions,
    method: &str,
) -> Result<(Vec<HostValue>, Vec<HostValue>, TraceSummary), RuntimeError> {
    let bytes = emit(p, &o).expect("emits").to_bytes().expect("writes");
    let loaded = format::load(&bytes).expect("loads");
    let g = &p.methods.iter().find(|m| m.name == method).expect("method").graph;
    let inputs = sample_inputs(g, 3);
    let want: Vec<HostValue> = eval_method(p, method, &inputs).expect("eager").iter().map(to_host).collect();
    let trace = Trace::default();
    let got = {
        let mut m = default_runtime().load_method(&loaded, method, None, &trace)?;
        for (i, v) in inputs.iter().enumerate() {
            m.set_input(i, &to_host(v))?;
        }
        m.execute()?;
        m.outputs()?
    };
    Ok((got, want, trace.summary()))
}

// ---------------------------------------------------------------- A.1 program assembly

#[test]
fn e01_non_program_input_is_rejected_with_its_path() {
    let e = saved::load(r#"{"schema_version": [5, 6], "program": [1, 2]}"#).expect_err("not a program");
    assert!(e.path.starts_with("$.program"), "{e}");
    assert!(matches!(e.fault, SavedFault::Shape(_)), "{e}");
    assert!(saved::load("[1]").is_err());
}

#[test]
fn e02_one_plan_per_method_in_sorted_name_order() {
    let g = || {
        let mut b = GraphBuilder::new(vec![], vec![x()]);
        let r = b.op(Op::Relu, &[b.input(0)]);
        b.finish(&[r])
    };
    let p = emitted(&program(vec![("zeta", g()), ("alpha", g()), ("mid", g())], vec![]), true);
    let names: Vec<&str> = p.plans().iter().map(|p| p.name_str()).collect();
    assert_eq!(names, ["alpha", "mid", "zeta"]);
}

#[test]
fn e03_values_operators_delegates_are_per_method_constants_and_blobs_program_wide() {
    let p = emitted(&example("multi-method").expect("ex"), true);
    let (f, pf) = (plan(&p, "forward"), plan(&p, "prefill"));
    assert_eq!(f.operator_list().len(), 1, "forward: relu only");
    assert_eq!(pf.operator_list().len(), 0, "prefill has its own (empty) table");
    assert_eq!((f.delegate_list().len(), pf.delegate_list().len()), (1, 1));
    assert_eq!(f.delegate_list()[0].processed, pf.delegate_list()[0].processed, "one program-wide blob");
}

#[test]
fn e04_program_level_fields() {
    let p = emitted(&example("denoise-loop").expect("ex"), true);
    assert_eq!(p.version, 0);
    assert_eq!(p.constant_buffer, Some(vec![]));
    assert_eq!(p.mutable_data_segments, None);
    assert_eq!(p.named_data, None);
    assert_eq!(p.constant_segment.as_ref().map(|c| c.segment_index), Some(0));
}

// ---------------------------------------------------------------- A.2 values

#[test]
fn e05_values_are_appended_in_graph_order() {
    let p = emitted(&chain_of(&[0, 0, 0], vec![demo()]), false);
    let outs: Vec<i32> = delegate_calls(plan(&p, "forward")).iter().map(|(_, a)| a[1]).collect();
    assert!(outs.windows(2).all(|w| w[0] < w[1]), "later nodes get later values: {outs:?}");
}

#[test]
fn e06_each_user_input_adds_one_value_in_order() {
    let mut g = GraphBuilder::new(vec![f32_const(vec![4], vec![1.0; 4])], vec![x(), x()]);
    let a = g.op(Op::Add, &[g.input(0), g.input(1)]);
    let b = g.op(Op::Mul, &[a, g.constant(0)]);
    let p = emitted(&program(vec![("forward", g.finish(&[b]))], vec![]), true);
    let f = plan(&p, "forward");
    assert_eq!(f.inputs.as_deref(), Some(&[1, 2][..]), "the constant is value 0 and not an input");
}

#[test]
fn e07_identical_constants_are_stored_once_across_methods() {
    let g = || {
        let mut b = GraphBuilder::new(vec![f32_const(vec![4], vec![0.5, 1.5, 2.5, 3.5])], vec![x()]);
        let m = b.op(Op::Mul, &[b.input(0), b.constant(0)]);
        b.finish(&[m])
    };
    let e = emit(&program(vec![("a", g()), ("b", g())], vec![]), &EmitOptions::default()).expect("emits");
    let idx = |n: &str| match &plan(&e.program, n).value_list()[0] {
        EValue::Tensor(t) => t.data_buffer_idx,
        _ => 0,
    };
    assert_eq!((idx("a"), idx("b")), (1, 1));
    assert_eq!(e.program.constant_segment.as_ref().and_then(|c| c.offsets.clone()), Some(vec![0, 0]));
    assert_eq!(e.segment_data[0].len(), 16);
}

#[test]
fn e08_planned_tensors_carry_allocation_details() {
    let p = emitted(&example("denoise-loop").expect("ex"), true);
    for v in plan(&p, "forward").value_list() {
        if let EValue::Tensor(t) = v {
            let a = t.allocation_info.expect("planned");
            assert_eq!((a.memory_id, a.memory_offset_high), (1, 0));
            assert_eq!(a.memory_offset_low % 16, 0);
        }
    }
}

#[test]
fn e09_literals_are_fresh_values_at_every_use() {
    let mut g = GraphBuilder::new(vec![], vec![x()]);
    let a = g.op(Op::Add, &[g.input(0), g.input(0)]);
    let b = g.op(Op::Add, &[a, a]);
    let p = emitted(&program(vec![("forward", g.finish(&[b]))], vec![]), true);
    let f = plan(&p, "forward");
    let alphas: Vec<i32> = instrs(f)
        .iter()
        .filter_map(|i| match i {
            Instruction::KernelCall(k) => k.args.as_ref().map(|a| a[2]),
            _ => None,
        })
        .collect();
    assert_eq!(alphas.len(), 2);
    assert_ne!(alphas[0], alphas[1], "no literal dedup");
    assert!(alphas.iter().all(|a| f.value_list()[*a as usize] == EValue::Int(1)));
}

#[test]
fn e10_one_value_per_result_and_no_extra_for_multiple_outputs() {
    let mut mg = GraphBuilder::new(vec![], vec![x()]);
    let s = mg.op(Op::Sin, &[mg.input(0)]);
    let c = mg.op(Op::Cos, &[mg.input(0)]);
    let m = lower(Flavor::Demo, mg.finish(&[s, c]), vec![], None).expect("lowers");
    let mut g = GraphBuilder::new(vec![], vec![x()]);
    let outs = g.call(0, &[g.input(0)], 2);
    let p = emitted(&program(vec![("forward", g.finish(&outs))], vec![m]), true);
    let f = plan(&p, "forward");
    assert_eq!(f.value_list().len(), 3, "input + two outputs, nothing for the tuple");
    assert_eq!(delegate_calls(f), vec![(0, vec![0, 1, 2])]);
}

#[test]
fn e11_plan_outputs_are_the_user_outputs() {
    let p = emitted(&chain_of(&[0], vec![demo()]), true);
    let f = plan(&p, "forward");
    assert_eq!(f.outputs.as_deref(), Some(&[delegate_calls(f)[0].1[1]][..]));
}

#[test]
fn e12_operator_table_dedup_and_out_variant_args() {
    let mut g = GraphBuilder::new(vec![], vec![x()]);
    let a = g.op(Op::Mul, &[g.input(0), g.input(0)]);
    let b = g.op(Op::Mul, &[a, a]);
    let c = g.op(Op::Add, &[b, a]);
    let p = emitted(&program(vec![("forward", g.finish(&[c]))], vec![]), true);
    let f = plan(&p, "forward");
    let ops: Vec<String> = f.operator_list().iter().map(Operator::qualified).collect();
    assert_eq!(ops, ["aten::mul.out", "aten::add.out"]);
    match &instrs(f)[2] {
        Instruction::KernelCall(k) => {
            let a = k.args.as_deref().expect("args");
            assert_eq!(a.len(), 5, "self, other, alpha, out, out");
            assert_eq!(a[3], a[4], "the out tensor appears twice");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn e13_no_memory_alloc_or_view_instructions_are_emitted() {
    // The IR has no memory.alloc/view/free nodes: allocations are values only, never instructions.
    let p = emitted(&example("map-delegate").expect("ex"), true);
    assert!(instrs(plan(&p, "forward")).iter().all(|i| !matches!(i, Instruction::FreeCall(_))));
    assert!(!kernel_names(plan(&p, "forward")).iter().any(|n| n.contains("et_view")));
}

#[test]
fn e14_calls_and_control_flow_take_their_own_paths() {
    let p = emitted(&example("cond-delegates").expect("ex"), true);
    let kinds = kernel_names(plan(&p, "forward"));
    assert!(kinds.contains(&"DelegateCall".to_string()) && kinds.contains(&"JumpFalseCall".to_string()));
}

#[test]
fn e15_no_stacktraces_are_emitted() {
    let p = emitted(&example("cond-delegates").expect("ex"), true);
    assert!(plan(&p, "forward").chain_list().iter().all(|c| c.stacktrace.is_none()));
}

// ---------------------------------------------------------------- A.4 delegates

#[test]
fn e16_call_outputs_are_created_before_the_call_and_follow_the_inputs() {
    let p = emitted(&chain_of(&[0], vec![demo()]), true);
    let f = plan(&p, "forward");
    let (_, args) = &delegate_calls(f)[0];
    assert_eq!(args, &vec![0, 1], "inputs, then the freshly created output");
    assert_eq!(f.value_list().len(), 2);
}

#[test]
fn e17_blob_dedup_is_by_bytes_only() {
    let mut other = demo();
    other.backend = "argkeep".into();
    other.compile_specs = vec![("k".into(), ptecheck::ir::HexBytes(vec![7]))];
    let e = emit(
        &chain_of(&[0, 1], vec![demo(), other]),
        &EmitOptions { delegate_segments: false, ..EmitOptions::default() },
    )
    .expect("emits");
    assert_eq!(e.program.inline_delegate_data().len(), 1, "same bytes, different id and specs: one blob");
    let ds = plan(&e.program, "forward").delegate_list();
    assert_eq!((ds[0].id.as_deref(), ds[1].id.as_deref()), (Some("demo"), Some("argkeep")));
}

#[test]
fn e18_every_call_appends_a_new_delegate_without_opt_in() {
    let p = emitted(&chain_of(&[0, 0, 0], vec![demo()]), false);
    assert_eq!(plan(&p, "forward").delegate_list().len(), 3);
}

#[test]
fn e19_delegate_index_is_the_newest_delegate_and_args_are_inputs_then_outputs() {
    let p = emitted(&chain_of(&[0, 0], vec![demo()]), false);
    assert_eq!(delegate_calls(plan(&p, "forward")), vec![(0, vec![0, 1]), (1, vec![1, 2])]);
}

#[test]
fn e20_n_call_sites_n_delegates_indices_in_order_each_referenced_once() {
    let p = emitted(&chain_of(&[0; 5], vec![demo()]), false);
    let idx: Vec<i32> = delegate_calls(plan(&p, "forward")).iter().map(|(d, _)| *d).collect();
    assert_eq!(idx, [0, 1, 2, 3, 4]);
}

#[test]
fn e21_blob_dedup_spans_methods() {
    let p = emitted(&example("multi-method").expect("ex"), false);
    assert_eq!((plan(&p, "forward").delegate_list().len(), plan(&p, "prefill").delegate_list().len()), (1, 2));
    assert_eq!(p.segment_table().len(), 2, "constant segment + one blob segment");
}

#[test]
fn e22_the_whole_delegate_is_never_deduplicated_by_blob() {
    let p = emitted(&example("same-blob-different-specs").expect("ex"), true);
    let ds = plan(&p, "forward").delegate_list();
    assert_eq!(ds.len(), 2);
    assert_ne!(ds[0].compile_specs, ds[1].compile_specs, "the second module keeps its own specs (#14564)");
}

// ---------------------------------------------------------------- A.5 control flow

fn cond_program() -> IrProgram {
    let branch = |op: Op| {
        let mut b = GraphBuilder::new(vec![], vec![f32_tensor(vec![3])]);
        let s = b.op(op, &[b.input(0)]);
        b.finish(&[s])
    };
    let mut g = GraphBuilder::new(vec![], vec![ValueType::tensor(Dtype::Bool, vec![]), f32_tensor(vec![3])]);
    let out = g.node(
        Node::Cond {
            pred: g.input(0),
            then_graph: branch(Op::Sin),
            else_graph: branch(Op::Cos),
            operands: vec![g.input(1)],
        },
        1,
    )[0];
    program(vec![("forward", g.finish(&[out]))], vec![])
}

#[test]
fn e23_cond_layout_matches_executorch() {
    let p = emitted(&cond_program(), true);
    let f = plan(&p, "forward");
    // Same shape as the real cond_cpu.pte: jump over the true branch, its move, an
    // unconditional jump past the false branch.
    assert_eq!(
        kernel_names(f),
        ["JumpFalseCall", "aten::sin.out", "MoveCall", "JumpFalseCall", "aten::cos.out", "MoveCall"]
    );
    let dests: Vec<i32> = instrs(f)
        .iter()
        .filter_map(|i| match i {
            Instruction::JumpFalseCall(j) => Some(j.destination_instruction),
            _ => None,
        })
        .collect();
    assert_eq!(dests, [4, 6], "P+T+2 and P+T+F+2 with T = F = 2");
    let real = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/real/cond_cpu.pte")).expect("real file");
    let real = format::load(&real).expect("loads");
    let real_kinds: Vec<&str> = instrs(&real.program.plans()[0]).iter().map(|i| i.kind()).collect();
    assert_eq!(
        real_kinds,
        [
            "JumpFalseCall",
            "KernelCall",
            "KernelCall",
            "MoveCall",
            "JumpFalseCall",
            "KernelCall",
            "KernelCall",
            "MoveCall"
        ]
    );
}

#[test]
fn e24_branches_end_with_moves_into_the_shared_output() {
    let p = emitted(&cond_program(), true);
    let f = plan(&p, "forward");
    let out = f.outputs.as_deref().expect("outputs")[0];
    let moves: Vec<i32> = instrs(f)
        .iter()
        .filter_map(|i| match i {
            Instruction::MoveCall(m) => Some(m.move_to),
            _ => None,
        })
        .collect();
    assert_eq!(moves, [out, out]);
    let (got, want, _) = run(&cond_program(), EmitOptions::default(), "forward").expect("runs");
    assert_eq!(got, want);
}

fn map_program(call: bool) -> IrProgram {
    let mut body = GraphBuilder::new(vec![f32_const(vec![], vec![1.5])], vec![x()]);
    let v =
        if call { body.call(0, &[body.input(0)], 1)[0] } else { body.op(Op::Mul, &[body.input(0), body.constant(0)]) };
    let body = body.finish(&[v]);
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![3, 2, 4])]);
    let out = g.node(Node::Map { body, xs: g.input(0), args: vec![] }, 1)[0];
    program(vec![("forward", g.finish(&[out]))], vec![demo()])
}

#[test]
fn e25_map_layout_matches_executorch() {
    let p = emitted(&map_program(false), true);
    let f = plan(&p, "forward");
    assert_eq!(
        kernel_names(f),
        [
            "aten::sym_size.int",
            "aten::select_copy.int_out",
            "aten::mul.out",
            "executorch_prim::et_copy_index.tensor",
            "executorch_prim::add.Scalar",
            "executorch_prim::eq.Scalar",
            "JumpFalseCall",
            "executorch_prim::sub.Scalar"
        ]
    );
    match &instrs(f)[6] {
        Instruction::JumpFalseCall(j) => assert_eq!(j.destination_instruction, 1, "back to the loop head"),
        other => panic!("{other:?}"),
    }
    let out = f.outputs.as_deref().expect("o")[0] as usize;
    assert!(
        matches!(&f.value_list()[out], EValue::Tensor(t) if t.shape_dynamism == TensorShapeDynamism::DYNAMIC_BOUND)
    );
    let (got, want, _) = run(&map_program(false), EmitOptions::default(), "forward").expect("runs");
    assert_eq!(got, want);
}

fn scan_program() -> IrProgram {
    // carry' = carry + x_i ; y_i = carry' * x_i
    let mut body = GraphBuilder::new(vec![], vec![f32_tensor(vec![4]), f32_tensor(vec![4])]);
    let c = body.op(Op::Add, &[body.input(0), body.input(1)]);
    let y = body.op(Op::Mul, &[c, body.input(1)]);
    let body = body.finish(&[c, y]);
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![4]), f32_tensor(vec![3, 4])]);
    let outs = g.node(Node::Scan { body, init: vec![g.input(0)], xs: vec![g.input(1)] }, 2);
    program(vec![("forward", g.finish(&outs))], vec![])
}

#[test]
fn e26_scan_layout_and_results() {
    let p = emitted(&scan_program(), true);
    let names = kernel_names(plan(&p, "forward"));
    assert_eq!(names[0], "aten::sym_size.int");
    assert_eq!(names[1], "aten::copy_", "init copied into the carry");
    assert!(names.ends_with(&[
        "executorch_prim::add.Scalar".into(),
        "executorch_prim::eq.Scalar".into(),
        "JumpFalseCall".into(),
        "executorch_prim::sub.Scalar".into()
    ]));
    let (got, want, _) = run(&scan_program(), EmitOptions::default(), "forward").expect("runs");
    assert_eq!(got, want);
}

fn while_program() -> IrProgram {
    // while i < len(x): i += len(c); x = x * c   (c = [1.5], so one step adds 1)
    let mut cond = GraphBuilder::new(vec![], vec![ValueType::Int, f32_tensor(vec![4])]);
    let limit = cond.op(Op::SymSize { dim: 0 }, &[cond.input(1)]);
    let lt = cond.op(Op::ScalarLt, &[cond.input(0), limit]);
    let cond = cond.finish(&[lt]);
    let mut body = GraphBuilder::new(vec![f32_const(vec![1], vec![1.5])], vec![ValueType::Int, f32_tensor(vec![4])]);
    let one = body.op(Op::SymSize { dim: 0 }, &[body.constant(0)]);
    let i1 = body.op(Op::ScalarAdd, &[body.input(0), one]);
    let x1 = body.op(Op::Mul, &[body.input(1), body.constant(0)]);
    let body = body.finish(&[i1, x1]);
    let mut g = GraphBuilder::new(vec![], vec![ValueType::Int, f32_tensor(vec![4])]);
    let outs = g.node(Node::While { cond, body, carried: vec![g.input(0), g.input(1)], max_iterations: 100 }, 2);
    program(vec![("forward", g.finish(&outs))], vec![])
}

#[test]
fn e27_while_loop_is_unsupported_by_default() {
    let e = emit(&while_program(), &EmitOptions::default()).expect_err("E27");
    assert!(matches!(&e, EmitError::UnsupportedWhile { .. }), "{e}");
    assert!(e.to_string().contains("Unsupported control flow operator: while_loop"));
}

#[test]
fn e28_one_delegate_per_static_call_site_inside_a_loop_body() {
    let p = emitted(&map_program(true), false);
    let f = plan(&p, "forward");
    assert_eq!(f.delegate_list().len(), 1);
    assert_eq!(delegate_calls(f).len(), 1);
    let (got, want, trace) = run(&map_program(true), opts(false), "forward").expect("runs");
    assert_eq!(got, want);
    assert_eq!((trace.inits, trace.executes), (1, 3), "one delegate, executed once per iteration");
}

// ---------------------------------------------------------------- A.6 serialization

#[test]
fn s1_constants_become_segment_zero_padded_to_16() {
    let g = {
        let mut b = GraphBuilder::new(
            vec![f32_const(vec![3], vec![1.0, 2.0, 3.0]), f32_const(vec![4], vec![4.0; 4])],
            vec![x()],
        );
        let m = b.op(Op::Mul, &[b.input(0), b.constant(1)]);
        let s = b.op(Op::Sin, &[b.constant(0)]);
        b.finish(&[m, s])
    };
    let e = emit(&program(vec![("forward", g)], vec![]), &EmitOptions::default()).expect("emits");
    assert_eq!(e.program.constant_segment.as_ref().and_then(|c| c.offsets.clone()), Some(vec![0, 0, 16]));
    assert_eq!(e.segment_data[0].len(), 32, "12 bytes padded to 16, then 16");
}

#[test]
fn s2_no_mutable_segment_without_initialised_buffers() {
    let p = emitted(&example("denoise-loop").expect("ex"), true);
    assert!(p.mutable_data_segments.is_none());
}

#[test]
fn s3_delegate_blobs_move_to_segments_deduplicated() {
    let p = emitted(&example("identical-partitions").expect("ex"), true);
    let refs: Vec<_> = plan(&p, "forward").delegate_list().iter().map(|d| d.processed.expect("p")).collect();
    assert_eq!(refs, vec![BackendDelegateDataReference { location: DataLocation::SEGMENT, index: 1 }; 2]);
    assert_eq!(p.inline_delegate_data().len(), 0);
    let inline = emit(
        &example("identical-partitions").expect("ex"),
        &EmitOptions { delegate_segments: false, ..EmitOptions::default() },
    )
    .expect("emits");
    assert_eq!(inline.program.inline_delegate_data().len(), 1);
    assert_eq!(inline.program.segment_table().len(), 1);
}

#[test]
fn s4_no_named_data_without_a_named_data_store() {
    assert!(emitted(&example("multi-method").expect("ex"), true).named_data.is_none());
}

#[test]
fn s4_named_data_is_one_segment_per_distinct_buffer_in_insertion_order() {
    let mut ir = example("multi-method").expect("ex");
    let blob = |key: &str, data: &[u8]| ptecheck::ir::NamedBlob { key: key.into(), data: data.to_vec() };
    ir.named_data = vec![blob("z", &[1, 2, 3]), blob("b", &[4]), blob("y", &[1, 2, 3]), blob("a", &[1, 2])];
    let e = emit(&ir, &opts(true)).expect("emits");
    let named = e.program.named_data.clone().expect("named data");
    let keys: Vec<&str> = named.iter().map(|n| n.key.as_deref().unwrap_or("")).collect();
    assert_eq!(keys, ["z", "b", "y", "a"]);
    let seg: Vec<u32> = named.iter().map(|n| n.segment_index).collect();
    // Equal bytes share a segment; distinct ones follow in order of first use, last of all.
    let first = seg[0];
    assert_eq!(seg, [first, first + 1, first, first + 2]);
    assert_eq!(e.segment_data.len(), first as usize + 3);
    let data = |i: u32| e.segment_data[i as usize].as_slice();
    assert_eq!((data(first), data(first + 1), data(first + 2)), (&[1u8, 2, 3][..], &[4u8][..], &[1u8, 2][..]));
}

#[test]
fn s5_header_and_segments_follow_the_format_rules() {
    let bytes = emit(&example("denoise-loop").expect("ex"), &EmitOptions::default())
        .expect("emits")
        .to_bytes()
        .expect("writes");
    let l = format::load(&bytes).expect("loads");
    let h = l.header.expect("segment data present: header present");
    assert_eq!(h.segment_base_offset % 128, 0);
    assert_eq!(h.segment_base_offset + h.segment_data_size, bytes.len() as u64);
}

#[test]
fn s6_our_round_trip_preserves_blob_sharing() {
    let e = emit(&example("denoise-loop").expect("ex"), &opts(false)).expect("emits");
    let bytes = e.to_bytes().expect("writes");
    let l = format::load(&bytes).expect("loads");
    let again = format::write_loaded(&l, &Default::default()).expect("writes");
    assert_eq!(again, bytes);
    assert_eq!(
        format::load(&again).expect("loads").program.segment_table().len(),
        2,
        "10 delegates, still one blob segment"
    );
}

// ---------------------------------------------------------------- C.1 blob dedup

#[test]
fn bd1_blob_dedup_keeps_each_delegate_id_and_specs() {
    let p = emitted(&example("same-blob-different-specs").expect("ex"), true);
    let ds = plan(&p, "forward").delegate_list();
    assert_eq!(ds[0].compile_spec_list(), &[CompileSpec::new("level", vec![1])]);
    assert_eq!(ds[1].compile_spec_list(), &[CompileSpec::new("level", vec![2])]);
}

#[test]
fn bd2_two_modules_same_bytes_specs_a_b() {
    let e = emit(
        &example("same-blob-different-specs").expect("ex"),
        &EmitOptions { delegate_segments: false, ..EmitOptions::default() },
    )
    .expect("emits");
    let ds = plan(&e.program, "forward").delegate_list();
    assert_eq!(ds.len(), 2);
    assert!(ds.iter().all(|d| d.processed.map(|r| r.index) == Some(0)));
    assert_eq!(e.program.inline_delegate_data().len(), 1);
    let seg = emitted(&example("same-blob-different-specs").expect("ex"), true);
    assert_eq!(seg.segment_table().len(), 2, "after extraction: one delegate segment for both");
}

#[test]
fn bd3_delegate_index_is_the_delegate_created_for_the_call() {
    let p = emitted(&example("identical-partitions").expect("ex"), true);
    assert_eq!(delegate_calls(plan(&p, "forward")).iter().map(|(d, _)| *d).collect::<Vec<_>>(), [0, 1]);
}

#[test]
fn bd4_no_per_method_delegate_cache_without_opt_in() {
    let mut m = demo();
    m.share_handle_across_calls = false;
    let p = emitted(&chain_of(&[0, 0], vec![m]), true);
    assert_eq!(plan(&p, "forward").delegate_list().len(), 2);
}

// ---------------------------------------------------------------- C.2 share_handle_across_calls

#[test]
fn sh1_preprocess_sets_the_flag_on_the_lowered_module() {
    assert!(demo().share_handle_across_calls);
    assert!(!lower(Flavor::ArgKeep, step_graph(), vec![], None).expect("l").share_handle_across_calls);
}

#[test]
fn sh2_default_off_is_byte_identical_to_the_snapshot_behaviour() {
    let argkeep = lower(Flavor::ArgKeep, step_graph(), vec![], None).expect("l");
    let p = chain_of(&[0, 0, 0], vec![argkeep]);
    let a = emit(&p, &opts(true)).expect("e").to_bytes().expect("w");
    let b = emit(&p, &opts(false)).expect("e").to_bytes().expect("w");
    assert_eq!(a, b, "no backend opted in: sharing changes nothing");
    // The bytes are pinned (`PTECHECK_WRITE_SNAPSHOTS=1` rewrites the file; review the diff).
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/sh2_not_opted_in.pte");
    if std::env::var("PTECHECK_WRITE_SNAPSHOTS").is_ok() {
        std::fs::write(&golden, &a).expect("write snapshot");
    }
    assert!(std::fs::read(&golden).expect("snapshot committed") == a, "emission changed: {}", golden.display());
    // Same shape as what ExecuTorch itself emits for three calls of one module
    // (demo_repeated_call_3x.pte): one delegate per call site, in call order, one blob segment.
    let real =
        std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/real/demo_repeated_call_3x.pte"))
            .expect("real file");
    let real = format::load(&real).expect("loads");
    let ours = format::load(&a).expect("loads");
    let shape = |l: &format::LoadedProgram<'_>| {
        let f = plan(&l.program, "forward");
        let indices: Vec<i32> = delegate_calls(f).iter().map(|(d, _)| *d).collect();
        let blobs: std::collections::BTreeSet<_> =
            f.delegate_list().iter().filter_map(|d| d.processed.map(|p| (p.location.0, p.index))).collect();
        (f.delegate_list().len(), indices, blobs.len())
    };
    assert_eq!(shape(&ours), (3, vec![0, 1, 2], 1));
    assert_eq!(shape(&ours), shape(&real));
}

#[test]
fn sh3_opted_in_module_uses_one_delegate_with_each_call_keeping_its_args() {
    let p = emitted(&chain_of(&[0, 0, 0], vec![demo()]), true);
    let f = plan(&p, "forward");
    assert_eq!(f.delegate_list().len(), 1);
    assert_eq!(delegate_calls(f), vec![(0, vec![0, 1]), (0, vec![1, 2]), (0, vec![2, 3])]);
}

#[test]
fn sh4_sharing_is_by_identity_never_by_content() {
    let p = emitted(&example("identical-partitions").expect("ex"), true);
    assert_eq!(plan(&p, "forward").delegate_list().len(), 2, "identical bytes and specs, two modules, two delegates");
}

#[test]
fn sh5_a_scratch_module_is_never_shared() {
    let mut m = lower(Flavor::Scratch, step_graph(), vec![], None).expect("l");
    m.share_handle_across_calls = true;
    let p = emitted(&chain_of(&[0, 0], vec![m]), true);
    assert_eq!(plan(&p, "forward").delegate_list().len(), 2);
}

#[test]
fn sh6_delegate_counts_per_method() {
    let argkeep = lower(Flavor::ArgKeep, step_graph(), vec![], None).expect("l");
    // demo x3 (shared -> 1), argkeep x2 (-> 2), demo#2 x1 (-> 1)
    let p = emitted(&chain_of(&[0, 1, 0, 1, 0, 2], vec![demo(), argkeep, demo()]), true);
    let f = plan(&p, "forward");
    assert_eq!(f.delegate_list().len(), 1 + 2 + 1);
    assert_eq!(delegate_calls(f).len(), 6);
    assert_eq!(p.segment_table().len(), 2, "demo and argkeep step graphs have identical bytes: one blob");
}

#[test]
fn sh7_ten_calls_init_once_shared_ten_times_unshared() {
    let p = example("denoise-loop").expect("ex");
    let (_, _, shared) = run(&p, opts(true), "forward").expect("runs");
    let (_, _, unshared) = run(&p, opts(false), "forward").expect("runs");
    assert_eq!((shared.inits, shared.destroys, shared.executes), (1, 1, 10));
    assert_eq!((unshared.inits, unshared.destroys, unshared.executes), (10, 10, 10));
}

#[test]
fn sh8_outputs_equal_with_and_without_sharing() {
    for name in ["denoise-loop", "cond-delegates", "multi-method"] {
        let p = example(name).expect("ex");
        let m = &p.methods[0].name;
        let (a, want, _) = run(&p, opts(true), m).expect("runs");
        let (b, _, _) = run(&p, opts(false), m).expect("runs");
        assert_eq!(a, b, "{name}");
        assert_eq!(a, want, "{name}");
    }
}

#[test]
fn sh9_out_of_range_delegate_index_is_rejected_at_load() {
    let mut e = emit(&example("denoise-loop").expect("ex"), &opts(true)).expect("emits");
    if let Some(Instruction::DelegateCall(d)) =
        e.program.execution_plan.as_mut().expect("p")[0].chains.as_mut().expect("c")[0]
            .instructions
            .as_mut()
            .expect("i")
            .get_mut(4)
    {
        d.delegate_index = 1;
    }
    let bytes = e.to_bytes().expect("writes");
    let l = format::load(&bytes).expect("loads");
    let trace = Trace::default();
    let err = default_runtime().load_method(&l, "forward", None, &trace).err().expect("rejected");
    assert!(matches!(err, RuntimeError::Check(_)), "{err}");
    assert_eq!(trace.summary().inits, 0);
}

#[test]
fn sh10_scratch_delegate_referenced_twice_is_rejected() {
    let mut e = emit(&example("scratch-repeated").expect("ex"), &opts(true)).expect("emits");
    if let Some(Instruction::DelegateCall(d)) =
        e.program.execution_plan.as_mut().expect("p")[0].chains.as_mut().expect("c")[0]
            .instructions
            .as_mut()
            .expect("i")
            .get_mut(1)
    {
        d.delegate_index = 0;
    }
    let bytes = e.to_bytes().expect("writes");
    let l = format::load(&bytes).expect("loads");
    let err = default_runtime().load_method(&l, "forward", None, &Trace::default()).err().expect("rejected");
    assert!(err.to_string().contains("declares scratch"), "{err}");
}

#[test]
fn sh11_flag_survives_save_and_load_at_version_5_6() {
    let p = example("denoise-loop").expect("ex");
    let text = saved::save(&p);
    assert!(text.contains("\"schema_version\": [5, 6]"), "{}", &text[..80]);
    let back = saved::load(&text).expect("loads");
    assert!(back.modules[0].share_handle_across_calls);
    assert_eq!(saved::save(&back), text, "save -> load -> save is identical");
}

#[test]
fn sh12_the_demo_backend_opts_in() {
    assert!(example("denoise-loop").expect("ex").modules[0].share_handle_across_calls);
}

#[test]
fn sh13_each_case_the_seed_leaves_open_is_decided() {
    // P2/P3 (SH9): an out-of-range delegate_index is rejected at init, before any backend init.
    let mut e = emit(&example("denoise-loop").expect("ex"), &opts(true)).expect("emits");
    if let Some(Instruction::DelegateCall(d)) =
        e.program.execution_plan.as_mut().expect("p")[0].chains.as_mut().expect("c")[0]
            .instructions
            .as_mut()
            .expect("i")
            .get_mut(0)
    {
        d.delegate_index = 7;
    }
    let bytes = e.to_bytes().expect("writes");
    let l = format::load(&bytes).expect("loads");
    let trace = Trace::default();
    let err = default_runtime().load_method(&l, "forward", None, &trace).err().expect("rejected");
    assert_eq!((err.code(), trace.summary().inits), (ptecheck::runtime::ErrorCode::InvalidProgram, 0));
    // P6: calls in both branches of a cond share one delegate.
    let p = example("cond-delegates").expect("ex");
    assert_eq!(plan(&emitted(&p, true), "forward").delegate_list().len(), 1);
    let (got, want, t) = run(&p, opts(true), "forward").expect("runs");
    assert_eq!((got == want, t.inits), (true, 1));
    // SH1/P4 (the multi-method path): one delegate per method calling the module.
    let p = emitted(&example("multi-method").expect("ex"), true);
    assert_eq!((plan(&p, "forward").delegate_list().len(), plan(&p, "prefill").delegate_list().len()), (1, 1));
    // SH7: ten calls of a shared module make one init (ten without sharing).
    let p = example("denoise-loop").expect("ex");
    let (_, _, shared) = run(&p, opts(true), "forward").expect("runs");
    let (_, _, unshared) = run(&p, opts(false), "forward").expect("runs");
    assert_eq!((shared.inits, unshared.inits), (1, 10));
}

// ---------------------------------------------------------------- D: our choices

#[test]
fn p1_scratch_entry_is_the_last_compile_spec_and_slots_follow_the_outputs() {
    let m = lower(Flavor::Scratch, step_graph(), vec![("k".into(), vec![1])], None).expect("l");
    let n = m.scratch_specs[0].nbytes;
    let p = emitted(&chain_of(&[0], vec![m]), true);
    let f = plan(&p, "forward");
    let specs = f.delegate_list()[0].compile_spec_list();
    assert_eq!(specs.len(), 2);
    assert_eq!(specs[1].key.as_deref(), Some(SCRATCH_KEY));
    let parsed = ptecheck::program::parse_scratch(specs[1].value.as_ref().expect("v").as_slice()).expect("parses");
    assert_eq!(parsed, vec![ptecheck::program::ScratchSpec { nbytes: n, mem_id: -1 }]);
    let (_, args) = &delegate_calls(f)[0];
    assert_eq!(args.len(), 3, "input, output, scratch");
    assert!(matches!(&f.value_list()[args[2] as usize], EValue::Tensor(t) if t.scalar_type == ScalarType::BYTE));
    let (got, want, _) = run(
        &chain_of(&[0, 0], vec![lower(Flavor::Scratch, step_graph(), vec![], None).expect("l")]),
        opts(true),
        "forward",
    )
    .expect("runs");
    assert_eq!(got, want, "the scratch backend uses its slot and still computes the right thing");
}

#[test]
fn p4_sharing_scope_is_one_method() {
    let p = emitted(&example("multi-method").expect("ex"), true);
    assert_eq!((plan(&p, "forward").delegate_list().len(), plan(&p, "prefill").delegate_list().len()), (1, 1));
    let back = saved::load(&saved::save(&example("multi-method").expect("ex"))).expect("loads");
    assert_eq!(emitted(&back, true), p, "save/load keeps sharing");
}

#[test]
fn p5_a_call_site_in_a_loop_counts_once() {
    let mut body = GraphBuilder::new(vec![], vec![x()]);
    let v = body.call(0, &[body.input(0)], 1)[0];
    let body = body.finish(&[v]);
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![3, 2, 4])]);
    let out = g.node(Node::Map { body, xs: g.input(0), args: vec![] }, 1)[0];
    let p = program(
        vec![("forward", g.finish(&[out]))],
        vec![lower(Flavor::Scratch, step_graph(), vec![], None).expect("l")],
    );
    let (got, want, t) =
        run(&p, opts(true), "forward").expect("a scratch delegate with one call site in a loop is fine");
    assert_eq!(got, want);
    assert_eq!((t.inits, t.executes), (1, 3));
}

#[test]
fn p6_sharing_applies_inside_control_flow() {
    let p = emitted(&example("cond-delegates").expect("ex"), true);
    let f = plan(&p, "forward");
    assert_eq!(f.delegate_list().len(), 1);
    assert_eq!(delegate_calls(f).len(), 3, "two calls in the true branch, one in the false");
    let (got, want, t) = run(&example("cond-delegates").expect("ex"), opts(true), "forward").expect("runs");
    assert_eq!(got, want);
    assert_eq!(t.inits, 1);
}

#[test]
fn p7_a_5_5_document_loads_with_the_flag_false_and_rejects_it_if_present() {
    let text = saved::save(&example("denoise-loop").expect("ex"));
    let mut doc: serde_json::Value = serde_json::from_str(&text).expect("json");
    doc["schema_version"] = serde_json::json!([5, 5]);
    let bad = doc.to_string();
    doc["program"]["modules"][0].as_object_mut().expect("module").remove("share_handle_across_calls");
    let p = saved::load(&doc.to_string()).expect("a (5, 5) document loads");
    assert!(!p.modules[0].share_handle_across_calls);
    let e = saved::load(&bad).expect_err("the flag did not exist in (5, 5)");
    assert_eq!(e.path, "$.program.modules[0].share_handle_across_calls");
    assert_eq!(e.fault, SavedFault::TooNew { major: 5, minor: 5, since: 6 });
    let newer_major = text.replacen("[5, 6]", "[6, 0]", 1);
    let e = saved::load(&newer_major).expect_err("major 6");
    assert_eq!((e.path.as_str(), e.fault), ("$.schema_version", SavedFault::Major { major: 6 }));
    let unknown = text.replacen("\"backend\": \"demo\"", "\"backend\": \"demo\", \"surprise\": 1", 1);
    let e = saved::load(&unknown).expect_err("unknown member");
    assert!(e.path.starts_with("$.program.modules[0]"), "{e}");
    assert!(matches!(&e.fault, SavedFault::Shape(m) if m.contains("surprise")), "{e}");
    let e = saved::load(&text.replacen("[5, 6]", "\"5.6\"", 1)).expect_err("a version of another form");
    assert!(matches!(e.fault, SavedFault::BadVersion(_)), "{e}");
    let e = saved::load(&text.replacen("\"schema_version\"", "\"version\"", 1)).expect_err("no version");
    assert_eq!((e.path.as_str(), e.fault), ("$.schema_version", SavedFault::NoVersion));
    let e = saved::load(&text[..text.len() / 2]).expect_err("cut short");
    assert!(matches!(e.fault, SavedFault::NotJson { line, .. } if line > 1), "{e}");
}

#[test]
fn p12_while_loop_lowers_and_runs_when_enabled() {
    let o = EmitOptions { allow_while: true, ..EmitOptions::default() };
    let p = emit(&while_program(), &o).expect("emits").program;
    let f = plan(&p, "forward");
    let jumps: Vec<i32> = instrs(f)
        .iter()
        .filter_map(|i| match i {
            Instruction::JumpFalseCall(j) => Some(j.destination_instruction),
            _ => None,
        })
        .collect();
    assert_eq!(jumps.len(), 2, "exit jump and unconditional back-jump");
    let n = instrs(f).len() as i32;
    assert_eq!(jumps[0], n, "the exit jump leaves the loop");
    let exit_at = instrs(f).iter().position(|i| matches!(i, Instruction::JumpFalseCall(_))).expect("exit") as i32;
    assert!(jumps[1] < exit_at, "the back-jump returns to the condition, before the exit jump");
    let (got, want, _) = run(&while_program(), o, "forward").expect("runs");
    assert_eq!(got, want);
}

#[test]
fn e25_map_matches_the_real_map_cpu_instruction_for_instruction() {
    // map(lambda x, y: x * y + 1.0, xs, y) as in corpus/real/map_cpu.pte.
    let mut body =
        GraphBuilder::new(vec![f32_const(vec![], vec![1.0])], vec![f32_tensor(vec![2]), f32_tensor(vec![2])]);
    let m = body.op(Op::Mul, &[body.input(0), body.input(1)]);
    let a = body.op(Op::Add, &[m, body.constant(0)]);
    let body = body.finish(&[a]);
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![3, 2]), f32_tensor(vec![2])]);
    let out = g.node(Node::Map { body, xs: g.input(0), args: vec![g.input(1)] }, 1)[0];
    let p = program(vec![("forward", g.finish(&[out]))], vec![]);
    let ours = emitted(&p, true);
    let real = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/real/map_cpu.pte")).expect("real file");
    let real = format::load(&real).expect("loads");
    assert_eq!(kernel_names(plan(&ours, "forward")), kernel_names(&real.program.plans()[0]));
    let shape = |f: &ExecutionPlan| -> Vec<(String, Vec<String>)> {
        // Argument kinds per instruction (values differ in numbering, not in kind).
        instrs(f)
            .iter()
            .map(|i| match i {
                Instruction::KernelCall(k) => (
                    "k".to_string(),
                    k.args.iter().flatten().map(|a| f.value_list()[*a as usize].kind().to_string()).collect(),
                ),
                other => (other.kind().to_string(), vec![]),
            })
            .collect()
    };
    assert_eq!(shape(plan(&ours, "forward")), shape(&real.program.plans()[0]));
    let (got, want, _) = run(&p, EmitOptions::default(), "forward").expect("runs");
    assert_eq!(got, want);
}

#[test]
fn e07_bool_constants_are_stored_as_bytes_and_read_back() {
    // cond on a constant predicate: the stored byte decides the branch.
    for (value, want_sin) in [(1.0, true), (0.0, false)] {
        let branch = |op: Op| {
            let mut b = GraphBuilder::new(vec![], vec![f32_tensor(vec![3])]);
            let s = b.op(op, &[b.input(0)]);
            b.finish(&[s])
        };
        let pred = ptecheck::ir::ConstTensor { dtype: Dtype::Bool, shape: vec![], values: vec![value] };
        let mut g = GraphBuilder::new(vec![pred], vec![f32_tensor(vec![3])]);
        let out = g.node(
            Node::Cond {
                pred: g.constant(0),
                then_graph: branch(Op::Sin),
                else_graph: branch(Op::Cos),
                operands: vec![g.input(0)],
            },
            1,
        )[0];
        let p = program(vec![("forward", g.finish(&[out]))], vec![]);
        let e = emit(&p, &EmitOptions::default()).expect("emits");
        assert_eq!(e.segment_data[0], vec![value as u8], "one byte per bool");
        let (got, want, _) = run(&p, EmitOptions::default(), "forward").expect("runs");
        assert_eq!(got, want, "pred {value}: {}", if want_sin { "sin" } else { "cos" });
    }
}

#[test]
fn e26_scan_body_returning_its_own_inputs_keeps_old_values() {
    // new carry = the slice, y = the old carry: y must be stacked before the carry changes.
    let body = {
        let b = GraphBuilder::new(vec![], vec![f32_tensor(vec![4]), f32_tensor(vec![4])]);
        let (c, x) = (b.input(0), b.input(1));
        b.finish(&[x, c])
    };
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![4]), f32_tensor(vec![3, 4])]);
    let outs = g.node(Node::Scan { body, init: vec![g.input(0)], xs: vec![g.input(1)] }, 2);
    let p = program(vec![("forward", g.finish(&outs))], vec![]);
    let (got, want, _) = run(&p, EmitOptions::default(), "forward").expect("runs");
    assert_eq!(got, want);
}

#[test]
fn p12_while_swapping_two_carries_updates_them_simultaneously() {
    // while i < len(a): (i, a, b) = (i + 1, b, a)
    let mut cond = GraphBuilder::new(vec![], vec![ValueType::Int, f32_tensor(vec![4]), f32_tensor(vec![4])]);
    let n = cond.op(Op::SymSize { dim: 0 }, &[cond.input(1)]);
    let lt = cond.op(Op::ScalarLt, &[cond.input(0), n]);
    let cond = cond.finish(&[lt]);
    let mut body = GraphBuilder::new(
        vec![f32_const(vec![1], vec![2.0])],
        vec![ValueType::Int, f32_tensor(vec![4]), f32_tensor(vec![4])],
    );
    let one = body.op(Op::SymSize { dim: 0 }, &[body.constant(0)]);
    let i1 = body.op(Op::ScalarAdd, &[body.input(0), one]);
    let (a_in, b_in) = (body.input(1), body.input(2));
    // A pure swap: without staging, `a := b` then `b := a` would leave both equal to b.
    let body = body.finish(&[i1, b_in, a_in]);
    let mut g = GraphBuilder::new(vec![], vec![ValueType::Int, f32_tensor(vec![4]), f32_tensor(vec![4])]);
    let outs =
        g.node(Node::While { cond, body, carried: vec![g.input(0), g.input(1), g.input(2)], max_iterations: 16 }, 3);
    let p = program(vec![("forward", g.finish(&outs))], vec![]);
    let o = EmitOptions { allow_while: true, ..EmitOptions::default() };
    let (got, want, _) = run(&p, o, "forward").expect("runs");
    assert_eq!(got, want);
}

#[test]
fn p12_e26_dynamic_carries_are_refused_because_copy_does_not_resize() {
    // ExecuTorch's `aten::copy_` copies into its target without resizing it, so a carry whose
    // shape may shrink cannot be updated: the type checker refuses it, naming the node.
    let d = ValueType::Tensor { dtype: Dtype::F32, shape: vec![4, 2], dynamic: true };
    let mut cond = GraphBuilder::new(vec![], vec![ValueType::Int, d.clone()]);
    let n = cond.op(Op::SymSize { dim: 0 }, &[cond.input(1)]);
    let lt = cond.op(Op::ScalarLt, &[cond.input(0), n]);
    let cond = cond.finish(&[lt]);
    let body = GraphBuilder::new(vec![], vec![ValueType::Int, d.clone()]);
    let body = {
        let (i, a) = (body.input(0), body.input(1));
        body.finish(&[i, a])
    };
    let mut g = GraphBuilder::new(vec![], vec![ValueType::Int, d]);
    let outs = g.node(Node::While { cond, body, carried: vec![g.input(0), g.input(1)], max_iterations: 4 }, 2);
    let p = program(vec![("forward", g.finish(&outs))], vec![]);
    let o = EmitOptions { allow_while: true, ..EmitOptions::default() };
    let e = emit(&p, &o).expect_err("refused");
    assert!(e.to_string().contains("methods[0].graph.nodes[0]") && e.to_string().contains("static shape"), "{e}");
}

/// The `aten::copy_` instructions of a plan.
fn copies(f: &ExecutionPlan) -> usize {
    let ops = f.operator_list();
    instrs(f)
        .iter()
        .filter(|i| matches!(i, Instruction::KernelCall(k) if ops[k.op_index as usize].qualified() == "aten::copy_"))
        .count()
}

#[test]
fn e26_carries_that_do_not_alias_are_updated_without_staging() {
    // scan(carry, x): (carry + x, carry * x): one copy_ to initialise, one to update.
    let mut body = GraphBuilder::new(vec![], vec![f32_tensor(vec![2]), f32_tensor(vec![2])]);
    let s = body.op(Op::Add, &[body.input(0), body.input(1)]);
    let y = body.op(Op::Mul, &[body.input(0), body.input(1)]);
    let body = body.finish(&[s, y]);
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![2]), f32_tensor(vec![3, 2])]);
    let outs = g.node(Node::Scan { body, init: vec![g.input(0)], xs: vec![g.input(1)] }, 2);
    let p = program(vec![("forward", g.finish(&outs))], vec![]);
    assert_eq!(copies(plan(&emitted(&p, true), "forward")), 2);
}

// ---------------------------------------------------------------- seeded faults do what they say

fn with_fault(p: &IrProgram, fault: ptecheck::fault::Fault) -> Program {
    emit(p, &EmitOptions { fault: Some(fault), ..EmitOptions::default() }).expect("emits").program
}

#[test]
fn the_dedup_whole_delegate_fault_reuses_a_delegate_across_modules_with_identical_blobs() {
    let m = |k: u8| lower(Flavor::ArgKeep, step_graph(), vec![("k".into(), vec![k])], None).expect("lowers");
    let p = chain_of(&[0, 1], vec![m(1), m(2)]);
    assert_eq!(plan(&emitted(&p, true), "forward").delegate_list().len(), 2);
    let bad = with_fault(&p, ptecheck::fault::Fault::DedupWholeDelegate);
    let f = plan(&bad, "forward");
    assert_eq!(f.delegate_list().len(), 1, "the second module lost its own delegate");
    assert_eq!(delegate_calls(f).iter().map(|(d, _)| *d).collect::<Vec<_>>(), vec![0, 0]);
}

#[test]
fn the_wrong_delegate_in_loop_fault_affects_calls_inside_loop_bodies_only() {
    // call m0 (argkeep); map(xs) { call m1 }; call m1 — m0 and m1 are different modules.
    let argkeep = lower(Flavor::ArgKeep, step_graph(), vec![], None).expect("lowers");
    let mut body = GraphBuilder::new(vec![], vec![x()]);
    let v = body.call(1, &[body.input(0)], 1)[0];
    let body = body.finish(&[v]);
    let mut g = GraphBuilder::new(vec![], vec![x(), f32_tensor(vec![3, 2, 4])]);
    let a = g.call(0, &[g.input(0)], 1)[0];
    let _ = g.node(Node::Map { body, xs: g.input(1), args: vec![] }, 1)[0];
    let b = g.call(1, &[a], 1)[0];
    let p = program(vec![("forward", g.finish(&[b]))], vec![argkeep, demo()]);
    let calls = |prog: &Program| delegate_calls(plan(prog, "forward")).iter().map(|(d, _)| *d).collect::<Vec<_>>();
    assert_eq!(calls(&emitted(&p, true)), vec![0, 1, 1], "the loop call and the last call share module 1's delegate");
    let bad = with_fault(&p, ptecheck::fault::Fault::WrongDelegateInLoop);
    assert_eq!(calls(&bad), vec![0, 0, 1], "only the call inside the loop takes module 0's delegate");
}

#[test]
fn e13_a_view_is_et_view_into_an_unplanned_tensor_freed_after_its_last_use() {
    // v = view(x, [6]); y = relu(v); return y, view(x, [3, 2])
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![2, 3])]);
    let v = g.op(Op::View { shape: vec![6] }, &[g.input(0)]);
    let y = g.op(Op::Relu, &[v]);
    let w = g.op(Op::View { shape: vec![3, 2] }, &[g.input(0)]);
    let p = program(vec![("forward", g.finish(&[y, w]))], vec![]);
    let e = emitted(&p, true);
    let f = plan(&e, "forward");
    let names = kernel_names(f);
    assert_eq!(names.iter().filter(|n| n.contains("et_view")).count(), 2, "{names:?}");
    let frees: Vec<i32> = instrs(f)
        .iter()
        .filter_map(|i| match i {
            Instruction::FreeCall(x) => Some(x.value_index),
            _ => None,
        })
        .collect();
    // Only the first view is freed (the second is an output), right after relu reads it.
    let view_out = |k: usize| {
        let Instruction::KernelCall(c) = &instrs(f)[k] else { panic!("kernel") };
        *c.args.as_ref().expect("args").last().expect("out")
    };
    assert_eq!(frees, vec![view_out(0)]);
    assert!(matches!(instrs(f)[2], Instruction::FreeCall(_)), "freed after its last use (instruction 1)");
    assert!(matches!(&f.value_list()[view_out(0) as usize], EValue::Tensor(t) if t.allocation_info.is_none()));
    let (got, want, _) = run(&p, opts(true), "forward").expect("runs");
    assert_eq!(got, want);
}

#[test]
fn s3_empty_blobs_stay_inline_one_entry_per_delegate() {
    let mut empty = demo();
    empty.processed = vec![];
    let p = chain_of(&[0, 1, 0], vec![empty.clone(), empty]);
    let e = emitted(&p, false);
    let f = plan(&e, "forward");
    let refs: Vec<(DataLocation, u32)> =
        f.delegate_list().iter().map(|d| d.processed.map(|r| (r.location, r.index)).expect("ref")).collect();
    assert_eq!(refs, vec![(DataLocation::INLINE, 0), (DataLocation::INLINE, 1), (DataLocation::INLINE, 2)]);
    assert_eq!(e.inline_delegate_data().len(), 3);
}

#[test]
fn the_wrong_delegate_in_loop_fault_ends_with_each_loop() {
    // call m0; scan { call m1 }; call m1; while { call m1 }; call m1 — under the fault only the
    // calls inside the loop bodies take m0's delegate.
    let argkeep = lower(Flavor::ArgKeep, step_graph(), vec![], None).expect("lowers");
    let mut sb = GraphBuilder::new(vec![], vec![x(), x()]);
    let c = sb.call(1, &[sb.input(0)], 1)[0];
    let scan_body = sb.finish(&[c, c]);
    let mut cond = GraphBuilder::new(vec![], vec![ValueType::Int, x()]);
    let n = cond.op(Op::SymSize { dim: 0 }, &[cond.input(1)]);
    let lt = cond.op(Op::ScalarLt, &[cond.input(0), n]);
    let cond = cond.finish(&[lt]);
    let mut wb = GraphBuilder::new(vec![f32_const(vec![1], vec![0.0])], vec![ValueType::Int, x()]);
    let one = wb.op(Op::SymSize { dim: 0 }, &[wb.constant(0)]);
    let i1 = wb.op(Op::ScalarAdd, &[wb.input(0), one]);
    let v = wb.call(1, &[wb.input(1)], 1)[0];
    let while_body = wb.finish(&[i1, v]);
    let mut g = GraphBuilder::new(vec![], vec![x(), f32_tensor(vec![3, 2, 4]), ValueType::Int]);
    // (The scan's slices are [2, 4], the module's input type.)
    let a = g.call(0, &[g.input(0)], 1)[0];
    let s = g.node(Node::Scan { body: scan_body, init: vec![a], xs: vec![g.input(1)] }, 2)[0];
    let b = g.call(1, &[s], 1)[0];
    let w = g.node(Node::While { cond, body: while_body, carried: vec![g.input(2), b], max_iterations: 8 }, 2)[1];
    let z = g.call(1, &[w], 1)[0];
    let p = program(vec![("forward", g.finish(&[z]))], vec![argkeep, demo()]);
    let o = EmitOptions {
        allow_while: true,
        fault: Some(ptecheck::fault::Fault::WrongDelegateInLoop),
        ..EmitOptions::default()
    };
    let bad = emit(&p, &o).expect("emits").program;
    let calls: Vec<i32> = delegate_calls(plan(&bad, "forward")).iter().map(|(d, _)| *d).collect();
    assert_eq!(calls, vec![0, 0, 1, 0, 1], "loop bodies take delegate 0; the calls after each loop keep module 1's");
}

#[test]
fn saved_json_keeps_scalar_arrays_on_one_line_and_reads_as_the_same_document() {
    use ptecheck::generator::examples::EXAMPLES;
    for name in EXAMPLES {
        let p = example(name).expect("example");
        let text = saved::save(&p);
        let ours: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let doc = serde_json::json!({ "schema_version": saved::SCHEMA_VERSION, "program": p });
        assert_eq!(ours, doc, "{name}: the layout changes only whitespace");
        for line in text.lines() {
            let body = line.trim_start();
            let indent = line.len() - body.len();
            assert_eq!(indent % 2, 0, "{name}: two-space indentation: {line:?}");
            assert!(body.trim_end_matches(',').parse::<f64>().is_err(), "{name}: a number alone on its line: {line:?}");
        }
    }
    let text = saved::save(&example("multi-method").expect("example"));
    assert!(text.contains("\"shape\": [2, 4]") && text.contains("\"args\": [0]"), "{text}");
    assert!(text.contains("\"nodes\": [\n            {\n"), "objects in an array: one per line\n{text}");
}

#[test]
fn saved_json_bytes_are_bare_hex_digit_pairs() {
    let text = saved::save(&example("denoise-loop").expect("example"));
    let at = text.find("\"processed\": \"").expect("a processed blob") + "\"processed\": \"".len();
    for (bad, why) in [("0x", "invalid character 'x' at position 1"), ("0", "odd number of digits"), ("zz", "invalid")]
    {
        let edited = format!("{}{bad}{}", &text[..at], &text[at..]);
        let e = saved::load(&edited).expect_err(bad);
        assert_eq!(e.path, "$.program.modules[0].processed", "{bad}");
        assert!(matches!(&e.fault, SavedFault::Shape(m) if m.to_lowercase().contains(why)), "{bad}: {e}");
    }
}

#[test]
fn shapes_a_pte_cannot_hold_are_refused_by_the_type_check_naming_where() {
    use ptecheck::ir::infer::typecheck_program;
    let typed = |g: Graph| typecheck_program(&program(vec![("forward", g)], vec![])).map(drop);
    // A dimension beyond int32 (`Tensor.sizes`), as an input.
    let b = GraphBuilder::new(vec![], vec![f32_tensor(vec![1 << 31, 1])]);
    let i = b.input(0);
    let e = typed(b.finish(&[i])).expect_err("dimension beyond int32");
    assert_eq!(e.path, "methods[0].graph.inputs[0]", "{e}");
    assert!(e.detail.contains("does not fit int32"), "{e}");
    // A constant whose element count overflows holds no values: refused, not wrapped to 0.
    let b = GraphBuilder::new(vec![f32_const(vec![1 << 32, 1 << 32], vec![])], vec![x()]);
    let i = b.input(0);
    let e = typed(b.finish(&[i])).expect_err("overflowing constant");
    assert_eq!(e.path, "methods[0].graph.constants[0]", "{e}");
    // A view whose element count overflows (7 x 0x6DB6DB6DB6DB6DB7 wraps to 1).
    let mut b = GraphBuilder::new(vec![], vec![f32_tensor(vec![1])]);
    let v = b.op(Op::View { shape: vec![7, 0x6DB6_DB6D_B6DB_6DB7] }, &[b.input(0)]);
    let e = typed(b.finish(&[v])).expect_err("overflowing view");
    assert_eq!(e.path, "methods[0].graph.nodes[0]", "{e}");
    // More than 2^60 elements in one tensor, each dimension within int32.
    let b = GraphBuilder::new(vec![], vec![f32_tensor(vec![1 << 30, 1 << 30, 2])]);
    let i = b.input(0);
    assert!(typed(b.finish(&[i])).expect_err("too many elements").detail.contains("more than"));
    // A constant value its dtype does not hold is refused, not truncated, saturated or
    // rounded to infinity by the emitter.
    for (dtype, values) in [
        (Dtype::I64, vec![2.0, 1.5]),
        (Dtype::I64, vec![0.0, 1e300]),
        (Dtype::Bool, vec![1.0, 0.5]),
        (Dtype::F32, vec![0.0, 1e39]),
    ] {
        let c = ptecheck::ir::ConstTensor { dtype, shape: vec![2], values };
        let b = GraphBuilder::new(vec![c], vec![x()]);
        let i = b.input(0);
        let e = typed(b.finish(&[i])).expect_err("a value outside the dtype");
        assert_eq!(e.path, "methods[0].graph.constants[0].values[1]", "{dtype:?}: {e}");
    }
    for (dtype, values) in [(Dtype::I64, vec![-9.223372036854776e18, 4.0]), (Dtype::Bool, vec![0.0, 1.0])] {
        let b = GraphBuilder::new(vec![ptecheck::ir::ConstTensor { dtype, shape: vec![2], values }], vec![x()]);
        let i = b.input(0);
        assert!(typed(b.finish(&[i])).is_ok(), "{dtype:?}");
    }
    // A scratch buffer is a uint8 tensor of its `nbytes`: past int32 it is refused, not emitted
    // as a tensor of the low 32 bits (2^32 + 16 bytes was written as uint8[16]).
    let mut p = example("scratch-repeated").expect("example");
    let k = p.modules.iter().position(|m| !m.scratch_specs.is_empty()).expect("a scratch module");
    assert!(typecheck_program(&p).is_ok());
    p.modules[k].scratch_specs[0].nbytes = (1 << 32) + 16;
    let e = typecheck_program(&p).expect_err("nbytes past int32");
    assert_eq!(e.path, format!("modules[{k}].scratch_specs[0].nbytes"), "{e}");
    assert!(emit(&p, &opts(false)).is_err(), "the emitter type-checks first");
    p.modules[k].scratch_specs[0].nbytes = i32::MAX as u64;
    assert!(typecheck_program(&p).is_ok());
}

#[test]
fn planned_memory_beyond_int64_is_an_emit_error() {
    // Two inputs of 2^60 float32 elements: 2^63 planned bytes, one past int64.
    let big = f32_tensor(vec![1 << 30, 1 << 30]);
    let b = GraphBuilder::new(vec![], vec![big.clone(), big]);
    let (i, j) = (b.input(0), b.input(1));
    let p = program(vec![("forward", b.finish(&[i, j]))], vec![]);
    let e = emit(&p, &EmitOptions::default()).expect_err("arena beyond int64");
    assert!(e.to_string().contains("does not fit int64"), "{e}");
}

#[test]
fn operand_and_call_argument_type_errors_name_the_node_and_both_types() {
    use ptecheck::ir::infer::typecheck_program;
    let typed = |g: Graph, modules: Vec<LoweredModule>| typecheck_program(&program(vec![("forward", g)], modules));
    // A call whose argument has another shape than the module's input: both types are named.
    let mut b = GraphBuilder::new(vec![], vec![f32_tensor(vec![3, 4])]);
    let y = b.call(0, &[b.input(0)], 1)[0];
    let e = typed(b.finish(&[y]), vec![demo()]).expect_err("argument of another shape");
    assert_eq!(e.path, "methods[0].graph.nodes[0]", "{e}");
    assert!(e.detail.starts_with("call arguments: expected"), "{e}");
    assert!(e.detail.contains("[2, 4]") && e.detail.contains("[3, 4]"), "{e}");
    // A call with one argument too many (the module takes one).
    let mut b = GraphBuilder::new(vec![], vec![x()]);
    let y = b.call(0, &[b.input(0), b.input(0)], 1)[0];
    let e = typed(b.finish(&[y]), vec![demo()]).expect_err("one argument too many");
    assert!(e.detail.starts_with("call arguments"), "{e}");
    // A call naming a ref not yet defined, and an operator reading one, inside a cond branch.
    let mut b = GraphBuilder::new(vec![], vec![x()]);
    let y = b.call(0, &[7], 1)[0];
    let e = typed(b.finish(&[y]), vec![demo()]).expect_err("undefined call argument");
    assert_eq!(
        (e.path.as_str(), e.detail.as_str()),
        ("methods[0].graph.nodes[0]", "ref 7 is not defined before this node (1 defined)")
    );
    let mut branch = GraphBuilder::new(vec![], vec![x()]);
    let bad = branch.op(Op::Relu, &[5]);
    let branch = branch.finish(&[bad]);
    let mut b = GraphBuilder::new(vec![], vec![x(), ValueType::Bool]);
    let out = b.node(
        Node::Cond { pred: b.input(1), then_graph: branch.clone(), else_graph: branch, operands: vec![b.input(0)] },
        1,
    );
    let e = typed(b.finish(&out), vec![]).expect_err("undefined operand in a branch");
    assert_eq!(e.path, "methods[0].graph.nodes[0].then_graph.nodes[0]", "{e}");
    assert_eq!(e.detail, "ref 5 is not defined before this node (1 defined)", "{e}");
    // Well-typed, the same call types (the in-place comparison accepts equal types).
    let p = chain_of(&[0, 0], vec![demo()]);
    assert!(typecheck_program(&p).is_ok());
}

#[test]
fn a_module_is_typed_once_however_many_calls_name_it() {
    use ptecheck::ir::infer::typecheck_program;
    // 40,000 calls of a 40,000-node module: typed once per call, this is 1.6e9 node typings
    // (the run would not end in a test's time); typed once, it is 80,000.
    let n = 40_000;
    let mut m = GraphBuilder::new(vec![], vec![x()]);
    let mut r = m.input(0);
    for _ in 0..n {
        r = m.op(Op::Relu, &[r]);
    }
    let module = LoweredModule { graph: m.finish(&[r]), ..demo() };
    let mut b = GraphBuilder::new(vec![], vec![x()]);
    let mut y = b.input(0);
    for _ in 0..n {
        y = b.call(0, &[y], 1)[0];
    }
    let types = typecheck_program(&program(vec![("forward", b.finish(&[y]))], vec![module])).expect("types");
    assert_eq!(types[0].len(), n + 1);
    assert_eq!(types[0][n], x());
    // Typed through its calls (a method graph alone, as the emitter types it), a module that
    // does not type is named by its own path at the first call, and so is one holding more
    // than CPU ops.
    let mut bad = GraphBuilder::new(vec![], vec![x()]);
    let out = bad.op(Op::Relu, &[9]);
    let module = LoweredModule { graph: bad.finish(&[out]), ..demo() };
    let mut b = GraphBuilder::new(vec![], vec![x()]);
    let first = b.call(0, &[b.input(0)], 1)[0];
    let second = b.call(0, &[first], 1)[0];
    let calls = b.finish(&[second]);
    let e = ptecheck::ir::infer::graph_types(&calls, std::slice::from_ref(&module), "forward").expect_err("bad module");
    assert_eq!(e.path, "modules[0].graph.nodes[0]", "{e}");
    let mut control = GraphBuilder::new(vec![], vec![x()]);
    let inner = control.call(0, &[control.input(0)], 1)[0];
    let module = LoweredModule { graph: control.finish(&[inner]), ..demo() };
    let e = ptecheck::ir::infer::graph_types(&calls, &[module], "forward").expect_err("calls inside a module");
    assert_eq!((e.path.as_str(), e.detail.as_str()), ("forward.nodes[0]", "module 0 holds more than CPU ops"));
}

/// `forward(x, p)`: an opted-in demo module called twice at the top level and twice inside each
/// branch of a cond on `p`.
fn calls_in_and_out_of_a_cond() -> IrProgram {
    let mut m = demo();
    m.share_handle_across_calls = true;
    let mut branch = GraphBuilder::new(vec![], vec![x()]);
    let a = branch.call(0, &[branch.input(0)], 1)[0];
    let b = branch.call(0, &[a], 1)[0];
    let branch = branch.finish(&[b]);
    let mut g = GraphBuilder::new(vec![], vec![x(), ValueType::Bool]);
    let a = g.call(0, &[g.input(0)], 1)[0];
    let b = g.call(0, &[a], 1)[0];
    let c = g
        .node(Node::Cond { pred: g.input(1), then_graph: branch.clone(), else_graph: branch, operands: vec![b] }, 1)[0];
    program(vec![("forward", g.finish(&[c]))], vec![m])
}

#[test]
fn sh3_under_the_body_scope_calls_share_a_delegate_only_within_one_graph_body() {
    use ptecheck::emit::ShareScope;
    let p = calls_in_and_out_of_a_cond();
    let delegates = |scope| {
        let e = emit(&p, &EmitOptions { scope, ..EmitOptions::default() }).expect("emits").program;
        let f = plan(&e, "forward");
        (f.delegate_list().len(), delegate_calls(f).iter().map(|(d, _)| *d).collect::<Vec<_>>())
    };
    // Six call sites: the method scope shares one delegate; the body scope one per body (the
    // top level, the then branch, the else branch), each used by its body's two calls.
    assert_eq!(delegates(ShareScope::Method), (1, vec![0; 6]));
    assert_eq!(delegates(ShareScope::Body), (3, vec![0, 0, 1, 1, 2, 2]));
    // Not opted in: one per call, whatever the scope.
    let unshared = emit(&p, &EmitOptions { share: false, scope: ShareScope::Body, ..EmitOptions::default() })
        .expect("emits")
        .program;
    assert_eq!(plan(&unshared, "forward").delegate_list().len(), 6);
}

#[test]
fn bd1_blobs_deduplicated_by_module_store_equal_bytes_once_per_module() {
    use ptecheck::emit::BlobDedup;
    // Two modules with the same bytes (identical partitions), each called once.
    let p = chain_of(&[0, 1], vec![demo(), demo()]);
    let blobs = |dedup| {
        let e = emit(&p, &EmitOptions { dedup, ..EmitOptions::default() }).expect("emits").program;
        let f = plan(&e, "forward");
        let stored: std::collections::BTreeSet<(i8, u32)> =
            f.delegate_list().iter().filter_map(|d| d.processed.map(|r| (r.location.0, r.index))).collect();
        (f.delegate_list().len(), stored.len())
    };
    assert_eq!(blobs(BlobDedup::Bytes), (2, 1));
    assert_eq!(blobs(BlobDedup::Module), (2, 2));
}
