//! Semantic checks of a parsed blob, in the order ExecuTorch's `XNNCompiler::compileModel`
//! makes them, and stricter where the runtime would read out of bounds, read memory no node
//! wrote, or silently pick one of two meanings: every id, flag, rank, datatype, union member,
//! constant (table, range, named key, size) and the node graph's acyclicity.
//! May not touch: the byte layout (`read`'s), execution, the `.pte` program (named data is given).

use super::XnnError;
use super::model::*;
use std::collections::BTreeMap;
use std::sync::Arc;

type R<T> = Result<T, XnnError>;

/// A blob that passed every check: the model, its constants resolved, and an execution order.
#[derive(Clone, Debug)]
pub struct LoadedBlob {
    /// The parsed blob.
    pub blob: XnnBlob,
    /// Value index for each `id_out`.
    pub by_id: BTreeMap<u32, usize>,
    /// Constant bytes per value index (constants only). Values reading the same bytes (one
    /// table entry, one region range, one named key) share one copy, so what a blob makes is
    /// bounded by the blob and its named data, however many values point at one constant.
    pub constants: BTreeMap<usize, Arc<[u8]>>,
    /// Node indices, producers before consumers (stable: stored order where free).
    pub order: Vec<usize>,
}

impl LoadedBlob {
    /// External (input or output) values as `(external_id, value index)`, sorted by id.
    pub fn externals(&self, flag: u32) -> Vec<(u32, usize)> {
        let mut v: Vec<(u32, usize)> = self
            .blob
            .graph
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.tensor().flags & flag != 0)
            .map(|(i, v)| (v.tensor().external_id, i))
            .collect();
        v.sort_unstable();
        v
    }
}

/// Named data the program offers to delegates (`None`: the program has none).
pub type NamedData<'a> = Option<&'a [(&'a str, &'a [u8])]>;

/// Parses and verifies `bytes`, resolving named-key constants in `named`.
pub fn load(bytes: &[u8], named: NamedData<'_>) -> R<LoadedBlob> {
    let blob = super::read::parse(bytes)?;
    verify(blob, named)
}

/// Verifies a parsed blob and resolves its constants.
pub fn verify(blob: XnnBlob, named: NamedData<'_>) -> R<LoadedBlob> {
    let g = &blob.graph;
    if g.num_externs > MAX_EXTERNS {
        return Err(XnnError::TooManyExterns { num_externs: g.num_externs });
    }
    let mut by_id: BTreeMap<u32, usize> = BTreeMap::new();
    let mut by_ext: BTreeMap<u32, usize> = BTreeMap::new();
    let mut constants = BTreeMap::new();
    let mut copies: BTreeMap<Source<'_>, Arc<[u8]>> = BTreeMap::new();
    for (index, v) in g.values.iter().enumerate() {
        let t = v.tensor();
        if t.flags & !(FLAG_EXTERNAL_INPUT | FLAG_EXTERNAL_OUTPUT) != 0 {
            return Err(XnnError::ValueFlags { index, flags: t.flags });
        }
        let rank = t.shape().len();
        if rank > MAX_DIMS {
            return Err(XnnError::Rank { index, rank });
        }
        if t.num_dims as usize != rank {
            return Err(XnnError::NumDims { index, num_dims: t.num_dims, dims: rank });
        }
        let dt = t.datatype().ok_or(XnnError::Datatype { index, datatype: t.datatype })?;
        if t.external_id != INVALID_ID {
            if t.external_id >= g.num_externs {
                return Err(XnnError::ExternalId { index, external_id: t.external_id, num_externs: g.num_externs });
            }
            if t.flags == 0 {
                return Err(XnnError::ExternalMismatch { index, flags: t.flags, external_id: t.external_id });
            }
            if let Some(first) = by_ext.insert(t.external_id, index) {
                return Err(XnnError::DuplicateExternalId { index, external_id: t.external_id, first });
            }
        } else if t.flags != 0 {
            return Err(XnnError::ExternalMismatch { index, flags: t.flags, external_id: t.external_id });
        }
        if let Some(&first) = by_id.get(&t.id_out) {
            return Err(XnnError::DuplicateIdOut { index, id_out: t.id_out, first });
        }
        by_id.insert(t.id_out, index);
        if t.dq_datatype != 0
            && (t.dq_datatype != Datatype::Qint8 as i16
                || t.flags & FLAG_EXTERNAL_INPUT == 0
                || t.constant_buffer_idx != 0)
        {
            return Err(XnnError::DqDatatype { index, dq_datatype: t.dq_datatype });
        }
        if t.constant_buffer_idx != 0 {
            if t.flags != 0 {
                return Err(XnnError::ExternalMismatch { index, flags: t.flags, external_id: t.external_id });
            }
            let (source, bytes) = constant(&blob, index, t.constant_buffer_idx, named)?;
            if let Some(size) = dt.element_size() {
                let expected = t.shape().iter().fold(size as u64, |a, d| a.saturating_mul(u64::from(*d)));
                if (bytes.len() as u64) < expected {
                    return Err(XnnError::ConstantSize { index, expected, actual: bytes.len() as u64 });
                }
            }
            constants.insert(index, copies.entry(source).or_insert_with(|| Arc::from(bytes)).clone());
        }
        if let XValue::Quantized { params, .. } = v {
            for idx in scale_buffers(params) {
                constant(&blob, index, idx, named)?;
            }
        }
    }
    let order = check_nodes(g, &by_id, &constants)?;
    Ok(LoadedBlob { blob, by_id, constants, order })
}

