//! The exporter campaign (`campaign --exporter CMD [--runner CMD]`): generated programs, kept to
//! what the exporter announced and to what its framework can export, are exported by another
//! emitter (ExecuTorch's `to_executorch`, or the stand-in), and every exported program is judged
//! by `oracle::exported` under the rules the exporter announced; with a runner, it also runs
//! there. A finding is shrunk with the exporter in the loop and written with a standalone Python
//! reproducer. `--record DIR` keeps every case as files `cargo test` checks again without Python.
//! May not touch: the exporter's or the runner's process (`child` owns them).

use super::export_report::{ExportFinding, ExportReport, LISTED_PER_STAGE};
use super::options::{CampaignOptions, case_config, case_flags, case_input};
use super::shrink::shrink_bytes;
use crate::emit::Rules;
use crate::exporter::protocol::{ControlFlow, ExportStage, Exported, Hello, Reply, Request};
use crate::exporter::{Exporter, ExporterConfig, ExporterOutcome};
use crate::generator::examples::{EXAMPLES, example};
use crate::generator::{GenConfig, Generated, Switch, generate};
use crate::inspect::shape::shape;
use crate::ir::eval::run_method;
use crate::ir::{OpKind, saved};
use crate::oracle::exported::{ExportedVerdict, check_exported, expected_sites};
use crate::oracle::values::{Verdict, encode_all, verdict_of};
use crate::oracle::{CheckOptions, case_of, node_count};
use crate::runner::{Outcome, Reply as RunReply, Request as RunRequest, Runner, RunnerConfig, StartError};
use crate::runtime::HostValue;
use crate::runtime::io::list_to_json;
use arbitrary::Unstructured;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use strum::IntoEnumIterator;

/// Settings of an exporter campaign.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// Cases, seed, configuration, shard, swarm.
    pub campaign: CampaignOptions,
    /// The exporter.
    pub exporter: ExporterConfig,
    /// A runner the exported programs also run in.
    pub runner: Option<RunnerConfig>,
    /// Where exported programs are written for the runner.
    pub workdir: PathBuf,
    /// Where reproducer folders go.
    pub out: PathBuf,
    /// Where every case is recorded, if anywhere.
    pub record: Option<PathBuf>,
    /// Most exports one shrink tries.
    pub shrink_budget: usize,
    /// Most findings written as reproducer folders (the first is shrunk).
    pub max_reproducers: usize,
    /// Export the built-in examples (`generator::examples`, inputs of seed 0) in place of
    /// generated cases.
    pub examples: bool,
}

/// One case: its number, name (its record folder) and program with inputs, and the
/// configuration and bytes that generated it (`None` for an example).
struct Case {
    index: u64,
    folder: String,
    g: Generated,
    generated_from: Option<(GenConfig, Vec<u8>)>,
}

/// The backends the generator makes modules of.
fn generated_backends() -> Vec<&'static str> {
    use crate::backends::graph::Flavor;
    vec![
        Flavor::Demo.id(),
        Flavor::ArgKeep.id(),
        Flavor::Scratch.id(),
        crate::backends::xnnpack::ID,
        crate::backends::multifn::ID,
        crate::backends::compiler_demo::ID,
    ]
}

/// `cfg` kept to what the exporter announced (operators, backends, control flow, dynamic
/// shapes, scratch, multi-method lowering) and to what torch.export exports (`exportable`).
pub fn restrict(cfg: &GenConfig, hello: &Hello) -> GenConfig {
    let mut c = cfg.clone();
    c.exportable = true;
    c.only_ops = Some(
        OpKind::iter()
            .filter(|k| cfg.allows_op(*k) && hello.operators.iter().any(|o| o == k.name()))
            .map(|k| k.name().to_string())
            .collect(),
    );
    let multifn = crate::backends::multifn::ID;
    c.only_backends = Some(
        generated_backends()
            .into_iter()
            .filter(|b| cfg.allows_backend(b) && hello.backends.iter().any(|h| h == b))
            .filter(|b| *b != multifn || hello.multimethod.iter().any(|m| m == multifn))
            .map(str::to_string)
            .collect(),
    );
    let has = |f: ControlFlow| hello.control_flow.contains(&f);
    let keep = [
        (Switch::Cond, has(ControlFlow::Cond)),
        (Switch::Map, has(ControlFlow::Map)),
        (Switch::Scan, has(ControlFlow::Scan)),
        (Switch::WhileLoop, has(ControlFlow::While)),
        (Switch::DynamicShapes, hello.dynamic_shapes),
        (Switch::Scratch, hello.rules.scratch),
        (Switch::Multifunction, hello.multimethod.iter().any(|m| m == multifn)),
    ];
    for (s, ok) in keep {
        if !ok {
            c.features.set(s, false);
        }
    }
    // Off by default (ExecuTorch's runtime lacks it); on wherever an exporter lowers to it.
    let demo = crate::backends::compiler_demo::ID;
    c.features.set(Switch::CompilerDemo, c.allows_backend(demo));
    c
}

