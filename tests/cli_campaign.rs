//! The campaign CLI of issue K: `--jobs`, `--json` shard reports, `merge-reports`,
//! `--save-failures`.

#![forbid(unsafe_code)]

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ptecheck"))
}

/// The `--json` reports of the two shards of a 40-case campaign (seed 3), written into `dir`.
fn two_shard_reports(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    (0..2)
        .map(|i| {
            let out = bin()
                .args([
                    "campaign",
                    "--cases",
                    "40",
                    "--seed",
                    "3",
                    "--jobs",
                    "2",
                    "--json",
                    "--shard",
                    &format!("{i}/2"),
                ])
                .output()
                .expect("runs");
            assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
            let path = dir.join(format!("report-{i}.json"));
            std::fs::write(&path, &out.stdout).expect("writes");
            path
        })
        .collect()
}

/// `merge-reports --json` of `paths`: its exit code, report and standard error.
fn merged(paths: &[&std::path::Path]) -> (Option<i32>, serde_json::Value, String) {
    let out = bin().arg("merge-reports").arg("--json").args(paths).output().expect("runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), serde_json::from_slice(&out.stdout).expect("json"), err)
}

#[test]
fn shard_reports_written_by_the_cli_merge_and_a_bad_report_is_named() {
    let dir = tempfile::Builder::new().prefix("ptecheck-cli-merge-").tempdir().expect("temporary directory");
    let dir = dir.path();
    let paths = two_shard_reports(dir);
    let (code, whole, err) = merged(&[&paths[0], &paths[1]]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(whole["cases"], 40);
    assert_eq!(whole["failures"], 0);
    assert_eq!(whole["shards_run"], serde_json::json!([0, 1]));
    // Not a campaign report: left out and named (file and member), exit 2, and the other
    // shard's report is still printed, with the shard no report covers.
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"campaign": {"seed": "many"}}"#).expect("writes");
    let (code, partial, err) = merged(&[&paths[0], &bad]);
    assert_eq!(code, Some(2));
    assert!(err.contains("bad.json") && err.contains("campaign.seed"), "{err}");
    assert!(err.contains("no report covers shards [1]"), "{err}");
    assert_eq!(partial["shards_run"], serde_json::json!([0]));
    // The same shard twice: left out, naming the report that has it.
    let out = bin().arg("merge-reports").args([&paths[0], &paths[1], &paths[0]]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("report-0.json: report 2: shard 0 is already in report 0"), "{err}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_report_names_its_peak_rss_and_a_merge_keeps_the_largest_shards() {
    let dir = tempfile::Builder::new().prefix("ptecheck-cli-peak-").tempdir().expect("temporary directory");
    let paths = two_shard_reports(dir.path());
    let reports: Vec<serde_json::Value> =
        paths.iter().map(|p| serde_json::from_slice(&std::fs::read(p).expect("reads")).expect("json")).collect();
    for r in &reports {
        // The process's own high-water mark: more than the MiB a process of this size cannot
        // stay under (the binary's code alone is more).
        let kib = r["peak_rss_kib"].as_u64().expect("a peak in KiB");
        assert!(kib > 1024, "peak RSS {kib} KiB");
    }
    // Each shard ran in a process of its own: the merge keeps the largest peak, whichever report
    // has it, and a report without one (the system did not say, or written before the member
    // was kept) takes nothing away.
    let set = |i: usize, peak: Option<u64>| {
        let mut r = reports[i].clone();
        match peak {
            Some(kib) => r["peak_rss_kib"] = kib.into(),
            None => drop(r.as_object_mut().expect("an object").remove("peak_rss_kib")),
        }
        std::fs::write(&paths[i], serde_json::to_vec(&r).expect("json")).expect("writes");
    };
    for (a, b, want) in [
        (Some(5_000), Some(9_000), Some(9_000)),
        (Some(9_000), Some(5_000), Some(9_000)),
        (None, Some(7_000), Some(7_000)),
        (Some(7_000), None, Some(7_000)),
        (None, None, None),
    ] {
        set(0, a);
        set(1, b);
        let (code, m, err) = merged(&[&paths[0], &paths[1]]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(m["peak_rss_kib"].as_u64(), want, "{a:?} and {b:?}");
    }
    // The text report says it.
    let out = bin().args(["campaign", "--cases", "3", "--seed", "3"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().next().is_some_and(|l| l.contains("peak RSS") && l.ends_with("MiB)")), "{text}");
}

#[test]
fn a_failing_campaign_saves_its_reproducer_and_exits_1() {
    let tmp = tempfile::Builder::new().prefix("ptecheck-cli-save-").tempdir().expect("temporary directory");
    let dir = tmp.path().join("failures");
    let out = bin()
        .args(["campaign", "--cases", "256", "--fault", "drop_last_delegate_output", "--jobs", "2", "--save-failures"])
        .arg(&dir)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let folder = stderr.lines().find_map(|l| l.strip_prefix("reproducer: ")).expect("a reproducer line");
    assert!(std::path::Path::new(folder).join("shared.pte").is_file());
    assert!(dir.join("failing-cases.json").is_file());
}

#[test]
fn a_differential_campaign_from_the_command_line() {
    let me = env!("CARGO_BIN_EXE_ptecheck");
    let tmp = tempfile::Builder::new().prefix("ptecheck-cli-diff-").tempdir().expect("temporary directory");
    let out_dir = tmp.path().join("out");
    let run = |runner: &str, extra: &[&str]| {
        bin().args(["campaign", "--runner", runner, "--out"]).arg(&out_dir).args(extra).output().expect("runs")
    };
    let out = run(&format!("{me} runner"), &["--json", "--cases", "12"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(r["cases"], 12);
    assert_eq!(r["mismatch"], 0);
    assert!(r["methods_run"].as_u64().is_some_and(|n| n >= 12), "{r}");
    // A runner with a planted numeric fault: a mismatch, exit 1, text report.
    let out = run(&format!("{me} runner --fault sub_swaps_operands"), &["--cases", "60"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    // A runner that never says hello: exit 2.
    let out = run("sh -c 'exit 3'", &["--cases", "2", "--runner-start-timeout", "5"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_configuration_the_generator_cannot_honour_is_refused_naming_the_member() {
    use ptecheck::generator::GenConfig;
    use ptecheck::generator::config::ConfigError;
    assert_eq!(GenConfig::default().check(), Ok(()));
    // The method count is the one limit the case's bytes do not bound: 10^9 methods per case.
    let c = GenConfig { min_methods: 1_000_000_000, max_methods: 1_000_000_000, ..GenConfig::default() };
    assert_eq!(c.check(), Err(ConfigError::TooLarge { member: "min_methods", value: 1_000_000_000, max: 64 }));
    let c = GenConfig { max_depth: 17, ..GenConfig::default() };
    assert!(matches!(c.check(), Err(ConfigError::TooLarge { member: "max_depth", .. })));
    let c = GenConfig { max_total_nodes: 65537, ..GenConfig::default() };
    assert_eq!(c.check(), Err(ConfigError::TooLarge { member: "max_total_nodes", value: 65537, max: 65536 }));
    let c = GenConfig { control_percent: 101, ..GenConfig::default() };
    assert!(matches!(c.check(), Err(ConfigError::TooLarge { member: "control_percent", .. })));
    let c = GenConfig { min_methods: 3, max_methods: 2, ..GenConfig::default() };
    assert_eq!(c.check(), Err(ConfigError::MinAboveMax { min: 3, max: 2 }));
    // A name that names nothing would be ignored in silence.
    let c = GenConfig { only_ops: Some(["add".to_string(), "ad".to_string()].into()), ..GenConfig::default() };
    assert!(matches!(c.check(), Err(ConfigError::Unknown { member: "only_ops", ref name, .. }) if name == "ad"));
    let c = GenConfig { only_backends: Some(["XnnpackBackend".to_string()].into()), ..GenConfig::default() };
    assert_eq!(c.check(), Ok(()));
    let c = GenConfig { only_backends: Some(["xnnpack".to_string()].into()), ..GenConfig::default() };
    assert!(matches!(c.check(), Err(ConfigError::Unknown { member: "only_backends", .. })));
    // The CLI: exit 2 naming the file and the member, before any case runs.
    let dir = tempfile::Builder::new().prefix("ptecheck-cli-config-").tempdir().expect("temporary directory");
    let dir = dir.path();
    let path = dir.join("huge.json");
    std::fs::write(&path, r#"{"min_methods": 1000000000, "max_methods": 1000000000}"#).expect("writes");
    let out = bin().args(["campaign", "--cases", "1", "--config"]).arg(&path).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("huge.json") && err.contains("`min_methods` is 1000000000; at most 64"), "{err}");
}

/// Runs `ptecheck ARGS` with its standard output going to `stdout`: its exit code and stderr.
fn run_into(args: &[&str], stdout: impl Into<std::process::Stdio>) -> (Option<i32>, String) {
    let out = bin().args(args).stdout(stdout).stderr(std::process::Stdio::piped()).output().expect("runs");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A pipe whose reading end is already closed, as under `ptecheck campaign | head -1` once
/// `head` is done: every write to it fails with a broken pipe.
fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    writer
}

#[test]
fn output_whose_reader_has_gone_ends_quietly_with_the_commands_own_exit_code() {
    let (code, err) = run_into(&["campaign", "--cases", "20", "--seed", "1", "--jobs", "1"], closed_pipe());
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // A failing campaign keeps its exit code when nobody reads its report.
    let failing = ["campaign", "--cases", "256", "--fault", "drop_last_delegate_output", "--jobs", "2"];
    let (code, err) = run_into(&failing, closed_pipe());
    assert_eq!(code, Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn output_that_cannot_be_written_is_named_and_the_command_exits_2() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else { return };
    let (code, err) = run_into(&["campaign", "--cases", "20", "--seed", "1", "--jobs", "1"], full);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot write standard output") && !err.contains("panicked"), "{err}");
}

/// `campaign ARGS --json` with `runner` (`--jobs 1` or `--processes 2`): exit code and report.
fn campaign_json(args: &[&str], runner: &[&str]) -> (Option<i32>, serde_json::Value) {
    let out = bin().arg("campaign").args(args).args(runner).arg("--json").output().expect("runs");
    let report =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), report)
}

#[test]
fn a_campaign_run_as_shard_processes_reports_what_one_process_does() {
    let dir = tempfile::Builder::new().prefix("ptecheck-cli-processes-").tempdir().expect("temporary directory");
    let config = dir.path().join("config.json");
    std::fs::write(&config, r#"{"max_nodes": 6}"#).expect("writes");
    let config = config.to_str().expect("a UTF-8 path");
    // Every option that decides the report is passed on: a seeded fault with swarm off and
    // keep going (so failures, their list and the first one are compared too), and a
    // configuration file with every corruption sent end to end.
    for (args, failing) in [
        (
            &["--cases", "150", "--seed", "11", "--no-swarm", "--fault", "drop_last_delegate_output", "--keep-going"][..],
            true,
        ),
        (&["--cases", "120", "--seed", "12", "--config", config, "--negative-end-to-end"][..], false),
    ] {
        let (one_code, one) = campaign_json(args, &["--jobs", "1"]);
        let (code, mut many) = campaign_json(args, &["--processes", "2"]);
        assert_eq!(one["failures"].as_u64().is_some_and(|n| n > 1), failing, "{args:?}: {}", one["failures"]);
        assert_eq!(code, one_code, "{args:?}");
        for member in ["cases", "failures", "invariants", "features", "failing_cases", "first_failing_case"] {
            assert_eq!(many[member], one[member], "{member} of {args:?}");
        }
        assert_eq!(many["failure"]["case"], one["failure"]["case"], "{args:?}");
        assert_eq!(many["failure"]["input_hex"], one["failure"]["input_hex"], "{args:?}");
        assert_eq!(many["shards_run"], serde_json::json!([0, 1]));
        // The campaign is the same but for its shard count.
        assert_eq!(many["campaign"]["shards"], 2);
        many["campaign"]["shards"] = one["campaign"]["shards"].clone();
        assert_eq!(many["campaign"], one["campaign"], "{args:?}");
    }
    // It runs this program's own shards: a sharded or single-case run is refused up front.
    let out = bin().args(["campaign", "--processes", "2", "--shard", "0/2"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--shard"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_timeout_that_is_not_a_finite_number_of_seconds_is_refused_by_name() {
    for (args, flag) in [
        (vec!["campaign", "--runner", "true", "--runner-timeout", "inf"], "--runner-timeout"),
        (vec!["campaign", "--runner", "true", "--runner-timeout", "1e20"], "--runner-timeout"),
        (vec!["campaign", "--runner", "true", "--runner-start-timeout", "NaN"], "--runner-start-timeout"),
        (vec!["campaign", "--runner", "true", "--runner-timeout=-1"], "--runner-timeout"),
        (vec!["run", "x.pte", "--runner", "true", "--runner-timeout", "inf"], "--runner-timeout"),
    ] {
        let out = bin().args(&args).output().expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag) && err.contains("seconds"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn a_timeout_is_taken_at_its_edges_and_refused_just_past_them() {
    use ptecheck::campaign::options::{MAX_WAIT_SECS, parse_seconds};
    use std::time::Duration;
    assert_eq!(MAX_WAIT_SECS, 86_400.0, "the documented limit");
    assert_eq!(parse_seconds("0.001"), Ok(Duration::from_millis(1)));
    assert_eq!(parse_seconds("86400"), Ok(Duration::from_secs(86_400)));
    for past in ["0.000999", "86400.001", "0", "-0.001"] {
        assert!(parse_seconds(past).is_err(), "{past}");
    }
    // Through the CLI: at the edges the flag is taken (the runner `true` then fails to start);
    // just past them it is refused by name.
    for (value, taken) in [("0.001", true), ("86400", true), ("0.0009", false), ("86400.5", false)] {
        let out = bin()
            .args(["campaign", "--cases", "1", "--runner", "true", "--runner-timeout", value])
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(!err.contains("--runner-timeout"), taken, "{value}: {err}");
    }
}

#[test]
fn more_jobs_than_a_campaign_may_ask_for_are_refused_by_name() {
    let too_many = (ptecheck::campaign::MAX_JOBS + 1).to_string();
    let out = bin().args(["campaign", "--cases", "1", "--jobs", &too_many]).output().expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--jobs") && err.contains(&too_many), "{err}");
}

#[test]
fn a_case_that_runs_past_the_case_timeout_is_reported_hung_with_its_replay_command() {
    // Every no-swarm case with every corruption sent end to end runs for milliseconds.
    let hung = |workers: &[&str]| {
        let slow = ["campaign", "--cases", "40", "--seed", "5", "--no-swarm", "--negative-end-to-end"];
        bin().args(slow).args(workers).args(["--case-timeout", "0.001"]).output().expect("runs")
    };
    let out = hung(&["--jobs", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("past --case-timeout 0.001 s: hung"), "{stderr}");
    assert!(stderr.contains("replay: ptecheck campaign --seed 5 --case ") && stderr.contains("--no-swarm"), "{stderr}");
    assert!(out.stdout.is_empty(), "no report: {}", String::from_utf8_lossy(&out.stdout));
    // Run as shard processes, the hung shard is named with its exit status and its words.
    let out = hung(&["--processes", "2"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("exit status: 4") && stderr.contains("hung"), "{stderr}");
    // The default limit leaves ordinary cases alone.
    let out = bin().args(["campaign", "--cases", "20", "--no-swarm", "--jobs", "1"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_timeout_is_taken_from_a_millisecond_to_a_day_and_refused_just_past_either_edge() {
    use ptecheck::campaign::options::{MAX_WAIT_SECS, parse_seconds};
    assert_eq!(parse_seconds("0.001").map(|d| d.as_secs_f64()), Ok(0.001));
    assert_eq!(parse_seconds("86400").map(|d| d.as_secs()), Ok(86_400));
    assert_eq!(MAX_WAIT_SECS, 86_400.0);
    for bad in ["0.0009", "86400.001", "0", "-1", "inf", "NaN", "ten"] {
        assert!(parse_seconds(bad).is_err(), "{bad} taken");
    }
    // Through the command line too: the edge is taken (the runner then fails to start: exit 2
    // naming the runner, not the flag).
    let out = bin()
        .args(["campaign", "--runner", "exit 3", "--runner-timeout", "86400", "--cases", "1"])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gave no hello") && !err.contains("--runner-timeout"), "{err}");
}
