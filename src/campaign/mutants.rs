//! `mutants`: runs the campaign against each seeded fault and reports whether the invariants
//! caught it, which one, after how many cases, and how small the shrunk counterexample is.
//! May not touch: the faulted code (each fault is a parameter the stages take), the checks.

use super::options::CampaignOptions;
use super::run::run;
use crate::exit::Exit;
use crate::fault::Fault;
use crate::oracle::Invariant;
use serde::Serialize;
use std::fmt;

/// The invariant that must catch each seeded fault first (declared here, once, for every fault).
pub fn expected_invariant(f: Fault) -> Invariant {
    use Fault::*;
    match f {
        // Emitter bugs in delegate sharing: the delegate counts and per-call-site identity.
        ShareIdenticalBlobs | ShareScratch | DedupWholeDelegate | WrongDelegateInLoop => Invariant::I2,
        // Checks the runtime skips: a corrupted program gets past init.
        DelegateIndexAtExecuteOnly | SkipScratchCallSiteCheck | LaterOpLookupHides => Invariant::Negative,
        // Lifecycle bugs, seen in the backends' own counts; a wrong jump changes how often a
        // call site executes.
        InitPerCallSite | DestroyPerCallSite | LeakSharedHandle | DestroyDescending | JumpOffByOne => Invariant::I4,
        LeakOnInitFailure | InitErrorCodeLost => Invariant::I5,
        // Wrong arithmetic: a handle shared across call sites that keeps per-call state, or a
        // kernel with its operands swapped, computes wrong outputs.
        ArgkeepOptedIn | SubSwapsOperands => Invariant::I6,
        // A DelegateCall whose arguments do not match its module: by count, or (same types,
        // swapped) by the values each execute received.
        DropLastDelegateOutput | SwapDelegateInputs => Invariant::I3,
    }
}

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
    /// The invariant that must catch it ([`expected_invariant`]).
    pub expected: String,
}

/// The outcome of every fault (`ptecheck mutants`).
#[derive(Clone, Debug, Serialize)]
#[serde(transparent)]
pub struct MutantsReport(pub Vec<MutantResult>);

impl MutantsReport {
    /// Ok when every fault was caught, by the invariant that must catch it.
    pub fn exit(&self) -> Exit {
        Exit::failed_if(!self.0.iter().all(|r| r.caught && r.invariant.as_deref() == Some(r.expected.as_str())))
    }
}

/// A table: one line per fault.
impl fmt::Display for MutantsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<32} {:<7} {:>14} {:>13}  invariant (expected)",
            "fault", "caught", "cases_to_catch", "shrunk_nodes"
        )?;
        for r in &self.0 {
            writeln!(
                f,
                "{:<32} {:<7} {:>14} {:>13}  {} ({})",
                r.name,
                r.caught,
                r.cases_to_catch.map_or("-".into(), |c| c.to_string()),
                r.shrunk_nodes.map_or("-".into(), |c| c.to_string()),
                r.invariant.clone().unwrap_or_default(),
                r.expected
            )?;
        }
        Ok(())
    }
}

/// Runs every fault for at most `max_cases` cases each.
pub fn run_mutants(base: &CampaignOptions, max_cases: u64, faults: &[Fault]) -> MutantsReport {
    let results = faults
        .iter()
        .map(|f| {
            let opts = CampaignOptions {
                cases: max_cases,
                fault: Some(*f),
                stop_on_failure: true,
                only_case: None,
                ..base.clone()
            };
            let r = run(&opts);
            MutantResult {
                name: f.name().to_string(),
                caught: r.failures > 0,
                cases_to_catch: r.first_failing_case.map(|c| c + 1),
                shrunk_nodes: r.failure.as_ref().map(|x| x.shrunk_nodes),
                invariant: r.failure.as_ref().map(|x| x.invariant.clone()),
                expected: expected_invariant(*f).name().to_string(),
            }
        })
        .collect();
    MutantsReport(results)
}