/// What `cfg` could generate that [`restrict`] leaves out: `op:NAME`, `backend:ID`,
/// `feature:NAME`.
pub fn not_announced(cfg: &GenConfig, hello: &Hello) -> Vec<String> {
    let kept = restrict(cfg, hello);
    let ops = OpKind::iter().filter(|k| cfg.allows_op(*k) && !kept.allows_op(*k)).map(|k| format!("op:{}", k.name()));
    let backends = generated_backends()
        .into_iter()
        .filter(|b| cfg.allows_backend(b) && !kept.allows_backend(b))
        .map(|b| format!("backend:{b}"));
    let features = Switch::iter()
        .filter(|s| cfg.features.on(*s) && !kept.features.on(*s))
        .map(|s| format!("feature:{}", s.name()));
    ops.chain(backends).chain(features).collect()
}

/// The backends `hello` announces that the reference runtime has no backend for.
pub fn not_runnable_here(hello: &Hello) -> Vec<String> {
    let ours: Vec<String> = crate::backends::default_backends().iter().map(|b| b.id().to_string()).collect();
    hello.backends.iter().filter(|b| !ours.contains(b)).cloned().collect()
}

/// The export request of case `g`: its saved program (compact) and each method's inputs.
pub fn request(id: u64, g: &Generated) -> Request {
    let text = saved::save(&g.program);
    let program = serde_json::from_str::<Value>(&text).map(|v| v.to_string()).unwrap_or(text);
    let inputs = g.inputs.iter().map(|(m, v)| (m.clone(), encode_all(v))).collect();
    Request { id, program, inputs }
}

/// The arguments of each shard process of this campaign (`--processes`: each adds its shard).
pub fn child_args(opts: &ExportOptions) -> Vec<String> {
    let c = &opts.campaign;
    let secs = |d: std::time::Duration| d.as_secs_f64().to_string();
    let mut args = vec![
        "campaign".to_string(),
        "--exporter".into(),
        opts.exporter.command.clone(),
        "--exporter-timeout".into(),
        secs(opts.exporter.request_timeout),
        "--exporter-start-timeout".into(),
        secs(opts.exporter.start_timeout),
        "--cases".into(),
        c.cases.to_string(),
        "--seed".into(),
        c.seed.to_string(),
        "--out".into(),
        opts.out.display().to_string(),
    ];
    args.extend(case_flags(c));
    if let Some(r) = &opts.runner {
        let more = [
            "--runner",
            &r.command,
            "--runner-timeout",
            &secs(r.request_timeout),
            "--runner-start-timeout",
            &secs(r.start_timeout),
        ];
        args.extend(more.iter().map(|s| s.to_string()));
    }
    if let Some(d) = &opts.record {
        args.extend(["--record".to_string(), d.display().to_string()]);
    }
    if opts.examples {
        args.push("--examples".into());
    }
    args
}

/// The command that replays case `case` of this campaign.
fn replay_command(opts: &ExportOptions, case: u64) -> String {
    let c = &opts.campaign;
    let mut cmd = format!("ptecheck campaign --exporter '{}' --seed {} --case {case}", opts.exporter.command, c.seed);
    if let Some(r) = &opts.runner {
        cmd.push_str(&format!(" --runner '{}'", r.command));
    }
    for flag in case_flags(c) {
        cmd.push(' ');
        cmd.push_str(&flag);
    }
    cmd
}

/// How the exporter's program of `g` differs in structure from the reference emitter's under
/// the same rules, over the call sites both emitted (`inspect::shape::common_sites`); the sites
/// only the reference emitter has (dropped by the export) are counted apart.
pub fn emitter_differences(g: &Generated, rules: &Rules, e: &Exported) -> (Vec<String>, usize) {
    let ours = match crate::emit::emit(&g.program, &crate::emit::EmitOptions::following(*rules))
        .and_then(|x| Ok(x.to_bytes()?))
    {
        Ok(b) => b,
        Err(err) => return (vec![format!("the reference emitter refuses it: {err}")], 0),
    };
    let (Ok(a), Ok(b)) = (crate::format::load(&ours), crate::format::load(&e.pte)) else {
        return (vec!["a program does not load".into()], 0);
    };
    let all: BTreeMap<String, Vec<bool>> =
        e.delegates.iter().map(|(m, sites)| (m.clone(), vec![true; sites.len()])).collect();
    let theirs: BTreeMap<String, Vec<bool>> =
        e.delegates.iter().map(|(m, sites)| (m.clone(), sites.iter().map(Option::is_some).collect())).collect();
    let dropped = e.delegates.values().flatten().filter(|d| d.is_none()).count();
    let (x, y) = crate::inspect::shape::common_sites(&shape(&a), &all, &shape(&b), &theirs);
    (crate::inspect::shape::diff(&x, &y), dropped)
}

