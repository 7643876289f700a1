//! Every rejection of the XNNPACK blob loader, each from one edit of a valid blob (its model,
//! or its bytes where the model cannot express the fault), with the typed error it names and
//! the error code ExecuTorch's runtime gives (or would give instead of misbehaving).

#![forbid(unsafe_code)]

use pte::xnnpack::{
    self, ConstantEntry, FLAG_EXTERNAL_INPUT, FLAG_EXTERNAL_OUTPUT, INVALID_ID, MinMax, NodeType, Payload, TensorValue,
    XNode, XValue, XnnError, XnnGraph,
};

fn value(id: u32, dims: &[u32], constant: u32, external_id: u32, flags: u32) -> XValue {
    XValue::Tensor(TensorValue::fp32(id, dims, constant, external_id, flags))
}

fn fc(input: u32, filter: u32, bias: u32, out: u32) -> XNode {
    XNode {
        node_type: NodeType::XNNFullyConnected,
        payload: Payload::FullyConnected {
            input1_id: input,
            filter_id: filter,
            bias_id: bias,
            output_id: out,
            flags: 0,
        },
        debug_handle: 0,
        output_min_max: None,
    }
}

fn node1(t: NodeType, input: u32, out: u32) -> XNode {
    XNode {
        node_type: t,
        payload: Payload::Node1x1 { input_id: input, output_id: out, flags: 0 },
        debug_handle: 0,
        output_min_max: None,
    }
}

/// x[2,4] (ext 0) -> FullyConnected(W[3,4], b[3]) -> y[2,3] (ext 1); W and b in the constant
/// region at 0 and 48.
fn base() -> (XnnGraph, Vec<u8>) {
    let mut region = vec![0u8; 64];
    for (i, c) in region.chunks_exact_mut(4).enumerate() {
        c.copy_from_slice(&(i as f32).to_le_bytes());
    }
    let g = XnnGraph {
        version: Some("0".into()),
        nodes: vec![fc(0, 1, 2, 3)],
        values: vec![
            value(0, &[2, 4], 0, 0, FLAG_EXTERNAL_INPUT),
            value(1, &[3, 4], 1, INVALID_ID, 0),
            value(2, &[3], 2, INVALID_ID, 0),
            value(3, &[2, 3], 0, 1, FLAG_EXTERNAL_OUTPUT),
        ],
        num_externs: 2,
        input_ids: Some(vec![0]),
        output_ids: Some(vec![3]),
        constant_buffer: None,
        mem_buffer_sizes: None,
        constant_data: Some(vec![
            ConstantEntry::default(),
            ConstantEntry { offset: 0, size: 48, named_key: None },
            ConstantEntry { offset: 48, size: 12, named_key: None },
        ]),
    };
    (g, region)
}

fn load_graph(g: &XnnGraph, region: &[u8]) -> Result<xnnpack::LoadedBlob, XnnError> {
    xnnpack::load(&xnnpack::write(g, region), None)
}

/// The error of the base blob after `edit`.
fn reject(edit: impl FnOnce(&mut XnnGraph, &mut Vec<u8>)) -> XnnError {
    let (mut g, mut region) = base();
    edit(&mut g, &mut region);
    load_graph(&g, &region).expect_err("the edit must be rejected")
}

fn tensor_mut(g: &mut XnnGraph, i: usize) -> &mut TensorValue {
    match &mut g.values[i] {
        XValue::Tensor(t) | XValue::Quantized { tensor: t, .. } => t,
    }
}

#[test]
fn the_base_blob_loads_and_round_trips() {
    let (g, region) = base();
    let bytes = xnnpack::write(&g, &region);
    let l = xnnpack::load(&bytes, None).expect("valid");
    assert_eq!(l.blob.graph, g);
    assert_eq!(l.blob.constant_region, region);
    assert_eq!(xnnpack::write_blob(&l.blob), bytes, "bytes stable");
    assert_eq!(l.constants[&1].len(), 48);
    // Header as ExecuTorch writes it: 30-byte fields, flatbuffer at 32, constants 16-aligned.
    let h = l.blob.header.expect("header");
    assert_eq!((h.header_length, h.flatbuffer_offset), (30, 32));
    assert_eq!(h.constant_data_offset % 16, 0);
    assert_eq!(h.constant_data_size, 64);
    assert_eq!(&bytes[36..40], b"XN01");
}

