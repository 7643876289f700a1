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

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Inspect { files, json, dot } => inspect(files, json, dot),
        Command::Check { file } => check(&file),
    }
}