/// The aspect a structural difference is about (`inputs`, `outputs`, `delegates`, `backend`,
/// `compile specs`, `blob`, `call sites`, `kernels`, `blobs`), read off its line.
fn aspect_of(difference: &str) -> &'static str {
    // Longer names first where one contains another.
    const ASPECTS: [&str; 10] = [
        "inputs",
        "outputs",
        "delegates vs",
        "backend",
        "compile specs",
        "distinct blobs",
        "stored",
        "blob",
        "call sites",
        "kernels",
    ];
    ASPECTS.into_iter().find(|a| difference.contains(a)).unwrap_or("other")
}

/// Counts one program's structural differences from the reference emitter's (`what`: where it
/// is, for the first few listed).
fn count_differences(report: &mut ExportReport, what: &str, differences: &[String]) {
    if differences.is_empty() {
        return;
    }
    report.emitter_differences += 1;
    for d in differences {
        *report.differences_by_aspect.entry(aspect_of(d).to_string()).or_default() += 1;
    }
    if report.difference_examples.len() < LISTED_PER_STAGE {
        report.difference_examples.push(format!("{what}: {}", differences.join("; ")));
    }
}

/// What one case came to.
enum Came {
    /// Built and checked: the verdict, and the runner's failures, described.
    Checked(Box<Exported>, Box<ExportedVerdict>, Vec<String>),
    /// Not built: the stage and why.
    NotBuilt(ExportStage, String),
    /// The exporter crashed, hung, garbled its reply or was not sent the request.
    ExporterFailed(String, String),
}

/// The first failure's kind of a checked case (`runner` for the runner's).
fn first_kind(v: &ExportedVerdict, runner: &[String]) -> Option<String> {
    v.report.first_invariant().map(str::to_string).or_else(|| (!runner.is_empty()).then(|| "runner".to_string()))
}

/// A file name never used before in this process (runners cache programs by path).
fn fresh(dir: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    dir.join(format!("{}-exported.pte", NEXT.fetch_add(1, Ordering::Relaxed)))
}

/// Runs every method of an exported program in the runner: the failures (a mismatch against
/// the eager interpreter, a crash, a hang, garbage), and each outcome's class counted in `tally`.
fn in_runner(
    g: &Generated,
    pte: &[u8],
    dir: &Path,
    runner: &mut Runner,
    tally: &mut BTreeMap<String, u64>,
) -> Vec<String> {
    let path = fresh(dir);
    if let Err(e) = std::fs::write(&path, pte) {
        return vec![format!("cannot write {}: {e}", path.display())];
    }
    let mut failures = Vec::new();
    // A method calling a backend the runner did not announce is not sent: it would be refused
    // for a backend it lacks, which says nothing of the program.
    let lacks = |m: &crate::ir::IrMethod| {
        let mut missing = None;
        m.graph.walk(0, &mut |n, _| {
            if let crate::ir::Node::Call { module, .. } = n
                && let Some(lm) = g.program.modules.get(*module)
                && !runner.hello().backends.contains(&lm.backend)
            {
                missing.get_or_insert_with(|| lm.backend.clone());
            }
        });
        missing
    };
    let mut names = Vec::new();
    for m in &g.program.methods {
        match lacks(m) {
            Some(b) => *tally.entry(format!("not_run:backend:{b}")).or_default() += 1,
            None => names.push(m.name.clone()),
        }
    }
    let reqs: Vec<RunRequest> = names
        .iter()
        .map(|m| RunRequest {
            id: runner.next_id(),
            pte: path.clone(),
            method: m.clone(),
            inputs: encode_all(g.inputs.get(m).map_or(&[][..], Vec::as_slice)),
            ptd: None,
        })
        .collect();
    for (name, o) in names.iter().zip(runner.run(&reqs)) {
        let class = match &o {
            Outcome::Reply(RunReply::Outputs(got)) => {
                let inputs = g.inputs.get(name).map_or(&[][..], Vec::as_slice);
                match run_method(&g.program, name, inputs) {
                    Ok(run) => match verdict_of(&encode_all(&run.outputs), &run.bounds, got) {
                        Verdict::Exact => "exact".to_string(),
                        Verdict::WithinBound => "within_bound".to_string(),
                        Verdict::Mismatch => {
                            failures.push(format!("{name}: the runner's outputs differ from the eager interpreter's"));
                            "mismatch".to_string()
                        }
                    },
                    Err(e) => {
                        failures.push(format!("{name}: the eager interpreter fails: {e}"));
                        "mismatch".to_string()
                    }
                }
            }
            Outcome::Reply(RunReply::Error { stage, .. }) => format!("refused:{stage:?}"),
            other => {
                failures.push(format!("{name}: the runner {}: {other:?}", other.class()));
                other.class().to_string()
            }
        };
        *tally.entry(class).or_default() += 1;
    }
    let _ = std::fs::remove_file(&path);
    failures
}

