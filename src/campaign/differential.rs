//! Differential campaigns against a runner (`campaign --runner CMD [--negative]`).
//!
//! Positive: the generator keeps to the operators and backends the runner announced; every
//! method of every case runs in the runner, for the shared and the unshared emission, and is
//! compared with the eager outputs under the tolerance model (`ir::bound`): exact, within
//! bound, or mismatch. A mismatch is shrunk with the runner in the loop and written as a
//! reproducer folder.
//!
//! Negative: corruptions our runtime rejects at init (`oracle::negative`, one per class per
//! method per case) are sent to the runner too. A runner that runs one without an error accepts
//! an invalid program; one that fails only while executing rejects it late; a crash or hang is
//! a finding of its own. Findings are deduplicated by class and outcome; each keeps its
//! smallest reproducer.
//! May not touch: the runner's process (`runner::client` owns it); it changes nothing it reads.

use super::case_files::{eager_runs, emit_both, io_json};
use super::diff_report::{DiffReport, Finding, Mismatch, RunnerFailure};
use super::options::{CampaignOptions, case_config, case_input};
use super::shrink::shrink_bytes;
use crate::format;
use crate::generator::{GenConfig, Generated, Switch, generate};
use crate::ir::OpKind;
use crate::ir::eval::Run;
use crate::ir::saved;
use crate::oracle::negative::{Class, Corruption, corruptions};
use crate::oracle::values::{Verdict, encode_all, verdict_of};
use crate::runner::protocol::MAX_LINE;
use crate::runner::{Outcome, Reply, Request, Runner, RunnerConfig, Stage, StartError};
use crate::runtime::io::list_to_report_json;
use crate::runtime::{ErrorCode, HostValue, Runtime, RuntimeError, Session};
use arbitrary::Unstructured;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;
use strum::IntoEnumIterator;

/// Crashes after which a corruption class is no longer sampled.
pub const CRASH_LIMIT: u64 = 3;

/// Settings of a differential campaign.
#[derive(Clone, Debug)]
pub struct DiffOptions {
    /// Cases, seed, configuration, shard, swarm.
    pub campaign: CampaignOptions,
    /// The runner.
    pub runner: RunnerConfig,
    /// Where case files are written while they run.
    pub workdir: PathBuf,
    /// Where reproducer folders go.
    pub out: PathBuf,
    /// Also send corruptions (the negative differential).
    pub negative: bool,
    /// Most shrink attempts per mismatch.
    pub shrink_budget: usize,
    /// Most mismatches written as reproducers (the first is shrunk).
    pub max_reproducers: usize,
}

/// `cfg` restricted to what the runner announced: operators whose kernel it has, backends it
/// has, and control flow only when the kernels it is lowered onto are there.
pub fn restrict(cfg: &GenConfig, hello: &crate::runner::Hello) -> GenConfig {
    let have: BTreeSet<&str> = hello.operators.iter().map(String::as_str).collect();
    let mut c = cfg.clone();
    let ops: BTreeSet<String> = OpKind::iter()
        .filter(|k| have.contains(k.qualified_kernel().as_str()))
        .filter(|k| cfg.allows_op(*k))
        .map(|k| k.name().to_string())
        .collect();
    c.only_ops = Some(ops);
    let ours: BTreeSet<String> = crate::backends::default_backends().iter().map(|b| b.id().to_string()).collect();
    c.only_backends =
        Some(hello.backends.iter().filter(|b| ours.contains(*b) && cfg.allows_backend(b)).cloned().collect());
    let loops = crate::emit::LOOP_KERNELS.iter().all(|k| have.contains(k));
    let copy = have.contains(crate::emit::COPY_KERNEL);
    for (s, ok) in [(Switch::Map, loops), (Switch::Scan, loops && copy), (Switch::WhileLoop, copy)] {
        if !ok {
            c.features.set(s, false);
        }
    }
    c
}

