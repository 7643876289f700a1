//! Bytes -> [`XnnBlob`]: the header rules of ExecuTorch's `XNNHeader::Parse`, the identifier,
//! the FlatBuffers verifier with explicit limits, and decoding into the owned model within a
//! memory budget proportional to the input. Semantic checks (ids, constants, nodes) are
//! `verify`'s.
//! May not touch: the program's named data (`verify` resolves constants), execution.

use super::XnnError;
use super::generated::ptecheck_xnnpack as fb;
use super::model::*;

/// Length of the `XH00` header's fields.
pub const HEADER_LENGTH: usize = 30;
/// Offset of the header magic (where a flatbuffer keeps its identifier).
pub const MAGIC_OFFSET: usize = 4;
/// The header magic.
pub const HEADER_MAGIC: &[u8; 4] = b"XH00";
/// Flatbuffer identifiers the runtime accepts.
pub const IDENTIFIERS: [&[u8; 4]; 2] = [b"XN00", b"XN01"];

type R<T> = Result<T, XnnError>;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Parses the header: `Ok(None)` when the magic is absent (the blob is a bare flatbuffer).
pub fn parse_header(blob: &[u8]) -> R<Option<XnnHeader>> {
    if blob.len() < HEADER_LENGTH {
        return Err(XnnError::TooShort { len: blob.len() });
    }
    if &blob[MAGIC_OFFSET..MAGIC_OFFSET + 4] != HEADER_MAGIC {
        return Ok(None);
    }
    let h = XnnHeader {
        header_length: u16_at(blob, 8),
        flatbuffer_offset: u32_at(blob, 10),
        flatbuffer_size: u32_at(blob, 14),
        constant_data_offset: u32_at(blob, 18),
        constant_data_size: u64_at(blob, 22),
    };
    let len = blob.len();
    if h.flatbuffer_size < 8 {
        return Err(XnnError::FlatbufferTooSmall { size: h.flatbuffer_size });
    }
    let (fo, fs) = (h.flatbuffer_offset as usize, h.flatbuffer_size as usize);
    if fo > len || fs > len - fo {
        return Err(XnnError::FlatbufferOutOfBounds { offset: h.flatbuffer_offset, size: h.flatbuffer_size, len });
    }
    let co = h.constant_data_offset as usize;
    if co > len || h.constant_data_size > (len - co) as u64 {
        return Err(XnnError::ConstantsOutOfBounds { offset: h.constant_data_offset, size: h.constant_data_size, len });
    }
    if co < fo || co - fo < fs {
        return Err(XnnError::ConstantsOverlap {
            constant_offset: h.constant_data_offset,
            fb_offset: h.flatbuffer_offset,
            fb_size: h.flatbuffer_size,
        });
    }
    Ok(Some(h))
}

/// Verifier limits for a flatbuffer of `len` bytes (ExecuTorch's defaults: depth 64, one
/// million tables; a tree expansion bounded by a multiple of the input).
fn verifier_options(len: usize) -> flatbuffers::VerifierOptions {
    flatbuffers::VerifierOptions {
        max_depth: 64,
        max_tables: 1_000_000,
        max_apparent_size: len.saturating_mul(8).saturating_add(1 << 20).min(1 << 31),
        ignore_missing_null_terminator: false,
    }
}

/// Reads a blob's structure: header, identifier, verified flatbuffer, owned graph. Never panics;
/// allocations are bounded by a multiple of `blob.len()`.
pub fn parse(blob: &[u8]) -> R<XnnBlob> {
    let header = parse_header(blob)?;
    let (fb_bytes, fb_offset, constant_region) = match &header {
        Some(h) => {
            let fo = h.flatbuffer_offset as usize;
            let co = h.constant_data_offset as usize;
            (&blob[fo..fo + h.flatbuffer_size as usize], fo, blob[co..co + h.constant_data_size as usize].to_vec())
        }
        None => (blob, 0, Vec::new()),
    };
    let ident = &fb_bytes[4..8];
    if !IDENTIFIERS.iter().any(|i| &i[..] == ident) {
        return Err(XnnError::Identifier { found: String::from_utf8_lossy(ident).into_owned(), offset: fb_offset + 4 });
    }
    let opts = verifier_options(fb_bytes.len());
    let root = fb::root_as_xnngraph_with_opts(&opts, fb_bytes).map_err(|e| XnnError::Flatbuffer(e.to_string()))?;
    let mut d =
        Decoder { used: 0, budget: blob.len().saturating_mul(48).saturating_add(1 << 20), input_len: blob.len() };
    let graph = d.graph(root)?;
    Ok(XnnBlob { header, identifier: String::from_utf8_lossy(ident).into_owned(), graph, constant_region })
}

