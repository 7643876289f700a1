//! The program's node budget (`GenConfig::max_total_nodes`): every node the generator makes is
//! spent from it, and once it is spent each further graph takes one step and no control flow, so
//! the budget bounds a program whatever `max_nodes` and `max_depth` allow.

#![forbid(unsafe_code)]

use ptecheck::campaign::case_input;
use ptecheck::generator::config::MAX_TOTAL_NODES;
use ptecheck::generator::{GenConfig, Switch, Switches, generate_from_bytes};
use ptecheck::ir::infer::typecheck_program;
use ptecheck::ir::{Graph, IrProgram};

/// Nodes and graphs of `g`, nested bodies included.
fn graph_size(g: &Graph) -> (usize, usize) {
    let (mut nodes, mut graphs) = (0, 1);
    g.walk(0, &mut |n, _| {
        nodes += 1;
        graphs += n.subgraphs().len();
    });
    (nodes, graphs)
}

/// Nodes and graphs of every method and lowered module of `p`.
fn program_size(p: &IrProgram) -> (usize, usize) {
    p.methods
        .iter()
        .map(|m| &m.graph)
        .chain(p.modules.iter().map(|m| &m.graph))
        .map(graph_size)
        .fold((0, 0), |(n, g), (n2, g2)| (n + n2, g + g2))
}

/// A configuration whose nesting could make programs of thousands of nodes, while loops on.
fn deep(max_total_nodes: usize) -> GenConfig {
    let mut cfg =
        GenConfig { max_depth: 4, max_nodes: 32, control_percent: 40, max_total_nodes, ..GenConfig::default() };
    cfg.features.set(Switch::WhileLoop, true);
    cfg
}

/// Configurations that lean on one way of making nodes each: conds whose then-branches record
/// side ops the else-branches replay; loops of every kind nested below the top level; many
/// modules, cloned and called, and multi-function partitions.
fn stressed(max_total_nodes: usize) -> Vec<(&'static str, GenConfig)> {
    let only = |on: &[Switch]| {
        let mut w = Switches::none();
        for s in on {
            w.set(*s, true);
        }
        w
    };
    let base = GenConfig { max_total_nodes, ..GenConfig::default() };
    vec![
        ("deep", deep(max_total_nodes)),
        (
            "replayed side ops",
            GenConfig {
                max_depth: 1,
                max_nodes: 64,
                control_percent: 50,
                features: only(&[Switch::Cond, Switch::SideOps, Switch::Constants, Switch::MultiMethod]),
                ..base.clone()
            },
        ),
        (
            "nested loops",
            GenConfig {
                max_depth: 4,
                max_nodes: 16,
                control_percent: 60,
                features: only(&[Switch::Map, Switch::Scan, Switch::WhileLoop, Switch::Cond, Switch::Constants]),
                ..base.clone()
            },
        ),
        (
            "modules",
            GenConfig {
                max_modules: 64,
                max_calls_per_module: 8,
                call_percent: 80,
                features: only(&[
                    Switch::Calls,
                    Switch::IdenticalPartitions,
                    Switch::Multifunction,
                    Switch::MultiMethod,
                    Switch::Argkeep,
                    Switch::Scratch,
                ]),
                ..base
            },
        ),
    ]
}

/// What a graph may add beyond the budget. A control-flow step is made only while the budget
/// holds all of its own nodes, and spends them before its bodies; a module is cloned only when
/// its nodes fit. What goes past the budget is one step per graph: an operator (at most two
/// nodes) with the two it mirrors into a cond's else-branch, or a call, and a partition's call.
const PER_GRAPH: usize = 4;

/// Whether `p` keeps to `budget`: at most `budget` nodes, plus [`PER_GRAPH`] per graph.
fn within(p: &IrProgram, budget: usize) -> bool {
    let (nodes, graphs) = program_size(p);
    nodes <= budget + PER_GRAPH * graphs
}