// --- Header and container (ExecuTorch: InvalidArgument 0x12 / DelegateInvalidCompatibility 0x30)

fn blob() -> Vec<u8> {
    let (g, r) = base();
    xnnpack::write(&g, &r)
}

fn patch(mut b: Vec<u8>, at: usize, bytes: &[u8]) -> Vec<u8> {
    b[at..at + bytes.len()].copy_from_slice(bytes);
    b
}

#[test]
fn header_rejections() {
    let e = xnnpack::load(&[0u8; 18], None).unwrap_err();
    assert_eq!((e.clone(), e.et_code()), (XnnError::TooShort { len: 18 }, 0x12));
    let e = xnnpack::load(&patch(blob(), 14, &7u32.to_le_bytes()), None).unwrap_err();
    assert_eq!(e, XnnError::FlatbufferTooSmall { size: 7 });
    let len = blob().len();
    let e = xnnpack::load(&patch(blob(), 14, &(len as u32).to_le_bytes()), None).unwrap_err();
    assert!(matches!(e, XnnError::FlatbufferOutOfBounds { offset: 32, .. }), "{e}");
    let e = xnnpack::load(&patch(blob(), 22, &u64::MAX.to_le_bytes()), None).unwrap_err();
    assert!(matches!(e, XnnError::ConstantsOutOfBounds { size: u64::MAX, .. }), "{e}");
    let e = xnnpack::load(&patch(patch(blob(), 18, &40u32.to_le_bytes()), 22, &0u64.to_le_bytes()), None).unwrap_err();
    assert!(matches!(e, XnnError::ConstantsOverlap { constant_offset: 40, fb_offset: 32, .. }), "{e}");
    assert_eq!(e.et_code(), 0x12);
    // The header-length field is not read (as in ExecuTorch): 99 there is fine.
    xnnpack::load(&patch(blob(), 8, &99u16.to_le_bytes()), None).expect("length field ignored");
}

#[test]
fn identifier_and_verifier_rejections() {
    let e = xnnpack::load(&patch(blob(), 36, b"XN02"), None).unwrap_err();
    assert_eq!(e, XnnError::Identifier { found: "XN02".into(), offset: 36 });
    assert_eq!(e.et_code(), 0x30);
    // Header magic broken: the blob is read as a bare flatbuffer whose identifier is "XH01".
    let e = xnnpack::load(&patch(blob(), 4, b"XH01"), None).unwrap_err();
    assert_eq!(e, XnnError::Identifier { found: "XH01".into(), offset: 4 });
    // A root offset past the end.
    let e = xnnpack::load(&patch(blob(), 32, &0x7fff_0000u32.to_le_bytes()), None).unwrap_err();
    assert!(matches!(e, XnnError::Flatbuffer(_)), "{e}");
    assert_eq!(e.et_code(), 0x30);
}

