//! The negative corruption list (`oracle::negative`), counted independently from each plan's
//! structure: every index field at each boundary value past its range, arity off by one,
//! scratch call sites, jump destinations past the end, plan inputs and outputs, list items out
//! of range and forward references; every corruption applies to a copy, changes exactly the
//! element its patch names, is put back by `restore`, and is described by method and place.

#![forbid(unsafe_code)]

use arbitrary::Unstructured;
use ptecheck::campaign::{CampaignOptions, case_config, case_input};
use ptecheck::format;
use ptecheck::generator::generate;
use ptecheck::oracle::negative::{Class, Corruption, Patched, corruptions, past};
use ptecheck::program::{EValue, ExecutionPlan, Instruction, SCRATCH_KEY};
use std::collections::BTreeMap;

#[test]
fn boundary_values_are_the_length_one_past_it_and_the_extremes() {
    assert_eq!(past(0), [0, 1, i32::MAX, -1, i32::MIN]);
    assert_eq!(past(7), [7, 8, i32::MAX, -1, i32::MIN]);
    assert_eq!(past(usize::MAX), [i32::MAX, i32::MAX, i32::MAX, -1, i32::MIN]);
}

/// The corruptions per class a plan must get, counted from its structure alone.
fn expected(plan: &ExecutionPlan) -> BTreeMap<Class, usize> {
    let mut n: BTreeMap<Class, usize> = BTreeMap::new();
    let mut add = |c: Class, k: usize| *n.entry(c).or_default() += k;
    let nv = plan.value_list().len();
    let scratch: Vec<i32> = plan
        .delegate_list()
        .iter()
        .enumerate()
        .filter(|(_, d)| d.compile_spec_list().iter().any(|c| c.key.as_deref() == Some(SCRATCH_KEY)))
        .map(|(i, _)| i as i32)
        .collect();
    for chain in plan.chain_list() {
        for ins in chain.instruction_list() {
            match ins {
                Instruction::KernelCall(k) => {
                    add(Class::OpIndex, 5);
                    add(Class::ValueIndex, 5 * k.args.as_ref().map_or(0, Vec::len));
                    add(Class::Arity, if nv > 0 { 2 } else { 1 });
                }
                Instruction::DelegateCall(d) => {
                    add(Class::DelegateIndex, 5);
                    add(Class::ValueIndex, 5 * d.args.as_ref().map_or(0, Vec::len));
                    add(Class::ScratchCallSites, scratch.iter().filter(|s| **s != d.delegate_index).count());
                }
                Instruction::MoveCall(_) => add(Class::ValueIndex, 10),
                Instruction::JumpFalseCall(_) => {
                    add(Class::JumpDestination, 5);
                    add(Class::ValueIndex, 5);
                }
                Instruction::FreeCall(_) => add(Class::ValueIndex, 5),
            }
        }
    }
    add(Class::PlanIo, 5 * (plan.inputs.as_ref().map_or(0, Vec::len) + plan.outputs.as_ref().map_or(0, Vec::len)));
    for (v, val) in plan.value_list().iter().enumerate() {
        match val {
            EValue::IntList(Some(x)) => add(Class::ListItem, 2 * x.len()),
            EValue::TensorList(Some(x)) | EValue::OptionalTensorList(Some(x)) => {
                add(Class::ListItem, 2 * x.len());
                if v + 1 < nv {
                    add(Class::ListForwardRef, x.len());
                }
            }
            _ => {}
        }
    }
    n.retain(|_, k| *k > 0);
    n
}

fn element(plan: &ExecutionPlan, c: &Corruption) -> Patched {
    c.patch(plan).expect("the place exists")
}

