//! Preprocess: an IR sub-graph of float32 ops -> an XNNPACK blob ExecuTorch's `XnnpackBackend`
//! accepts (the writer checklist of docs/xnnpack.md): one value per IR value, external ids
//! = DelegateCall argument positions (inputs, then outputs), nodes in IR order (topological).
//!
//! Constants: those only FullyConnected reads as filter or bias live in the blob's own constant
//! region (offset entries, no named key); XNNPACK packs (copies) them at init. Every other
//! constant goes to the program's named data under the sha256 of its bytes, as ExecuTorch's
//! exporter stores all of them: XNNPACK keeps a pointer to an unpacked constant, and
//! ExecuTorch frees the processed blob after init — an offset constant read by, say, an Add is
//! read from freed memory when the program was loaded from a file (SIGSEGV in ExecuTorch
//! 1.5.1; docs/xnnpack.md).
//!
//! Op mapping: add/sub/mul/div -> the binary nodes; relu -> Clamp [0, +inf]; sin/cos -> unary
//! nodes; linear -> FullyConnected (filter `[out, in]`); mm -> FullyConnected with transposed
//! weights and no bias; addmm -> FullyConnected with transposed weights and its bias (or a
//! separate Add when the bias is not one row); permute_copy -> StaticTranspose; view ->
//! StaticReshape. An output that is an input, a constant or another output's value is copied
//! (XNNCopy): every external output is a value of its own.
//! May not touch: the eager interpreter, the CPU kernels, the runtime side (`interp`'s).

use crate::ir::infer::{IrError, err, graph_types};
use crate::ir::{ConstTensor, Dtype, Graph, NamedBlob, Node, Op, OpKind, ValueType};
use pte::xnnpack::{
    ConstantEntry, FLAG_EXTERNAL_INPUT, FLAG_EXTERNAL_OUTPUT, FLAG_TRANSPOSE_WEIGHTS, INVALID_ID, MinMax, NodeType,
    Payload, TensorValue, XNode, XValue, XnnGraph,
};
use std::collections::BTreeSet;

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
    named: Vec<NamedBlob>,
}

impl Builder {
    /// Adds a value; returns its `id_out`.
    fn value(&mut self, shape: &[usize], constant: u32, external_id: u32, flags: u32) -> u32 {
        let id = self.values.len() as u32;
        let dims: Vec<u32> = shape.iter().map(|d| *d as u32).collect();
        self.values.push(XValue::Tensor(TensorValue::fp32(id, &dims, constant, external_id, flags)));
        id
    }

    /// A constant's value: its float32 bytes in the constant region (16-aligned) when `inline`,
    /// else in the named data under their sha256; returns its `id_out`.
    fn constant(&mut self, c: &ConstTensor, inline: bool) -> u32 {
        let bytes: Vec<u8> = c.values.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect();
        let idx = self.constant_data.len() as u32;
        let entry = if inline {
            let at = self.region.len().next_multiple_of(pte::xnnpack::write::CONSTANT_ALIGNMENT);
            self.region.resize(at, 0);
            self.region.extend_from_slice(&bytes);
            ConstantEntry { offset: at as u64, size: bytes.len() as u64, named_key: None }
        } else {
            let key = crate::program::sha256_hex(&bytes);
            let entry = ConstantEntry { offset: u64::MAX, size: bytes.len() as u64, named_key: Some(key.clone()) };
            if !self.named.iter().any(|n| n.key == key) {
                self.named.push(NamedBlob { key, data: bytes });
            }
            entry
        };
        self.constant_data.push(entry);
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

/// What lowering makes of a graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Blob {
    /// The XNNPACK graph.
    pub graph: XnnGraph,
    /// Its constant region (FullyConnected filters and biases).
    pub region: Vec<u8>,
    /// Named data the program must carry (every other constant, keyed by sha256).
    pub named: Vec<NamedBlob>,
}

/// The one-row bias length a FullyConnected of `op` with operands `args` takes (`None`: no
/// bias operand, or one that must be added separately).
fn fc_bias_ok(op: &Op, args: &[usize], types: &[ValueType]) -> bool {
    let shape = |k: usize| match args.get(k).and_then(|a| types.get(*a)) {
        Some(ValueType::Tensor { shape, .. }) => Some(shape.clone()),
        _ => None,
    };
    let (w, b, transposed) = match op {
        Op::Linear => (1, 2, false),
        Op::Addmm => (2, 0, true),
        _ => return false,
    };
    let n_out = shape(w).and_then(|s| if transposed { s.get(1).copied() } else { s.first().copied() });
    n_out.is_some_and(|n| shape(b) == Some(vec![n]))
}

/// Operand positions of `op` XNNPACK packs (copies) at init: linear (x, W, b) -> W, b;
/// mm (x, W) -> W; addmm (b, x, W) -> W, b — a bias only when it is one row (otherwise it feeds
/// a separate Add, unpacked).
fn packed_positions(op: &Op, args: &[usize], types: &[ValueType]) -> &'static [usize] {
    let bias_ok = fc_bias_ok(op, args, types);
    match op {
        Op::Linear if bias_ok => &[1, 2],
        Op::Linear | Op::Mm => &[1],
        Op::Addmm if bias_ok => &[0, 2],
        Op::Addmm => &[2],
        _ => &[],
    }
}