/// Flatbuffer navigation for byte-level edits the model cannot express.
mod fb {
    pub fn u32_at(b: &[u8], at: usize) -> usize {
        u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
    }
    /// Absolute position of field `slot` of the table at `table` (`None`: absent).
    pub fn field(b: &[u8], table: usize, slot: usize) -> Option<usize> {
        let so = i32::from_le_bytes([b[table], b[table + 1], b[table + 2], b[table + 3]]);
        let vt = (table as i64 - i64::from(so)) as usize;
        let vt_len = u16::from_le_bytes([b[vt], b[vt + 1]]) as usize;
        let at = 4 + 2 * slot;
        if at >= vt_len {
            return None;
        }
        let off = u16::from_le_bytes([b[vt + at], b[vt + at + 1]]) as usize;
        (off != 0).then_some(table + off)
    }
    /// The table an offset field at `pos` points to.
    pub fn deref(b: &[u8], pos: usize) -> usize {
        pos + u32_at(b, pos)
    }
    /// Element `i` (a table) of the vector the offset field at `pos` points to.
    pub fn elem(b: &[u8], pos: usize, i: usize) -> usize {
        let v = deref(b, pos);
        deref(b, v + 4 + 4 * i)
    }
    /// The root table.
    pub fn root(b: &[u8], fb_start: usize) -> usize {
        fb_start + u32_at(b, fb_start)
    }
    /// Zeroes the vtable entry of `slot` of the table at `table` (the field becomes absent).
    pub fn clear(b: &mut [u8], table: usize, slot: usize) {
        let so = i32::from_le_bytes([b[table], b[table + 1], b[table + 2], b[table + 3]]);
        let vt = (table as i64 - i64::from(so)) as usize;
        b[vt + 4 + 2 * slot] = 0;
        b[vt + 5 + 2 * slot] = 0;
    }
}

#[test]
fn absent_node_or_value_lists_are_rejected() {
    for (slot, name) in [(1, "XNNGraph.xnodes"), (2, "XNNGraph.xvalues")] {
        let mut b = blob();
        let root = fb::root(&b, 32);
        fb::clear(&mut b, root, slot);
        let e = xnnpack::load(&b, None).unwrap_err();
        assert_eq!(e, XnnError::Missing { path: name.into() });
        assert_eq!(e.et_code(), 0x23);
    }
}

#[test]
fn union_tags_outside_the_schema_are_rejected() {
    // Value 0's type byte (XValue slot 0) set to 3, then 0.
    for tag in [3u8, 0] {
        let mut b = blob();
        let root = fb::root(&b, 32);
        let v0 = fb::elem(&b, fb::field(&b, root, 2).expect("xvalues"), 0);
        let at = fb::field(&b, v0, 0).expect("type byte");
        b[at] = tag;
        let e = xnnpack::load(&b, None).unwrap_err();
        assert_eq!(e, XnnError::ValueType { index: 0, tag });
        assert_eq!(e.et_code(), 0x11);
    }
    // Node 0's type byte set to 48 (one past XNNCos), then 0 (NONE).
    let mut b = blob();
    let root = fb::root(&b, 32);
    let n0 = fb::elem(&b, fb::field(&b, root, 1).expect("xnodes"), 0);
    let at = fb::field(&b, n0, 0).expect("type byte");
    b[at] = 48;
    assert_eq!(xnnpack::load(&b, None).unwrap_err(), XnnError::NodeType { index: 0, tag: 48 });
    b[at] = 0;
    assert_eq!(xnnpack::load(&b, None).unwrap_err(), XnnError::NodeTypeNone { index: 0 });
}

// --- Graph and values (InvalidProgram 0x23 / Internal 0x01 in ExecuTorch)

#[test]
fn value_rejections() {
    let e = reject(|g, _| g.num_externs = 4097);
    assert_eq!(e, XnnError::TooManyExterns { num_externs: 4097 });
    let e = reject(|g, _| tensor_mut(g, 0).flags = 4);
    assert_eq!((e.clone(), e.et_code()), (XnnError::ValueFlags { index: 0, flags: 4 }, 0x23));
    let e = reject(|g, _| tensor_mut(g, 3).dims = Some(vec![1; 7]));
    assert_eq!(e, XnnError::Rank { index: 3, rank: 7 });
    // A rank that is not the length of `dims`: fewer would drop dimensions, more read past them.
    for num_dims in [1, 3] {
        let e = reject(|g, _| tensor_mut(g, 3).num_dims = num_dims);
        assert_eq!(e, XnnError::NumDims { index: 3, num_dims, dims: 2 });
    }
    let e = reject(|g, _| tensor_mut(g, 0).datatype = 99);
    assert_eq!(e, XnnError::Datatype { index: 0, datatype: 99 });
    let e = reject(|g, _| tensor_mut(g, 3).external_id = 2);
    assert_eq!(e, XnnError::ExternalId { index: 3, external_id: 2, num_externs: 2 });
    let e = reject(|g, _| tensor_mut(g, 0).external_id = INVALID_ID);
    assert!(matches!(e, XnnError::ExternalMismatch { index: 0, flags: 1, .. }), "{e}");
    let e = reject(|g, _| tensor_mut(g, 1).external_id = 1);
    assert!(matches!(e, XnnError::ExternalMismatch { index: 1, flags: 0, external_id: 1 }), "{e}");
    let e = reject(|g, _| tensor_mut(g, 3).external_id = 0);
    assert_eq!(e, XnnError::DuplicateExternalId { index: 3, external_id: 0, first: 0 });
    let e = reject(|g, _| tensor_mut(g, 2).id_out = 1);
    assert_eq!(e, XnnError::DuplicateIdOut { index: 2, id_out: 1, first: 1 });
    let e = reject(|g, _| tensor_mut(g, 0).dq_datatype = 2);
    assert_eq!(e, XnnError::DqDatatype { index: 0, dq_datatype: 2 });
}

