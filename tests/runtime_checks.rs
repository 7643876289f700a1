//! Init-time checks: real programs pass; each bad-program class is rejected with its typed error
//! and ExecuTorch code.

#![forbid(unsafe_code)]

use ptecheck::format::{self, TensorLayout};
use ptecheck::program::*;
use ptecheck::program::{SCRATCH_KEY, ScratchSpec};
use ptecheck::runtime::{CheckError, ErrorCode, check_all_methods, check_method};

fn real(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/corpus/real/{name}.pte", env!("CARGO_MANIFEST_DIR"))).expect("corpus file")
}

const CORPUS: [&str; 21] = [
    "cond_cpu",
    "cpu_add_mul",
    "cpu_dynamic_batch",
    "cpu_int_bool_dtypes",
    "cpu_linear_relu",
    "demo_backend_whole_module",
    "demo_repeated_call_3x",
    "legacy_et021_inline_constants",
    "map_cpu",
    "multi_method_cpu_shared_weights",
    "xnn_delegate_inline",
    "xnn_dynamic_batch",
    "xnn_fc_256_cancellation",
    "xnn_identical_blobs_dedup",
    "xnn_lowered_in_map_loop",
    "xnn_repeated_call_3x",
    "xnn_single_partition",
    "xnn_softmax_bmm",
    "xnn_transcendentals",
    "xnn_two_partitions_graph_break",
    "xnn_unary_exact",
];

#[test]
fn every_real_program_passes_the_init_checks() {
    for name in CORPUS {
        let d = real(name);
        let loaded = format::load(&d).expect("loads");
        assert_eq!(check_all_methods(&loaded), vec![], "{name}");
    }
}

/// Loads a real file, lets `edit` corrupt its first plan, re-encodes, and checks it.
fn corrupt(name: &str, edit: impl FnOnce(&mut ExecutionPlan)) -> Vec<CheckError> {
    let d = real(name);
    let loaded = format::load(&d).expect("loads");
    let mut program = loaded.program.clone();
    edit(&mut program.execution_plan.as_mut().expect("plans")[0]);
    let bytes = format::write(&program, &loaded.segments, &format::WriteOptions::default()).expect("writes");
    let again = format::load(&bytes).expect("still loads: the corruption is method-level");
    check_method(&again, 0)
}

fn instrs(p: &mut ExecutionPlan) -> &mut Vec<Instruction> {
    p.chains.as_mut().expect("chains")[0].instructions.as_mut().expect("instructions")
}

/// Instruction `i` of the first chain, which must be a KernelCall.
fn kernel(p: &mut ExecutionPlan, i: usize) -> &mut KernelCall {
    match &mut instrs(p)[i] {
        Instruction::KernelCall(k) => k,
        other => panic!("instruction {i} is {}", other.kind()),
    }
}

/// Instruction `i` of the first chain, which must be a DelegateCall.
fn delegate_call(p: &mut ExecutionPlan, i: usize) -> &mut DelegateCall {
    match &mut instrs(p)[i] {
        Instruction::DelegateCall(d) => d,
        other => panic!("instruction {i} is {}", other.kind()),
    }
}

fn first(errs: Vec<CheckError>) -> CheckError {
    assert!(!errs.is_empty(), "expected a violation");
    errs.into_iter().next().expect("one")
}

#[test]
fn delegate_index_out_of_range_sh9() {
    let e = first(corrupt("xnn_repeated_call_3x", |p| delegate_call(p, 1).delegate_index = 3));
    assert!(matches!(e, CheckError::DelegateIndex { index: 3, count: 3, .. }), "{e}");
    assert_eq!(e.code(), ErrorCode::InvalidProgram);
}

#[test]
fn op_index_out_of_range_is_not_masked_by_a_later_lookup_q1() {
    let e = first(corrupt("cpu_add_mul", |p| kernel(p, 0).op_index = 7));
    assert!(matches!(e, CheckError::OpIndex { index: 7, count: 2, .. }), "{e}");
}

#[test]
fn unknown_operator_is_operator_missing() {
    let e = first(corrupt("cpu_add_mul", |p| p.operators.as_mut().expect("ops")[1].name = Some("aten::nope".into())));
    assert!(matches!(&e, CheckError::UnknownOperator { op_index: 1, name, .. } if name == "aten::nope.out"), "{e}");
    assert_eq!(e.code(), ErrorCode::OperatorMissing);
}

