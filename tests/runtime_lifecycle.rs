//! Delegate lifecycle: init once per BackendDelegate in order, destroy each handle exactly once
//! (on drop, and after a failed init), zero backend calls for a program that fails a check, and
//! the instruction budget.

#![forbid(unsafe_code)]

use ptecheck::backends::compiler_demo::CompilerDemoBackend;
use ptecheck::backends::default_runtime;
use ptecheck::backends::failing::FailingBackend;
use ptecheck::format;
use ptecheck::program::*;
use ptecheck::runtime::*;
use std::sync::Arc;

fn read(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/corpus/real/{name}.pte", env!("CARGO_MANIFEST_DIR"))).expect("corpus file")
}

fn input() -> HostValue {
    HostValue::Tensor(HostTensor::f32(vec![2], &[0.5, -1.0]))
}

#[test]
fn init_failure_at_each_delegate_destroys_exactly_the_earlier_ones_t3() {
    let data = read("demo_repeated_call_3x");
    let loaded = format::load(&data).expect("loads");
    for k in 0..3 {
        let failing = FailingBackend {
            inner: Arc::new(CompilerDemoBackend),
            fail_at: k,
            code: ErrorCode::DelegateMemoryAllocationFailed,
        };
        let rt = Runtime::with_backends([Arc::new(failing) as Arc<dyn Backend>]);
        let trace = Trace::default();
        let err = rt.load_method(&loaded, "forward", None, &trace).err().expect("init fails");
        assert!(matches!(&err, RuntimeError::InitFailed { delegate, .. } if *delegate == k), "{err}");
        assert_eq!(err.code(), ErrorCode::DelegateMemoryAllocationFailed, "the backend's error is returned unchanged");
        let s = trace.summary();
        assert_eq!((s.inits, s.init_failures, s.destroys, s.live_handles), (k, 1, k, 0), "k = {k}");
        assert!(s.bad_destroys.is_empty());
        let destroyed: Vec<usize> = trace
            .events()
            .iter()
            .filter_map(|e| match e {
                TraceEvent::Destroy { delegate, .. } => Some(*delegate),
                _ => None,
            })
            .collect();
        assert_eq!(destroyed, (0..k).collect::<Vec<_>>(), "ascending order");
    }
}

#[test]
fn dropping_a_method_destroys_every_handle_once_t2() {
    let data = read("demo_repeated_call_3x");
    let loaded = format::load(&data).expect("loads");
    let trace = Trace::default();
    {
        let mut m = default_runtime().load_method(&loaded, "forward", None, &trace).expect("loads");
        m.set_input(0, &input()).expect("input");
        for _ in 0..4 {
            m.execute().expect("runs");
        }
        let s = trace.summary();
        assert_eq!((s.inits, s.destroys, s.live_handles, s.executes), (3, 0, 3, 12));
    }
    let s = trace.summary();
    assert_eq!((s.inits, s.destroys, s.live_handles), (3, 3, 0));
    assert!(s.bad_destroys.is_empty());
}

/// Re-encodes `name` with `edit` applied to its first plan.
fn edited(name: &str, edit: impl FnOnce(&mut ExecutionPlan)) -> Vec<u8> {
    let data = read(name);
    let loaded = format::load(&data).expect("loads");
    let mut p = loaded.program.clone();
    edit(&mut p.execution_plan.as_mut().expect("plans")[0]);
    format::write(&p, &loaded.segments, &format::WriteOptions::default()).expect("writes")
}

fn instrs(p: &mut ExecutionPlan) -> &mut Vec<Instruction> {
    p.chains.as_mut().expect("chains")[0].instructions.as_mut().expect("instructions")
}

