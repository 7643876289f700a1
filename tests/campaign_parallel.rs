//! Issue K: the campaign on several jobs gives the report it gives on one; shard reports merge
//! into the report of the whole; failures are saved as reproducer folders; the per-element
//! negative check agrees with the whole-method check on every corruption.

#![forbid(unsafe_code)]

use ptecheck::campaign::reports::{MergeError, merge, merge_files, save_failures};
use ptecheck::campaign::{CampaignId, CampaignOptions, CampaignResult, case_config, case_input, replay_command, run};
use ptecheck::fault::Fault;
use ptecheck::format;
use ptecheck::generator::generate;
use ptecheck::oracle::negative::corruptions;
use ptecheck::runtime::check::{PreparedPlan, check_method_with};

/// Everything of a report that must not depend on how it was computed (not times).
fn outcome(r: &CampaignResult) -> String {
    let failure = r.failure.as_ref().map(|f| (f.case, f.invariant.clone(), f.input_hex.clone()));
    format!(
        "{} {} {:?} {:?} {:?} {:?} {:?} {:?}",
        r.cases,
        r.failures,
        r.invariants,
        r.failures_by_kind,
        r.features,
        r.first_failing_case,
        r.failing_cases,
        failure
    )
}

#[test]
fn the_report_is_the_same_on_one_job_and_on_three() {
    // A fault that some cases catch and others do not, so the order of merging matters.
    let opts = CampaignOptions {
        cases: 200,
        seed: 9,
        fault: Some(Fault::JumpOffByOne),
        stop_on_failure: false,
        shrink_budget: 30,
        ..CampaignOptions::default()
    };
    let one = run(&CampaignOptions { jobs: 1, ..opts.clone() });
    let three = run(&CampaignOptions { jobs: 3, ..opts.clone() });
    assert!(one.failures > 1 && one.failures < one.cases, "{} of {}", one.failures, one.cases);
    assert_eq!((one.jobs, three.jobs), (1, 3));
    assert_eq!(outcome(&one), outcome(&three));
    // Every check is listed (even one never performed), `emit` only among the failures by kind,
    // every failing case names the invariant it failed, and every stage's time is accounted.
    let names: Vec<&str> = ptecheck::oracle::Invariant::all().iter().map(|i| i.name()).collect();
    assert!(names.len() >= 10, "{names:?}");
    assert_eq!(one.invariants.keys().map(String::as_str).collect::<Vec<_>>(), {
        let mut n: Vec<&str> = names.iter().copied().filter(|n| *n != "emit").collect();
        n.sort();
        n
    });
    let violations: usize = one.failures_by_kind.values().sum();
    assert!(violations as u64 >= one.failures, "{:?} for {} failing cases", one.failures_by_kind, one.failures);
    assert!(one.failing_cases.iter().all(|f| names.contains(&f.invariant.as_str())), "{:?}", one.failing_cases);
    let t = &one.timings;
    for (stage, d) in [("emit", t.emit), ("write", t.write), ("load", t.load), ("init", t.init), ("execute", t.execute)]
    {
        assert!(d > std::time::Duration::ZERO, "{stage} not timed");
    }
    assert!(t.eager > std::time::Duration::ZERO && t.negative > std::time::Duration::ZERO);
    assert!(one.generate > std::time::Duration::ZERO && t.compare > std::time::Duration::ZERO);
    // Stopping at the first failure stops at the same case whatever the jobs.
    let stop1 = run(&CampaignOptions { jobs: 1, stop_on_failure: true, ..opts.clone() });
    let stop3 = run(&CampaignOptions { jobs: 3, stop_on_failure: true, ..opts });
    assert_eq!(stop1.cases, stop1.first_failing_case.expect("fails") + 1);
    assert_eq!(outcome(&stop1), outcome(&stop3));
}