/// What `cfg` could generate that [`restrict`] takes out because the runner did not announce it:
/// `op:NAME (KERNEL)`, `backend:ID`, `feature:NAME`. A campaign reports it, so a runner whose
/// hello lacks (or misspells) `operators` is seen to leave most of ptecheck untested.
pub fn not_announced(cfg: &GenConfig, hello: &crate::runner::Hello) -> Vec<String> {
    let kept = restrict(cfg, hello);
    let ops = OpKind::iter()
        .filter(|k| cfg.allows_op(*k) && !kept.allows_op(*k))
        .map(|k| format!("op:{} ({})", k.name(), k.qualified_kernel()));
    let backends = crate::backends::default_backends()
        .iter()
        .map(|b| b.id().to_string())
        .filter(|id| cfg.allows_backend(id) && !kept.allows_backend(id))
        .map(|id| format!("backend:{id}"))
        .collect::<Vec<_>>();
    let features = Switch::iter()
        .filter(|s| cfg.features.on(*s) && !kept.features.on(*s))
        .map(|s| format!("feature:{}", s.name()));
    ops.chain(backends).chain(features).collect()
}

/// A case and everything the runner needs for it.
struct Prepared {
    g: Generated,
    runs: BTreeMap<String, Run>,
    shared: PathBuf,
    unshared: PathBuf,
    shared_bytes: Vec<u8>,
}

/// A file name never used before in this process: runners cache programs by path, so a path
/// is never rewritten.
fn fresh(dir: &Path, what: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    dir.join(format!("{}-{what}.pte", NEXT.fetch_add(1, Ordering::Relaxed)))
}

impl Drop for Prepared {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.shared);
        let _ = std::fs::remove_file(&self.unshared);
    }
}

