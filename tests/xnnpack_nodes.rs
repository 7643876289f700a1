//! The reference XNNPACK interpreter, node by node, against values computed by hand; then the
//! backend end to end: unsupported nodes and datatypes refused at init with their index, and
//! lowered modules run under the runtime.

#![forbid(unsafe_code)]

use pte::xnnpack::{INVALID_ID, MinMax, NodeType, Payload, XNode};
use ptecheck::backends::xnnpack::interp::{NodeError, T, run_node};

fn t(shape: &[usize], data: &[f32]) -> T {
    T::new(shape.to_vec(), data.to_vec())
}

fn node(node_type: NodeType, payload: Payload, mm: Option<(f32, f32)>) -> XNode {
    XNode {
        node_type,
        payload,
        debug_handle: 0,
        output_min_max: mm.map(|(a, b)| MinMax { output_min: a, output_max: b }),
    }
}

fn n1(ty: NodeType) -> XNode {
    node(ty, Payload::Node1x1 { input_id: 0, output_id: 1, flags: 0 }, None)
}

fn n2(ty: NodeType, mm: Option<(f32, f32)>) -> XNode {
    node(ty, Payload::Node2x1 { input1_id: 0, input2_id: 1, output_id: 2, flags: 0 }, mm)
}

fn run(n: &XNode, ins: &[&T]) -> T {
    run_node(n, ins, 1 << 20).expect("runs")
}

#[test]
fn fully_connected_with_and_without_bias_and_transposed_filter() {
    let x = t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    // Filter [out=2, in=3] as ExecuTorch writes nn.Linear.weight.
    let w = t(&[2, 3], &[1., 0., -1., 0.5, 0.5, 0.5]);
    let b = t(&[2], &[10., -10.]);
    let fc = |bias: u32, flags: u32, mm| {
        node(
            NodeType::XNNFullyConnected,
            Payload::FullyConnected { input1_id: 0, filter_id: 1, bias_id: bias, output_id: 3, flags },
            mm,
        )
    };
    // Row 0: [1-3, 0.5*(6)] = [-2, 3]; row 1: [4-6, 0.5*15] = [-2, 7.5].
    assert_eq!(run(&fc(2, 0, None), &[&x, &w, &b]), t(&[2, 2], &[8., -7., 8., -2.5]));
    assert_eq!(run(&fc(INVALID_ID, 0, None), &[&x, &w]), t(&[2, 2], &[-2., 3., -2., 7.5]));
    // Flag 1: the filter is [in=3, out=2].
    let wt = t(&[3, 2], &[1., 0.5, 0., 0.5, -1., 0.5]);
    assert_eq!(run(&fc(INVALID_ID, 1, None), &[&x, &wt]), t(&[2, 2], &[-2., 3., -2., 7.5]));
    // output_min_max (a fused ReLU: min 0, max +inf) clamps.
    assert_eq!(run(&fc(2, 0, Some((0.0, f32::INFINITY))), &[&x, &w, &b]), t(&[2, 2], &[8., 0., 8., 0.]));
    // Leading dims are a batch: [1, 2, 3] -> [1, 2, 2].
    let x3 = t(&[1, 2, 3], &[1., 2., 3., 4., 5., 6.]);
    assert_eq!(run(&fc(INVALID_ID, 0, None), &[&x3, &w]).shape, [1, 2, 2]);
    // Input channels that disagree with the filter are refused.
    assert!(run_node(&fc(INVALID_ID, 0, None), &[&t(&[1, 2], &[1., 2.]), &w], 1 << 20).is_err());
}

