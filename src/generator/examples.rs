//! Built-in example programs (`ptecheck emit --example NAME`): each isolates one delegate rule
//! a reviewer wants to see in an emitted program.
//! May not touch: emission, the runtime (examples are IR; `ptecheck emit` emits them).

use crate::backends::graph::{Flavor, lower};
use crate::ir::build::{GraphBuilder, f32_const, f32_tensor};
use crate::ir::{Dtype, Graph, IrMethod, IrProgram, LoweredModule, Node, Op, ValueType};

/// Names of the built-in examples.
pub const EXAMPLES: &[&str] = &[
    "denoise-loop",
    "identical-partitions",
    "same-blob-different-specs",
    "scratch-repeated",
    "cond-delegates",
    "map-delegate",
    "scan-delegate",
    "calls-across-bodies",
    "multi-method",
    "multifunction",
    "multifunction-off",
];

/// Width of the multi-function example's layers.
pub const MF_WIDTH: usize = 32;

/// A partition `linear(x, w, b)` with deterministic weights seeded by `seed`, then `relu` if
/// `relu`; input `[rows, MF_WIDTH]`.
fn linear_partition(rows: usize, seed: u64, relu: bool) -> Graph {
    let n = MF_WIDTH;
    let w: Vec<f64> = (0..n * n).map(|i| (((i as u64 * 7919 + seed * 104_729) % 17) as f64 - 8.0) / 32.0).collect();
    let b: Vec<f64> = (0..n).map(|i| (((i as u64 + seed) % 5) as f64 - 2.0) / 8.0).collect();
    let mut g =
        GraphBuilder::new(vec![f32_const(vec![n, n], w), f32_const(vec![n], b)], vec![f32_tensor(vec![rows, n])]);
    let mut y = g.op(Op::Linear, &[g.input(0), g.constant(0), g.constant(1)]);
    if relu {
        y = g.op(Op::Relu, &[y]);
    }
    g.finish(&[y])
}

/// Methods `forward` (`[1, W]`) and `prefill` (`[4, W]`), each: partition 0 (linear 1), a CPU
/// graph break (cumsum), partition 1 (linear 2 + relu). Both methods share both weight sets.
pub fn multifunction(on: bool) -> IrProgram {
    use crate::backends::multifn::{MULTIFUNCTION_SPEC, MethodPartitions, export};
    let specs = if on { vec![(MULTIFUNCTION_SPEC.to_string(), vec![1u8])] } else { vec![] };
    let parts = |method: &str, rows: usize| MethodPartitions {
        method: method.into(),
        partitions: vec![
            (linear_partition(rows, 1, false), specs.clone()),
            (linear_partition(rows, 2, true), specs.clone()),
        ],
    };
    let methods = [parts("forward", 1), parts("prefill", 4)];
    let (modules, named_data) = export(&methods).unwrap_or_else(|e| unreachable!("built-in multifunction export: {e}"));
    let method = |name: &str, rows: usize, first: usize| {
        let mut g = GraphBuilder::new(vec![], vec![f32_tensor(vec![rows, MF_WIDTH])]);
        let a = g.call(first, &[g.input(0)], 1)[0];
        let c = g.op(Op::Cumsum { dim: 1 }, &[a]);
        let b = g.call(first + 1, &[c], 1)[0];
        IrMethod { name: name.into(), graph: g.finish(&[b]) }
    };
    IrProgram { methods: vec![method("forward", 1, 0), method("prefill", 4, 2)], modules, named_data }
}

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
    lower(flavor, step_graph(), specs, None).unwrap_or_else(|e| unreachable!("built-in example graph: {e}"))
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
            IrProgram {
                methods: vec![method("forward", g.finish(&[v]))],
                modules: vec![module(Flavor::Demo, vec![])],
                named_data: vec![],
            }
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
                named_data: vec![],
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
                named_data: vec![],
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
                named_data: vec![],
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
                named_data: vec![],
            }
        }
        // A call inside a scan body: the carry goes through the module each step (E26).
        "scan-delegate" => {
            let mut body = GraphBuilder::new(vec![], vec![x(), x()]);
            let s = body.op(Op::Add, &[body.input(0), body.input(1)]);
            let c = body.call(0, &[s], 1)[0];
            let y = body.op(Op::Relu, &[c]);
            let body = body.finish(&[c, y]);
            let mut g = GraphBuilder::new(vec![], vec![x(), f32_tensor(vec![3, 2, 4])]);
            let outs = g.node(Node::Scan { body, init: vec![g.input(0)], xs: vec![g.input(1)] }, 2);
            IrProgram {
                methods: vec![method("forward", g.finish(&outs))],
                modules: vec![module(Flavor::Demo, vec![])],
                named_data: vec![],
            }
        }
        // One opted-in module called at the top level, in both branches of a cond and in a map
        // body: how far sharing reaches is the emitter's scope (all one delegate, or one per body).
        "calls-across-bodies" => {
            let once = || {
                let mut b = GraphBuilder::new(vec![], vec![x()]);
                let v = b.call(0, &[b.input(0)], 1)[0];
                let r = b.op(Op::Relu, &[v]);
                b.finish(&[r])
            };
            let mut g =
                GraphBuilder::new(vec![], vec![ValueType::tensor(Dtype::Bool, vec![]), x(), f32_tensor(vec![3, 2, 4])]);
            let a = g.call(0, &[g.input(1)], 1)[0];
            let c = g
                .node(Node::Cond { pred: g.input(0), then_graph: once(), else_graph: once(), operands: vec![a] }, 1)[0];
            let m = g.node(Node::Map { body: once(), xs: g.input(2), args: vec![] }, 1)[0];
            IrProgram {
                methods: vec![method("forward", g.finish(&[c, m]))],
                modules: vec![module(Flavor::Demo, vec![])],
                named_data: vec![],
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
                named_data: vec![],
            }
        }
        "multifunction" => multifunction(true),
        "multifunction-off" => multifunction(false),
        _ => return None,
    })
}