/// Exports and checks case `g` (request id from `exporter`).
fn take(
    g: &Generated,
    rules: &Rules,
    exporter: &mut Exporter,
    runner: Option<(&mut Runner, &Path)>,
    tally: &mut BTreeMap<String, u64>,
) -> Came {
    let req = request(exporter.next_id(), g);
    let outcome = exporter.run(std::slice::from_ref(&req)).pop();
    match outcome {
        Some(ExporterOutcome::Reply(Reply::Exported(e))) => {
            let v = check_exported(g, rules, &e.pte, &e.delegates, &e.eager, &CheckOptions::default());
            let runner_failures = match runner {
                Some((r, dir)) => in_runner(g, &e.pte, dir, r, tally),
                None => Vec::new(),
            };
            Came::Checked(e, Box::new(v), runner_failures)
        }
        Some(ExporterOutcome::Reply(Reply::Failed { stage, message })) => Came::NotBuilt(stage, message),
        Some(other) => Came::ExporterFailed(other.class().to_string(), format!("{other:?}")),
        None => Came::ExporterFailed("no_outcome".into(), String::new()),
    }
}

/// One line of a possibly long message.
fn short(s: &str) -> String {
    let line = s.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    line.chars().take(300).collect()
}

fn write(path: &Path, bytes: &[u8]) {
    if let Err(e) = std::fs::write(path, bytes) {
        eprintln!("warning: cannot write {}: {e}", path.display());
    }
}

/// Each method's inputs in the corpus encoding (`{method: [values]}`).
fn inputs_json(g: &Generated) -> Value {
    let m: serde_json::Map<String, Value> = g
        .inputs
        .iter()
        .map(|(name, v)| (name.clone(), Value::Array(list_to_json(&encode_all(v), "$").unwrap_or_default())))
        .collect();
    Value::Object(m)
}

/// The reply's members besides the program bytes: eager outputs, sites, seconds.
fn reply_json(e: &Exported) -> Value {
    let eager: serde_json::Map<String, Value> = e
        .eager
        .iter()
        .map(|(m, v)| {
            (
                m.clone(),
                Value::Array(list_to_json(v, "$").unwrap_or_else(|_| crate::runtime::io::list_to_report_json(v))),
            )
        })
        .collect();
    json!({"eager": eager, "delegates": e.delegates, "seconds": e.seconds})
}

/// Writes a case's files into `dir`: `program.json`, `inputs.json`, and when built
/// `exported.pte` (and `exported.ptd`) with `reply.json`, else `failed.json`.
pub fn write_case(dir: &Path, g: &Generated, came: &Result<&Exported, (ExportStage, &str)>) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("program.json"), saved::save(&g.program))?;
    std::fs::write(dir.join("inputs.json"), serde_json::to_string_pretty(&inputs_json(g)).unwrap_or_default())?;
    match came {
        Ok(e) => {
            std::fs::write(dir.join("exported.pte"), &e.pte)?;
            if let Some(ptd) = &e.ptd {
                std::fs::write(dir.join("exported.ptd"), ptd)?;
            }
            std::fs::write(dir.join("reply.json"), serde_json::to_string_pretty(&reply_json(e)).unwrap_or_default())
        }
        Err((stage, message)) => std::fs::write(
            dir.join("failed.json"),
            serde_json::to_string_pretty(&json!({"stage": stage, "error": message})).unwrap_or_default(),
        ),
    }
}