#[test]
fn constant_rejections() {
    let e = reject(|g, _| g.constant_data = None);
    assert!(matches!(e, XnnError::ConstantTableMissing { index: 1, table: "constant_data", .. }), "{e}");
    let e = reject(|g, _| tensor_mut(g, 2).constant_buffer_idx = 9);
    assert_eq!(e, XnnError::ConstantIndex { index: 2, idx: 9, table: "constant_data", len: 3 });
    let e = reject(|g, _| g.constant_data.as_mut().expect("cd")[2].offset = 60);
    assert_eq!(e, XnnError::ConstantRange { index: 2, idx: 2, offset: 60, size: 12, region: 64 });
    let e = reject(|g, _| g.constant_data.as_mut().expect("cd")[2].size = 8);
    assert_eq!(e, XnnError::ConstantSize { index: 2, expected: 12, actual: 8 });
    // A named key without named data, and one the named data lacks (ExecuTorch: NotFound).
    let e = reject(|g, _| g.constant_data.as_mut().expect("cd")[1].named_key = Some("w".into()));
    assert!(matches!(&e, XnnError::NoNamedData { index: 1, idx: 1, key } if key == "w"), "{e}");
    let (mut g, r) = base();
    g.constant_data.as_mut().expect("cd")[1].named_key = Some(String::new());
    let named: [(&str, &[u8]); 1] = [("w", &[0u8; 48])];
    let e = xnnpack::load(&xnnpack::write(&g, &r), Some(&named)).unwrap_err();
    assert_eq!(e, XnnError::NamedKeyMissing { index: 1, idx: 1, key: String::new() });
    assert_eq!(e.et_code(), 0x20);
    // ... and found under its key: the named bytes, not the region's.
    g.constant_data.as_mut().expect("cd")[1].named_key = Some("w".into());
    let l = xnnpack::load(&xnnpack::write(&g, &r), Some(&named)).expect("found");
    assert_eq!(&l.constants[&1][..], &[0u8; 48][..]);
}

#[test]
fn bare_blobs_read_constants_from_the_deprecated_table_only() {
    let (mut g, region) = base();
    // Bare flatbuffer with constant_data: the runtime looks in constant_buffer, finds none.
    let e = xnnpack::load(&xnnpack::write_flatbuffer(&g), None).unwrap_err();
    assert!(matches!(e, XnnError::ConstantTableMissing { table: "constant_buffer", .. }), "{e}");
    g.constant_buffer = Some(vec![None, Some(region[..48].to_vec()), None]);
    let e = xnnpack::load(&xnnpack::write_flatbuffer(&g), None).unwrap_err();
    assert_eq!(e, XnnError::ConstantNull { index: 2, idx: 2, table: "constant_buffer" });
    g.constant_buffer = Some(vec![None, Some(region[..48].to_vec()), Some(region[48..60].to_vec())]);
    let l = xnnpack::load(&xnnpack::write_flatbuffer(&g), None).expect("bare blob with constant_buffer");
    assert!(l.blob.header.is_none());
    assert_eq!(&l.constants[&2][..], &region[48..60]);
}

