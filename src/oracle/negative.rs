//! Negative checks: corruptions of a valid emitted program that the runtime must reject at init
//! with zero backend inits. Each corruption is data (a class, a place, an edit), so the same
//! list drives our runtime's check here and, in a differential campaign, a real runtime.
//!
//! For every instruction of every chain: each index field set to each boundary value past its
//! range (`n`, `n + 1`, `i32::MAX`, `-1`, `i32::MIN`), operator arity off by one, a call pointed
//! at a scratch delegate it does not own; for every plan input and output: each boundary value;
//! for every list value: an item out of range and an item naming a later value.
//! May not touch: the emitter or the generator (it edits a loaded program one element at a time and
//! puts each back).

use super::invariant::Invariant;
use super::lifecycle::Rig;
use super::report::{Coverage, Report};
use crate::format::LoadedProgram;
use crate::program::{DelegateCall, EValue, ExecutionPlan, Instruction, KernelCall, Program, SCRATCH_KEY};
use crate::runtime::check::{Io, PreparedPlan, Replacement, check_method_with};
use crate::runtime::{CheckError, RuntimeError, Trace};
use serde::Serialize;
use strum::IntoStaticStr;

/// What a corruption breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, IntoStaticStr, Serialize)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// A KernelCall/DelegateCall argument, MoveCall, FreeCall or jump-condition value index.
    ValueIndex,
    /// `KernelCall.op_index`.
    OpIndex,
    /// A KernelCall with one argument more or fewer than its operator takes.
    Arity,
    /// `DelegateCall.delegate_index`.
    DelegateIndex,
    /// A second call site for a delegate that declares scratch (SH10).
    ScratchCallSites,
    /// `JumpFalseCall.destination_instruction`.
    JumpDestination,
    /// A list item out of range.
    ListItem,
    /// A TensorList item naming a later value (read before it is built).
    ListForwardRef,
    /// A plan input or output naming no value.
    PlanIo,
}

impl Class {
    /// snake_case name.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// One field edit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Edit {
    /// `args[arg] = to` of a KernelCall or DelegateCall.
    Arg {
        /// Argument position.
        arg: usize,
        /// New value index.
        to: i32,
    },
    /// Appends argument `to` (arity + 1).
    PushArg {
        /// Value index appended.
        to: i32,
    },
    /// Removes the last argument (arity - 1).
    PopArg,
    /// `op_index = to`.
    OpIndex(i32),
    /// `delegate_index = to`.
    DelegateIndex(i32),
    /// `move_from = to`.
    MoveFrom(i32),
    /// `move_to = to`.
    MoveTo(i32),
    /// `cond_value_index = to`.
    JumpCond(i32),
    /// `destination_instruction = to`.
    JumpDestination(i32),
    /// `value_index = to` of a FreeCall.
    FreeValue(i32),
    /// `inputs[position] = to` of the plan.
    PlanInput {
        /// Position in the plan's inputs.
        position: usize,
        /// New value index.
        to: i32,
    },
    /// `outputs[position] = to` of the plan.
    PlanOutput {
        /// Position in the plan's outputs.
        position: usize,
        /// New value index.
        to: i32,
    },
    /// Item `item` of list value `value` set to `to`.
    ListItem {
        /// The list's value index.
        value: usize,
        /// Item position.
        item: usize,
        /// New item.
        to: i64,
    },
}

/// One corruption of plan `plan`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Corruption {
    /// What it breaks.
    pub class: Class,
    /// Plan index.
    pub plan: usize,
    /// `(chain, instruction)`, or `None` for a value edit.
    pub at: Option<(usize, usize)>,
    /// The edit.
    pub edit: Edit,
}

impl Corruption {
    /// A one-line description.
    pub fn describe(&self, p: &Program) -> String {
        let method = p.plans().get(self.plan).map_or("?", |x| x.name_str());
        match self.at {
            Some((c, i)) => format!("{method} chains[{c}].instructions[{i}]: {:?}", self.edit),
            None => format!("{method}: {:?}", self.edit),
        }
    }