/// A standalone Python script (torch and executorch only) that rebuilds `g`'s program, exports
/// it through ExecuTorch's pipeline, runs it in ExecuTorch's runtime and prints what differs from
/// what ptecheck expects (`expected`: delegates and call sites per method under the rules).
pub fn repro_script(g: &Generated, expected: &Value, note: &str) -> String {
    let program = serde_json::from_str::<Value>(&saved::save(&g.program)).map(|v| v.to_string()).unwrap_or_default();
    let py = |s: &str| serde_json::to_string(s).unwrap_or_default();
    format!(
        "#!/usr/bin/env python3\n\
         # Reproducer written by ptecheck: {note}\n\
         # Needs only torch and executorch (tested: executorch 1.5.1, torch 2.14.1). Run: python THIS.py [OUT.pte]\n\
         # It rebuilds the program, exports it (torch.export, to_backend, to_edge, to_executorch), runs it\n\
         # in ExecuTorch's runtime and prints every way it differs from what ptecheck expects (WRONG: ...).\n\
         # The builder below is ptecheck's runners/exir_build.py, verbatim.\n\
         {builder}\nPROGRAM_JSON = {program}\nINPUTS_JSON = {inputs}\nEXPECTED_JSON = {expected}\n{main}",
        note = note.replace('\n', " "),
        builder = include_str!("../../runners/exir_build.py"),
        program = py(&program),
        inputs = py(&inputs_json(g).to_string()),
        expected = py(&expected.to_string()),
        main = include_str!("../../runners/repro_main.py"),
    )
}

/// What ptecheck expects of `g`'s exported program under `rules`, given the sites the exporter
/// emitted: delegates per method and each site's delegate.
fn expected_json(g: &Generated, rules: &Rules, e: &Exported) -> Value {
    let mut delegates = serde_json::Map::new();
    let mut sites = serde_json::Map::new();
    for m in &g.program.methods {
        let reply = e.delegates.get(&m.name).cloned().unwrap_or_default();
        let (n, s) = expected_sites(&g.program, &m.name, rules, &reply);
        delegates.insert(m.name.clone(), json!(n));
        sites.insert(m.name.clone(), json!(s));
    }
    json!({"delegates": delegates, "sites": sites})
}

/// Writes a finding's reproducer folder.
fn write_finding(
    dir: &Path,
    g: &Generated,
    e: &Exported,
    rules: &Rules,
    failures: &[String],
    command: &str,
) -> Option<PathBuf> {
    write_case(dir, g, &Ok(e)).ok()?;
    write(&dir.join("failures.txt"), (failures.join("\n") + "\n").as_bytes());
    write(&dir.join("replay.txt"), format!("{command}\n").as_bytes());
    let note = failures.first().map_or("", String::as_str);
    write(&dir.join("repro.py"), repro_script(g, &expected_json(g, rules, e), note).as_bytes());
    Some(dir.to_path_buf())
}

