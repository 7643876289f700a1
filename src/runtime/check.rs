//! Init-time structural checks of one method, run before any backend `init()` (P3).
//!
//! Everything ExecuTorch 1.5.1 checks at `Method::init`, plus what it lets through (an
//! out-of-range `delegate_index` or jump destination, an op index masked by a later lookup,
//! a forward list reference, a scratch delegate with several call sites): each violation is a
//! typed [`CheckError`] naming the method and place. All violations are collected, in program
//! order, so `ptecheck check` can print every one; `Method::init` reports the first.
//! Reads the loaded program only; no backend is touched.

use super::error::{CheckError, ErrorCode, Site};
use super::ops;
use crate::fault::Fault;
use crate::format::LoadedProgram;
use crate::program::{
    EValue, ExecutionPlan, Instruction, SCRATCH_KEY, Tensor, TensorDataLocation, TensorShapeDynamism, parse_scratch,
};
use smol_str::SmolStr;

/// Largest tensor rank the runtime accepts.
pub const MAX_RANK: usize = 16;

/// Number of DelegateCall instructions naming each delegate, over all chains (P5).
pub fn call_site_counts(plan: &ExecutionPlan) -> Vec<usize> {
    let mut counts = vec![0usize; plan.delegate_list().len()];
    for chain in plan.chain_list() {
        for ins in chain.instruction_list() {
            if let Instruction::DelegateCall(d) = ins
                && let Some(c) = usize::try_from(d.delegate_index).ok().and_then(|i| counts.get_mut(i))
            {
                *c += 1;
            }
        }
    }
    counts
}

struct Checker<'l, 'a> {
    fault: Option<Fault>,
    loaded: &'l LoadedProgram<'a>,
    plan: &'l ExecutionPlan,
    method: SmolStr,
    out: Vec<CheckError>,
    /// Argument count of each entry of the operator table (`None`: unknown operator).
    arities: Vec<Option<usize>>,
    /// Qualified names of operator table entries an error named (filled on first use, so a
    /// prepared plan that rejects many corruptions spells each name once).
    names: Vec<Option<SmolStr>>,
}

impl<'l, 'a> Checker<'l, 'a> {
    fn new(loaded: &'l LoadedProgram<'a>, plan: &'l ExecutionPlan, method: SmolStr, fault: Option<Fault>) -> Self {
        let arities = plan.operator_list().iter().map(ops::arity_of).collect();
        Checker { fault, loaded, plan, method, out: Vec::new(), arities, names: Vec::new() }
    }
}

impl Checker<'_, '_> {
    fn n_values(&self) -> usize {
        self.plan.value_list().len()
    }

    /// The qualified name of operator table entry `i` (`op`).
    fn op_name(&mut self, i: usize, op: &crate::program::Operator) -> SmolStr {
        if self.names.len() <= i {
            self.names.resize(i + 1, None);
        }
        self.names[i].get_or_insert_with(|| op.qualified().into()).clone()
    }

    fn value_index(&mut self, site: Site, field: &'static str, index: i64) {
        if index < 0 || index as u64 >= self.n_values() as u64 {
            let count = self.n_values();
            self.out.push(CheckError::ValueIndex { method: self.method.clone(), site, field, index, count });
        }
    }

    fn tensor_err(&mut self, value: usize, what: String, code: ErrorCode) {
        self.out.push(CheckError::Tensor { method: self.method.clone(), value, what, code });
    }

