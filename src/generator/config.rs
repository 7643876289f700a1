//! `GenConfig`: every limit of the generator with its default, and the switches
//! ([`Switches`], declared in `features`). Swarm testing draws, per case, each limit at or below
//! the configured one and each switch on or off, from the case's own bytes.
//! May not touch: emission, the runtime (it only sets limits and switches).

use super::features::Switches;
use crate::ir::OpKind;
use arbitrary::Unstructured;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use strum::IntoEnumIterator;
use thiserror::Error;

/// The largest accepted `max_total_nodes` (a configuration may lift the budget up to it).
pub const MAX_TOTAL_NODES: usize = 65536;

/// Largest accepted value of each limit, by member name (`GenConfig::check`). Generation is
/// bounded by the case's input bytes except for the method count, and nesting depth is
/// recursion depth, so these are hard limits.
pub const LIMITS: [(&str, usize); 9] = [
    ("min_methods", 64),
    ("max_methods", 64),
    ("max_depth", 16),
    ("max_nodes", 1024),
    ("max_total_nodes", MAX_TOTAL_NODES),
    ("max_modules", 64),
    ("max_calls_per_module", 64),
    ("call_percent", 100),
    ("control_percent", 100),
];

/// A configuration the generator refuses, naming the member.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A limit above its largest accepted value.
    #[error("`{member}` is {value}; at most {max} is accepted")]
    TooLarge {
        /// The member.
        member: &'static str,
        /// Its value.
        value: u64,
        /// The largest accepted.
        max: u64,
    },
    /// `min_methods` above `max_methods`.
    #[error("`min_methods` ({min}) is above `max_methods` ({max})")]
    MinAboveMax {
        /// `min_methods`.
        min: usize,
        /// `max_methods`.
        max: usize,
    },
    /// A name in `only_ops` or `only_backends` that names nothing.
    #[error("`{member}` names `{name}`, which is not one of {known}")]
    Unknown {
        /// The member.
        member: &'static str,
        /// The name.
        name: String,
        /// The names known.
        known: String,
    },
}

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
    /// Most nodes in the whole program (every method, nested body and module graph); past it
    /// each further graph takes one step (at most two nodes) and no control flow.
    pub max_total_nodes: usize,
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
            max_total_nodes: 48,
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
    /// Refuses a configuration the generator cannot honour: a member above its [`LIMITS`]
    /// entry, more methods at least than at most, or an operator or backend
    /// name that names nothing (it would be silently ignored).
    pub fn check(&self) -> Result<(), ConfigError> {
        let values = [
            self.min_methods,
            self.max_methods,
            self.max_depth,
            self.max_nodes,
            self.max_total_nodes,
            self.max_modules,
            self.max_calls_per_module,
            self.call_percent as usize,
            self.control_percent as usize,
        ];
        for ((member, max), value) in LIMITS.iter().zip(values) {
            if value > *max {
                return Err(ConfigError::TooLarge { member, value: value as u64, max: *max as u64 });
            }
        }
        if self.min_methods > self.max_methods {
            return Err(ConfigError::MinAboveMax { min: self.min_methods, max: self.max_methods });
        }
        let unknown = |member: &'static str, names: &Option<BTreeSet<String>>, known: Vec<String>| {
            let bad = names.iter().flatten().find(|n| !known.contains(n));
            bad.map_or(Ok(()), |name| Err(ConfigError::Unknown { member, name: name.clone(), known: known.join(", ") }))
        };
        unknown("only_ops", &self.only_ops, OpKind::iter().map(|k| k.name().to_string()).collect())?;
        let backends = crate::backends::default_backends().iter().map(|b| b.id().to_string()).collect();
        unknown("only_backends", &self.only_backends, backends)
    }

    /// One swarm draw below `self`: each limit uniformly in `[least, configured]`, the
    /// probabilities redrawn within the configured ones, each switch kept on with chance 1/2.
    /// `max_total_nodes` is kept: it bounds a case's cost (and memory), not its shape.
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
        features.set(super::features::Switch::Calls, self.features.on(super::features::Switch::Calls));
        GenConfig {
            min_methods,
            max_methods,
            max_depth,
            max_nodes,
            max_total_nodes: self.max_total_nodes,
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
