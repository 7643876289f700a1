//! `mutants`: runs the campaign against each seeded fault and reports whether the invariants
//! caught it, after how many cases, and how small the shrunk counterexample is.

use super::campaign::{run, CampaignOptions};
use crate::fault::Fault;
use serde::Serialize;

/// Outcome for one fault.
#[derive(Clone, Debug, Serialize)]
pub struct MutantResult {
    /// Fault name.
    pub name: String,
    /// Whether a case failed.
    pub caught: bool,
    /// Cases run up to and including the first failing one.
    pub cases_to_catch: Option<u64>,
    /// Nodes of the shrunk counterexample.
    pub shrunk_nodes: Option<usize>,
    /// The invariant that caught it.
    pub invariant: Option<String>,
}

/// Runs every fault for at most `max_cases` cases each.
pub fn run_mutants(base: &CampaignOptions, max_cases: u64, faults: &[Fault]) -> Vec<MutantResult> {
    faults
        .iter()
        .map(|f| {
            let opts = CampaignOptions {
                cases: max_cases,
                fault: Some(*f),
                stop_on_failure: true,
                progress: false,
                only_case: None,
                ..base.clone()
            };
            let r = run(&opts);
            MutantResult {
                name: f.name(),
                caught: r.failures > 0,
                cases_to_catch: r.first_failing_case.map(|c| c + 1),
                shrunk_nodes: r.failure.as_ref().map(|x| x.shrunk_nodes),
                invariant: r.failure.as_ref().and_then(|x| x.failures.first().map(|f| f.invariant.clone())),
            }
        })
        .collect()
}