#[test]
fn every_bad_program_class_is_rejected_with_zero_backend_inits_p3() {
    type Edit = fn(&mut ExecutionPlan);
    let cases: Vec<(&str, Edit, ErrorCode)> = vec![
        (
            "delegate_index out of range (SH9)",
            |p| {
                if let Instruction::DelegateCall(d) = &mut instrs(p)[2] {
                    d.delegate_index = 5;
                }
            },
            ErrorCode::InvalidProgram,
        ),
        (
            "negative delegate_index",
            |p| {
                if let Instruction::DelegateCall(d) = &mut instrs(p)[0] {
                    d.delegate_index = -1;
                }
            },
            ErrorCode::InvalidProgram,
        ),
        (
            "op_index out of range (Q1)",
            |p| {
                if let Instruction::KernelCall(k) = &mut instrs(p)[3] {
                    k.op_index = 4;
                }
            },
            ErrorCode::InvalidProgram,
        ),
        (
            "unknown operator",
            |p| p.operators.as_mut().expect("ops")[0].name = Some("aten::bogus".into()),
            ErrorCode::OperatorMissing,
        ),
        (
            "kernel arity (CVE-2025-54950)",
            |p| {
                if let Instruction::KernelCall(k) = &mut instrs(p)[3] {
                    k.args.as_mut().expect("args").push(0);
                }
            },
            ErrorCode::InvalidProgram,
        ),
        (
            "value index in DelegateCall args",
            |p| {
                if let Instruction::DelegateCall(d) = &mut instrs(p)[1] {
                    d.args = Some(vec![1, 99]);
                }
            },
            ErrorCode::InvalidProgram,
        ),
        (
            "jump destination outside the chain",
            |p| {
                instrs(p).push(Instruction::JumpFalseCall(JumpFalseCall {
                    cond_value_index: 5,
                    destination_instruction: 40,
                }))
            },
            ErrorCode::InvalidProgram,
        ),
        ("plan input out of range", |p| p.inputs = Some(vec![77]), ErrorCode::InvalidProgram),
        (
            "tensor rank 17 (CVE-2025-54951)",
            |p| {
                if let Some(EValue::Tensor(t)) = p.values.as_mut().expect("values").get_mut(0) {
                    t.sizes = Some(vec![1; 17]);
                    t.dim_order = Some((0..17).collect());
                }
            },
            ErrorCode::InvalidProgram,
        ),
        (
            "planned offset + size overflow (CVE-2025-30405)",
            |p| {
                if let Some(EValue::Tensor(t)) = p.values.as_mut().expect("values").get_mut(1) {
                    t.allocation_info.as_mut().expect("planned").memory_offset_high = u32::MAX;
                }
            },
            ErrorCode::MemoryAllocationFailed,
        ),
        ("delegate without id", |p| p.delegates.as_mut().expect("d")[2].id = None, ErrorCode::InvalidProgram),
        ("delegate without processed", |p| p.delegates.as_mut().expect("d")[1].processed = None, ErrorCode::NotFound),
        (
            "scratch delegate called twice (SH10)",
            |p| {
                p.delegates.as_mut().expect("d")[0].compile_specs = Some(vec![CompileSpec::new(
                    SCRATCH_KEY,
                    ptecheck::program::encode_scratch(&[ScratchSpec { nbytes: 8, mem_id: -1 }]),
                )]);
                if let Instruction::DelegateCall(d) = &mut instrs(p)[1] {
                    d.delegate_index = 0;
                }
            },
            ErrorCode::InvalidProgram,
        ),
        (
            "malformed __et_scratch (P2)",
            |p| {
                p.delegates.as_mut().expect("d")[0].compile_specs = Some(vec![CompileSpec::new(SCRATCH_KEY, vec![9])]);
            },
            ErrorCode::InvalidProgram,
        ),
    ];
    for (what, edit, code) in cases {
        let bytes = edited("demo_repeated_call_3x", edit);
        let loaded = format::load(&bytes).expect("loads: the damage is method-level");
        let trace = Trace::default();
        let err = default_runtime()
            .load_method(&loaded, "forward", None, &trace)
            .err()
            .unwrap_or_else(|| panic!("{what}: accepted"));
        assert!(matches!(err, RuntimeError::Check(_)), "{what}: {err}");
        assert_eq!(err.code(), code, "{what}: {err}");
        let s = trace.summary();
        assert_eq!((s.inits, s.destroys, s.executes), (0, 0, 0), "{what}: no backend call");
    }
}