// --- Nodes

#[test]
fn node_rejections() {
    let e = reject(|g, _| {
        g.nodes[0].payload =
            Payload::FullyConnected { input1_id: 0, filter_id: 77, bias_id: 2, output_id: 3, flags: 0 };
    });
    assert_eq!(e, XnnError::UndefinedId { index: 0, node: "XNNFullyConnected", field: "filter_id", id: 77 });
    assert_eq!(e.et_code(), 0x01);
    let e = reject(|g, _| {
        g.nodes.push(XNode {
            node_type: NodeType::XNNScaledDotProductAttention,
            payload: Payload::Sdpa {
                query_id: 0,
                key_id: 0,
                value_id: 0,
                scale_id: 0,
                mask_id: 0,
                output_id: 3,
                flags: 0,
            },
            debug_handle: 0,
            output_min_max: None,
        });
    });
    assert_eq!(e, XnnError::NodeNotImplemented { index: 1, node: "XNNScaledDotProductAttention" });
    assert_eq!(e.et_code(), 0x11);
    // Writing a constant, an external input, or a value another node writes.
    for (out, what) in [(1, "constant"), (0, "external input"), (3, "writes too")] {
        let e = reject(|g, _| g.nodes.push(node1(NodeType::XNNCopy, 3, out)));
        assert!(matches!(&e, XnnError::BadOutput { index: 1, what: w, .. } if w.contains(what)), "{e}");
    }
    // Reading an internal value nothing writes.
    let e = reject(|g, _| {
        g.values.push(value(4, &[2, 3], 0, INVALID_ID, 0));
        g.nodes[0].payload = Payload::FullyConnected { input1_id: 4, filter_id: 1, bias_id: 2, output_id: 3, flags: 0 };
    });
    assert!(matches!(&e, XnnError::NodeField { index: 0, field: "input1_id", .. }), "{e}");
    // An external output no node writes.
    let e = reject(|g, _| g.nodes.clear());
    assert!(matches!(&e, XnnError::Missing { path } if path.contains("xvalues[3]")), "{e}");
    // A cycle: two copies reading each other's outputs.
    let e = reject(|g, _| {
        g.values.push(value(4, &[2, 3], 0, INVALID_ID, 0));
        g.values.push(value(5, &[2, 3], 0, INVALID_ID, 0));
        g.nodes.push(node1(NodeType::XNNCopy, 5, 4));
        g.nodes.push(node1(NodeType::XNNCopy, 4, 5));
    });
    assert_eq!(e, XnnError::Cycle { index: 1, node: "XNNCopy" });
    // FullyConnected's clamp validated as XNNPACK does: min > max, NaN.
    for (min, max) in [(1.0, 0.5), (f32::NAN, 1.0)] {
        let e = reject(|g, _| g.nodes[0].output_min_max = Some(MinMax { output_min: min, output_max: max }));
        assert!(matches!(e, XnnError::MinMax { index: 0, .. }), "{e}");
    }
}