#[test]
fn binary_nodes_broadcast_and_clamp() {
    let a = t(&[2, 2], &[1., -2., 3., -4.]);
    let b = t(&[2], &[2., -1.]);
    assert_eq!(run(&n2(NodeType::XNNAdd, None), &[&a, &b]), t(&[2, 2], &[3., -3., 5., -5.]));
    assert_eq!(run(&n2(NodeType::XNNSubtract, None), &[&a, &b]), t(&[2, 2], &[-1., -1., 1., -3.]));
    assert_eq!(run(&n2(NodeType::XNNMultiply, None), &[&a, &b]), t(&[2, 2], &[2., 2., 6., 4.]));
    assert_eq!(run(&n2(NodeType::XNNDiv, None), &[&a, &b]), t(&[2, 2], &[0.5, 2., 1.5, 4.]));
    assert_eq!(run(&n2(NodeType::XNNMinimum, None), &[&a, &b]), t(&[2, 2], &[1., -2., 2., -4.]));
    assert_eq!(run(&n2(NodeType::XNNMaximum, None), &[&a, &b]), t(&[2, 2], &[2., -1., 3., -1.]));
    // Add honours output_min_max; Minimum ignores it.
    assert_eq!(run(&n2(NodeType::XNNAdd, Some((-4.0, 4.0))), &[&a, &b]), t(&[2, 2], &[3., -3., 4., -4.]));
    assert_eq!(run(&n2(NodeType::XNNMinimum, Some((0.0, 0.5))), &[&a, &b]), t(&[2, 2], &[1., -2., 2., -4.]));
    // Min/max pick b when the comparison is false: NaN in a gives b.
    let nan = t(&[1], &[f32::NAN]);
    let one = t(&[1], &[1.0]);
    assert_eq!(run(&n2(NodeType::XNNMinimum, None), &[&nan, &one]), one);
    // Rank-0 and [3,1] x [1,2] broadcasts.
    let col = t(&[3, 1], &[1., 2., 3.]);
    let row = t(&[1, 2], &[10., 20.]);
    assert_eq!(run(&n2(NodeType::XNNAdd, None), &[&col, &row]), t(&[3, 2], &[11., 21., 12., 22., 13., 23.]));
    assert!(run_node(&n2(NodeType::XNNAdd, None), &[&t(&[3], &[1., 2., 3.]), &t(&[2], &[1., 2.])], 1 << 20).is_err());
    // A broadcast result beyond the element limit is refused before it is allocated.
    let e = run_node(&n2(NodeType::XNNAdd, None), &[&col, &row], 5).unwrap_err();
    assert!(matches!(e, NodeError::TooLarge { limit: 5, .. }), "{e:?}");
    assert!(e.to_string().contains("exceeds the limit of 5"), "{e}");
}

#[test]
fn unary_nodes() {
    let x = t(&[4], &[-2., -0.5, 0., 4.]);
    assert_eq!(run(&n1(NodeType::XNNNegate), &[&x]), t(&[4], &[2., 0.5, -0., -4.]));
    assert_eq!(run(&n1(NodeType::XNNAbs), &[&x]), t(&[4], &[2., 0.5, 0., 4.]));
    assert_eq!(run(&n1(NodeType::XNNSquare), &[&x]), t(&[4], &[4., 0.25, 0., 16.]));
    let r = run(&n1(NodeType::XNNSquareRoot), &[&x]);
    assert!(r.data[0].is_nan() && r.data[1].is_nan());
    assert_eq!(&r.data[2..], [0., 2.]);
    assert_eq!(run(&n1(NodeType::XNNCeiling), &[&x]), t(&[4], &[-2., -0., 0., 4.]));
    assert_eq!(run(&n1(NodeType::XNNFloor), &[&x]), t(&[4], &[-2., -1., 0., 4.]));
    assert_eq!(run(&n1(NodeType::XNNCopy), &[&x]), x);
    // Clamp with bounds, and without a table: the identity.
    let clamp = node(NodeType::XNNClamp, Payload::Node1x1 { input_id: 0, output_id: 1, flags: 0 }, Some((-1., 1.)));
    assert_eq!(run(&clamp, &[&x]), t(&[4], &[-1., -0.5, 0., 1.]));
    assert_eq!(run(&n1(NodeType::XNNClamp), &[&x]), x);
    // Transcendentals: within one float32 rounding of the exact value.
    let y = t(&[3], &[0., 1., -1.]);
    let close = |got: &T, want: [f64; 3]| {
        for (g, w) in got.data.iter().zip(want) {
            assert!((f64::from(*g) - w).abs() <= 1e-7 * w.abs().max(1.0), "{g} vs {w}");
        }
    };
    close(&run(&n1(NodeType::XNNSigmoid), &[&y]), [0.5, 0.731_058_578_630_004_9, 0.268_941_421_369_995_1]);
    close(&run(&n1(NodeType::XNNTanh), &[&y]), [0., 0.761_594_155_955_764_9, -0.761_594_155_955_764_9]);
    close(&run(&n1(NodeType::XNNExp), &[&y]), [1., std::f64::consts::E, 0.367_879_441_171_442_3]);
    close(&run(&n1(NodeType::XNNSin), &[&y]), [0., 0.841_470_984_807_896_5, -0.841_470_984_807_896_5]);
    close(&run(&n1(NodeType::XNNCos), &[&y]), [1., 0.540_302_305_868_139_8, 0.540_302_305_868_139_8]);
    // Sigmoid saturates beyond ±100 (XNNPACK's reference).
    assert_eq!(run(&n1(NodeType::XNNSigmoid), &[&t(&[2], &[101., -101.])]), t(&[2], &[1., 0.]));
}