    fn required_fields(&mut self) {
        let p = self.plan;
        let missing: [(&'static str, bool); 7] = [
            ("name", p.name.is_none()),
            ("values", p.values.is_none()),
            ("inputs", p.inputs.is_none()),
            ("outputs", p.outputs.is_none()),
            ("non_const_buffer_sizes", p.non_const_buffer_sizes.is_none()),
            ("delegates", p.delegates.is_none()),
            ("chains", p.chain_list().is_empty()),
        ];
        for (field, absent) in missing {
            if absent {
                self.out.push(CheckError::MissingField { method: self.method.clone(), field });
            }
        }
    }

    fn tensor(&mut self, i: usize, t: &Tensor) {
        use ErrorCode::*;
        if t.storage_offset != 0 {
            self.tensor_err(i, format!("storage_offset {} is not 0", t.storage_offset), NotSupported);
        }
        let Some(elem) = t.scalar_type.element_size() else {
            return self.tensor_err(
                i,
                format!("scalar_type {} is not a valid element type", t.scalar_type.0),
                InvalidProgram,
            );
        };
        if t.shape_dynamism == TensorShapeDynamism::DYNAMIC_UNBOUND {
            self.tensor_err(i, "shape_dynamism DYNAMIC_UNBOUND is not supported".into(), NotSupported);
        }
        let Some(sizes) = &t.sizes else { return self.tensor_err(i, "sizes is absent".into(), InvalidProgram) };
        if sizes.len() > MAX_RANK {
            return self.tensor_err(i, format!("rank {} exceeds {MAX_RANK}", sizes.len()), InvalidProgram);
        }
        match &t.dim_order {
            None => return self.tensor_err(i, "dim_order is absent".into(), InvalidProgram),
            Some(d) if d.len() != sizes.len() => {
                return self.tensor_err(
                    i,
                    format!("dim_order has {} entries for rank {}", d.len(), sizes.len()),
                    InvalidProgram,
                );
            }
            Some(d) => {
                let mut seen = [false; MAX_RANK];
                for &x in d {
                    if (x as usize) >= sizes.len() || std::mem::replace(&mut seen[x as usize], true) {
                        return self.tensor_err(i, format!("dim_order {d:?} is not a permutation"), InvalidProgram);
                    }
                }
            }
        }
        if let Some(pos) = sizes.iter().position(|s| *s < 0) {
            return self.tensor_err(i, format!("sizes[{pos}] = {} is negative", sizes[pos]), InvalidProgram);
        }
        let nbytes =
            sizes.iter().try_fold(1u64, |acc, s| acc.checked_mul(*s as u64)).and_then(|n| n.checked_mul(elem as u64));
        let Some(nbytes) = nbytes else {
            return self.tensor_err(i, format!("numel × element size of sizes {sizes:?} overflows"), InvalidProgram);
        };
        let external = t.extra_tensor_info.as_ref().is_some_and(|x| x.location == TensorDataLocation::EXTERNAL);
        if let Some(a) = &t.allocation_info {
            let arenas = self.plan.non_const_buffer_sizes.as_deref().unwrap_or(&[]);
            let id = a.memory_id as usize;
            if id == 0 || id >= arenas.len() {
                return self.tensor_err(
                    i,
                    format!(
                        "memory_id {} names no planned arena ({} arenas)",
                        a.memory_id,
                        arenas.len().saturating_sub(1)
                    ),
                    InvalidArgument,
                );
            }
            let arena = arenas[id];
            // ExecuTorch's HierarchicalAllocator: an end past u64 is InvalidArgument, an end past
            // the arena MemoryAllocationFailed.
            match a.offset().checked_add(nbytes) {
                Some(end) if arena >= 0 && end <= arena as u64 => {}
                None => {
                    return self.tensor_err(
                        i,
                        format!("planned offset {} + {nbytes} bytes overflows u64", a.offset()),
                        InvalidArgument,
                    );
                }
                Some(_) => {
                    return self.tensor_err(
                        i,
                        format!("planned [{}, +{nbytes}) does not fit arena {id} of {arena} bytes", a.offset()),
                        MemoryAllocationFailed,
                    );
                }
            }
            if t.data_buffer_idx > 0 && !external {
                let k = t.data_buffer_idx as usize;
                let avail = self.loaded.mutable_data.first().and_then(|m| m.get(k)).map(|s| s.len() as u64);
                match avail {
                    Some(len) if len >= nbytes => {}
                    _ => self.tensor_err(
                        i,
                        format!("mutable data buffer {k} is missing or smaller than {nbytes} bytes"),
                        InvalidArgument,
                    ),
                }
            }
        } else if t.data_buffer_idx > 0 && !external {
            let k = t.data_buffer_idx as usize;
            match self.loaded.constants.get(k) {
                None => self.tensor_err(
                    i,
                    format!("data_buffer_idx {k} is out of range ({} constant buffers)", self.loaded.constants.len()),
                    InvalidArgument,
                ),
                Some(c) if (c.len() as u64) < nbytes => self.tensor_err(
                    i,
                    format!("constant buffer {k} has {} bytes, the tensor needs {nbytes}", c.len()),
                    InvalidArgument,
                ),
                Some(_) => {}
            }
        }
    }

    fn values(&mut self) {
        for (i, v) in self.plan.value_list().iter().enumerate() {
            self.value(i, v);
        }
    }

    /// The checks of value `i` when it holds `v`.
    fn value(&mut self, i: usize, v: &EValue) {
        let values = self.plan.value_list();
        let method = &self.method;
        let item_err = |item: usize, index: i64, what: &'static str, code: ErrorCode| CheckError::ListItem {
            method: method.clone(),
            value: i,
            item,
            index,
            what,
            code,
        };
        let missing = |what: &str| CheckError::Tensor {
            method: method.clone(),
            value: i,
            what: format!("{what} items are absent"),
            code: ErrorCode::InvalidProgram,
        };
        match v {
            EValue::Tensor(t) => self.tensor(i, t),
            EValue::IntList(None) => self.out.push(missing("IntList")),
            EValue::IntList(Some(items)) => {
                if items.len().checked_mul(8).is_none() {
                    self.out.push(CheckError::Tensor {
                        method: method.clone(),
                        value: i,
                        what: format!("IntList count {} × 8 bytes overflows", items.len()),
                        code: ErrorCode::InvalidProgram,
                    });
                }
                for (k, &x) in items.iter().enumerate() {
                    if x < 0 || x as u64 >= values.len() as u64 {
                        self.out.push(item_err(k, x, "out of range", ErrorCode::InvalidProgram));
                    }
                }
            }
            EValue::TensorList(None) => self.out.push(missing("TensorList")),
            EValue::OptionalTensorList(None) => self.out.push(missing("OptionalTensorList")),
            EValue::TensorList(Some(items)) | EValue::OptionalTensorList(Some(items)) => {
                let optional = matches!(v, EValue::OptionalTensorList(_));
                for (k, &x) in items.iter().enumerate() {
                    let e = if optional && x == -1 {
                        None
                    } else if x < 0 || x as usize >= values.len() {
                        Some(item_err(k, x.into(), "out of range", ErrorCode::InvalidProgram))
                    } else if x as usize >= i {
                        Some(item_err(
                            k,
                            x.into(),
                            "refers to a later value (read before it is built)",
                            ErrorCode::InvalidProgram,
                        ))
                    } else if values[x as usize].as_tensor().is_none() {
                        Some(item_err(k, x.into(), "is not a tensor", ErrorCode::InvalidType))
                    } else {
                        None
                    };
                    self.out.extend(e);
                }
            }
            EValue::String(None) => self.out.push(missing("String")),
            EValue::BoolList(None) => self.out.push(missing("BoolList")),
            EValue::DoubleList(None) => self.out.push(missing("DoubleList")),
            _ => {}
        }
    }