#[test]
fn every_plan_gets_every_corruption_its_structure_calls_for_and_each_applies() {
    let opts = CampaignOptions { seed: 11, ..CampaignOptions::default() };
    let mut seen: BTreeMap<Class, usize> = BTreeMap::new();
    for case in 0..60 {
        let g = generate(&case_config(&opts, case), &mut Unstructured::new(&case_input(11, case)), None);
        let bytes = ptecheck::campaign::case_files::emit_both(&g, true).expect("emits").shared;
        let loaded = format::load(&bytes).expect("loads");
        for (pi, plan) in loaded.program.plans().iter().enumerate() {
            let all = corruptions(plan, pi);
            let mut counted: BTreeMap<Class, usize> = BTreeMap::new();
            // One slot patched in turn by every corruption, as the negative checks do.
            let mut slot = None;
            for c in &all {
                assert!(c.patch_into(plan, &mut slot), "does not patch: {}", c.describe(&loaded.program));
                assert_eq!(slot.as_ref(), Some(&element(plan, c)), "reused slot: {}", c.describe(&loaded.program));
                *counted.entry(c.class).or_default() += 1;
                *seen.entry(c.class).or_default() += 1;
                assert_eq!(c.plan, pi);
                // Applied to a copy, the one patched element is what changed.
                let mut copy = loaded.program.clone();
                assert!(c.apply(&mut copy), "does not apply: {}", c.describe(&loaded.program));
                assert_ne!(copy, loaded.program, "changes nothing: {}", c.describe(&loaded.program));
                let edited = &copy.plans()[pi];
                match element(plan, c) {
                    Patched::Instruction(ch, i, ins) => {
                        assert_eq!(edited.chain_list()[ch].instruction_list()[i], ins);
                        let place = format!("{} chains[{ch}].instructions[{i}]", plan.name_str());
                        assert!(c.describe(&loaded.program).starts_with(&place), "{}", c.describe(&loaded.program));
                        if let (Class::JumpDestination, Instruction::JumpFalseCall(j)) = (c.class, &ins) {
                            let len = plan.chain_list()[ch].instruction_list().len() as i64;
                            let d = i64::from(j.destination_instruction);
                            assert!(d < 0 || d > len, "destination {d} of a chain of {len} is valid");
                        }
                    }
                    Patched::Value(v, value) => assert_eq!(edited.value_list()[v], value),
                    Patched::PlanIo(..) => assert!(c.describe(&loaded.program).starts_with(plan.name_str())),
                }
                // Put back, the copy is the program again (one copy serves every corruption).
                assert!(c.restore(&mut copy, &loaded.program), "cannot put back: {}", c.describe(&loaded.program));
                assert_eq!(copy, loaded.program, "not put back: {}", c.describe(&loaded.program));
            }
            assert_eq!(counted, expected(plan), "case {case} plan {pi}");
        }
    }
    for class in [
        Class::ValueIndex,
        Class::OpIndex,
        Class::Arity,
        Class::DelegateIndex,
        Class::ScratchCallSites,
        Class::JumpDestination,
        Class::ListItem,
        Class::PlanIo,
    ] {
        assert!(seen.get(&class).is_some_and(|n| *n > 0), "{class:?} never generated: {seen:?}");
    }
}

#[test]
fn tensor_lists_get_out_of_range_items_and_forward_references() {
    // No generated program has a TensorList (no generated op takes one): a real file's plan
    // with lists added by hand.
    let data = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/real/cpu_add_mul.pte")).expect("reads");
    let loaded = format::load(&data).expect("loads");
    let mut plan = loaded.program.plans()[0].clone();
    let values = plan.values.as_mut().expect("values");
    let tensor = values.iter().position(|v| v.as_tensor().is_some()).expect("a tensor") as i32;
    values.push(EValue::TensorList(Some(vec![tensor, tensor])));
    values.push(EValue::OptionalTensorList(Some(vec![tensor, -1, tensor])));
    values.push(EValue::TensorList(Some(vec![tensor])));
    let nv = values.len();
    let all = corruptions(&plan, 0);
    assert_eq!(expected(&plan), {
        let mut m: BTreeMap<Class, usize> = BTreeMap::new();
        for c in &all {
            *m.entry(c.class).or_default() += 1;
        }
        m
    });
    // Two lists have a later value: 2 + 3 forward references, each naming the next value.
    let forward: Vec<&Corruption> = all.iter().filter(|c| c.class == Class::ListForwardRef).collect();
    assert_eq!(forward.len(), 5);
    for c in &forward {
        match element(&plan, c) {
            Patched::Value(v, EValue::TensorList(Some(items)) | EValue::OptionalTensorList(Some(items))) => {
                assert!(items.iter().any(|x| *x as usize == v + 1), "{items:?} at {v}");
            }
            other => panic!("{other:?}"),
        }
    }
    // Out of range: `nv` and i32::MAX per item of all three lists.
    let out: Vec<i64> = all
        .iter()
        .filter(|c| c.class == Class::ListItem)
        .filter_map(|c| match c.edit {
            ptecheck::oracle::negative::Edit::ListItem { value, to, .. } if value >= nv - 3 => Some(to),
            _ => None,
        })
        .collect();
    assert_eq!(out.len(), 2 * 6);
    assert!(out.iter().all(|t| *t == nv as i64 || *t == i64::from(i32::MAX)));
}

