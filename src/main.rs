//! The `ptecheck` command line: parses arguments, calls the library, prints. Each subcommand's
//! arguments are one clap `Args` struct; every outcome maps to an exit code in [`Exit`].
#![forbid(unsafe_code)]

mod cli;

use clap::Parser;
use cli::{
    CampaignArgs, CheckArgs, Cli, Command, DiffArgs, EmitArgs, ExporterArgs, GenArgs, GenerationArgs, InspectArgs,
    MergeArgs, MutantsArgs, RunArgs, RunnerArgs,
};

/// The campaign allocates many small short-lived objects; mimalloc serves them faster than the
/// system allocator (30,000 no-swarm cases on one job took 10.3-10.4 s against 15.3-15.4 s on
/// 2026-12-02). Built with `no_thp`, so its heaps grow in small pages, not 2 MiB ones. The
/// `flat-memory` feature swaps in jemalloc ([`ptecheck::allocator`]).
#[global_allocator]
static ALLOCATOR: ptecheck::allocator::Chosen = ptecheck::allocator::Chosen;
use ptecheck::backends::multifn::MultifnBackend;
use ptecheck::campaign::{self, CampaignOptions};
use ptecheck::exit::Exit;
use ptecheck::fault::Fault;
use ptecheck::format;
use ptecheck::runtime::{HostValue, Runtime, Session, io};
use serde_json::json;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

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

/// A command that cannot proceed: bad arguments or unreadable / rejected input (exit 2).
struct Rejected(String);

impl<E: std::fmt::Display> From<E> for Rejected {
    fn from(e: E) -> Self {
        Rejected(e.to_string())
    }
}

type CmdResult = Result<Exit, Rejected>;