#[test]
fn softmax_over_the_last_dimension() {
    let x = t(&[3, 2], &[0., 0., 1000., 1000., 0., 2f32.ln()]);
    let y = run(&n1(NodeType::XNNSoftmax), &[&x]);
    // Max subtracted first: no overflow at 1000.
    assert_eq!(y.data[..4], [0.5, 0.5, 0.5, 0.5]);
    // e^ln2 / (1 + 2) = 2/3.
    assert!((y.data[4] - 1.0 / 3.0).abs() < 1e-6 && (y.data[5] - 2.0 / 3.0).abs() < 1e-6, "{y:?}");
}

#[test]
fn batch_matrix_multiply_broadcasts_batches() {
    let a = t(&[2, 1, 2], &[1., 2., 3., 4.]);
    let b = t(&[1, 2, 2], &[1., 0., 0., 2.]);
    let bmm = n2(NodeType::XNNBatchMatrixMultiply, None);
    assert_eq!(run(&bmm, &[&a, &b]), t(&[2, 1, 2], &[1., 4., 3., 8.]));
    // Flag 1: b is [.., N, K].
    let bt = node(
        NodeType::XNNBatchMatrixMultiply,
        Payload::Node2x1 { input1_id: 0, input2_id: 1, output_id: 2, flags: 1 },
        None,
    );
    let b2 = t(&[1, 2, 2], &[1., 1., 0., 1.]);
    assert_eq!(run(&bt, &[&a, &b2]), t(&[2, 1, 2], &[3., 2., 7., 4.]));
}

#[test]
fn static_transpose_and_reshape() {
    let x = t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let tr = |perm: Vec<u32>| {
        node(
            NodeType::XNNStaticTranspose,
            Payload::StaticTranspose { num_dims: 0, perm: Some(perm), input_id: 0, output_id: 1, flags: 0 },
            None,
        )
    };
    assert_eq!(run(&tr(vec![1, 0]), &[&x]), t(&[3, 2], &[1., 4., 2., 5., 3., 6.]));
    // out.shape[i] = in.shape[perm[i]] on rank 3: [1,2,3] perm [2,0,1] -> [3,1,2].
    let x3 = t(&[1, 2, 3], &[1., 2., 3., 4., 5., 6.]);
    assert_eq!(run(&tr(vec![2, 0, 1]), &[&x3]), t(&[3, 1, 2], &[1., 4., 2., 5., 3., 6.]));
    assert!(run_node(&tr(vec![1, 0]), &[&x3], 1 << 20).is_err(), "rank must equal perm length");
    let rs = |s: Vec<u32>| {
        node(
            NodeType::XNNStaticReshape,
            Payload::StaticReshape { num_dims: 0, new_shape: Some(s), input_id: 0, output_id: 1, flags: 0 },
            None,
        )
    };
    assert_eq!(run(&rs(vec![3, 2]), &[&x]).shape, [3, 2]);
    // 0 = inferred.
    assert_eq!(run(&rs(vec![0, 3]), &[&x]).shape, [2, 3]);
    assert_eq!(run(&rs(vec![6, 0]), &[&x]).shape, [6, 1]);
    assert!(run_node(&rs(vec![4, 0]), &[&x], 1 << 20).is_err());
    assert!(run_node(&rs(vec![4, 2]), &[&x], 1 << 20).is_err());
}

