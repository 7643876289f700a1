//! Preprocess: an IR sub-graph of float32 ops -> an XNNPACK blob ExecuTorch's `XnnpackBackend`
//! accepts (the writer checklist of docs/xnnpack.md): one value per IR value, external ids
//! = DelegateCall argument positions (inputs, then outputs), constants in the blob's own
//! constant region as offset entries (no named key), nodes in IR order (topological).
//!
//! Op mapping: add/sub/mul/div -> the binary nodes; relu -> Clamp [0, +inf]; sin/cos -> unary
//! nodes; linear -> FullyConnected (filter `[out, in]`); mm -> FullyConnected with transposed
//! weights and no bias; addmm -> FullyConnected with transposed weights and its bias (or a
//! separate Add when the bias is not one row); permute_copy -> StaticTranspose; view ->
//! StaticReshape. An output that is an input, a constant or another output's value is copied
//! (XNNCopy): every external output is a value of its own.

use crate::ir::infer::{IrError, err, graph_types};
use crate::ir::{ConstTensor, Dtype, Graph, Node, Op, OpKind, ValueType};
use pte::xnnpack::{
    ConstantEntry, FLAG_EXTERNAL_INPUT, FLAG_EXTERNAL_OUTPUT, FLAG_TRANSPOSE_WEIGHTS, INVALID_ID, MinMax, NodeType,
    Payload, TensorValue, XNode, XValue, XnnGraph,
};

/// IR ops the lowering maps to XNNPACK nodes.
pub const LOWERABLE_OPS: [OpKind; 12] = [
    OpKind::Add,
    OpKind::Sub,
    OpKind::Mul,
    OpKind::Div,
    OpKind::Relu,
    OpKind::Sin,
    OpKind::Cos,
    OpKind::Linear,
    OpKind::Addmm,
    OpKind::Mm,
    OpKind::PermuteCopy,
    OpKind::View,
];

struct Builder {
    values: Vec<XValue>,
    nodes: Vec<XNode>,
    constant_data: Vec<ConstantEntry>,
    region: Vec<u8>,
}

impl Builder {
    /// Adds a value; returns its `id_out`.
    fn value(&mut self, shape: &[usize], constant: u32, external_id: u32, flags: u32) -> u32 {
        let id = self.values.len() as u32;
        let dims: Vec<u32> = shape.iter().map(|d| *d as u32).collect();
        self.values.push(XValue::Tensor(TensorValue {
            datatype: pte::xnnpack::Datatype::Fp32 as i16,
            num_dims: dims.len() as u32,
            dims: Some(dims),
            constant_buffer_idx: constant,
            external_id,
            flags,
            id_out: id,
            dq_datatype: 0,
        }));
        id
    }

    /// Places a constant's float32 bytes in the constant region (16-aligned); returns its
    /// `id_out`.
    fn constant(&mut self, c: &ConstTensor) -> u32 {
        let at = self.region.len().next_multiple_of(pte::xnnpack::write::CONSTANT_ALIGNMENT);
        self.region.resize(at, 0);
        for v in &c.values {
            self.region.extend_from_slice(&(*v as f32).to_le_bytes());
        }
        let idx = self.constant_data.len() as u32;
        self.constant_data.push(ConstantEntry {
            offset: at as u64,
            size: (c.values.len() * 4) as u64,
            named_key: None,
        });
        self.value(&c.shape, idx, INVALID_ID, 0)
    }

    fn node(&mut self, node_type: NodeType, payload: Payload, min_max: Option<MinMax>) {
        let debug_handle = self.nodes.len() as u32;
        self.nodes.push(XNode { node_type, payload, debug_handle, output_min_max: min_max });
    }

    fn binary(&mut self, t: NodeType, a: u32, b: u32, out: u32) {
        self.node(t, Payload::Node2x1 { input1_id: a, input2_id: b, output_id: out, flags: 0 }, None);
    }

    fn unary(&mut self, t: NodeType, x: u32, out: u32, min_max: Option<MinMax>) {
        self.node(t, Payload::Node1x1 { input_id: x, output_id: out, flags: 0 }, min_max);
    }
}

fn f32_shape(t: &ValueType, what: &str) -> Result<Vec<usize>, IrError> {
    match t {
        ValueType::Tensor { dtype: Dtype::F32, shape, .. } => Ok(shape.clone()),
        other => Err(err("xnnpack", format!("{what} is {other:?}; XNNPACK delegates take float32 tensors"))),
    }
}