#[test]
fn shard_reports_merge_into_the_report_of_the_whole_campaign() {
    let opts = CampaignOptions {
        cases: 90,
        seed: 4,
        fault: Some(Fault::JumpOffByOne),
        stop_on_failure: false,
        shrink: false,
        jobs: 1,
        ..CampaignOptions::default()
    };
    let whole = run(&opts);
    let shards: Vec<CampaignResult> = (0..3).map(|i| run(&CampaignOptions { shard: (i, 3), ..opts.clone() })).collect();
    // Through JSON, as the nightly matrix hands them over.
    let shards: Vec<CampaignResult> = shards
        .iter()
        .map(|r| serde_json::from_str(&serde_json::to_string(r).expect("serialises")).expect("reads back"))
        .collect();
    let merged = merge(&shards).expect("merges");
    assert_eq!(merged.cases, whole.cases);
    assert_eq!(merged.failures, whole.failures);
    assert_eq!(merged.invariants, whole.invariants);
    assert_eq!(merged.features, whole.features);
    assert_eq!(merged.failing_cases, whole.failing_cases);
    assert_eq!(merged.first_failing_case, whole.first_failing_case);
    assert_eq!(merged.failure.map(|f| f.case), whole.failure.map(|f| f.case));
    assert_eq!(merged.shards_run, vec![0, 1, 2]);
    assert_eq!(merged.campaign, CampaignId { shards: 3, ..whole.campaign.clone() });
    assert!(merge(&[]).is_err());
}

#[test]
fn reports_of_another_campaign_or_a_shard_twice_are_not_merged() {
    let opts = CampaignOptions { cases: 12, seed: 9, jobs: 1, ..CampaignOptions::default() };
    let shard = |i: u64, o: &CampaignOptions| run(&CampaignOptions { shard: (i, 2), ..o.clone() });
    let (a, b) = (shard(0, &opts), shard(1, &opts));
    assert!(merge(&[a.clone(), b.clone()]).is_ok());
    // The same shard twice would count its cases twice.
    match merge(&[a.clone(), b.clone(), a.clone()]) {
        Err(MergeError::DuplicateShard { report: 2, shard: 0, first: 0 }) => {}
        other => panic!("{other:?}"),
    }
    // Shards of campaigns that differ in what decides their cases do not add up to one.
    for (other, member) in [
        (CampaignOptions { seed: 10, ..opts.clone() }, "seed"),
        (CampaignOptions { cases: 14, ..opts.clone() }, "cases"),
        (CampaignOptions { swarm: false, ..opts.clone() }, "swarm"),
        (CampaignOptions { fault: Some(Fault::JumpOffByOne), ..opts.clone() }, "fault"),
    ] {
        match merge(&[a.clone(), shard(1, &other)]) {
            Err(MergeError::OtherCampaign { report: 1, differs }) => assert!(differs.starts_with(member), "{differs}"),
            other => panic!("{member}: {other:?}"),
        }
    }
    let three = run(&CampaignOptions { shard: (1, 3), ..opts.clone() });
    assert!(
        matches!(merge(&[a, three]), Err(MergeError::OtherCampaign { differs, .. }) if differs.starts_with("shards"))
    );
}

