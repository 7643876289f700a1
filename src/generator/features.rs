//! The generator's vocabulary, declared once: [`Switch`] (what a configuration may turn on, with
//! its default) and [`Feature`] (what a generated case is observed to exercise, with the switch
//! it needs). `GenConfig`'s switches, their swarm draw, the feature list the campaign reports
//! and the coverage test all derive from these two enums and from `ir::OpKind` (one `op:NAME`
//! feature per operator).
//! May not touch: programs (observing them is `observe`'s), emission, the runtime.

use crate::ir::OpKind;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use strum::{EnumCount, EnumIter, IntoEnumIterator, IntoStaticStr};

/// A generator switch (`GenConfig.features.NAME`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, EnumIter, EnumCount, IntoStaticStr, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Switch {
    /// Calls of lowered modules.
    Calls,
    /// Favour calling the last-called module again.
    RepeatedCalls,
    /// `cond`.
    Cond,
    /// `map` over a stacked input.
    Map,
    /// `scan` over a stacked input.
    Scan,
    /// Bounded `while_loop` (P12; off by default: ExecuTorch cannot emit it, E27).
    WhileLoop,
    /// `scratch` backend modules.
    Scratch,
    /// `argkeep` backend modules (not opted in).
    Argkeep,
    /// Clones of modules (identical bytes; same or different specs).
    IdenticalPartitions,
    /// Several methods.
    MultiMethod,
    /// Constant tensors (weights).
    Constants,
    /// Shape- and type-changing ops and scalar ops, whose results become extra outputs.
    SideOps,
    /// int64 tensor inputs and the ops that take them.
    IntTensors,
    /// Inputs with a dynamic (upper-bound) shape, and modules that take them.
    DynamicShapes,
    /// Partitions exported as one multi-function bundle (`multifn`), run with and without a
    /// shared loaded model.
    Multifunction,
    /// Delegate blobs kept inline in the program instead of in segments.
    InlineBlobs,
    /// Modules of float32 ops lowered to XNNPACK blobs (`XnnpackBackend`).
    Xnnpack,
    /// Chains of sin, add and mm lowered to ExecuTorch's `BackendWithCompilerDemo` (off by
    /// default: ExecuTorch's runtime does not register it, DB2; an exporter campaign turns it on
    /// when the exporter announces the backend).
    CompilerDemo,
}

impl Switch {
    /// snake_case name.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether the default configuration turns it on.
    pub fn default_on(self) -> bool {
        !matches!(self, Switch::WhileLoop | Switch::CompilerDemo)
    }

    /// Whether a swarm draw takes a byte for it even when the base configuration has it off.
    /// Switches declared after the byte stream was fixed take one only when on, so that a seed
    /// or fuzz input recorded before keeps generating the same program.
    fn always_drawn(self) -> bool {
        (self as usize) < STABLE_SWITCHES
    }
}

/// How many switches (in declaration order) every swarm draw reads a byte for.
const STABLE_SWITCHES: usize = Switch::CompilerDemo as usize;

/// Which switches are on, one bit per switch in declaration order. Serialised as
/// `{"name": bool}`; names left out keep their default, unknown names are rejected.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Switches(u64);

/// Shown as the map it stands for (`{Calls: true, …}`).
impl std::fmt::Debug for Switches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(Switch::iter().map(|s| (s, self.on(s)))).finish()
    }
}

// One bit per switch.
const _: () = assert!(Switch::COUNT <= 64);

impl Default for Switches {
    fn default() -> Self {
        Switch::iter().fold(Switches::none(), |mut w, s| {
            w.set(s, s.default_on());
            w
        })
    }
}

impl Switches {
    /// Every switch off.
    pub fn none() -> Self {
        Switches(0)
    }

    /// Whether `s` is on.
    pub fn on(&self, s: Switch) -> bool {
        self.0 & (1 << s as u32) != 0
    }

    /// Turns `s` on or off.
    pub fn set(&mut self, s: Switch, on: bool) {
        if on {
            self.0 |= 1 << s as u32;
        } else {
            self.0 &= !(1 << s as u32);
        }
    }

    /// The switches on in both.
    pub fn and(&self, other: &Switches) -> Switches {
        Switches(self.0 & other.0)
    }
}

impl Serialize for Switches {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(Switch::iter().map(|w| (w, self.on(w))))
    }
}

impl<'de> Deserialize<'de> for Switches {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let given = BTreeMap::<Switch, bool>::deserialize(d)?;
        let mut out = Switches::default();
        for (k, v) in given {
            out.set(k, v);
        }
        Ok(out)
    }
}