#[test]
fn node_list_fields_are_checked() {
    let with = |p: Payload, t: NodeType| {
        reject(move |g, _| {
            g.values.push(value(4, &[2, 3], 0, INVALID_ID, 0));
            g.nodes.push(XNode { node_type: t, payload: p, debug_handle: 0, output_min_max: None });
        })
    };
    let tr =
        |perm: Option<Vec<u32>>| Payload::StaticTranspose { num_dims: 2, perm, input_id: 3, output_id: 4, flags: 0 };
    for (perm, field_has) in [(None, "missing"), (Some(vec![]), "0 entries"), (Some(vec![0, 0]), "no permutation")] {
        let e = with(tr(perm), NodeType::XNNStaticTranspose);
        assert!(matches!(&e, XnnError::NodeField { field: "perm", what, .. } if what.contains(field_has)), "{e}");
    }
    let rs = Payload::StaticReshape { num_dims: 2, new_shape: Some(vec![0, 0]), input_id: 3, output_id: 4, flags: 0 };
    let e = with(rs, NodeType::XNNStaticReshape);
    assert!(matches!(&e, XnnError::NodeField { field: "new_shape", .. }), "{e}");
    let sl = Payload::StaticSlice {
        num_dims: 2,
        offsets: Some(vec![0, 0]),
        sizes: Some(vec![1]),
        input_id: 3,
        output_id: 4,
        flags: 0,
    };
    let e = with(sl, NodeType::XNNStaticSlice);
    assert!(matches!(&e, XnnError::NodeField { field: "sizes", .. }), "{e}");
    // Each list's `num_dims` is its length.
    for num_dims in [1, 3] {
        let t = Payload::StaticTranspose { num_dims, perm: Some(vec![1, 0]), input_id: 3, output_id: 4, flags: 0 };
        let e = with(t, NodeType::XNNStaticTranspose);
        assert!(matches!(&e, XnnError::NodeField { field: "num_dims", .. }), "{e}");
        let rs = Payload::StaticReshape { num_dims, new_shape: Some(vec![3, 2]), input_id: 3, output_id: 4, flags: 0 };
        let e = with(rs, NodeType::XNNStaticReshape);
        assert!(matches!(&e, XnnError::NodeField { field: "num_dims", .. }), "{e}");
    }
    // A model whose payload is another member's table (bytes cannot say so: a union payload is
    // read as its tag's table) is refused by `verify`, before any writer sees it.
    let (g, r) = base();
    let mut parsed = xnnpack::parse(&xnnpack::write(&g, &r)).expect("parses");
    parsed.graph.nodes[0].node_type = NodeType::XNNSigmoid;
    let e = xnnpack::verify(parsed, None).unwrap_err();
    assert!(matches!(&e, XnnError::NodeField { field: "xnode_union", .. }), "{e}");
}

#[test]
fn nodes_out_of_order_run_in_topological_order() {
    // y = copy(t); t = copy(x) stored in reverse: loads (XNNPACK re-sorts), order [1, 0].
    let (mut g, r) = base();
    g.values.push(value(4, &[2, 3], 0, INVALID_ID, 0));
    g.nodes = vec![node1(NodeType::XNNCopy, 4, 3), fc(0, 1, 2, 4)];
    let l = load_graph(&g, &r).expect("loads");
    assert_eq!(l.order, [1, 0]);
}

#[test]
fn a_quantisation_parameter_tag_outside_the_schema_is_rejected() {
    // Value 0 made a quantised value (per-tensor), then its XNNQuantParams type byte
    // (XNNQuantizedTensorValue slot 1) set past the four kinds, then to NONE.
    let (mut g, r) = base();
    let XValue::Tensor(t) = g.values[0].clone() else { panic!("a tensor value") };
    g.values[0] =
        XValue::Quantized { tensor: t, params: pte::xnnpack::QuantParams::PerTensor { scale: 0.5, zero_point: 3 } };
    let written = xnnpack::write(&g, &r);
    let parsed = xnnpack::parse(&written).expect("the quantised value parses");
    assert!(matches!(&parsed.graph.values[0], XValue::Quantized { .. }));
    for tag in [5u8, 0] {
        let mut b = written.clone();
        let root = fb::root(&b, 32);
        let v0 = fb::elem(&b, fb::field(&b, root, 2).expect("xvalues"), 0);
        let quantised = fb::deref(&b, fb::field(&b, v0, 1).expect("union value"));
        let at = fb::field(&b, quantised, 1).expect("quant_params type byte");
        assert_eq!(b[at], 2, "PerTensorQuant is tag 2");
        b[at] = tag;
        let e = xnnpack::load(&b, None).unwrap_err();
        assert_eq!(e, XnnError::QuantParamsType { index: 0, tag });
        assert_eq!(e.et_code(), 0x11);
    }
}