fn prepare(g: Generated, dir: &Path, _tag: &str) -> Result<Prepared, String> {
    let runs = eager_runs(&g).map_err(|e| format!("the eager interpreter fails: {e}"))?;
    let e = emit_both(&g, true).map_err(|e| format!("does not emit: {e}"))?;
    let (shared, unshared) = (fresh(dir, "shared"), fresh(dir, "unshared"));
    for (path, bytes) in [(&shared, &e.shared), (&unshared, &e.unshared)] {
        std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(Prepared { g, runs, shared, unshared, shared_bytes: e.shared })
}

/// The requests of a case: every method, on both emissions.
fn requests(p: &Prepared, runner: &mut Runner) -> Vec<(bool, String, Request)> {
    let mut out = Vec::new();
    for (shared, pte) in [(true, &p.shared), (false, &p.unshared)] {
        for name in p.runs.keys() {
            let inputs = encode_all(p.g.inputs.get(name).map_or(&[][..], Vec::as_slice));
            let id = runner.next_id();
            out.push((shared, name.clone(), Request { id, pte: pte.clone(), method: name.clone(), inputs, ptd: None }));
        }
    }
    out
}

/// The worst verdict of one run's outputs.
fn verdict(run: &Run, got: &[HostValue]) -> Verdict {
    verdict_of(&encode_all(&run.outputs), &run.bounds, got)
}

/// How a runner's refusal of a valid program is counted: `not_supported:STAGE` when it lacks a
/// kernel or backend the program uses (OperatorMissing or NotFound at load_method), else the
/// stage (the runner calls the program invalid).
pub fn refusal_class(stage: Stage, code: Option<u32>) -> String {
    let lacks = stage == Stage::LoadMethod
        && code.is_some_and(|c| c == ErrorCode::OperatorMissing as u32 || c == ErrorCode::NotFound as u32);
    if lacks { format!("not_supported:{stage:?}") } else { format!("{stage:?}") }
}

/// Whether the case mismatches in the runner (for shrinking).
fn mismatches(g: Generated, dir: &Path, runner: &mut Runner) -> bool {
    let Ok(p) = prepare(g, dir, "shrink") else { return false };
    let reqs = requests(&p, runner);
    let outs = runner.run(&reqs.iter().map(|r| r.2.clone()).collect::<Vec<_>>());
    reqs.iter().zip(&outs).any(|((_, name, _), o)| match o {
        Outcome::Reply(Reply::Outputs(got)) => p.runs.get(name).is_some_and(|r| verdict(r, got) == Verdict::Mismatch),
        _ => false,
    })
}

/// Shrinks the case's generator bytes while it keeps mismatching in the runner.
fn shrink(cfg: &GenConfig, bytes: &[u8], dir: &Path, runner: &mut Runner, budget: usize) -> Vec<u8> {
    shrink_bytes(bytes, budget, |cand| mismatches(generate(cfg, &mut Unstructured::new(cand), None), dir, runner)).0
}

fn write(path: &Path, bytes: &[u8]) {
    if let Err(e) = std::fs::write(path, bytes) {
        eprintln!("warning: cannot write {}: {e}", path.display());
    }
}

fn outcome_json(o: &Outcome) -> Value {
    match o {
        Outcome::Reply(Reply::Outputs(v)) => json!({"outputs": list_to_report_json(v)}),
        Outcome::Reply(Reply::Error { message, stage, code }) => {
            json!({"error": message, "stage": stage, "code": code})
        }
        Outcome::Exited { status, stderr } => json!({"exited": status, "stderr": stderr}),
        Outcome::Signalled { signal, stderr } => json!({"signal": signal, "stderr": stderr}),
        Outcome::Hung { waited_ms, stderr } => json!({"hung_after_ms": waited_ms, "stderr": stderr}),
        Outcome::Garbage { line, why, stderr } => json!({"garbage": line, "why": why, "stderr": stderr}),
        Outcome::NoRunner { why } => json!({"no_runner": why}),
        Outcome::TooLong { bytes } => json!({"too_long": bytes}),
        Outcome::Unencodable(e) => json!({"unencodable": e.to_string()}),
    }
}

/// The command that replays case `case` of this campaign.
fn replay_command(opts: &DiffOptions, case: u64, negative: bool) -> String {
    let c = &opts.campaign;
    let mut cmd = format!("ptecheck campaign --runner '{}' --seed {} --case {case}", opts.runner.command, c.seed);
    if let Some(p) = &c.config_path {
        cmd.push_str(&format!(" --config {p}"));
    }
    if !c.swarm {
        cmd.push_str(" --no-swarm");
    }
    if negative {
        cmd.push_str(" --negative");
    }
    cmd
}

/// Writes a mismatch reproducer folder.
fn write_mismatch(dir: &Path, p: &Prepared, reply: &Outcome, command: &str) -> Option<PathBuf> {
    std::fs::create_dir_all(dir).ok()?;
    let e = emit_both(&p.g, true).ok()?;
    let io = io_json(&p.g, &p.runs, json!({"replay": command})).ok()?;
    write(&dir.join("shared.pte"), &e.shared);
    write(&dir.join("unshared.pte"), &e.unshared);
    write(&dir.join("program.json"), saved::save(&p.g.program).as_bytes());
    write(&dir.join("io.json"), serde_json::to_string_pretty(&io).unwrap_or_default().as_bytes());
    write(&dir.join("reply.json"), serde_json::to_string_pretty(&outcome_json(reply)).unwrap_or_default().as_bytes());
    write(&dir.join("replay.txt"), format!("{command}\n").as_bytes());
    Some(dir.to_path_buf())
}

/// How the reference runtime refuses a corrupted program: at load (`Some(None)`, the loader's
/// typed error has no ExecuTorch code), at init with a code, or not at all (`None`).
fn reference_rejects(bytes: &[u8], method: &str) -> Option<Option<ErrorCode>> {
    let Ok(loaded) = format::load(bytes) else { return Some(None) };
    let rt: Runtime = crate::backends::default_runtime();
    match Session::new(&loaded, &rt).load(method) {
        Err(e @ RuntimeError::Check(_)) => Some(Some(e.code())),
        _ => None,
    }
}

/// The negative outcome class of a runner's answer to a corruption the reference runtime refused
/// (at init with code `ours`, or in its loader: `None`). `None` is the expected outcome: refused
/// before running, at init with the reference's code when it has one.
fn negative_outcome(o: &Outcome, ours: Option<ErrorCode>) -> Option<&'static str> {
    match o {
        Outcome::Reply(Reply::Outputs(_)) => Some("accepts"),
        Outcome::Reply(Reply::Error { stage: Stage::Execute | Stage::ReadOutputs, .. }) => Some("rejects_at_execute"),
        Outcome::Reply(Reply::Error { stage: Stage::LoadMethod, code: Some(code), .. })
            if ours.is_some_and(|c| c as u32 != *code) =>
        {
            Some("rejects_with_another_code")
        }
        Outcome::Reply(Reply::Error { .. }) => None,
        Outcome::Exited { .. } | Outcome::Signalled { .. } => Some("crash"),
        Outcome::Hung { .. } => Some("hang"),
        Outcome::Garbage { .. } => Some("garbage"),
        Outcome::NoRunner { .. } => Some("no_runner"),
        Outcome::TooLong { .. } => Some("too_long"),
        Outcome::Unencodable(_) => Some("unencodable"),
    }
}

