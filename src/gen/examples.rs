//! Built-in example programs (`ptecheck emit --example NAME`): each isolates one delegate rule
//! a reviewer wants to see in an emitted program.

use crate::backends::graph::{lower, Flavor};
use crate::ir::build::{f32_const, f32_tensor, GraphBuilder};
use crate::ir::{Dtype, Graph, IrMethod, IrProgram, LoweredModule, Node, Op, ValueType};

/// Names of the built-in examples.
pub const EXAMPLES: &[&str] = &[
    "denoise-loop",
    "identical-partitions",
    "same-blob-different-specs",
    "scratch-repeated",
    "cond-delegates",
    "map-delegate",
    "multi-method",
];

/// A `[2, 4] -> [2, 4]` partition: `sin(x * w + b)` with small constant weights.
pub fn step_graph() -> Graph {
    let w = f32_const(vec![4], vec![0.5, -1.0, 0.25, 2.0]);
    let b = f32_const(vec![4], vec![0.125, 0.0, -0.5, 1.0]);
    let mut g = GraphBuilder::new(vec![w, b], vec![f32_tensor(vec![2, 4])]);
    let m = g.op(Op::Mul, &[g.input(0), g.constant(0)]);
    let a = g.op(Op::Add, &[m, g.constant(1)]);
    let s = g.op(Op::Sin, &[a]);
    g.finish(&[s])
}

fn module(flavor: Flavor, specs: Vec<(String, Vec<u8>)>) -> LoweredModule {
    // The step graph always type-checks, so preprocess cannot fail.
    lower(flavor, step_graph(), specs).unwrap_or_else(|e| unreachable!("built-in example graph: {e}"))
}

fn method(name: &str, g: Graph) -> IrMethod {
    IrMethod { name: name.into(), graph: g }
}

/// The example called `name`.
pub fn example(name: &str) -> Option<IrProgram> {
    let x = || f32_tensor(vec![2, 4]);
    Some(match name {
        // One demo module called 10 times, unrolled as a traced Python loop is.
        "denoise-loop" => {
            let mut g = GraphBuilder::new(vec![], vec![x()]);
            let mut v = g.input(0);
            for _ in 0..10 {
                v = g.call(0, &[v], 1)[0];
            }
            IrProgram { methods: vec![method("forward", g.finish(&[v]))], modules: vec![module(Flavor::Demo, vec![])] }
        }
        // Two partitions with identical bytes and compile specs, separated by a CPU op.
        "identical-partitions" | "same-blob-different-specs" => {
            let spec_b = if name == "identical-partitions" { 1 } else { 2 };
            let mut g = GraphBuilder::new(vec![], vec![x()]);
            let a = g.call(0, &[g.input(0)], 1)[0];
            let r = g.op(Op::Relu, &[a]);
            let b = g.call(1, &[r], 1)[0];
            IrProgram {
                methods: vec![method("forward", g.finish(&[b]))],
                modules: vec![
                    module(Flavor::Demo, vec![("level".into(), vec![1])]),
                    module(Flavor::Demo, vec![("level".into(), vec![spec_b])]),
                ],
            }
        }
        // A scratch module called twice: emitted per call site, rejected by the runtime (SH10).
        "scratch-repeated" => {
            let mut g = GraphBuilder::new(vec![], vec![x()]);
            let a = g.call(0, &[g.input(0)], 1)[0];
            let b = g.call(0, &[a], 1)[0];
            IrProgram {
                methods: vec![method("forward", g.finish(&[b]))],
                modules: vec![module(Flavor::Scratch, vec![])],
            }
        }
        // One shared module called in both branches of a cond (P6).
        "cond-delegates" => {
            let branch = |twice: bool| {
                let mut b = GraphBuilder::new(vec![], vec![x()]);
                let mut v = b.call(0, &[b.input(0)], 1)[0];
                if twice {
                    v = b.call(0, &[v], 1)[0];
                } else {
                    v = b.op(Op::Relu, &[v]);
                }
                b.finish(&[v])
            };
            let mut g = GraphBuilder::new(vec![], vec![ValueType::tensor(Dtype::Bool, vec![]), x()]);
            let out = g.node(
                Node::Cond {
                    pred: g.input(0),
                    then_graph: branch(true),
                    else_graph: branch(false),
                    operands: vec![g.input(1)],
                },
                1,
            )[0];
            IrProgram {
                methods: vec![method("forward", g.finish(&[out]))],
                modules: vec![module(Flavor::Demo, vec![])],
            }
        }
        // A call inside a map body: one BackendDelegate, executed once per iteration (E28).
        "map-delegate" => {
            let mut body = GraphBuilder::new(vec![], vec![x()]);
            let v = body.call(0, &[body.input(0)], 1)[0];
            let body = body.finish(&[v]);
            let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![3, 2, 4])]);
            let out = g.node(Node::Map { body, xs: g.input(0), args: vec![] }, 1)[0];
            IrProgram {
                methods: vec![method("forward", g.finish(&[out]))],
                modules: vec![module(Flavor::Demo, vec![])],
            }
        }
        // One module used by two methods: one BackendDelegate per method, one blob (E21, P4).
        "multi-method" => {
            let mut f = GraphBuilder::new(vec![], vec![x()]);
            let a = f.call(0, &[f.input(0)], 1)[0];
            let r = f.op(Op::Relu, &[a]);
            let mut p = GraphBuilder::new(vec![], vec![x()]);
            let b = p.call(0, &[p.input(0)], 1)[0];
            let c = p.call(0, &[b], 1)[0];
            IrProgram {
                methods: vec![method("forward", f.finish(&[r])), method("prefill", p.finish(&[c]))],
                modules: vec![module(Flavor::Demo, vec![])],
            }
        }
        _ => return None,
    })
}
