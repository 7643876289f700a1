//! Deliberate faults for mutation testing of the harness itself ("seeded bugs"). A fault plan
//! is an explicit parameter of the emitter and the runtime, `None` by default: normal behaviour
//! never consults it except to skip the one rule the chosen fault breaks.

use serde::{Deserialize, Serialize};

/// One seeded bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Emitter: share one BackendDelegate across separate modules whose blobs are identical.
    ShareIdenticalBlobs,
    /// Emitter: share the delegate of a module that declares scratch.
    ShareScratch,
    /// Emitter: a per-method cache keyed by blob reuses the whole BackendDelegate (pre-#14564).
    DedupWholeDelegate,
    /// Runtime: check `delegate_index` only at execute, not at init.
    DelegateIndexAtExecuteOnly,
    /// Runtime: skip the scratch call-site check (SH10).
    SkipScratchCallSiteCheck,
    /// Runtime: call `init` once per call site even for a shared delegate.
    InitPerCallSite,
    /// Runtime: destroy a shared handle once per call site.
    DestroyPerCallSite,
    /// Runtime: a later successful operator lookup hides an earlier bad `op_index` (Q1).
    LaterOpLookupHides,
    /// Preprocess: the `argkeep` backend opts in to handle sharing.
    ArgkeepOptedIn,
    /// Emitter: cond's first jump lands one instruction early.
    JumpOffByOne,
    /// Emitter: drop the last output from DelegateCall args.
    DropLastDelegateOutput,
    /// Emitter: a call inside a loop body uses the delegate of another module.
    WrongDelegateInLoop,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 12] = [
        Fault::ShareIdenticalBlobs,
        Fault::ShareScratch,
        Fault::DedupWholeDelegate,
        Fault::DelegateIndexAtExecuteOnly,
        Fault::SkipScratchCallSiteCheck,
        Fault::InitPerCallSite,
        Fault::DestroyPerCallSite,
        Fault::LaterOpLookupHides,
        Fault::ArgkeepOptedIn,
        Fault::JumpOffByOne,
        Fault::DropLastDelegateOutput,
        Fault::WrongDelegateInLoop,
    ];

    /// snake_case name.
    pub fn name(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
    }
}
