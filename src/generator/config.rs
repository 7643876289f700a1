//! `GenConfig`: every limit of the generator, declared once with its default, its largest
//! accepted value and its swarm rule (`limits!`), and the switches ([`Switches`], declared in
//! `features`). Swarm testing draws, per case, each limit at or below the configured one and each
//! switch on or off, from the case's own bytes.
//! May not touch: emission, the runtime (it only sets limits and switches).

use super::features::Switches;
use crate::ir::OpKind;
use arbitrary::Unstructured;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use strum::{EnumIter, IntoEnumIterator};
use thiserror::Error;

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

/// How a swarm draw treats a limit: each case's configuration is drawn below the configured
/// one from the case's own bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swarm {
    /// Kept as configured (it bounds a case's cost, not its shape).
    Keep,
    /// Kept, but at least this.
    AtLeast(usize),
    /// Drawn uniformly in `[min(least, v), v]`, where `v` is the configured value raised to
    /// `floor` (the bounds may name another limit's drawn value).
    Draw {
        /// The smallest value drawn.
        least: Least,
        /// The configured value is raised to this first.
        floor: Least,
    },
}

/// A bound of a swarm draw: a number, or what another limit was drawn as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Least {
    /// This number.
    Value(usize),
    /// The drawn value of that limit (declared before this one).
    Limit(Limit),
}

/// Declares the generator's limits once each: the `GenConfig` member with its doc, type and
/// default, the largest value accepted, and its swarm rule.
macro_rules! limits {
    ($($(#[doc = $doc:literal])* $field:ident ($variant:ident): $ty:ty = $default:expr, max $max:expr, swarm $swarm:expr;)*) => {
        /// Generator limits, probabilities and switches.
        #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct GenConfig {
            $($(#[doc = $doc])* pub $field: $ty,)*
            /// Feature switches.
            pub features: Switches,
            /// Only these operators (`OpKind` names, e.g. `add`, `linear`); absent = all.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub only_ops: Option<BTreeSet<String>>,
            /// Only modules of these backends (registry ids); absent = all.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub only_backends: Option<BTreeSet<String>>,
            /// Keep to what torch.export exports: no control-flow body or module returns one of
            /// its inputs, or a view of one (each such output becomes a value of its own).
            #[serde(skip_serializing_if = "std::ops::Not::not")]
            pub exportable: bool,
        }

        impl Default for GenConfig {
            fn default() -> Self {
                GenConfig {
                    $($field: $default,)*
                    features: Switches::default(),
                    only_ops: None,
                    only_backends: None,
                    exportable: false,
                }
            }
        }

        /// One limit of [`GenConfig`], in declaration order (the order a swarm draw takes them in).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, EnumIter)]
        pub enum Limit {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Limit {
            /// The `GenConfig` member's name.
            pub fn name(self) -> &'static str {
                match self { $(Limit::$variant => stringify!($field),)* }
            }

            /// The largest value a configuration may give it.
            pub fn max(self) -> usize {
                match self { $(Limit::$variant => $max,)* }
            }

            /// How a swarm draw treats it.
            pub fn swarm(self) -> Swarm {
                match self { $(Limit::$variant => $swarm,)* }
            }
        }

        impl GenConfig {
            /// The value of limit `l`.
            pub fn limit(&self, l: Limit) -> usize {
                match l { $(Limit::$variant => self.$field as usize,)* }
            }

            /// Sets limit `l` (a value past its type saturates; [`Limit::max`] is far below it).
            fn set_limit(&mut self, l: Limit, v: usize) {
                match l { $(Limit::$variant => self.$field = <$ty>::try_from(v).unwrap_or(<$ty>::MAX),)* }
            }
        }
    };
}

limits! {
    /// Fewest methods.
    min_methods (MinMethods): usize = 1, max 64, swarm Swarm::AtLeast(1);
    /// Most methods.
    max_methods (MaxMethods): usize = 4, max 64,
        swarm Swarm::Draw { least: Least::Limit(Limit::MinMethods), floor: Least::Limit(Limit::MinMethods) };
    /// Deepest control-flow nesting.
    max_depth (MaxDepth): usize = 2, max 16, swarm Swarm::Draw { least: Least::Value(0), floor: Least::Value(0) };
    /// Most nodes per graph body.
    max_nodes (MaxNodes): usize = 8, max 1024, swarm Swarm::Draw { least: Least::Value(1), floor: Least::Value(1) };
    /// Most nodes in the whole program (every method, nested body and module graph); past it
    /// each further graph takes one step (at most two nodes) and no control flow.
    max_total_nodes (MaxTotalNodes): usize = 48, max MAX_TOTAL_NODES, swarm Swarm::Keep;
    /// Most lowered modules.
    max_modules (MaxModules): usize = 4, max 64, swarm Swarm::Draw { least: Least::Value(1), floor: Least::Value(1) };
    /// Most calls of one module per method.
    max_calls_per_module (MaxCallsPerModule): usize = 4, max 64,
        swarm Swarm::Draw { least: Least::Value(1), floor: Least::Value(1) };
    /// Chance (percent) that a node is a call.
    call_percent (CallPercent): u32 = 40, max 100, swarm Swarm::Draw { least: Least::Value(10), floor: Least::Value(0) };
    /// Chance (percent) that a node is control flow.
    control_percent (ControlPercent): u32 = 20, max 100, swarm Swarm::Draw { least: Least::Value(0), floor: Least::Value(0) };
}

/// The largest accepted `max_total_nodes` (a configuration may lift the budget up to it).
pub const MAX_TOTAL_NODES: usize = 65536;

impl GenConfig {
    /// Refuses a configuration the generator cannot honour: a limit above its [`Limit::max`],
    /// more methods at least than at most, or an operator or backend name that names nothing
    /// (it would be silently ignored).
    pub fn check(&self) -> Result<(), ConfigError> {
        for l in Limit::iter() {
            let value = self.limit(l);
            if value > l.max() {
                return Err(ConfigError::TooLarge { member: l.name(), value: value as u64, max: l.max() as u64 });
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

    /// One swarm draw below `self`: each limit by its [`Limit::swarm`] rule, in declaration
    /// order, then each switch kept on with chance 1/2. Calls stay on whenever the
    /// configuration allows them: they are what most invariants are about.
    pub fn swarm(&self, u: &mut Unstructured<'_>) -> GenConfig {
        let mut drawn = self.clone();
        for l in Limit::iter() {
            let value = |least: Least, drawn: &GenConfig| match least {
                Least::Value(v) => v,
                Least::Limit(other) => drawn.limit(other),
            };
            let v = match l.swarm() {
                Swarm::Keep => self.limit(l),
                Swarm::AtLeast(least) => self.limit(l).max(least),
                Swarm::Draw { least, floor } => {
                    let most = self.limit(l).max(value(floor, &drawn));
                    let least = value(least, &drawn).min(most);
                    u.int_in_range(least..=most).unwrap_or(most)
                }
            };
            drawn.set_limit(l, v);
        }
        let mut features = self.features.draw(u);
        features.set(super::features::Switch::Calls, self.features.on(super::features::Switch::Calls));
        GenConfig { features, ..drawn }
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