fn scale_buffers(p: &QuantParams) -> Vec<u32> {
    match p {
        QuantParams::PerChannel { scale_buffer_idx, .. } | QuantParams::PerChannelGroup { scale_buffer_idx, .. }
            if *scale_buffer_idx != 0 =>
        {
            vec![*scale_buffer_idx]
        }
        _ => vec![],
    }
}

/// Where a constant's bytes are: what makes two values' constants the same bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Source<'a> {
    /// Entry `idx` of the deprecated `constant_buffer`.
    Buffer(u32),
    /// `(offset, size)` in the constant region after the header.
    Region(u64, u64),
    /// A named data key.
    Named(&'a str),
}

/// Where the bytes of constant `idx` for value `index` are, and the bytes: from
/// `constant_data` when the blob has a header, from the deprecated `constant_buffer` when it
/// does not (the runtime's rule).
fn constant<'b>(blob: &'b XnnBlob, index: usize, idx: u32, named: NamedData<'b>) -> R<(Source<'b>, &'b [u8])> {
    let g = &blob.graph;
    match &blob.header {
        None => {
            let table = g.constant_buffer.as_ref().ok_or(XnnError::ConstantTableMissing {
                index,
                table: "constant_buffer",
                why: "the blob has no XH00 header",
            })?;
            let entry = table.get(idx as usize).ok_or(XnnError::ConstantIndex {
                index,
                idx,
                table: "constant_buffer",
                len: table.len(),
            })?;
            let bytes = entry.as_deref().ok_or(XnnError::ConstantNull { index, idx, table: "constant_buffer" })?;
            Ok((Source::Buffer(idx), bytes))
        }
        Some(h) => {
            let table = g.constant_data.as_ref().ok_or(XnnError::ConstantTableMissing {
                index,
                table: "constant_data",
                why: "the blob has an XH00 header",
            })?;
            let e = table.get(idx as usize).ok_or(XnnError::ConstantIndex {
                index,
                idx,
                table: "constant_data",
                len: table.len(),
            })?;
            match &e.named_key {
                Some(key) => {
                    let named = named.filter(|n| !n.is_empty()).ok_or_else(|| XnnError::NoNamedData {
                        index,
                        idx,
                        key: key.clone(),
                    })?;
                    named
                        .iter()
                        .find(|(k, _)| k == key)
                        .map(|(_, d)| (Source::Named(key), *d))
                        .ok_or_else(|| XnnError::NamedKeyMissing { index, idx, key: key.clone() })
                }
                None => {
                    let region = h.constant_data_size;
                    if e.offset > region || e.size > region - e.offset {
                        return Err(XnnError::ConstantRange { index, idx, offset: e.offset, size: e.size, region });
                    }
                    let (o, s) = (e.offset as usize, e.size as usize);
                    Ok((Source::Region(e.offset, e.size), &blob.constant_region[o..o + s]))
                }
            }
        }
    }
}

/// Checks every node and returns a stable topological order.
fn check_nodes(g: &XnnGraph, by_id: &BTreeMap<u32, usize>, constants: &BTreeMap<usize, Arc<[u8]>>) -> R<Vec<usize>> {
    // Which node writes each value.
    let mut writer: BTreeMap<usize, usize> = BTreeMap::new();
    for (index, n) in g.nodes.iter().enumerate() {
        let node = n.node_type.name();
        if n.node_type == NodeType::XNNScaledDotProductAttention {
            return Err(XnnError::NodeNotImplemented { index, node });
        }
        if n.payload.kind() != n.node_type.payload_kind() {
            return Err(XnnError::NodeField {
                index,
                node,
                field: "xnode_union",
                what: format!("payload {:?} does not belong to {node}", n.payload.kind()),
            });
        }
        for (field, id) in n.payload.inputs(n.node_type) {
            if !by_id.contains_key(&id) {
                return Err(XnnError::UndefinedId { index, node, field, id });
            }
        }
        for (field, id) in n.payload.outputs() {
            let &v = by_id.get(&id).ok_or(XnnError::UndefinedId { index, node, field, id })?;
            let t = g.values[v].tensor();
            let bad = |what: String| XnnError::BadOutput { index, node, field, id, what };
            if constants.contains_key(&v) {
                return Err(bad(format!("the constant xvalues[{v}]")));
            }
            if t.flags & FLAG_EXTERNAL_INPUT != 0 {
                return Err(bad(format!("the external input xvalues[{v}]")));
            }
            if let Some(w) = writer.insert(v, index) {
                return Err(bad(format!("xvalues[{v}], which xnodes[{w}] writes too")));
            }
        }
        check_fields(index, n)?;
    }
    // Every value a node reads is an input, a constant, or written by a node; every external
    // output is written.
    for (index, n) in g.nodes.iter().enumerate() {
        for (field, id) in n.payload.inputs(n.node_type) {
            let v = by_id[&id];
            let t = g.values[v].tensor();
            if t.flags & FLAG_EXTERNAL_INPUT == 0 && !constants.contains_key(&v) && !writer.contains_key(&v) {
                return Err(XnnError::NodeField {
                    index,
                    node: n.node_type.name(),
                    field,
                    what: format!("reads xvalues[{v}] (id {id}), which is no input, constant or node output"),
                });
            }
        }
    }
    for (v, val) in g.values.iter().enumerate() {
        if val.tensor().flags & FLAG_EXTERNAL_OUTPUT != 0 && !writer.contains_key(&v) {
            return Err(XnnError::Missing { path: format!("a node writing external output xvalues[{v}]") });
        }
    }
    topological(g, by_id, &writer)
}

