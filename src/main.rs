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
    let mut rt = ptecheck::backends::default_runtime();
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
    for name in &methods {
        let outcome = (|| -> Result<Vec<HostValue>, RuntimeError> {
            let mut m = rt.load_method(&loaded, name, ptd.as_ref(), &trace)?;
            for i in 0..m.num_inputs() {
                let v = match &given {
                    Some(g) => g.get(i).cloned().unwrap_or(HostValue::None),
                    None => m.input_template(i).unwrap_or(HostValue::None),
                };
                m.set_input(i, &v)?;
            }
            m.execute()?;
            m.outputs()
        })();
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
    if a.json {
        let summary = a.trace.then(|| trace.summary());
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"methods": results, "trace": summary})).unwrap_or_default()
        );
    } else if a.trace {
        print_trace(&trace);
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Inspect { files, json, dot } => inspect(files, json, dot),
        Command::Check { file } => check(&file),
        Command::Emit { program, example, output, no_share, inline_delegates, allow_while, save_json, listing } => {
            emit(EmitArgs { program, example, output, no_share, inline_delegates, allow_while, save_json, listing })
        }
        Command::Run { file, method, inputs, data, options, json, trace, expect, budget } => {
            run(RunArgs { file, method, inputs, data, options, json, trace, expect, budget })
        }
    }
}