#[test]
fn kernel_arity_mismatch_cve_2025_54950() {
    let e = first(corrupt("cpu_add_mul", |p| {
        kernel(p, 0).args.as_mut().expect("args").pop();
    }));
    assert!(matches!(e, CheckError::Arity { expected: 5, found: 4, .. }), "{e}");
}

#[test]
fn value_index_out_of_range() {
    let e = first(corrupt("cpu_add_mul", |p| kernel(p, 1).args.as_mut().expect("args")[0] = -1));
    assert!(matches!(e, CheckError::ValueIndex { index: -1, field: "KernelCall.args", .. }), "{e}");
}

#[test]
fn jump_destination_outside_the_chain() {
    let e = first(corrupt("cond_cpu", |p| {
        let n = instrs(p).len() as i32;
        for i in instrs(p).iter_mut() {
            if let Instruction::JumpFalseCall(j) = i {
                j.destination_instruction = n + 1;
                break;
            }
        }
    }));
    assert!(matches!(e, CheckError::JumpDestination { .. }), "{e}");
}

#[test]
fn plan_input_out_of_range() {
    let e = first(corrupt("cpu_add_mul", |p| p.inputs = Some(vec![0, 99])));
    assert!(matches!(e, CheckError::PlanIo { which: "inputs", position: 1, index: 99, .. }), "{e}");
}

#[test]
fn plan_output_out_of_range() {
    // ExecuTorch 1.5.1 loads such a method and refuses only at execute (docs/semantics.md).
    let e = first(corrupt("cpu_add_mul", |p| p.outputs = Some(vec![-1])));
    assert!(matches!(e, CheckError::PlanIo { which: "outputs", position: 0, index: -1, .. }), "{e}");
}

fn first_tensor(p: &mut ExecutionPlan) -> &mut Tensor {
    p.values
        .as_mut()
        .expect("values")
        .iter_mut()
        .find_map(|v| match v {
            EValue::Tensor(t) => Some(t),
            _ => None,
        })
        .expect("a tensor")
}

#[test]
fn tensor_rank_above_16_cve_2025_54951() {
    let e = first(corrupt("cpu_add_mul", |p| {
        let t = first_tensor(p);
        t.sizes = Some(vec![1; 17]);
        t.dim_order = Some((0..17).collect());
    }));
    assert!(matches!(&e, CheckError::Tensor { what, .. } if what.contains("rank 17")), "{e}");
}

#[test]
fn size_product_overflow_cve_2025_30404() {
    let e = first(corrupt("cpu_add_mul", |p| first_tensor(p).sizes = Some(vec![i32::MAX, i32::MAX, i32::MAX])));
    assert!(
        matches!(&e, CheckError::Tensor { what, .. } if what.contains("rank") || what.contains("overflows")),
        "{e}"
    );
}

#[test]
fn planned_memory_offset_overflow_cve_2025_30405() {
    // Offset + size past u64: InvalidArgument (ExecuTorch's HierarchicalAllocator); past the
    // arena: MemoryAllocationFailed.
    let e = first(corrupt("cpu_add_mul", |p| {
        let a = first_tensor(p).allocation_info.as_mut().expect("planned");
        a.memory_offset_low = u32::MAX;
        a.memory_offset_high = u32::MAX;
    }));
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    let e = first(corrupt("cpu_add_mul", |p| {
        first_tensor(p).allocation_info.as_mut().expect("planned").memory_offset_low = 0x7fff_fff0;
    }));
    assert_eq!(e.code(), ErrorCode::MemoryAllocationFailed, "{e}");
}

#[test]
fn planned_arena_id_out_of_range() {
    let e = first(corrupt("cpu_add_mul", |p| first_tensor(p).allocation_info.as_mut().expect("planned").memory_id = 9));
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
}