    /// Applies the edit to `p` (false when the place no longer exists).
    pub fn apply(&self, p: &mut Program) -> bool {
        // The edit itself is made once, on a copy of the one element ([`Corruption::patch`]).
        let patched = p.plans().get(self.plan).and_then(|plan| self.patch(plan));
        patched.is_some_and(|patched| patched.put(p, self.plan))
    }

    /// Puts back the element this corruption edits, as it is in `base` (false when the place
    /// exists in neither).
    pub fn restore(&self, p: &mut Program, base: &Program) -> bool {
        let original = base.plans().get(self.plan).and_then(|plan| self.original(plan));
        original.is_some_and(|original| original.put(p, self.plan))
    }

    /// The element of `plan` this corruption edits, unedited (`None` when the place does not
    /// exist or the edit does not fit it): what [`Patched::put`] writes back after [`Corruption::apply`].
    pub fn original(&self, plan: &ExecutionPlan) -> Option<Patched> {
        let patched = self.patch(plan)?;
        Some(match patched {
            Patched::Instruction(c, i, _) => {
                Patched::Instruction(c, i, plan.chain_list().get(c)?.instruction_list().get(i)?.clone())
            }
            Patched::Value(v, _) => Patched::Value(v, plan.value_list().get(v)?.clone()),
            Patched::PlanIo(which, position, _) => {
                let list = match which {
                    Io::Input => &plan.inputs,
                    Io::Output => &plan.outputs,
                };
                Patched::PlanIo(which, position, *list.as_ref()?.get(position)?)
            }
        })
    }
}

/// Applies one edit to one instruction (false when it does not fit the instruction).
pub fn apply_edit(ins: &mut Instruction, edit: Edit) -> bool {
    match (edit, ins) {
        (Edit::Arg { arg, to }, Instruction::KernelCall(k)) => {
            k.args.as_mut().and_then(|a| a.get_mut(arg)).map(|x| *x = to).is_some()
        }
        (Edit::Arg { arg, to }, Instruction::DelegateCall(d)) => {
            d.args.as_mut().and_then(|a| a.get_mut(arg)).map(|x| *x = to).is_some()
        }
        (Edit::PushArg { to }, Instruction::KernelCall(k)) => k.args.as_mut().map(|a| a.push(to)).is_some(),
        (Edit::PopArg, Instruction::KernelCall(k)) => k.args.as_mut().and_then(|a| a.pop()).is_some(),
        (Edit::OpIndex(to), Instruction::KernelCall(k)) => {
            k.op_index = to;
            true
        }
        (Edit::DelegateIndex(to), Instruction::DelegateCall(d)) => {
            d.delegate_index = to;
            true
        }
        (Edit::MoveFrom(to), Instruction::MoveCall(m)) => {
            m.move_from = to;
            true
        }
        (Edit::MoveTo(to), Instruction::MoveCall(m)) => {
            m.move_to = to;
            true
        }
        (Edit::JumpCond(to), Instruction::JumpFalseCall(j)) => {
            j.cond_value_index = to;
            true
        }
        (Edit::JumpDestination(to), Instruction::JumpFalseCall(j)) => {
            j.destination_instruction = to;
            true
        }
        (Edit::FreeValue(to), Instruction::FreeCall(f)) => {
            f.value_index = to;
            true
        }
        _ => false,
    }
}

/// Index values past a range of `n`.
pub fn past(n: usize) -> [i32; 5] {
    let n = i32::try_from(n).unwrap_or(i32::MAX);
    [n, n.saturating_add(1), i32::MAX, -1, i32::MIN]
}

/// Every corruption of plan `pi`.
pub fn corruptions(plan: &ExecutionPlan, pi: usize) -> Vec<Corruption> {
    let mut out = Vec::new();
    each_corruption(plan, pi, &mut |c| out.push(c));
    out
}

