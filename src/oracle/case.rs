//! Every invariant (semantics.md E) on one generated case: `check_case(&generated, &opts)`, or
//! `check_ir(&ir, &opts)` with inputs drawn from a seed; and the steps a case is made of that
//! drivers share: its eager runs and its emissions.
//!
//! Every check is independent of the code it checks: structure (I1–I3) is computed from the IR
//! and the decoded program by the oracle itself; lifecycle counts (I4, I5) come from the
//! backends' own ledgers, compared with the IR and with the calls the eager interpreter made;
//! outputs (I6) compare the runtime (whose delegates run their plans on the runtime's kernels)
//! with the eager interpreter, through the oracle's own value encoding (`values`).
//! May not touch: the stages it reads (it changes none of them).

use super::invariant::Invariant;
use super::lifecycle::{self, Expect, Rig};
use super::negative;
use super::report::{CheckOptions, Report};
use super::structure;
use super::values;
use crate::emit::{EmitError, EmitOptions, Emitted, emit, emit_typed};
use crate::fault::Fault;
use crate::format::{self, LoadedProgram, WriteOptions};
use crate::generator::{Generated, RunChoices};
use crate::ir::bound::Bound;
use crate::ir::eval::{CallRecord, Run, run_method, sample_inputs};
use crate::ir::infer::IrError;
use crate::ir::{IrProgram, ValueType, saved};
use crate::runtime::HostValue;
use std::collections::BTreeMap;
use std::time::Instant;

/// I7's `write∘load∘write = write` for one emitted program: `bytes` are its writing, `loaded`
/// what the loader made of them. When the loaded program and segments equal the emitted ones,
/// writing them again is writing the emitted program (`write` is a function of those), so the
/// model comparison decides; otherwise the loaded program is written again and compared.
pub fn written_again_is_the_same(emitted: &Emitted, bytes: &[u8], loaded: &LoadedProgram<'_>) -> bool {
    let same = loaded.program == emitted.program
        && loaded.segments.len() == emitted.segment_data.len()
        && loaded.segments.iter().zip(&emitted.segment_data).all(|(a, b)| *a == b.as_slice());
    same || format::write_loaded(loaded, &WriteOptions::default()).is_ok_and(|b| b == bytes)
}

/// Total nodes of a program (methods and modules, sub-graphs included).
pub fn node_count(p: &IrProgram) -> usize {
    p.methods.iter().map(|m| m.graph.node_count()).sum::<usize>()
        + p.modules.iter().map(|m| m.graph.node_count()).sum::<usize>()
}

/// A case for `ir` with tame inputs seeded by `input_seed` and default run choices.
pub fn case_of(ir: &IrProgram, input_seed: u64) -> Generated {
    Generated {
        program: ir.clone(),
        inputs: ir.methods.iter().map(|m| (m.name.clone(), sample_inputs(&m.graph, input_seed))).collect(),
        run: RunChoices::default(),
        features: Default::default(),
    }
}

/// Checks every invariant on `ir` with inputs from [`case_of`] (seed 0).
pub fn check_ir(ir: &IrProgram, opts: &CheckOptions) -> Report {
    check_case(&case_of(ir, 0), opts)
}

/// The eager interpreter's run of one method: inputs, outputs and calls, in host form.
struct Eager {
    inputs: Vec<HostValue>,
    outputs: Vec<HostValue>,
    /// The tolerance of each output (exact unless an approximating backend or a sum is in it).
    bounds: Vec<Bound>,
    calls: Vec<CallRecord>,
    /// How many of `calls` every conforming run makes as they are ([`crate::ir::eval::Run::decided_calls`]).
    decided_calls: usize,
}

/// I7's saved-JSON round trip of `ir`, whose type check gave `types`. `load` is `read` and then
/// the type check: when what is read back equals `ir`, that check is the one already made.
fn check_saved(ir: &IrProgram, types: &Result<Vec<Vec<ValueType>>, IrError>, r: &mut Report) {
    SAVED_TEXT.with_borrow_mut(|buffer| {
        buffer.clear();
        saved::save_into(ir, buffer);
        match std::str::from_utf8(buffer) {
            Ok(text) => check_saved_text(ir, types, text, r),
            Err(e) => r.fail(Invariant::I7, format!("saved JSON is not UTF-8: {e}")),
        }
        if buffer.capacity() > KEPT_SAVED_TEXT {
            *buffer = Vec::new();
        }
    });
}

/// A thread keeps the buffer it saved the last program into for the next, unless it grew past
/// this many bytes: saving a program then neither grows a buffer by copies nor touches fresh
/// pages, and what a thread holds stays bounded.
const KEPT_SAVED_TEXT: usize = 1 << 20;

