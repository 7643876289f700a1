//! `GenConfig`: every limit of the generator with its default, and the switches
//! ([`Switches`], declared in `features`). Swarm testing draws, per case, each limit at or below
//! the configured one and each switch on or off, from the case's own bytes.

use super::features::Switches;
use crate::ir::OpKind;
use arbitrary::Unstructured;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Generator limits, probabilities and switches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GenConfig {
    /// Fewest methods.
    pub min_methods: usize,
    /// Most methods.
    pub max_methods: usize,
    /// Deepest control-flow nesting.
    pub max_depth: usize,
    /// Most nodes per graph body.
    pub max_nodes: usize,
    /// Most lowered modules.
    pub max_modules: usize,
    /// Most calls of one module per method.
    pub max_calls_per_module: usize,
    /// Chance (percent) that a node is a call.
    pub call_percent: u32,
    /// Chance (percent) that a node is control flow.
    pub control_percent: u32,
    /// Feature switches.
    pub features: Switches,
    /// Only these operators (`OpKind` names, e.g. `add`, `linear`); absent = all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub only_ops: Option<BTreeSet<String>>,
    /// Only modules of these backends (registry ids); absent = all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub only_backends: Option<BTreeSet<String>>,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            min_methods: 1,
            max_methods: 4,
            max_depth: 2,
            max_nodes: 8,
            max_modules: 4,
            max_calls_per_module: 4,
            call_percent: 40,
            control_percent: 20,
            features: Switches::default(),
            only_ops: None,
            only_backends: None,
        }
    }
}

impl GenConfig {
    /// One swarm draw below `self`: each limit uniformly in `[least, configured]`, the
    /// probabilities redrawn within the configured ones, each switch kept on with chance 1/2.
    /// Calls stay on whenever the configuration allows them: they are what most invariants are
    /// about.
    pub fn swarm(&self, u: &mut Unstructured<'_>) -> GenConfig {
        let mut draw = |least: usize, most: usize| u.int_in_range(least.min(most)..=most).unwrap_or(most);
        let min_methods = self.min_methods.max(1);
        let max_methods = draw(min_methods, self.max_methods.max(min_methods));
        let max_depth = draw(0, self.max_depth);
        let max_nodes = draw(1, self.max_nodes.max(1));
        let max_modules = draw(1, self.max_modules.max(1));
        let max_calls_per_module = draw(1, self.max_calls_per_module.max(1));
        let call_percent = u.int_in_range(self.call_percent.min(10)..=self.call_percent).unwrap_or(self.call_percent);
        let control_percent = u.int_in_range(0..=self.control_percent).unwrap_or(self.control_percent);
        let mut features = self.features.and(&u.arbitrary::<Switches>().unwrap_or_default());
        features.set(super::Switch::Calls, self.features.on(super::Switch::Calls));
        GenConfig {
            min_methods,
            max_methods,
            max_depth,
            max_nodes,
            max_modules,
            max_calls_per_module,
            call_percent,
            control_percent,
            features,
            only_ops: self.only_ops.clone(),
            only_backends: self.only_backends.clone(),
        }
    }

    /// Whether operator `k` may be generated.
    pub fn allows_op(&self, k: OpKind) -> bool {
        self.only_ops.as_ref().is_none_or(|s| s.contains(k.name()))
    }

    /// Whether modules of backend `id` may be generated.
    pub fn allows_backend(&self, id: &str) -> bool {
        self.only_backends.as_ref().is_none_or(|s| s.contains(id))
    }
}