/// Calls `visit` with every corruption of plan `pi`, in [`corruptions`]' order, holding none
/// of them (a large plan has thousands).
pub fn each_corruption(plan: &ExecutionPlan, pi: usize, visit: &mut dyn FnMut(Corruption)) {
    let (nv, no, nd) = (plan.value_list().len(), plan.operator_list().len(), plan.delegate_list().len());
    let scratch: Vec<i32> = plan
        .delegate_list()
        .iter()
        .enumerate()
        .filter(|(_, d)| d.compile_spec_list().iter().any(|c| c.key.as_deref() == Some(SCRATCH_KEY)))
        .map(|(i, _)| i as i32)
        .collect();
    for (c, chain) in plan.chain_list().iter().enumerate() {
        let len = chain.instruction_list().len();
        for (i, ins) in chain.instruction_list().iter().enumerate() {
            let mut add = |class: Class, edit: Edit| visit(Corruption { class, plan: pi, at: Some((c, i)), edit });
            match ins {
                Instruction::KernelCall(k) => {
                    for to in past(no) {
                        add(Class::OpIndex, Edit::OpIndex(to));
                    }
                    for arg in 0..k.args.as_ref().map_or(0, Vec::len) {
                        for to in past(nv) {
                            add(Class::ValueIndex, Edit::Arg { arg, to });
                        }
                    }
                    // One argument more (a valid value) or fewer.
                    if nv > 0 {
                        add(Class::Arity, Edit::PushArg { to: 0 });
                    }
                    add(Class::Arity, Edit::PopArg);
                }
                Instruction::DelegateCall(d) => {
                    for to in past(nd) {
                        add(Class::DelegateIndex, Edit::DelegateIndex(to));
                    }
                    for arg in 0..d.args.as_ref().map_or(0, Vec::len) {
                        for to in past(nv) {
                            add(Class::ValueIndex, Edit::Arg { arg, to });
                        }
                    }
                    for &s in scratch.iter().filter(|s| **s != d.delegate_index) {
                        add(Class::ScratchCallSites, Edit::DelegateIndex(s));
                    }
                }
                Instruction::MoveCall(_) => {
                    for to in past(nv) {
                        add(Class::ValueIndex, Edit::MoveFrom(to));
                        add(Class::ValueIndex, Edit::MoveTo(to));
                    }
                }
                Instruction::JumpFalseCall(_) => {
                    for to in past(len) {
                        // `len` itself ends the chain (valid); start one past it.
                        let to = if to == i32::try_from(len).unwrap_or(i32::MAX) { to.saturating_add(2) } else { to };
                        add(Class::JumpDestination, Edit::JumpDestination(to));
                    }
                    for to in past(nv) {
                        add(Class::ValueIndex, Edit::JumpCond(to));
                    }
                }
                Instruction::FreeCall(_) => {
                    for to in past(nv) {
                        add(Class::ValueIndex, Edit::FreeValue(to));
                    }
                }
            }
        }
    }
    for position in 0..plan.inputs.as_ref().map_or(0, Vec::len) {
        for to in past(nv) {
            visit(Corruption { class: Class::PlanIo, plan: pi, at: None, edit: Edit::PlanInput { position, to } });
        }
    }
    for position in 0..plan.outputs.as_ref().map_or(0, Vec::len) {
        for to in past(nv) {
            visit(Corruption { class: Class::PlanIo, plan: pi, at: None, edit: Edit::PlanOutput { position, to } });
        }
    }
    for (v, val) in plan.value_list().iter().enumerate() {
        let (n_items, tensor_list) = match val {
            EValue::IntList(Some(x)) => (x.len(), false),
            EValue::TensorList(Some(x)) | EValue::OptionalTensorList(Some(x)) => (x.len(), true),
            _ => continue,
        };
        for item in 0..n_items {
            for to in [nv as i64, i64::from(i32::MAX)] {
                visit(Corruption {
                    class: Class::ListItem,
                    plan: pi,
                    at: None,
                    edit: Edit::ListItem { value: v, item, to },
                });
            }
            if tensor_list && v + 1 < nv {
                visit(Corruption {
                    class: Class::ListForwardRef,
                    plan: pi,
                    at: None,
                    edit: Edit::ListItem { value: v, item, to: (v + 1) as i64 },
                });
            }
        }
    }
}