#[test]
fn other_nodes_are_not_run() {
    let x = t(&[1], &[1.0]);
    for ty in [NodeType::XNNGelu, NodeType::XNNLog, NodeType::XNNHardswish] {
        let e = run_node(&n1(ty), &[&x], 1 << 20).unwrap_err();
        assert_eq!(e, NodeError::Unsupported(ty.name()));
        assert!(e.to_string().contains(ty.name()), "{e}");
    }
}

/// x[2] (ext 0) -> Abs -> y[2] -> `extra` -> z[2] (ext 1): a blob whose node 1 is `extra`.
fn two_node_blob(extra: NodeType, quantised_input: bool) -> Vec<u8> {
    use pte::xnnpack::{
        ConstantEntry, FLAG_EXTERNAL_INPUT, FLAG_EXTERNAL_OUTPUT, QuantParams, TensorValue, XValue, XnnGraph,
    };
    let value = |id: u32, ext: u32, flags: u32| TensorValue {
        datatype: 1,
        num_dims: 1,
        dims: Some(vec![2]),
        constant_buffer_idx: 0,
        external_id: ext,
        flags,
        id_out: id,
        dq_datatype: 0,
    };
    let input = if quantised_input {
        XValue::Quantized {
            tensor: value(0, 0, FLAG_EXTERNAL_INPUT),
            params: QuantParams::PerTensor { scale: 1.0, zero_point: 0 },
        }
    } else {
        XValue::Tensor(value(0, 0, FLAG_EXTERNAL_INPUT))
    };
    let g = XnnGraph {
        version: Some("0".into()),
        nodes: vec![
            node(NodeType::XNNAbs, Payload::Node1x1 { input_id: 0, output_id: 1, flags: 0 }, None),
            node(extra, Payload::Node1x1 { input_id: 1, output_id: 2, flags: 0 }, None),
        ],
        values: vec![input, XValue::Tensor(value(1, INVALID_ID, 0)), XValue::Tensor(value(2, 1, FLAG_EXTERNAL_OUTPUT))],
        num_externs: 2,
        input_ids: Some(vec![0]),
        output_ids: Some(vec![2]),
        constant_buffer: None,
        mem_buffer_sizes: None,
        constant_data: Some(vec![ConstantEntry { offset: 0, size: 0, named_key: None }]),
    };
    pte::xnnpack::write(&g, &[])
}

#[test]
fn init_refuses_unsupported_nodes_and_datatypes_naming_node_index_and_delegate() {
    use ptecheck::backends::xnnpack::XnnpackBackend;
    use ptecheck::runtime::{Backend, BackendOptions, ErrorCode, InitContext};
    let options = BackendOptions::default();
    let ctx = InitContext { method: "forward", delegate_index: 3, options: &options, named_data: &[] };
    // Both nodes supported: init succeeds.
    assert!(XnnpackBackend.init(&ctx, &two_node_blob(NodeType::XNNNegate, false), &[]).is_ok());
    for ty in [NodeType::XNNGelu, NodeType::XNNLog, NodeType::XNNHardswish] {
        let e = XnnpackBackend.init(&ctx, &two_node_blob(ty, false), &[]).err().expect("refused");
        assert_eq!(e.code, ErrorCode::NotSupported);
        assert!(
            e.detail.contains("method forward delegates[3]")
                && e.detail.contains("xnodes[1]")
                && e.detail.contains(ty.name()),
            "{}",
            e.detail
        );
        // ExecuTorch's XNNPACK runs these: the program is valid, not supported here.
        assert_eq!(e.lacks, Some(format!("backend:XnnpackBackend node {}", ty.name())));
    }
    let e = XnnpackBackend.init(&ctx, &two_node_blob(NodeType::XNNNegate, true), &[]).err().expect("refused");
    assert_eq!(e.code, ErrorCode::NotSupported);
    assert!(e.detail.contains("xvalues[0]") && e.detail.contains("quantized"), "{}", e.detail);
    assert_eq!(e.lacks.as_deref(), Some("backend:XnnpackBackend value Fp32 (quantized)"));
}