#[test]
fn unreadable_or_foreign_report_files_are_left_out_and_the_rest_merged() {
    let dir = tempfile::Builder::new().prefix("ptecheck-merge-files-").tempdir().expect("temporary directory");
    let dir = dir.path();
    let opts = CampaignOptions { cases: 12, seed: 9, jobs: 1, ..CampaignOptions::default() };
    let write = |name: &str, r: &CampaignResult| {
        let path = dir.join(name);
        std::fs::write(&path, serde_json::to_string(r).expect("serialises")).expect("writes");
        path
    };
    let s0 = write("s0.json", &run(&CampaignOptions { shard: (0, 3), ..opts.clone() }));
    let s2 = write("s2.json", &run(&CampaignOptions { shard: (2, 3), ..opts.clone() }));
    let foreign = write("foreign.json", &run(&CampaignOptions { shard: (1, 3), seed: 1, ..opts.clone() }));
    // A shard's report cut short (its job timed out while writing).
    let cut = dir.join("cut.json");
    let text = std::fs::read_to_string(&s2).expect("reads");
    std::fs::write(&cut, &text[..text.len() / 2]).expect("writes");
    let outcome = merge_files(&[s0, cut.clone(), foreign.clone(), s2]);
    let merged = outcome.merged.as_ref().expect("the readable shards merge");
    assert_eq!(merged.shards_run, vec![0, 2]);
    assert_eq!(outcome.missing_shards(), vec![1]);
    let refused: Vec<String> = outcome.refused.iter().map(ToString::to_string).collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(refused[0].contains("cut.json"), "{refused:?}");
    assert!(refused[1].contains("foreign.json") && refused[1].contains("seed 1, not 9"), "{refused:?}");
    assert!(merge_files(&[]).merged.is_none());
}

#[test]
fn hostile_reports_are_refused_by_name_not_summed_into_nonsense() {
    let opts = CampaignOptions { cases: 12, seed: 9, jobs: 1, ..CampaignOptions::default() };
    let shard = |i: u64| run(&CampaignOptions { shard: (i, 2), ..opts.clone() });
    let (a, b) = (shard(0), shard(1));
    // Counts and times whose sum overflows: refused, naming the report and the member, and the
    // report before it is merged unchanged.
    let checked = a.invariants.iter().find(|(_, n)| **n > 0).map(|(k, _)| k.clone()).expect("an invariant checked");
    let huge = |edit: &dyn Fn(&mut CampaignResult)| {
        let mut h = b.clone();
        edit(&mut h);
        h
    };
    for (bad, member) in [
        (huge(&|h| h.cases = u64::MAX), "cases".to_string()),
        (huge(&|h| h.failures = u64::MAX), "failures".to_string()),
        (huge(&|h| *h.invariants.get_mut(&checked).expect("listed") = usize::MAX), format!("invariants.{checked}")),
        (huge(&|h| h.timings.emit = std::time::Duration::MAX), "timings".to_string()),
        (huge(&|h| h.generate = std::time::Duration::MAX), "generate".to_string()),
    ] {
        // One failing case in the first report, so that every member has something to add to.
        let first = CampaignResult { failures: 1, ..a.clone() };
        match merge(&[first, bad.clone()]) {
            Err(MergeError::Overflow { report: 1, member: m }) => assert_eq!(m, member),
            other => panic!("{member}: {other:?}"),
        }
    }
    // Through files: the overflowing report is left out and the other merged as it was.
    let dir = tempfile::Builder::new().prefix("ptecheck-merge-hostile-").tempdir().expect("temporary directory");
    let write = |name: &str, r: &CampaignResult| {
        let path = dir.path().join(name);
        std::fs::write(&path, serde_json::to_string(r).expect("serialises")).expect("writes");
        path
    };
    let outcome = merge_files(&[write("a.json", &a), write("bad.json", &huge(&|h| h.cases = u64::MAX))]);
    assert_eq!(outcome.merged.as_ref().map(|m| (m.cases, m.shards_run.clone())), Some((a.cases, vec![0])));
    let refused: Vec<String> = outcome.refused.iter().map(ToString::to_string).collect();
    assert!(refused.len() == 1 && refused[0].contains("bad.json") && refused[0].contains("cases"), "{refused:?}");
    // One report listing a shard twice would make the missing-shard count say the campaign is
    // whole when it is not.
    let twice = huge(&|h| h.shards_run = vec![1, 1]);
    assert!(matches!(merge(&[a.clone(), twice]), Err(MergeError::ShardTwice { report: 1, shard: 1 })));
    // A report of a million shards: the missing ones are found without a scan per shard.
    let many = huge(&|h| {
        h.campaign.shards = 1 << 40;
        h.shards_run = (0..1_000_000).collect();
    });
    let outcome = merge_files(&[write("many.json", &many)]);
    assert!(outcome.refused.is_empty(), "{:?}", outcome.refused);
    assert_eq!(outcome.missing_shards().first(), Some(&1_000_000));
    assert_eq!(outcome.missing_shard_count(), (1 << 40) - 1_000_000);
}

