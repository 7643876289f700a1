//! The command line's arguments: one clap `Args` struct per subcommand, and the arguments several
//! share (flattened). Declarations only: `main.rs` parses them and runs each command.

use clap::{Args, Parser, Subcommand};
use ptecheck::campaign;
use ptecheck::fault::Fault;
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "ptecheck", version, about = "Verify, inspect and fuzz ExecuTorch .pte programs")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
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
    /// Serve the exporter protocol (docs/exporter-protocol.md) from the reference emitter.
    Exporter(ExporterArgs),
    /// Compare two programs' structure: plans, delegates, call sites, blobs, compile specs.
    Diff(DiffArgs),
    /// Merge `campaign --json` reports of shards into one (counts, features, failures).
    MergeReports(MergeArgs),
}

#[derive(Args)]
pub struct MergeArgs {
    /// Reports written by `campaign --json`.
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// Print the merged report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct InspectArgs {
    /// Files or folders to inspect (`-` = stdin).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Print a JSON document whose "program" member matches the corpus NAME.json shape.
    #[arg(long, conflicts_with = "dot")]
    pub json: bool,
    /// Print a Graphviz graph: method -> call sites -> delegates -> blobs.
    #[arg(long)]
    pub dot: bool,
}

#[derive(Args)]
pub struct CheckArgs {
    /// File to check (`-` = stdin).
    pub file: PathBuf,
}

#[derive(Args)]
pub struct RunArgs {
    /// Program to run (`-` = stdin).
    pub file: PathBuf,
    /// Method name (default: every method, or `forward` with --inputs).
    #[arg(long)]
    pub method: Option<String>,
    /// Inputs: a JSON array of values in the corpus encoding.
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    /// External data file (.ptd) for EXTERNAL tensors.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Runtime option BACKEND.KEY=VALUE (repeatable).
    #[arg(long = "option")]
    pub options: Vec<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print delegate init/execute/destroy counts.
    #[arg(long)]
    pub trace: bool,
    /// Run every recorded run of NAME.io.json and compare (the document names the methods and
    /// their inputs, so --method and --inputs are refused with it).
    #[arg(long, conflicts_with_all = ["inputs", "method"])]
    pub expect: Option<PathBuf>,
    /// Instructions one execute may run.
    #[arg(long, default_value_t = ptecheck::runtime::DEFAULT_INSTRUCTION_BUDGET)]
    pub budget: u64,
    /// Also run each method with a runner (shell command, docs/runner-protocol.md) on the same
    /// inputs and say whether it ends as the reference runtime does.
    #[arg(long, conflicts_with_all = ["expect", "trace"])]
    pub runner: Option<String>,
    /// With --runner: seconds allowed per request.
    #[arg(long, default_value = "10", value_parser = campaign::options::parse_seconds, requires = "runner")]
    pub runner_timeout: std::time::Duration,
}

#[derive(Args)]
pub struct EmitArgs {
    /// Saved-program JSON (see --save-json).
    pub program: Option<PathBuf>,
    /// A built-in example instead of a file.
    #[arg(long, conflicts_with = "program")]
    pub example: Option<String>,
    /// Output .pte path.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Emit as if no backend opted in to handle sharing.
    #[arg(long)]
    pub no_share: bool,
    /// Keep delegate blobs inline instead of in segments.
    #[arg(long)]
    pub inline_delegates: bool,
    /// Allow while_loop (lowered as P12).
    #[arg(long)]
    pub allow_while: bool,
    /// Print the saved-program JSON instead of emitting (nothing is emitted, so the emission
    /// options are refused with it).
    #[arg(long, conflicts_with_all = ["output", "listing", "no_share", "inline_delegates", "allow_while"])]
    pub save_json: bool,
    /// Print the emitted program's listing (values, instructions, delegates).
    #[arg(long)]
    pub listing: bool,
}