/// Runs an exporter campaign; `on_case` is called after every case with (done, total).
pub fn run(opts: &ExportOptions, on_case: &mut dyn FnMut(u64, u64)) -> Result<ExportReport, StartError> {
    let start = Instant::now();
    let mut exporter = Exporter::start(opts.exporter.clone())?;
    let mut runner = opts.runner.clone().map(Runner::start).transpose()?;
    let _ = std::fs::create_dir_all(&opts.workdir);
    let hello = exporter.hello().clone();
    let rules = hello.rules;
    let c = &opts.campaign;
    let (shard, shards) = (c.shard.0, c.shard.1.max(1));
    let mut report = ExportReport {
        exporter: serde_json::to_value(&hello).unwrap_or_default(),
        runner: runner.as_ref().map(|r| serde_json::to_value(r.hello()).unwrap_or_default()),
        shards_run: vec![shard],
        shards,
        not_generated: not_announced(&c.config, &hello),
        not_runnable_here: not_runnable_here(&hello),
        ..Default::default()
    };
    if let Some(dir) = &opts.record {
        let _ = std::fs::create_dir_all(dir);
        write(&dir.join("hello.json"), serde_json::to_string_pretty(&hello).unwrap_or_default().as_bytes());
    }
    let indices: Vec<u64> = match (opts.examples, c.only_case) {
        (true, _) => (0..EXAMPLES.len() as u64).filter(|k| k % shards == shard).collect(),
        (false, Some(k)) => vec![k],
        (false, None) => (0..c.cases).filter(|k| k % shards == shard).collect(),
    };
    let total = indices.len() as u64;
    let make = |case: u64| -> Option<Case> {
        if opts.examples {
            let name = EXAMPLES.get(case as usize)?;
            let g = case_of(&example(name)?, 0);
            return Some(Case { index: case, folder: format!("example-{name}"), g, generated_from: None });
        }
        let cfg = restrict(&case_config(c, case), &hello);
        let bytes = case_input(c.seed, case);
        let g = generate(&cfg, &mut Unstructured::new(&bytes), None);
        Some(Case { index: case, folder: format!("case-{}-{case:06}", c.seed), g, generated_from: Some((cfg, bytes)) })
    };
    for Case { index: case, folder, g, generated_from } in indices.into_iter().filter_map(make) {
        report.cases += 1;
        let runner_arg = runner.as_mut().map(|r| (r, opts.workdir.as_path()));
        let came = take(&g, &rules, &mut exporter, runner_arg, &mut report.runner_outcomes);
        if let Some(dir) = &opts.record {
            let folder = dir.join(&folder);
            let recorded = match &came {
                Came::Checked(e, ..) => Some(Ok(e.as_ref())),
                Came::NotBuilt(stage, m) => Some(Err((*stage, m.as_str()))),
                Came::ExporterFailed(..) => None,
            };
            if let Some(r) = recorded
                && let Err(e) = write_case(&folder, &g, &r)
            {
                eprintln!("warning: cannot record {}: {e}", folder.display());
            }
        }
        match came {
            Came::NotBuilt(stage, message) => {
                *report.failed_by_stage.entry(stage.name().to_string()).or_default() += 1;
                let listed = report.stage_messages.entry(stage.name().to_string()).or_default();
                if listed.len() < LISTED_PER_STAGE {
                    listed.push(format!("case {case}: {}", short(&message)));
                }
            }
            Came::ExporterFailed(class, detail) => {
                *report.exporter_failures.entry(class.clone()).or_default() += 1;
                report.failures += 1;
                let dir = opts.out.join(format!("exporter-{class}-{}-{case:06}", c.seed));
                let written = std::fs::create_dir_all(&dir).ok().map(|_| {
                    write(&dir.join("program.json"), saved::save(&g.program).as_bytes());
                    write(&dir.join("inputs.json"), inputs_json(&g).to_string().as_bytes());
                    write(&dir.join("outcome.txt"), detail.as_bytes());
                    write(&dir.join("replay.txt"), format!("{}\n", replay_command(opts, case)).as_bytes());
                    dir.clone()
                });
                report.findings.push(ExportFinding {
                    case,
                    kind: format!("exporter:{class}"),
                    detail: vec![short(&detail)],
                    reproducer: written,
                    nodes: (node_count(&g.program), None),
                });
            }
            Came::Checked(e, v, runner_failures) => {
                report.built += 1;
                tally(&mut report, &v);
                let (differences, dropped) = emitter_differences(&g, &rules, &e);
                report.sites_dropped += dropped as u64;
                count_differences(&mut report, &format!("case {case}"), &differences);
                let Some(kind) = first_kind(&v, &runner_failures) else { continue };
                report.failures += 1;
                let mut detail: Vec<String> =
                    v.report.failures.iter().map(|f| format!("{}: {}", f.invariant, f.detail)).collect();
                detail.extend(runner_failures);
                let mut finding = ExportFinding {
                    case,
                    kind: kind.clone(),
                    detail,
                    reproducer: None,
                    nodes: (node_count(&g.program), None),
                };
                if report.findings.len() < opts.max_reproducers {
                    let command = replay_command(opts, case);
                    let dir = opts.out.join(format!("export-{kind}-{}-{case:06}", c.seed));
                    let small = match (&generated_from, report.findings.is_empty()) {
                        (Some((cfg, bytes)), true) => shrunk(opts, cfg, bytes, &kind, &rules, &mut exporter),
                        _ => None,
                    };
                    let (sg, se, sv) = small.unwrap_or((g, e, *v));
                    finding.nodes.1 = Some(node_count(&sg.program));
                    let mut failures: Vec<String> =
                        sv.report.failures.iter().map(|f| format!("{}: {}", f.invariant, f.detail)).collect();
                    if failures.is_empty() {
                        failures = finding.detail.clone();
                    }
                    finding.reproducer = write_finding(&dir, &sg, &se, &rules, &failures, &command);
                }
                report.findings.push(finding);
            }
        }
        on_case(report.cases, total);
    }
    report.elapsed_seconds = start.elapsed().as_secs_f64();
    report.programs_per_second = report.cases as f64 / report.elapsed_seconds.max(1e-9);
    Ok(report)
}

