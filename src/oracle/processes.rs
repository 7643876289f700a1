//! A campaign run as shard processes: one child per shard, each `campaign ARGS --shard K/N
//! --jobs 1 --json` of the same program, their reports merged into one ([`super::reports`]).
//! Processes, unlike threads of one process, give memory back without interrupting each other
//! (README, "Flat memory, opt in"). Owns starting, waiting for and reading its children; it may
//! not check cases itself nor read what a child printed but its report.

use super::campaign::CampaignResult;
use super::reports::{MergeError, merge};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use thiserror::Error;

/// Stderr a failed child's error quotes at most (its last bytes).
const QUOTED_STDERR: usize = 2000;

/// Why a campaign run as shard processes gave no report.
#[derive(Debug, Error)]
pub enum ProcessesError {
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
    /// A child ended other than with a report (exit 0: no failure, 1: failures found).
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
    /// A child's standard output is not a campaign report.
    #[error("shard {shard}/{of}: its output is not a campaign report: {message}")]
    Report {
        /// The child's shard.
        shard: u64,
        /// The shard count.
        of: u64,
        /// The parser's message (with line and column).
        message: String,
    },
    /// The children's reports do not merge.
    #[error("the shard reports do not merge: {0}")]
    Merge(#[from] MergeError),
}

/// Runs `program campaign_args --shard K/N --jobs 1 --json` for every K < `processes` side by
/// side, waits for all of them and merges their reports (`processes` 0 counts as 1).
pub fn run(program: &Path, campaign_args: &[String], processes: u64) -> Result<CampaignResult, ProcessesError> {
    let of = processes.max(1);
    let mut children = Vec::new();
    let mut started = Ok(());
    for shard in 0..of {
        let child = Command::new(program)
            .args(campaign_args)
            .args(["--shard", &format!("{shard}/{of}"), "--jobs", "1", "--json"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        match child {
            Ok(child) => children.push((shard, child)),
            Err(source) => {
                started = Err(ProcessesError::Start { shard, of, program: program.display().to_string(), source });
                break;
            }
        }
    }
    if started.is_err() {
        // The children already started are not wanted without the others.
        for (_, child) in &mut children {
            let _ = child.kill();
        }
    }
    // Every child is waited for (none is left running), then the first error is returned.
    let outputs: Vec<(u64, std::io::Result<Output>)> =
        children.into_iter().map(|(shard, child)| (shard, child.wait_with_output())).collect();
    started?;
    let mut reports = Vec::with_capacity(outputs.len());
    for (shard, output) in outputs {
        let output = output.map_err(|source| ProcessesError::Start {
            shard,
            of,
            program: program.display().to_string(),
            source,
        })?;
        reports.push(report_of(shard, of, &output)?);
    }
    Ok(merge(&reports)?)
}

/// The report a child printed, if it ended with one.
fn report_of(shard: u64, of: u64, output: &Output) -> Result<CampaignResult, ProcessesError> {
    if !matches!(output.status.code(), Some(0 | 1)) {
        let tail = &output.stderr[output.stderr.len().saturating_sub(QUOTED_STDERR)..];
        return Err(ProcessesError::Ended {
            shard,
            of,
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(tail).trim().to_string(),
        });
    }
    serde_json::from_slice(&output.stdout).map_err(|e| ProcessesError::Report { shard, of, message: e.to_string() })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// [`run`] of `sh -c SCRIPT` as its children (the shard arguments become `$0`, `$1`, …).
    fn run_sh(script: &str, processes: u64) -> Result<CampaignResult, ProcessesError> {
        run(Path::new("/bin/sh"), &["-c".to_string(), script.to_string()], processes)
    }

    #[test]
    fn a_child_that_dies_prints_nothing_useful_or_cannot_start_is_named_by_its_shard() {
        // Killed by a signal: named with the signal and what it wrote to stderr.
        let e = run_sh("echo about to die >&2; kill -9 $$", 2).expect_err("a killed child");
        let text = e.to_string();
        assert!(matches!(e, ProcessesError::Ended { shard: 0, of: 2, .. }), "{text}");
        assert!(text.contains("SIGKILL") && text.contains("about to die"), "{text}");
        // Exit 1 (failures found) is a report's exit, but what it printed is not a report.
        let e = run_sh("echo not a report; exit 1", 3).expect_err("not a report");
        assert!(matches!(e, ProcessesError::Report { shard: 0, of: 3, .. }), "{e}");
        // Another exit code.
        let e = run_sh("exit 7", 1).expect_err("exit 7");
        assert!(matches!(&e, ProcessesError::Ended { status, .. } if status.contains('7')), "{e}");
        // A program that cannot be started.
        let e = run(Path::new("/nonexistent/ptecheck"), &[], 2).expect_err("no such program");
        assert!(matches!(e, ProcessesError::Start { shard: 0, of: 2, .. }), "{e}");
    }
}
