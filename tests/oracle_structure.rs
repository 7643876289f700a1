//! The oracle's structural checks (I1–I3, `oracle::structure`) fail on programs that break
//! them: each test emits a built-in example, edits the loaded program the way an emitter bug
//! would, and expects the named invariant with its message.

#![forbid(unsafe_code)]

use ptecheck::emit::{EmitOptions, emit};
use ptecheck::format::{self, LoadedProgram};
use ptecheck::generator::examples::example;
use ptecheck::ir::IrProgram;
use ptecheck::oracle::{Invariant, Report, structure};
use ptecheck::program::{EValue, Instruction, SCRATCH_KEY, ScratchSpec, encode_scratch, parse_scratch};

fn emitted(name: &str) -> (IrProgram, Vec<u8>) {
    let ir = example(name).expect("example");
    let opts = EmitOptions { allow_while: true, ..EmitOptions::default() };
    let bytes = emit(&ir, &opts).expect("emits").to_bytes().expect("writes");
    (ir, bytes)
}

fn check(ir: &IrProgram, loaded: &LoadedProgram<'_>) -> Report {
    let mut r = Report::default();
    structure::check(ir, loaded, true, &mut r);
    r
}

fn failed(r: &Report, invariant: &str, needle: &str) -> bool {
    r.failures.iter().any(|f| f.invariant == invariant && f.detail.contains(needle))
}

#[test]
fn the_unedited_examples_pass() {
    for name in ["multi-method", "scratch-repeated", "denoise-loop", "cond-delegates", "map-delegate"] {
        let (ir, bytes) = emitted(name);
        let r = check(&ir, &format::load(&bytes).expect("loads"));
        assert!(r.ok(), "{name}: {:?}", r.failures);
        assert!(
            r.checked.get(&Invariant::I1).is_some_and(|n| *n > 0)
                && r.checked.get(&Invariant::I3).is_some_and(|n| *n > 0)
        );
    }
}

#[test]
fn a_method_without_a_plan_fails_i1() {
    let (ir, bytes) = emitted("multi-method");
    let mut loaded = format::load(&bytes).expect("loads");
    let plans = loaded.program.execution_plan.as_mut().expect("plans");
    assert!(plans.len() >= 2);
    let dropped = plans.pop().expect("a plan").name.unwrap_or_default();
    let r = check(&ir, &loaded);
    assert!(failed(&r, "I1", &dropped), "{:?}", r.failures);
}

#[test]
fn a_scratch_entry_that_differs_from_the_declaration_fails_i3() {
    let (ir, bytes) = emitted("scratch-repeated");
    let mut loaded = format::load(&bytes).expect("loads");
    let mut edited = 0;
    for plan in loaded.program.execution_plan.as_mut().expect("plans") {
        for d in plan.delegates.as_mut().into_iter().flatten() {
            for spec in d.compile_specs.as_mut().into_iter().flatten() {
                if spec.key.as_deref() == Some(SCRATCH_KEY) {
                    let value = spec.value.as_mut().expect("value");
                    let mut specs = parse_scratch(&value.0).expect("parses");
                    specs[0] = ScratchSpec { nbytes: specs[0].nbytes + 8, mem_id: specs[0].mem_id };
                    value.0 = encode_scratch(&specs);
                    edited += 1;
                }
            }
        }
    }
    assert!(edited > 0);
    let r = check(&ir, &loaded);
    assert!(failed(&r, "I3", "scratch entry"), "{:?}", r.failures);
}

#[test]
fn a_delegate_argument_of_the_wrong_type_or_a_foreign_blob_fails_i3() {
    let (ir, bytes) = emitted("multi-method");
    let mut loaded = format::load(&bytes).expect("loads");
    // Point the first DelegateCall's first argument at a non-tensor value.
    let plan = &mut loaded.program.execution_plan.as_mut().expect("plans")[0];
    let values = plan.values.as_mut().expect("values");
    values.push(EValue::Int(0));
    let scalar = values.len() as i32 - 1;
    let call = plan
        .chains
        .as_mut()
        .expect("chains")
        .iter_mut()
        .flat_map(|c| c.instructions.as_mut().expect("instructions").iter_mut())
        .find_map(|i| match i {
            Instruction::DelegateCall(d) => Some(d),
            _ => None,
        })
        .expect("a DelegateCall");
    call.args.as_mut().expect("args")[0] = scalar;
    let r = check(&ir, &loaded);
    assert!(failed(&r, "I3", "args[0]"), "{:?}", r.failures);
    // The module's processed bytes changed in the IR: the stored blob no longer matches.
    let (mut ir, bytes) = emitted("multi-method");
    let loaded = format::load(&bytes).expect("loads");
    ir.modules[0].processed.push(0);
    let r = check(&ir, &loaded);
    assert!(failed(&r, "I3", "blob differs"), "{:?}", r.failures);
}