/// Adds one checked program's counts to the report.
fn tally(report: &mut ExportReport, v: &ExportedVerdict) {
    for (inv, n) in v.report.checked.iter() {
        *report.checks.entry(inv.name().to_string()).or_default() += n;
    }
    for f in &v.report.failures {
        *report.failures_by_kind.entry(f.invariant.clone()).or_default() += 1;
    }
    for u in &v.unsupported {
        *report.unsupported_here.entry(u.clone()).or_default() += 1;
    }
    for k in &v.kernels {
        *report.kernels.entry(k.clone()).or_default() += 1;
    }
    report.delegates += v.delegates.values().sum::<usize>() as u64;
    report.blobs += v.blobs as u64;
    let name = |x: &Verdict| match x {
        Verdict::Exact => "exact",
        Verdict::WithinBound => "within_bound",
        Verdict::Mismatch => "mismatch",
    };
    for (ours, theirs) in v.verdicts.values() {
        *report.ours.entry(name(ours).to_string()).or_default() += 1;
        *report.ours_vs_exporter.entry(name(theirs).to_string()).or_default() += 1;
    }
}

/// The smallest input, from `bytes`, whose exported program still fails with `kind`, with its
/// export and verdict (`None` when no smaller one does, or the shrunk one cannot be had again).
fn shrunk(
    opts: &ExportOptions,
    cfg: &GenConfig,
    bytes: &[u8],
    kind: &str,
    rules: &Rules,
    exporter: &mut Exporter,
) -> Option<(Generated, Box<Exported>, ExportedVerdict)> {
    let mut attempt = |b: &[u8]| -> Option<(Generated, Box<Exported>, ExportedVerdict)> {
        let g = generate(cfg, &mut Unstructured::new(b), None);
        match take(&g, rules, exporter, None, &mut BTreeMap::new()) {
            Came::Checked(e, v, runner) if first_kind(&v, &runner).as_deref() == Some(kind) => Some((g, e, *v)),
            _ => None,
        }
    };
    // Without the runner in the loop, a runner-only finding cannot be shrunk.
    if kind == "runner" {
        return None;
    }
    let (small, _) = shrink_bytes(bytes, opts.shrink_budget, |b| attempt(b).is_some());
    attempt(&small)
}

