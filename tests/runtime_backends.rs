//! Test backends at run time: sharing a stateful (`argkeep`) handle is visible as wrong
//! outputs, and mutable buffers start from their serialized initial values.

#![forbid(unsafe_code)]

use ptecheck::backends::default_runtime;
use ptecheck::backends::graph::{Flavor, lower};
use ptecheck::emit::{EmitOptions, emit};
use ptecheck::format;
use ptecheck::generator::examples::step_graph;
use ptecheck::ir::build::{GraphBuilder, f32_tensor};
use ptecheck::ir::{IrMethod, IrProgram};
use ptecheck::program::*;
use ptecheck::runtime::{HostTensor, HostValue, Trace};

fn two_calls(share_flag: bool) -> IrProgram {
    let mut m = lower(Flavor::ArgKeep, step_graph(), vec![], None).expect("lowers");
    m.share_handle_across_calls = share_flag;
    let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![2, 4])]);
    let a = g.call(0, &[g.input(0)], 1)[0];
    let b = g.call(0, &[a], 1)[0];
    IrProgram {
        methods: vec![IrMethod { name: "forward".into(), graph: g.finish(&[b]) }],
        modules: vec![m],
        named_data: vec![],
    }
}

fn run(p: &IrProgram) -> (Vec<HostValue>, usize) {
    let bytes = emit(p, &EmitOptions::default()).expect("emits").to_bytes().expect("writes");
    let loaded = format::load(&bytes).expect("loads");
    let trace = Trace::default();
    let mut m = default_runtime().load_method(&loaded, "forward", None, &trace).expect("loads");
    m.set_input(0, &HostValue::Tensor(HostTensor::f32(vec![2, 4], &[0.1, 0.2, 0.3, 0.4, -0.1, -0.2, -0.3, -0.4])))
        .expect("input");
    m.execute().expect("runs");
    (m.outputs().expect("outputs"), trace.summary().inits)
}

#[test]
fn argkeep_wrongly_opted_in_gives_different_outputs() {
    let (right, inits_right) = run(&two_calls(false));
    let (wrong, inits_wrong) = run(&two_calls(true));
    assert_eq!((inits_right, inits_wrong), (2, 1));
    assert_ne!(right, wrong, "a shared argkeep handle reads the first call's slots on the second call");
}

#[test]
fn mutable_buffers_start_from_their_segment() {
    let p = two_calls(false);
    let e = emit(&p, &EmitOptions::default()).expect("emits");
    let mut program = e.program.clone();
    let mut segs = e.segment_data.clone();
    let init: Vec<u8> = [1.5f32, -2.25].iter().flat_map(|v| v.to_le_bytes()).collect();
    segs.push(init.clone());
    let sizes: Vec<(u64, u64)> = segs.iter().map(|d| (d.len() as u64, 1)).collect();
    program.segments = Some(format::layout_segments(&sizes, 128));
    program.mutable_data_segments =
        Some(vec![SubsegmentOffsets { segment_index: (segs.len() - 1) as u32, offsets: Some(vec![0, 0]) }]);
    let plan = &mut program.execution_plan.as_mut().expect("plans")[0];
    let arena = plan.non_const_buffer_sizes.as_ref().expect("sizes")[1];
    plan.non_const_buffer_sizes = Some(vec![0, arena + 16]);
    let values = plan.values.as_mut().expect("values");
    values.push(EValue::Tensor(Tensor {
        scalar_type: ScalarType::FLOAT,
        sizes: Some(vec![2]),
        dim_order: Some(vec![0]),
        data_buffer_idx: 1,
        allocation_info: Some(AllocationDetails {
            memory_id: 1,
            memory_offset_low: arena as u32,
            memory_offset_high: 0,
        }),
        ..Tensor::default()
    }));
    let v = (values.len() - 1) as i32;
    plan.outputs = Some(vec![v]);
    let refs: Vec<&[u8]> = segs.iter().map(Vec::as_slice).collect();
    let bytes = format::write(&program, &refs, &Default::default()).expect("writes");
    let loaded = format::load(&bytes).expect("loads");
    let mut m = default_runtime().load_method(&loaded, "forward", None, &Trace::default()).expect("loads");
    m.set_input(0, &HostValue::Tensor(HostTensor::zeros(ScalarType::FLOAT, vec![2, 4]).expect("fits"))).expect("input");
    m.execute().expect("runs");
    assert_eq!(
        m.outputs().expect("outputs"),
        vec![HostValue::Tensor(HostTensor { dtype: ScalarType::FLOAT, sizes: vec![2], data: init })]
    );
}