#[test]
fn a_program_keeps_to_its_node_budget_however_it_makes_its_nodes() {
    for budget in [0, 1, 8, 16, 48] {
        for (name, cfg) in stressed(budget) {
            for case in 0..600 {
                let g = generate_from_bytes(&cfg, &case_input(7, case));
                let (nodes, graphs) = program_size(&g.program);
                assert!(
                    within(&g.program, budget),
                    "{name}, case {case}: {nodes} nodes in {graphs} graphs over budget {budget}"
                );
                // The generator stays total under any budget.
                if let Err(e) = typecheck_program(&g.program) {
                    panic!("{name}, case {case} under budget {budget} does not type-check: {e}");
                }
            }
        }
    }
}

#[test]
fn every_node_made_is_spent_from_the_budget_once() {
    use arbitrary::Unstructured;
    use ptecheck::generator::generate_counted;
    for budget in [0, 8, 48, MAX_TOTAL_NODES] {
        for (name, cfg) in stressed(budget) {
            for case in 0..300 {
                let bytes = case_input(7, case);
                let (g, spent) = generate_counted(&cfg, &mut Unstructured::new(&bytes), None);
                let (nodes, _) = program_size(&g.program);
                assert_eq!(spent, nodes, "{name}, case {case}, budget {budget}: nodes spent and nodes made differ");
            }
        }
    }
}

#[test]
fn below_a_control_flow_steps_own_nodes_no_control_flow_is_made() {
    for budget in [0, 6] {
        for (name, cfg) in stressed(budget) {
            for case in 0..300 {
                let g = generate_from_bytes(&cfg, &case_input(7, case));
                let nested = g.program.methods.iter().any(|m| m.graph.nodes.iter().any(|n| !n.subgraphs().is_empty()));
                assert!(!nested, "{name}, case {case}: control flow under budget {budget}");
            }
        }
    }
}

#[test]
fn a_module_is_cloned_only_when_its_nodes_fit() {
    let clones = |budget| {
        let (_, cfg) = stressed(budget).remove(3);
        (0..600)
            .filter(|&case| {
                let g = generate_from_bytes(&cfg, &case_input(7, case));
                g.features.iter().any(|f| f.starts_with("identical_partitions"))
            })
            .count()
    };
    // Every module has a node, so none fits a budget of zero; lifted, clones are common.
    assert_eq!(clones(0), 0);
    assert!(clones(MAX_TOTAL_NODES) > 60, "clones are drawn when the budget allows them");
}

#[test]
fn without_the_budget_the_same_inputs_make_larger_programs() {
    // So the bound above is the budget's doing, not the configuration's.
    let over = (0..1500)
        .map(|case| generate_from_bytes(&deep(MAX_TOTAL_NODES), &case_input(7, case)))
        .filter(|g| !within(&g.program, 48))
        .count();
    assert!(over > 10, "only {over} of 1500 unbudgeted programs are larger than budget 48 allows");
}

#[test]
fn the_default_budget_changes_few_swarm_programs_and_swarm_keeps_it() {
    use ptecheck::campaign::{CampaignOptions, case_config};
    let opts = CampaignOptions::default();
    let budget = GenConfig::default().max_total_nodes;
    let (mut changed, cases) = (0, 4000u64);
    for case in 0..cases {
        let cfg = case_config(&opts, case);
        assert_eq!(cfg.max_total_nodes, budget, "case {case}: swarm redrew the node budget");
        let bytes = case_input(opts.seed, case);
        let g = generate_from_bytes(&cfg, &bytes);
        assert!(within(&g.program, budget), "case {case} is over the default budget");
        let lifted = generate_from_bytes(&GenConfig { max_total_nodes: MAX_TOTAL_NODES, ..cfg }, &bytes);
        changed += usize::from(g.program != lifted.program);
    }
    // The budget caps the largest default programs (a few in a thousand), not the typical ones.
    assert!((1..cases as usize / 100).contains(&changed), "the budget changed {changed} of {cases} default programs");
}
