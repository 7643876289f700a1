//! The structure of a program with what legitimately differs between two emitters taken out:
//! plans by name with the types of their inputs and outputs; delegates in order of first call,
//! each with its backend, compile specs and blob (numbered program-wide by first use, so two
//! programs compare by which delegates share a blob, not by bytes or segment numbers, and
//! which share one stored copy of it); each
//! DelegateCall's delegate in chain order; and the kernels called, counted, without the copies
//! ExecuTorch's pipeline inserts (`dim_order_ops::*`). Value order, operator order and value
//! numbering are not part of it. `diff` lists how two shapes differ (`ptecheck diff`).
//! May not touch: validity decisions, the runtime.

use crate::format::LoadedProgram;
use crate::program::EValue;
use serde::Serialize;
use std::collections::BTreeMap;

/// Kernel name prefixes an exporter's pipeline inserts that say nothing of the structure.
pub const INSERTED_KERNELS: &[&str] = &["dim_order_ops::"];

/// One delegate of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DelegateShape {
    /// Backend id.
    pub backend: String,
    /// Compile specs, keys with values (text where printable, else hex).
    pub specs: Vec<(String, String)>,
    /// Its blob's number, program-wide by first use (`None`: no blob).
    pub blob: Option<usize>,
    /// Where its blob is stored (a segment or an inline entry), numbered program-wide by first
    /// use: equal numbers, one stored copy.
    pub stored: Option<usize>,
}

/// One plan's structure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanShape {
    /// Input types (`f32[2, 3]`, `int`, …).
    pub inputs: Vec<String>,
    /// Output types.
    pub outputs: Vec<String>,
    /// Delegates in order of first call (never-called ones last, in list order).
    pub delegates: Vec<DelegateShape>,
    /// Each DelegateCall's delegate, by position in `delegates`, in chain order.
    pub calls: Vec<usize>,
    /// Kernels called (KernelCall instructions), counted, inserted copies left out.
    pub kernels: BTreeMap<String, usize>,
}

/// A program's structure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Shape {
    /// Plans by name.
    pub plans: BTreeMap<String, PlanShape>,
    /// Distinct blobs, by bytes.
    pub blobs: usize,
    /// Stored blobs (segments and inline entries delegates name).
    pub stored: usize,
}

fn type_text(plan: &crate::program::ExecutionPlan, v: i32) -> String {
    match usize::try_from(v).ok().and_then(|i| plan.value_list().get(i)) {
        Some(EValue::Tensor(t)) => {
            let dtype = t.scalar_type.name().unwrap_or("?").to_lowercase();
            format!("{dtype}{:?}", t.sizes.as_deref().unwrap_or(&[]))
        }
        // A scalar slot is overwritten when the method runs; ExecuTorch declares a Bool result
        // of an Int comparison as an Int.
        Some(EValue::Int(_) | EValue::Bool(_)) => "int|bool".to_string(),
        Some(e) => e.kind().to_lowercase(),
        None => format!("<value {v}?>"),
    }
}

fn spec_text(v: &[u8]) -> String {
    crate::program::printable_utf8(v).map(str::to_string).unwrap_or_else(|| format!("0x{}", hex::encode(v)))
}