    fn plan_io(&mut self) {
        for (which, list) in [(Io::Input, &self.plan.inputs), (Io::Output, &self.plan.outputs)] {
            for (position, &index) in list.iter().flatten().enumerate() {
                self.plan_io_entry(which, position, index);
            }
        }
    }

    /// The checks of `inputs[position]` or `outputs[position]` when it names value `index`.
    fn plan_io_entry(&mut self, which: Io, position: usize, index: i32) {
        let values = self.plan.value_list();
        let method = self.method.clone();
        let name = which.field();
        match usize::try_from(index).ok().and_then(|i| values.get(i)) {
            None => self.out.push(CheckError::PlanIo { method, which: name, position, index, count: values.len() }),
            Some(v)
                if which == Io::Input
                    && !matches!(v, EValue::Tensor(_) | EValue::Int(_) | EValue::Bool(_) | EValue::Double(_)) =>
            {
                self.out.push(CheckError::PlanIoKind { method, which: name, position, index, kind: v.kind() })
            }
            Some(_) => {}
        }
    }

    /// Whether delegate `d` declares scratch buffers (a malformed declaration counts as none).
    fn declares_scratch(&self, d: usize) -> bool {
        self.plan.delegate_list().get(d).is_some_and(|del| {
            del.compile_spec_list().iter().any(|spec| {
                spec.key.as_deref() == Some(SCRATCH_KEY)
                    && parse_scratch(spec.value.as_ref().map(|v| v.as_slice()).unwrap_or(&[]))
                        .is_ok_and(|s| !s.is_empty())
            })
        })
    }

