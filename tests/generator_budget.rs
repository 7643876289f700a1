//! The program's node budget (`GenConfig::max_total_nodes`): the generator draws at most that
//! many nodes, after which each further graph gets only the one node it must have and no
//! control flow, so the budget bounds a program whatever `max_nodes` and `max_depth` allow.

use ptecheck::generator::config::MAX_TOTAL_NODES;
use ptecheck::generator::{GenConfig, generate_from_bytes};
use ptecheck::ir::{Graph, IrProgram};
use ptecheck::oracle::campaign::case_input;

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

/// A configuration whose nesting could make programs of thousands of nodes.
fn deep(max_total_nodes: usize) -> GenConfig {
    GenConfig { max_depth: 4, max_nodes: 32, control_percent: 40, max_total_nodes, ..GenConfig::default() }
}

/// The most nodes a graph's one step adds (an operator with a side op and a relu after it, or a
/// call with a row taken of its result); past the budget each graph takes one such step.
const STEP: usize = 3;

/// Whether `p` keeps to `budget`: at most `budget` nodes, plus one step per graph.
fn within(p: &IrProgram, budget: usize) -> bool {
    let (nodes, graphs) = program_size(p);
    nodes <= budget + STEP * graphs
}

#[test]
fn a_program_keeps_to_its_node_budget_however_deep_the_configuration() {
    for budget in [1, 16, 48] {
        for case in 0..1500 {
            let g = generate_from_bytes(&deep(budget), &case_input(7, case));
            let (nodes, graphs) = program_size(&g.program);
            assert!(within(&g.program, budget), "case {case}: {nodes} nodes in {graphs} graphs over budget {budget}");
        }
    }
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
fn the_default_budget_binds_rarely_and_swarm_keeps_it() {
    use ptecheck::oracle::campaign::{CampaignOptions, case_config};
    let opts = CampaignOptions::default();
    let budget = GenConfig::default().max_total_nodes;
    let (mut at_budget, cases) = (0, 4000);
    for case in 0..cases {
        let cfg = case_config(&opts, case as u64);
        assert_eq!(cfg.max_total_nodes, budget, "case {case}: swarm redrew the node budget");
        let g = generate_from_bytes(&cfg, &case_input(opts.seed, case as u64));
        assert!(within(&g.program, budget), "case {case} is over the default budget");
        at_budget += usize::from(program_size(&g.program).0 >= budget);
    }
    // The budget caps the largest default programs (a few in a thousand), not the typical ones.
    assert!((1..cases / 50).contains(&at_budget), "{at_budget} of {cases} default programs reach the budget");
}