#[test]
fn a_non_terminating_program_hits_the_instruction_budget() {
    // Append an unconditional self-jump: JumpFalseCall on a fresh Bool(false) to itself.
    let bytes = edited("cpu_add_mul", |p| {
        let vals = p.values.as_mut().expect("values");
        vals.push(EValue::Bool(false));
        let cond = (vals.len() - 1) as i32;
        let at = instrs(p).len() as i32;
        instrs(p)
            .push(Instruction::JumpFalseCall(JumpFalseCall { cond_value_index: cond, destination_instruction: at }));
    });
    let loaded = format::load(&bytes).expect("loads");
    let mut rt = default_runtime();
    rt.instruction_budget = 1_000;
    let mut m = rt.load_method(&loaded, "forward", None, &Trace::default()).expect("passes init checks");
    let x = HostValue::Tensor(HostTensor::f32(vec![2, 3], &[1.0; 6]));
    m.set_input(0, &x).expect("input");
    m.set_input(1, &x).expect("input");
    let err = m.execute().expect_err("never ends");
    assert_eq!(err, RuntimeError::BudgetExceeded { method: "forward".into(), budget: 1_000 });
}

#[test]
fn execute_without_inputs_and_bad_inputs_are_typed_errors() {
    let data = read("cpu_add_mul");
    let loaded = format::load(&data).expect("loads");
    let mut m = default_runtime().load_method(&loaded, "forward", None, &Trace::default()).expect("loads");
    assert!(matches!(m.execute(), Err(RuntimeError::Input { index: 0, .. })));
    let wrong_shape = HostValue::Tensor(HostTensor::f32(vec![3, 2], &[0.0; 6]));
    assert!(matches!(m.set_input(0, &wrong_shape), Err(RuntimeError::Input { index: 0, .. })), "static shape is fixed");
    let wrong_dtype = HostValue::Tensor(HostTensor::zeros(ScalarType::LONG, vec![2, 3]).expect("fits"));
    assert!(matches!(m.set_input(1, &wrong_dtype), Err(RuntimeError::Input { index: 1, .. })));
    assert!(matches!(m.set_input(5, &wrong_dtype), Err(RuntimeError::Input { index: 5, .. })));
    assert!(matches!(
        default_runtime().load_method(&loaded, "nope", None, &Trace::default()),
        Err(RuntimeError::MethodNotFound(_))
    ));
}

#[test]
fn runtime_options_parse_and_type_check() {
    let mut o = RuntimeOptions::default();
    o.parse_and_set("multifn.share_multifunction_model=true").expect("ok");
    o.parse_and_set("demo.level=3").expect("ok");
    o.parse_and_set("demo.name=fast").expect("ok");
    let m = o.for_backend("multifn");
    assert_eq!(m.get_bool("share_multifunction_model"), Ok(true));
    assert_eq!(m.get_int("share_multifunction_model"), Err(ErrorCode::InvalidArgument));
    assert_eq!(m.get_bool("missing"), Err(ErrorCode::NotFound));
    assert_eq!(o.for_backend("demo").get_int("level"), Ok(3));
    assert_eq!(o.for_backend("demo").get_str("name"), Ok("fast"));
    assert!(o.parse_and_set("novalue").is_err());
    assert!(o.parse_and_set(".k=1").is_err());
}