#[test]
fn values_reading_one_constant_share_one_copy() {
    // 200 more values read W: through its own table entry, through 200 more entries over the
    // same region range, and through two entries naming one key. The loader keeps one copy of
    // each distinct source, so what it makes is bounded by the blob and its named data.
    let (mut g, region) = base();
    let table = g.constant_data.as_mut().expect("table");
    let same_range = table.len() as u32;
    table.push(ConstantEntry { offset: 0, size: 48, named_key: None });
    let named_at = table.len() as u32;
    table.push(ConstantEntry { offset: 0, size: 0, named_key: Some("w".into()) });
    table.push(ConstantEntry { offset: 0, size: 0, named_key: Some("w".into()) });
    for i in 0..200u32 {
        let idx = match i % 4 {
            0 => 1,
            1 => same_range,
            2 => named_at,
            _ => named_at + 1,
        };
        g.values.push(value(100 + i, &[3, 4], idx, INVALID_ID, 0));
    }
    let named_bytes = vec![1u8; 48];
    let named: &[(&str, &[u8])] = &[("w", &named_bytes)];
    let l = xnnpack::load(&xnnpack::write(&g, &region), Some(named)).expect("valid");
    assert_eq!(l.constants.len(), 202);
    let distinct: Vec<*const u8> = {
        let mut v: Vec<*const u8> = l.constants.values().map(|c| c.as_ptr()).collect();
        v.sort();
        v.dedup();
        v
    };
    // W's range (entries 1 and `same_range`), b's range, and the key: three copies in all.
    assert_eq!(distinct.len(), 3, "one copy per distinct source");
    assert!(std::sync::Arc::ptr_eq(&l.constants[&1], &l.constants[&4]), "one range, two entries");
    assert!(std::sync::Arc::ptr_eq(&l.constants[&6], &l.constants[&7]), "one key, two entries");
    assert_eq!(&l.constants[&6][..], &named_bytes[..]);
}

/// The base blob after `edit` loads.
fn accept(edit: impl FnOnce(&mut XnnGraph, &mut Vec<u8>)) {
    let (mut g, mut region) = base();
    edit(&mut g, &mut region);
    if let Err(e) = load_graph(&g, &region) {
        panic!("the edit must load: {e}");
    }
}

#[test]
fn every_verifier_bound_holds_on_its_accepting_side() {
    // Each limit at its largest accepted value (the rejections above are one past it): a
    // verifier off by one refuses blobs XNNPACK takes.
    accept(|g, _| g.num_externs = 4096);
    accept(|g, _| g.values.push(value(9, &[1; 6], 0, INVALID_ID, 0)));
    assert_eq!(reject(|g, _| g.values.push(value(9, &[1; 7], 0, INVALID_ID, 0))), XnnError::Rank { index: 4, rank: 7 });
    // A constant may end exactly at the end of the region, and an empty one may start there
    // (it is then too small for its tensor, not out of the region).
    accept(|g, _| g.constant_data.as_mut().expect("cd")[2].size = 16);
    assert_eq!(
        reject(|g, _| g.constant_data.as_mut().expect("cd")[2].size = 17),
        XnnError::ConstantRange { index: 2, idx: 2, offset: 48, size: 17, region: 64 }
    );
    let e = reject(|g, _| {
        g.constant_data.as_mut().expect("cd")[2] = ConstantEntry { offset: 64, size: 0, named_key: None }
    });
    assert_eq!(e, XnnError::ConstantSize { index: 2, expected: 12, actual: 0 });
    // A clamp may be a single value.
    accept(|g, _| g.nodes[0].output_min_max = Some(MinMax { output_min: 0.5, output_max: 0.5 }));
}

#[test]
fn a_dynamically_quantised_value_is_a_qint8_external_input_without_constant_data() {
    let qint8 = pte::xnnpack::Datatype::Qint8 as i16;
    accept(|g, _| tensor_mut(g, 0).dq_datatype = qint8);
    // Not an external input (the output), or with constant data (a constant is no external).
    assert_eq!(
        reject(|g, _| tensor_mut(g, 3).dq_datatype = qint8),
        XnnError::DqDatatype { index: 3, dq_datatype: qint8 }
    );
    let e = reject(|g, _| tensor_mut(g, 1).dq_datatype = qint8);
    assert_eq!(e, XnnError::DqDatatype { index: 1, dq_datatype: qint8 });
}