/// The element a corruption replaces, edited: what [`PreparedPlan::check_replaced`] takes.
#[derive(Clone, Debug, PartialEq)]
pub enum Patched {
    /// The edited instruction at `(chain, index)`.
    Instruction(usize, usize, Instruction),
    /// The edited value at `index`.
    Value(usize, EValue),
    /// A plan input or output naming another value.
    PlanIo(Io, usize, i32),
}

impl Patched {
    /// Writes this element into plan `plan` of `p`, in place of the one at its place (false
    /// when the place does not exist).
    pub fn put(self, p: &mut Program, plan: usize) -> bool {
        let Some(plan) = p.execution_plan.as_mut().and_then(|v| v.get_mut(plan)) else { return false };
        let slot = match self {
            Patched::PlanIo(Io::Input, position, to) => {
                plan.inputs.as_mut().and_then(|v| v.get_mut(position)).map(|x| *x = to)
            }
            Patched::PlanIo(Io::Output, position, to) => {
                plan.outputs.as_mut().and_then(|v| v.get_mut(position)).map(|x| *x = to)
            }
            Patched::Value(index, value) => plan.values.as_mut().and_then(|v| v.get_mut(index)).map(|x| *x = value),
            Patched::Instruction(c, i, ins) => plan
                .chains
                .as_mut()
                .and_then(|ch| ch.get_mut(c))
                .and_then(|ch| ch.instructions.as_mut())
                .and_then(|l| l.get_mut(i))
                .map(|x| *x = ins),
        };
        slot.is_some()
    }

    /// The replacement it describes.
    pub fn replacement(&self) -> Replacement<'_> {
        match self {
            Patched::Instruction(chain, index, ins) => Replacement::Instruction { chain: *chain, index: *index, ins },
            Patched::Value(index, value) => Replacement::Value { index: *index, value },
            Patched::PlanIo(which, position, index) => {
                Replacement::PlanIo { which: *which, position: *position, index: *index }
            }
        }
    }
}

impl Corruption {
    /// The one element of `plan` this corruption replaces, edited, copying only that element
    /// (`None` when the place does not exist or the edit does not fit it).
    pub fn patch(&self, plan: &ExecutionPlan) -> Option<Patched> {
        match self.edit {
            Edit::PlanInput { position, to } => {
                plan.inputs.as_ref()?.get(position)?;
                return Some(Patched::PlanIo(Io::Input, position, to));
            }
            Edit::PlanOutput { position, to } => {
                plan.outputs.as_ref()?.get(position)?;
                return Some(Patched::PlanIo(Io::Output, position, to));
            }
            Edit::ListItem { value, item, to } => {
                let mut v = plan.value_list().get(value)?.clone();
                let fits = match &mut v {
                    EValue::IntList(Some(items)) => items.get_mut(item).map(|x| *x = to).is_some(),
                    EValue::TensorList(Some(items)) | EValue::OptionalTensorList(Some(items)) => {
                        items.get_mut(item).map(|x| *x = to as i32).is_some()
                    }
                    _ => false,
                };
                return fits.then_some(Patched::Value(value, v));
            }
            _ => {}
        }
        let (c, i) = self.at?;
        let mut ins = plan.chain_list().get(c)?.instruction_list().get(i)?.clone();
        apply_edit(&mut ins, self.edit).then_some(Patched::Instruction(c, i, ins))
    }