#[test]
fn an_unreferenced_delegate_or_an_out_of_range_list_item_fails_i1() {
    let (ir, bytes) = emitted("multi-method");
    let mut loaded = format::load(&bytes).expect("loads");
    let plan = &mut loaded.program.execution_plan.as_mut().expect("plans")[0];
    let delegates = plan.delegates.as_mut().expect("delegates");
    let copy = delegates[0].clone();
    delegates.push(copy);
    let r = check(&ir, &loaded);
    assert!(failed(&r, "I1", "no DelegateCall references"), "{:?}", r.failures);
    for list in [
        EValue::TensorList(Some(vec![0, 9999])),
        EValue::OptionalTensorList(Some(vec![-1, 9999])),
        EValue::IntList(Some(vec![9999])),
    ] {
        let (ir, bytes) = emitted("multi-method");
        let mut loaded = format::load(&bytes).expect("loads");
        let plan = &mut loaded.program.execution_plan.as_mut().expect("plans")[0];
        plan.values.as_mut().expect("values").push(list.clone());
        let r = check(&ir, &loaded);
        assert!(failed(&r, "I1", "9999"), "{list:?}: {:?}", r.failures);
    }
}

#[test]
fn i7_write_load_write_sees_a_lossy_loader_in_the_program_or_the_segments() {
    let ir = example("multi-method").expect("example");
    let emitted = emit(&ir, &EmitOptions::default()).expect("emits");
    let bytes = emitted.to_bytes().expect("writes");
    let loaded = format::load(&bytes).expect("loads");
    assert!(ptecheck::oracle::written_again_is_the_same(&emitted, &bytes, &loaded));
    let mut renamed = loaded.clone();
    renamed.program.execution_plan.as_mut().expect("plans")[0].name = Some("renamed".into());
    assert!(!ptecheck::oracle::written_again_is_the_same(&emitted, &bytes, &renamed));
    let mut dropped = loaded.clone();
    dropped.program.execution_plan.as_mut().expect("plans")[0].values.as_mut().expect("values").pop();
    assert!(!ptecheck::oracle::written_again_is_the_same(&emitted, &bytes, &dropped));
    if let Some((k, seg)) = loaded.segments.iter().enumerate().find(|(_, s)| !s.is_empty()) {
        let mut cut = loaded.clone();
        cut.segments[k] = &seg[..seg.len() - 1];
        assert!(!ptecheck::oracle::written_again_is_the_same(&emitted, &bytes, &cut));
    } else {
        panic!("the example has a non-empty segment");
    }
}

#[test]
fn a_report_counts_invariants_under_their_report_names() {
    let mut r = Report::default();
    r.check(Invariant::Trace, true, String::new);
    r.held(Invariant::Negative, 3);
    let json = serde_json::to_value(&r).expect("serialises");
    assert_eq!(json["checked"], serde_json::json!({ "trace": 1, "negative": 3 }));
}

/// One emitted program checked as the emission of both shares (what `check_case` does when
/// sharing changes nothing) must meet both shares' expectations: a shared emission passes as
/// itself and fails as the unshared one.
#[test]
fn one_program_checked_for_both_shares_meets_each_shares_expectations() {
    use ptecheck::oracle::{CheckOptions, case_of, check_emitted};
    let ir = example("denoise-loop").expect("example");
    let case = case_of(&ir, 0);
    let opts = CheckOptions::default();
    let with = |share| emit(&ir, &EmitOptions { share, ..EmitOptions::default() }).expect("emits");
    let (shared, unshared) = (with(true), with(false));
    assert_ne!(shared.program, unshared.program, "the example shares a handle");
    let r = check_emitted(&case, &opts, &shared, &[true]);
    assert!(r.ok(), "{:?}", r.failures);
    assert!(check_emitted(&case, &opts, &unshared, &[false]).ok());
    let r = check_emitted(&case, &opts, &shared, &[true, false]);
    assert!(failed(&r, "I4", "share=false"), "{:?}", r.failures);
    let r = check_emitted(&case, &opts, &unshared, &[true, false]);
    assert!(failed(&r, "I4", "share=true"), "{:?}", r.failures);
}

/// A program that does not type is an `emit` failure naming where, after the saved-JSON and
/// eager checks have said what they could (no panic, nothing checked past it).
#[test]
fn a_program_that_does_not_type_fails_emit_naming_the_place() {
    use ptecheck::oracle::{CheckOptions, case_of, check_case};
    let mut ir = example("multi-method").expect("example");
    ir.methods[0].graph.outputs = vec![999];
    let r = check_case(&case_of(&ir, 0), &CheckOptions::default());
    assert!(failed(&r, "emit", "methods[0].graph.outputs[0]"), "{:?}", r.failures);
    // The saved JSON reads back the same program, which `load` rejects at the same place.
    assert!(failed(&r, "I7", "does not load back: $.program.methods[0].graph.outputs[0]"), "{:?}", r.failures);
    assert_eq!(r.checked.get(&ptecheck::oracle::Invariant::I7), Some(&1));
    assert_eq!(r.negative.per_element, 0);
}