/// Runs the shared `denoise-loop` example (one delegate, ten call sites) under `fault`, with the
/// backends counting into a ledger; returns (destroys the backends saw for the handle, destroys
/// the runtime's trace reports).
fn denoise_destroys(fault: Option<ptecheck::fault::Fault>) -> (usize, usize) {
    use ptecheck::backends::ledger::{Counted, Ledger};
    let p = ptecheck::generator::examples::example("denoise-loop").expect("example");
    let bytes = ptecheck::emit::emit(&p, &Default::default()).expect("emits").to_bytes().expect("writes");
    let loaded = format::load(&bytes).expect("loads");
    let ledger = Ledger::default();
    let mut rt = Runtime::with_backends(Counted::all(ptecheck::backends::default_backends(), &ledger));
    rt.fault = fault;
    let session = Session::new(&loaded, &rt);
    session.run("forward", None).expect("runs");
    let counts = ledger.counts();
    assert_eq!(counts.len(), 1, "one handle");
    let backend_side = counts.values().next().map_or(0, |c| c.destroys);
    (backend_side, session.trace().summary().destroys)
}

#[test]
fn teardown_faults_really_happen_and_only_the_backends_see_them() {
    assert_eq!(denoise_destroys(None), (1, 1));
    // The runtime calls destroy ten times on the one handle, but reports one destroy.
    assert_eq!(denoise_destroys(Some(ptecheck::fault::Fault::DestroyPerCallSite)), (10, 1));
    // The runtime never calls destroy, but reports one.
    assert_eq!(denoise_destroys(Some(ptecheck::fault::Fault::LeakSharedHandle)), (0, 1));
}

#[test]
fn an_unplanned_dynamic_input_is_bounded_by_its_declared_shape() {
    // cpu_dynamic_batch's input is DYNAMIC_BOUND [8, 4]; without planned memory its bound is
    // still 32 elements, as ExecuTorch's `numel_bound_` (set_input resizes first). Checked on
    // ExecuTorch 1.5.1's pybindings: 9 rows and a [32] fail set_inputs with 0x10, 3 rows give a
    // [3, 4].
    let data = edited("cpu_dynamic_batch", |p| {
        let x = p.inputs.as_ref().expect("inputs")[0] as usize;
        match &mut p.values.as_mut().expect("values")[x] {
            EValue::Tensor(t) => t.allocation_info = None,
            other => panic!("input is {other:?}"),
        }
    });
    let loaded = format::load(&data).expect("loads");
    let mut m = default_runtime().load_method(&loaded, "forward", None, &Trace::default()).expect("loads");
    let rows = |n: usize| HostValue::Tensor(HostTensor::f32(vec![n, 4], &vec![1.0; n * 4]));
    // ExecuTorch 1.5.1: "method->set_inputs() ... failed with error 0x10" (NotSupported).
    let past = m.set_input(0, &rows(9));
    assert!(
        matches!(&past, Err(e @ RuntimeError::Input { index: 0, .. }) if e.code() == ErrorCode::NotSupported),
        "9 x 4 is past the bound: {past:?}"
    );
    // Another rank: 0x10 on ExecuTorch too ("the tensor rank ... is immutable").
    let flat = m.set_input(0, &HostValue::Tensor(HostTensor::f32(vec![32], &[1.0; 32])));
    assert!(matches!(&flat, Err(e) if e.code() == ErrorCode::NotSupported), "[32] has another rank: {flat:?}");
    // A host shape whose byte count overflows is a typed error, not a panic.
    let huge = HostValue::Tensor(HostTensor { dtype: ScalarType::FLOAT, sizes: vec![1 << 40, 1 << 40], data: vec![] });
    assert!(matches!(m.set_input(0, &huge), Err(RuntimeError::Input { index: 0, .. })));
    m.set_input(0, &rows(3)).expect("3 x 4 fits");
    m.execute().expect("runs");
    let outputs = m.outputs().expect("outputs");
    assert!(matches!(&outputs[0], HostValue::Tensor(t) if t.sizes == [3, 4]), "{outputs:?}");
}

#[test]
fn a_zero_tensor_whose_bytes_overflow_is_refused_not_wrapped() {
    assert_eq!(HostTensor::zeros(ScalarType::LONG, vec![2, 3]).map(|t| t.data.len()), Some(48));
    assert!(HostTensor::zeros(ScalarType::LONG, vec![usize::MAX / 4, 2]).is_none());
    assert!(HostTensor::zeros(ScalarType::BOOL, vec![usize::MAX, 2]).is_none());
}
