//! XNNPACK blobs ExecuTorch's own exporter wrote (the `xnn_*` files of corpus/real): each loads
//! with its constants resolved from the program's named data, decodes to what flatc reads from
//! it (checked by hand against `flatc --json`, notes in docs/xnnpack.md), and survives a
//! write -> load round trip with stable bytes.

#![forbid(unsafe_code)]

use pte::xnnpack::{self, NodeType, Payload, XnnBlob};
use std::path::PathBuf;

fn corpus(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus/real").join(format!("{name}.pte"));
    std::fs::read(p).expect("corpus file")
}

/// Named data as owned `(key, bytes)` pairs.
type Named = Vec<(String, Vec<u8>)>;

/// Every XNNPACK blob of a corpus file, with the program's named data.
fn blobs(name: &str) -> Vec<(Vec<u8>, Named)> {
    let bytes = corpus(name);
    let loaded = pte::format::load(&bytes).expect("corpus file loads");
    let named: Vec<(String, Vec<u8>)> =
        loaded.named_data_map().into_iter().map(|(k, v)| (k.to_string(), v.to_vec())).collect();
    let mut out = Vec::new();
    for (p, plan) in loaded.program.execution_plan.iter().flatten().enumerate() {
        for (d, del) in plan.delegates.iter().flatten().enumerate() {
            if del.id.as_deref() == Some("XnnpackBackend") {
                let blob = loaded.delegate_blobs[p][d].expect("blob resolved");
                out.push((blob.to_vec(), named.clone()));
            }
        }
    }
    out
}

fn load(blob: &[u8], named: &[(String, Vec<u8>)]) -> xnnpack::LoadedBlob {
    let pairs: Vec<(&str, &[u8])> = named.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
    xnnpack::load(blob, Some(&pairs)).expect("corpus blob verifies")
}

const FILES: [(&str, usize); 7] = [
    ("xnn_single_partition", 1),
    ("xnn_delegate_inline", 1),
    ("xnn_two_partitions_graph_break", 2),
    ("xnn_repeated_call_3x", 3),
    ("xnn_identical_blobs_dedup", 2),
    ("xnn_lowered_in_map_loop", 1),
    ("xnn_dynamic_batch", 1),
];

#[test]
fn every_corpus_blob_loads_and_round_trips() {
    let mut total = 0;
    for (name, n) in FILES {
        let blobs = blobs(name);
        assert_eq!(blobs.len(), n, "{name}: XNNPACK delegates");
        for (bytes, named) in blobs {
            total += 1;
            let l = load(&bytes, &named);
            let h = l.blob.header.expect("ExecuTorch writes the XH00 header");
            assert_eq!((h.header_length, h.flatbuffer_offset, h.constant_data_size), (30, 32, 0), "{name}");
            assert_eq!(l.blob.identifier, "XN01", "{name}");
            assert_eq!(l.blob.graph.num_externs, 2, "{name}");
            // Written again and read back: the same model; written once more: the same bytes.
            let again = xnnpack::write_blob(&l.blob);
            let reread: XnnBlob = xnnpack::parse(&again).expect("our bytes parse");
            assert_eq!(reread.graph, l.blob.graph, "{name}");
            assert_eq!(xnnpack::write_blob(&reread), again, "{name}: bytes stable");
            load(&again, &named);
        }
    }
    assert_eq!(total, 11, "eleven blob instances in seven files");
}

#[test]
fn single_partition_decodes_to_two_fully_connected_nodes_with_named_weights() {
    let (bytes, named) = blobs("xnn_single_partition").remove(0);
    let l = load(&bytes, &named);
    let g = &l.blob.graph;
    let types: Vec<NodeType> = g.nodes.iter().map(|n| n.node_type).collect();
    assert_eq!(types, [NodeType::XNNFullyConnected, NodeType::XNNFullyConnected]);
    assert_eq!(
        g.nodes[0].payload,
        Payload::FullyConnected { input1_id: 0, filter_id: 1, bias_id: 2, output_id: 3, flags: 0 }
    );
    // Fused ReLU: the table holds only output_max = +inf, output_min reads 0.0.
    let mm = g.nodes[0].output_min_max.expect("relu fused");
    assert_eq!((mm.output_min, mm.output_max), (0.0, f32::INFINITY));
    assert!(g.nodes[1].output_min_max.is_none());
    let dims: Vec<Vec<u32>> = g.values.iter().map(|v| v.tensor().shape().to_vec()).collect();
    assert_eq!(dims, [vec![2, 8], vec![16, 8], vec![16], vec![2, 16], vec![4, 16], vec![4], vec![2, 4]]);
    // Four constants from named data (sha256 keys), sized as their shapes say.
    let sizes: Vec<(usize, usize)> = l.constants.iter().map(|(v, b)| (*v, b.len())).collect();
    assert_eq!(sizes, [(1, 512), (2, 64), (4, 256), (5, 16)]);
    let e = &g.constant_data.as_ref().expect("constant_data")[1];
    assert_eq!(e.offset, u64::MAX);
    assert_eq!(e.named_key.as_deref().map(str::len), Some(64));
    assert_eq!(l.externals(xnnpack::FLAG_EXTERNAL_INPUT), [(0, 0)]);
    assert_eq!(l.externals(xnnpack::FLAG_EXTERNAL_OUTPUT), [(1, 6)]);
    assert_eq!(l.order, [0, 1]);
}

#[test]
fn map_loop_blob_is_an_add_of_its_input_with_itself_and_no_constants() {
    let (bytes, named) = blobs("xnn_lowered_in_map_loop").remove(0);
    assert_eq!(bytes.len(), 384);
    let l = load(&bytes, &named);
    let g = &l.blob.graph;
    assert_eq!(g.nodes.len(), 1);
    assert_eq!(g.nodes[0].node_type, NodeType::XNNAdd);
    assert_eq!(g.nodes[0].payload, Payload::Node2x1 { input1_id: 0, input2_id: 0, output_id: 1, flags: 0 });
    assert!(l.constants.is_empty());
    // Entry 0 is ExecuTorch's dummy: an empty but present named key.
    assert_eq!(g.constant_data.as_ref().expect("constant_data")[0].named_key.as_deref(), Some(""));
}

#[test]
fn a_named_key_needs_the_programs_named_data() {
    let (bytes, named) = blobs("xnn_single_partition").remove(0);
    let none = xnnpack::load(&bytes, None).unwrap_err();
    assert!(matches!(none, xnnpack::XnnError::NoNamedData { index: 1, idx: 1, .. }), "{none}");
    let partial: Vec<(&str, &[u8])> = named.iter().skip(1).map(|(k, v)| (k.as_str(), v.as_slice())).collect();
    let missing = xnnpack::load(&bytes, Some(&partial)).unwrap_err();
    assert!(matches!(missing, xnnpack::XnnError::NamedKeyMissing { .. }), "{missing}");
    assert_eq!(missing.et_code(), 0x20);
}