fn detail(o: &Outcome) -> String {
    match o {
        Outcome::Reply(Reply::Outputs(_)) => "ran to completion".into(),
        Outcome::Reply(Reply::Error { message, stage, .. }) => format!("{stage:?}: {message}"),
        Outcome::Signalled { signal, stderr } => {
            format!("signal {signal}; {}", stderr.last().cloned().unwrap_or_default())
        }
        Outcome::Exited { status, stderr } => {
            format!("exited {status:?}; {}", stderr.last().cloned().unwrap_or_default())
        }
        Outcome::Hung { waited_ms, .. } => format!("no reply in {waited_ms} ms"),
        Outcome::Garbage { why, .. } => why.clone(),
        Outcome::NoRunner { why } => why.clone(),
        Outcome::TooLong { bytes } => {
            format!("a request of {bytes} bytes, longer than the protocol's {MAX_LINE}: not sent")
        }
        Outcome::Unencodable(e) => format!("a request the protocol cannot carry ({e}): not sent"),
    }
}

/// Sends one corruption per class of every method of the case's shared emission.
#[allow(clippy::too_many_arguments)]
fn negative_case(
    p: &Prepared,
    case: u64,
    opts: &DiffOptions,
    runner: &mut Runner,
    found: &mut BTreeMap<(String, String), Finding>,
    report: &mut DiffReport,
) {
    let Ok(loaded) = format::load(&p.shared_bytes) else { return };
    // A class whose corruptions already crashed the runner `CRASH_LIMIT` times is not sampled
    // again: the finding stands, and every crash costs a restart.
    let crashed = |class: Class| {
        found.get(&(class.name().to_string(), "crash".to_string())).is_some_and(|f| f.count >= CRASH_LIMIT)
    };
    let mut chosen: Vec<(Corruption, String)> = Vec::new();
    for (pi, plan) in loaded.program.plans().iter().enumerate() {
        let mut by_class: BTreeMap<Class, Vec<Corruption>> = BTreeMap::new();
        for c in corruptions(plan, pi) {
            by_class.entry(c.class).or_default().push(c);
        }
        for (class, list) in by_class.into_iter().filter(|(c, _)| !crashed(*c)) {
            // One per class, chosen by the case.
            let k = (case.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ class as u64) as usize % list.len();
            chosen.push((list[k].clone(), plan.name_str().to_string()));
        }
    }
    let mut files = Vec::new();
    for (i, (c, method)) in chosen.iter().enumerate() {
        let mut program = loaded.program.clone();
        if !c.apply(&mut program) {
            continue;
        }
        let Ok(bytes) = format::write(&program, &loaded.segments, &Default::default()) else { continue };
        let Some(ours) = reference_rejects(&bytes, method) else {
            report.refusals.push(format!("case {case}: our runtime accepts {}", c.describe(&loaded.program)));
            continue;
        };
        let path = fresh(&opts.workdir, &format!("neg{i}"));
        // A corruption whose file cannot be written is not sent (the runner's "cannot read"
        // would pass for a rejection) and is counted as a case not prepared.
        if let Err(e) = std::fs::write(&path, &bytes) {
            report.not_prepared(case, format!("cannot write {}: {e}", path.display()));
            continue;
        }
        files.push((c.clone(), method.clone(), path, bytes, ours));
    }
    let reqs: Vec<Request> = files
        .iter()
        .map(|(_, method, path, _, _)| {
            let inputs = encode_all(p.g.inputs.get(method).map_or(&[][..], Vec::as_slice));
            Request { id: runner.next_id(), pte: path.clone(), method: method.clone(), inputs, ptd: None }
        })
        .collect();
    let outs = runner.run(&reqs);
    for (_, _, path, _, _) in &files {
        let _ = std::fs::remove_file(path);
    }
    for ((c, _, _, bytes, ours), o) in files.iter().zip(&outs) {
        if o.unsent() {
            // Not sent: the runner said nothing of it.
            report.unsent += 1;
            continue;
        }
        report.corruptions_sent += 1;
        let class = c.class.name().to_string();
        let Some(kind) = negative_outcome(o, *ours) else {
            *report.rejected.entry(class).or_default() += 1;
            continue;
        };
        let f = found.entry((class.clone(), kind.to_string())).or_insert_with(|| Finding {
            class: class.clone(),
            outcome: kind.to_string(),
            count: 0,
            reproducer: None,
            corruption: String::new(),
            detail: String::new(),
            smallest: usize::MAX,
        });
        f.count += 1;
        if bytes.len() < f.smallest {
            f.smallest = bytes.len();
            f.corruption = c.describe(&loaded.program);
            f.detail = match (ours, o) {
                (Some(ours), Outcome::Reply(Reply::Error { code: Some(theirs), .. }))
                    if kind == "rejects_with_another_code" =>
                {
                    format!("{} (0x{theirs:02x}); ours: {ours:?}", detail(o))
                }
                _ => detail(o),
            };
            let dir = opts.out.join(format!("negative-{class}-{kind}"));
            if std::fs::create_dir_all(&dir).is_ok() {
                write(&dir.join("corrupted.pte"), bytes);
                write(&dir.join("original.pte"), &p.shared_bytes);
                write(&dir.join("program.json"), saved::save(&p.g.program).as_bytes());
                let about = json!({"corruption": c, "described": f.corruption, "outcome": outcome_json(o)});
                write(
                    &dir.join("corruption.json"),
                    serde_json::to_string_pretty(&about).unwrap_or_default().as_bytes(),
                );
                write(&dir.join("replay.txt"), format!("{}\n", replay_command(opts, case, true)).as_bytes());
                f.reproducer = Some(dir);
            }
        }
    }
}

