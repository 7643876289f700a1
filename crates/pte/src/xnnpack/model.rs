//! The owned model of an XNNPACK delegate blob: one plain type per schema table, `Option` where
//! the wire may leave a field out, raw integers where a value outside the enum must survive a
//! round trip. Node kinds are declared once, in [`NodeType`], with the payload table each uses.
//! May not touch: bytes, the generated accessors, execution (the interpreter is ptecheck's).

use serde::Serialize;

/// The id of the backend whose processed blobs have this format (`BackendDelegate.id`).
pub const BACKEND_ID: &str = "XnnpackBackend";

/// `external_id` / `bias_id` value meaning "none" (XNNPACK's `XNN_INVALID_VALUE_ID`).
pub const INVALID_ID: u32 = u32::MAX;
/// Value flag: an external input.
pub const FLAG_EXTERNAL_INPUT: u32 = 1;
/// Value flag: an external output.
pub const FLAG_EXTERNAL_OUTPUT: u32 = 2;
/// Fully-connected flag: the filter is `[input_channels, output_channels]`.
pub const FLAG_TRANSPOSE_WEIGHTS: u32 = 1;
/// Largest tensor rank XNNPACK accepts.
pub const MAX_DIMS: usize = 6;
/// Largest `num_externs` ExecuTorch's runtime accepts.
pub const MAX_EXTERNS: u32 = 4096;

/// `XNNDatatype` values (the wire keeps the raw `i16`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, strum::FromRepr, strum::IntoStaticStr)]
#[repr(i16)]
#[allow(missing_docs)]
pub enum Datatype {
    Invalid = 0,
    Fp32 = 1,
    Fp16 = 2,
    Qint8 = 3,
    Quint8 = 4,
    Qint32 = 5,
    Qcint8 = 6,
    Qcint32 = 7,
    Qcint4 = 8,
    Qdint8 = 9,
    Qbint4 = 10,
    Qpint8 = 11,
    Int32 = 12,
    Pfp32 = 13,
    Bf16 = 14,
}

impl Datatype {
    /// Bytes per element, when whole (`None` for 4-bit and packed types).
    pub fn element_size(self) -> Option<usize> {
        use Datatype::*;
        match self {
            Fp32 | Qint32 | Qcint32 | Int32 => Some(4),
            Fp16 | Bf16 => Some(2),
            Qint8 | Quint8 | Qcint8 | Qdint8 => Some(1),
            Invalid | Qcint4 | Qbint4 | Qpint8 | Pfp32 => None,
        }
    }
}

/// A blob: optional `XH00` header, the graph, and the header's constant region.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct XnnBlob {
    /// The header, when the blob has one (else the whole blob is the flatbuffer).
    pub header: Option<XnnHeader>,
    /// The flatbuffer's file identifier (`XN00` or `XN01`).
    pub identifier: String,
    /// The graph.
    pub graph: XnnGraph,
    /// Bytes of the constant region (empty without a header).
    #[serde(skip)]
    pub constant_region: Vec<u8>,
}

/// The 30-byte `XH00` header's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct XnnHeader {
    /// Header length field (bytes 8..10; ExecuTorch's runtime ignores it).
    pub header_length: u16,
    /// Offset of the flatbuffer in the blob.
    pub flatbuffer_offset: u32,
    /// Size of the flatbuffer.
    pub flatbuffer_size: u32,
    /// Offset of the constant region.
    pub constant_data_offset: u32,
    /// Size of the constant region.
    pub constant_data_size: u64,
}

/// `XNNGraph`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct XnnGraph {
    /// Schema version string (not read by the runtime).
    pub version: Option<String>,
    /// Nodes, in stored order.
    pub nodes: Vec<XNode>,
    /// Values, in stored order.
    pub values: Vec<XValue>,
    /// External value slots (`0..num_externs`).
    pub num_externs: u32,
    /// Graph-level input `id_out`s (informational).
    pub input_ids: Option<Vec<u32>>,
    /// Graph-level output `id_out`s (informational).
    pub output_ids: Option<Vec<u32>>,
    /// Deprecated in-flatbuffer constants (read only for blobs without a header).
    pub constant_buffer: Option<Vec<Option<Vec<u8>>>>,
    /// Deprecated.
    pub mem_buffer_sizes: Option<Vec<u32>>,
    /// Where each constant lives (blobs with a header).
    pub constant_data: Option<Vec<ConstantEntry>>,
}

