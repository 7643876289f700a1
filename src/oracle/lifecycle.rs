//! Running one method under the oracle's eye, and the checks on what the backends saw: I4
//! (counts and order from the backends' own ledgers, against the IR and the eager calls), I5
//! (an injected init failure), the trace's agreement with the ledgers, I3/I6 per delegate call
//! (arguments and results of every execute against the eager interpreter's call), and the
//! shared-model table (multi-function bundles).
//! May not touch: the backends' ledgers or the runtime's trace (it only reads them), the emitter.

use super::invariant::Invariant;
use super::report::{CheckOptions, Report, Timings};
use super::structure::{call_sequence, delegate_calls, expected_delegates, shares};
use super::values::{bounded_difference, encode_all};
use crate::backends::default_backends_with;
use crate::backends::failing::FailingBackend;
use crate::backends::ledger::{Counted, Ledger, LedgerEvent};
use crate::backends::multifn::{self, MultifnBackend};
use crate::format::LoadedProgram;
use crate::ir::IrProgram;
use crate::ir::eval::CallRecord;
use crate::runtime::{Backend, ErrorCode, ExecuteSite, HostValue, Runtime, RuntimeError, Session, Site, TraceEvent};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

/// Code of the injected init failure (I5).
pub const INJECTED: ErrorCode = ErrorCode::DelegateMemoryAllocationFailed;

/// A runtime whose backends record into a ledger, with its own `multifn` model table.
pub struct Rig {
    /// The runtime.
    pub rt: Runtime,
    /// What the backends saw.
    pub ledger: Ledger,
    /// The multi-function backend (its table is read by the model checks).
    pub multifn: Arc<MultifnBackend>,
}

impl Rig {
    /// A rig; `fail_at`: the delegate index whose init fails (I5), `share_models`: run
    /// multi-function delegates on one shared model.
    pub fn new(opts: &CheckOptions, share_models: bool, fail_at: Option<usize>) -> Rig {
        let ledger = Ledger::default();
        let multifn = Arc::new(MultifnBackend::default());
        let inner: Vec<Arc<dyn Backend>> = default_backends_with(multifn.clone())
            .into_iter()
            .map(|b| match fail_at {
                Some(k) => Arc::new(FailingBackend { inner: b, fail_at: k, code: INJECTED }) as Arc<dyn Backend>,
                None => b,
            })
            .collect();
        let mut rt = Runtime::with_backends(Counted::all(inner, &ledger));
        rt.fault = opts.fault;
        rt.instruction_budget = opts.instruction_budget;
        if share_models {
            // A registry of our own backends and one well-formed option cannot fail to set.
            let _ = rt.options.parse_and_set(&format!("{}.{}=true", multifn::ID, multifn::SHARE_OPTION));
        }
        Rig { rt, ledger, multifn }
    }
}

/// What one method run produced.
pub struct MethodRun {
    /// Outputs, or the error of load or execution.
    pub result: Result<Vec<HostValue>, RuntimeError>,
    /// Ledger events of the run (init through teardown).
    pub events: Vec<LedgerEvent>,
    /// Trace events of the run.
    pub trace: Vec<TraceEvent>,
    /// Executes the trace counted in the run, per method, delegate, call site and handle.
    pub trace_executes: BTreeMap<ExecuteSite, usize>,
    /// Ledger inits when `load_method` returned.
    pub inits_at_load: usize,
    /// Live models in the table while the method was loaded, per key.
    pub live_models: usize,
    /// Loads per key while the method was loaded.
    pub loads: Vec<usize>,
}

/// Loads, runs and drops method `name` on `inputs`.
pub fn run_method(
    rig: &Rig,
    loaded: &LoadedProgram<'_>,
    name: &str,
    inputs: &[HostValue],
    t: &mut Timings,
) -> MethodRun {
    rig.ledger.clear();
    let session = Session::new(loaded, &rig.rt);
    let start = Instant::now();
    let loaded_method = session.load(name);
    t.init += start.elapsed();
    let inits_at_load = rig.ledger.inits();
    let start = Instant::now();
    let (result, live_models, loads) = match loaded_method {
        Err(e) => (Err(e), 0, vec![]),
        Ok(mut m) => {
            let result = Session::execute(&mut m, Some(inputs));
            let stats = rig.multifn.table.stats();
            let live = stats.iter().filter(|(_, s)| s.live).count();
            let loads = stats.iter().map(|(_, s)| s.loads).collect();
            drop(m);
            (result, live, loads)
        }
    };
    t.execute += start.elapsed();
    MethodRun {
        result,
        events: rig.ledger.take(),
        trace: session.trace().take_events(),
        trace_executes: session.trace().take_executes(),
        inits_at_load,
        live_models,
        loads,
    }
}