#[test]
fn tensor_list_forward_reference_q3() {
    let e = first(corrupt("cpu_add_mul", |p| {
        let vals = p.values.as_mut().expect("values");
        vals.insert(0, EValue::TensorList(Some(vec![1])));
        // shift every index by one so the rest of the method stays valid
        for i in p.inputs.iter_mut().chain(p.outputs.iter_mut()).flatten() {
            *i += 1;
        }
        for ins in instrs(p) {
            if let Instruction::KernelCall(k) = ins {
                for a in k.args.iter_mut().flatten() {
                    *a += 1;
                }
            }
        }
    }));
    assert!(matches!(e, CheckError::ListItem { value: 0, item: 0, index: 1, .. }), "{e}");
}

#[test]
fn delegate_without_id_or_processed() {
    let errs = corrupt("xnn_single_partition", |p| {
        let d = &mut p.delegates.as_mut().expect("delegates")[0];
        d.id = None;
        d.processed = None;
    });
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs.iter().all(|e| matches!(e, CheckError::Delegate { delegate: 0, .. })));
}

fn scratch_spec(nbytes: u64) -> CompileSpec {
    CompileSpec::new(SCRATCH_KEY, ptecheck::program::encode_scratch(&[ScratchSpec { nbytes, mem_id: -1 }]))
}

#[test]
fn scratch_delegate_with_two_call_sites_sh10() {
    let errs = corrupt("xnn_repeated_call_3x", |p| {
        p.delegates.as_mut().expect("delegates")[0].compile_specs = Some(vec![scratch_spec(64)]);
        delegate_call(p, 1).delegate_index = 0;
    });
    assert!(matches!(first(errs), CheckError::ScratchShared { delegate: 0, sites: 2, .. }));
}

#[test]
fn scratch_delegate_with_one_call_site_is_fine_p5() {
    let errs = corrupt("xnn_repeated_call_3x", |p| {
        p.delegates.as_mut().expect("delegates")[0].compile_specs = Some(vec![scratch_spec(64)]);
    });
    assert_eq!(errs, vec![]);
}

#[test]
fn malformed_scratch_entry_p2() {
    let e = first(corrupt("xnn_single_partition", |p| {
        p.delegates.as_mut().expect("delegates")[0].compile_specs =
            Some(vec![CompileSpec::new(SCRATCH_KEY, vec![2, 0, 0, 0, 1])]);
    }));
    assert!(matches!(&e, CheckError::Delegate { what, .. } if what.contains("malformed")), "{e}");
}

#[test]
fn operator_lookup_by_parts_agrees_with_lookup_by_qualified_name() {
    use ptecheck::program::Operator;
    use ptecheck::runtime::kernels::{KERNELS, lookup, lookup_operator};
    let mut ops: Vec<(Option<String>, Option<String>)> = Vec::new();
    for k in KERNELS {
        let (name, overload) = k.name.rsplit_once('.').expect("kernel names carry an overload");
        ops.push((Some(name.into()), Some(overload.into())));
        ops.push((Some(k.name.into()), None));
        ops.push((Some(k.name.into()), Some(String::new())));
        ops.push((Some(name.into()), None));
        ops.push((Some(name.into()), Some(format!("{overload}x"))));
        ops.push((Some(format!("{name}x")), Some(overload.into())));
        ops.push((Some(name[..name.len() - 1].into()), Some(overload.into())));
    }
    ops.push((None, None));
    ops.push((Some(String::new()), Some("out".into())));
    let mut found = 0;
    for (name, overload) in ops {
        let op = Operator { name: name.clone(), overload: overload.clone() };
        let by_parts = lookup_operator(name.as_deref().unwrap_or(""), overload.as_deref().unwrap_or(""));
        let by_name = lookup(&op.qualified());
        assert_eq!(by_parts.map(|k| k.name), by_name.map(|k| k.name), "{op:?}");
        found += usize::from(by_parts.is_some());
    }
    assert!(found >= 2 * KERNELS.len(), "{found}");
}

#[test]
fn a_list_or_string_without_items_is_invalid_program() {
    let kinds: [(EValue, &str); 6] = [
        (EValue::IntList(None), "IntList"),
        (EValue::BoolList(None), "BoolList"),
        (EValue::DoubleList(None), "DoubleList"),
        (EValue::String(None), "String"),
        (EValue::TensorList(None), "TensorList"),
        (EValue::OptionalTensorList(None), "OptionalTensorList"),
    ];
    for (value, kind) in kinds {
        let mut at = 0;
        let e = first(corrupt("cpu_add_mul", |p| {
            let values = p.values.as_mut().expect("values");
            at = values.len();
            values.push(value.clone());
        }));
        let want = format!("{kind} items are absent");
        assert!(
            matches!(&e, CheckError::Tensor { value, what, code: ErrorCode::InvalidProgram, .. } if *value == at && *what == want),
            "{kind}: {e}"
        );
    }
}

