//! The `ptecheck` command line: thin wrappers over library functions.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "ptecheck", version, about = "Verify, inspect and fuzz ExecuTorch .pte programs")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Summarise .pte files: methods, values, instructions, delegates, segments, named data.
    /// Without FILE, inspects every sample program shipped in corpus/real.
    Inspect {
        /// Files to inspect (`-` = stdin).
        files: Vec<PathBuf>,
        /// Print a JSON document whose "program" member matches the corpus NAME.json shape.
        #[arg(long, conflicts_with = "dot")]
        json: bool,
        /// Print a Graphviz graph: method -> call sites -> delegates -> blobs.
        #[arg(long)]
        dot: bool,
    },
    /// Run a method: prints outputs in the corpus tensor encoding. Without --inputs, every input
    /// is zero-filled at its declared shape. Exit 0 ok, 1 run failed or mismatched, 2 rejected
    /// file or bad arguments, 3 a backend is not available here.
    Run {
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
        /// Run every recorded run of NAME.io.json and compare.
        #[arg(long)]
        expect: Option<PathBuf>,
        /// Instruction budget per execute.
        #[arg(long, default_value_t = ptecheck::runtime::DEFAULT_INSTRUCTION_BUDGET)]
        budget: u64,
    },
    /// Emit a program: from saved-program JSON or a built-in example, to a .pte file.
    Emit {
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
        /// Print the saved-program JSON instead of emitting.
        #[arg(long)]
        save_json: bool,
        /// Print the emitted program's listing (values, instructions, delegates).
        #[arg(long)]
        listing: bool,
    },
    /// The main job: check every invariant on N generated programs (swarm testing). Exit 1 on
    /// a failure, printing the seed, the case and the shrunk program.
    Campaign {
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
        fault: Option<ptecheck::fault::Fault>,
        /// Keep going after the first failure (report counts; shrink the first).
        #[arg(long)]
        keep_going: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Run the campaign against every seeded fault and report which are caught.
    Mutants {
        /// Most cases per fault.
        #[arg(long, default_value_t = 256)]
        cases: u64,
        /// Campaign seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Print a JSON list of {name, caught, cases_to_catch, shrunk_nodes}.
        #[arg(long)]
        json: bool,
    },
    /// Load FILE and run every init-time check without executing; print each violation.
    Check {
        /// File to check (`-` = stdin).
        file: PathBuf,
    },
}

fn read_input(path: &PathBuf) -> Result<Vec<u8>, String> {
    if path.as_os_str() == "-" {
        let mut v = Vec::new();
        std::io::stdin().read_to_end(&mut v).map_err(|e| format!("cannot read stdin: {e}"))?;
        Ok(v)
    } else {
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    }
}

fn default_samples() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/real");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "pte")).collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn inspect(files: Vec<PathBuf>, json: bool, dot: bool) -> ExitCode {
    let files = if files.is_empty() { default_samples() } else { files };
    if files.is_empty() {
        eprintln!("error: no input files and no samples in corpus/real");
        return ExitCode::from(2);
    }
    let mut status = ExitCode::SUCCESS;
    for path in &files {
        let bytes = match read_input(path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("error: {e}");
                status = ExitCode::from(2);
                continue;
            }
        };
        match ptecheck::format::load(&bytes) {
            Ok(loaded) => {
                if json {
                    let doc = ptecheck::inspect::to_json(&loaded);
                    println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
                } else if dot {
                    print!("{}", ptecheck::inspect::to_dot(&loaded));
                } else {
                    if files.len() > 1 {
                        println!("== {}", path.display());
                    }
                    print!("{}", ptecheck::inspect::to_text(&loaded));
                }
            }
            Err(e) => {
                eprintln!("error: {e} ({})", path.display());
                status = ExitCode::from(2);
            }
        }
    }
    status
}