/// Ledger handle -> delegate index, from the run's init events.
fn delegates_of(events: &[LedgerEvent]) -> BTreeMap<u64, usize> {
    events
        .iter()
        .filter_map(|e| match e {
            LedgerEvent::Init { handle, delegate, .. } => Some((*handle, *delegate)),
            _ => None,
        })
        .collect()
}

/// Destroys per handle, in order of the events.
fn destroy_order(events: &[LedgerEvent]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            LedgerEvent::Destroy { handle } => Some(*handle),
            _ => None,
        })
        .collect()
}

/// Checks that every handle of the run was destroyed exactly once, in ascending delegate order.
pub(super) fn destroyed_once_ascending(events: &[LedgerEvent], what: &str, inv: Invariant, r: &mut Report) {
    let of = delegates_of(events);
    let order = destroy_order(events);
    let mut per: BTreeMap<u64, usize> = of.keys().map(|h| (*h, 0)).collect();
    for h in &order {
        *per.entry(*h).or_default() += 1;
    }
    let wrong: Vec<String> =
        per.iter().filter(|(_, n)| **n != 1).map(|(h, n)| format!("handle {h} destroyed {n} times")).collect();
    r.check(inv, wrong.is_empty(), || format!("{what}: {}", wrong.join(", ")));
    let ds: Vec<usize> = order.iter().filter_map(|h| of.get(h).copied()).collect();
    r.check(inv, ds.windows(2).all(|w| w[0] < w[1]), || format!("{what}: destroy order by delegate {ds:?}"));
}

/// The delegate of each init the backends saw, in order.
pub(super) fn inits(events: &[LedgerEvent]) -> Vec<usize> {
    events
        .iter()
        .filter_map(|ev| match ev {
            LedgerEvent::Init { delegate, .. } => Some(*delegate),
            _ => None,
        })
        .collect()
}

/// Executes the backends saw per DelegateCall of method `name` (its index in chain order).
pub(super) fn executes_per_call(
    loaded: &LoadedProgram<'_>,
    name: &str,
    events: &[LedgerEvent],
) -> BTreeMap<usize, usize> {
    let index = call_index(loaded, name);
    let mut out = BTreeMap::new();
    for ev in events {
        if let LedgerEvent::Execute { site, .. } = ev {
            *out.entry(index.get(&(site.chain, site.instruction)).copied().unwrap_or(usize::MAX)).or_default() += 1;
        }
    }
    out
}

/// Site (chain, instruction) of each DelegateCall -> its index in emission order.
fn call_index(loaded: &LoadedProgram<'_>, name: &str) -> BTreeMap<(usize, usize), usize> {
    let mut out = BTreeMap::new();
    if let Some(plan) = loaded.program.plan(name) {
        for (c, chain) in plan.chain_list().iter().enumerate() {
            for (i, ins) in chain.instruction_list().iter().enumerate() {
                if matches!(ins, crate::program::Instruction::DelegateCall(_)) {
                    let k = out.len();
                    out.insert((c, i), k);
                }
            }
        }
    }
    out
}

/// One execute the backends saw: call site index, ledger handle, arguments before and after.
type Exec<'r> = (usize, u64, &'r Vec<HostValue>, Option<&'r Vec<HostValue>>);

/// What a successful method run is compared with.
pub struct Expect<'e> {
    /// The program.
    pub ir: &'e IrProgram,
    /// Method.
    pub name: &'e str,
    /// Whether the emission honoured sharing.
    pub share: bool,
    /// The eager interpreter's calls of the method.
    pub calls: &'e [CallRecord],
    /// How many of `calls`, from the first, every conforming run makes as they are (the rest
    /// follow a decision that may go the other way: [`crate::ir::eval::Run::decided_calls`]).
    pub decided_calls: usize,
}