#[test]
fn input_templates_give_each_input_its_kind_and_value() {
    use ptecheck::runtime::{HostValue, Runtime, Session};
    let data = real("cpu_add_mul");
    let loaded = format::load(&data).expect("loads");
    let mut program = loaded.program.clone();
    let plan = &mut program.execution_plan.as_mut().expect("plans")[0];
    let values = plan.values.as_mut().expect("values");
    let first_scalar = values.len();
    values.extend([EValue::Bool(true), EValue::Int(-4), EValue::Double(2.5)]);
    let inputs = plan.inputs.as_mut().expect("inputs");
    let tensors = inputs.len();
    inputs.extend([first_scalar as i32, first_scalar as i32 + 1, first_scalar as i32 + 2]);
    let bytes = format::write(&program, &loaded.segments, &format::WriteOptions::default()).expect("writes");
    let loaded = format::load(&bytes).expect("loads");
    let rt = Runtime::default();
    let session = Session::new(&loaded, &rt);
    let method = session.load("forward").expect("inits");
    assert_eq!(method.num_inputs(), tensors + 3);
    assert!(matches!(method.input_template(0), Some(HostValue::Tensor(_))));
    assert_eq!(method.input_template(tensors), Some(HostValue::Bool(true)));
    assert_eq!(method.input_template(tensors + 1), Some(HostValue::Int(-4)));
    assert_eq!(method.input_template(tensors + 2), Some(HostValue::Double(2.5)));
    assert_eq!(method.input_template(tensors + 3), None);
}

#[test]
fn planned_arenas_beyond_the_memory_limit_fail_init_before_any_backend() {
    use ptecheck::runtime::{RuntimeError, Trace};
    let data = real("demo_repeated_call_3x");
    let loaded = format::load(&data).expect("loads");
    let arenas: i64 = loaded.program.plans()[0].non_const_buffer_sizes.as_deref().unwrap_or(&[]).iter().sum();
    assert!(arenas > 16, "{arenas}");
    let mut rt = ptecheck::backends::default_runtime();
    assert!(rt.load_method(&loaded, "forward", None, &Trace::default()).is_ok());
    rt.memory_limit = arenas as usize - 1;
    let trace = Trace::default();
    match rt.load_method(&loaded, "forward", None, &trace) {
        Err(RuntimeError::Check(e)) => assert_eq!(e.code(), ErrorCode::MemoryAllocationFailed, "{e}"),
        Err(e) => assert_eq!(e.code(), ErrorCode::MemoryAllocationFailed, "{e}"),
        Ok(_) => panic!("arenas of {arenas} bytes accepted under a limit of {}", arenas - 1),
    }
    assert!(trace.events().is_empty(), "a backend was initialised: {:?}", trace.events());
    rt.memory_limit = arenas as usize;
    assert!(rt.load_method(&loaded, "forward", None, &Trace::default()).is_ok());
}

#[test]
fn a_kernels_working_copies_are_bounded_by_the_memory_limit_not_only_its_tensors() {
    use ptecheck::runtime::{Runtime, RuntimeError, Session};
    // Within the limit, the planned arenas load; the kernels' copies of their operands (each
    // element as f64 and as i64, and a map per operand) are several times the tensors' bytes.
    let data = real("cpu_add_mul");
    let loaded = format::load(&data).expect("loads");
    let arenas: i64 = loaded.program.plans()[0].non_const_buffer_sizes.as_deref().unwrap_or(&[]).iter().sum();
    let run = |limit: usize| {
        let rt = Runtime { memory_limit: limit, ..Runtime::default() };
        let session = Session::new(&loaded, &rt);
        let mut method = session.load("forward").expect("the arenas fit the limit");
        set_templates(&mut method);
        method.execute()
    };
    match run(arenas as usize) {
        Err(RuntimeError::Kernel { code, detail, .. }) => {
            assert_eq!(code, ErrorCode::MemoryAllocationFailed, "{detail}");
            assert!(detail.contains("working copies") && detail.contains(&format!("{arenas}-byte")), "{detail}");
        }
        other => panic!("arenas of {arenas} bytes: {other:?}"),
    }
    assert!(run(1 << 20).is_ok());
}