#[test]
fn a_clean_campaign_saves_nothing_and_a_replay_command_keeps_its_mode() {
    let opts = CampaignOptions { cases: 8, jobs: 1, negative_end_to_end: true, ..CampaignOptions::default() };
    let r = run(&opts);
    assert_eq!(r.failures, 0);
    let tmp = tempfile::Builder::new().prefix("ptecheck-save-clean-").tempdir().expect("temporary directory");
    let dir = tmp.path().join("failures");
    assert_eq!(save_failures(&opts, &r, &dir).expect("saves"), Vec::<std::path::PathBuf>::new());
    assert_eq!(std::fs::read_dir(&dir).expect("made").count(), 0, "a clean campaign leaves its folder empty");
    assert!(replay_command(&opts, 3).ends_with("--case 3 --negative-end-to-end"), "{}", replay_command(&opts, 3));
    assert_eq!(r.jobs, 1);
}

#[test]
fn a_failure_is_saved_as_a_folder_that_replays() {
    let opts = CampaignOptions {
        cases: 256,
        fault: Some(Fault::DropLastDelegateOutput),
        shrink_budget: 40,
        jobs: 1,
        ..CampaignOptions::default()
    };
    let r = run(&opts);
    let f = r.failure.clone().expect("caught");
    let tmp = tempfile::Builder::new().prefix("ptecheck-save-failures-").tempdir().expect("temporary directory");
    let dir = tmp.path().join("failures");
    let written = save_failures(&opts, &r, &dir).expect("written");
    assert_eq!(written, vec![dir.join(format!("case-{}-{:06}", f.seed, f.case))]);
    let folder = &written[0];
    for file in ["failure.json", "program.json", "shared.pte", "unshared.pte", "io.json"] {
        assert!(folder.join(file).is_file(), "{file} missing");
    }
    let failure: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("failure.json")).expect("reads")).expect("json");
    assert_eq!(failure["command"], f.command.as_str());
    let program = ptecheck::ir::saved::load(&std::fs::read_to_string(folder.join("program.json")).expect("reads"));
    assert!(program.is_ok());
    let listed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("failing-cases.json")).expect("reads")).expect("json");
    assert_eq!(listed[0]["case"], f.case);
}

#[test]
fn the_per_element_negative_check_gives_the_whole_method_check_on_every_corruption() {
    let opts = CampaignOptions { seed: 5, swarm: true, ..CampaignOptions::default() };
    let mut compared = 0usize;
    let mut classes = std::collections::BTreeSet::new();
    for case in 0..40 {
        let g = generate(&case_config(&opts, case), &mut arbitrary::Unstructured::new(&case_input(5, case)), None);
        let bytes = ptecheck::campaign::case_files::emit_both(&g, true).expect("emits").shared;
        let loaded = format::load(&bytes).expect("loads");
        for (pi, plan) in loaded.program.plans().iter().enumerate() {
            for fault in [None, Some(Fault::LaterOpLookupHides), Some(Fault::SkipScratchCallSiteCheck)] {
                let mut prepared = PreparedPlan::new(&loaded, pi, fault).expect("a valid plan");
                for c in corruptions(plan, pi) {
                    let Some(patched) = c.patch(plan) else { continue };
                    let fast = prepared.check_replaced(patched.replacement());
                    let mut copy = loaded.clone();
                    assert!(c.apply(&mut copy.program));
                    let full = check_method_with(&copy, pi, fault);
                    assert_eq!(fast, full, "case {case}: {}", c.describe(&loaded.program));
                    classes.insert(c.class);
                    compared += 1;
                }
            }
        }
    }
    assert!(compared > 1000, "{compared}");
    assert!(classes.len() >= 8, "{classes:?}");
}