/// Refs read in a packed position, and refs read (or returned) any other way.
fn constant_uses(g: &Graph, types: &[ValueType]) -> (BTreeSet<usize>, BTreeSet<usize>) {
    let (mut packed, mut unpacked) = (BTreeSet::new(), BTreeSet::new());
    for n in &g.nodes {
        if let Node::Op { op, args } = n {
            let pos = packed_positions(op, args, types);
            for (k, a) in args.iter().enumerate() {
                if pos.contains(&k) {
                    packed.insert(*a)
                } else {
                    unpacked.insert(*a)
                };
            }
        }
    }
    unpacked.extend(g.outputs.iter().copied());
    (packed, unpacked)
}

/// The XNNPACK graph, constant region and named data for `g`.
pub fn to_blob(g: &Graph) -> Result<Blob, IrError> {
    let types = graph_types(g, &[], "xnnpack")?;
    let (n_const, n_in) = (g.constants.len(), g.inputs.len());
    let mut b = Builder {
        values: Vec::new(),
        nodes: Vec::new(),
        constant_data: vec![ConstantEntry::default()],
        region: Vec::new(),
        named: Vec::new(),
    };
    let (packed_uses, unpacked_uses) = constant_uses(g, &types);
    // IR ref -> id_out; a constant read both packed and unpacked has one value for each (an
    // unpacked read of a packed value would see memory ExecuTorch freed after init).
    let mut ids: Vec<Option<u32>> = vec![None; types.len()];
    let mut packed_ids: Vec<Option<u32>> = vec![None; types.len()];
    for (i, c) in g.constants.iter().enumerate() {
        let (p, u) = (packed_uses.contains(&i), unpacked_uses.contains(&i));
        if (p || u) && c.dtype != Dtype::F32 {
            return Err(err("xnnpack", format!("constant {i} is {:?}", c.dtype)));
        }
        if p {
            packed_ids[i] = Some(b.constant(c, true));
        }
        if u {
            ids[i] = Some(b.constant(c, false));
        }
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
        let pos = packed_positions(op, args, &types);
        let arg = |k: usize| -> Result<u32, IrError> {
            args.get(k)
                .and_then(|a| {
                    let packed = pos.contains(&k).then(|| packed_ids.get(*a).copied().flatten()).flatten();
                    packed.or_else(|| ids.get(*a).copied().flatten())
                })
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
                if wshape.len() != 2 {
                    return Err(err("xnnpack", format!("node {i}: filter of rank {}", wshape.len())));
                }
                let out = new_value(&mut b, r)?;
                match bias {
                    None => fc(&mut b, x, w, INVALID_ID, out, flags),
                    Some(k) if fc_bias_ok(op, args, &types) => fc(&mut b, x, w, arg(k)?, out, flags),
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
    Ok(Blob { graph, region: b.region, named: b.named })
}
