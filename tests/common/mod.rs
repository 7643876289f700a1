//! Programs more than one test file builds.

#![allow(dead_code)]

use ptecheck::ir::build::{GraphBuilder, f32_const, f32_tensor};
use ptecheck::ir::{Graph, Node, Op};

/// `forward(x[1, 3]) = (cond(mm(x, ones) > 0, sin, cos)(x), mm(x, ones))`: on x = [1, 1e8, -1e8]
/// the product cancels to 0 and the branch taken may differ between implementations.
pub fn cond_on_a_cancelling_product() -> Graph {
    let w = f32_const(vec![3, 1], vec![1.0, 1.0, 1.0]);
    let mut g = GraphBuilder::new(vec![w], vec![f32_tensor(vec![1, 3])]);
    let d = g.op(Op::Mm, &[g.input(0), g.constant(0)]);
    let pred = g.op(Op::Gt { other: 0.0 }, &[d]);
    let branch = |op: Op| {
        let mut b = GraphBuilder::new(vec![], vec![f32_tensor(vec![1, 3])]);
        let y = b.op(op, &[b.input(0)]);
        b.finish(&[y])
    };
    let out = g.node(
        Node::Cond { pred, then_graph: branch(Op::Sin), else_graph: branch(Op::Cos), operands: vec![g.input(0)] },
        1,
    )[0];
    g.finish(&[out, d])
}