impl GenerationArgs {
    /// Campaign options for `cases` cases of `seed` generated so.
    fn options(&self, cases: u64, seed: u64) -> Result<CampaignOptions, Rejected> {
        Ok(CampaignOptions {
            cases,
            seed,
            config: config_of(self.config.as_deref())?,
            config_path: self.config.as_ref().map(|p| p.display().to_string()),
            shard: self.shard.unwrap_or((0, 1)),
            swarm: !self.no_swarm,
            ..CampaignOptions::default()
        })
    }
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

fn inspect(a: InspectArgs) -> CmdResult {
    use ptecheck::inspect::{Form, document};
    let files = expand(&a.files)?;
    let form = if a.json {
        Form::Json
    } else if a.dot {
        Form::Dot
    } else {
        Form::Text
    };
    let mut status = Exit::Ok;
    for path in &files {
        let shown = path.display().to_string();
        let doc = read_input(path).map_err(|Rejected(e)| (e, None)).and_then(|bytes| {
            document(&bytes, form, (files.len() > 1).then_some(shown.as_str()), &campaign::methods::check_file)
                .map_err(|(e, doc)| (format!("{e} ({shown})"), doc))
        });
        match doc {
            Ok(doc) => out!("{doc}"),
            Err((e, doc)) => {
                eprintln!("error: {e}");
                out!("{}", doc.unwrap_or_default());
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
    let r = campaign::methods::check_file(&loaded);
    for (v, code) in &r.broken {
        eprintln!("error: {v} [{code:?}]");
    }
    out!("{r}");
    Ok(r.exit())
}

fn runtime(a: &RunArgs, multifn: &Arc<MultifnBackend>) -> Result<Runtime, Rejected> {
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
    let multifn = Arc::new(MultifnBackend::default());
    let rt = runtime(&a, &multifn)?;
    let session = Session::new(&loaded, &rt).with_external(ptd.as_ref());
    if let Some(path) = &a.expect {
        let r = campaign::replay::replay(&session, &read_json(path)?, a.trace)?;
        print(&r, a.json, || r.to_json());
        return Ok(r.exit());
    }
    let given = given_inputs(&a)?;
    let methods =
        campaign::methods::select_methods(a.method.as_deref(), given.is_some(), Some(&session.method_names()))?;
    let r = campaign::methods::run_methods(&session, &methods, given.as_deref(), &multifn, a.trace);
    for e in r.errors() {
        eprintln!("error: {e}");
    }
    print(&r, a.json, || r.to_json());
    Ok(r.exit())
}

/// A report on stdout: its JSON form (`json`), else its text.
fn print(r: &impl std::fmt::Display, json: bool, as_json: impl FnOnce() -> serde_json::Value) {
    if json {
        outln!("{}", pretty(&as_json()));
    } else {
        out!("{r}");
    }
}

/// The `--inputs` of `run`, if given.
fn given_inputs(a: &RunArgs) -> Result<Option<Vec<HostValue>>, Rejected> {
    let Some(p) = &a.inputs else { return Ok(None) };
    let v = read_json(p)?;
    let inputs = io::list_from_json(v.get("inputs").unwrap_or(&v), "$")
        .map_err(|e| Rejected(format!("{e} ({})", p.display())))?;
    Ok(Some(inputs))
}

/// `run FILE --runner CMD`: each method on the reference runtime and on the runner. A file the
/// reference loader refuses is still sent to the runner.
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
    let methods = campaign::methods::select_methods(a.method.as_deref(), given.is_some(), names.as_deref())?;
    let multifn = Arc::new(MultifnBackend::default());
    let rt = runtime(a, &multifn)?;
    let mut cfg = ptecheck::runner::RunnerConfig::new(cmd);
    cfg.request_timeout = a.runner_timeout;
    let mut runner = ptecheck::runner::Runner::start(cfg)?;
    let data = a.data.as_deref().zip(ptd.as_ref());
    let results = campaign::versus::versus(&rt, &a.file, &loaded, data, &methods, given.as_deref(), &mut runner);
    let r = campaign::versus::VersusReport { runner: json!(runner.hello()), methods: results };
    print(&r, a.json, || r.to_json());
    Ok(r.exit())
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
        ..ptecheck::emit::EmitOptions::default()
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

/// `--processes N`, with 0 standing for one per core.
fn process_count(n: u64) -> u64 {
    if n == 0 { campaign::effective_jobs(0) as u64 } else { n }
}

fn campaign(a: CampaignArgs) -> CmdResult {
    use ptecheck::campaign::{Progress, run_watched};
    let opts = CampaignOptions {
        fault: a.fault,
        only_case: a.case,
        stop_on_failure: !a.keep_going,
        jobs: a.jobs,
        negative_end_to_end: a.negative_end_to_end,
        ..a.generation.options(a.cases, a.seed)?
    };
    if let Some(dir) = &a.recorded {
        let mut runner = match &a.runner {
            Some(cmd) => {
                let mut c = ptecheck::runner::RunnerConfig::new(cmd.as_str());
                c.request_timeout = a.runner_timeout;
                c.start_timeout = a.runner_start_timeout;
                Some(ptecheck::runner::Runner::start(c)?)
            }
            None => None,
        };
        let work = std::env::temp_dir().join(format!("ptecheck-recorded-{}", std::process::id()));
        let r = campaign::export::replay_record(dir, runner.as_mut().map(|r| (r, work.as_path())));
        let _ = std::fs::remove_dir_all(&work);
        let r = r?;
        print(&r, a.json, || serde_json::to_value(&r).unwrap_or_default());
        return Ok(r.exit());
    }
    if let (Some(n), None) = (a.processes, &a.exporter) {
        if a.runner.is_some() {
            return Err(Rejected("--processes goes with --runner only in an exporter campaign (--exporter)".into()));
        }
        return campaign_processes(&a, &opts, process_count(n));
    }
    let bar = bar(!a.json && std::io::stderr().is_terminal());
    if let Some(cmd) = &a.exporter {
        return export_campaign(&a, cmd, opts, &bar);
    }
    if let Some(cmd) = &a.runner {
        return differential(&a, cmd, opts, &bar);
    }
    let hung = |o: &campaign::watchdog::Overdue| {
        // Written with the progress bar cleared, so the lines are not drawn over.
        bar.suspend(|| {
            eprintln!(
                "ptecheck: case {} has run for {:.1} s, past --case-timeout {} s: hung (this process ends; no report)\nreplay: {}",
                o.case,
                o.running.as_secs_f64(),
                a.case_timeout.as_secs_f64(),
                campaign::replay_command(&opts, o.case)
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
        for folder in campaign::reports::save_failures(&opts, &r, dir)? {
            eprintln!("reproducer: {}", folder.display());
        }
    }
    print_report(&r, a.json);
    Ok(r.exit())
}

/// `campaign --processes N`: the same campaign as N shard processes of this program, one job
/// each; the report says so on stderr (its job count and peak RSS are one process's).
fn campaign_processes(a: &CampaignArgs, opts: &CampaignOptions, n: u64) -> CmdResult {
    let program = std::env::current_exe().map_err(|e| Rejected(format!("own path: {e}")))?;
    let timeout = vec!["--case-timeout".to_string(), a.case_timeout.as_secs_f64().to_string()];
    let r = campaign::processes::run(&program, opts, &timeout, n).map_err(|e| Rejected(e.to_string()))?;
    eprintln!("ptecheck: ran as {n} shard processes of one job each; peak RSS is the largest process's");
    print_report(&r, a.json);
    Ok(r.exit())
}

/// Merges what can be merged: each report left out is named on stderr (and the exit is 2), and
/// the merged report of the others is still printed, with the shards no report covered.
fn merge_reports(a: MergeArgs) -> CmdResult {
    let outcome = campaign::reports::merge_files(&a.reports);
    for w in outcome.warnings() {
        eprintln!("ptecheck: {w}");
    }
    if let Some(m) = &outcome.merged {
        print_report(m, a.json);
    }
    Ok(outcome.exit())
}

fn differential(a: &CampaignArgs, cmd: &str, campaign: CampaignOptions, bar: &indicatif::ProgressBar) -> CmdResult {
    use ptecheck::campaign::differential::{DiffOptions, run};
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
    print(&r, a.json, || serde_json::to_value(&r).unwrap_or_default());
    Ok(r.exit())
}

fn export_campaign(a: &CampaignArgs, cmd: &str, campaign: CampaignOptions, bar: &indicatif::ProgressBar) -> CmdResult {
    use ptecheck::campaign::export::{ExportOptions, run};
    let mut exporter = ptecheck::exporter::ExporterConfig::new(cmd);
    exporter.request_timeout = a.exporter_timeout;
    exporter.start_timeout = a.exporter_start_timeout;
    let runner = a.runner.as_ref().map(|r| {
        let mut c = ptecheck::runner::RunnerConfig::new(r.as_str());
        c.request_timeout = a.runner_timeout;
        c.start_timeout = a.runner_start_timeout;
        c
    });
    let workdir = std::env::temp_dir().join(format!("ptecheck-export-{}", std::process::id()));
    let processes = a.processes;
    let opts = ExportOptions {
        campaign,
        exporter,
        runner,
        workdir: workdir.clone(),
        out: a.out.clone(),
        record: a.record.clone(),
        shrink_budget: 40,
        max_reproducers: 5,
        examples: a.examples,
    };
    if let Some(n) = processes.map(process_count) {
        let program = std::env::current_exe().map_err(|e| Rejected(format!("own path: {e}")))?;
        let args = ptecheck::campaign::export::child_args(&opts);
        let r: ptecheck::campaign::export_report::ExportReport =
            ptecheck::campaign::processes::run_args(&program, &args, n).map_err(|e| Rejected(e.to_string()))?;
        eprintln!("ptecheck: ran as {n} shard processes");
        print(&r, a.json, || serde_json::to_value(&r).unwrap_or_default());
        return Ok(r.exit());
    }
    let r = run(&opts, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    let _ = std::fs::remove_dir_all(&workdir);
    let r = r?;
    print(&r, a.json, || serde_json::to_value(&r).unwrap_or_default());
    Ok(r.exit())
}

fn gen_corpus(a: GenArgs) -> CmdResult {
    let opts = a.generation.options(a.cases, a.seed)?;
    let bar = bar(std::io::stderr().is_terminal());
    bar.set_length(a.cases / opts.shard.1.max(1));
    let s = campaign::conformance::generate_corpus(&opts, &a.output, &mut |n| bar.set_position(n))
        .map_err(|e| Rejected(e.to_string()))?;
    bar.finish_and_clear();
    outln!("wrote {s} to {}", a.output.display());
    Ok(Exit::Ok)
}

/// `diff A B`: exit 0 when the two programs have one structure, 1 when they differ.
fn diff(a: DiffArgs) -> CmdResult {
    use ptecheck::inspect::shape::{diff, shape};
    let (x, y) = (read_input(&a.a)?, read_input(&a.b)?);
    let sx = shape(&format::load(&x).map_err(|e| Rejected(format!("{e} ({})", a.a.display())))?);
    let sy = shape(&format::load(&y).map_err(|e| Rejected(format!("{e} ({})", a.b.display())))?);
    let differences = diff(&sx, &sy);
    if a.json {
        outln!("{}", pretty(&json!({"a": sx, "b": sy, "differences": differences})));
    } else if differences.is_empty() {
        outln!("same structure: {} plan(s), {} distinct blob(s)", sx.plans.len(), sx.blobs);
    } else {
        for d in &differences {
            outln!("{d}");
        }
    }
    Ok(Exit::failed_if(!differences.is_empty()))
}

fn exporter(a: ExporterArgs) -> CmdResult {
    use ptecheck::child::Chaos;
    let chaos = a.chaos.as_deref().map(Chaos::parse).transpose().map_err(|e| Rejected(e.to_string()))?;
    ptecheck::exporter::server::emit_options(a.rules, a.fault).map_err(Rejected)?;
    let stdin = std::io::stdin();
    ptecheck::exporter::server::serve(stdin.lock(), std::io::stdout().lock(), a.rules, a.fault, chaos)?;
    Ok(Exit::Ok)
}

fn runner(a: RunnerArgs) -> CmdResult {
    use ptecheck::runner::server::{Chaos, serve};
    let chaos = a.chaos.as_deref().map(Chaos::parse).transpose().map_err(|e| Rejected(e.to_string()))?;
    let stdin = std::io::stdin();
    serve(stdin.lock(), std::io::stdout().lock(), a.fault, chaos)?;
    Ok(Exit::Ok)
}

/// A campaign report on stdout: one JSON object with `json`, else its text.
fn print_report(r: &campaign::CampaignResult, json: bool) {
    print(r, json, || serde_json::to_value(r).unwrap_or_default());
}

fn mutants(a: MutantsArgs) -> CmdResult {
    let base = CampaignOptions { seed: a.seed, shrink_budget: 150, ..CampaignOptions::default() };
    let r = campaign::mutants::run_mutants(&base, a.cases, &Fault::all());
    print(&r, a.json, || serde_json::to_value(&r).unwrap_or_default());
    Ok(r.exit())
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
        Command::Exporter(a) => exporter(a),
        Command::Diff(a) => diff(a),
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
            ExitCode::from(exit.max(Exit::Rejected).number())
        }
        Some(None) | None => ExitCode::from(exit.number()),
    }
}
