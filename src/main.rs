//! The `ptecheck` command line: parses arguments, calls the library, prints. Each subcommand's
//! arguments are one clap `Args` struct; every outcome maps to an exit code in [`Exit`].
#![forbid(unsafe_code)]

use clap::{Args, Parser, Subcommand};

/// The campaign allocates many small short-lived objects; mimalloc serves them faster than the
/// system allocator (30,000 no-swarm cases on one job took 10.3-10.4 s against 15.3-15.4 s on
/// 2026-12-02). Built with `no_thp`, so its heaps grow in small pages, not 2 MiB ones. The
/// `flat-memory` feature swaps in jemalloc ([`ptecheck::allocator`]).
#[global_allocator]
static ALLOCATOR: ptecheck::allocator::Chosen = ptecheck::allocator::Chosen;
use ptecheck::fault::Fault;
use ptecheck::format::{self, LoadedProgram};
use ptecheck::runtime::{HostValue, Runtime, RuntimeError, Session, Trace, io};
use serde_json::json;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How standard output ended early, if it did: its reader went away (`None`: a closed pipe, as
/// under `| head`; nothing more is written and the command keeps its own exit code), or a write
/// failed otherwise (`Some`: the command then ends with exit 2 naming it).
static STDOUT_ENDED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Writes `args` (and a newline when `newline`) to standard output, never panicking.
fn write_stdout(args: std::fmt::Arguments<'_>, newline: bool) {
    use std::io::Write;
    if STDOUT_ENDED.get().is_some() {
        return;
    }
    let mut out = std::io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| if newline { out.write_all(b"\n") } else { Ok(()) });
    if let Err(e) = written.and_then(|()| out.flush()) {
        let _ = STDOUT_ENDED.set((e.kind() != std::io::ErrorKind::BrokenPipe).then(|| e.to_string()));
    }
}

/// `print!` that neither panics nor stops the command when standard output fails.
macro_rules! out {
    ($($t:tt)*) => { write_stdout(format_args!($($t)*), false) };
}

/// `println!` that neither panics nor stops the command when standard output fails.
macro_rules! outln {
    ($($t:tt)*) => { write_stdout(format_args!($($t)*), true) };
}

/// Exit codes, the one policy every command follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exit {
    /// 0: everything held.
    Ok,
    /// 1: a run failed, outputs mismatched, or a campaign found a failure.
    Failed,
    /// 2: rejected input (a file the loader or a check refuses) or bad arguments.
    Rejected,
    /// 3: a backend the program needs is not available here.
    Unavailable,
    /// 4: a campaign's case ran past `--case-timeout` (the process ends there, without a report).
    Hung,
}

impl Exit {
    fn code(self) -> ExitCode {
        ExitCode::from(self.number())
    }

    /// The exit status.
    fn number(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::Rejected => 2,
            Exit::Unavailable => 3,
            Exit::Hung => 4,
        }
    }

    /// The worse of two outcomes.
    fn max(self, other: Exit) -> Exit {
        let rank = |e: Exit| match e {
            Exit::Ok => 0,
            Exit::Unavailable => 1,
            Exit::Failed => 2,
            Exit::Rejected => 3,
            Exit::Hung => 4,
        };
        if rank(other) > rank(self) { other } else { self }
    }
}

/// A command that cannot proceed: bad arguments or unreadable / rejected input (exit 2).
struct Rejected(String);

impl<E: std::fmt::Display> From<E> for Rejected {
    fn from(e: E) -> Self {
        Rejected(e.to_string())
    }
}

type CmdResult = Result<Exit, Rejected>;

#[derive(Parser)]
#[command(name = "ptecheck", version, about = "Verify, inspect and fuzz ExecuTorch .pte programs")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Summarise .pte and .ptd files (a folder: every .pte/.ptd in it).
    Inspect(InspectArgs),
    /// Load FILE and run every init-time check without executing; print each violation.
    Check(CheckArgs),
    /// Run methods and print their outputs in the corpus encoding; or replay recorded runs.
    Run(RunArgs),
    /// Emit a program: from saved-program JSON or a built-in example, to a .pte file.
    Emit(EmitArgs),
    /// The main job: check every invariant on generated programs (swarm testing).
    Campaign(CampaignArgs),
    /// Run the campaign against every seeded fault and report which invariant caught each.
    Mutants(MutantsArgs),
    /// Write a conformance corpus: per case both emissions, the saved program and an io.json.
    Gen(GenArgs),
    /// Serve the runner protocol (docs/runner-protocol.md) from the reference runtime.
    Runner(RunnerArgs),
    /// Merge `campaign --json` reports of shards into one (counts, features, failures).
    MergeReports(MergeArgs),
}

#[derive(Args)]
struct MergeArgs {
    /// Reports written by `campaign --json`.
    #[arg(required = true)]
    reports: Vec<PathBuf>,
    /// Print the merged report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct InspectArgs {
    /// Files or folders to inspect (`-` = stdin).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print a JSON document whose "program" member matches the corpus NAME.json shape.
    #[arg(long, conflicts_with = "dot")]
    json: bool,
    /// Print a Graphviz graph: method -> call sites -> delegates -> blobs.
    #[arg(long)]
    dot: bool,
}

#[derive(Args)]
struct CheckArgs {
    /// File to check (`-` = stdin).
    file: PathBuf,
}