fn check(path: &PathBuf) -> ExitCode {
    let bytes = match read_input(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let loaded = match ptecheck::format::load(&bytes) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let violations = ptecheck::runtime::check_program(&loaded);
    for v in &violations {
        eprintln!("error: {v} [{:?}]", v.code());
    }
    if violations.is_empty() {
        let methods: Vec<&str> = loaded.program.plans().iter().map(|p| p.name_str()).collect();
        println!("ok: {} method(s) pass every init-time check: {}", methods.len(), methods.join(", "));
        ExitCode::SUCCESS
    } else {
        println!("{} violation(s)", violations.len());
        ExitCode::from(2)
    }
}

struct RunArgs {
    file: PathBuf,
    method: Option<String>,
    inputs: Option<PathBuf>,
    data: Option<PathBuf>,
    options: Vec<String>,
    json: bool,
    trace: bool,
    expect: Option<PathBuf>,
    budget: u64,
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(code)
}

fn run(a: RunArgs) -> ExitCode {
    use ptecheck::runtime::{io, HostValue, RuntimeError, Trace};
    use serde_json::json;
    let bytes = match read_input(&a.file) {
        Ok(b) => b,
        Err(e) => return fail(2, e),
    };
    let loaded = match ptecheck::format::load(&bytes) {
        Ok(l) => l,
        Err(e) => return fail(2, e),
    };
    let ptd_bytes = match a.data.as_ref().map(read_input).transpose() {
        Ok(b) => b,
        Err(e) => return fail(2, e),
    };
    let ptd = match ptd_bytes.as_deref().map(ptecheck::format::load_ptd).transpose() {
        Ok(p) => p,
        Err(e) => return fail(2, format!("{e} (--data)")),
    };
    let multifn = std::sync::Arc::new(ptecheck::backends::multifn::MultifnBackend::default());
    let mut rt = ptecheck::runtime::Runtime::with_backends(ptecheck::backends::default_backends_with(multifn.clone()));
    rt.instruction_budget = a.budget;
    for o in &a.options {
        if let Err(e) = rt.options.parse_and_set(o) {
            return fail(2, e);
        }
    }
    let trace = Trace::default();
    if let Some(path) = &a.expect {
        let doc: serde_json::Value = match read_input(path)
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", path.display())))
        {
            Ok(d) => d,
            Err(e) => return fail(2, e),
        };
        let outcomes = match io::run_expect(&loaded, &rt, &doc, &trace) {
            Ok(o) => o,
            Err(e) => return fail(2, e),
        };
        let all_ok = outcomes.iter().all(|o| o.ok);
        let unavailable = !all_ok && outcomes.iter().all(|o| o.ok || o.backend_unavailable);
        let worst = outcomes.iter().filter_map(|o| o.max_ulps).max();
        if a.json {
            let summary = a.trace.then(|| trace.summary());
            println!(
                "{}",
                serde_json::to_string_pretty(
                    &json!({"runs": outcomes, "all_ok": all_ok, "max_ulps": worst, "trace": summary})
                )
                .unwrap_or_default()
            );
        } else {
            for o in &outcomes {
                let status = if o.ok {
                    "ok"
                } else if o.backend_unavailable {
                    "backend not available"
                } else {
                    "MISMATCH"
                };
                println!(
                    "{} run {} vs {}: {status} (max gap {} ulp, allowed {}){}",
                    o.method,
                    o.run,
                    o.against,
                    o.max_ulps.map_or("-".into(), |u| u.to_string()),
                    o.tolerance_ulps,
                    o.detail.as_ref().map(|d| format!(": {d}")).unwrap_or_default()
                );
            }
            println!("largest ulp gap: {}", worst.map_or("-".into(), |u| u.to_string()));
            if a.trace {
                print_trace(&trace);
            }
        }
        return if all_ok {
            ExitCode::SUCCESS
        } else if unavailable {
            ExitCode::from(3)
        } else {
            ExitCode::from(1)
        };
    }
    let given: Option<Vec<HostValue>> = match &a.inputs {
        None => None,
        Some(p) => {
            let parsed = read_input(p).and_then(|b| {
                serde_json::from_slice::<serde_json::Value>(&b).map_err(|e| format!("{}: {e}", p.display()))
            });
            match parsed.map(|v| io::list_from_json(v.get("inputs").unwrap_or(&v), "$")) {
                Ok(Ok(v)) => Some(v),
                Ok(Err(e)) => return fail(2, format!("{e} ({})", p.display())),
                Err(e) => return fail(2, e),
            }
        }
    };
    let methods: Vec<String> = match &a.method {
        Some(m) => vec![m.clone()],
        None if given.is_some() => vec!["forward".into()],
        None => loaded.program.plans().iter().map(|p| p.name_str().to_string()).collect(),
    };
    let mut results = serde_json::Map::new();
    let mut status = ExitCode::SUCCESS;
    // Load every method first and keep them alive together (as an app holding several methods
    // does), so delegates of different methods can share a loaded model; then run each.
    let mut loaded_methods = Vec::new();
    for name in &methods {
        match rt.load_method(&loaded, name, ptd.as_ref(), &trace) {
            Ok(m) => loaded_methods.push(Ok(m)),
            Err(e) => loaded_methods.push(Err(e)),
        }
    }
    for (name, m) in methods.iter().zip(loaded_methods.iter_mut()) {
        let outcome = match m {
            Err(e) => Err(e.clone()),
            Ok(m) => (|| -> Result<Vec<HostValue>, RuntimeError> {
                for i in 0..m.num_inputs() {
                    let v = match &given {
                        Some(g) => g.get(i).cloned().unwrap_or(HostValue::None),
                        None => m.input_template(i).unwrap_or(HostValue::None),
                    };
                    m.set_input(i, &v)?;
                }
                m.execute()?;
                m.outputs()
            })(),
        };
        match outcome {
            Ok(outs) => {
                let enc: Vec<serde_json::Value> = outs.iter().map(io::to_json).collect();
                if !a.json {
                    println!("{name}: {}", serde_json::to_string(&enc).unwrap_or_default());
                }
                results.insert(name.clone(), json!({"outputs": enc}));
            }
            Err(e) => {
                eprintln!("error: {e}");
                results.insert(name.clone(), json!({"error": e.to_string(), "code": format!("{:?}", e.code())}));
                status = if matches!(e, RuntimeError::BackendNotAvailable { .. }) {
                    ExitCode::from(3)
                } else {
                    ExitCode::from(1)
                };
            }
        }
    }
    let (loads, live, resident) = multifn.table.totals();
    drop(loaded_methods);
    if a.json {
        let summary = a.trace.then(|| trace.summary());
        let models = a.trace.then(|| {
            json!({"loads": loads, "live_while_loaded": live, "resident_bytes_while_loaded": resident,
                   "per_key": multifn.table.stats().into_iter().map(|(k, s)| json!({"cache_key": k.cache_key, "stats": s})).collect::<Vec<_>>()})
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"methods": results, "trace": summary, "multifn_models": models}))
                .unwrap_or_default()
        );
    } else if a.trace {
        print_trace(&trace);
        if loads > 0 {
            println!(
                "multifn models: {loads} load(s); {live} live, {resident} resident bytes while the methods were loaded"
            );
            for (k, s) in multifn.table.stats() {
                println!("  {}: {} load(s), {} unload(s)", k.cache_key, s.loads, s.unloads);
            }
        }
    }
    status
}