    /// [`Corruption::patch`] into `slot`, reusing the argument list of an instruction already
    /// there (the negative checks patch thousands of instructions per program); `false` when
    /// the corruption does not fit `plan`, and then `slot` holds nothing to use.
    pub fn patch_into(&self, plan: &ExecutionPlan, slot: &mut Option<Patched>) -> bool {
        let (Some((c, i)), Some(Patched::Instruction(sc, si, ins))) = (self.at, slot.as_mut()) else {
            *slot = self.patch(plan);
            return slot.is_some();
        };
        let Some(src) = plan.chain_list().get(c).and_then(|ch| ch.instruction_list().get(i)) else { return false };
        (*sc, *si) = (c, i);
        copy_into(ins, src);
        apply_edit(ins, self.edit)
    }
}

/// Makes `dst` equal to `src`, keeping `dst`'s argument list allocation when both are calls of
/// the same kind.
fn copy_into(dst: &mut Instruction, src: &Instruction) {
    match (dst, src) {
        // Destructured, so that a field added to either call is not left stale.
        (Instruction::KernelCall(d), Instruction::KernelCall(KernelCall { op_index, args })) => {
            d.op_index = *op_index;
            d.args.clone_from(args);
        }
        (Instruction::DelegateCall(d), Instruction::DelegateCall(DelegateCall { delegate_index, args })) => {
            d.delegate_index = *delegate_index;
            d.args.clone_from(args);
        }
        (dst, src) => *dst = src.clone(),
    }
}

/// Corruptions at most gathered for the end-to-end runs at once when every corruption goes end
/// to end: the per-element checks run over the corruptions a window at a time, so what is held
/// stays bounded whatever the plan's size.
pub const END_TO_END_WINDOW: u64 = 1024;

/// Every corruption of plan `pi` must be rejected at init with zero backend inits.
///
/// Each corruption is checked by the runtime's own per-element checks on the one edited
/// element ([`PreparedPlan`]), so a method costs time linear in its size. The corruptions
/// picked by `samples` (one per sample, any class may be drawn; `None`: every one) also go end
/// to end: the edit made on `loaded` itself, the method loaded by the runtime, rejected at init
/// with no backend `init` (counted by the backends of `rig`), the runtime's full check giving
/// exactly the errors the per-element check gave, and the edited element put back.
pub fn check(
    loaded: &mut LoadedProgram<'_>,
    pi: usize,
    rig: &Rig,
    samples: Option<&[u64]>,
    what: &str,
    r: &mut Report,
) -> Coverage {
    let mut done = Coverage::default();
    let Some(plan) = loaded.program.plans().get(pi) else { return done };
    let name = plan.name_str().to_string();
    let mut count = 0u64;
    each_corruption(plan, pi, &mut |_| count += 1);
    let picks: Option<Vec<u64>> = samples.map(|s| s.iter().map(|s| s % count.max(1)).collect());
    // The picks go end to end after one pass; every corruption, a window at a time.
    let window = if picks.is_some() { count.max(1) } else { END_TO_END_WINDOW };
    let checks = PlanChecks { pi, name: &name, rig, what };
    let mut from = 0u64;
    loop {
        let range = from..from.saturating_add(window);
        let Some(ends) = checks.per_element(loaded, &range, picks.as_deref(), &mut done, r) else { return done };
        for (c, errors) in ends {
            checks.end_to_end(loaded, &c, &errors, r);
            done.end_to_end += 1;
        }
        from = range.end;
        if from >= count {
            return done;
        }
    }
}

/// The negative checks of one plan: its index and name, the rig whose backends count inits,
/// and what to call the emission in reports.
struct PlanChecks<'r> {
    pi: usize,
    name: &'r str,
    rig: &'r Rig,
    what: &'r str,
}