/// I4, trace agreement, and the per-call I3/I6 checks of one successful run.
pub fn check_run(e: &Expect<'_>, loaded: &LoadedProgram<'_>, run: &MethodRun, r: &mut Report) {
    let Expect { ir, name, share, calls, decided_calls } = *e;
    let what = format!("{name} share={share}");
    let Some(m) = ir.methods.iter().find(|m| m.name == name) else { return };
    let sites = call_sequence(&m.graph);
    // I4: inits, counted by the backends, as SH6 implies from the IR; in delegate order.
    let inits: Vec<usize> = run
        .events
        .iter()
        .filter_map(|ev| match ev {
            LedgerEvent::Init { delegate, .. } => Some(*delegate),
            _ => None,
        })
        .collect();
    let want = expected_delegates(ir, &sites, share);
    r.check(Invariant::I4, run.inits_at_load == want && inits.len() == want, || {
        format!("{what}: backends saw {} inits ({} at load), the IR implies {want}", inits.len(), run.inits_at_load)
    });
    r.check(Invariant::I4, inits.iter().enumerate().all(|(i, d)| i == *d), || {
        format!("{what}: init order by delegate {inits:?}")
    });
    destroyed_once_ascending(&run.events, &what, Invariant::I4, r);
    // I4: executes per call site = the eager calls; call sites share a handle exactly when
    // their module shares (SH3-SH5).
    let index = call_index(loaded, name);
    let execs: Vec<Exec<'_>> = run
        .events
        .iter()
        .filter_map(|ev| match ev {
            LedgerEvent::Execute { handle, site, before, after } => {
                let k = index.get(&(site.chain, site.instruction)).copied().unwrap_or(usize::MAX);
                Some((k, *handle, before, after.as_ref()))
            }
            _ => None,
        })
        .collect();
    // After a decision that may go the other way, a conforming run may make other calls: only
    // the decided ones are compared (in order, then).
    let decided = calls.get(..decided_calls).unwrap_or(calls);
    if decided.len() == calls.len() {
        let mut got: BTreeMap<usize, usize> = BTreeMap::new();
        for (k, ..) in &execs {
            *got.entry(*k).or_default() += 1;
        }
        let mut want_execs: BTreeMap<usize, usize> = BTreeMap::new();
        for c in calls {
            *want_execs.entry(c.site).or_default() += 1;
        }
        r.check(Invariant::I4, got == want_execs, || {
            format!("{what}: executes per call site {got:?}, the eager run made {want_execs:?}")
        });
    } else {
        let got: Vec<usize> = execs.iter().take(decided.len()).map(|(k, ..)| *k).collect();
        let want: Vec<usize> = decided.iter().map(|c| c.site).collect();
        r.check(Invariant::I4, got == want, || {
            format!("{what}: the first {} executes are at call sites {got:?}, the eager run's (before a decision that may go either way) at {want:?}", want.len())
        });
    }
    let mut handle_of: BTreeMap<usize, u64> = BTreeMap::new();
    for (k, h, ..) in &execs {
        if let Some(prev) = handle_of.insert(*k, *h) {
            r.check(Invariant::I4, prev == *h, || format!("{what}: call site {k} executed on handles {prev} and {h}"));
        }
    }
    let ks: Vec<(&usize, &u64)> = handle_of.iter().collect();
    for (i, (k1, h1)) in ks.iter().enumerate() {
        for (k2, h2) in &ks[i + 1..] {
            let (m1, m2) = (sites.get(**k1), sites.get(**k2));
            let want_same =
                m1.is_some() && m1 == m2 && m1.and_then(|m| ir.modules.get(*m)).is_some_and(|lm| shares(lm, share));
            r.check(Invariant::I4, (h1 == h2) == want_same, || {
                format!("{what}: call sites {k1} and {k2} (modules {m1:?}, {m2:?}) on handles {h1} and {h2}")
            });
        }
    }
    // Trace: the runtime's own account agrees with the backends'.
    trace_agrees(&what, run, r);
    // I3 / I6 per call: what each execute received and produced, against the eager call.
    let plan_calls = loaded.program.plan(name).map(delegate_calls).unwrap_or_default();
    for (n, ((k, _, before, after), rec)) in execs.iter().zip(decided).enumerate() {
        r.check(Invariant::I4, *k == rec.site, || {
            format!("{what}: execute {n} is at call site {k}, the eager call {n} at site {}", rec.site)
        });
        let (n_in, n_out) = (rec.inputs.len(), rec.outputs.len());
        let ins = before.get(..n_in).unwrap_or(before);
        if let Some(d) = bounded_difference(&encode_all(&rec.inputs), &rec.input_bounds, ins) {
            r.fail(Invariant::I3, format!("{what}: execute {n} (call site {k}) received other inputs: {d}"));
        }
        let args = plan_calls.get(*k).map_or(0, |c| c.1.len());
        match after {
            Some(after) if after.len() >= n_in + n_out => {
                if let Some(d) = bounded_difference(&encode_all(&rec.outputs), &rec.output_bounds, &after[n_in..n_in + n_out]) {
                    r.fail(Invariant::I6, format!("{what}: execute {n} (call site {k}) produced other outputs: {d}"));
                }
            }
            Some(after) => r.fail(
                Invariant::I3,
                format!("{what}: execute {n} (call site {k}) got {} args ({args} in the plan) for {n_in} inputs + {n_out} outputs", after.len()),
            ),
            None => r.fail(Invariant::I6, format!("{what}: execute {n} (call site {k}) failed")),
        }
    }
}