/// `ConstantDataOffset`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ConstantEntry {
    /// Offset in the constant region.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
    /// Key into the program's named data; presence (even empty) selects the named path.
    pub named_key: Option<String>,
}

/// `XValue`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum XValue {
    /// `XNNTensorValue`.
    Tensor(TensorValue),
    /// `XNNQuantizedTensorValue`.
    Quantized {
        /// The base tensor value.
        tensor: TensorValue,
        /// Its quantisation parameters.
        params: QuantParams,
    },
}

impl XValue {
    /// The tensor part.
    pub fn tensor(&self) -> &TensorValue {
        match self {
            XValue::Tensor(t) | XValue::Quantized { tensor: t, .. } => t,
        }
    }
}

/// `XNNTensorValue`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TensorValue {
    /// Raw `XNNDatatype`.
    pub datatype: i16,
    /// The rank: `dims.len()` (ExecuTorch passes it with `dims` to XNNPACK; `verify` refuses
    /// any other value).
    pub num_dims: u32,
    /// Shape (an upper bound for external inputs); `None` = rank 0.
    pub dims: Option<Vec<u32>>,
    /// 1-based index into the constant table; 0 = not a constant.
    pub constant_buffer_idx: u32,
    /// External slot, or [`INVALID_ID`].
    pub external_id: u32,
    /// [`FLAG_EXTERNAL_INPUT`] | [`FLAG_EXTERNAL_OUTPUT`].
    pub flags: u32,
    /// The id nodes refer to this value by.
    pub id_out: u32,
    /// Raw `XNNDatatype` of a dynamically quantised input (0 = none).
    pub dq_datatype: i16,
}

impl TensorValue {
    /// An fp32 value `id_out` of shape `dims`: constant `constant` (0 = none), external slot
    /// `external_id` ([`INVALID_ID`] = none) with `flags`.
    pub fn fp32(id_out: u32, dims: &[u32], constant: u32, external_id: u32, flags: u32) -> Self {
        TensorValue {
            datatype: Datatype::Fp32 as i16,
            num_dims: dims.len() as u32,
            dims: Some(dims.to_vec()),
            constant_buffer_idx: constant,
            external_id,
            flags,
            id_out,
            dq_datatype: 0,
        }
    }

    /// The datatype, when a known one.
    pub fn datatype(&self) -> Option<Datatype> {
        Datatype::from_repr(self.datatype)
    }
    /// The shape (empty = rank 0).
    pub fn shape(&self) -> &[u32] {
        self.dims.as_deref().unwrap_or(&[])
    }
}

/// A float as JSON keeps every value: non-finite ones are the strings `nan`, `inf`, `-inf`
/// (serde_json would write `null` for all three, so `[0, +inf]` and `[0, nan]` looked alike).
fn float_json<S: serde::Serializer>(v: &f32, s: S) -> Result<S::Ok, S::Error> {
    match *v {
        v if v.is_finite() => s.serialize_f32(v),
        v if v.is_nan() => s.serialize_str("nan"),
        v if v > 0.0 => s.serialize_str("inf"),
        _ => s.serialize_str("-inf"),
    }
}

/// [`float_json`] for an optional list.
fn floats_json<S: serde::Serializer>(v: &Option<Vec<f32>>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    match v {
        None => s.serialize_none(),
        Some(v) => {
            let mut seq = s.serialize_seq(Some(v.len()))?;
            for x in v {
                seq.serialize_element(&Finite(*x))?;
            }
            seq.end()
        }
    }
}

/// One element of [`floats_json`].
struct Finite(f32);