/// Sets every input of `method` to its template (zeros of its declared shape, or its value).
fn set_templates(method: &mut ptecheck::runtime::Method<'_>) {
    for i in 0..method.num_inputs() {
        let template = method.input_template(i).expect("an input within the limit");
        method.set_input(i, &template).expect("sets");
    }
}

/// Loads `forward` of real file `name` under `rt`, sets every input to its template and
/// executes it: the outcome and the work it spent.
fn execute_real(name: &str, rt: &ptecheck::runtime::Runtime) -> (Result<(), ptecheck::runtime::RuntimeError>, u64) {
    use ptecheck::runtime::Session;
    let data = real(name);
    let loaded = format::load(&data).expect("loads");
    let session = Session::new(&loaded, rt);
    let mut method = session.load("forward").expect("inits");
    set_templates(&mut method);
    let outcome = method.execute();
    (outcome, method.work_spent())
}

#[test]
fn kernels_delegates_and_their_nested_plans_spend_one_work_budget_per_execution() {
    use ptecheck::runtime::RuntimeError;
    // CPU kernels (a linear's products), a delegate running a nested plan three times, and an
    // XNNPACK delegate: each spends work, refused at the element that passes the budget, and
    // runs again within exactly what it spent.
    for name in ["cpu_linear_relu", "demo_repeated_call_3x", "xnn_single_partition"] {
        let mut rt = ptecheck::backends::default_runtime();
        let (outcome, spent) = execute_real(name, &rt);
        assert!(outcome.is_ok() && spent > 0, "{name}: {outcome:?}, {spent} spent");
        rt.work_budget = spent;
        let (outcome, again) = execute_real(name, &rt);
        assert!(outcome.is_ok() && again == spent, "{name}: {outcome:?}, {again} of {spent}");
        rt.work_budget = spent - 1;
        match execute_real(name, &rt).0 {
            Err(e @ (RuntimeError::Kernel { .. } | RuntimeError::Delegate { .. })) => {
                assert_eq!(e.code(), ErrorCode::InvalidProgram, "{name}: {e}");
                assert!(e.to_string().contains("work budget"), "{name}: {e}");
            }
            other => panic!("{name}: a budget of {} below the {spent} spent: {other:?}", spent - 1),
        }
        // Every budget short of what was spent stops the run, and for a delegating program
        // some of them stop it inside a delegate: its work is counted where it is done.
        let inside: Vec<u64> = (0..spent)
            .filter(|&budget| {
                rt.work_budget = budget;
                match execute_real(name, &rt).0 {
                    Err(e @ RuntimeError::Delegate { .. }) => e.to_string().contains("work budget"),
                    Err(e) => {
                        assert!(e.to_string().contains("work budget"), "{name}, budget {budget}: {e}");
                        false
                    }
                    Ok(()) => panic!("{name}: a budget of {budget} below the {spent} spent ran"),
                }
            })
            .collect();
        assert_eq!(
            inside.is_empty(),
            name == "cpu_linear_relu",
            "{name}: budgets stopped inside a delegate: {inside:?}"
        );
    }
}

#[test]
fn working_copies_are_bounded_per_instruction_not_summed_over_a_run() {
    use ptecheck::runtime::Session;
    // A program of delegate calls only: each call's reads are working copies of that call.
    // Under a limit a few calls' copies would pass, a thousand executions all run.
    let data = real("demo_repeated_call_3x");
    let loaded = format::load(&data).expect("loads");
    let mut rt = ptecheck::backends::default_runtime();
    rt.memory_limit = 16 * 1024;
    let session = Session::new(&loaded, &rt);
    let mut method = session.load("forward").expect("inits");
    set_templates(&mut method);
    for run in 0..1000 {
        method.execute().unwrap_or_else(|e| panic!("execution {run}: {e}"));
    }
    // The bound is enforced: with a limit of the arenas alone, the first call's copies do not
    // fit (a runtime that enforced no limit would run this too).
    let arenas: i64 = loaded.program.plans()[0].non_const_buffer_sizes.as_deref().unwrap_or(&[]).iter().sum();
    rt.memory_limit = arenas as usize;
    let session = Session::new(&loaded, &rt);
    let mut method = session.load("forward").expect("the arenas fit the limit");
    set_templates(&mut method);
    let e = method.execute().expect_err("copies beyond the limit");
    assert_eq!(e.code(), ErrorCode::MemoryAllocationFailed, "{e}");
    assert!(e.to_string().contains("working copies"), "{e}");
}

