//! What checking one case reports: the options a check takes, each violation, the checks
//! performed per invariant, and the time per stage.
//! May not touch: the checks themselves (they fill a [`Report`]).

use super::invariant::{Checked, Invariant};
use crate::fault::Fault;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// A seeded bug to exhibit (mutation testing); `None` in normal use.
    pub fault: Option<Fault>,
    /// Chooses the delegate whose init fails for I5.
    pub inject_seed: u64,
    /// Run the negative (corruption) checks.
    pub negative: bool,
    /// Send every corruption through the whole runtime (copy, edit, `load_method`), not only
    /// one per method: the exhaustive, quadratic form of the negative checks.
    pub negative_end_to_end: bool,
    /// Allow `while_loop` in the emitter (P12).
    pub allow_while: bool,
    /// Instruction budget per execute.
    pub instruction_budget: u64,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            fault: None,
            inject_seed: 0,
            negative: true,
            negative_end_to_end: false,
            allow_while: true,
            instruction_budget: 1_000_000,
        }
    }
}

/// One violated invariant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Invariant name (see [`Invariant::name`]).
    pub invariant: String,
    /// What was observed.
    pub detail: String,
}

/// Time spent per stage.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Timings {
    /// Emission.
    pub emit: Duration,
    /// `format::write`.
    pub write: Duration,
    /// `format::load`.
    pub load: Duration,
    /// Method init (checks + delegate init).
    pub init: Duration,
    /// Execution.
    pub execute: Duration,
    /// Eager interpreter.
    pub eager: Duration,
    /// Structure, round trips and lifecycle comparisons.
    pub compare: Duration,
    /// Negative (corruption) checks.
    pub negative: Duration,
}

impl Timings {
    /// Adds another set of timings.
    pub fn add(&mut self, o: &Timings) {
        self.emit += o.emit;
        self.write += o.write;
        self.load += o.load;
        self.init += o.init;
        self.execute += o.execute;
        self.eager += o.eager;
        self.compare += o.compare;
        self.negative += o.negative;
    }

    /// The sum of two sets of timings (`None` when a stage's sum overflows a `Duration`, as
    /// those of reports read from files may).
    pub fn checked_add(&self, o: &Timings) -> Option<Timings> {
        Some(Timings {
            emit: self.emit.checked_add(o.emit)?,
            write: self.write.checked_add(o.write)?,
            load: self.load.checked_add(o.load)?,
            init: self.init.checked_add(o.init)?,
            execute: self.execute.checked_add(o.execute)?,
            eager: self.eager.checked_add(o.eager)?,
            compare: self.compare.checked_add(o.compare)?,
            negative: self.negative.checked_add(o.negative)?,
        })
    }
}

/// What one check found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// Times each invariant was checked.
    pub checked: Checked,
    /// Violations.
    pub failures: Vec<Failure>,
    /// Time per stage.
    pub timings: Timings,
    /// How many corruptions the negative checks sent each way.
    #[serde(skip)]
    pub negative: Coverage,
}

impl Report {
    /// Whether every invariant held.
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }

    /// Counts one check of `inv`; records a failure when it does not hold.
    pub fn check(&mut self, inv: Invariant, holds: bool, detail: impl FnOnce() -> String) {
        if inv.is_check() {
            self.checked.add(inv, 1);
        }
        if !holds {
            self.failures.push(Failure { invariant: inv.name().to_string(), detail: detail() });
        }
    }

    /// Counts `n` checks of `inv` that held.
    pub fn held(&mut self, inv: Invariant, n: usize) {
        self.checked.add(inv, n);
    }

    /// Records a failure of `inv`.
    pub fn fail(&mut self, inv: Invariant, detail: String) {
        self.check(inv, false, || detail);
    }

    /// The first failure's invariant.
    pub fn first_invariant(&self) -> Option<&str> {
        self.failures.first().map(|f| f.invariant.as_str())
    }
}

/// How many corruptions the negative checks (`negative::check`) sent through each path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Checked on the one edited element.
    pub per_element: usize,
    /// Also loaded end to end by the runtime.
    pub end_to_end: usize,
}

impl std::ops::AddAssign for Coverage {
    fn add_assign(&mut self, o: Coverage) {
        self.per_element += o.per_element;
        self.end_to_end += o.end_to_end;
    }
}
