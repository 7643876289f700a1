//! Deliberate faults for mutation testing of the harness itself ("seeded bugs"). A fault plan
//! (`Option<Fault>`, `None` in normal use) is an explicit parameter of the code a real bug would
//! live in — the emitter, a backend's preprocess, the runtime's init-time checks, method init
//! and teardown — and each fault is one guarded path there. The oracle never edits its input or
//! filters its findings to exhibit a fault. Which invariant must catch each fault is declared
//! beside the mutants command (`campaign::mutants::expected_invariant`).
//! May not touch: any other module (the code a fault lives in takes the plan as a parameter).

use serde::{Deserialize, Serialize};
use strum::{EnumIter, IntoEnumIterator, IntoStaticStr};

/// One seeded bug; its snake_case name is what `--fault` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, EnumIter, IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Fault {
    /// Emitter: share one BackendDelegate across separate modules whose blobs are identical.
    ShareIdenticalBlobs,
    /// Emitter: share the delegate of a module that declares scratch.
    ShareScratch,
    /// Emitter: a per-method cache keyed by blob reuses the whole BackendDelegate (pre-#14564).
    DedupWholeDelegate,
    /// Runtime checks: check `delegate_index` only at execute, not at init.
    DelegateIndexAtExecuteOnly,
    /// Runtime checks: skip the scratch call-site check (SH10).
    SkipScratchCallSiteCheck,
    /// Runtime init: call `init` once per call site even for a shared delegate.
    InitPerCallSite,
    /// Runtime teardown: call `destroy` on a shared handle once per call site.
    DestroyPerCallSite,
    /// Runtime teardown: never `destroy` a handle that serves several call sites.
    LeakSharedHandle,
    /// Runtime teardown: destroy the handles in descending delegate order.
    DestroyDescending,
    /// Runtime init: after an init failure, drop the earlier handles without `destroy`.
    LeakOnInitFailure,
    /// Runtime init: a failing `init`'s error code is reported as `Internal`.
    InitErrorCodeLost,
    /// Runtime checks: one delayed operator-lookup error slot that every later lookup,
    /// successful or not, overwrites (Q1).
    LaterOpLookupHides,
    /// Preprocess: the `argkeep` backend opts in to handle sharing.
    ArgkeepOptedIn,
    /// Emitter: cond's first jump lands one instruction early.
    JumpOffByOne,
    /// Emitter: drop the last output from DelegateCall args.
    DropLastDelegateOutput,
    /// Emitter: swap a DelegateCall's first two inputs when they have the same type.
    SwapDelegateInputs,
    /// Emitter: a call inside a loop body uses the delegate of another module.
    WrongDelegateInLoop,
    /// Runtime kernels: `aten::sub.out` computes `other - self` (a numeric discrepancy).
    SubSwapsOperands,
}

impl Fault {
    /// Every fault, in declaration order.
    pub fn all() -> Vec<Fault> {
        Fault::iter().collect()
    }

    /// The snake_case name.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The fault named `name`.
    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::iter().find(|f| f.name() == name)
    }

    /// The fault named `name`, or why not, naming every fault.
    pub fn parse(name: &str) -> Result<Fault, String> {
        Fault::from_name(name).ok_or_else(|| {
            let names: Vec<&str> = Fault::iter().map(|f| f.name()).collect();
            format!("unknown fault `{name}`; faults: {}", names.join(", "))
        })
    }
}