#[derive(Args)]
struct RunArgs {
    /// Program to run (`-` = stdin).
    file: PathBuf,
    /// Method name (default: every method, or `forward` with --inputs).
    #[arg(long)]
    method: Option<String>,
    /// Inputs: a JSON array of values in the corpus encoding.
    #[arg(long)]
    inputs: Option<PathBuf>,
    /// External data file (.ptd) for EXTERNAL tensors.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Runtime option BACKEND.KEY=VALUE (repeatable).
    #[arg(long = "option")]
    options: Vec<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Print delegate init/execute/destroy counts.
    #[arg(long)]
    trace: bool,
    /// Run every recorded run of NAME.io.json and compare (the document names the methods and
    /// their inputs, so --method and --inputs are refused with it).
    #[arg(long, conflicts_with_all = ["inputs", "method"])]
    expect: Option<PathBuf>,
    /// Instructions one execute may run.
    #[arg(long, default_value_t = ptecheck::runtime::DEFAULT_INSTRUCTION_BUDGET)]
    budget: u64,
    /// Also run each method with a runner (shell command, docs/runner-protocol.md) on the same
    /// inputs and say whether it ends as the reference runtime does.
    #[arg(long, conflicts_with_all = ["expect", "trace"])]
    runner: Option<String>,
    /// With --runner: seconds allowed per request.
    #[arg(long, default_value = "10", value_parser = parse_seconds, requires = "runner")]
    runner_timeout: std::time::Duration,
}

#[derive(Args)]
struct EmitArgs {
    /// Saved-program JSON (see --save-json).
    program: Option<PathBuf>,
    /// A built-in example instead of a file.
    #[arg(long, conflicts_with = "program")]
    example: Option<String>,
    /// Output .pte path.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// Emit as if no backend opted in to handle sharing.
    #[arg(long)]
    no_share: bool,
    /// Keep delegate blobs inline instead of in segments.
    #[arg(long)]
    inline_delegates: bool,
    /// Allow while_loop (lowered as P12).
    #[arg(long)]
    allow_while: bool,
    /// Print the saved-program JSON instead of emitting (nothing is emitted, so the emission
    /// options are refused with it).
    #[arg(long, conflicts_with_all = ["output", "listing", "no_share", "inline_delegates", "allow_while"])]
    save_json: bool,
    /// Print the emitted program's listing (values, instructions, delegates).
    #[arg(long)]
    listing: bool,
}

#[derive(Args)]
struct CampaignArgs {
    /// Cases to run.
    #[arg(long, default_value_t = 10_000)]
    cases: u64,
    /// Campaign seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Run only this case index (replays a reported failure).
    #[arg(long)]
    case: Option<u64>,
    /// Generator configuration (JSON of GenConfig; absent members take defaults).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Run shard I of N (cases with index % N == I).
    #[arg(long, value_parser = parse_shard)]
    shard: Option<(u64, u64)>,
    /// Use the base configuration for every case (no swarm).
    #[arg(long)]
    no_swarm: bool,
    /// Exhibit a seeded fault (mutation testing).
    #[arg(long, value_parser = parse_fault)]
    fault: Option<Fault>,
    /// Keep going after the first failure (report counts; shrink the first).
    #[arg(long)]
    keep_going: bool,
    /// Send every negative corruption through the whole runtime (copy, edit, load), not only
    /// one per method (slower: quadratic in program size).
    #[arg(long, conflicts_with = "runner")]
    negative_end_to_end: bool,
    /// Worker threads (0: one per core). The report is the same for any number.
    #[arg(long, short = 'j', default_value_t = 0, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=ptecheck::oracle::campaign::MAX_JOBS as u64))]
    jobs: usize,
    /// Run as N shard processes of this program, one job each, and merge their reports (each
    /// stops at its own first failure unless --keep-going). Processes give memory back without
    /// slowing each other, as threads of the `flat-memory` build do not.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=ptecheck::oracle::processes::MAX_PROCESSES), conflicts_with_all = ["jobs", "shard", "case", "save_failures", "runner"])]
    processes: Option<u64>,
    /// Write the first failure (shrunk) as a reproducer folder, and the list of failing
    /// cases, into DIR.
    #[arg(long, value_name = "DIR", conflicts_with = "runner")]
    save_failures: Option<PathBuf>,
    /// Seconds one case may run: a case still running then is reported as hung with its replay
    /// command, and the process ends with exit 4 (a case cannot be stopped from outside).
    #[arg(long, value_name = "S", default_value = "300", value_parser = parse_seconds, conflicts_with = "runner")]
    case_timeout: std::time::Duration,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Differential: run every method of every case in this runner (a shell command speaking
    /// docs/runner-protocol.md) and compare with the eager outputs.
    #[arg(long)]
    runner: Option<String>,
    /// With --runner: also send corruptions our runtime rejects (the negative differential).
    #[arg(long, requires = "runner")]
    negative: bool,
    /// With --runner: seconds allowed per request.
    #[arg(long, default_value = "10", value_parser = parse_seconds, requires = "runner")]
    runner_timeout: std::time::Duration,
    /// With --runner: seconds allowed for the runner's hello.
    #[arg(long, default_value = "60", value_parser = parse_seconds, requires = "runner")]
    runner_start_timeout: std::time::Duration,
    /// With --runner: where reproducer folders are written.
    #[arg(long, default_value = "ptecheck-findings", requires = "runner")]
    out: PathBuf,
}

#[derive(Args)]
struct GenArgs {
    /// Cases to write.
    #[arg(long, default_value_t = 100)]
    cases: u64,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Generator configuration (JSON of GenConfig).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Write shard I of N.
    #[arg(long, value_parser = parse_shard)]
    shard: Option<(u64, u64)>,
    /// Use the base configuration for every case (no swarm).
    #[arg(long)]
    no_swarm: bool,
    /// Output folder.
    #[arg(short = 'o', long)]
    output: PathBuf,
}

#[derive(Args)]
struct RunnerArgs {
    /// Exhibit a seeded fault (a discrepancy for the differential campaigns to find).
    #[arg(long, value_parser = parse_fault)]
    fault: Option<Fault>,
    /// Misbehave on purpose: exit-before-hello, crash-on:N, exit-on:N, hang-on:N, garbage-on:N (for
    /// testing the harness's handling of broken runners).
    #[arg(long, hide = true)]
    chaos: Option<String>,
}

#[derive(Args)]
struct MutantsArgs {
    /// Most cases per fault.
    #[arg(long, default_value_t = 256)]
    cases: u64,
    /// Campaign seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print a JSON list of {name, caught, cases_to_catch, shrunk_nodes, invariant, expected}.
    #[arg(long)]
    json: bool,
}

fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (i, n) = s.split_once('/').ok_or("shard must be I/N")?;
    let (i, n): (u64, u64) = (i.parse().map_err(|_| "bad shard index")?, n.parse().map_err(|_| "bad shard count")?);
    if n == 0 || i >= n {
        return Err(format!("shard {i}/{n}: need 0 <= I < N"));
    }
    Ok((i, n))
}