thread_local! {
    /// The buffer [`check_saved`] saves programs into.
    static SAVED_TEXT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// [`check_saved`] of `text`, what `save` wrote for `ir`.
fn check_saved_text(ir: &IrProgram, types: &Result<Vec<Vec<ValueType>>, IrError>, text: &str, r: &mut Report) {
    let back = match saved::read(text) {
        Ok(back) => back,
        Err(e) => return r.fail(Invariant::I7, format!("saved JSON does not load back: {e}")),
    };
    let same = back == *ir;
    let typed = if same { types.as_ref().map(drop).map_err(saved::untyped) } else { saved::load(text).map(drop) };
    if let Err(e) = typed {
        return r.fail(Invariant::I7, format!("saved JSON does not load back: {e}"));
    }
    r.check(Invariant::I7, same, || "saved JSON load(save(p)) != p".into());
    // `save` is a function of the program: when `back == p`, `save(back)` is `text`.
    r.check(Invariant::I7, same || saved::save(&back) == text, || "saved JSON save∘load∘save != save".into());
}

/// Checks every invariant on one case.
pub fn check_case(case: &Generated, opts: &CheckOptions) -> Report {
    let mut r = Report::default();
    let ir = &case.program;
    // Typed once, for I7 and both emissions (a program that does not type goes to `emit` for
    // its error).
    let start = Instant::now();
    let types = crate::ir::infer::typecheck_program(ir);
    r.timings.emit += start.elapsed();
    // I7: saved-JSON round trip.
    let start = Instant::now();
    check_saved(ir, &types, &mut r);
    r.timings.compare += start.elapsed();

    let start = Instant::now();
    let eager = eager_runs(case, &mut r);
    r.timings.eager += start.elapsed();

    let mut outputs: BTreeMap<(bool, String), Vec<HostValue>> = BTreeMap::new();
    let emit_as = |share: bool, r: &mut Report| {
        let start = Instant::now();
        let e = emission(case, share, opts.allow_while, opts.fault, types.as_deref().ok());
        r.timings.emit += start.elapsed();
        e.map_err(|e| format!("share={share}: {e}"))
    };
    let shared = match emit_as(true, &mut r) {
        Ok(e) => e,
        Err(e) => {
            r.fail(Invariant::Emit, e);
            return r;
        }
    };
    let unshared = emit_as(false, &mut r);
    let case = CaseChecks { case, opts, eager: &eager };
    match unshared {
        // When sharing changes nothing, the two emissions are one program: its bytes, its load
        // and its runs are functions of it, so they are made once and both emissions'
        // expectations (structure, lifecycle, I6) are checked on them.
        Ok(u) if u.program == shared.program && u.segment_data == shared.segment_data => {
            case.emission(&shared, &[true, false], &mut outputs, &mut r);
        }
        Ok(u) => {
            case.emission(&shared, &[true], &mut outputs, &mut r);
            // Its checks are done: what the second emission's checks hold need not include it.
            drop(shared);
            case.emission(&u, &[false], &mut outputs, &mut r);
        }
        Err(e) => {
            case.emission(&shared, &[true], &mut outputs, &mut r);
            r.fail(Invariant::Emit, e);
            return r;
        }
    }
    let start = Instant::now();
    outputs_agree(&eager, &outputs, &mut r);
    r.timings.compare += start.elapsed();
    r
}

/// I6 over every method's runs: the outputs recorded under both shares are equal, and the
/// first recorded (shared before unshared) equals the eager interpreter's within its bounds.
fn outputs_agree(eager: &BTreeMap<String, Eager>, outputs: &BTreeMap<(bool, String), Vec<HostValue>>, r: &mut Report) {
    for (name, e) in eager {
        let (a, b) = (outputs.get(&(true, name.clone())), outputs.get(&(false, name.clone())));
        if let (Some(a), Some(b)) = (a, b) {
            r.check(Invariant::I6, values::same_all(a, b), || {
                format!("{name}: shared and unshared outputs differ: {}", values::difference(a, b).unwrap_or_default())
            });
        }
        let Some((share, got)) = a.map(|a| (true, a)).or(b.map(|b| (false, b))) else { continue };
        if let Some(d) = values::bounded_difference(&e.outputs, &e.bounds, got) {
            r.fail(
                Invariant::I6,
                format!("{name} share={share}: runtime outputs differ from the eager interpreter: {d}"),
            );
        }
    }
}

/// The eager interpreter's run of each method of `case` (a method it cannot run is an I6
/// failure in `r` and has no entry).
fn eager_runs(case: &Generated, r: &mut Report) -> BTreeMap<String, Eager> {
    let mut eager = BTreeMap::new();
    for (name, run) in eager_run_each(case) {
        match run {
            Ok(run) => {
                let inputs = case.inputs.get(&name).map_or(&[][..], Vec::as_slice);
                let e = Eager {
                    inputs: values::encode_all(inputs),
                    outputs: values::encode_all(&run.outputs),
                    bounds: run.bounds,
                    calls: run.calls,
                    decided_calls: run.decided_calls,
                };
                eager.insert(name, e);
            }
            Err(e) => r.fail(Invariant::I6, format!("eager interpreter failed on {name}: {e}")),
        }
    }
    eager
}

/// The eager interpreter's run of each method of `case` on its inputs, in method order: the
/// step every driver of a case shares.
pub fn eager_run_each(case: &Generated) -> Vec<(String, Result<Run, IrError>)> {
    let ir = &case.program;
    ir.methods
        .iter()
        .map(|m| {
            let inputs = case.inputs.get(&m.name).map_or(&[][..], Vec::as_slice);
            (m.name.clone(), run_method(ir, &m.name, inputs))
        })
        .collect()
}

/// `case`'s emission with sharing honoured (`share`) or as if no backend opted in, its blobs
/// placed as its run choices say; `types` is the program's type check when already made. The
/// step every driver of a case shares.
pub fn emission(
    case: &Generated,
    share: bool,
    allow_while: bool,
    fault: Option<Fault>,
    types: Option<&[Vec<ValueType>]>,
) -> Result<Emitted, EmitError> {
    let opts =
        EmitOptions { share, delegate_segments: !case.run.inline_blobs, allow_while, fault, ..EmitOptions::default() };
    match types {
        Some(t) => emit_typed(&case.program, t, &opts),
        None => emit(&case.program, &opts),
    }
}

/// Checks `emitted` as `case`'s emission under each of `shares`, as [`check_case`] checks each
/// emission: written, loaded, run, with the structure and lifecycle expected under each share
/// and I6 on the outputs.
pub fn check_emitted(case: &Generated, opts: &CheckOptions, emitted: &Emitted, shares: &[bool]) -> Report {
    let mut r = Report::default();
    let eager = eager_runs(case, &mut r);
    let mut outputs = BTreeMap::new();
    CaseChecks { case, opts, eager: &eager }.emission(emitted, shares, &mut outputs, &mut r);
    outputs_agree(&eager, &outputs, &mut r);
    r
}

/// What every emission of one case is checked against.
struct CaseChecks<'c> {
    case: &'c Generated,
    opts: &'c CheckOptions,
    eager: &'c BTreeMap<String, Eager>,
}