#[test]
fn shrinking_deletes_then_zeroes_within_its_budget() {
    use ptecheck::campaign::shrink_bytes;
    let input: Vec<u8> = (1..=40).collect();
    // Fails while it holds byte 7 and byte 30: deletion leaves exactly those two.
    let fails = |b: &[u8]| b.contains(&7) && b.contains(&30);
    let (best, tries) = shrink_bytes(&input, 1000, fails);
    assert_eq!(best, vec![7, 30]);
    assert!(tries <= 1000);
    // Fails while at least 4 bytes remain and one is 9: deletion stops at 4 bytes, zeroing
    // clears the other three.
    let fails = |b: &[u8]| b.len() >= 4 && b.contains(&9);
    let (best, _) = shrink_bytes(&input, 1000, fails);
    assert_eq!(best.len(), 4);
    assert_eq!(best.iter().filter(|b| **b != 0).collect::<Vec<_>>(), vec![&9]);
    // Nothing shrinks: one pass of deletions (2 + 3 + 5 + 10 + 20 + 40 chunks of 32 … 1 bytes)
    // and 40 zeroings, then it stops; a smaller budget stops it at exactly the budget.
    for (budget, want) in [(0, 0), (1, 1), (5, 5), (119, 119), (120, 120), (1000, 120)] {
        let mut calls = 0;
        let (best, tries) = shrink_bytes(&input, budget, |_| {
            calls += 1;
            false
        });
        assert_eq!((calls, tries), (want, want), "budget {budget}");
        assert_eq!(best, input);
    }
    let (best, tries) = shrink_bytes(&input, 0, |_| true);
    assert_eq!((best, tries), (input.clone(), 0));
}

#[test]
fn progress_counts_this_shards_cases() {
    use ptecheck::campaign::{Progress, run_with};
    for (shard, want) in [(0, 4), (1, 3), (2, 3)] {
        let opts = CampaignOptions { cases: 10, shard: (shard, 3), jobs: 1, ..CampaignOptions::default() };
        let mut seen: Vec<Progress> = Vec::new();
        let r = run_with(&opts, &mut |p| seen.push(p));
        assert_eq!(r.cases, want);
        assert_eq!(seen.len() as u64, want);
        assert!(seen.iter().enumerate().all(|(i, p)| p.done == i as u64 + 1 && p.total == want && p.failures == 0));
    }
}

#[test]
fn a_report_naming_a_shard_out_of_range_or_a_huge_shard_count_is_handled_in_bounds() {
    let dir = tempfile::Builder::new().prefix("ptecheck-merge-bounds-").tempdir().expect("temporary directory");
    let dir = dir.path();
    let r = run(&CampaignOptions { cases: 4, seed: 2, jobs: 1, ..CampaignOptions::default() });
    // A shard the campaign does not have: refused with a typed error.
    let mut out_of_range = r.clone();
    out_of_range.shards_run = vec![5];
    match merge(&[out_of_range]) {
        Err(MergeError::ShardOutOfRange { report: 0, shard: 5, shards: 1 }) => {}
        other => panic!("{other:?}"),
    }
    // A campaign of 2^60 shards (a hand-edited report): the missing ones are counted, and only
    // the first few listed.
    let mut huge = r;
    huge.campaign.shards = 1 << 60;
    let path = dir.join("huge.json");
    std::fs::write(&path, serde_json::to_string(&huge).expect("serialises")).expect("writes");
    let outcome = merge_files(&[path]);
    assert!(outcome.refused.is_empty(), "{:?}", outcome.refused);
    assert_eq!(outcome.missing_shard_count(), (1 << 60) - 1);
    assert_eq!(outcome.missing_shards(), (1..=64).collect::<Vec<u64>>());
}