/// Runs a differential campaign; `on_case` is called after every case.
pub fn run(opts: &DiffOptions, on_case: &mut dyn FnMut(u64, u64)) -> Result<DiffReport, StartError> {
    let start = Instant::now();
    let mut runner = Runner::start(opts.runner.clone())?;
    let _ = std::fs::create_dir_all(&opts.workdir);
    let c = &opts.campaign;
    let mut report = DiffReport {
        runner: serde_json::to_value(runner.hello()).unwrap_or_default(),
        not_generated: not_announced(&c.config, runner.hello()),
        negative: opts.negative,
        ..Default::default()
    };
    let mut found: BTreeMap<(String, String), Finding> = BTreeMap::new();
    let (shard, shards) = (c.shard.0, c.shard.1.max(1));
    let cases: Vec<u64> = match c.only_case {
        Some(k) => vec![k],
        None => (0..c.cases).filter(|k| k % shards == shard).collect(),
    };
    let total = cases.len() as u64;
    for case in cases {
        let cfg = restrict(&case_config(c, case), runner.hello());
        let bytes = case_input(c.seed, case);
        let g = generate(&cfg, &mut Unstructured::new(&bytes), None);
        let p = match prepare(g, &opts.workdir, "case") {
            Ok(p) => p,
            Err(why) => {
                report.not_prepared(case, why);
                continue;
            }
        };
        report.cases += 1;
        let reqs = requests(&p, &mut runner);
        let outs = runner.run(&reqs.iter().map(|r| r.2.clone()).collect::<Vec<_>>());
        let mut first_mismatch: Option<(String, bool, Outcome)> = None;
        for ((shared, name, _), o) in reqs.iter().zip(outs) {
            match &o {
                Outcome::Reply(Reply::Outputs(got)) => {
                    report.methods_run += 1;
                    for call in p.runs.get(name).map_or(&[][..], |r| r.calls.as_slice()) {
                        if let Some(m) = p.g.program.modules.get(call.module) {
                            *report.delegate_calls.entry(m.backend.clone()).or_default() += 1;
                        }
                    }
                    match p.runs.get(name).map_or(Verdict::Mismatch, |r| verdict(r, got)) {
                        Verdict::Exact => report.exact += 1,
                        Verdict::WithinBound => report.within_bound += 1,
                        Verdict::Mismatch => {
                            report.mismatch += 1;
                            first_mismatch.get_or_insert((name.clone(), *shared, o.clone()));
                        }
                    }
                }
                Outcome::Reply(Reply::Error { stage, message, code }) => {
                    *report.refused.entry(refusal_class(*stage, *code)).or_default() += 1;
                    if report.refusals.len() < 20 {
                        report.refusals.push(format!("case {case} {name} shared={shared}: {stage:?}: {message}"));
                    }
                }
                failed => {
                    match failed {
                        Outcome::Hung { .. } => report.hangs += 1,
                        Outcome::Garbage { .. } => report.garbage += 1,
                        Outcome::TooLong { .. } | Outcome::Unencodable(_) => report.unsent += 1,
                        _ => report.crashes += 1,
                    }
                    // Recorded with the runner's stderr, and a reproducer for the first few.
                    let kind = negative_outcome(failed, None).unwrap_or("crash").to_string();
                    let n = report.runner_failures.len();
                    let reproducer = (n < opts.max_reproducers)
                        .then(|| {
                            let dir = opts.out.join(format!("{kind}-{}-{case:06}-{name}", c.seed));
                            write_mismatch(&dir, &p, failed, &replay_command(opts, case, false))
                        })
                        .flatten();
                    report.runner_failures.push(RunnerFailure {
                        case,
                        method: name.clone(),
                        shared: *shared,
                        outcome: kind,
                        detail: detail(failed),
                        reproducer,
                    });
                }
            }
        }
        if let Some((method, shared, reply)) = first_mismatch {
            let n = report.mismatches.len();
            let reproducer = (n < opts.max_reproducers).then(|| {
                let command = replay_command(opts, case, false);
                let dir = opts.out.join(format!("mismatch-{}-{case:06}", c.seed));
                if n == 0 {
                    // The first one is shrunk, with the runner in the loop.
                    let small = shrink(&cfg, &bytes, &opts.workdir, &mut runner, opts.shrink_budget);
                    let g = generate(&cfg, &mut Unstructured::new(&small), None);
                    if let Ok(sp) = prepare(g, &opts.workdir, "shrunk") {
                        let reqs = requests(&sp, &mut runner);
                        let outs = runner.run(&reqs.iter().map(|r| r.2.clone()).collect::<Vec<_>>());
                        let mismatching = reqs.iter().zip(outs).find(|((_, name, _), o)| match o {
                            Outcome::Reply(Reply::Outputs(got)) => {
                                sp.runs.get(name).is_some_and(|r| verdict(r, got) == Verdict::Mismatch)
                            }
                            _ => false,
                        });
                        if let Some((_, reply)) = mismatching {
                            return write_mismatch(&dir, &sp, &reply, &command);
                        }
                    }
                }
                write_mismatch(&dir, &p, &reply, &command)
            });
            report.mismatches.push(Mismatch { case, method, shared, reproducer: reproducer.flatten() });
        }
        if opts.negative {
            negative_case(&p, case, opts, &mut runner, &mut found, &mut report);
        }
        on_case(report.cases, total);
    }
    report.findings = found.into_values().collect();
    report.runner_starts = runner.stats().starts;
    report.elapsed_seconds = start.elapsed().as_secs_f64();
    report.programs_per_second = report.cases as f64 / report.elapsed_seconds.max(1e-9);
    Ok(report)
}