    /// The SH10 error of delegate `d` when it has `sites` call sites, if any.
    fn scratch_sites(&self, d: usize, sites: usize) -> Option<CheckError> {
        (sites > 1 && self.fault != Some(Fault::SkipScratchCallSiteCheck) && self.declares_scratch(d))
            .then(|| CheckError::ScratchShared { method: self.method.clone(), delegate: d, sites })
    }

    fn delegates(&mut self) {
        let counts = call_site_counts(self.plan);
        for (d, del) in self.plan.delegate_list().iter().enumerate() {
            let coded =
                |what: String, code| CheckError::Delegate { method: self.method.clone(), delegate: d, what, code };
            let err = |what: String| coded(what, ErrorCode::InvalidProgram);
            let mut found = Vec::new();
            if del.id.is_none() {
                found.push(err("has no `id`".into()));
            }
            if del.processed.is_none() {
                // ExecuTorch finds no data behind a missing reference (D2: NotFound).
                found.push(coded("has no `processed` reference".into(), ErrorCode::NotFound));
            }
            let mut scratch_reported = false;
            for (k, spec) in del.compile_spec_list().iter().enumerate() {
                if spec.key.is_none() || spec.value.is_none() {
                    found.push(err(format!("compile_specs[{k}] lacks its key or value")));
                } else if spec.key.as_deref() == Some(SCRATCH_KEY) {
                    match parse_scratch(spec.value.as_ref().map(|v| v.as_slice()).unwrap_or(&[])) {
                        Err(e) => found.push(err(format!("compile_specs[{k}] `{SCRATCH_KEY}` is malformed: {e}"))),
                        Ok(_) if !scratch_reported => {
                            scratch_reported = true;
                            found.extend(self.scratch_sites(d, counts[d]));
                        }
                        Ok(_) => {}
                    }
                }
            }
            self.out.extend(found);
        }
    }

    fn instructions(&mut self) {
        let mut reported_ops = vec![false; self.plan.operator_list().len()];
        // Operator resolution reports into a delayed-error slot, as ExecuTorch's init does (Q1).
        // Each failed resolution is kept; ExecuTorch's slot is overwritten by every later
        // resolution, success included (the `LaterOpLookupHides` seeded bug reproduces that).
        let hides = self.fault == Some(Fault::LaterOpLookupHides);
        let mut delayed: Vec<CheckError> = Vec::new();
        for (c, chain) in self.plan.chain_list().iter().enumerate() {
            let Some(list) = &chain.instructions else {
                self.out.push(CheckError::MissingInstructions { method: self.method.clone(), chain: c });
                continue;
            };
            for (ii, ins) in list.iter().enumerate() {
                match self.instruction(Site { chain: c, instruction: ii }, list.len(), ins, &mut reported_ops) {
                    Lookup::None => {}
                    Lookup::Resolved if hides => delayed.clear(),
                    Lookup::Resolved => {}
                    Lookup::Failed(e) if hides => delayed = vec![e],
                    Lookup::Failed(e) => delayed.push(e),
                }
            }
        }
        self.out.extend(delayed);
    }