#[test]
fn a_graph_blob_is_a_checked_plan_of_kernels_not_an_interpreted_graph() {
    use ptecheck::backends::graph::{BLOB_METHOD, MAGIC, parse};
    let m = lower(Flavor::Demo, step_graph(), vec![], None).expect("lowers");
    let body = m.processed.strip_prefix(MAGIC).expect("magic");
    let loaded = format::load(body).expect("the blob is a .pte");
    let plan = loaded.program.plan(BLOB_METHOD).expect("one method");
    let kernels: Vec<String> = plan.operator_list().iter().map(|o| o.qualified()).collect();
    assert_eq!(kernels, ["aten::mul.out", "aten::add.out", "aten::sin.out"]);
    assert!(plan.delegate_list().is_empty());
    assert!(parse(&m.processed).is_ok());
    // A blob whose plan is broken is refused at init like any method would be.
    let mut p = loaded.program.clone();
    if let Some(Instruction::KernelCall(k)) = p.execution_plan.as_mut().expect("plans")[0].chains.as_mut().expect("c")
        [0]
    .instructions
    .as_mut()
    .expect("i")
    .get_mut(0)
    {
        k.args.as_mut().expect("args")[0] = 999;
    }
    let mut bad = MAGIC.to_vec();
    bad.extend(format::write(&p, &loaded.segments, &Default::default()).expect("writes"));
    let e = parse(&bad).expect_err("refused");
    assert_eq!(e.code, ptecheck::runtime::ErrorCode::InvalidProgram, "{}", e.detail);
    assert!(e.detail.contains("KernelCall.args = 999"), "{}", e.detail);
}

#[test]
fn a_nested_plan_runs_within_the_memory_limit_it_is_given() {
    use ptecheck::backends::graph::parse;
    let m = lower(Flavor::Demo, step_graph(), vec![], None).expect("lowers");
    let plan = parse(&m.processed).expect("parses");
    let x = HostValue::Tensor(HostTensor::f32(vec![2, 4], &[1.0; 8]));
    let (_, spent) = plan.run(std::slice::from_ref(&x), 1 << 20, u64::MAX).expect("runs");
    let e = plan.run(std::slice::from_ref(&x), 8, u64::MAX).expect_err("arenas above 8 bytes");
    assert_eq!(e.code(), ptecheck::runtime::ErrorCode::MemoryAllocationFailed, "{e}");
    // Its kernels' work is what it spent, and a budget one element short stops it.
    assert!(spent > 0);
    assert_eq!(plan.run(std::slice::from_ref(&x), 1 << 20, spent).map(|r| r.1).ok(), Some(spent));
    let e = plan.run(&[x], 1 << 20, spent - 1).expect_err("one element short");
    assert!(e.to_string().contains("work budget"), "{e}");
}

#[test]
fn a_method_exposes_the_trace_it_records_into() {
    let p = two_calls(true);
    let bytes = emit(&p, &EmitOptions::default()).expect("emits").to_bytes().expect("writes");
    let loaded = format::load(&bytes).expect("loads");
    let rt = default_runtime();
    let session = ptecheck::runtime::Session::new(&loaded, &rt);
    let m = session.load("forward").expect("inits");
    let inits = m.trace().events().iter().filter(|e| matches!(e, ptecheck::runtime::TraceEvent::Init { .. })).count();
    assert_eq!(inits, loaded.program.plans()[0].delegate_list().len());
    assert!(inits > 0);
}