fn print_trace(trace: &ptecheck::runtime::Trace) {
    let s = trace.summary();
    println!(
        "trace: {} init, {} init failed, {} execute, {} destroy, {} live, peak handle bytes {}",
        s.inits, s.init_failures, s.executes, s.destroys, s.live_handles, s.peak_handle_bytes
    );
    for (site, n) in &s.executes_per_site {
        println!("  executes at {site}: {n}");
    }
}

struct EmitArgs {
    program: Option<PathBuf>,
    example: Option<String>,
    output: Option<PathBuf>,
    no_share: bool,
    inline_delegates: bool,
    allow_while: bool,
    save_json: bool,
    listing: bool,
}

fn emit(a: EmitArgs) -> ExitCode {
    use ptecheck::gen::examples::{example, EXAMPLES};
    let program = match (&a.program, &a.example) {
        (Some(path), _) => {
            let text = match read_input(path)
                .and_then(|b| String::from_utf8(b).map_err(|e| format!("{}: {e}", path.display())))
            {
                Ok(t) => t,
                Err(e) => return fail(2, e),
            };
            match ptecheck::ir::saved::load(&text) {
                Ok(p) => p,
                Err(e) => return fail(2, format!("{e} ({})", path.display())),
            }
        }
        (None, Some(name)) => match example(name) {
            Some(p) => p,
            None => return fail(2, format!("no example `{name}`; examples: {}", EXAMPLES.join(", "))),
        },
        (None, None) => return fail(2, format!("give PROGRAM.json or --example NAME ({})", EXAMPLES.join(", "))),
    };
    if a.save_json {
        print!("{}", ptecheck::ir::saved::save(&program));
        return ExitCode::SUCCESS;
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
        Err(e) => return fail(1, e),
    };
    if a.listing {
        match ptecheck::format::load(&bytes) {
            Ok(l) => print!("{}", ptecheck::inspect::listing(&l)),
            Err(e) => return fail(1, format!("emitted program does not load: {e}")),
        }
    }
    match &a.output {
        Some(path) => {
            if let Err(e) = std::fs::write(path, &bytes) {
                return fail(2, format!("cannot write {}: {e}", path.display()));
            }
            if !a.listing {
                println!("wrote {} ({} bytes)", path.display(), bytes.len());
            }
        }
        None if !a.listing => return fail(2, "give -o OUT.pte (or --listing / --save-json)"),
        None => {}
    }
    ExitCode::SUCCESS
}

fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (i, n) = s.split_once('/').ok_or("shard must be I/N")?;
    let (i, n): (u64, u64) = (i.parse().map_err(|_| "bad shard index")?, n.parse().map_err(|_| "bad shard count")?);
    if n == 0 || i >= n {
        return Err(format!("shard {i}/{n}: need 0 <= I < N"));
    }
    Ok((i, n))
}

fn parse_fault(s: &str) -> Result<ptecheck::fault::Fault, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string())).map_err(|_| {
        let names: Vec<&str> = ptecheck::fault::Fault::all().iter().map(|f| f.name()).collect();
        format!("unknown fault `{s}`; faults: {}", names.join(", "))
    })
}

