//! Generator coverage, the campaign, and seeded-bug detection.

#![forbid(unsafe_code)]

use ptecheck::campaign::mutants::run_mutants;
use ptecheck::campaign::{CampaignOptions, run};
use ptecheck::fault::Fault;
use ptecheck::generator::{Feature, Switch, feature_names};
use strum::IntoEnumIterator;

#[test]
fn within_1000_cases_every_feature_appears_and_every_program_emits_loads_and_inits() {
    let r = run(&CampaignOptions { cases: 1000, seed: 0, stop_on_failure: false, ..CampaignOptions::default() });
    assert_eq!(r.cases, 1000);
    assert_eq!(r.failures, 0, "{:#?}", r.failure.as_ref().map(|f| (&f.failures, &f.program_text)));
    // Every feature the default switches allow (while loops are off by default, E27, and so are
    // compiler-demo modules, DB2).
    let off: Vec<&str> = Feature::iter().filter(|f| !f.switch().default_on()).map(Feature::name).collect();
    assert_eq!(off, ["call_in_while", "while", "compiler_demo_call"]);
    let missing: Vec<String> = feature_names()
        .into_iter()
        .filter(|f| !off.contains(&f.as_str()) && r.features.get(f).copied().unwrap_or(0) == 0)
        .collect();
    assert!(missing.is_empty(), "features never generated: {missing:?}");
    // 100% emit, load and init: every case ran I4 (load + init) for both emissions of every method.
    assert!(r.invariants["I4"] >= 2 * 1000, "{:?}", r.invariants);
    // Every invariant was checked (`emit` counts only failures of emission itself).
    assert!(r.invariants.iter().all(|(_, v)| *v > 0), "{:?}", r.invariants);
    assert!(!r.invariants.contains_key("emit") && r.failures_by_kind.is_empty(), "{r:?}");
}

#[test]
fn default_off_switches_generate_only_when_switched_on() {
    let off = run(&CampaignOptions { cases: 200, ..CampaignOptions::default() });
    for (switch, feature) in [(Switch::WhileLoop, "while"), (Switch::CompilerDemo, "compiler_demo_call")] {
        assert_eq!(off.features.get(feature), None);
        let mut cfg = ptecheck::generator::GenConfig::default();
        cfg.features.set(switch, true);
        let on = run(&CampaignOptions { cases: 300, config: cfg, ..CampaignOptions::default() });
        assert_eq!(on.failures, 0, "{switch:?}: {:?}", on.failure.as_ref().map(|f| &f.failures));
        assert!(on.features.get(feature).copied().unwrap_or(0) > 0, "{switch:?}");
    }
}

#[test]
fn every_seeded_fault_is_caught_within_256_cases() {
    let base = CampaignOptions { shrink_budget: 60, ..CampaignOptions::default() };
    let results = run_mutants(&base, 256, &Fault::all()).0;
    assert_eq!(results.len(), Fault::all().len());
    for r in &results {
        assert!(r.caught, "{} not caught in 256 cases", r.name);
        assert!(r.cases_to_catch.is_some_and(|c| c <= 256), "{r:?}");
        assert!(r.shrunk_nodes.is_some_and(|n| n > 0), "{r:?}");
        assert_eq!(r.invariant.as_deref(), Some(r.expected.as_str()), "{r:?}");
    }
}

#[test]
fn a_failing_case_replays_from_its_seed_and_index_and_shrinks() {
    let opts = CampaignOptions { cases: 256, fault: Some(Fault::DropLastDelegateOutput), ..CampaignOptions::default() };
    let r = run(&opts);
    let f = r.failure.expect("caught");
    assert!(f.shrunk_nodes <= f.original_nodes);
    assert!(
        f.command.contains(&format!("--case {}", f.case)) && f.command.contains("--fault drop_last_delegate_output")
    );
    let replay = run(&CampaignOptions { only_case: Some(f.case), ..opts });
    assert_eq!((replay.cases, replay.failures), (1, 1));
    // The reproduction's saved JSON is a loadable program that fails the same way.
    let p = ptecheck::ir::saved::load(&f.program_json).expect("loads");
    let rep = ptecheck::oracle::check_ir(
        &p,
        &ptecheck::oracle::CheckOptions { fault: Some(Fault::DropLastDelegateOutput), ..Default::default() },
    );
    assert!(!rep.ok());
}

#[test]
fn shards_partition_the_cases() {
    let a = run(&CampaignOptions { cases: 30, shard: (0, 3), ..CampaignOptions::default() });
    let b = run(&CampaignOptions { cases: 30, shard: (2, 3), ..CampaignOptions::default() });
    assert_eq!((a.cases, b.cases), (10, 10));
}

#[test]
fn swarm_draws_below_the_configured_limits_even_above_the_defaults() {
    use ptecheck::campaign::case_config;
    let config = ptecheck::generator::GenConfig { max_depth: 4, max_nodes: 30, ..Default::default() };
    let opts = CampaignOptions { config, ..CampaignOptions::default() };
    let drawn: Vec<_> = (0..400).map(|c| case_config(&opts, c)).collect();
    assert!(drawn.iter().all(|c| c.max_depth <= 4 && c.max_nodes <= 30));
    assert!(drawn.iter().any(|c| c.max_depth > 2), "depth above the default is drawn");
    assert!(drawn.iter().any(|c| c.max_nodes > 8), "node counts above the default are drawn");
}

/// A campaign finding (seed 1, case 588069): `cond` on `div(c, addmm(x, x)) > -2` with
/// `x = [inf, -f32::MAX]`. The XNNPACK delegate's addmm and the eager interpreter's may differ
/// on such inputs, so the predicate may go either way (its bound flags it), and the runtime
/// took the other branch: the calls inside it and after it are not the eager run's to predict.
/// The eager run says how many of its calls are decided, and only those are compared.
#[test]
fn calls_after_a_decision_that_may_go_either_way_are_not_held_to_the_eager_run() {
    use ptecheck::generator::{Generated, RunChoices};
    use ptecheck::ir::eval::run_method;
    use ptecheck::ir::value::{Data, Tensor, Val};
    use ptecheck::oracle::{CheckOptions, check_case};
    let text = include_str!("../corpus/campaign/undecided-cond-calls.json");
    let program = ptecheck::ir::saved::load(text).expect("the saved regression loads");
    let f32s = |shape: &[usize], v: &[f32]| Val::Tensor(Tensor { shape: shape.to_vec(), data: Data::F32(v.to_vec()) });
    let inputs = vec![f32s(&[1, 2], &[f32::INFINITY, -f32::MAX]), f32s(&[1, 1, 2], &[-3.90625, -3.90625])];
    let run = run_method(&program, "forward", &inputs).expect("the eager interpreter runs it");
    assert_eq!(run.calls.len(), 4, "one call, then a cond whose else branch calls three times");
    assert_eq!(run.decided_calls, 1, "only the call before the cond is decided");
    let case = Generated {
        program,
        inputs: [("forward".to_string(), inputs)].into(),
        run: RunChoices::default(),
        features: Default::default(),
    };
    let r = check_case(&case, &CheckOptions::default());
    assert!(r.ok(), "{:?}", r.failures);
}
