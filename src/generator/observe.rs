//! What a generated program exercises, read off the program itself: the operators whose results
//! the oracle checks (a result reaching a method output, or a module's output at any call — the
//! oracle compares every call's arguments and results), and views that are freed.
//! May not touch: the program it reads, emission, the runtime.

use crate::ir::{Graph, IrProgram, Node, Op, OpKind, Ref};
use std::collections::BTreeSet;

/// Operators whose result reaches something the oracle compares, and whether a view is freed
/// (a live view that is not an output of its graph).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Live operator kinds.
    pub ops: BTreeSet<OpKind>,
    /// A live view is released after its last use.
    pub view_freed: bool,
}

fn outputs_of(n: &Node, p: &IrProgram) -> usize {
    match n {
        Node::Op { .. } | Node::Map { .. } => 1,
        Node::Call { module, .. } => p.modules.get(*module).map_or(0, |m| m.graph.outputs.len()),
        Node::Cond { then_graph, .. } => then_graph.outputs.len(),
        Node::Scan { body, .. } => body.outputs.len(),
        Node::While { carried, .. } => carried.len(),
    }
}

/// Marks what is live in `g` given which of its outputs are; returns which inputs are live.
fn graph(g: &Graph, live_out: &[bool], p: &IrProgram, obs: &mut Observed) -> Vec<bool> {
    let first = g.constants.len() + g.inputs.len();
    let mut base = Vec::with_capacity(g.nodes.len());
    let mut next = first;
    for n in &g.nodes {
        base.push(next);
        next += outputs_of(n, p);
    }
    let mut live = vec![false; next];
    for (o, l) in g.outputs.iter().zip(live_out) {
        if *l && *o < live.len() {
            live[*o] = true;
        }
    }
    for (i, n) in g.nodes.iter().enumerate().rev() {
        let k = outputs_of(n, p);
        let out_live: Vec<bool> = (base[i]..base[i] + k).map(|r| live[r]).collect();
        let any = out_live.iter().any(|x| *x);
        let mark = |refs: &[Ref], live: &mut Vec<bool>| {
            for r in refs {
                if let Some(x) = live.get_mut(*r) {
                    *x = true;
                }
            }
        };
        match n {
            Node::Op { op, args } => {
                if any {
                    obs.ops.insert(op.kind());
                    if matches!(op, Op::View { .. }) && !g.outputs.contains(&base[i]) {
                        obs.view_freed = true;
                    }
                    mark(args, &mut live);
                }
            }
            // A call's arguments and results are compared at every call: always live.
            Node::Call { args, .. } => mark(args, &mut live),
            Node::Cond { pred, then_graph, else_graph, operands } => {
                if any {
                    let a = graph(then_graph, &out_live, p, obs);
                    let b = graph(else_graph, &out_live, p, obs);
                    let used: Vec<Ref> = operands
                        .iter()
                        .zip(a.iter().zip(&b))
                        .filter(|(_, (x, y))| **x || **y)
                        .map(|(r, _)| *r)
                        .collect();
                    mark(&used, &mut live);
                    mark(&[*pred], &mut live);
                }
            }
            Node::Map { body, xs, args } => {
                if any {
                    let ins = graph(body, &[true], p, obs);
                    let used: Vec<Ref> = std::iter::once(*xs)
                        .chain(args.iter().copied())
                        .zip(ins)
                        .filter(|(_, l)| *l)
                        .map(|(r, _)| r)
                        .collect();
                    mark(&used, &mut live);
                    mark(&[*xs], &mut live);
                }
            }
            // Loop-carried values feed the next iteration: a live loop keeps its whole body.
            Node::Scan { body, init, xs } => {
                if any {
                    graph(body, &vec![true; body.outputs.len()], p, obs);
                    mark(init, &mut live);
                    mark(xs, &mut live);
                }
            }
            Node::While { cond, body, carried, .. } => {
                if any {
                    graph(cond, &[true], p, obs);
                    graph(body, &vec![true; body.outputs.len()], p, obs);
                    mark(carried, &mut live);
                }
            }
        }
    }
    (0..g.inputs.len()).map(|i| live[g.constants.len() + i]).collect()
}

/// Observes `p`: method outputs are live; a module called anywhere has every output live.
pub fn observe(p: &IrProgram) -> Observed {
    let mut obs = Observed::default();
    let mut called = BTreeSet::new();
    for m in &p.methods {
        graph(&m.graph, &vec![true; m.graph.outputs.len()], p, &mut obs);
        m.graph.walk(0, &mut |n, _| {
            if let Node::Call { module, .. } = n {
                called.insert(*module);
            }
        });
    }
    for m in called.iter().filter_map(|i| p.modules.get(*i)) {
        graph(&m.graph, &vec![true; m.graph.outputs.len()], p, &mut obs);
    }
    obs
}