fn check_fields(index: usize, n: &XNode) -> R<()> {
    let node = n.node_type.name();
    let field_err = |field: &'static str, what: String| XnnError::NodeField { index, node, field, what };
    if let (true, Some(m)) = (n.node_type.validates_min_max(), n.output_min_max)
        && (m.output_min.is_nan() || m.output_max.is_nan() || m.output_min > m.output_max)
    {
        return Err(XnnError::MinMax { index, node, min: m.output_min, max: m.output_max });
    }
    match &n.payload {
        Payload::StaticTranspose { perm, .. } => {
            let perm = perm.as_ref().ok_or_else(|| field_err("perm", "missing".into()))?;
            if perm.is_empty() || perm.len() > MAX_DIMS {
                return Err(field_err("perm", format!("has {} entries (1..=6 allowed)", perm.len())));
            }
            let mut seen = [false; MAX_DIMS];
            for (i, p) in perm.iter().enumerate() {
                let p = *p as usize;
                if p >= perm.len() || std::mem::replace(&mut seen[p], true) {
                    return Err(field_err("perm", format!("entry {i} = {p} makes no permutation of {}", perm.len())));
                }
            }
        }
        Payload::StaticReshape { new_shape, .. } => {
            let s = new_shape.as_ref().ok_or_else(|| field_err("new_shape", "missing".into()))?;
            if s.len() > MAX_DIMS {
                return Err(field_err("new_shape", format!("has rank {} (at most 6)", s.len())));
            }
            if s.iter().filter(|d| **d == 0).count() > 1 {
                return Err(field_err("new_shape", "infers (0) more than one dimension".into()));
            }
        }
        Payload::StaticSlice { offsets, sizes, .. } => {
            let o = offsets.as_ref().ok_or_else(|| field_err("offsets", "missing".into()))?;
            let s = sizes.as_ref().ok_or_else(|| field_err("sizes", "missing".into()))?;
            if o.len() != s.len() {
                return Err(field_err("sizes", format!("{} entries, offsets has {}", s.len(), o.len())));
            }
        }
        Payload::ConstantPad { pre_paddings, post_paddings, .. } => {
            let a = pre_paddings.as_ref().ok_or_else(|| field_err("pre_paddings", "missing".into()))?;
            let b = post_paddings.as_ref().ok_or_else(|| field_err("post_paddings", "missing".into()))?;
            if a.len() != b.len() {
                return Err(field_err("post_paddings", format!("{} entries, pre_paddings has {}", b.len(), a.len())));
            }
        }
        _ => {}
    }
    // Then `num_dims` is the length of the list it counts (a smaller one would drop entries, a
    // larger one read past the list).
    let counted = match &n.payload {
        Payload::StaticTranspose { num_dims, perm: list, .. }
        | Payload::StaticReshape { num_dims, new_shape: list, .. }
        | Payload::StaticSlice { num_dims, offsets: list, .. } => Some((*num_dims, list.as_ref().map_or(0, Vec::len))),
        _ => None,
    };
    if let Some((num_dims, len)) = counted.filter(|(d, len)| *d as usize != *len) {
        return Err(field_err("num_dims", format!("is {num_dims}, its list has {len} entries")));
    }
    Ok(())
}

/// Kahn's algorithm, always taking the lowest-index ready node: stored order when it is
/// already topological (as ExecuTorch writes it), the runtime's re-sorted order otherwise.
fn topological(g: &XnnGraph, by_id: &BTreeMap<u32, usize>, writer: &BTreeMap<usize, usize>) -> R<Vec<usize>> {
    let n = g.nodes.len();
    let mut deps: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in g.nodes.iter().enumerate() {
        for (_, id) in node.payload.inputs(node.node_type) {
            if let Some(&w) = writer.get(&by_id[&id]) {
                deps[i].push(w);
                users[w].push(i);
            }
        }
    }
    let mut pending: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut ready: std::collections::BTreeSet<usize> = (0..n).filter(|i| pending[*i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &u in &users[i] {
            pending[u] -= 1;
            if pending[u] == 0 {
                ready.insert(u);
            }
        }
    }
    if let Some(index) = (0..n).find(|i| pending[*i] > 0) {
        return Err(XnnError::Cycle { index, node: g.nodes[index].node_type.name() });
    }
    Ok(order)
}