struct Decoder {
    used: usize,
    budget: usize,
    input_len: usize,
}

impl Decoder {
    fn charge(&mut self, bytes: usize, path: &dyn Fn() -> String) -> R<()> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.budget {
            return Err(XnnError::DecodeBudgetExceeded {
                path: path(),
                budget: self.budget,
                input_len: self.input_len,
            });
        }
        Ok(())
    }

    fn u32s(&mut self, v: Option<flatbuffers::Vector<'_, u32>>, path: &dyn Fn() -> String) -> R<Option<Vec<u32>>> {
        match v {
            None => Ok(None),
            Some(v) => {
                self.charge(v.len() * 4 + 24, path)?;
                Ok(Some(v.iter().collect()))
            }
        }
    }

    fn f32s(&mut self, v: Option<flatbuffers::Vector<'_, f32>>, path: &dyn Fn() -> String) -> R<Option<Vec<f32>>> {
        match v {
            None => Ok(None),
            Some(v) => {
                self.charge(v.len() * 4 + 24, path)?;
                Ok(Some(v.iter().collect()))
            }
        }
    }

    fn graph(&mut self, g: fb::XNNGraph<'_>) -> R<XnnGraph> {
        let version = match g.version() {
            Some(s) => {
                self.charge(s.len() + 24, &|| "XNNGraph.version".into())?;
                Some(s.to_string())
            }
            None => None,
        };
        let nodes = g.xnodes().ok_or_else(|| XnnError::Missing { path: "XNNGraph.xnodes".into() })?;
        let values = g.xvalues().ok_or_else(|| XnnError::Missing { path: "XNNGraph.xvalues".into() })?;
        self.charge(
            nodes.len() * std::mem::size_of::<XNode>() + values.len() * std::mem::size_of::<XValue>(),
            &|| "XNNGraph.xnodes".into(),
        )?;
        let values = values.iter().enumerate().map(|(i, v)| self.value(i, v)).collect::<R<Vec<_>>>()?;
        let nodes = nodes.iter().enumerate().map(|(i, n)| self.node(i, n)).collect::<R<Vec<_>>>()?;
        let input_ids = self.u32s(g.input_ids(), &|| "XNNGraph.input_ids".into())?;
        let output_ids = self.u32s(g.output_ids(), &|| "XNNGraph.output_ids".into())?;
        let mem_buffer_sizes = self.u32s(g.mem_buffer_sizes(), &|| "XNNGraph.mem_buffer_sizes".into())?;
        let constant_buffer = match g.constant_buffer() {
            None => None,
            Some(v) => {
                let mut out = Vec::with_capacity(v.len().min(1 << 16));
                for (i, b) in v.iter().enumerate() {
                    let storage = b.storage().map(|s| s.bytes());
                    self.charge(storage.map_or(0, <[u8]>::len) + 32, &|| format!("XNNGraph.constant_buffer[{i}]"))?;
                    out.push(storage.map(<[u8]>::to_vec));
                }
                Some(out)
            }
        };
        let constant_data = match g.constant_data() {
            None => None,
            Some(v) => {
                let mut out = Vec::with_capacity(v.len().min(1 << 16));
                for (i, c) in v.iter().enumerate() {
                    let key = c.named_key();
                    self.charge(key.map_or(0, str::len) + 48, &|| format!("XNNGraph.constant_data[{i}]"))?;
                    out.push(ConstantEntry { offset: c.offset(), size: c.size(), named_key: key.map(str::to_string) });
                }
                Some(out)
            }
        };
        Ok(XnnGraph {
            version,
            nodes,
            values,
            num_externs: g.num_externs(),
            input_ids,
            output_ids,
            constant_buffer,
            mem_buffer_sizes,
            constant_data,
        })
    }

    fn tensor(&mut self, t: fb::XNNTensorValue<'_>, path: &dyn Fn() -> String) -> R<TensorValue> {
        Ok(TensorValue {
            datatype: t.datatype().0,
            num_dims: t.num_dims(),
            dims: self.u32s(t.dims(), path)?,
            constant_buffer_idx: t.constant_buffer_idx(),
            external_id: t.external_id(),
            flags: t.flags(),
            id_out: t.id_out(),
            dq_datatype: t.dq_datatype().0,
        })
    }

    fn value(&mut self, index: usize, v: fb::XValue<'_>) -> R<XValue> {
        let path = || format!("xvalues[{index}]");
        let missing = || XnnError::Missing { path: format!("xvalues[{index}].xvalue_union") };
        match v.xvalue_union_type() {
            fb::XValueUnion::XNNTensorValue => {
                let t = v.xvalue_union_as_xnntensor_value().ok_or_else(missing)?;
                Ok(XValue::Tensor(self.tensor(t, &path)?))
            }
            fb::XValueUnion::XNNQuantizedTensorValue => {
                let q = v.xvalue_union_as_xnnquantized_tensor_value().ok_or_else(missing)?;
                let t = q
                    .tensor_value()
                    .ok_or_else(|| XnnError::Missing { path: format!("xvalues[{index}].tensor_value") })?;
                let tensor = self.tensor(t, &path)?;
                let qmissing = || XnnError::Missing { path: format!("xvalues[{index}].quant_params") };
                let params = match q.quant_params_type() {
                    fb::XNNQuantParams::PerChannelQuant => {
                        let p = q.quant_params_as_per_channel_quant().ok_or_else(qmissing)?;
                        QuantParams::PerChannel {
                            scale: self.f32s(p.scale(), &path)?,
                            channel_dim: p.channel_dim(),
                            scale_buffer_idx: p.scale_buffer_idx(),
                            num_scales: p.num_scales(),
                        }
                    }
                    fb::XNNQuantParams::PerTensorQuant => {
                        let p = q.quant_params_as_per_tensor_quant().ok_or_else(qmissing)?;
                        QuantParams::PerTensor { scale: p.scale(), zero_point: p.zero_point() }
                    }
                    fb::XNNQuantParams::PerTokenDynamicQuant => {
                        let p = q.quant_params_as_per_token_dynamic_quant().ok_or_else(qmissing)?;
                        QuantParams::PerTokenDynamic { num_nonbatch_dims: p.num_nonbatch_dims() }
                    }
                    fb::XNNQuantParams::PerChannelGroupQuant => {
                        let p = q.quant_params_as_per_channel_group_quant().ok_or_else(qmissing)?;
                        QuantParams::PerChannelGroup {
                            scale: self.f32s(p.scale(), &path)?,
                            channel_dim: p.channel_dim(),
                            group_size: p.group_size(),
                            scale_buffer_idx: p.scale_buffer_idx(),
                            num_scales: p.num_scales(),
                        }
                    }
                    other => return Err(XnnError::QuantParamsType { index, tag: other.0 }),
                };
                Ok(XValue::Quantized { tensor, params })
            }
            other => Err(XnnError::ValueType { index, tag: other.0 }),
        }
    }

    fn node(&mut self, index: usize, n: fb::XNode<'_>) -> R<XNode> {
        let tag = n.xnode_union_type().0;
        if tag == 0 {
            return Err(XnnError::NodeTypeNone { index });
        }
        let node_type = NodeType::from_repr(tag).ok_or(XnnError::NodeType { index, tag })?;
        let missing = || XnnError::Missing { path: format!("xnodes[{index}].xnode_union ({})", node_type.name()) };
        let path = || format!("xnodes[{index}]");
        let n1 = |t: fb::_XNNNode1x1<'_>| Payload::Node1x1 {
            input_id: t.input_id(),
            output_id: t.output_id(),
            flags: t.flags(),
        };
        let n2 = |t: fb::_XNNNode2x1<'_>| Payload::Node2x1 {
            input1_id: t.input1_id(),
            input2_id: t.input2_id(),
            output_id: t.output_id(),
            flags: t.flags(),
        };
        let conv = |t: fb::_XNNNodeConv<'_>| Payload::Conv {
            params: [
                t.padding_top(),
                t.padding_right(),
                t.padding_bottom(),
                t.padding_left(),
                t.kernel_height(),
                t.kernel_width(),
                t.subsampling_height(),
                t.subsampling_width(),
                t.dilation_height(),
                t.dilation_width(),
                t.group_input_channels(),
                t.group_output_channels(),
                t.groups(),
                t.adjustment_height(),
                t.adjustment_width(),
            ],
            input1_id: t.input1_id(),
            filter_id: t.filter_id(),
            bias_id: t.bias_id(),
            output_id: t.output_id(),
            flags: t.flags(),
        };
        let pool = |t: fb::_XNNPooling2D<'_>| Payload::Pooling {
            params: [
                t.padding_top(),
                t.padding_right(),
                t.padding_bottom(),
                t.padding_left(),
                t.pooling_height(),
                t.pooling_width(),
                t.stride_height(),
                t.stride_width(),
                t.dilation_height(),
                t.dilation_width(),
            ],
            input_id: t.input_id(),
            output_id: t.output_id(),
            flags: t.flags(),
        };
        let cat = |t: fb::_XNNCat<'_>| Payload::Cat {
            axis: t.axis(),
            inputs: [t.input1_id(), t.input2_id(), t.input3_id(), t.input4_id(), t.input5_id()],
            output_id: t.output_id(),
            flags: t.flags(),
        };
        use NodeType::*;
        let payload = match node_type {
            XNNAdd => n.xnode_union_as_xnnadd().map(n2),
            XNNDiv => n.xnode_union_as_xnndiv().map(n2),
            XNNMinimum => n.xnode_union_as_xnnminimum().map(n2),
            XNNMultiply => n.xnode_union_as_xnnmultiply().map(n2),
            XNNSubtract => n.xnode_union_as_xnnsubtract().map(n2),
            XNNMaximum => n.xnode_union_as_xnnmaximum().map(n2),
            XNNPReLU => n.xnode_union_as_xnnpre_lu().map(n2),
            XNNBatchMatrixMultiply => n.xnode_union_as_xnnbatch_matrix_multiply().map(n2),
            XNNSoftmax => n.xnode_union_as_xnnsoftmax().map(n1),
            XNNSigmoid => n.xnode_union_as_xnnsigmoid().map(n1),
            XNNClamp => n.xnode_union_as_xnnclamp().map(n1),
            XNNFloor => n.xnode_union_as_xnnfloor().map(n1),
            XNNConvert => n.xnode_union_as_xnnconvert().map(n1),
            XNNGlobalAvgPooling2d => n.xnode_union_as_xnnglobal_avg_pooling_2d().map(n1),
            XNNSquareRoot => n.xnode_union_as_xnnsquare_root().map(n1),
            XNNCeiling => n.xnode_union_as_xnnceiling().map(n1),
            XNNHardswish => n.xnode_union_as_xnnhardswish().map(n1),
            XNNNegate => n.xnode_union_as_xnnnegate().map(n1),
            XNNSquare => n.xnode_union_as_xnnsquare().map(n1),
            XNNAbs => n.xnode_union_as_xnnabs().map(n1),
            XNNReciprocalSquareRoot => n.xnode_union_as_xnnreciprocal_square_root().map(n1),
            XNNLog => n.xnode_union_as_xnnlog().map(n1),
            XNNGelu => n.xnode_union_as_xnngelu().map(n1),
            XNNTanh => n.xnode_union_as_xnntanh().map(n1),
            XNNExp => n.xnode_union_as_xnnexp().map(n1),
            XNNSin => n.xnode_union_as_xnnsin().map(n1),
            XNNCopy => n.xnode_union_as_xnncopy().map(n1),
            XNNCos => n.xnode_union_as_xnncos().map(n1),
            XNNConv2d => n.xnode_union_as_xnnconv_2d().map(conv),
            XNNDepthwiseConv2d => n.xnode_union_as_xnndepthwise_conv_2d().map(conv),
            XNNConvTranspose2d => n.xnode_union_as_xnnconv_transpose_2d().map(conv),
            XNNAvgPooling2d => n.xnode_union_as_xnnavg_pooling_2d().map(pool),
            XNNMaxPooling2d => n.xnode_union_as_xnnmax_pooling_2d().map(pool),
            XNNConcatenate2 => n.xnode_union_as_xnnconcatenate_2().map(cat),
            XNNConcatenate3 => n.xnode_union_as_xnnconcatenate_3().map(cat),
            XNNConcatenate4 => n.xnode_union_as_xnnconcatenate_4().map(cat),
            XNNConcatenate5 => n.xnode_union_as_xnnconcatenate_5().map(cat),
            XNNFullyConnected => n.xnode_union_as_xnnfully_connected().map(|t| Payload::FullyConnected {
                input1_id: t.input1_id(),
                filter_id: t.filter_id(),
                bias_id: t.bias_id(),
                output_id: t.output_id(),
                flags: t.flags(),
            }),
            XNNStaticTranspose => match n.xnode_union_as_xnnstatic_transpose() {
                Some(t) => Some(Payload::StaticTranspose {
                    num_dims: t.num_dims(),
                    perm: self.u32s(t.perm(), &path)?,
                    input_id: t.input_id(),
                    output_id: t.output_id(),
                    flags: t.flags(),
                }),
                None => None,
            },
            XNNStaticReshape => match n.xnode_union_as_xnnstatic_reshape() {
                Some(t) => Some(Payload::StaticReshape {
                    num_dims: t.num_dims(),
                    new_shape: self.u32s(t.new_shape(), &path)?,
                    input_id: t.input_id(),
                    output_id: t.output_id(),
                    flags: t.flags(),
                }),
                None => None,
            },
            XNNStaticSlice => match n.xnode_union_as_xnnstatic_slice() {
                Some(t) => Some(Payload::StaticSlice {
                    num_dims: t.num_dims(),
                    offsets: self.u32s(t.offsets(), &path)?,
                    sizes: self.u32s(t.sizes(), &path)?,
                    input_id: t.input_id(),
                    output_id: t.output_id(),
                    flags: t.flags(),
                }),
                None => None,
            },
            XNNStaticConstantPad => match n.xnode_union_as_xnnstatic_constant_pad() {
                Some(t) => Some(Payload::ConstantPad {
                    pre_paddings: self.u32s(t.pre_paddings(), &path)?,
                    post_paddings: self.u32s(t.post_paddings(), &path)?,
                    padding_value: t.padding_value(),
                    input_id: t.input_id(),
                    output_id: t.output_id(),
                    flags: t.flags(),
                }),
                None => None,
            },
            XNNStaticResizeBilinear2D => {
                n.xnode_union_as_xnnstatic_resize_bilinear_2_d().map(|t| Payload::ResizeBilinear {
                    new_height: t.new_height(),
                    new_width: t.new_width(),
                    input_id: t.input_id(),
                    output_id: t.output_id(),
                    flags: t.flags(),
                })
            }
            XNNELU => n.xnode_union_as_xnnelu().map(|t| Payload::Elu {
                alpha: t.alpha(),
                input_id: t.input_id(),
                output_id: t.output_id(),
                flags: t.flags(),
            }),
            XNNLeakyReLU => n.xnode_union_as_xnnleaky_re_lu().map(|t| Payload::LeakyRelu {
                negative_slope: t.negative_slope(),
                input_id: t.input_id(),
                output_id: t.output_id(),
                flags: t.flags(),
            }),
            XNNArgMaxPooling2d => n.xnode_union_as_xnnarg_max_pooling_2d().map(|t| Payload::ArgMaxPooling {
                params: [
                    t.padding_top(),
                    t.padding_right(),
                    t.padding_bottom(),
                    t.padding_left(),
                    t.pooling_height(),
                    t.pooling_width(),
                ],
                input_id: t.input_id(),
                output_value_id: t.output_value_id(),
                output_index_id: t.output_index_id(),
                flags: t.flags(),
            }),
            XNNScaledDotProductAttention => n.xnode_union_as_xnnscaled_dot_product_attention().map(|t| Payload::Sdpa {
                query_id: t.query_id(),
                key_id: t.key_id(),
                value_id: t.value_id(),
                scale_id: t.scale_id(),
                mask_id: t.mask_id(),
                output_id: t.output_id(),
                flags: t.flags(),
            }),
        }
        .ok_or_else(missing)?;
        Ok(XNode {
            node_type,
            payload,
            debug_handle: n.debug_handle(),
            output_min_max: n
                .output_min_max()
                .map(|m| MinMax { output_min: m.output_min(), output_max: m.output_max() }),
        })
    }
}