/// cpu_linear_relu with its 2-d weight moved to a `.ptd` under `linear.weight`, as a constant
/// (`planned: false`) or in a planned arena of its own (`planned: true`, an external mutable
/// tensor): the program's bytes, and the weight's layout and bytes.
fn external_weight(planned: bool) -> (Vec<u8>, TensorLayout, Vec<u8>) {
    let data = real("cpu_linear_relu");
    let loaded = format::load(&data).expect("loads");
    let mut p = loaded.program.clone();
    let plan = &mut p.execution_plan.as_mut().expect("plans")[0];
    let arenas = plan.non_const_buffer_sizes.clone().unwrap_or_default();
    let t = plan
        .values
        .as_mut()
        .expect("values")
        .iter_mut()
        .find_map(|v| match v {
            EValue::Tensor(t) if t.data_buffer_idx > 0 && t.sizes.as_ref().is_some_and(|s| s.len() == 2) => Some(t),
            _ => None,
        })
        .expect("a 2-d constant");
    let sizes = t.sizes.clone().expect("sizes");
    let n = sizes.iter().map(|s| *s as usize).product::<usize>() * 4;
    let weight = loaded.constants[t.data_buffer_idx as usize][..n].to_vec();
    let layout = TensorLayout { scalar_type: t.scalar_type, sizes, dim_order: t.dim_order.clone().unwrap_or_default() };
    t.data_buffer_idx = 0;
    t.extra_tensor_info = Some(ExtraTensorInfo {
        location: TensorDataLocation::EXTERNAL,
        fully_qualified_name: Some("linear.weight".into()),
        ..Default::default()
    });
    if planned {
        t.allocation_info =
            Some(AllocationDetails { memory_id: arenas.len() as u32, memory_offset_low: 0, memory_offset_high: 0 });
        let mut sizes = arenas;
        sizes.push(n as i64);
        plan.non_const_buffer_sizes = Some(sizes);
    }
    (format::write(&p, &loaded.segments, &Default::default()).expect("writes"), layout, weight)
}

/// Runs forward of `program` with `ptd` (if any) on fixed inputs: the outputs, or the error code.
fn run_with_ptd(program: &[u8], ptd: Option<&[u8]>) -> Result<Vec<ptecheck::runtime::HostValue>, ErrorCode> {
    use ptecheck::runtime::{HostTensor, HostValue, Session};
    let loaded = format::load(program).expect("loads");
    let ptd = ptd.map(|b| format::load_ptd(b).expect("a .ptd"));
    let rt = ptecheck::backends::default_runtime();
    let values: Vec<f32> = (0..16).map(|k| k as f32 / 4.0 - 1.5).collect();
    let inputs = [
        HostValue::Tensor(HostTensor::f32(vec![2, 8], &values)),
        HostValue::Tensor(HostTensor::f32(vec![2, 4], &values[..8])),
    ];
    Session::new(&loaded, &rt).with_external(ptd.as_ref()).run("forward", Some(&inputs)).map_err(|e| e.code())
}