/// The negative checks send every corruption through the per-element check and, of those, one
/// per sample end to end (two samples picking one corruption send it once); without samples,
/// every corruption goes end to end. Every one is rejected either way.
#[test]
fn each_sample_sends_one_corruption_end_to_end_and_no_samples_send_every_one() {
    use ptecheck::oracle::lifecycle::Rig;
    use ptecheck::oracle::{CheckOptions, Report, negative};
    let ir = ptecheck::generator::examples::example("multi-method").expect("example");
    let bytes = ptecheck::emit::emit(&ir, &Default::default()).expect("emits").to_bytes().expect("writes");
    let mut loaded = format::load(&bytes).expect("loads");
    let program = loaded.program.clone();
    let rig = Rig::new(&CheckOptions::default(), false, None);
    let n = corruptions(&loaded.program.plans()[0], 0).len();
    assert!(n > 10);
    for (samples, end_to_end) in [(Some(vec![1, 2]), 2), (Some(vec![5, 5 + n as u64]), 1), (Some(vec![]), 0), (None, n)]
    {
        let mut r = Report::default();
        let done = negative::check(&mut loaded, 0, &rig, samples.as_deref(), "test", &mut r);
        assert_eq!((done.per_element, done.end_to_end), (n, end_to_end), "{samples:?}");
        assert!(r.ok(), "{:?}", r.failures);
        assert_eq!(loaded.program, program, "every corruption put back");
    }
}

/// `check_case` sends, for every method, its corruptions through the per-element check and at
/// least one end to end; asked for every corruption end to end, it sends all of them.
#[test]
fn check_case_sends_every_method_end_to_end_at_least_once() {
    use ptecheck::oracle::{CheckOptions, case_of, check_case};
    let ir = ptecheck::generator::examples::example("multi-method").expect("example");
    let case = case_of(&ir, 0);
    let sampled = check_case(&case, &CheckOptions::default());
    assert!(sampled.ok(), "{:?}", sampled.failures);
    let done = sampled.negative;
    assert!(done.per_element > 10 * ir.methods.len(), "{done:?}");
    assert!(done.end_to_end >= ir.methods.len() && done.end_to_end <= 2 * ir.methods.len(), "{done:?}");
    let every = check_case(&case, &CheckOptions { negative_end_to_end: true, ..CheckOptions::default() });
    assert!(every.ok(), "{:?}", every.failures);
    assert_eq!(every.negative.per_element, done.per_element);
    assert_eq!(every.negative.end_to_end, every.negative.per_element);
}

/// Every corruption end to end on a plan with more of them than one window holds: each is still
/// checked once per element and once end to end, and the program is left as it was.
#[test]
fn every_corruption_end_to_end_goes_a_window_at_a_time_and_misses_none() {
    use ptecheck::generator::GenConfig;
    use ptecheck::oracle::lifecycle::Rig;
    use ptecheck::oracle::negative::END_TO_END_WINDOW;
    use ptecheck::oracle::{CheckOptions, Report, negative};
    // Large programs: the node budget lifted.
    let max_total_nodes = ptecheck::generator::config::MAX_TOTAL_NODES;
    let cfg = GenConfig { max_nodes: 48, max_methods: 1, max_total_nodes, ..GenConfig::default() };
    let bytes = (0..64u64)
        .find_map(|seed| {
            let g = generate(&cfg, &mut Unstructured::new(&case_input(seed, 0)), None);
            let bytes = ptecheck::campaign::case_files::emit_both(&g, true).ok()?.shared;
            let n = corruptions(&format::load(&bytes).ok()?.program.plans()[0], 0).len() as u64;
            (n > END_TO_END_WINDOW + END_TO_END_WINDOW / 2).then_some(bytes)
        })
        .expect("a generated plan with more corruptions than a window and a half");
    let mut loaded = format::load(&bytes).expect("loads");
    let program = loaded.program.clone();
    let n = corruptions(&loaded.program.plans()[0], 0).len();
    let rig = Rig::new(&CheckOptions::default(), false, None);
    let mut r = Report::default();
    let done = negative::check(&mut loaded, 0, &rig, None, "test", &mut r);
    assert_eq!((done.per_element, done.end_to_end), (n, n));
    assert!(r.ok(), "{:?}", r.failures);
    assert_eq!(loaded.program, program, "every corruption put back");
}
