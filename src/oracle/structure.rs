//! I1, I2 and the structural half of I3 on one emitted, loaded program, computed by the oracle
//! itself from the IR and the decoded program (the runtime's checker is code under test: it is
//! exercised by the negative checks, not trusted here).

use super::invariant::Invariant;
use super::report::Report;
use crate::format::LoadedProgram;
use crate::ir::infer::graph_types;
use crate::ir::{Dtype, Graph, IrProgram, LoweredModule, Node, ValueType};
use crate::program::{EValue, ExecutionPlan, Instruction, SCRATCH_KEY, ScalarType, TensorShapeDynamism};
use std::collections::{BTreeMap, BTreeSet};

/// DelegateCall instructions naming each BackendDelegate of `plan`, over all chains: counted
/// here, not with the runtime's `check::call_site_counts`, which is code under test.
pub(super) fn delegate_call_sites(plan: &ExecutionPlan) -> Vec<usize> {
    let mut sites = vec![0usize; plan.delegate_list().len()];
    let calls = plan.chain_list().iter().flat_map(|c| c.instruction_list()).filter_map(|i| match i {
        Instruction::DelegateCall(d) => usize::try_from(d.delegate_index).ok(),
        _ => None,
    });
    for d in calls {
        if let Some(n) = sites.get_mut(d) {
            *n += 1;
        }
    }
    sites
}

/// Module indices of the Call nodes of `g`, in emission order (pre-order, sub-graphs in place).
pub fn call_sequence(g: &Graph) -> Vec<usize> {
    let mut out = Vec::new();
    g.walk(0, &mut |n, _| {
        if let Node::Call { module, .. } = n {
            out.push(*module);
        }
    });
    out
}

/// Whether module `m` gets one BackendDelegate per method (SH3-SH5) under `share`.
pub fn shares(m: &LoweredModule, share: bool) -> bool {
    share && m.share_handle_across_calls && m.scratch_specs.is_empty()
}

/// The BackendDelegates SH6 implies for a method calling `calls`.
pub fn expected_delegates(ir: &IrProgram, calls: &[usize], share: bool) -> usize {
    let mut per_module: BTreeMap<usize, usize> = BTreeMap::new();
    for c in calls {
        *per_module.entry(*c).or_default() += 1;
    }
    per_module.iter().map(|(m, n)| if ir.modules.get(*m).is_some_and(|lm| shares(lm, share)) { 1 } else { *n }).sum()
}

/// The DelegateCalls of a plan in chain order: (delegate index, args).
pub fn delegate_calls(plan: &ExecutionPlan) -> Vec<(i32, Vec<i32>)> {
    plan.chain_list()
        .iter()
        .flat_map(|c| c.instruction_list())
        .filter_map(|i| match i {
            Instruction::DelegateCall(d) => Some((d.delegate_index, d.args.clone().unwrap_or_default())),
            _ => None,
        })
        .collect()
}

/// Every index of a plan, checked by the oracle: (what, index, bound) for each out of range.
pub(super) fn bad_indices(plan: &ExecutionPlan) -> Vec<String> {
    let nv = plan.value_list().len() as i64;
    let (no, nd) = (plan.operator_list().len() as i64, plan.delegate_list().len() as i64);
    let mut bad = Vec::new();
    // The element's name is spelled out only when its index is out of bounds.
    let mut check = |what: &dyn Fn() -> String, i: i64, n: i64| {
        if !(0..n).contains(&i) {
            bad.push(format!("{} = {i} (bound {n})", what()));
        }
    };
    for (k, v) in plan.inputs.iter().flatten().enumerate() {
        check(&|| format!("inputs[{k}]"), (*v).into(), nv);
    }
    for (k, v) in plan.outputs.iter().flatten().enumerate() {
        check(&|| format!("outputs[{k}]"), (*v).into(), nv);
    }
    for (i, v) in plan.value_list().iter().enumerate() {
        let items: &mut dyn Iterator<Item = i64> = match v {
            EValue::IntList(Some(x)) => &mut x.iter().copied(),
            EValue::TensorList(Some(x)) => &mut x.iter().map(|e| i64::from(*e)),
            EValue::OptionalTensorList(Some(x)) => &mut x.iter().filter(|e| **e != -1).map(|e| i64::from(*e)),
            _ => &mut std::iter::empty(),
        };
        for (k, x) in items.enumerate() {
            check(&|| format!("values[{i}].items[{k}]"), x, i as i64);
        }
    }
    for (c, chain) in plan.chain_list().iter().enumerate() {
        let len = chain.instruction_list().len() as i64;
        for (ii, ins) in chain.instruction_list().iter().enumerate() {
            let at = || format!("chains[{c}][{ii}]");
            match ins {
                Instruction::KernelCall(k) => {
                    check(&|| format!("{}.op_index", at()), k.op_index.into(), no);
                    for (j, a) in k.args.iter().flatten().enumerate() {
                        check(&|| format!("{}.args[{j}]", at()), (*a).into(), nv);
                    }
                }
                Instruction::DelegateCall(d) => {
                    check(&|| format!("{}.delegate_index", at()), d.delegate_index.into(), nd);
                    for (j, a) in d.args.iter().flatten().enumerate() {
                        check(&|| format!("{}.args[{j}]", at()), (*a).into(), nv);
                    }
                }
                Instruction::MoveCall(m) => {
                    check(&|| format!("{}.move_from", at()), m.move_from.into(), nv);
                    check(&|| format!("{}.move_to", at()), m.move_to.into(), nv);
                }
                Instruction::JumpFalseCall(j) => {
                    check(&|| format!("{}.cond_value_index", at()), j.cond_value_index.into(), nv);
                    // A destination equal to the chain length ends the chain.
                    check(&|| format!("{}.destination_instruction", at()), j.destination_instruction.into(), len + 1);
                }
                Instruction::FreeCall(f) => check(&|| format!("{}.value_index", at()), f.value_index.into(), nv),
            }
        }
    }
    bad
}