impl Serialize for Finite {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        float_json(&self.0, s)
    }
}

/// `XNNQuantParams`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum QuantParams {
    /// `PerChannelQuant`.
    PerChannel {
        #[serde(serialize_with = "floats_json")]
        scale: Option<Vec<f32>>,
        channel_dim: i32,
        scale_buffer_idx: u32,
        num_scales: u32,
    },
    /// `PerTensorQuant`.
    PerTensor {
        #[serde(serialize_with = "float_json")]
        scale: f32,
        zero_point: i32,
    },
    /// `PerTokenDynamicQuant`.
    PerTokenDynamic { num_nonbatch_dims: i32 },
    /// `PerChannelGroupQuant`.
    PerChannelGroup {
        #[serde(serialize_with = "floats_json")]
        scale: Option<Vec<f32>>,
        channel_dim: i32,
        group_size: i32,
        scale_buffer_idx: u32,
        num_scales: u32,
    },
}

/// `OutputMinMax`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct MinMax {
    /// Lower bound (absent on the wire = 0.0).
    #[serde(serialize_with = "float_json")]
    pub output_min: f32,
    /// Upper bound (absent on the wire = 0.0).
    #[serde(serialize_with = "float_json")]
    pub output_max: f32,
}

/// `XNode`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct XNode {
    /// The union member: what the node computes.
    pub node_type: NodeType,
    /// The payload table's fields.
    pub payload: Payload,
    /// Link back to the exported graph.
    pub debug_handle: u32,
    /// Fused output clamp.
    pub output_min_max: Option<MinMax>,
}

/// The payload tables of `XNodeUnion` members (several members share one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadKind {
    /// `_XNNNode1x1`.
    Node1x1,
    /// `_XNNNode2x1`.
    Node2x1,
    /// `XNNFullyConnected`.
    FullyConnected,
    /// `XNNStaticTranspose`.
    StaticTranspose,
    /// `XNNStaticReshape`.
    StaticReshape,
    /// `XNNStaticSlice`.
    StaticSlice,
    /// `XNNStaticConstantPad`.
    ConstantPad,
    /// `XNNStaticResizeBilinear2D`.
    ResizeBilinear,
    /// `_XNNCat`.
    Cat,
    /// `XNNELU`.
    Elu,
    /// `XNNLeakyReLU`.
    LeakyRelu,
    /// `_XNNNodeConv`.
    Conv,
    /// `_XNNPooling2D`.
    Pooling,
    /// `XNNArgMaxPooling2d`.
    ArgMaxPooling,
    /// `XNNScaledDotProductAttention`.
    Sdpa,
}

macro_rules! node_types {
    ($($name:ident = $tag:literal : $kind:ident),* $(,)?) => {
        /// An `XNodeUnion` member; the discriminant is the union tag.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, strum::FromRepr, strum::IntoStaticStr, strum::EnumIter)]
        #[repr(u8)]
        #[allow(missing_docs)]
        pub enum NodeType { $($name = $tag),* }

        impl NodeType {
            /// The payload table this member uses.
            pub fn payload_kind(self) -> PayloadKind {
                match self { $(NodeType::$name => PayloadKind::$kind),* }
            }
        }
    };
}