    /// The checks of instruction `ins` at `site` of a chain of `len` instructions; the
    /// operator lookup's outcome is returned, not reported (it goes to the delayed slot).
    fn instruction(&mut self, site: Site, len: usize, ins: &Instruction, reported_ops: &mut [bool]) -> Lookup {
        let n_ops = self.plan.operator_list().len();
        let n_delegates = self.plan.delegate_list().len();
        match ins {
            Instruction::KernelCall(k) => {
                let Some(args) = &k.args else {
                    self.out.push(CheckError::MissingArgs { method: self.method.clone(), site, what: "KernelCall" });
                    return Lookup::None;
                };
                for &a in args {
                    self.value_index(site, "KernelCall.args", a.into());
                }
                let Some(op) =
                    usize::try_from(k.op_index).ok().and_then(|i| self.plan.operator_list().get(i).map(|o| (i, o)))
                else {
                    return Lookup::Failed(CheckError::OpIndex {
                        method: self.method.clone(),
                        site,
                        index: k.op_index,
                        count: n_ops,
                    });
                };
                match self.arities.get(op.0).copied().flatten() {
                    None if !reported_ops.get(op.0).copied().unwrap_or(true) => {
                        reported_ops[op.0] = true;
                        let name = op.1.qualified();
                        self.out.push(CheckError::UnknownOperator {
                            method: self.method.clone(),
                            op_index: op.0,
                            name,
                        });
                    }
                    Some(expected) if expected != args.len() => {
                        let op = self.op_name(op.0, op.1);
                        self.out.push(CheckError::Arity {
                            method: self.method.clone(),
                            site,
                            op,
                            expected,
                            found: args.len(),
                        })
                    }
                    _ => {}
                }
                Lookup::Resolved
            }
            Instruction::DelegateCall(d) => {
                match &d.args {
                    None => self.out.push(CheckError::MissingArgs {
                        method: self.method.clone(),
                        site,
                        what: "DelegateCall",
                    }),
                    Some(args) => {
                        for &a in args {
                            self.value_index(site, "DelegateCall.args", a.into());
                        }
                    }
                }
                let deferred = self.fault == Some(Fault::DelegateIndexAtExecuteOnly);
                if !deferred && (d.delegate_index < 0 || d.delegate_index as usize >= n_delegates) {
                    self.out.push(CheckError::DelegateIndex {
                        method: self.method.clone(),
                        site,
                        index: d.delegate_index,
                        count: n_delegates,
                    });
                }
                Lookup::None
            }
            Instruction::MoveCall(m) => {
                self.value_index(site, "MoveCall.move_from", m.move_from.into());
                self.value_index(site, "MoveCall.move_to", m.move_to.into());
                Lookup::None
            }
            Instruction::FreeCall(f) => {
                self.value_index(site, "FreeCall.value_index", f.value_index.into());
                Lookup::None
            }
            Instruction::JumpFalseCall(j) => {
                self.value_index(site, "JumpFalseCall.cond_value_index", j.cond_value_index.into());
                // A destination equal to the chain length ends the chain (a cond that is the
                // last construct of a method jumps there).
                if j.destination_instruction < 0 || j.destination_instruction as usize > len {
                    self.out.push(CheckError::JumpDestination {
                        method: self.method.clone(),
                        site,
                        destination: j.destination_instruction,
                        len,
                    });
                }
                Lookup::None
            }
        }
    }
}

/// The outcome of one instruction's operator lookup.
enum Lookup {
    /// Not a KernelCall (or one without arguments).
    None,
    /// The operator index named an operator.
    Resolved,
    /// The operator index named none.
    Failed(CheckError),
}

/// Which list of the plan a plan-I/O entry is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Io {
    /// `inputs`.
    Input,
    /// `outputs`.
    Output,
}

impl Io {
    fn field(self) -> &'static str {
        match self {
            Io::Input => "inputs",
            Io::Output => "outputs",
        }
    }
}

/// One element of a plan replaced by another (what a corruption edits).
#[derive(Clone, Copy, Debug)]
pub enum Replacement<'r> {
    /// `chains[chain].instructions[index]` is `ins`.
    Instruction {
        /// Chain index.
        chain: usize,
        /// Instruction index.
        index: usize,
        /// The replacing instruction.
        ins: &'r Instruction,
    },
    /// `values[index]` is `value`, of the same kind as the value it replaces.
    Value {
        /// Value index.
        index: usize,
        /// The replacing value.
        value: &'r EValue,
    },
    /// `inputs[position]` or `outputs[position]` is `index`.
    PlanIo {
        /// Which list.
        which: Io,
        /// Position in it.
        position: usize,
        /// The value index it names.
        index: i32,
    },
}

/// A method that passed every init-time check, prepared so that the checks of the method with
/// one element replaced cost as much as that element, not as the whole method: the per-element
/// checks are the ones [`check_method`] runs, and the cross-element facts (call sites per
/// delegate, the last resolved operator lookup) are counted once here.
pub struct PreparedPlan<'l, 'a> {
    checker: Checker<'l, 'a>,
    call_sites: Vec<usize>,
    /// Program-order position `(chain, instruction)` of the last resolved operator lookup.
    last_resolved: Option<(usize, usize)>,
    /// Scratch for the unknown-operator flags of one replaced instruction.
    reported: Vec<bool>,
}

