//! The IR's program structure: value types, constants, nodes, closed graphs, lowered modules
//! and programs, with their serde form (read back by `tagged`).
//! May not touch: evaluation, typing (`infer`), saved-document versions (`saved`).

use super::op::Op;
use serde::{Deserialize, Serialize};

/// A value reference inside one graph: constants, then inputs, then node outputs in order.
pub type Ref = usize;

/// Element type of IR tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// float32.
    F32,
    /// int64 (values beyond 2^53 are not exact in the interpreter).
    I64,
    /// bool.
    Bool,
}

/// Type of a value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ValueType {
    /// A tensor; `dynamic` = its leading size may be smaller at run time (at least 1): the shape
    /// is an upper bound (DYNAMIC_BOUND), and every dynamic tensor of a graph shares one leading
    /// size.
    Tensor {
        /// Element type.
        dtype: Dtype,
        /// Shape (upper bound when dynamic).
        shape: Vec<usize>,
        /// Whether the shape may shrink at run time.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        dynamic: bool,
    },
    /// i64 scalar.
    Int,
    /// Boolean scalar.
    Bool,
    /// f64 scalar.
    Double,
}

impl ValueType {
    /// A static tensor type.
    pub fn tensor(dtype: Dtype, shape: Vec<usize>) -> Self {
        ValueType::Tensor { dtype, shape, dynamic: false }
    }
}

/// A constant tensor (weights).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConstTensor {
    /// Element type.
    pub dtype: Dtype,
    /// Shape.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub values: Vec<f64>,
}
/// One node of a graph (read back by `tagged`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "node")]
pub enum Node {
    /// A CPU operator; one output.
    Op {
        /// The operator.
        op: Op,
        /// Operand refs.
        args: Vec<Ref>,
    },
    /// A call of lowered module `module`; outputs = the module graph's outputs.
    Call {
        /// Index into `IrProgram::modules`.
        module: usize,
        /// Operand refs.
        args: Vec<Ref>,
    },
    /// `cond(pred, then, else, operands)`; outputs = the branches' outputs.
    Cond {
        /// Bool scalar or bool tensor.
        pred: Ref,
        /// True branch (inputs = operands).
        then_graph: Graph,
        /// False branch (inputs = operands).
        else_graph: Graph,
        /// Operands.
        operands: Vec<Ref>,
    },
    /// `map(body, xs, *args)` over the leading dimension of `xs`; one stacked output.
    Map {
        /// Body (inputs = slice ++ args).
        body: Graph,
        /// Mapped tensor.
        xs: Ref,
        /// Extra operands.
        args: Vec<Ref>,
    },
    /// `scan(combine, init, xs)`; outputs = final carries ++ stacked ys.
    Scan {
        /// Body (inputs = carries ++ slices; outputs = new carries ++ ys).
        body: Graph,
        /// Initial carries (tensors).
        init: Vec<Ref>,
        /// Scanned tensors.
        xs: Vec<Ref>,
    },
    /// Bounded `while_loop` (P12; only with `EmitOptions::allow_while`).
    While {
        /// Condition (inputs = carried; one Bool output).
        cond: Graph,
        /// Body (inputs = carried; outputs = new carried).
        body: Graph,
        /// Carried values.
        carried: Vec<Ref>,
        /// Iteration bound for the interpreter.
        max_iterations: u32,
    },
}

/// A closed graph.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Graph {
    /// Constants (refs 0..c).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constants: Vec<ConstTensor>,
    /// Inputs (refs c..c+i).
    pub inputs: Vec<ValueType>,
    /// Nodes; their outputs follow.
    pub nodes: Vec<Node>,
    /// Output refs.
    pub outputs: Vec<Ref>,
}

/// One declared scratch buffer of a lowered module (P1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScratchDecl {
    /// Size in bytes (> 0).
    pub nbytes: u64,
    /// Memory arena id, `None` = default.
    #[serde(default)]
    pub mem_id: Option<i32>,
}