node_types! {
    XNNAdd = 1: Node2x1,
    XNNFullyConnected = 2: FullyConnected,
    XNNSoftmax = 3: Node1x1,
    XNNSigmoid = 4: Node1x1,
    XNNStaticTranspose = 5: StaticTranspose,
    XNNClamp = 6: Node1x1,
    XNNConv2d = 7: Conv,
    XNNDiv = 8: Node2x1,
    XNNStaticResizeBilinear2D = 9: ResizeBilinear,
    XNNStaticConstantPad = 10: ConstantPad,
    XNNAvgPooling2d = 11: Pooling,
    XNNMinimum = 12: Node2x1,
    XNNDepthwiseConv2d = 13: Conv,
    XNNMaxPooling2d = 14: Pooling,
    XNNMultiply = 15: Node2x1,
    XNNSubtract = 16: Node2x1,
    XNNFloor = 17: Node1x1,
    XNNConvert = 18: Node1x1,
    XNNGlobalAvgPooling2d = 19: Node1x1,
    XNNStaticReshape = 20: StaticReshape,
    XNNArgMaxPooling2d = 21: ArgMaxPooling,
    XNNSquareRoot = 22: Node1x1,
    XNNCeiling = 23: Node1x1,
    XNNHardswish = 24: Node1x1,
    XNNLeakyReLU = 25: LeakyRelu,
    XNNMaximum = 26: Node2x1,
    XNNNegate = 27: Node1x1,
    XNNSquare = 28: Node1x1,
    XNNELU = 29: Elu,
    XNNAbs = 30: Node1x1,
    XNNPReLU = 31: Node2x1,
    XNNConcatenate2 = 32: Cat,
    XNNConcatenate3 = 33: Cat,
    XNNConcatenate4 = 34: Cat,
    XNNStaticSlice = 35: StaticSlice,
    XNNScaledDotProductAttention = 36: Sdpa,
    XNNBatchMatrixMultiply = 37: Node2x1,
    XNNConcatenate5 = 38: Cat,
    XNNConvTranspose2d = 39: Conv,
    XNNReciprocalSquareRoot = 40: Node1x1,
    XNNLog = 41: Node1x1,
    XNNGelu = 42: Node1x1,
    XNNTanh = 43: Node1x1,
    XNNExp = 44: Node1x1,
    XNNSin = 45: Node1x1,
    XNNCopy = 46: Node1x1,
    XNNCos = 47: Node1x1,
}

impl NodeType {
    /// The union tag.
    pub fn tag(self) -> u8 {
        self as u8
    }
    /// The member name (`XNNAdd`, ...).
    pub fn name(self) -> &'static str {
        self.into()
    }
    /// Whether ExecuTorch's runtime honours `output_min_max` on this node.
    pub fn honours_min_max(self) -> bool {
        use NodeType::*;
        matches!(
            self,
            XNNFullyConnected
                | XNNConv2d
                | XNNDepthwiseConv2d
                | XNNConvTranspose2d
                | XNNAvgPooling2d
                | XNNMaxPooling2d
                | XNNGlobalAvgPooling2d
                | XNNClamp
                | XNNAdd
                | XNNSubtract
                | XNNMultiply
                | XNNDiv
        )
    }
    /// Whether XNNPACK validates `output_min_max` (NaN or min > max rejected) on this node.
    pub fn validates_min_max(self) -> bool {
        use NodeType::*;
        matches!(
            self,
            XNNFullyConnected
                | XNNConv2d
                | XNNDepthwiseConv2d
                | XNNConvTranspose2d
                | XNNAvgPooling2d
                | XNNMaxPooling2d
                | XNNGlobalAvgPooling2d
        )
    }
}