impl<'l, 'a> PreparedPlan<'l, 'a> {
    /// Prepares plan `plan_index`; `Err` with its violations when it does not pass the checks
    /// itself (the replacement checks assume a valid base).
    pub fn new(
        loaded: &'l LoadedProgram<'a>,
        plan_index: usize,
        fault: Option<Fault>,
    ) -> Result<Self, Vec<CheckError>> {
        let errors = check_method_with(loaded, plan_index, fault);
        if !errors.is_empty() {
            return Err(errors);
        }
        let Some(plan) = loaded.program.plans().get(plan_index) else {
            return Err(vec![CheckError::MissingField {
                method: format!("#{plan_index}").into(),
                field: "execution_plan",
            }]);
        };
        let mut last_resolved = None;
        for (c, chain) in plan.chain_list().iter().enumerate() {
            for (i, ins) in chain.instruction_list().iter().enumerate() {
                if let Instruction::KernelCall(k) = ins
                    && usize::try_from(k.op_index).is_ok_and(|o| o < plan.operator_list().len())
                {
                    last_resolved = Some((c, i));
                }
            }
        }
        let method: SmolStr = plan.name.as_deref().map_or_else(|| format!("#{plan_index}").into(), Into::into);
        Ok(PreparedPlan {
            checker: Checker::new(loaded, plan, method, fault),
            call_sites: call_site_counts(plan),
            last_resolved,
            reported: Vec::new(),
        })
    }

    /// Every init-time violation of the method with `r` applied, in [`check_method`]'s order
    /// (the first is what `Method::init` reports).
    pub fn check_replaced(&mut self, r: Replacement<'_>) -> &[CheckError] {
        let c = &mut self.checker;
        c.out.clear();
        match r {
            Replacement::Value { index, value } => c.value(index, value),
            Replacement::PlanIo { which, position, index } => c.plan_io_entry(which, position, index),
            Replacement::Instruction { chain, index, ins } => {
                let list = c.plan.chain_list().get(chain).map(|ch| ch.instruction_list()).unwrap_or(&[]);
                let old = list.get(index);
                // Call sites move from the old delegate to the new one (SH10 comes first).
                if let Instruction::DelegateCall(d) = ins {
                    let moved =
                        matches!(old, Some(Instruction::DelegateCall(o)) if o.delegate_index == d.delegate_index);
                    if let Some(&n) = usize::try_from(d.delegate_index).ok().and_then(|i| self.call_sites.get(i)) {
                        let sites = if moved { n } else { n + 1 };
                        c.out.extend(c.scratch_sites(d.delegate_index as usize, sites));
                    }
                }
                // Operators referenced elsewhere are known (the base passed), so an unknown
                // operator can only come from this instruction.
                let mut reported = std::mem::take(&mut self.reported);
                reported.clear();
                reported.resize(c.plan.operator_list().len(), false);
                let lookup = c.instruction(Site { chain, instruction: index }, list.len(), ins, &mut reported);
                self.reported = reported;
                if let Lookup::Failed(e) = lookup {
                    let hidden = c.fault == Some(Fault::LaterOpLookupHides)
                        && self.last_resolved.is_some_and(|last| last > (chain, index));
                    if !hidden {
                        c.out.push(e);
                    }
                }
            }
        }
        &c.out
    }
}

/// Every init-time violation of plan `plan_index`, in program order (empty = the method may
/// start). Panics never; `plan_index` out of range yields a `MissingField` for `execution_plan`.
pub fn check_method(loaded: &LoadedProgram<'_>, plan_index: usize) -> Vec<CheckError> {
    check_method_with(loaded, plan_index, None)
}

/// [`check_method`] exhibiting a seeded bug (mutation testing only).
pub fn check_method_with(loaded: &LoadedProgram<'_>, plan_index: usize, fault: Option<Fault>) -> Vec<CheckError> {
    let Some(plan) = loaded.program.plans().get(plan_index) else {
        return vec![CheckError::MissingField { method: format!("#{plan_index}").into(), field: "execution_plan" }];
    };
    let method: SmolStr = plan.name.as_deref().map_or_else(|| format!("#{plan_index}").into(), Into::into);
    let mut c = Checker::new(loaded, plan, method, fault);
    c.required_fields();
    c.values();
    c.plan_io();
    c.delegates();
    c.instructions();
    c.out
}

/// Violations of every method of the program.
pub fn check_all_methods(loaded: &LoadedProgram<'_>) -> Vec<CheckError> {
    (0..loaded.program.plans().len()).flat_map(|i| check_method(loaded, i)).collect()
}