/// Whether value `v` of `plan` is a tensor of type `t`.
fn has_type(plan: &ExecutionPlan, v: i32, t: &ValueType) -> bool {
    let Some(EValue::Tensor(x)) = usize::try_from(v).ok().and_then(|i| plan.value_list().get(i)) else {
        return !matches!(t, ValueType::Tensor { .. })
            && usize::try_from(v).ok().and_then(|i| plan.value_list().get(i)).is_some_and(|e| {
                matches!(
                    (e, t),
                    (EValue::Int(_), ValueType::Int)
                        | (EValue::Bool(_), ValueType::Bool)
                        | (EValue::Double(_), ValueType::Double)
                )
            });
    };
    let ValueType::Tensor { dtype, shape, dynamic } = t else { return false };
    let st = match dtype {
        Dtype::F32 => ScalarType::FLOAT,
        Dtype::I64 => ScalarType::LONG,
        Dtype::Bool => ScalarType::BOOL,
    };
    let sizes: Vec<usize> = x.sizes.iter().flatten().map(|s| *s as usize).collect();
    let dynamism_ok = (x.shape_dynamism != TensorShapeDynamism::STATIC) == *dynamic;
    x.scalar_type == st && sizes == *shape && dynamism_ok
}

/// I1, I2, I3 (structure) for one emission.
pub fn check(ir: &IrProgram, loaded: &LoadedProgram<'_>, share: bool, r: &mut Report) {
    let plans = loaded.program.plans();
    // I1: every IR method became exactly one plan, in sorted name order (E2).
    let mut names: Vec<&str> = ir.methods.iter().map(|m| m.name.as_str()).collect();
    names.sort_unstable();
    let got: Vec<&str> = plans.iter().map(|p| p.name_str()).collect();
    r.check(Invariant::I1, got == names, || format!("share={share}: plans {got:?}, methods {names:?}"));
    let mut called: BTreeSet<usize> = BTreeSet::new();
    for (pi, plan) in plans.iter().enumerate() {
        let name = plan.name_str();
        let bad = bad_indices(plan);
        r.check(Invariant::I1, bad.is_empty(), || format!("{name} share={share}: {}", bad.join("; ")));
        let Some(m) = ir.methods.iter().find(|m| m.name == name) else { continue };
        let calls = call_sequence(&m.graph);
        called.extend(calls.iter().copied());
        let sites = delegate_call_sites(plan);
        r.check(Invariant::I1, sites.iter().all(|c| *c > 0), || {
            format!("{name} share={share}: a BackendDelegate no DelegateCall references: {sites:?}")
        });
        // I2: delegates = sum over modules of (1 if shared else call sites).
        let expected = expected_delegates(ir, &calls, share);
        let got = plan.delegate_list().len();
        r.check(Invariant::I2, got == expected, || {
            format!("{name} share={share}: {got} BackendDelegates, expected {expected}")
        });
        // I3: each DelegateCall's delegate and arguments match the module of that call.
        let dcalls = delegate_calls(plan);
        r.check(Invariant::I3, dcalls.len() == calls.len(), || {
            format!("{name}: {} DelegateCalls for {} call sites", dcalls.len(), calls.len())
        });
        let mut delegate_of: BTreeMap<usize, i32> = BTreeMap::new();
        // Argument types per called module (inputs, then outputs), typed once per plan.
        let mut signatures: BTreeMap<usize, Vec<ValueType>> = BTreeMap::new();
        for (k, ((di, args), module)) in dcalls.iter().zip(&calls).enumerate() {
            let lm = &ir.modules[*module];
            let Some(d) = usize::try_from(*di).ok().and_then(|i| plan.delegate_list().get(i)) else {
                r.fail(Invariant::I3, format!("{name}: call {k} names delegate {di}"));
                continue;
            };
            // Call sites of one shared module use one delegate; others never share one.
            if let Some(prev) = delegate_of.insert(*module, *di) {
                let want_same = shares(lm, share);
                r.check(Invariant::I2, (prev == *di) == want_same, || {
                    format!(
                        "{name} share={share}: calls of module {module} use delegates {prev} and {di} (sharing {want_same})"
                    )
                });
            }
            let blob = loaded.delegate_blobs.get(pi).and_then(|b| b.get(*di as usize)).copied().flatten();
            let mut want_specs: Vec<(String, Vec<u8>)> =
                lm.compile_specs.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect();
            let specs: Vec<(String, Vec<u8>)> = d
                .compile_spec_list()
                .iter()
                .map(|c| (c.key.clone().unwrap_or_default(), c.value.as_ref().map(|v| v.0.clone()).unwrap_or_default()))
                .collect();
            if !lm.scratch_specs.is_empty() {
                // P1: the scratch entry is last and encodes the declaration exactly.
                let decl: Vec<(u64, i32)> =
                    lm.scratch_specs.iter().map(|s| (s.nbytes, s.mem_id.unwrap_or(-1))).collect();
                let entry = specs
                    .last()
                    .filter(|(k, _)| k == SCRATCH_KEY)
                    .and_then(|(_, v)| crate::program::parse_scratch(v).ok())
                    .map(|s| s.iter().map(|x| (x.nbytes, x.mem_id)).collect::<Vec<_>>());
                r.check(Invariant::I3, entry.as_ref() == Some(&decl), || {
                    format!("{name}: call {k}: scratch entry {entry:?}, module declares {decl:?}")
                });
                want_specs.push(specs.last().cloned().unwrap_or_default());
            }
            r.check(Invariant::I3, d.id.as_deref() == Some(lm.backend.as_str()), || {
                format!("{name}: call {k} of module {module}: delegate id {:?} != {}", d.id, lm.backend)
            });
            r.check(Invariant::I3, specs == want_specs, || {
                format!("{name}: call {k} of module {module}: compile specs {specs:?} != {want_specs:?}")
            });
            r.check(Invariant::I3, blob == Some(lm.processed.as_slice()), || {
                format!("{name}: call {k} of module {module}: blob differs from the module's processed bytes")
            });
            // Argument types: inputs, then outputs, then one planned uint8 buffer per scratch.
            let want = signatures.entry(*module).or_insert_with(|| {
                let types = graph_types(&lm.graph, &[], "module").unwrap_or_default();
                let c = lm.graph.constants.len();
                let mut want: Vec<ValueType> = types.get(c..c + lm.graph.inputs.len()).unwrap_or_default().to_vec();
                want.extend(lm.graph.outputs.iter().filter_map(|o| types.get(*o).cloned()));
                want
            });
            let n_scratch = lm.scratch_specs.len();
            r.check(Invariant::I3, args.len() == want.len() + n_scratch, || {
                format!("{name}: call {k} of module {module}: {} args, expected {}", args.len(), want.len() + n_scratch)
            });
            for (j, (a, t)) in args.iter().zip(want.iter()).enumerate() {
                r.check(Invariant::I3, has_type(plan, *a, t), || {
                    format!("{name}: call {k} of module {module}: args[{j}] = values[{a}] is not a {t:?}")
                });
            }
            for (s, (a, decl)) in args.iter().skip(want.len()).zip(&lm.scratch_specs).enumerate() {
                let ok = usize::try_from(*a).ok().and_then(|i| plan.value_list().get(i)).is_some_and(|v| {
                    matches!(v, EValue::Tensor(t) if t.scalar_type == ScalarType::BYTE
                        && t.allocation_info.is_some()
                        && matches!(t.sizes.as_deref(), Some(&[n]) if u64::try_from(n) == Ok(decl.nbytes)))
                });
                r.check(Invariant::I3, ok, || {
                    format!("{name}: call {k}: scratch arg {s} = values[{a}] is not a planned uint8[{}]", decl.nbytes)
                });
            }
        }
    }
    // I3: stored blobs = distinct processed bytes of the called modules (one segment each, or
    // one inline entry each when blobs stay inline).
    let distinct: BTreeSet<&[u8]> = called.iter().map(|m| ir.modules[*m].processed.as_slice()).collect();
    let mut stored: BTreeSet<(i8, u32)> = BTreeSet::new();
    for plan in plans {
        for d in plan.delegate_list() {
            if let Some(p) = d.processed {
                stored.insert((p.location.0, p.index));
            }
        }
    }
    r.check(Invariant::I3, stored.len() == distinct.len(), || {
        format!("share={share}: {} stored blobs for {} distinct blobs", stored.len(), distinct.len())
    });
}