/// A node's payload table, field by field in slot order.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "table", rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum Payload {
    /// `_XNNNode1x1`.
    Node1x1 { input_id: u32, output_id: u32, flags: u32 },
    /// `_XNNNode2x1`.
    Node2x1 { input1_id: u32, input2_id: u32, output_id: u32, flags: u32 },
    /// `XNNFullyConnected`.
    FullyConnected { input1_id: u32, filter_id: u32, bias_id: u32, output_id: u32, flags: u32 },
    /// `XNNStaticTranspose`.
    StaticTranspose { num_dims: u32, perm: Option<Vec<u32>>, input_id: u32, output_id: u32, flags: u32 },
    /// `XNNStaticReshape`.
    StaticReshape { num_dims: u32, new_shape: Option<Vec<u32>>, input_id: u32, output_id: u32, flags: u32 },
    /// `XNNStaticSlice`.
    StaticSlice {
        num_dims: u32,
        offsets: Option<Vec<u32>>,
        sizes: Option<Vec<u32>>,
        input_id: u32,
        output_id: u32,
        flags: u32,
    },
    /// `XNNStaticConstantPad`.
    ConstantPad {
        pre_paddings: Option<Vec<u32>>,
        post_paddings: Option<Vec<u32>>,
        #[serde(serialize_with = "float_json")]
        padding_value: f32,
        input_id: u32,
        output_id: u32,
        flags: u32,
    },
    /// `XNNStaticResizeBilinear2D`.
    ResizeBilinear { new_height: u32, new_width: u32, input_id: u32, output_id: u32, flags: u32 },
    /// `_XNNCat` (inputs 1..5 in order; unused ones 0).
    Cat { axis: u32, inputs: [u32; 5], output_id: u32, flags: u32 },
    /// `XNNELU`.
    Elu {
        #[serde(serialize_with = "float_json")]
        alpha: f32,
        input_id: u32,
        output_id: u32,
        flags: u32,
    },
    /// `XNNLeakyReLU`.
    LeakyRelu {
        #[serde(serialize_with = "float_json")]
        negative_slope: f32,
        input_id: u32,
        output_id: u32,
        flags: u32,
    },
    /// `_XNNNodeConv`: `params` = padding top/right/bottom/left, kernel h/w, subsampling h/w,
    /// dilation h/w, group input/output channels, groups, adjustment h/w.
    Conv { params: [u32; 15], input1_id: u32, filter_id: u32, bias_id: u32, output_id: u32, flags: u32 },
    /// `_XNNPooling2D`: `params` = padding top/right/bottom/left, pooling h/w, stride h/w,
    /// dilation h/w.
    Pooling { params: [u32; 10], input_id: u32, output_id: u32, flags: u32 },
    /// `XNNArgMaxPooling2d`: `params` = padding top/right/bottom/left, pooling h/w.
    ArgMaxPooling { params: [u32; 6], input_id: u32, output_value_id: u32, output_index_id: u32, flags: u32 },
    /// `XNNScaledDotProductAttention`.
    Sdpa { query_id: u32, key_id: u32, value_id: u32, scale_id: u32, mask_id: u32, output_id: u32, flags: u32 },
}

impl Payload {
    /// The table kind.
    pub fn kind(&self) -> PayloadKind {
        match self {
            Payload::Node1x1 { .. } => PayloadKind::Node1x1,
            Payload::Node2x1 { .. } => PayloadKind::Node2x1,
            Payload::FullyConnected { .. } => PayloadKind::FullyConnected,
            Payload::StaticTranspose { .. } => PayloadKind::StaticTranspose,
            Payload::StaticReshape { .. } => PayloadKind::StaticReshape,
            Payload::StaticSlice { .. } => PayloadKind::StaticSlice,
            Payload::ConstantPad { .. } => PayloadKind::ConstantPad,
            Payload::ResizeBilinear { .. } => PayloadKind::ResizeBilinear,
            Payload::Cat { .. } => PayloadKind::Cat,
            Payload::Elu { .. } => PayloadKind::Elu,
            Payload::LeakyRelu { .. } => PayloadKind::LeakyRelu,
            Payload::Conv { .. } => PayloadKind::Conv,
            Payload::Pooling { .. } => PayloadKind::Pooling,
            Payload::ArgMaxPooling { .. } => PayloadKind::ArgMaxPooling,
            Payload::Sdpa { .. } => PayloadKind::Sdpa,
        }
    }