#[derive(Args)]
pub struct CampaignArgs {
    /// Cases to run.
    #[arg(long, default_value_t = 10_000)]
    pub cases: u64,
    /// Campaign seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run only this case index (replays a reported failure).
    #[arg(long)]
    pub case: Option<u64>,
    #[command(flatten)]
    pub generation: GenerationArgs,
    /// Exhibit a seeded fault (mutation testing).
    #[arg(long, value_parser = Fault::parse)]
    pub fault: Option<Fault>,
    /// Keep going after the first failure (report counts; shrink the first).
    #[arg(long)]
    pub keep_going: bool,
    /// Send every negative corruption through the whole runtime (copy, edit, load), not only
    /// one per method (slower: quadratic in program size).
    #[arg(long, conflicts_with = "runner")]
    pub negative_end_to_end: bool,
    /// Worker threads (0: one per core). The report is the same for any number.
    #[arg(long, short = 'j', default_value_t = 0, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=campaign::MAX_JOBS as u64))]
    pub jobs: usize,
    /// Run as N shard processes of this program, one job each, and merge their reports (each
    /// stops at its own first failure unless --keep-going). Processes give memory back without
    /// slowing each other, as threads of the `flat-memory` build do not. `--processes` alone:
    /// one per core.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "0", value_parser = clap::value_parser!(u64).range(0..=campaign::processes::MAX_PROCESSES), conflicts_with_all = ["jobs", "shard", "case", "save_failures"])]
    pub processes: Option<u64>,
    /// Write the first failure (shrunk) as a reproducer folder, and the list of failing
    /// cases, into DIR.
    #[arg(long, value_name = "DIR", conflicts_with = "runner")]
    pub save_failures: Option<PathBuf>,
    /// Seconds one case may run: a case still running then is reported as hung with its replay
    /// command, and the process ends with exit 4 (a case cannot be stopped from outside).
    #[arg(long, value_name = "S", default_value = "300", value_parser = campaign::options::parse_seconds, conflicts_with = "runner")]
    pub case_timeout: std::time::Duration,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Differential: run every method of every case in this runner (a shell command speaking
    /// docs/runner-protocol.md) and compare with the eager outputs.
    #[arg(long)]
    pub runner: Option<String>,
    /// With --runner: also send corruptions our runtime rejects (the negative differential).
    #[arg(long, requires = "runner")]
    pub negative: bool,
    /// With --runner: seconds allowed per request.
    #[arg(long, default_value = "10", value_parser = campaign::options::parse_seconds, requires = "runner")]
    pub runner_timeout: std::time::Duration,
    /// With --runner: seconds allowed for the runner's hello.
    #[arg(long, default_value = "60", value_parser = campaign::options::parse_seconds, requires = "runner")]
    pub runner_start_timeout: std::time::Duration,
    /// With --runner or --exporter: where reproducer folders are written.
    #[arg(long, default_value = "ptecheck-findings")]
    pub out: PathBuf,
    /// Exporter campaign: export every case with this exporter (a shell command speaking
    /// docs/exporter-protocol.md) and check what it emitted under the rules it announces (with
    /// --runner, run it there too).
    #[arg(long, conflicts_with_all = ["negative", "negative_end_to_end", "save_failures"])]
    pub exporter: Option<String>,
    /// With --exporter: seconds allowed per export.
    #[arg(long, default_value = "120", value_parser = campaign::options::parse_seconds, requires = "exporter")]
    pub exporter_timeout: std::time::Duration,
    /// With --exporter: seconds allowed for the exporter's hello.
    #[arg(long, default_value = "300", value_parser = campaign::options::parse_seconds, requires = "exporter")]
    pub exporter_start_timeout: std::time::Duration,
    /// With --exporter: record every case (program, inputs, exported program, reply) in DIR.
    #[arg(long, value_name = "DIR", requires = "exporter")]
    pub record: Option<PathBuf>,
    /// With --exporter: export the built-in examples (`emit --example`) in place of generated cases.
    #[arg(long, requires = "exporter")]
    pub examples: bool,
    /// Check every case an exporter campaign recorded in DIR again (no exporter, no Python):
    /// the same report (with --runner, run there too). DIR may be one case folder with its
    /// `hello.json` (a finding).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["exporter", "processes"])]
    pub recorded: Option<PathBuf>,
}

/// How cases are generated: shared by `campaign` and `gen`.
#[derive(Args)]
pub struct GenerationArgs {
    /// Generator configuration (JSON of GenConfig; absent members take defaults).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Run shard I of N (cases with index % N == I).
    #[arg(long, value_parser = campaign::options::parse_shard)]
    pub shard: Option<(u64, u64)>,
    /// Use the base configuration for every case (no swarm).
    #[arg(long)]
    pub no_swarm: bool,
}

#[derive(Args)]
pub struct GenArgs {
    /// Cases to write.
    #[arg(long, default_value_t = 100)]
    pub cases: u64,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub generation: GenerationArgs,
    /// Output folder.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
}

#[derive(Args)]
pub struct DiffArgs {
    /// The first program.
    pub a: PathBuf,
    /// The second program.
    pub b: PathBuf,
    /// Print both shapes and the differences as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ExporterArgs {
    /// The rules to emit by: executorch-1.5.1, opt-in (the reference emitter's), opt-in-body.
    #[arg(long, default_value = "opt-in", value_parser = ptecheck::exporter::server::parse_rules)]
    pub rules: ptecheck::emit::Rules,
    /// Break the rules announced so (share-across-bodies, dedup-by-module).
    #[arg(long, value_parser = ptecheck::exporter::server::EmitterFault::parse)]
    pub fault: Option<ptecheck::exporter::server::EmitterFault>,
    /// Misbehave on purpose (see `ptecheck runner`).
    #[arg(long, hide = true)]
    pub chaos: Option<String>,
}

#[derive(Args)]
pub struct RunnerArgs {
    /// Exhibit a seeded fault (a discrepancy for the differential campaigns to find).
    #[arg(long, value_parser = Fault::parse)]
    pub fault: Option<Fault>,
    /// Misbehave on purpose: exit-before-hello, crash-on:N, exit-on:N, hang-on:N, garbage-on:N (for
    /// testing the harness's handling of broken runners).
    #[arg(long, hide = true)]
    pub chaos: Option<String>,
}

#[derive(Args)]
pub struct MutantsArgs {
    /// Most cases per fault.
    #[arg(long, default_value_t = 256)]
    pub cases: u64,
    /// Campaign seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print a JSON list of {name, caught, cases_to_catch, shrunk_nodes, invariant, expected}.
    #[arg(long)]
    pub json: bool,
}
