//! Nested plans: a plan of CPU kernels that a backend compiled its sub-graph into, run per
//! call in a frame of its own with the runtime's kernels. The test backends execute their
//! delegates this way, so the arithmetic inside a delegate is the kernels', never the eager
//! interpreter's (the outputs the oracle expects come from `ir::eval` alone).
//!
//! Owns: validation of a nested plan (the same init-time checks as any method, plus "no
//! delegates inside"), and moving values between the caller's frame and the nested one.
//! May not touch: emission (a backend's preprocess makes the plan), backend state.

use super::backend::{DelegateArgs, Trace};
use super::check::check_method;
use super::error::{ErrorCode, RuntimeError};
use super::frame::{OpError, OpResult};
use super::method::{DataSources, Method, Runtime};
use super::value::HostValue;
use crate::format;
use crate::program::ExecutionPlan;
use std::ops::Range;

/// Instructions one nested call may run (a lowered module is straight-line code).
pub const NESTED_INSTRUCTION_BUDGET: u64 = 1_000_000;

/// A validated one-method plan of CPU kernels with its constant bytes, owned.
#[derive(Clone, Debug)]
pub struct NestedPlan {
    plan: ExecutionPlan,
    /// The `.pte` bytes the plan came from; constants are ranges of it.
    file: Vec<u8>,
    constants: Vec<Range<usize>>,
}

fn invalid(detail: impl Into<String>) -> OpError {
    OpError::new(ErrorCode::InvalidProgram, detail)
}

/// Where `part` lies inside `whole` (both slices of one allocation), if it does.
fn range_in(whole: &[u8], part: &[u8]) -> Option<Range<usize>> {
    let (w, p) = (whole.as_ptr_range(), part.as_ptr_range());
    let start = (p.start as usize).checked_sub(w.start as usize)?;
    let end = start.checked_add(part.len())?;
    (p.end as usize <= w.end as usize && end <= whole.len()).then_some(start..end)
}

impl NestedPlan {
    /// Loads method `method` of a `.pte` file and validates it: the loader's checks, every
    /// init-time check, and no delegates. Errors are InvalidProgram naming what is wrong.
    pub fn from_pte(bytes: &[u8], method: &str) -> OpResult<NestedPlan> {
        let file = bytes.to_vec();
        let loaded = format::load(&file).map_err(|e| invalid(format!("nested program: {e}")))?;
        let pi = loaded
            .program
            .plans()
            .iter()
            .position(|p| p.name_str() == method)
            .ok_or_else(|| invalid(format!("nested program has no method `{method}`")))?;
        if let Some(e) = check_method(&loaded, pi).into_iter().next() {
            return Err(OpError::new(e.code(), format!("nested program: {e}")));
        }
        let plan = loaded.program.plans()[pi].clone();
        if !plan.delegate_list().is_empty() {
            return Err(invalid("a nested program may not call delegates"));
        }
        if loaded.mutable_data.iter().any(|m| m.len() > 1) {
            return Err(invalid("a nested program may not hold initialised mutable buffers"));
        }
        let constants = loaded
            .constants
            .iter()
            .map(|c| range_in(&file, c).ok_or_else(|| invalid("constant outside the file")))
            .collect::<OpResult<Vec<_>>>()?;
        drop(loaded);
        Ok(NestedPlan { plan, file, constants })
    }

    /// Work one call's set-up does: a slot per value, the arenas' bytes in 8-byte elements.
    fn setup_work(&self) -> u64 {
        // Saturating: the arenas are the blob's numbers, and the memory limit refuses a frame
        // of them only after this is charged.
        let arenas = self
            .plan
            .non_const_buffer_sizes
            .iter()
            .flatten()
            .fold(0u64, |sum, s| sum.saturating_add((*s).max(0) as u64));
        (self.plan.value_list().len() as u64).saturating_add(arenas.div_ceil(8))
    }

    /// Number of method inputs.
    pub fn num_inputs(&self) -> usize {
        self.plan.inputs.as_ref().map_or(0, Vec::len)
    }

    /// Number of method outputs.
    pub fn num_outputs(&self) -> usize {
        self.plan.outputs.as_ref().map_or(0, Vec::len)
    }

    /// Runs the plan once on `inputs` in a fresh frame bounded by `memory_limit`, its kernels
    /// doing at most `work_budget` elements of work; the outputs and the work spent.
    pub fn run(
        &self,
        inputs: &[HostValue],
        memory_limit: usize,
        work_budget: u64,
    ) -> Result<(Vec<HostValue>, u64), RuntimeError> {
        let rt =
            Runtime { instruction_budget: NESTED_INSTRUCTION_BUDGET, memory_limit, work_budget, ..Runtime::default() };
        let sources = DataSources {
            constants: self.constants.iter().map(|r| &self.file[r.clone()]).collect(),
            mutable_data: &[],
            external: None,
        };
        let name = self.plan.name_str().to_string();
        let mut m = Method::bare(&self.plan, &name, sources, &rt, &Trace::default())?;
        for (i, v) in inputs.iter().enumerate() {
            m.set_input(i, v)?;
        }
        m.execute()?;
        Ok((m.outputs()?, m.work_spent()))
    }

    /// Runs the plan for one DelegateCall whose args are `inputs ++ outputs` (further args,
    /// such as scratch slots, are the caller's): reads the inputs from the caller's frame and
    /// writes each output back, resized to its computed shape.
    pub fn call(&self, args: &mut DelegateArgs<'_, '_>) -> OpResult<Vec<HostValue>> {
        let (n_in, n_out) = (self.num_inputs(), self.num_outputs());
        if args.args.len() < n_in + n_out {
            return Err(OpError::new(
                ErrorCode::InvalidArgument,
                format!("call passes {} args; the plan takes {n_in} inputs and {n_out} outputs", args.args.len()),
            ));
        }
        let inputs =
            args.args[..n_in].iter().map(|v| args.frame.host_value(*v)).collect::<OpResult<Vec<HostValue>>>()?;
        // The nested run spends from the caller's work budget, its set-up (a frame of its
        // values and arenas) first: a delegate called many times cannot multiply the budget.
        args.frame.spend(self.setup_work(), &"setting up the delegate's nested plan")?;
        let (outputs, spent) = self
            .run(&inputs, args.frame.memory_limit, args.frame.work_left.get())
            .map_err(|e| OpError::new(e.code(), format!("inside the delegate: {e}")))?;
        args.frame.spend(spent, &"the delegate's nested plan")?;
        for (slot, value) in args.args[n_in..n_in + n_out].iter().zip(&outputs) {
            args.frame.set_host_value(*slot, value)?;
        }
        Ok(outputs)
    }
}