impl CaseChecks<'_> {
    /// Writes, loads and runs one emitted program and checks it as the emission of each of
    /// `shares` (one entry, or both when sharing changed nothing); the outputs of each method
    /// go to `outputs` under every share.
    fn emission(
        &self,
        emitted: &Emitted,
        shares: &[bool],
        outputs: &mut BTreeMap<(bool, String), Vec<HostValue>>,
        r: &mut Report,
    ) {
        let (case, opts, ir) = (self.case, self.opts, &self.case.program);
        let what = match shares {
            [share] => format!("share={share}"),
            [_, _] => "share=both (one program)".to_string(),
            _ => return r.fail(Invariant::Emit, format!("an emission checked as shares {shares:?}")),
        };
        let start = Instant::now();
        let bytes = match emitted.to_bytes() {
            Ok(b) => b,
            Err(e) => return r.fail(Invariant::Emit, format!("{what}: write failed: {e}")),
        };
        r.timings.write += start.elapsed();
        let start = Instant::now();
        let mut loaded = match format::load(&bytes) {
            Ok(l) => l,
            Err(e) => return r.fail(Invariant::Emit, format!("{what}: emitted program does not load: {e}")),
        };
        r.timings.load += start.elapsed();
        let start = Instant::now();
        r.check(Invariant::I7, written_again_is_the_same(emitted, &bytes, &loaded), || {
            format!("{what}: write∘load∘write != write")
        });
        for &share in shares {
            structure::check(ir, &loaded, share, r);
        }
        r.timings.compare += start.elapsed();

        for pi in 0..loaded.program.plans().len() {
            let plan = &loaded.program.plans()[pi];
            let (name, n_delegates) = (plan.name_str().to_string(), plan.delegate_list().len());
            let Some(e) = self.eager.get(&name) else { continue };
            // A rig per method: its model table holds this method's loads alone.
            let rig = Rig::new(opts, case.run.share_models, None);
            let run = lifecycle::run_method(&rig, &loaded, &name, &e.inputs, &mut r.timings);
            let start = Instant::now();
            match &run.result {
                Ok(outs) => {
                    for &share in shares {
                        let expect = Expect { ir, name: &name, share, calls: &e.calls, decided_calls: e.decided_calls };
                        lifecycle::check_run(&expect, &loaded, &run, r);
                        outputs.insert((share, name.clone()), outs.clone());
                    }
                }
                Err(err) => r.fail(Invariant::I6, format!("{name} {what}: method failed to load or run: {err}")),
            }
            if shares.contains(&true) && n_delegates > 0 {
                lifecycle::check_injection(opts, &loaded, &name, n_delegates, case.run.share_models, r);
                lifecycle::check_models(opts, &loaded, &name, &e.inputs, (&rig, &run), case.run.share_models, r);
            }
            r.timings.compare += start.elapsed();
            if opts.negative {
                let start = Instant::now();
                // One corruption end to end per method and emission (every one with
                // `negative_end_to_end`).
                let samples: Vec<u64> = shares
                    .iter()
                    .map(|&share| {
                        opts.inject_seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((pi as u64) << 1) ^ u64::from(share)
                    })
                    .collect();
                let samples = if opts.negative_end_to_end { None } else { Some(samples.as_slice()) };
                // The corruptions sent end to end edit `loaded` itself, and each is put back.
                let done = negative::check(&mut loaded, pi, &rig, samples, &what, r);
                r.negative += done;
                r.timings.negative += start.elapsed();
            }
        }
    }
}