/// The trace agrees with the ledger: as many inits, executes (per site) and destroys, and the
/// trace itself sees every handle destroyed once.
fn trace_agrees(what: &str, run: &MethodRun, r: &mut Report) {
    let count = |f: fn(&LedgerEvent) -> bool| run.events.iter().filter(|e| f(e)).count();
    let ledger = (
        count(|e| matches!(e, LedgerEvent::Init { .. })),
        count(|e| matches!(e, LedgerEvent::Execute { .. })),
        count(|e| matches!(e, LedgerEvent::Destroy { .. })),
    );
    let tcount = |f: fn(&TraceEvent) -> bool| run.trace.iter().filter(|e| f(e)).count();
    let trace = (
        tcount(|e| matches!(e, TraceEvent::Init { .. })),
        run.trace_executes.values().sum(),
        tcount(|e| matches!(e, TraceEvent::Destroy { .. })),
    );
    r.check(Invariant::Trace, ledger == trace, || {
        format!("{what}: backends saw (inits, executes, destroys) = {ledger:?}, the trace says {trace:?}")
    });
    // Executes per (chain, instruction), from (site, how many) pairs.
    let sites = |it: &mut dyn Iterator<Item = (Site, usize)>| {
        let mut m: BTreeMap<(usize, usize), usize> = BTreeMap::new();
        for (s, n) in it {
            *m.entry((s.chain, s.instruction)).or_default() += n;
        }
        m
    };
    let ls = sites(
        &mut run
            .events
            .iter()
            .filter_map(|e| if let LedgerEvent::Execute { site, .. } = e { Some((*site, 1)) } else { None }),
    );
    let ts = sites(&mut run.trace_executes.iter().map(|(at, n)| (at.site, *n)));
    r.check(Invariant::Trace, ls == ts, || format!("{what}: executes per site: backends {ls:?}, trace {ts:?}"));
}

/// I5: an init failure injected at delegate `k` of `n`.
pub fn check_injection(
    opts: &CheckOptions,
    loaded: &LoadedProgram<'_>,
    name: &str,
    n: usize,
    share_models: bool,
    r: &mut Report,
) {
    let k = (opts.inject_seed % n as u64) as usize;
    let rig = Rig::new(opts, share_models, Some(k));
    let run = run_method(&rig, loaded, name, &[], &mut Timings::default());
    let what = format!("{name}: init failure injected at delegate {k}");
    match &run.result {
        Err(RuntimeError::InitFailed { delegate, code, .. }) => {
            r.check(Invariant::I5, *delegate == k && *code == INJECTED, || {
                format!("{what}: failure reported at {delegate} ({code:?})")
            });
        }
        Err(e) => r.fail(Invariant::I5, format!("{what}: got {e}")),
        Ok(_) => r.fail(Invariant::I5, format!("{what}: not reported")),
    }
    let inits: Vec<usize> = delegates_of(&run.events).into_values().collect();
    r.check(Invariant::I5, inits == (0..k).collect::<Vec<_>>(), || {
        format!("{what}: backends saw inits of delegates {inits:?}")
    });
    destroyed_once_ascending(&run.events, &what, Invariant::I5, r);
    let execs = run.events.iter().filter(|e| matches!(e, LedgerEvent::Execute { .. })).count();
    r.check(Invariant::I5, execs == 0, || format!("{what}: {execs} executes"));
    trace_agrees(&what, &run, r);
}