impl Switches {
    /// A swarm draw: the switches of `self` each kept on or turned off by one byte of `u`.
    pub fn draw(&self, u: &mut arbitrary::Unstructured<'_>) -> Switches {
        let mut w = Switches::none();
        for s in Switch::iter().filter(|s| s.always_drawn() || self.on(*s)) {
            w.set(s, u.arbitrary::<bool>().unwrap_or(true));
        }
        self.and(&w)
    }
}

/// Something a generated case exercises (besides `op:NAME`, one per operator whose result the
/// case checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, EnumIter, IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Feature {
    /// More than one method.
    MultiMethod,
    /// A module called from two methods.
    ModuleSharedAcrossMethods,
    /// Constant tensors.
    Constants,
    /// A call of a lowered module.
    Call,
    /// A module called twice in one method.
    RepeatedCall,
    /// Calls of two modules interleaved.
    InterleavedModules,
    /// A call inside a cond branch.
    CallInCond,
    /// A call inside a map body.
    CallInMap,
    /// A call inside a scan body.
    CallInScan,
    /// A call inside a while body.
    CallInWhile,
    /// A cond.
    Cond,
    /// A map.
    Map,
    /// A scan.
    Scan,
    /// A while loop.
    While,
    /// Two modules with identical bytes and compile specs, both called.
    IdenticalPartitionsSameSpecs,
    /// Two modules with identical bytes and different compile specs, both called.
    IdenticalPartitionsDiffSpecs,
    /// A scratch module called once in a method.
    ScratchCalledOnce,
    /// A scratch module called at least twice in a method.
    ScratchCalledTwice,
    /// A called module whose backend opted in to sharing.
    OptedIn,
    /// A called module whose backend did not.
    NotOptedIn,
    /// An argkeep module called at least twice in a method.
    ArgkeepCalledTwice,
    /// A module with more than one output.
    ModuleMultiOutput,
    /// Side results of a cond branch reach the cond's outputs.
    SideInCond,
    /// Side results of a scan body reach its stacked outputs.
    SideInScan,
    /// An int64 tensor input.
    IntTensors,
    /// A method input with a dynamic shape.
    DynamicInput,
    /// A module taking a dynamic-shaped input.
    DynamicModule,
    /// A view freed after its last use (FreeCall).
    ViewFreed,
    /// A multi-function bundle run with one shared loaded model.
    MultifunctionShared,
    /// Partitions exported one model per delegate.
    MultifunctionSeparate,
    /// Delegate blobs inline in the program.
    InlineBlobs,
    /// A call of an XNNPACK module.
    XnnpackCall,
    /// An XNNPACK module called at least twice in a method.
    XnnpackCalledTwice,
    /// A call of a `BackendWithCompilerDemo` module.
    CompilerDemoCall,
}

impl Feature {
    /// snake_case name.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The switch a configuration needs on for this feature to appear.
    pub fn switch(self) -> Switch {
        use Feature::*;
        match self {
            MultiMethod | ModuleSharedAcrossMethods => Switch::MultiMethod,
            Constants => Switch::Constants,
            Call | CallInCond | CallInMap | CallInScan | OptedIn | NotOptedIn | ModuleMultiOutput => Switch::Calls,
            RepeatedCall | InterleavedModules => Switch::RepeatedCalls,
            CallInWhile | While => Switch::WhileLoop,
            Cond | SideInCond => Switch::Cond,
            Map => Switch::Map,
            Scan | SideInScan => Switch::Scan,
            IdenticalPartitionsSameSpecs | IdenticalPartitionsDiffSpecs => Switch::IdenticalPartitions,
            ScratchCalledOnce | ScratchCalledTwice => Switch::Scratch,
            ArgkeepCalledTwice => Switch::Argkeep,
            IntTensors => Switch::IntTensors,
            DynamicInput | DynamicModule => Switch::DynamicShapes,
            ViewFreed => Switch::SideOps,
            MultifunctionShared | MultifunctionSeparate => Switch::Multifunction,
            InlineBlobs => Switch::InlineBlobs,
            XnnpackCall | XnnpackCalledTwice => Switch::Xnnpack,
            CompilerDemoCall => Switch::CompilerDemo,
        }
    }
}

/// Every feature name a report counts: each [`Feature`], then `op:NAME` for each operator.
pub fn feature_names() -> Vec<String> {
    Feature::iter().map(|f| f.name().to_string()).chain(OpKind::iter().map(OpKind::feature)).collect()
}
