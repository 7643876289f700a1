//! [`XnnGraph`] -> blob bytes, laid out as ExecuTorch's Python serializer does: the graph
//! built by the flatc layout (fields by size, last first; defaults omitted), file identifier
//! `XN01`, and — with a header — `header(30) ‖ pad to 32 ‖ flatbuffer ‖ pad to 16 ‖ constants`.
//! Deterministic: the same graph and constants give the same bytes.
//! May not touch: the `.pte` program (it borrows only `format`'s table writer), execution.

use super::model::*;
use super::read::{HEADER_LENGTH, HEADER_MAGIC};
use crate::format::write::{Field, Off, TableWriter};
use crate::format::{Layout, WriteOptions};

/// The identifier the writer puts in the flatbuffer (ExecuTorch's writer schema's).
pub const WRITE_IDENTIFIER: &[u8; 4] = b"XN01";

/// Offset of the flatbuffer after a header.
pub const FLATBUFFER_OFFSET: usize = 32;

/// Alignment of the constant region and of each constant the lowering places in it.
pub const CONSTANT_ALIGNMENT: usize = 16;

/// The vtable offset of schema slot `slot`.
fn vt(slot: u16) -> u16 {
    4 + 2 * slot
}

fn align_up(n: usize, a: usize) -> usize {
    n.div_ceil(a) * a
}

/// The flatbuffer of `graph` alone (identifier `XN01`).
pub fn write_flatbuffer(graph: &XnnGraph) -> Vec<u8> {
    let mut w = TableWriter::new(WriteOptions { layout: Layout::Flatc, ..WriteOptions::default() });
    let root = graph_table(&mut w, graph);
    w.finish(root, WRITE_IDENTIFIER);
    w.b.finished_data().to_vec()
}

/// A blob with the `XH00` header: the graph, then `constants` as its constant region.
pub fn write(graph: &XnnGraph, constants: &[u8]) -> Vec<u8> {
    let fb = write_flatbuffer(graph);
    let cd_offset = FLATBUFFER_OFFSET + align_up(fb.len(), CONSTANT_ALIGNMENT);
    let mut out = Vec::with_capacity(cd_offset + constants.len());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(HEADER_MAGIC);
    out.extend_from_slice(&(HEADER_LENGTH as u16).to_le_bytes());
    out.extend_from_slice(&(FLATBUFFER_OFFSET as u32).to_le_bytes());
    out.extend_from_slice(&(fb.len() as u32).to_le_bytes());
    out.extend_from_slice(&(cd_offset as u32).to_le_bytes());
    out.extend_from_slice(&(constants.len() as u64).to_le_bytes());
    out.resize(FLATBUFFER_OFFSET, 0);
    out.extend_from_slice(&fb);
    out.resize(cd_offset, 0);
    out.extend_from_slice(constants);
    out
}

/// A blob of [`XnnBlob`]'s form: with a header when it has one, bare otherwise.
pub fn write_blob(blob: &XnnBlob) -> Vec<u8> {
    match blob.header {
        Some(_) => write(&blob.graph, &blob.constant_region),
        None => write_flatbuffer(&blob.graph),
    }
}

fn graph_table(w: &mut TableWriter, g: &XnnGraph) -> Off {
    let version = w.string(&g.version);
    let nodes: Vec<Off> = g.nodes.iter().map(|n| node(w, n)).collect();
    let nodes = w.offsets(&nodes);
    let values: Vec<Off> = g.values.iter().map(|v| value(w, v)).collect();
    let values = w.offsets(&values);
    let input_ids = w.opt_scalars(&g.input_ids);
    let output_ids = w.opt_scalars(&g.output_ids);
    let constant_buffer = w.list(&g.constant_buffer, |w, b| {
        let storage = b.as_ref().map(|s| w.bytes(s, 16));
        w.table(&[storage.map(|s| Field::Off(vt(0), s))])
    });
    let mem_buffer_sizes = w.opt_scalars(&g.mem_buffer_sizes);
    let constant_data = w.list(&g.constant_data, |w, c| {
        let key = w.string(&c.named_key);
        w.table(&[
            Some(Field::U64(vt(0), c.offset)),
            Some(Field::U64(vt(1), c.size)),
            key.map(|k| Field::Off(vt(2), k)),
        ])
    });
    w.table(&[
        version.map(|o| Field::Off(vt(0), o)),
        Some(Field::Off(vt(1), nodes)),
        Some(Field::Off(vt(2), values)),
        Some(Field::U32(vt(3), g.num_externs)),
        input_ids.map(|o| Field::Off(vt(4), o)),
        output_ids.map(|o| Field::Off(vt(5), o)),
        constant_buffer.map(|o| Field::Off(vt(6), o)),
        mem_buffer_sizes.map(|o| Field::Off(vt(7), o)),
        constant_data.map(|o| Field::Off(vt(8), o)),
    ])
}

