//! A campaign run as shard processes: one child per shard, each `campaign ARGS --shard K/N
//! --jobs 1 --json` of the same program, their reports merged into one ([`super::reports`]).
//! Processes, unlike threads of one process, give memory back without interrupting each other
//! (docs/performance.md, section 4). Owns starting, watching and reading its children (a report
//! from stdout, the end of stderr for an error); it may not check cases itself.

use super::options::{CampaignOptions, case_flags};
use super::reports::{MergeError, merge};
use super::result::CampaignResult;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;
use thiserror::Error;

/// Most shard processes one campaign starts.
pub const MAX_PROCESSES: u64 = 256;

/// Stderr a failed child's error quotes at most (its last bytes).
const QUOTED_STDERR: usize = 2000;

/// Most bytes of a child's report read (a report lists at most 100 failing cases and one
/// reproducer, far below this).
const MAX_REPORT: u64 = 64 << 20;

/// How often the children are looked at while they run.
const POLL: Duration = Duration::from_millis(20);

/// Why a campaign run as shard processes gave no report.
#[derive(Debug, Error)]
pub enum ProcessesError {
    /// More processes than [`MAX_PROCESSES`] (or none) were asked for.
    #[error("{0} processes: between 1 and {MAX_PROCESSES}")]
    Count(u64),
    /// A child could not be started.
    #[error("shard {shard}/{of}: could not start {program}: {source}")]
    Start {
        /// The child's shard.
        shard: u64,
        /// The shard count.
        of: u64,
        /// The program started.
        program: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// A child could not be waited for.
    #[error("shard {shard}/{of}: could not wait for it: {source}")]
    Wait {
        /// The child's shard.
        shard: u64,
        /// The shard count.
        of: u64,
        /// The system's error.
        source: std::io::Error,
    },
    /// A child ended other than with a report (exit 0: no failure, 1: failures found); the
    /// other children were stopped.
    #[error("shard {shard}/{of}: {status}; its stderr ended: {stderr}")]
    Ended {
        /// The child's shard.
        shard: u64,
        /// The shard count.
        of: u64,
        /// How it ended (exit code or signal).
        status: String,
        /// The end of what it wrote to stderr.
        stderr: String,
    },
    /// A child's standard output is not a campaign report, or not one that agrees with its
    /// exit code.
    #[error("shard {shard}/{of}: its output is not a campaign report: {message}")]
    Report {
        /// The child's shard.
        shard: u64,
        /// The shard count.
        of: u64,
        /// What is wrong (the parser's message, with line and column).
        message: String,
    },
    /// The children's reports do not merge.
    #[error("the shard reports do not merge: {0}")]
    Merge(#[from] MergeError),
}

/// The arguments each child gets before its shard: `campaign`, cases, seed, what decides each
/// case's checks ([`case_flags`]) and whether to keep going.
pub fn child_args(opts: &CampaignOptions) -> Vec<String> {
    let mut args =
        vec!["campaign".to_string(), "--cases".into(), opts.cases.to_string(), "--seed".into(), opts.seed.to_string()];
    args.extend(case_flags(opts));
    if !opts.stop_on_failure {
        args.push("--keep-going".into());
    }
    args
}

/// One running child and the threads reading its output.
struct Running {
    shard: u64,
    child: Child,
    stdout: std::thread::JoinHandle<std::io::Result<Vec<u8>>>,
    stderr: std::thread::JoinHandle<Vec<u8>>,
    /// How it ended, once it has; `None` inside: this side stopped it.
    ended: Option<Option<ExitStatus>>,
}

/// A report shard processes print (`--json`) and one process merges.
pub trait ShardReport: serde::de::DeserializeOwned {
    /// Whether the report's process ends with exit 1 (a failure found).
    fn failed(&self) -> bool;
    /// One report of the shards' reports.
    fn merge_shards(reports: &[Self]) -> Result<Self, ProcessesError>;
}

impl ShardReport for CampaignResult {
    fn failed(&self) -> bool {
        self.failures > 0
    }
    fn merge_shards(reports: &[Self]) -> Result<Self, ProcessesError> {
        Ok(merge(reports)?)
    }
}

impl ShardReport for super::export_report::ExportReport {
    fn failed(&self) -> bool {
        self.exit() == crate::exit::Exit::Failed
    }
    fn merge_shards(reports: &[Self]) -> Result<Self, ProcessesError> {
        let mut m = Self::default();
        for r in reports {
            m.merge(r);
        }
        Ok(m)
    }
}

/// Runs `program` with [`child_args`] of `opts`, then `extra`, and `--shard K/N --jobs 1 --json` for every
/// K < `processes` side by side and merges their reports. When one child ends without a report
/// the others are stopped and that child is named.
pub fn run(
    program: &Path,
    opts: &CampaignOptions,
    extra: &[String],
    processes: u64,
) -> Result<CampaignResult, ProcessesError> {
    let mut args = child_args(opts);
    args.extend_from_slice(extra);
    run_args(program, &args, processes)
}

/// [`run`] with the arguments before the shard given: `program ARGS --shard K/N --jobs 1 --json`
/// for every K < `processes`, side by side, their reports merged.
pub fn run_args<R: ShardReport>(program: &Path, args: &[String], processes: u64) -> Result<R, ProcessesError> {
    if !(1..=MAX_PROCESSES).contains(&processes) {
        return Err(ProcessesError::Count(processes));
    }
    let of = processes;
    let mut running: Vec<Running> = Vec::new();
    for shard in 0..of {
        let spawned = Command::new(program)
            .args(args)
            .args(["--shard", &format!("{shard}/{of}"), "--jobs", "1", "--json"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(source) => {
                stop_all(&mut running);
                return Err(ProcessesError::Start { shard, of, program: program.display().to_string(), source });
            }
        };
        let (out, err) = (child.stdout.take(), child.stderr.take());
        let stdout = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut out) = out {
                (&mut out).take(MAX_REPORT + 1).read_to_end(&mut bytes)?;
                // The rest of an overlong report is read and dropped, so the child ends as it
                // would (not on a broken pipe) and the error says the report is too long.
                std::io::copy(&mut out, &mut std::io::sink())?;
            }
            Ok(bytes)
        });
        let stderr = std::thread::spawn(move || err.map(tail).unwrap_or_default());
        running.push(Running { shard, child, stdout, stderr, ended: None });
    }
    watch(&mut running, of)?;
    let mut reports = Vec::with_capacity(running.len());
    let mut failure = None;
    for r in running {
        let stdout = r.stdout.join().unwrap_or_else(|_| Ok(Vec::new()));
        let stderr = r.stderr.join().unwrap_or_default();
        let Some(Some(status)) = r.ended else { continue };
        match report_of(r.shard, of, status, stdout, &stderr) {
            Ok(report) => reports.push(report),
            Err(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    R::merge_shards(&reports)
}

/// Waits until every child has ended; the first to end without a report's exit code (0 or 1)
/// has the others stopped.
fn watch(running: &mut [Running], of: u64) -> Result<(), ProcessesError> {
    loop {
        let mut waiting = false;
        for i in 0..running.len() {
            if running[i].ended.is_some() {
                continue;
            }
            match running[i].child.try_wait() {
                Ok(Some(status)) => {
                    running[i].ended = Some(Some(status));
                    if !matches!(status.code(), Some(0 | 1)) {
                        stop_all(running);
                    }
                }
                Ok(None) => waiting = true,
                Err(source) => {
                    stop_all(running);
                    return Err(ProcessesError::Wait { shard: running[i].shard, of, source });
                }
            }
        }
        if !waiting {
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
}

/// Stops every child still running and waits for it (marked as stopped by this side).
fn stop_all(running: &mut [Running]) {
    for r in running.iter_mut().filter(|r| r.ended.is_none()) {
        let _ = r.child.kill();
        let _ = r.child.wait();
        r.ended = Some(None);
    }
}

/// The last [`QUOTED_STDERR`] bytes `from` gives, reading all of it.
fn tail(mut from: impl Read) -> Vec<u8> {
    let (mut kept, mut chunk) = (Vec::new(), [0u8; 4096]);
    while let Ok(n) = from.read(&mut chunk) {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&chunk[..n]);
        if kept.len() > 2 * QUOTED_STDERR {
            kept.drain(..kept.len() - QUOTED_STDERR);
        }
    }
    let cut = kept.len().saturating_sub(QUOTED_STDERR);
    kept.split_off(cut)
}

/// The report a child printed, if it ended with one that agrees with its exit code.
fn report_of<R: ShardReport>(
    shard: u64,
    of: u64,
    status: ExitStatus,
    stdout: std::io::Result<Vec<u8>>,
    stderr: &[u8],
) -> Result<R, ProcessesError> {
    let report_error = |message: String| ProcessesError::Report { shard, of, message };
    let failed = match status.code() {
        Some(0) => false,
        Some(1) => true,
        _ => {
            let stderr = String::from_utf8_lossy(stderr).trim().to_string();
            return Err(ProcessesError::Ended { shard, of, status: status.to_string(), stderr });
        }
    };
    let stdout = stdout.map_err(|e| report_error(format!("reading it: {e}")))?;
    if stdout.len() as u64 > MAX_REPORT {
        return Err(report_error(format!("longer than {MAX_REPORT} bytes")));
    }
    let report: R = serde_json::from_slice(&stdout).map_err(|e| report_error(e.to_string()))?;
    if failed != report.failed() {
        return Err(report_error(format!("exit code {} with a report that says otherwise", i32::from(failed))));
    }
    Ok(report)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// [`run`] of `sh -c SCRIPT` as its children (the shard arguments become `$0`, `$1`, …).
    fn run_sh(script: &str, processes: u64) -> Result<CampaignResult, ProcessesError> {
        run_args(Path::new("/bin/sh"), &["-c".to_string(), script.to_string()], processes)
    }

    #[test]
    fn a_child_that_dies_prints_nothing_useful_or_cannot_start_is_named_by_its_shard() {
        // Shard 1 of 3 is killed by a signal: it is the one named, with the signal and what it
        // wrote to stderr, and the others are stopped (none lives to leave its mark).
        let dir = tempfile::Builder::new().prefix("ptecheck-processes-").tempdir().expect("temporary directory");
        let mark = dir.path().join("finished");
        let script = format!(
            "case \"$1\" in 1/3) echo about to die >&2; kill -9 $$;; *) sleep 2; touch '{}'.\"${{1%/*}}\";; esac",
            mark.display()
        );
        let e = run_sh(&script, 3).expect_err("a killed child");
        let text = e.to_string();
        assert!(matches!(e, ProcessesError::Ended { shard: 1, of: 3, .. }), "{text}");
        assert!(text.contains("SIGKILL") && text.contains("about to die"), "{text}");
        std::thread::sleep(Duration::from_secs(3));
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("reads").flatten().map(|e| e.file_name()).collect();
        assert!(left.is_empty(), "children that were not stopped finished: {left:?}");
        assert!(matches!(run_sh("exit 0", 0), Err(ProcessesError::Count(0))));
        assert!(matches!(run_sh("exit 0", MAX_PROCESSES + 1), Err(ProcessesError::Count(_))));
        // Exit 1 (failures found) is a report's exit, but what it printed is not a report.
        let e = run_sh("echo not a report; exit 1", 3).expect_err("not a report");
        assert!(matches!(e, ProcessesError::Report { shard: 0, of: 3, .. }), "{e}");
        // A report beyond the bound: refused as too long (not as a child killed by a broken pipe).
        let e = run_sh("head -c 70000000 /dev/zero", 1).expect_err("an overlong report");
        assert!(e.to_string().contains("longer than"), "{e}");
        // Another exit code.
        let e = run_sh("exit 7", 1).expect_err("exit 7");
        assert!(matches!(&e, ProcessesError::Ended { status, .. } if status.contains('7')), "{e}");
        // A program that cannot be started.
        let e = run_args::<CampaignResult>(Path::new("/nonexistent/ptecheck"), &[], 2).expect_err("no such program");
        assert!(matches!(e, ProcessesError::Start { shard: 0, of: 2, .. }), "{e}");
    }
}