#[test]
fn negate_flips_the_sign_of_zero() {
    let out = run(&n1(NodeType::XNNNegate), &[&t(&[2], &[0.0, -0.0])]);
    let bits: Vec<u32> = out.data.iter().map(|x| x.to_bits()).collect();
    assert_eq!(bits, vec![(-0.0f32).to_bits(), 0.0f32.to_bits()]);
}

#[test]
fn empty_results_are_made_without_looping_over_their_other_dimensions() {
    // A batch of 2^60 matrices of [0, 1]: no element, so nothing to loop over (the loader
    // accepts such a constant: it needs 4 x 0 bytes).
    let huge = [1 << 15, 1 << 15, 1 << 15, 1 << 15];
    let a = t(&[huge.as_slice(), &[0, 1]].concat(), &[]);
    let b = t(&[1, 1], &[2.0]);
    let out = run(&n2(NodeType::XNNBatchMatrixMultiply, None), &[&a, &b]);
    assert_eq!(out, t(&[huge.as_slice(), &[0, 1]].concat(), &[]));
    // 2^40 rows of zero input channels into a filter of no outputs.
    let fc = node(
        NodeType::XNNFullyConnected,
        Payload::FullyConnected { input1_id: 0, filter_id: 1, bias_id: INVALID_ID, output_id: 2, flags: 0 },
        None,
    );
    let out = run(&fc, &[&t(&[1 << 40, 0], &[]), &t(&[0, 0], &[])]);
    assert_eq!(out, t(&[1 << 40, 0], &[]));
}

#[test]
fn constants_decoded_for_a_run_count_against_its_budget() {
    use pte::xnnpack::{ConstantEntry, FLAG_EXTERNAL_INPUT, FLAG_EXTERNAL_OUTPUT, TensorValue, XValue, XnnGraph};
    use ptecheck::backends::xnnpack::run_standalone;
    use ptecheck::runtime::ErrorCode;
    let value = |id: u32, dims: &[u32], constant: u32, external_id: u32, flags: u32| {
        XValue::Tensor(TensorValue::fp32(id, dims, constant, external_id, flags))
    };
    // y[1,4] = x[1,4] + c[4]; `extra` more values read c's 4 floats.
    let blob = |extra: u32| {
        let mut values = vec![
            value(0, &[1, 4], 0, 0, FLAG_EXTERNAL_INPUT),
            value(1, &[4], 1, INVALID_ID, 0),
            value(2, &[1, 4], 0, 1, FLAG_EXTERNAL_OUTPUT),
        ];
        values.extend((0..extra).map(|i| value(10 + i, &[4], 1, INVALID_ID, 0)));
        let g = XnnGraph {
            version: Some("0".into()),
            nodes: vec![XNode {
                node_type: NodeType::XNNAdd,
                payload: Payload::Node2x1 { input1_id: 0, input2_id: 1, output_id: 2, flags: 0 },
                debug_handle: 0,
                output_min_max: None,
            }],
            values,
            num_externs: 2,
            input_ids: Some(vec![0]),
            output_ids: Some(vec![2]),
            constant_buffer: None,
            mem_buffer_sizes: None,
            constant_data: Some(vec![ConstantEntry::default(), ConstantEntry { offset: 0, size: 16, named_key: None }]),
        };
        let region: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        pte::xnnpack::write(&g, &region)
    };
    // Limit 16 elements: a budget of 64 for constants and results together.
    let out = run_standalone(&blob(10), &[], 1.0, 16).expect("11 constants x 4 + 4 results fit in 64");
    assert_eq!(out[0].1, t(&[1, 4], &[2., 3., 4., 5.]));
    let e = run_standalone(&blob(20), &[], 1.0, 16).expect_err("21 constants x 4 do not fit in 64");
    assert_eq!(e.code, ErrorCode::MemoryAllocationFailed, "{e}");
    assert!(e.detail.contains("constant xvalues[18]"), "{e}");
}