fn tensor(w: &mut TableWriter, t: &TensorValue) -> Off {
    let dims = w.opt_scalars(&t.dims);
    w.table(&[
        Some(Field::I16(vt(0), t.datatype)),
        Some(Field::U32(vt(1), t.num_dims)),
        dims.map(|o| Field::Off(vt(2), o)),
        Some(Field::U32(vt(3), t.constant_buffer_idx)),
        Some(Field::U32(vt(4), t.external_id)),
        Some(Field::U32(vt(5), t.flags)),
        Some(Field::U32(vt(6), t.id_out)),
        Some(Field::I16(vt(7), t.dq_datatype)),
    ])
}

fn value(w: &mut TableWriter, v: &XValue) -> Off {
    let (tag, payload) = match v {
        XValue::Tensor(t) => (1u8, tensor(w, t)),
        XValue::Quantized { tensor: t, params } => {
            let t = tensor(w, t);
            let (ptag, p) = quant(w, params);
            (2, w.table(&[Some(Field::Off(vt(0), t)), Some(Field::U8(vt(1), ptag)), Some(Field::Off(vt(2), p))]))
        }
    };
    w.table(&[Some(Field::U8(vt(0), tag)), Some(Field::Off(vt(1), payload))])
}

fn quant(w: &mut TableWriter, p: &QuantParams) -> (u8, Off) {
    match p {
        QuantParams::PerChannel { scale, channel_dim, scale_buffer_idx, num_scales } => {
            let s = w.opt_scalars(scale);
            let t = w.table(&[
                s.map(|o| Field::Off(vt(0), o)),
                Some(Field::I32(vt(1), *channel_dim)),
                Some(Field::U32(vt(2), *scale_buffer_idx)),
                Some(Field::U32(vt(3), *num_scales)),
            ]);
            (1, t)
        }
        QuantParams::PerTensor { scale, zero_point } => {
            (2, w.table(&[Some(Field::F32(vt(0), *scale)), Some(Field::I32(vt(1), *zero_point))]))
        }
        QuantParams::PerTokenDynamic { num_nonbatch_dims } => {
            (3, w.table(&[Some(Field::I32(vt(0), *num_nonbatch_dims))]))
        }
        QuantParams::PerChannelGroup { scale, channel_dim, group_size, scale_buffer_idx, num_scales } => {
            let s = w.opt_scalars(scale);
            // Slot 3 (scale_bf16) is deprecated and never written.
            let t = w.table(&[
                s.map(|o| Field::Off(vt(0), o)),
                Some(Field::I32(vt(1), *channel_dim)),
                Some(Field::I32(vt(2), *group_size)),
                Some(Field::U32(vt(4), *scale_buffer_idx)),
                Some(Field::U32(vt(5), *num_scales)),
            ]);
            (4, t)
        }
    }
}

/// Fields of a table made of u32 slots `0..` in order.
fn u32_table(w: &mut TableWriter, first_slot: u16, values: &[u32], mut extra: Vec<Option<Field>>) -> Off {
    let mut fields: Vec<Option<Field>> = std::mem::take(&mut extra);
    fields.extend(values.iter().enumerate().map(|(i, v)| Some(Field::U32(vt(first_slot + i as u16), *v))));
    w.table(&fields)
}