/// The shape of a loaded program.
pub fn shape(loaded: &LoadedProgram<'_>) -> Shape {
    let mut blob_numbers: BTreeMap<&[u8], usize> = BTreeMap::new();
    let mut stored_numbers: BTreeMap<(i8, u32), usize> = BTreeMap::new();
    let mut plans = BTreeMap::new();
    for (pi, plan) in loaded.program.plans().iter().enumerate() {
        let mut order: Vec<usize> = Vec::new();
        let mut calls_raw = Vec::new();
        let mut kernels: BTreeMap<String, usize> = BTreeMap::new();
        for chain in plan.chain_list() {
            for ins in chain.instruction_list() {
                match ins {
                    crate::program::Instruction::DelegateCall(d) => {
                        let di = usize::try_from(d.delegate_index).unwrap_or(usize::MAX);
                        if !order.contains(&di) {
                            order.push(di);
                        }
                        calls_raw.push(di);
                    }
                    crate::program::Instruction::KernelCall(k) => {
                        let name = usize::try_from(k.op_index)
                            .ok()
                            .and_then(|i| plan.operator_list().get(i))
                            .map_or_else(|| format!("<operator {}?>", k.op_index), |o| o.qualified());
                        if !INSERTED_KERNELS.iter().any(|p| name.starts_with(p)) {
                            *kernels.entry(name).or_default() += 1;
                        }
                    }
                    _ => {}
                }
            }
        }
        let uncalled: Vec<usize> = (0..plan.delegate_list().len()).filter(|d| !order.contains(d)).collect();
        order.extend(uncalled);
        let delegates = order
            .iter()
            .map(|di| {
                let d = plan.delegate_list().get(*di);
                let blob = loaded.delegate_blobs.get(pi).and_then(|b| b.get(*di)).copied().flatten().map(|b| {
                    let next = blob_numbers.len();
                    *blob_numbers.entry(b).or_insert(next)
                });
                let stored = d.and_then(|d| d.processed).filter(|_| blob.is_some()).map(|p| {
                    let next = stored_numbers.len();
                    *stored_numbers.entry((p.location.0, p.index)).or_insert(next)
                });
                DelegateShape {
                    backend: d.and_then(|d| d.id.clone()).unwrap_or_else(|| format!("<delegate {di}?>")),
                    specs: d
                        .map(|d| {
                            d.compile_spec_list()
                                .iter()
                                .map(|c| {
                                    let v = c.value.as_ref().map(|v| v.as_slice()).unwrap_or(&[]);
                                    (c.key.clone().unwrap_or_default(), spec_text(v))
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                    blob,
                    stored,
                }
            })
            .collect();
        let calls = calls_raw.iter().map(|d| order.iter().position(|o| o == d).unwrap_or(usize::MAX)).collect();
        let io = |list: &Option<Vec<i32>>| list.iter().flatten().map(|v| type_text(plan, *v)).collect();
        plans.insert(
            plan.name_str().to_string(),
            PlanShape { inputs: io(&plan.inputs), outputs: io(&plan.outputs), delegates, calls, kernels },
        );
    }
    Shape { plans, blobs: blob_numbers.len(), stored: stored_numbers.len() }
}

/// How two shapes differ, a line each (`a` then `b`); empty when they are the same.
pub fn diff(a: &Shape, b: &Shape) -> Vec<String> {
    let mut out = Vec::new();
    for name in a.plans.keys().chain(b.plans.keys().filter(|k| !a.plans.contains_key(*k))) {
        let (Some(x), Some(y)) = (a.plans.get(name), b.plans.get(name)) else {
            out.push(format!("plan {name}: only in {}", if a.plans.contains_key(name) { "A" } else { "B" }));
            continue;
        };
        if x.inputs != y.inputs {
            out.push(format!("plan {name}: inputs {:?} vs {:?}", x.inputs, y.inputs));
        }
        if x.outputs != y.outputs {
            out.push(format!("plan {name}: outputs {:?} vs {:?}", x.outputs, y.outputs));
        }
        if x.delegates.len() != y.delegates.len() {
            out.push(format!("plan {name}: {} delegates vs {}", x.delegates.len(), y.delegates.len()));
        }
        for (i, (d, e)) in x.delegates.iter().zip(&y.delegates).enumerate() {
            if d.backend != e.backend {
                out.push(format!("plan {name}: delegate {i}: backend {} vs {}", d.backend, e.backend));
            }
            if d.specs != e.specs {
                out.push(format!("plan {name}: delegate {i}: compile specs {:?} vs {:?}", d.specs, e.specs));
            }
            if d.blob != e.blob {
                out.push(format!(
                    "plan {name}: delegate {i}: blob {:?} vs {:?} (numbered by first use)",
                    d.blob, e.blob
                ));
            } else if d.stored != e.stored {
                out.push(format!(
                    "plan {name}: delegate {i}: stored copy {:?} vs {:?} (numbered by first use)",
                    d.stored, e.stored
                ));
            }
        }
        if x.calls != y.calls {
            out.push(format!("plan {name}: call sites name delegates {:?} vs {:?}", x.calls, y.calls));
        }
        if x.kernels != y.kernels {
            out.push(format!("plan {name}: kernels {:?} vs {:?}", x.kernels, y.kernels));
        }
    }
    if a.blobs != b.blobs {
        out.push(format!("{} distinct blobs vs {}", a.blobs, b.blobs));
    }
    if a.stored != b.stored {
        out.push(format!("{} stored blobs vs {}", a.stored, b.stored));
    }
    out
}

/// `a` and `b` restricted to the call sites both emitted: `sites_a[m][k]` and `sites_b[m][k]`
/// say whether each emitted call site `k` of method `m` (in pre-order; emitted sites are the
/// DelegateCalls in chain order). Delegates and blobs are numbered again by first use among the
/// kept calls; kernels are left out (emitters decompose operators differently).
pub fn common_sites(
    a: &Shape,
    sites_a: &BTreeMap<String, Vec<bool>>,
    b: &Shape,
    sites_b: &BTreeMap<String, Vec<bool>>,
) -> (Shape, Shape) {
    let keep = |s: &Shape, mine: &BTreeMap<String, Vec<bool>>, other: &BTreeMap<String, Vec<bool>>| {
        let mut blobs: BTreeMap<usize, usize> = BTreeMap::new();
        let mut stored: BTreeMap<usize, usize> = BTreeMap::new();
        let plans = s
            .plans
            .iter()
            .map(|(name, p)| {
                let (m, o) =
                    (mine.get(name).cloned().unwrap_or_default(), other.get(name).cloned().unwrap_or_default());
                // The k-th emitted site is the k-th call.
                let mut calls_iter = p.calls.iter();
                let mut kept = Vec::new();
                for (k, emitted) in m.iter().enumerate() {
                    if !emitted {
                        continue;
                    }
                    let Some(c) = calls_iter.next() else { break };
                    if o.get(k).copied().unwrap_or(false) {
                        kept.push(*c);
                    }
                }
                let mut order: Vec<usize> = Vec::new();
                for c in &kept {
                    if !order.contains(c) {
                        order.push(*c);
                    }
                }
                let delegates = order
                    .iter()
                    .filter_map(|d| p.delegates.get(*d))
                    .map(|d| DelegateShape {
                        blob: d.blob.map(|b| {
                            let next = blobs.len();
                            *blobs.entry(b).or_insert(next)
                        }),
                        stored: d.stored.map(|b| {
                            let next = stored.len();
                            *stored.entry(b).or_insert(next)
                        }),
                        ..d.clone()
                    })
                    .collect();
                let calls = kept.iter().map(|c| order.iter().position(|o| o == c).unwrap_or(usize::MAX)).collect();
                let plan = PlanShape {
                    inputs: p.inputs.clone(),
                    outputs: p.outputs.clone(),
                    delegates,
                    calls,
                    kernels: BTreeMap::new(),
                };
                (name.clone(), plan)
            })
            .collect();
        Shape { plans, blobs: blobs.len(), stored: stored.len() }
    };
    (keep(a, sites_a, sites_b), keep(b, sites_b, sites_a))
}