#[test]
fn the_compiler_demo_checks_a_result_against_its_entry_and_the_limit_before_making_it() {
    use ptecheck::backends::compiler_demo::{DemoEntry, DemoOp, run};
    use ptecheck::runtime::ErrorCode;
    let n = 1usize << 20;
    // [2^20, 0] @ [0, 2^20]: no element either side, a 2^40-element result.
    let ins = [(vec![n, 0], vec![]), (vec![0, n], vec![])];
    let free = |_: u64, _: &dyn std::fmt::Display| Ok(());
    let e = run(&[DemoEntry { op: DemoOp::Mm, numel: n * n }], &ins, 1 << 20, &free).expect_err("over the limit");
    assert_eq!(e.code, ErrorCode::MemoryAllocationFailed, "{e}");
    let e = run(&[DemoEntry { op: DemoOp::Mm, numel: 4 }], &ins, 1 << 20, &free).expect_err("not the entry's numel");
    assert_eq!(e.code, ErrorCode::InvalidProgram, "{e}");
    assert!(e.detail.contains("entry 0 produces shape [1048576, 1048576], blob says numel 4"), "{e}");
    // Within both, it computes.
    let small = [(vec![1, 2], vec![1.0, 2.0]), (vec![2, 1], vec![3.0, 4.0])];
    let (shape, values) = run(&[DemoEntry { op: DemoOp::Mm, numel: 1 }], &small, 1 << 20, &free).expect("runs");
    assert_eq!((shape, values), (vec![1, 1], vec![11.0]));
    // Each entry's work is spent before it is done: a [3, 5] @ [5, 7] product makes 3 x 7
    // results of 5 multiply-adds each; a spender that refuses stops it there.
    let spent = std::cell::Cell::new(0u64);
    let count = |w: u64, _: &dyn std::fmt::Display| {
        spent.set(spent.get() + w);
        Ok(())
    };
    let product = [(vec![3, 5], vec![1.0; 15]), (vec![5, 7], vec![1.0; 35])];
    run(&[DemoEntry { op: DemoOp::Mm, numel: 21 }], &product, 1 << 20, &count).expect("runs");
    // Its inputs are spent where the backend reads them, not again here.
    assert_eq!(spent.get(), 3 * 7 + 3 * 5 * 7);
    let refuse = |w: u64, what: &dyn std::fmt::Display| {
        Err(ptecheck::runtime::frame::OpError::new(ErrorCode::InvalidProgram, format!("{what}: {w}")))
    };
    let e = run(&[DemoEntry { op: DemoOp::Mm, numel: 21 }], &product, 1 << 20, &refuse).expect_err("refused");
    assert_eq!(e.detail, "entry 0: 126");
}

#[test]
fn a_nested_plan_spends_from_its_callers_work_budget() {
    use ptecheck::runtime::{Runtime, RuntimeError};
    // Two delegate calls and no CPU kernel around them: all the work the method spends is
    // what its nested plans did, so a delegate cannot multiply the budget by being called.
    let bytes = emit(&two_calls(false), &EmitOptions::default()).expect("emits").to_bytes().expect("writes");
    let loaded = format::load(&bytes).expect("loads");
    let execute = |rt: &Runtime| {
        let mut m = rt.load_method(&loaded, "forward", None, &Trace::default()).expect("loads");
        m.set_input(0, &HostValue::Tensor(HostTensor::f32(vec![2, 4], &[0.5; 8]))).expect("input");
        let outcome = m.execute();
        (outcome, m.work_spent())
    };
    let mut rt = default_runtime();
    let (outcome, spent) = execute(&rt);
    assert!(outcome.is_ok() && spent > 0, "{outcome:?}, {spent} spent");
    rt.work_budget = spent - 1;
    match execute(&rt).0 {
        Err(e @ RuntimeError::Delegate { .. }) => assert!(e.to_string().contains("work budget"), "{e}"),
        other => panic!("one element short of {spent}: {other:?}"),
    }
}