/// A lowered backend module: what a backend's preprocess made of its sub-graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoweredModule {
    /// Backend id.
    pub backend: String,
    /// The module's own sub-graph (evaluated by the eager interpreter).
    pub graph: Graph,
    /// Processed bytes (hex in JSON).
    #[serde(with = "hex_bytes")]
    pub processed: Vec<u8>,
    /// Compile specs, in order.
    #[serde(default)]
    pub compile_specs: Vec<(String, HexBytes)>,
    /// The backend opted in to one handle per lowered module (SH1).
    #[serde(default)]
    pub share_handle_across_calls: bool,
    /// Declared scratch buffers (never shared, SH5).
    #[serde(default)]
    pub scratch_specs: Vec<ScratchDecl>,
}

/// Bytes serialised as a hex string.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HexBytes(#[serde(with = "hex_bytes")] pub Vec<u8>);

mod hex_bytes {
    use serde::{Deserializer, Serializer, de};
    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&const_hex::encode(v))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_str(HexVisitor)
    }
    /// Decodes the string where it lies (no copy of the text).
    struct HexVisitor;
    impl de::Visitor<'_> for HexVisitor {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string of hex digit pairs")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<Vec<u8>, E> {
            // Bare digit pairs only: the faster decoder would also take a `0x` prefix.
            if s.starts_with("0x") {
                return Err(E::custom("Invalid character 'x' at position 1"));
            }
            const_hex::decode(s).map_err(E::custom)
        }
    }
}

/// A program: methods and the lowered modules they call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IrProgram {
    /// Methods (emitted in sorted name order, E2).
    pub methods: Vec<IrMethod>,
    /// Lowered modules, program-wide.
    #[serde(default)]
    pub modules: Vec<LoweredModule>,
    /// The program-wide named-data store (blobs backends share by key), in insertion order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub named_data: Vec<NamedBlob>,
}

/// One key of the named-data store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedBlob {
    /// Unique key.
    pub key: String,
    /// The bytes (hex in JSON).
    #[serde(with = "hex_bytes")]
    pub data: Vec<u8>,
}

/// One method.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IrMethod {
    /// Method name.
    pub name: String,
    /// Body.
    pub graph: Graph,
}

impl Node {
    /// Number of refs the node defines (its outputs), given the program's `modules`; a call
    /// of a module that does not exist defines none.
    pub fn output_count(&self, modules: &[LoweredModule]) -> usize {
        match self {
            Node::Op { .. } | Node::Map { .. } => 1,
            Node::Call { module, .. } => modules.get(*module).map_or(0, |m| m.graph.outputs.len()),
            Node::Cond { then_graph, .. } => then_graph.outputs.len(),
            Node::Scan { body, .. } => body.outputs.len(),
            Node::While { carried, .. } => carried.len(),
        }
    }

    /// Sub-graphs of this node (for walks).
    pub fn subgraphs(&self) -> Vec<&Graph> {
        match self {
            Node::Cond { then_graph, else_graph, .. } => vec![then_graph, else_graph],
            Node::Map { body, .. } | Node::Scan { body, .. } => vec![body],
            Node::While { cond, body, .. } => vec![cond, body],
            _ => vec![],
        }
    }
}

impl Graph {
    /// Calls `f` on every node of this graph and its sub-graphs (not lowered modules), in
    /// emission order, with the nesting depth.
    pub fn walk<'g>(&'g self, depth: usize, f: &mut impl FnMut(&'g Node, usize)) {
        for n in &self.nodes {
            f(n, depth);
            for g in n.subgraphs() {
                g.walk(depth + 1, f);
            }
        }
    }

    /// Nodes of this graph and its sub-graphs.
    pub fn node_count(&self) -> usize {
        let mut n = 0;
        self.walk(0, &mut |_, _| n += 1);
        n
    }
}
