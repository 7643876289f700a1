//! The invariants the oracle checks, declared once (semantics.md E, plus the checks that make
//! them independent). Reports count and name failures by [`Invariant::name`].
//! May not touch: the checks themselves (it only names them), any other module.

use serde::Serialize;
use strum::{EnumCount, EnumIter, IntoEnumIterator, IntoStaticStr};

/// One invariant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, EnumIter, EnumCount, IntoStaticStr)]
pub enum Invariant {
    /// Every index of an emitted program is in range (checked by the oracle itself), every
    /// BackendDelegate is referenced, and every IR method became exactly one plan.
    I1,
    /// Delegate counts per method follow SH6 (E20 when nothing shares).
    I2,
    /// Each call site's delegate has its module's id, compile specs (+ the scratch entry, equal
    /// to the declaration), blob and argument types; each execute receives exactly the values
    /// the eager interpreter passed to that call.
    I3,
    /// Counted by the backends themselves: `init` calls = the delegates the IR implies, each
    /// handle destroyed exactly once, in ascending delegate order; executes per call site =
    /// the calls the eager interpreter made; call sites share a handle exactly when SH3 says.
    I4,
    /// An injected init failure at delegate k: the backends saw inits of 0..k-1, each destroyed
    /// once in ascending order, and the error is the injected one.
    I5,
    /// Runtime(shared) = runtime(unshared) = eager, per method output and per delegate call
    /// (NaN equals NaN, -0.0 differs from +0.0, everything else bit for bit).
    I6,
    /// Writer, reader and saved-JSON round trips are exact.
    I7,
    /// The runtime's own trace agrees with the backends' ledgers.
    #[strum(serialize = "trace")]
    Trace,
    /// Shared-model table (multi-function bundles): loads per key, unloads, no entry after a
    /// failed load, a retry loads again.
    #[strum(serialize = "models")]
    Models,
    /// Every corrupted instruction or list item is rejected at init with zero backend inits.
    #[strum(serialize = "negative")]
    Negative,
    /// The program could not be emitted, written or loaded.
    #[strum(serialize = "emit")]
    Emit,
}

/// Serialised as its report name (`I1`, …, `trace`, `models`, `negative`, `emit`).
impl Serialize for Invariant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl Invariant {
    /// The name reports use.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Every invariant.
    pub fn all() -> Vec<Invariant> {
        Invariant::iter().collect()
    }

    /// Whether it is a check that is counted when performed; `emit` is a kind of failure only
    /// (the program could not be emitted, written or loaded), counted when it happens.
    pub fn is_check(self) -> bool {
        self != Invariant::Emit
    }
}

/// Times each invariant was checked, in [`Invariant`] order; an invariant never counted has no
/// entry (one counted zero times has). Serialised as `{"name": count}`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Checked([Option<usize>; Invariant::COUNT]);

/// Shown as the map it stands for (`{I1: 3, …}`).
impl std::fmt::Debug for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Checked {
    /// The count of `inv`, if it was counted.
    pub fn get(&self, inv: &Invariant) -> Option<&usize> {
        self.0[*inv as usize].as_ref()
    }

    /// Adds `n` checks of `inv`.
    pub fn add(&mut self, inv: Invariant, n: usize) {
        *self.0[inv as usize].get_or_insert(0) += n;
    }

    /// Each counted invariant and its count, in invariant order.
    pub fn iter(&self) -> impl Iterator<Item = (Invariant, usize)> + '_ {
        Invariant::iter().zip(&self.0).filter_map(|(i, n)| n.map(|n| (i, n)))
    }
}

impl Serialize for Checked {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}