/// Whether `g` can be lowered to XNNPACK (every op mapped, every value a float32 tensor).
pub fn lowerable(g: &Graph) -> bool {
    to_blob(g).is_ok()
}

/// The XNNPACK graph and constant region for `g`.
pub fn to_blob(g: &Graph) -> Result<(XnnGraph, Vec<u8>), IrError> {
    let types = graph_types(g, &[], "xnnpack")?;
    let (n_const, n_in) = (g.constants.len(), g.inputs.len());
    let mut b = Builder {
        values: Vec::new(),
        nodes: Vec::new(),
        constant_data: vec![ConstantEntry::default()],
        region: Vec::new(),
    };
    // IR ref -> id_out.
    let mut ids: Vec<Option<u32>> = vec![None; types.len()];
    // Constants first (only those some node reads), then the inputs as external inputs.
    let used: std::collections::BTreeSet<usize> = g
        .nodes
        .iter()
        .flat_map(|n| match n {
            Node::Op { args, .. } => args.clone(),
            _ => vec![],
        })
        .chain(g.outputs.iter().copied())
        .collect();
    for (i, c) in g.constants.iter().enumerate().filter(|(i, _)| used.contains(i)) {
        if c.dtype != Dtype::F32 {
            return Err(err("xnnpack", format!("constant {i} is {:?}", c.dtype)));
        }
        ids[i] = Some(b.constant(c));
    }
    for j in 0..n_in {
        let shape = f32_shape(&types[n_const + j], &format!("input {j}"))?;
        ids[n_const + j] = Some(b.value(&shape, 0, j as u32, FLAG_EXTERNAL_INPUT));
    }
    // Which node result becomes which external output (first claim wins; others are copies).
    let n_out = g.outputs.len();
    let mut out_ext: Vec<Option<u32>> = vec![None; types.len()];
    for (j, r) in g.outputs.iter().enumerate() {
        if *r >= n_const + n_in && out_ext.get(*r).is_some_and(Option::is_none) {
            out_ext[*r] = Some((n_in + j) as u32);
        }
    }
    let new_value = |b: &mut Builder, r: usize| -> Result<u32, IrError> {
        let shape = f32_shape(&types[r], &format!("value {r}"))?;
        Ok(match out_ext[r] {
            Some(e) => b.value(&shape, 0, e, FLAG_EXTERNAL_OUTPUT),
            None => b.value(&shape, 0, INVALID_ID, 0),
        })
    };
    for (i, n) in g.nodes.iter().enumerate() {
        let r = n_const + n_in + i;
        let Node::Op { op, args } = n else {
            return Err(err("xnnpack", format!("node {i} is not a CPU op")));
        };
        let arg = |k: usize| -> Result<u32, IrError> {
            args.get(k)
                .and_then(|a| ids.get(*a).copied().flatten())
                .ok_or_else(|| err("xnnpack", format!("node {i} arg {k}")))
        };
        let shape_of = |k: usize| -> Result<Vec<usize>, IrError> {
            let a = *args.get(k).ok_or_else(|| err("xnnpack", format!("node {i} arg {k}")))?;
            f32_shape(&types[a], &format!("node {i} arg {k}"))
        };
        let fc = |b: &mut Builder, x: u32, filter: u32, bias: u32, out: u32, flags: u32| {
            b.node(
                NodeType::XNNFullyConnected,
                Payload::FullyConnected { input1_id: x, filter_id: filter, bias_id: bias, output_id: out, flags },
                None,
            )
        };
        let out = match op {
            Op::Add | Op::Sub | Op::Mul | Op::Div => {
                let t = match op {
                    Op::Add => NodeType::XNNAdd,
                    Op::Sub => NodeType::XNNSubtract,
                    Op::Mul => NodeType::XNNMultiply,
                    _ => NodeType::XNNDiv,
                };
                let (x, y) = (arg(0)?, arg(1)?);
                let out = new_value(&mut b, r)?;
                b.binary(t, x, y, out);
                out
            }
            Op::Relu | Op::Sin | Op::Cos => {
                let x = arg(0)?;
                let out = new_value(&mut b, r)?;
                match op {
                    Op::Relu => {
                        b.unary(NodeType::XNNClamp, x, out, Some(MinMax { output_min: 0.0, output_max: f32::INFINITY }))
                    }
                    Op::Sin => b.unary(NodeType::XNNSin, x, out, None),
                    _ => b.unary(NodeType::XNNCos, x, out, None),
                }
                out
            }
            Op::Linear | Op::Mm | Op::Addmm => {
                // (input, filter, bias ref, flags)
                let (x, w, bias, flags) = match op {
                    Op::Linear => (arg(0)?, arg(1)?, Some(2), 0),
                    Op::Mm => (arg(0)?, arg(1)?, None, FLAG_TRANSPOSE_WEIGHTS),
                    _ => (arg(1)?, arg(2)?, Some(0), FLAG_TRANSPOSE_WEIGHTS),
                };
                let wshape = shape_of(if matches!(op, Op::Addmm) { 2 } else { 1 })?;
                let n_out_ch = if flags == 0 { wshape.first() } else { wshape.get(1) }
                    .copied()
                    .ok_or_else(|| err("xnnpack", format!("node {i}: filter of rank {}", wshape.len())))?;
                let out = new_value(&mut b, r)?;
                match bias {
                    None => fc(&mut b, x, w, INVALID_ID, out, flags),
                    Some(k) if shape_of(k)? == [n_out_ch] => fc(&mut b, x, w, arg(k)?, out, flags),
                    Some(k) => {
                        // A bias that is not one row: FullyConnected, then an Add.
                        let shape = f32_shape(&types[r], "fully connected")?;
                        let mid = b.value(&shape, 0, INVALID_ID, 0);
                        fc(&mut b, x, w, INVALID_ID, mid, flags);
                        let bias = arg(k)?;
                        // addmm is bias + product; linear is product + bias.
                        if matches!(op, Op::Addmm) {
                            b.binary(NodeType::XNNAdd, bias, mid, out);
                        } else {
                            b.binary(NodeType::XNNAdd, mid, bias, out);
                        }
                    }
                }
                out
            }
            Op::PermuteCopy { dims } => {
                let x = arg(0)?;
                let rank = shape_of(0)?.len() as i64;
                let perm: Vec<u32> = dims.iter().map(|d| (if *d < 0 { d + rank } else { *d }) as u32).collect();
                let out = new_value(&mut b, r)?;
                b.node(
                    NodeType::XNNStaticTranspose,
                    Payload::StaticTranspose {
                        num_dims: perm.len() as u32,
                        perm: Some(perm),
                        input_id: x,
                        output_id: out,
                        flags: 0,
                    },
                    None,
                );
                out
            }
            Op::View { shape } => {
                let x = arg(0)?;
                let new_shape: Vec<u32> = shape.iter().map(|d| if *d < 0 { 0 } else { *d as u32 }).collect();
                let out = new_value(&mut b, r)?;
                b.node(
                    NodeType::XNNStaticReshape,
                    Payload::StaticReshape {
                        num_dims: new_shape.len() as u32,
                        new_shape: Some(new_shape),
                        input_id: x,
                        output_id: out,
                        flags: 0,
                    },
                    None,
                );
                out
            }
            other => return Err(err("xnnpack", format!("node {i}: {:?} has no XNNPACK node", other.kind()))),
        };
        ids[r] = Some(out);
    }
    // Outputs that are inputs, constants or repeated values get a copy of their own.
    for (j, r) in g.outputs.iter().enumerate() {
        let ext = (n_in + j) as u32;
        if out_ext.get(*r).copied().flatten() == Some(ext) {
            continue;
        }
        let src = ids.get(*r).copied().flatten().ok_or_else(|| err("xnnpack", format!("output {j} undefined")))?;
        let shape = f32_shape(&types[*r], &format!("output {j}"))?;
        let out = b.value(&shape, 0, ext, FLAG_EXTERNAL_OUTPUT);
        b.unary(NodeType::XNNCopy, src, out, None);
    }
    let externals = |flag: u32| -> Vec<u32> {
        let mut v: Vec<(u32, u32)> = b
            .values
            .iter()
            .map(XValue::tensor)
            .filter(|t| t.flags & flag != 0)
            .map(|t| (t.external_id, t.id_out))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, id)| id).collect()
    };
    let graph = XnnGraph {
        version: Some("0".into()),
        input_ids: Some(externals(FLAG_EXTERNAL_INPUT)),
        output_ids: Some(externals(FLAG_EXTERNAL_OUTPUT)),
        num_externs: (n_in + n_out) as u32,
        nodes: b.nodes,
        values: b.values,
        constant_buffer: None,
        mem_buffer_sizes: None,
        constant_data: Some(b.constant_data),
    };
    Ok((graph, b.region))
}
