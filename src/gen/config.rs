//! `GenConfig`: every limit and feature switch of the generator, declared once, with defaults.
//! It is itself `Arbitrary` (swarm testing: each case switches a random subset of features on
//! and draws its limits below the defaults).

use arbitrary::{Arbitrary, Unstructured};
use serde::{Deserialize, Serialize};

/// Feature switches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Arbitrary)]
#[serde(default, deny_unknown_fields)]
pub struct Features {
    /// Calls of lowered modules.
    pub calls: bool,
    /// Favour calling the last-called module again.
    pub repeated_calls: bool,
    /// `cond`.
    pub cond: bool,
    /// `map` over a stacked input.
    pub map: bool,
    /// `scan` over a stacked input.
    pub scan: bool,
    /// Bounded `while_loop` (P12; off by default: ExecuTorch cannot emit it, E27).
    pub while_loop: bool,
    /// `scratch` backend modules.
    pub scratch: bool,
    /// `argkeep` backend modules (not opted in).
    pub argkeep: bool,
    /// Clones of modules (identical bytes; same or different specs).
    pub identical_partitions: bool,
    /// Several methods.
    pub multi_method: bool,
    /// Constant tensors (weights).
    pub constants: bool,
    /// Shape- and type-changing ops and scalar ops.
    pub side_ops: bool,
}

impl Default for Features {
    fn default() -> Self {
        Features {
            calls: true,
            repeated_calls: true,
            cond: true,
            map: true,
            scan: true,
            while_loop: false,
            scratch: true,
            argkeep: true,
            identical_partitions: true,
            multi_method: true,
            constants: true,
            side_ops: true,
        }
    }
}

/// Generator limits and probabilities.
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
    pub features: Features,
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
            features: Features::default(),
        }
    }
}

impl<'a> Arbitrary<'a> for GenConfig {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let d = GenConfig::default();
        Ok(GenConfig {
            min_methods: 1,
            max_methods: u.int_in_range(1..=d.max_methods)?,
            max_depth: u.int_in_range(0..=d.max_depth)?,
            max_nodes: u.int_in_range(1..=d.max_nodes)?,
            max_modules: u.int_in_range(1..=d.max_modules)?,
            max_calls_per_module: u.int_in_range(1..=d.max_calls_per_module)?,
            call_percent: u.int_in_range(10..=70)?,
            control_percent: u.int_in_range(0..=40)?,
            features: Features::arbitrary(u)?,
        })
    }
}
