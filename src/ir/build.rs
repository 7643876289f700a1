//! A small builder for graphs: constants, then inputs, then nodes, refs handed out in order.
//! May not touch: type checking (`infer` checks built graphs like any other), bytes, the runtime.

use super::op::Op;
use super::program::*;

/// Builds one graph.
#[derive(Debug, Default)]
pub struct GraphBuilder {
    g: Graph,
    next: Ref,
    /// The first ref of each node added by this builder, with its node's index.
    added: Vec<(Ref, usize)>,
}

impl GraphBuilder {
    /// A graph with these constants (refs 0..c) and inputs (refs c..c+i).
    pub fn new(constants: Vec<ConstTensor>, inputs: Vec<ValueType>) -> Self {
        let next = constants.len() + inputs.len();
        GraphBuilder { g: Graph { constants, inputs, nodes: Vec::new(), outputs: Vec::new() }, next, added: Vec::new() }
    }

    /// Continues a finished graph whose refs run up to `next` (its constants, inputs and node
    /// outputs); its outputs are set again by [`GraphBuilder::finish`].
    pub fn resume(g: Graph, next: Ref) -> Self {
        GraphBuilder { g, next, added: Vec::new() }
    }

    /// Ref of input `i`.
    pub fn input(&self, i: usize) -> Ref {
        self.g.constants.len() + i
    }

    /// Ref of constant `i`.
    pub fn constant(&self, i: usize) -> Ref {
        i
    }

    /// Nodes in the graph so far (a resumed graph's included).
    pub fn len(&self) -> usize {
        self.g.nodes.len()
    }

    /// Whether the graph has no node yet.
    pub fn is_empty(&self) -> bool {
        self.g.nodes.is_empty()
    }

    /// Adds a node producing `n_out` values; returns their refs.
    pub fn node(&mut self, node: Node, n_out: usize) -> Vec<Ref> {
        self.added.push((self.next, self.g.nodes.len()));
        self.g.nodes.push(node);
        let first = self.next;
        self.next += n_out;
        (first..self.next).collect()
    }

    /// The op and operands that define `r`, when this builder added an op node for it.
    pub fn op_of(&self, r: Ref) -> Option<(&Op, &[Ref])> {
        let (_, node) = self.added.iter().find(|(first, _)| *first == r)?;
        match self.g.nodes.get(*node)? {
            Node::Op { op, args } => Some((op, args)),
            _ => None,
        }
    }

    /// Adds an op (one output).
    pub fn op(&mut self, op: Op, args: &[Ref]) -> Ref {
        self.node(Node::Op { op, args: args.to_vec() }, 1)[0]
    }

    /// Adds a call of `module` producing `n_out` values.
    pub fn call(&mut self, module: usize, args: &[Ref], n_out: usize) -> Vec<Ref> {
        self.node(Node::Call { module, args: args.to_vec() }, n_out)
    }

    /// Finishes with these outputs.
    pub fn finish(mut self, outputs: &[Ref]) -> Graph {
        self.g.outputs = outputs.to_vec();
        self.g
    }
}

/// A float32 constant.
pub fn f32_const(shape: Vec<usize>, values: Vec<f64>) -> ConstTensor {
    ConstTensor { dtype: Dtype::F32, shape, values }
}

/// A static float32 tensor type.
pub fn f32_tensor(shape: Vec<usize>) -> ValueType {
    ValueType::tensor(Dtype::F32, shape)
}