/// Checks every case recorded in `dir` (`--record`; or `dir` itself when it is one case with
/// its `hello.json`) again, as the campaign that recorded it did,
/// without the exporter (and with `runner`, in the runner too, its files written under
/// `workdir`): the same report, read from the files.
pub fn replay_record(dir: &Path, mut runner: Option<(&mut Runner, &Path)>) -> Result<ExportReport, RecordError> {
    let start = Instant::now();
    let bad = |path: PathBuf, what: String| RecordError { path, what };
    let hello_path = dir.join("hello.json");
    let text = std::fs::read_to_string(&hello_path).map_err(|e| bad(hello_path.clone(), e.to_string()))?;
    let hello: Hello = serde_json::from_str(&text).map_err(|e| bad(hello_path.clone(), e.to_string()))?;
    let mut report = ExportReport {
        exporter: serde_json::to_value(&hello).unwrap_or_default(),
        not_runnable_here: not_runnable_here(&hello),
        runner: runner.as_ref().map(|(r, _)| serde_json::to_value(r.hello()).unwrap_or_default()),
        shards_run: vec![0],
        shards: 1,
        ..Default::default()
    };
    if let Some((_, work)) = &runner {
        std::fs::create_dir_all(work).map_err(|e| bad(work.to_path_buf(), e.to_string()))?;
    }
    // A folder that is itself a case (a finding kept with its hello) is the one case.
    let mut cases: Vec<PathBuf> = if dir.join("program.json").is_file() {
        vec![dir.to_path_buf()]
    } else {
        std::fs::read_dir(dir)
            .map_err(|e| bad(dir.to_path_buf(), e.to_string()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect()
    };
    cases.sort();
    for (i, case) in cases.iter().enumerate() {
        report.cases += 1;
        if let Ok(failed) = std::fs::read_to_string(case.join("failed.json")) {
            let Ok(v) = serde_json::from_str::<Value>(&failed) else {
                unreadable(&mut report, i, bad(case.join("failed.json"), "not JSON".into()));
                continue;
            };
            let stage = v["stage"].as_str().unwrap_or("?").to_string();
            *report.failed_by_stage.entry(stage.clone()).or_default() += 1;
            let listed = report.stage_messages.entry(stage).or_default();
            if listed.len() < LISTED_PER_STAGE {
                listed.push(format!("{}: {}", case.display(), short(v["error"].as_str().unwrap_or(""))));
            }
            continue;
        }
        let (g, e, v) = match read_recorded(case, &hello.rules) {
            Ok(x) => x,
            Err(err) => {
                unreadable(&mut report, i, err);
                continue;
            }
        };
        report.built += 1;
        tally(&mut report, &v);
        let (differences, dropped) = emitter_differences(&g, &hello.rules, &e);
        report.sites_dropped += dropped as u64;
        count_differences(&mut report, &case.display().to_string(), &differences);
        let runner_failures = match runner.as_mut() {
            Some((r, work)) => in_runner(&g, &e.pte, work, r, &mut report.runner_outcomes),
            None => Vec::new(),
        };
        if let Some(kind) = first_kind(&v, &runner_failures) {
            report.failures += 1;
            let mut detail: Vec<String> =
                v.report.failures.iter().map(|f| format!("{}: {}", f.invariant, f.detail)).collect();
            detail.extend(runner_failures);
            report.findings.push(ExportFinding {
                case: i as u64,
                kind,
                detail,
                reproducer: Some(case.clone()),
                nodes: (node_count(&g.program), None),
            });
        }
    }
    report.elapsed_seconds = start.elapsed().as_secs_f64();
    report.programs_per_second = report.cases as f64 / report.elapsed_seconds.max(1e-9);
    Ok(report)
}

/// Why a recorded case or the recording's hello cannot be read back: the file, and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{}: {what}", path.display())]
pub struct RecordError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub what: String,
}

/// Counts a recorded case that cannot be read back as a failure with its path.
fn unreadable(report: &mut ExportReport, i: usize, e: RecordError) {
    report.failures += 1;
    *report.exporter_failures.entry("unreadable_record".into()).or_default() += 1;
    let folder = e.path.parent().map(Path::to_path_buf);
    report.findings.push(ExportFinding {
        case: i as u64,
        kind: "record:unreadable".into(),
        detail: vec![e.to_string()],
        reproducer: folder,
        nodes: (0, None),
    });
}

/// A recorded case read back, with the reply and its verdict.
fn read_recorded(dir: &Path, rules: &Rules) -> Result<(Generated, Exported, ExportedVerdict), RecordError> {
    let at = |name: &str| dir.join(name);
    let bad = |name: &str, what: String| RecordError { path: at(name), what };
    let read = |name: &str| std::fs::read(at(name)).map_err(|e| bad(name, e.to_string()));
    let text = |name: &str| read(name).and_then(|b| String::from_utf8(b).map_err(|e| bad(name, e.to_string())));
    let json = |name: &str| -> Result<Value, RecordError> {
        serde_json::from_str(&text(name)?).map_err(|e| bad(name, e.to_string()))
    };
    let program = saved::load(&text("program.json")?).map_err(|e| bad("program.json", e.to_string()))?;
    let inputs = json("inputs.json")?;
    let inputs = inputs.as_object().ok_or_else(|| bad("inputs.json", "not an object of methods".into()))?;
    let decode_list = |file: &str, v: &Value, at: &str| -> Result<Vec<HostValue>, RecordError> {
        crate::runtime::io::list_from_json(v, at).map_err(|e| bad(file, e.to_string()))
    };
    let mut ir_inputs = BTreeMap::new();
    for (m, v) in inputs {
        let host = decode_list("inputs.json", v, &format!("$.{m}"))?;
        let vals = host.iter().map(crate::oracle::values::decode).collect::<Option<Vec<_>>>();
        ir_inputs.insert(
            m.clone(),
            vals.ok_or_else(|| bad("inputs.json", format!("$.{m}: a value the IR has no form of")))?,
        );
    }
    let reply = json("reply.json")?;
    let eager: BTreeMap<String, Vec<HostValue>> = reply["eager"]
        .as_object()
        .ok_or_else(|| bad("reply.json", "no `eager` object".into()))?
        .iter()
        .map(|(m, v)| decode_list("reply.json", v, &format!("$.eager.{m}")).map(|l| (m.clone(), l)))
        .collect::<Result<_, _>>()?;
    let sites: BTreeMap<String, Vec<Option<usize>>> = serde_json::from_value(reply["delegates"].clone())
        .map_err(|e| bad("reply.json", format!("$.delegates: {e}")))?;
    let seconds: BTreeMap<String, f64> = match &reply["seconds"] {
        Value::Null => BTreeMap::new(),
        v => serde_json::from_value(v.clone()).map_err(|e| bad("reply.json", format!("$.seconds: {e}")))?,
    };
    let pte = read("exported.pte")?;
    let ptd = at("exported.ptd").is_file().then(|| read("exported.ptd")).transpose()?;
    let g = Generated { program, inputs: ir_inputs, run: Default::default(), features: Default::default() };
    let v = check_exported(&g, rules, &pte, &sites, &eager, &CheckOptions::default());
    Ok((g, Exported { pte, ptd, eager, delegates: sites, seconds }, v))
}