/// The shared-model table around one method whose plan has `mf` multi-function delegates over
/// `bundles` distinct bundles: loads while loaded (one per bundle when shared, one per delegate
/// otherwise), nothing live after; a failed first load leaves no entry and a retry loads again.
/// `first` is a run of the method on `inputs` by a fresh rig (with `share_models`), and that rig.
pub fn check_models(
    opts: &CheckOptions,
    loaded: &LoadedProgram<'_>,
    name: &str,
    inputs: &[HostValue],
    first: (&Rig, &MethodRun),
    share_models: bool,
    r: &mut Report,
) {
    let Some(plan) = loaded.program.plan(name) else { return };
    let mf: Vec<usize> = plan
        .delegate_list()
        .iter()
        .enumerate()
        .filter(|(_, d)| d.id.as_deref() == Some(multifn::ID))
        .map(|(i, _)| i)
        .collect();
    if mf.is_empty() {
        return;
    }
    let blobs: BTreeSet<&[u8]> = mf
        .iter()
        .filter_map(|d| {
            let pi = loaded.program.plans().iter().position(|p| p.name_str() == name)?;
            loaded.delegate_blobs.get(pi)?.get(*d).copied().flatten()
        })
        .collect();
    let bundles: BTreeSet<String> =
        blobs.iter().filter_map(|b| multifn::parse_manifest(b).ok().map(|m| m.export_hash)).collect();
    let what = format!("{name} share_models={share_models}");
    let (rig, run) = first;
    let want_loads = if share_models { bundles.len() } else { mf.len() };
    let loads: usize = run.loads.iter().sum();
    r.check(Invariant::Models, run.result.is_ok() && loads == want_loads && run.live_models == want_loads, || {
        format!(
            "{what}: {loads} loads, {} live while loaded; expected {want_loads} ({} delegates, {} bundles)",
            run.live_models,
            mf.len(),
            bundles.len()
        )
    });
    let after = rig.multifn.table.stats();
    let left = rig.multifn.table.entries();
    r.check(Invariant::Models, left == 0 && after.iter().all(|(_, s)| !s.live && s.unloads == s.loads), || {
        format!("{what}: after teardown {left} entries, {after:?}")
    });
    // A failed first load: the init fails at the first multi-function delegate, no entry is
    // left, and loading the method again loads the model afresh.
    let rig = Rig::new(opts, share_models, None);
    rig.multifn.fail_next_loads(1);
    let failed = run_method(&rig, loaded, name, inputs, &mut Timings::default());
    let first = mf[0];
    r.check(
        Invariant::Models,
        matches!(&failed.result, Err(RuntimeError::InitFailed { delegate, code: ErrorCode::OutOfResources, .. }) if *delegate == first),
        || format!("{what}: failed load at delegate {first} reported as {:?}", failed.result.as_ref().err()),
    );
    let stats = rig.multifn.table.stats();
    r.check(
        Invariant::Models,
        stats.iter().all(|(_, s)| !s.live) && stats.iter().map(|(_, s)| s.failed_loads).sum::<usize>() == 1,
        || format!("{what}: after a failed load {stats:?}"),
    );
    // No entry is left behind: one would make the next acquire of its key wait for a load
    // that never finishes.
    let left = rig.multifn.table.entries();
    if left != 0 {
        r.fail(Invariant::Models, format!("{what}: {left} table entries left after a failed load"));
        return;
    }
    destroyed_once_ascending(&failed.events, &what, Invariant::Models, r);
    let retry = run_method(&rig, loaded, name, inputs, &mut Timings::default());
    let loads: usize = retry.loads.iter().sum();
    r.check(Invariant::Models, retry.result.is_ok() && loads == want_loads, || {
        format!("{what}: retry after a failed load: {loads} loads, {:?}", retry.result.as_ref().err())
    });
}