#[test]
fn a_per_channel_value_s_scale_buffer_is_a_constant_it_must_resolve() {
    // Value 1 (W) quantised per channel over its 3 rows, its scales in constant entry `idx`.
    let per_channel = |idx: u32| {
        move |g: &mut XnnGraph, _: &mut Vec<u8>| {
            let XValue::Tensor(t) = g.values[1].clone() else { panic!("a tensor value") };
            g.values[1] = XValue::Quantized {
                tensor: t,
                params: pte::xnnpack::QuantParams::PerChannel {
                    scale: None,
                    channel_dim: 0,
                    scale_buffer_idx: idx,
                    num_scales: 3,
                },
            };
        }
    };
    // 0 means the scales are inline; entry 2 resolves; entry 9 does not exist.
    accept(per_channel(0));
    accept(per_channel(2));
    assert_eq!(reject(per_channel(9)), XnnError::ConstantIndex { index: 1, idx: 9, table: "constant_data", len: 3 });
}

#[test]
fn node_lists_at_their_limits_are_taken_and_a_pad_needs_both_sides() {
    let node = |p: Payload, t: NodeType| XNode { node_type: t, payload: p, debug_handle: 0, output_min_max: None };
    let with_output = |g: &mut XnnGraph, p: Payload, t: NodeType| {
        g.values.push(value(4, &[2, 3], 0, INVALID_ID, 0));
        g.nodes.push(node(p, t));
    };
    // Six dimensions, the most XNNPACK has; a reshape may infer one dimension (0).
    accept(move |g, _| {
        let perm = Some(vec![5, 4, 3, 2, 1, 0]);
        with_output(
            g,
            Payload::StaticTranspose { num_dims: 6, perm, input_id: 3, output_id: 4, flags: 0 },
            NodeType::XNNStaticTranspose,
        );
    });
    accept(move |g, _| {
        let new_shape = Some(vec![1, 1, 1, 1, 0, 3]);
        with_output(
            g,
            Payload::StaticReshape { num_dims: 6, new_shape, input_id: 3, output_id: 4, flags: 0 },
            NodeType::XNNStaticReshape,
        );
    });
    let e = reject(move |g, _| {
        let new_shape = Some(vec![1; 7]);
        with_output(
            g,
            Payload::StaticReshape { num_dims: 7, new_shape, input_id: 3, output_id: 4, flags: 0 },
            NodeType::XNNStaticReshape,
        );
    });
    assert!(matches!(&e, XnnError::NodeField { field: "new_shape", what, .. } if what.contains("rank 7")), "{e}");
    let e = reject(move |g, _| {
        let perm = Some(vec![0, 1, 2, 3, 4, 5, 6]);
        with_output(
            g,
            Payload::StaticTranspose { num_dims: 7, perm, input_id: 3, output_id: 4, flags: 0 },
            NodeType::XNNStaticTranspose,
        );
    });
    assert!(matches!(&e, XnnError::NodeField { field: "perm", what, .. } if what.contains("7 entries")), "{e}");
    // A constant pad pads each dimension before and after: both lists, of one length.
    let pad = |pre: Option<Vec<u32>>, post: Option<Vec<u32>>| Payload::ConstantPad {
        pre_paddings: pre,
        post_paddings: post,
        padding_value: 0.0,
        input_id: 3,
        output_id: 4,
        flags: 0,
    };
    accept(move |g, _| with_output(g, pad(Some(vec![0, 1]), Some(vec![1, 0])), NodeType::XNNStaticConstantPad));
    for (pre, post, field) in [
        (None, Some(vec![0, 0]), "pre_paddings"),
        (Some(vec![0, 0]), None, "post_paddings"),
        (Some(vec![0, 0]), Some(vec![0]), "post_paddings"),
    ] {
        let e = reject(move |g, _| with_output(g, pad(pre, post), NodeType::XNNStaticConstantPad));
        assert!(matches!(&e, XnnError::NodeField { field: f, .. } if *f == field), "{e}");
    }
}