impl PlanChecks<'_> {
    /// The per-element checks of the plan's corruptions numbered in `range` (in
    /// [`each_corruption`]'s order); returns those picked for the end-to-end run (every one
    /// without `picks`) with the errors the per-element check gave, or `None` when the plan
    /// itself does not pass the init checks.
    fn per_element(
        &self,
        loaded: &LoadedProgram<'_>,
        range: &std::ops::Range<u64>,
        picks: Option<&[u64]>,
        done: &mut Coverage,
        r: &mut Report,
    ) -> Option<Vec<(Corruption, Vec<CheckError>)>> {
        let (pi, what) = (self.pi, self.what);
        let plan = loaded.program.plans().get(pi)?;
        let mut prepared = match PreparedPlan::new(loaded, pi, self.rig.rt.fault) {
            Ok(p) => p,
            Err(errors) => {
                let first = errors.first().map(ToString::to_string).unwrap_or_default();
                let name = plan.name_str();
                r.fail(Invariant::Negative, format!("{what}: {name} does not pass the init checks itself: {first}"));
                return None;
            }
        };
        let mut ends = Vec::new();
        let mut rejected = 0;
        let mut patched = None;
        let mut next = 0u64;
        each_corruption(plan, pi, &mut |c| {
            let k = next;
            next += 1;
            if !range.contains(&k) || !c.patch_into(plan, &mut patched) {
                return;
            }
            let Some(patched) = &patched else { return };
            done.per_element += 1;
            let errors = prepared.check_replaced(patched.replacement());
            if errors.is_empty() {
                r.fail(
                    Invariant::Negative,
                    format!(
                        "{what}: {} ({}): accepted by the init checks",
                        c.describe(&loaded.program),
                        c.class.name()
                    ),
                );
            } else {
                rejected += 1;
            }
            if picks.is_none_or(|p| p.contains(&k)) {
                ends.push((c, errors.to_vec()));
            }
        });
        r.held(Invariant::Negative, rejected);
        Some(ends)
    }

    /// One corruption through the whole runtime: the edit made on `loaded`, `load_method`,
    /// backend ledger; the edited element is put back afterwards.
    fn end_to_end(&self, loaded: &mut LoadedProgram<'_>, c: &Corruption, errors: &[CheckError], r: &mut Report) {
        let what = self.what;
        let original = loaded.program.plans().get(c.plan).and_then(|plan| c.original(plan));
        let Some(original) = original.filter(|_| c.apply(&mut loaded.program)) else {
            return r.fail(Invariant::Negative, format!("{what}: {} does not apply", c.describe(&loaded.program)));
        };
        self.checks(loaded, c, errors, r);
        if !original.put(&mut loaded.program, c.plan) {
            r.fail(Invariant::Negative, format!("{what}: {} cannot be put back", c.describe(&loaded.program)));
        }
    }

    /// The checks of [`PlanChecks::end_to_end`] on the corrupted program.
    fn checks(&self, corrupt: &LoadedProgram<'_>, c: &Corruption, errors: &[CheckError], r: &mut Report) {
        let (name, rig, what) = (self.name, self.rig, self.what);
        let full = check_method_with(corrupt, c.plan, rig.rt.fault);
        r.check(Invariant::Negative, full == errors, || {
            format!(
                "{what}: {} ({}): the per-element check gives {errors:?}, the whole-method check {full:?}",
                c.describe(&corrupt.program),
                c.class.name()
            )
        });
        rig.ledger.clear();
        let result = rig.rt.load_method(corrupt, name, None, &Trace::default());
        let inits = rig.ledger.inits();
        r.check(Invariant::Negative, matches!(result, Err(RuntimeError::Check(_))) && inits == 0, || {
            format!(
                "{what}: {} ({}): {} with {inits} backend inits",
                c.describe(&corrupt.program),
                c.class.name(),
                match &result {
                    Ok(_) => "accepted".to_string(),
                    Err(e) => format!("rejected late ({e})"),
                }
            )
        });
    }
}