fn payload(w: &mut TableWriter, p: &Payload) -> Off {
    match p {
        Payload::Node1x1 { input_id, output_id, flags } => u32_table(w, 0, &[*input_id, *output_id, *flags], vec![]),
        Payload::Node2x1 { input1_id, input2_id, output_id, flags } => {
            u32_table(w, 0, &[*input1_id, *input2_id, *output_id, *flags], vec![])
        }
        Payload::FullyConnected { input1_id, filter_id, bias_id, output_id, flags } => {
            u32_table(w, 0, &[*input1_id, *filter_id, *bias_id, *output_id, *flags], vec![])
        }
        Payload::StaticTranspose { num_dims, perm, input_id, output_id, flags }
        | Payload::StaticReshape { num_dims, new_shape: perm, input_id, output_id, flags } => {
            let list = w.opt_scalars(perm);
            let extra = vec![Some(Field::U32(vt(0), *num_dims)), list.map(|o| Field::Off(vt(1), o))];
            u32_table(w, 2, &[*input_id, *output_id, *flags], extra)
        }
        Payload::StaticSlice { num_dims, offsets, sizes, input_id, output_id, flags } => {
            let o = w.opt_scalars(offsets);
            let s = w.opt_scalars(sizes);
            let extra = vec![
                Some(Field::U32(vt(0), *num_dims)),
                o.map(|o| Field::Off(vt(1), o)),
                s.map(|s| Field::Off(vt(2), s)),
            ];
            u32_table(w, 3, &[*input_id, *output_id, *flags], extra)
        }
        Payload::ConstantPad { pre_paddings, post_paddings, padding_value, input_id, output_id, flags } => {
            let a = w.opt_scalars(pre_paddings);
            let b = w.opt_scalars(post_paddings);
            let extra = vec![
                a.map(|o| Field::Off(vt(0), o)),
                b.map(|o| Field::Off(vt(1), o)),
                Some(Field::F32(vt(2), *padding_value)),
            ];
            u32_table(w, 3, &[*input_id, *output_id, *flags], extra)
        }
        Payload::ResizeBilinear { new_height, new_width, input_id, output_id, flags } => {
            u32_table(w, 0, &[*new_height, *new_width, *input_id, *output_id, *flags], vec![])
        }
        Payload::Cat { axis, inputs, output_id, flags } => {
            let [i1, i2, i3, i4, i5] = *inputs;
            u32_table(w, 0, &[*axis, i1, i2, i3, i4, *output_id, *flags, i5], vec![])
        }
        Payload::Elu { alpha: f, input_id, output_id, flags }
        | Payload::LeakyRelu { negative_slope: f, input_id, output_id, flags } => {
            u32_table(w, 1, &[*input_id, *output_id, *flags], vec![Some(Field::F32(vt(0), *f))])
        }
        Payload::Conv { params, input1_id, filter_id, bias_id, output_id, flags } => {
            let mut v = params.to_vec();
            v.extend([*input1_id, *filter_id, *bias_id, *output_id, *flags]);
            u32_table(w, 0, &v, vec![])
        }
        Payload::Pooling { params, input_id, output_id, flags } => {
            let mut v = params.to_vec();
            v.extend([*input_id, *output_id, *flags]);
            u32_table(w, 0, &v, vec![])
        }
        Payload::ArgMaxPooling { params, input_id, output_value_id, output_index_id, flags } => {
            let mut v = params.to_vec();
            v.extend([*input_id, *output_value_id, *output_index_id, *flags]);
            u32_table(w, 0, &v, vec![])
        }
        Payload::Sdpa { query_id, key_id, value_id, scale_id, mask_id, output_id, flags } => {
            u32_table(w, 0, &[*query_id, *key_id, *value_id, *scale_id, *mask_id, *output_id, *flags], vec![])
        }
    }
}

fn node(w: &mut TableWriter, n: &XNode) -> Off {
    let p = payload(w, &n.payload);
    let mm = n
        .output_min_max
        .map(|m| w.table(&[Some(Field::F32(vt(0), m.output_min)), Some(Field::F32(vt(1), m.output_max))]));
    w.table(&[
        Some(Field::U8(vt(0), n.node_type.tag())),
        Some(Field::Off(vt(1), p)),
        Some(Field::U32(vt(2), n.debug_handle)),
        mm.map(|o| Field::Off(vt(3), o)),
    ])
}