/// Longest wait a timeout may name: one day.
const MAX_WAIT_SECS: f64 = 86_400.0;

/// A timeout in seconds: a finite number from 0.001 to [`MAX_WAIT_SECS`].
fn parse_seconds(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(0.001..=MAX_WAIT_SECS).contains(&secs) {
        return Err(format!("{s} seconds: need a number from 0.001 to {MAX_WAIT_SECS}"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

fn parse_fault(s: &str) -> Result<Fault, String> {
    Fault::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Fault::all().iter().map(|f| f.name()).collect();
        format!("unknown fault `{s}`; faults: {}", names.join(", "))
    })
}

fn read_input(path: &Path) -> Result<Vec<u8>, Rejected> {
    if path.as_os_str() == "-" {
        let mut v = Vec::new();
        std::io::stdin().read_to_end(&mut v).map_err(|e| Rejected(format!("cannot read stdin: {e}")))?;
        Ok(v)
    } else {
        std::fs::read(path).map_err(|e| Rejected(format!("cannot read {}: {e}", path.display())))
    }
}

fn read_json(path: &Path) -> Result<serde_json::Value, Rejected> {
    serde_json::from_slice(&read_input(path)?).map_err(|e| Rejected(format!("{}: {e}", path.display())))
}

/// The files of `paths`, a folder standing for its `.pte` and `.ptd` files.
fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Rejected> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| Rejected(format!("cannot read {}: {e}", p.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "pte" || x == "ptd"))
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(Rejected(format!("{} holds no .pte or .ptd file", p.display())));
            }
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn is_ptd(bytes: &[u8]) -> bool {
    bytes.get(4..8) == Some(format::ptd::PTD_IDENTIFIER)
}

fn inspect(a: InspectArgs) -> CmdResult {
    let files = expand(&a.files)?;
    let mut status = Exit::Ok;
    for path in &files {
        let bytes = match read_input(path) {
            Ok(b) => b,
            Err(Rejected(e)) => {
                eprintln!("error: {e}");
                status = Exit::Rejected;
                continue;
            }
        };
        // With several files every document names its file (a JSON document gets a `file`
        // member, a refused file a `{file, error}` document of its own, a graph a comment), so
        // no report can be taken for another file's.
        let several = files.len() > 1;
        let named = |mut v: serde_json::Value| {
            if let (true, Some(o)) = (several, v.as_object_mut()) {
                o.insert("file".into(), json!(path.display().to_string()));
            }
            pretty(&v)
        };
        match (several, a.json, a.dot) {
            (true, false, false) => outln!("== {}", path.display()),
            (true, false, true) => outln!("// == {}", path.display()),
            _ => {}
        }
        let refused = |e: String| {
            eprintln!("error: {e} ({})", path.display());
            if several && a.json {
                outln!("{}", named(json!({"error": e})));
            }
        };
        if is_ptd(&bytes) {
            match format::load_ptd(&bytes) {
                Ok(ptd) if a.json => outln!("{}", named(ptecheck::inspect::ptd_json(&ptd))),
                Ok(ptd) => out!("{}", ptecheck::inspect::ptd_text(&ptd)),
                Err(e) => {
                    refused(e.to_string());
                    status = Exit::Rejected;
                }
            }
            continue;
        }
        match format::load(&bytes) {
            Ok(loaded) if a.json => outln!("{}", named(ptecheck::inspect::to_json(&loaded))),
            Ok(loaded) if a.dot => out!("{}", ptecheck::inspect::to_dot(&loaded)),
            Ok(loaded) => out!("{}", ptecheck::inspect::to_text(&loaded)),
            Err(e) => {
                refused(e.to_string());
                status = Exit::Rejected;
            }
        }
    }
    Ok(status)
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

fn check(a: CheckArgs) -> CmdResult {
    let bytes = read_input(&a.file)?;
    let loaded = format::load(&bytes)?;
    let violations = ptecheck::runtime::check_all_methods(&loaded);
    for v in &violations {
        eprintln!("error: {v} [{:?}]", v.code());
    }
    if violations.is_empty() {
        let methods: Vec<&str> = loaded.program.plans().iter().map(|p| p.name_str()).collect();
        outln!("ok: {} method(s) pass every init-time check: {}", methods.len(), methods.join(", "));
        Ok(Exit::Ok)
    } else {
        outln!("{} violation(s)", violations.len());
        Ok(Exit::Rejected)
    }
}

/// The exit code of one method's failure: a backend missing here, a method or input the
/// caller named wrongly, or a failed run.
fn exit_of(e: &RuntimeError) -> Exit {
    match e {
        RuntimeError::BackendNotAvailable { .. } => Exit::Unavailable,
        RuntimeError::MethodNotFound(_) | RuntimeError::Input { .. } => Exit::Rejected,
        _ => Exit::Failed,
    }
}

fn runtime(
    a: &RunArgs,
    multifn: &std::sync::Arc<ptecheck::backends::multifn::MultifnBackend>,
) -> Result<Runtime, Rejected> {
    let mut rt = Runtime::with_backends(ptecheck::backends::default_backends_with(multifn.clone()));
    rt.instruction_budget = a.budget;
    for o in &a.options {
        rt.options.parse_and_set(o)?;
    }
    Ok(rt)
}

fn run(a: RunArgs) -> CmdResult {
    if let Some(cmd) = &a.runner {
        return run_versus(&a, cmd);
    }
    let bytes = read_input(&a.file)?;
    let loaded = format::load(&bytes)?;
    let ptd_bytes = a.data.as_deref().map(read_input).transpose()?;
    let ptd = ptd_bytes.as_deref().map(format::load_ptd).transpose().map_err(|e| Rejected(format!("{e} (--data)")))?;
    let multifn = std::sync::Arc::new(ptecheck::backends::multifn::MultifnBackend::default());
    let rt = runtime(&a, &multifn)?;
    let session = Session::new(&loaded, &rt).with_external(ptd.as_ref());
    if let Some(path) = &a.expect {
        return run_expect(&session, &read_json(path)?, &a);
    }
    run_methods(&session, &loaded, given_inputs(&a)?, &a, &multifn)
}

/// The `--inputs` of `run`, if given.
fn given_inputs(a: &RunArgs) -> Result<Option<Vec<HostValue>>, Rejected> {
    let Some(p) = &a.inputs else { return Ok(None) };
    let v = read_json(p)?;
    let inputs = io::list_from_json(v.get("inputs").unwrap_or(&v), "$")
        .map_err(|e| Rejected(format!("{e} ({})", p.display())))?;
    Ok(Some(inputs))
}

/// `run FILE --runner CMD`: each method on the reference runtime and on the runner; exit 1 when
/// any ends otherwise. A file the reference loader refuses is still sent to the runner.
fn run_versus(a: &RunArgs, cmd: &str) -> CmdResult {
    if a.file.as_os_str() == "-" || a.data.as_deref().is_some_and(|d| d.as_os_str() == "-") {
        return Err(Rejected("--runner needs file paths (the runner reads the files itself), not stdin".into()));
    }
    let bytes = read_input(&a.file)?;
    let ptd_bytes = a.data.as_deref().map(read_input).transpose()?;
    let ptd = ptd_bytes.as_deref().map(format::load_ptd).transpose().map_err(|e| Rejected(format!("{e} (--data)")))?;
    let given = given_inputs(a)?;
    let loaded = format::load(&bytes);
    let names: Option<Vec<String>> =
        loaded.as_ref().ok().map(|l| l.program.plans().iter().map(|p| p.name_str().to_string()).collect());
    let methods: Vec<String> = match (&a.method, &names) {
        (Some(m), _) => vec![m.clone()],
        (None, Some(all)) if given.is_none() => all.clone(),
        (None, _) => vec!["forward".into()],
    };
    if let Some(all) = &names
        && let Some(m) = methods.iter().find(|m| !all.contains(m))
    {
        return Err(Rejected(format!("no method named `{m}`; methods: {}", all.join(", "))));
    }
    let multifn = std::sync::Arc::new(ptecheck::backends::multifn::MultifnBackend::default());
    let rt = runtime(a, &multifn)?;
    let mut cfg = ptecheck::runner::RunnerConfig::new(cmd);
    cfg.request_timeout = a.runner_timeout;
    let mut runner = ptecheck::runner::Runner::start(cfg)?;
    let data = a.data.as_deref().zip(ptd.as_ref());
    let results =
        ptecheck::oracle::versus::versus(&rt, &a.file, &loaded, data, &methods, given.as_deref(), &mut runner);
    let all_same = results.iter().all(|v| v.same());
    if a.json {
        let methods: serde_json::Map<String, serde_json::Value> = results
            .iter()
            .map(|v| {
                (v.method.clone(), json!({"same": v.same(), "ours": v.ours.to_json(), "runner": v.theirs.to_json()}))
            })
            .collect();
        outln!("{}", pretty(&json!({"runner": runner.hello(), "methods": methods, "all_same": all_same})));
    } else {
        for v in &results {
            let verdict = if v.same() { "same" } else { "DIFFERENT" };
            outln!("{}: {verdict}\n  ours:   {}\n  runner: {}", v.method, v.ours.describe(), v.theirs.describe());
        }
    }
    Ok(if all_same { Exit::Ok } else { Exit::Failed })
}

fn run_expect(session: &Session<'_, '_>, doc: &serde_json::Value, a: &RunArgs) -> CmdResult {
    let outcomes = ptecheck::oracle::replay::run_expect(session, doc)?;
    let all_ok = outcomes.iter().all(|o| o.ok);
    let unavailable = !all_ok && outcomes.iter().all(|o| o.ok || o.backend_unavailable);
    let worst = outcomes.iter().filter_map(|o| o.max_ulps).max();
    if a.json {
        let summary = a.trace.then(|| session.trace().summary());
        outln!("{}", pretty(&json!({"runs": outcomes, "all_ok": all_ok, "max_ulps": worst, "trace": summary})));
    } else {
        for o in &outcomes {
            let status = if o.ok {
                "ok"
            } else if o.backend_unavailable {
                "backend not available"
            } else {
                "MISMATCH"
            };
            outln!(
                "{} run {} vs {}: {status} (max gap {} ulp, allowed {}){}",
                o.method,
                o.run,
                o.against,
                o.max_ulps.map_or("-".into(), |u| u.to_string()),
                o.tolerance_ulps,
                o.detail.as_ref().map(|d| format!(": {d}")).unwrap_or_default()
            );
        }
        outln!("largest ulp gap: {}", worst.map_or("-".into(), |u| u.to_string()));
        if a.trace {
            print_trace(session.trace());
        }
    }
    Ok(if all_ok {
        Exit::Ok
    } else if unavailable {
        Exit::Unavailable
    } else {
        Exit::Failed
    })
}

fn run_methods(
    session: &Session<'_, '_>,
    loaded: &LoadedProgram<'_>,
    given: Option<Vec<HostValue>>,
    a: &RunArgs,
    multifn: &ptecheck::backends::multifn::MultifnBackend,
) -> CmdResult {
    let methods: Vec<String> = match &a.method {
        Some(m) => vec![m.clone()],
        None if given.is_some() => vec!["forward".into()],
        None => session.method_names(),
    };
    if let Some(m) = methods.iter().find(|m| loaded.program.plan(m).is_none()) {
        return Err(Rejected(format!("no method named `{m}`; methods: {}", session.method_names().join(", "))));
    }
    let mut results = serde_json::Map::new();
    let mut status = Exit::Ok;
    // Load every method first and keep them alive together (as an app holding several methods
    // does), so delegates of different methods can share a loaded model; then run each.
    let mut loaded_methods: Vec<_> = methods.iter().map(|name| session.load(name)).collect();
    for (name, m) in methods.iter().zip(loaded_methods.iter_mut()) {
        let outcome = match m {
            Err(e) => Err(e.clone()),
            Ok(m) => Session::execute(m, given.as_deref()),
        };
        match outcome {
            Ok(outs) => {
                // An output the corpus encoding cannot hold (a float16 tensor, …) is shown as
                // `not_encodable` and named on stderr, and the run fails: it is never printed short.
                let enc = io::list_to_json(&outs, "outputs").unwrap_or_else(|e| {
                    eprintln!("error: {name}: {e} (not in the corpus encoding)");
                    status = status.max(Exit::Failed);
                    io::list_to_report_json(&outs)
                });
                if !a.json {
                    outln!("{name}: {}", serde_json::to_string(&enc).unwrap_or_default());
                }
                results.insert(name.clone(), json!({"outputs": enc}));
            }
            Err(e) => {
                eprintln!("error: {e}");
                results.insert(name.clone(), json!({"error": e.to_string(), "code": format!("{:?}", e.code())}));
                status = status.max(exit_of(&e));
            }
        }
    }
    let (loads, live, resident) = multifn.table.totals();
    drop(loaded_methods);
    if a.json {
        let summary = a.trace.then(|| session.trace().summary());
        let models = a.trace.then(|| {
            json!({"loads": loads, "live_while_loaded": live, "resident_bytes_while_loaded": resident,
                   "per_key": multifn.table.stats().into_iter().map(|(k, s)| json!({"cache_key": k.cache_key, "stats": s})).collect::<Vec<_>>()})
        });
        outln!("{}", pretty(&json!({"methods": results, "trace": summary, "multifn_models": models})));
    } else if a.trace {
        print_trace(session.trace());
        if loads > 0 {
            outln!(
                "multifn models: {loads} load(s); {live} live, {resident} resident bytes while the methods were loaded"
            );
            for (k, s) in multifn.table.stats() {
                outln!("  {}: {} load(s), {} unload(s)", k.cache_key, s.loads, s.unloads);
            }
        }
    }
    Ok(status)
}

fn print_trace(trace: &Trace) {
    let s = trace.summary();
    outln!(
        "trace: {} init, {} init failed, {} execute, {} destroy, {} live, peak handle bytes {}",
        s.inits,
        s.init_failures,
        s.executes,
        s.destroys,
        s.live_handles,
        s.peak_handle_bytes
    );
    for (site, n) in &s.executes_per_site {
        outln!("  executes at {site}: {n}");
    }
}

fn emit(a: EmitArgs) -> CmdResult {
    use ptecheck::generator::examples::{EXAMPLES, example};
    let program = match (&a.program, &a.example) {
        (Some(path), _) => {
            let text =
                String::from_utf8(read_input(path)?).map_err(|e| Rejected(format!("{}: {e}", path.display())))?;
            ptecheck::ir::saved::load(&text).map_err(|e| Rejected(format!("{e} ({})", path.display())))?
        }
        (None, Some(name)) => {
            example(name).ok_or_else(|| Rejected(format!("no example `{name}`; examples: {}", EXAMPLES.join(", "))))?
        }
        (None, None) => return Err(Rejected(format!("give PROGRAM.json or --example NAME ({})", EXAMPLES.join(", ")))),
    };
    if a.save_json {
        out!("{}", ptecheck::ir::saved::save(&program));
        return Ok(Exit::Ok);
    }
    if a.output.is_none() && !a.listing {
        return Err(Rejected("give -o OUT.pte (or --listing / --save-json)".into()));
    }
    let opts = ptecheck::emit::EmitOptions {
        share: !a.no_share,
        delegate_segments: !a.inline_delegates,
        allow_while: a.allow_while,
        fault: None,
    };
    let bytes = match ptecheck::emit::emit(&program, &opts)
        .map_err(|e| e.to_string())
        .and_then(|e| e.to_bytes().map_err(|e| e.to_string()))
    {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(Exit::Failed);
        }
    };
    if a.listing {
        match format::load(&bytes) {
            Ok(l) => out!("{}", ptecheck::inspect::listing(&l)),
            Err(e) => {
                eprintln!("error: emitted program does not load: {e}");
                return Ok(Exit::Failed);
            }
        }
    }
    if let Some(path) = &a.output {
        std::fs::write(path, &bytes).map_err(|e| Rejected(format!("cannot write {}: {e}", path.display())))?;
        if !a.listing {
            outln!("wrote {} ({} bytes)", path.display(), bytes.len());
        }
    }
    Ok(Exit::Ok)
}

fn config_of(path: Option<&Path>) -> Result<ptecheck::generator::GenConfig, Rejected> {
    match path {
        None => Ok(ptecheck::generator::GenConfig::default()),
        Some(p) => {
            let c: ptecheck::generator::GenConfig =
                serde_json::from_value(read_json(p)?).map_err(|e| Rejected(format!("{}: {e}", p.display())))?;
            c.check().map_err(|e| Rejected(format!("{}: {e}", p.display())))?;
            Ok(c)
        }
    }
}

fn bar(enabled: bool) -> indicatif::ProgressBar {
    if !enabled {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(0);
    b.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} cases {per_sec} eta {eta} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    b
}

fn campaign(a: CampaignArgs) -> CmdResult {
    use ptecheck::oracle::campaign::{CampaignOptions, Progress, run_watched};
    let config = config_of(a.config.as_deref())?;
    let opts = CampaignOptions {
        cases: a.cases,
        seed: a.seed,
        config,
        config_path: a.config.as_ref().map(|p| p.display().to_string()),
        shard: a.shard.unwrap_or((0, 1)),
        swarm: !a.no_swarm,
        fault: a.fault,
        only_case: a.case,
        stop_on_failure: !a.keep_going,
        jobs: a.jobs,
        negative_end_to_end: a.negative_end_to_end,
        ..CampaignOptions::default()
    };
    if let Some(n) = a.processes {
        return campaign_processes(&a, &opts, n);
    }
    let bar = bar(!a.json && std::io::stderr().is_terminal());
    if let Some(cmd) = &a.runner {
        return differential(&a, cmd, opts, &bar);
    }
    let hung = |o: &ptecheck::oracle::watchdog::Overdue| {
        // Written with the progress bar cleared, so the lines are not drawn over.
        bar.suspend(|| {
            eprintln!(
                "ptecheck: case {} has run for {:.1} s, past --case-timeout {} s: hung (this process ends; no report)\nreplay: {}",
                o.case,
                o.running.as_secs_f64(),
                a.case_timeout.as_secs_f64(),
                ptecheck::oracle::campaign::replay_command(&opts, o.case)
            )
        });
        std::process::exit(i32::from(Exit::Hung.number()));
    };
    let r = run_watched(
        &opts,
        &mut |p: Progress| {
            bar.set_length(p.total);
            bar.set_position(p.done);
            if p.failures > 0 {
                bar.set_message(format!("{} failing", p.failures));
            }
        },
        Some((a.case_timeout, &hung)),
    );
    bar.finish_and_clear();
    if let Some(dir) = &a.save_failures {
        for folder in ptecheck::oracle::reports::save_failures(&opts, &r, dir)? {
            eprintln!("reproducer: {}", folder.display());
        }
    }
    print_report(&r, a.json);
    Ok(if r.failures > 0 { Exit::Failed } else { Exit::Ok })
}

/// `campaign --processes N`: the same campaign as N shard processes of this program, one job
/// each; the report says so on stderr (its job count and peak RSS are one process's).
fn campaign_processes(a: &CampaignArgs, opts: &ptecheck::oracle::campaign::CampaignOptions, n: u64) -> CmdResult {
    let program = std::env::current_exe().map_err(|e| Rejected(format!("own path: {e}")))?;
    let timeout = vec!["--case-timeout".to_string(), a.case_timeout.as_secs_f64().to_string()];
    let r = ptecheck::oracle::processes::run(&program, opts, &timeout, n).map_err(|e| Rejected(e.to_string()))?;
    eprintln!("ptecheck: ran as {n} shard processes of one job each; peak RSS is the largest process's");
    print_report(&r, a.json);
    Ok(if r.failures > 0 { Exit::Failed } else { Exit::Ok })
}

/// Merges what can be merged: each report left out is named on stderr (and the exit is 2), and
/// the merged report of the others is still printed, with the shards no report covered.
fn merge_reports(a: MergeArgs) -> CmdResult {
    let outcome = ptecheck::oracle::reports::merge_files(&a.reports);
    for e in &outcome.refused {
        eprintln!("ptecheck: left out: {e}");
    }
    let (missing, count) = (outcome.missing_shards(), outcome.missing_shard_count());
    if count as usize > missing.len() {
        eprintln!("ptecheck: no report covers {count} shards of the campaign, the first {missing:?}");
    } else if !missing.is_empty() {
        eprintln!("ptecheck: no report covers shards {missing:?} of the campaign");
    }
    let Some(m) = &outcome.merged else { return Ok(Exit::Rejected) };
    print_report(m, a.json);
    Ok(if !outcome.refused.is_empty() {
        Exit::Rejected
    } else if m.failures > 0 {
        Exit::Failed
    } else {
        Exit::Ok
    })
}

fn differential(
    a: &CampaignArgs,
    cmd: &str,
    campaign: ptecheck::oracle::campaign::CampaignOptions,
    bar: &indicatif::ProgressBar,
) -> CmdResult {
    use ptecheck::oracle::differential::{DiffOptions, run};
    let mut runner = ptecheck::runner::RunnerConfig::new(cmd);
    runner.request_timeout = a.runner_timeout;
    runner.start_timeout = a.runner_start_timeout;
    let workdir = std::env::temp_dir().join(format!("ptecheck-diff-{}", std::process::id()));
    let opts = DiffOptions {
        campaign,
        runner,
        workdir: workdir.clone(),
        out: a.out.clone(),
        negative: a.negative,
        shrink_budget: 120,
        max_reproducers: 5,
    };
    let r = run(&opts, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    let _ = std::fs::remove_dir_all(&workdir);
    let r = r?;
    if a.json {
        outln!("{}", pretty(&serde_json::to_value(&r).unwrap_or_default()));
    } else {
        let h = &r.runner;
        outln!(
            "runner: {} {} (backends {}, {} operators)",
            h["name"].as_str().unwrap_or("?"),
            h["version"].as_str().unwrap_or("?"),
            h["backends"],
            h["operators"].as_array().map_or(0, Vec::len)
        );
        outln!(
            "cases {}  methods run {}  exact {}  within bound {}  mismatch {}  ({:.1} programs/s, {:.1} s)",
            r.cases,
            r.methods_run,
            r.exact,
            r.within_bound,
            r.mismatch,
            r.programs_per_second,
            r.elapsed_seconds
        );
        outln!(
            "valid programs refused: {:?}  crashes {}  hangs {}  garbage {}  unsent {}  runner starts {}",
            r.refused,
            r.crashes,
            r.hangs,
            r.garbage,
            r.unsent,
            r.runner_starts
        );
        outln!("delegate calls executed by the runner: {:?}", r.delegate_calls);
        if !r.not_generated.is_empty() {
            outln!(
                "not generated, the runner did not announce them ({}): {}",
                r.not_generated.len(),
                r.not_generated.join(", ")
            );
        }
        if r.unprepared > 0 {
            outln!("CASES NOT PREPARED: {}", r.unprepared);
            for x in &r.unprepared_reasons {
                outln!("  {x}");
            }
        }
        for x in &r.refusals {
            outln!("  refused: {x}");
        }
        for m in &r.mismatches {
            outln!(
                "MISMATCH case {} {} shared={}: {}",
                m.case,
                m.method,
                m.shared,
                m.reproducer.as_ref().map_or("-".into(), |p| p.display().to_string())
            );
        }
        for f in &r.runner_failures {
            outln!(
                "{} case {} {} shared={}: {}{}",
                f.outcome.to_uppercase(),
                f.case,
                f.method,
                f.shared,
                f.detail,
                f.reproducer.as_ref().map(|p| format!(" ({})", p.display())).unwrap_or_default()
            );
        }
        if a.negative {
            outln!("corruptions sent {}  rejected at load {:?}", r.corruptions_sent, r.rejected);
            for f in &r.findings {
                outln!(
                    "FINDING {} {}: {} time(s); e.g. {} -> {}{}",
                    f.outcome,
                    f.class,
                    f.count,
                    f.corruption,
                    f.detail,
                    f.reproducer.as_ref().map(|p| format!(" ({})", p.display())).unwrap_or_default()
                );
            }
        }
    }
    let bad = r.mismatch > 0
        || r.crashes > 0
        || r.hangs > 0
        || r.garbage > 0
        || r.unsent > 0
        || r.unprepared > 0
        || !r.findings.is_empty();
    Ok(if bad { Exit::Failed } else { Exit::Ok })
}

fn gen_corpus(a: GenArgs) -> CmdResult {
    use ptecheck::oracle::campaign::CampaignOptions;
    let opts = CampaignOptions {
        cases: a.cases,
        seed: a.seed,
        config: config_of(a.config.as_deref())?,
        config_path: a.config.as_ref().map(|p| p.display().to_string()),
        shard: a.shard.unwrap_or((0, 1)),
        swarm: !a.no_swarm,
        ..CampaignOptions::default()
    };
    let bar = bar(std::io::stderr().is_terminal());
    bar.set_length(a.cases / opts.shard.1.max(1));
    let s = ptecheck::oracle::conformance::generate_corpus(&opts, &a.output, &mut |n| bar.set_position(n))
        .map_err(|e| Rejected(e.to_string()))?;
    bar.finish_and_clear();
    outln!(
        "wrote {} cases ({} methods; outputs: {} exact, {} with a tolerance, {} unverifiable) to {}",
        s.cases,
        s.methods,
        s.exact_outputs,
        s.bounded_outputs,
        s.unverifiable_outputs,
        a.output.display()
    );
    Ok(Exit::Ok)
}

fn runner(a: RunnerArgs) -> CmdResult {
    use ptecheck::runner::server::{Chaos, serve};
    let chaos = a.chaos.as_deref().map(Chaos::parse).transpose().map_err(|e| Rejected(e.to_string()))?;
    let stdin = std::io::stdin();
    serve(stdin.lock(), std::io::stdout().lock(), a.fault, chaos)?;
    Ok(Exit::Ok)
}

/// A campaign report on stdout: one JSON object with `json`, else [`print_campaign`]'s text.
fn print_report(r: &ptecheck::oracle::campaign::CampaignResult, json: bool) {
    if json {
        outln!("{}", serde_json::to_string_pretty(r).unwrap_or_default());
    } else {
        print_campaign(r);
    }
}

fn print_campaign(r: &ptecheck::oracle::campaign::CampaignResult) {
    let peak = r.peak_rss_kib.map_or(String::new(), |kib| format!(", peak RSS {:.1} MiB", kib as f64 / 1024.0));
    outln!(
        "cases {}  failures {}  {:.1} programs/s  ({:.1} s, {} jobs{peak})",
        r.cases,
        r.failures,
        r.programs_per_second,
        r.elapsed_seconds,
        r.jobs
    );
    outln!("invariants checked:");
    for (k, v) in &r.invariants {
        outln!("  {k:<9} {v}");
    }
    outln!("features generated (programs):");
    let mut names: Vec<String> = ptecheck::generator::feature_names();
    let extra: Vec<String> = r.features.keys().filter(|k| !names.contains(k)).cloned().collect();
    names.extend(extra);
    for f in &names {
        outln!("  {f:<34} {}", r.features.get(f.as_str()).copied().unwrap_or(0));
    }
    let t = &r.timings;
    outln!(
        "time: generate {:.3}s emit {:.3}s write {:.3}s load {:.3}s init {:.3}s execute {:.3}s eager {:.3}s compare {:.3}s negative {:.3}s",
        r.generate.as_secs_f64(),
        t.emit.as_secs_f64(),
        t.write.as_secs_f64(),
        t.load.as_secs_f64(),
        t.init.as_secs_f64(),
        t.execute.as_secs_f64(),
        t.eager.as_secs_f64(),
        t.compare.as_secs_f64(),
        t.negative.as_secs_f64()
    );
    if r.failing_cases.len() > 1 {
        outln!("failing cases:");
        for c in &r.failing_cases {
            outln!("  seed {} case {}: {}  ({})", c.seed, c.case, c.invariant, c.command);
        }
    }
    if let Some(f) = &r.failure {
        outln!(
            "\nFAILURE at seed {} case {} (shrunk from {} to {} nodes)",
            f.seed,
            f.case,
            f.original_nodes,
            f.shrunk_nodes
        );
        for x in &f.failures {
            outln!("  {}: {}", x.invariant, x.detail);
        }
        outln!("reproduce: {}", f.command);
        outln!("\nprogram (text form):\n{}", f.program_text);
        outln!("program (saved JSON; `ptecheck emit FILE.json --listing`):\n{}", f.program_json);
    }
}

fn mutants(a: MutantsArgs) -> CmdResult {
    use ptecheck::oracle::campaign::CampaignOptions;
    let base = CampaignOptions { seed: a.seed, shrink_budget: 150, ..CampaignOptions::default() };
    let results = ptecheck::oracle::mutants::run_mutants(&base, a.cases, &Fault::all());
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&results).unwrap_or_default());
    } else {
        outln!("{:<32} {:<7} {:>14} {:>13}  invariant (expected)", "fault", "caught", "cases_to_catch", "shrunk_nodes");
        for r in &results {
            outln!(
                "{:<32} {:<7} {:>14} {:>13}  {} ({})",
                r.name,
                r.caught,
                r.cases_to_catch.map_or("-".into(), |c| c.to_string()),
                r.shrunk_nodes.map_or("-".into(), |c| c.to_string()),
                r.invariant.clone().unwrap_or_default(),
                r.expected
            );
        }
    }
    let all = results.iter().all(|r| r.caught && r.invariant.as_deref() == Some(r.expected.as_str()));
    Ok(if all { Exit::Ok } else { Exit::Failed })
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Inspect(a) => inspect(a),
        Command::Check(a) => check(a),
        Command::Run(a) => run(a),
        Command::Emit(a) => emit(a),
        Command::Campaign(a) => campaign(a),
        Command::Mutants(a) => mutants(a),
        Command::Gen(a) => gen_corpus(a),
        Command::Runner(a) => runner(a),
        Command::MergeReports(a) => merge_reports(a),
    };
    let exit = match result {
        Ok(e) => e,
        Err(Rejected(msg)) => {
            eprintln!("error: {msg}");
            Exit::Rejected
        }
    };
    match STDOUT_ENDED.get() {
        Some(Some(e)) => {
            eprintln!("error: cannot write standard output: {e}");
            exit.max(Exit::Rejected).code()
        }
        Some(None) | None => exit.code(),
    }
}