    /// Value ids the node reads, with their field names (`bias_id` = [`INVALID_ID`] left out).
    pub fn inputs(&self, node_type: NodeType) -> Vec<(&'static str, u32)> {
        match *self {
            Payload::Node1x1 { input_id, .. }
            | Payload::StaticTranspose { input_id, .. }
            | Payload::StaticReshape { input_id, .. }
            | Payload::StaticSlice { input_id, .. }
            | Payload::ConstantPad { input_id, .. }
            | Payload::ResizeBilinear { input_id, .. }
            | Payload::Elu { input_id, .. }
            | Payload::LeakyRelu { input_id, .. }
            | Payload::Pooling { input_id, .. }
            | Payload::ArgMaxPooling { input_id, .. } => vec![("input_id", input_id)],
            Payload::Node2x1 { input1_id, input2_id, .. } => vec![("input1_id", input1_id), ("input2_id", input2_id)],
            Payload::FullyConnected { input1_id, filter_id, bias_id, .. }
            | Payload::Conv { input1_id, filter_id, bias_id, .. } => {
                let mut v = vec![("input1_id", input1_id), ("filter_id", filter_id)];
                if bias_id != INVALID_ID {
                    v.push(("bias_id", bias_id));
                }
                v
            }
            Payload::Cat { inputs, .. } => {
                let n = match node_type {
                    NodeType::XNNConcatenate2 => 2,
                    NodeType::XNNConcatenate3 => 3,
                    NodeType::XNNConcatenate4 => 4,
                    _ => 5,
                };
                const NAMES: [&str; 5] = ["input1_id", "input2_id", "input3_id", "input4_id", "input5_id"];
                NAMES.iter().zip(inputs).take(n).map(|(n, i)| (*n, i)).collect()
            }
            Payload::Sdpa { query_id, key_id, value_id, scale_id, mask_id, .. } => vec![
                ("query_id", query_id),
                ("key_id", key_id),
                ("value_id", value_id),
                ("scale_id", scale_id),
                ("mask_id", mask_id),
            ],
        }
    }

    /// Value ids the node writes, with their field names.
    pub fn outputs(&self) -> Vec<(&'static str, u32)> {
        match *self {
            Payload::Node1x1 { output_id, .. }
            | Payload::Node2x1 { output_id, .. }
            | Payload::FullyConnected { output_id, .. }
            | Payload::StaticTranspose { output_id, .. }
            | Payload::StaticReshape { output_id, .. }
            | Payload::StaticSlice { output_id, .. }
            | Payload::ConstantPad { output_id, .. }
            | Payload::ResizeBilinear { output_id, .. }
            | Payload::Cat { output_id, .. }
            | Payload::Elu { output_id, .. }
            | Payload::LeakyRelu { output_id, .. }
            | Payload::Conv { output_id, .. }
            | Payload::Pooling { output_id, .. }
            | Payload::Sdpa { output_id, .. } => vec![("output_id", output_id)],
            Payload::ArgMaxPooling { output_value_id, output_index_id, .. } => {
                vec![("output_value_id", output_value_id), ("output_index_id", output_index_id)]
            }
        }
    }

    /// The node's `flags` field.
    pub fn flags(&self) -> u32 {
        match *self {
            Payload::Node1x1 { flags, .. }
            | Payload::Node2x1 { flags, .. }
            | Payload::FullyConnected { flags, .. }
            | Payload::StaticTranspose { flags, .. }
            | Payload::StaticReshape { flags, .. }
            | Payload::StaticSlice { flags, .. }
            | Payload::ConstantPad { flags, .. }
            | Payload::ResizeBilinear { flags, .. }
            | Payload::Cat { flags, .. }
            | Payload::Elu { flags, .. }
            | Payload::LeakyRelu { flags, .. }
            | Payload::Conv { flags, .. }
            | Payload::Pooling { flags, .. }
            | Payload::ArgMaxPooling { flags, .. }
            | Payload::Sdpa { flags, .. } => flags,
        }
    }
}

#[cfg(test)]
mod float_tests {
    use super::*;

    #[test]
    fn non_finite_floats_keep_their_value_in_json() {
        let relu = MinMax { output_min: 0.0, output_max: f32::INFINITY };
        assert_eq!(
            serde_json::to_value(relu).expect("json"),
            serde_json::json!({"output_min": 0.0, "output_max": "inf"})
        );
        let q = QuantParams::PerChannel {
            scale: Some(vec![0.5, f32::NAN, f32::NEG_INFINITY]),
            channel_dim: 0,
            scale_buffer_idx: 0,
            num_scales: 3,
        };
        assert_eq!(serde_json::to_value(&q).expect("json")["scale"], serde_json::json!([0.5, "nan", "-inf"]));
    }
}