#[test]
fn external_tensors_take_their_bytes_from_the_ptd_entry_of_their_layout() {
    let original = run_with_ptd(&real("cpu_linear_relu"), None).expect("runs");
    for planned in [false, true] {
        let (program, layout, weight) = external_weight(planned);
        let ptd = |layout: Option<&TensorLayout>, key: &str| format::write_ptd(&[(key, layout, &weight[..])], 16);
        // Constant or planned, the weight is the .ptd's: the outputs are the original's.
        assert_eq!(
            run_with_ptd(&program, Some(&ptd(Some(&layout), "linear.weight"))),
            Ok(original.clone()),
            "{planned}"
        );
        // Without a .ptd: InvalidState for a constant, InvalidExternalData for a planned tensor
        // (ExecuTorch's parse_external_constants and getTensorDataPtr).
        let no_map = if planned { ErrorCode::InvalidExternalData } else { ErrorCode::InvalidState };
        assert_eq!(run_with_ptd(&program, None), Err(no_map), "{planned}");
        assert_eq!(run_with_ptd(&program, Some(&ptd(Some(&layout), "other.weight"))), Err(ErrorCode::NotFound));
        // An entry whose layout is not the tensor's is refused, not reinterpreted.
        let wrong = [
            TensorLayout { scalar_type: ScalarType::INT, ..layout.clone() },
            TensorLayout { sizes: layout.sizes.iter().rev().copied().collect(), ..layout.clone() },
            TensorLayout { dim_order: vec![1, 0], ..layout.clone() },
        ];
        for w in &wrong {
            let got = run_with_ptd(&program, Some(&ptd(Some(w), "linear.weight")));
            assert_eq!(got, Err(ErrorCode::InvalidExternalData), "{planned} {w:?}");
        }
        // An entry without a layout (ExecuTorch dereferences it unchecked) is refused too.
        assert_eq!(run_with_ptd(&program, Some(&ptd(None, "linear.weight"))), Err(ErrorCode::InvalidExternalData));
    }
}

#[test]
fn an_output_with_no_host_form_is_refused_not_given_as_none() {
    use ptecheck::runtime::{HostTensor, HostValue, Session};
    let data = real("cpu_add_mul");
    let loaded = format::load(&data).expect("loads");
    let mut p = loaded.program.clone();
    let plan = &mut p.execution_plan.as_mut().expect("plans")[0];
    let values = plan.values.as_mut().expect("values");
    values.push(EValue::String(Some("not a tensor".into())));
    values.push(EValue::Null);
    let (string, none) = (values.len() as i32 - 2, values.len() as i32 - 1);
    let rt = ptecheck::backends::default_runtime();
    let x = HostValue::Tensor(HostTensor::f32(vec![2, 3], &[1.0; 6]));
    for (outputs, want) in [(vec![none], Ok(vec![HostValue::None])), (vec![string], Err(ErrorCode::NotSupported))] {
        p.execution_plan.as_mut().expect("plans")[0].outputs = Some(outputs);
        let bytes = format::write(&p, &loaded.segments, &Default::default()).expect("writes");
        let l = format::load(&bytes).expect("loads");
        let got = Session::new(&l, &rt).run("forward", Some(&[x.clone(), x.clone()])).map_err(|e| e.code());
        assert_eq!(got, want);
    }
}

#[test]
fn a_given_input_size_past_int32_is_refused_even_when_the_tensor_is_empty() {
    use ptecheck::runtime::{HostTensor, HostValue, Runtime, RuntimeError, Session};
    // ExecuTorch's sizes are int32. An empty input may still name a larger size ([0, 2^40]
    // holds no element): it is refused at set_input, not carried into kernels that index by
    // its sizes (select_copy normalised an index with it as an i64, sym_size returned it).
    let data = real("cpu_dynamic_batch");
    let loaded = format::load(&data).expect("loads");
    let rt = Runtime::default();
    let session = Session::new(&loaded, &rt);
    let mut method = session.load("forward").expect("inits");
    let HostValue::Tensor(template) = method.input_template(0).expect("a template") else { panic!("a tensor input") };
    let rank = template.sizes.len();
    assert!(rank >= 2, "{:?}", template.sizes);
    let mut sizes = vec![1usize; rank];
    sizes[0] = 0;
    for (big, refused) in [(i32::MAX as usize, false), (i32::MAX as usize + 1, true), (1 << 40, true)] {
        sizes[rank - 1] = big;
        let empty = HostValue::Tensor(HostTensor { dtype: template.dtype, sizes: sizes.clone(), data: vec![] });
        match (method.set_input(0, &empty), refused) {
            (Err(RuntimeError::Input { code, detail, .. }), true) => {
                assert_eq!(code, ErrorCode::NotSupported, "{detail}");
                assert!(detail.contains("exceeds int32"), "{detail}");
            }
            (Ok(()), false) => {}
            (other, _) => panic!("size {big}: {other:?}"),
        }
    }
}