struct CampaignArgs {
    cases: u64,
    seed: u64,
    case: Option<u64>,
    config: Option<PathBuf>,
    shard: Option<(u64, u64)>,
    no_swarm: bool,
    fault: Option<ptecheck::fault::Fault>,
    keep_going: bool,
    json: bool,
}

fn campaign(a: CampaignArgs) -> ExitCode {
    use ptecheck::oracle::campaign::{run, CampaignOptions};
    use std::io::IsTerminal;
    let config = match &a.config {
        None => ptecheck::gen::GenConfig::default(),
        Some(p) => {
            match read_input(p).and_then(|b| serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", p.display()))) {
                Ok(c) => c,
                Err(e) => return fail(2, e),
            }
        }
    };
    let opts = CampaignOptions {
        cases: a.cases,
        seed: a.seed,
        config,
        shard: a.shard.unwrap_or((0, 1)),
        swarm: !a.no_swarm,
        fault: a.fault,
        only_case: a.case,
        stop_on_failure: !a.keep_going,
        progress: !a.json && std::io::stderr().is_terminal(),
        ..CampaignOptions::default()
    };
    let r = run(&opts);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
    } else {
        println!(
            "cases {}  failures {}  {:.1} programs/s  ({:.1} s)",
            r.cases, r.failures, r.programs_per_second, r.elapsed_seconds
        );
        println!("invariants checked:");
        for (k, v) in &r.invariants {
            println!("  {k:<9} {v}");
        }
        println!("features generated (programs):");
        let mut names: Vec<String> = ptecheck::gen::feature_names();
        names.extend(r.features.keys().filter(|k| !names.contains(k)).cloned().collect::<Vec<_>>());
        for f in &names {
            println!("  {f:<34} {}", r.features.get(f.as_str()).copied().unwrap_or(0));
        }
        let t = &r.timings;
        println!(
            "time: generate {:.2}s emit {:.2}s write {:.2}s load {:.2}s init {:.2}s execute {:.2}s eager {:.2}s compare {:.2}s",
            r.generate.as_secs_f64(),
            t.emit.as_secs_f64(),
            t.write.as_secs_f64(),
            t.load.as_secs_f64(),
            t.init.as_secs_f64(),
            t.execute.as_secs_f64(),
            t.eager.as_secs_f64(),
            t.compare.as_secs_f64()
        );
        if let Some(f) = &r.failure {
            println!(
                "\nFAILURE at seed {} case {} (shrunk from {} to {} nodes)",
                f.seed, f.case, f.original_nodes, f.shrunk_nodes
            );
            for x in &f.failures {
                println!("  {}: {}", x.invariant, x.detail);
            }
            println!("reproduce: {}", f.command);
            println!("\nprogram (text form):\n{}", f.program_text);
            println!("program (saved JSON; `ptecheck emit FILE.json --listing`):\n{}", f.program_json);
        }
    }
    if r.failures > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn mutants(cases: u64, seed: u64, json: bool) -> ExitCode {
    use ptecheck::oracle::campaign::CampaignOptions;
    let base = CampaignOptions { seed, shrink_budget: 150, ..CampaignOptions::default() };
    let results = ptecheck::oracle::mutants::run_mutants(&base, cases, &ptecheck::fault::Fault::all());
    if json {
        println!("{}", serde_json::to_string_pretty(&results).unwrap_or_default());
    } else {
        println!("{:<32} {:<7} {:>14} {:>13}  invariant", "fault", "caught", "cases_to_catch", "shrunk_nodes");
        for r in &results {
            println!(
                "{:<32} {:<7} {:>14} {:>13}  {}",
                r.name,
                r.caught,
                r.cases_to_catch.map_or("-".into(), |c| c.to_string()),
                r.shrunk_nodes.map_or("-".into(), |c| c.to_string()),
                r.invariant.clone().unwrap_or_default()
            );
        }
    }
    if results.iter().all(|r| r.caught) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Inspect { files, json, dot } => inspect(files, json, dot),
        Command::Check { file } => check(&file),
        Command::Campaign { cases, seed, case, config, shard, no_swarm, fault, keep_going, json } => {
            campaign(CampaignArgs { cases, seed, case, config, shard, no_swarm, fault, keep_going, json })
        }
        Command::Mutants { cases, seed, json } => mutants(cases, seed, json),
        Command::Emit { program, example, output, no_share, inline_delegates, allow_while, save_json, listing } => {
            emit(EmitArgs { program, example, output, no_share, inline_delegates, allow_while, save_json, listing })
        }
        Command::Run { file, method, inputs, data, options, json, trace, expect, budget } => {
            run(RunArgs { file, method, inputs, data, options, json, trace, expect, budget })
        }
    }
}
