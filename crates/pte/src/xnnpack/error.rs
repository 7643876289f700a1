//! Typed errors of the XNNPACK blob loader. Every variant names what is wrong and where (byte
//! offset, value or node index, field), and maps to the error code ExecuTorch's runtime gives
//! the same blob (or the one it would give instead of crashing).
//! May not touch: the blob or its model (it names what the loader refuses, and where).

use thiserror::Error;

/// Why an XNNPACK blob was rejected.
#[derive(Debug, Clone, PartialEq, Error, strum::IntoStaticStr)]
pub enum XnnError {
    /// Shorter than the 30-byte header (ExecuTorch rejects even bare blobs this short).
    #[error("blob too short: {len} bytes, the XH00 header needs 30 at offset 0")]
    TooShort {
        /// Blob length.
        len: usize,
    },
    /// Header `flatbuffer_size` (u32 at offset 14) below 8.
    #[error("header flatbuffer_size {size} at offset 14 is below 8")]
    FlatbufferTooSmall {
        /// The declared size.
        size: u32,
    },
    /// Header flatbuffer region outside the blob.
    #[error("header flatbuffer region {offset}+{size} (offsets 10, 14) exceeds the {len}-byte blob")]
    FlatbufferOutOfBounds {
        /// Declared offset.
        offset: u32,
        /// Declared size.
        size: u32,
        /// Blob length.
        len: usize,
    },
    /// Header constant region outside the blob.
    #[error("header constant region {offset}+{size} (offsets 18, 22) exceeds the {len}-byte blob")]
    ConstantsOutOfBounds {
        /// Declared offset.
        offset: u32,
        /// Declared size.
        size: u64,
        /// Blob length.
        len: usize,
    },
    /// Header constant region before or inside the flatbuffer region.
    #[error("header constant region at {constant_offset} overlaps or precedes the flatbuffer {fb_offset}+{fb_size}")]
    ConstantsOverlap {
        /// Constant region offset.
        constant_offset: u32,
        /// Flatbuffer offset.
        fb_offset: u32,
        /// Flatbuffer size.
        fb_size: u32,
    },
    /// The flatbuffer identifier is not `XN00` or `XN01`.
    #[error("flatbuffer identifier {found:?} at blob offset {offset} (expected \"XN00\" or \"XN01\")")]
    Identifier {
        /// What the blob holds, lossily decoded.
        found: String,
        /// Where it was read.
        offset: usize,
    },
    /// The FlatBuffers verifier rejected the graph.
    #[error("flatbuffer verification failed: {0}")]
    Flatbuffer(String),
    /// Decoding would allocate more than the budget for this input.
    #[error("decoding {path} exceeds the {budget}-byte budget for a {input_len}-byte blob")]
    DecodeBudgetExceeded {
        /// Field path.
        path: String,
        /// The budget.
        budget: usize,
        /// Input length.
        input_len: usize,
    },
    /// A required field is absent.
    #[error("{path} is missing")]
    Missing {
        /// Field path.
        path: String,
    },
    /// `num_externs` above 4096.
    #[error("XNNGraph.num_externs {num_externs} exceeds 4096")]
    TooManyExterns {
        /// The declared count.
        num_externs: u32,
    },
    /// An `xvalue_union_type` that is neither a tensor nor a quantised tensor.
    #[error("xvalues[{index}]: value type tag {tag} is not XNNTensorValue (1) or XNNQuantizedTensorValue (2)")]
    ValueType {
        /// Value index.
        index: usize,
        /// The tag.
        tag: u8,
    },
    /// A quantisation-parameter union tag outside 1..=4.
    #[error("xvalues[{index}].quant_params: tag {tag} is not one of the 4 XNNQuantParams")]
    QuantParamsType {
        /// Value index.
        index: usize,
        /// The tag.
        tag: u8,
    },
    /// Value flags other than external input (1) / output (2).
    #[error("xvalues[{index}].flags {flags:#x} has bits other than 0x1 | 0x2")]
    ValueFlags {
        /// Value index.
        index: usize,
        /// The flags.
        flags: u32,
    },
    /// More than 6 dimensions.
    #[error("xvalues[{index}].dims has rank {rank} (XNNPACK allows at most 6)")]
    Rank {
        /// Value index.
        index: usize,
        /// The rank.
        rank: usize,
    },
    /// `num_dims` is not the length of `dims` (ExecuTorch hands XNNPACK `num_dims` with the
    /// `dims` array: a smaller one silently drops dimensions, a larger one reads past it).
    #[error("xvalues[{index}].num_dims {num_dims} but dims has {dims} entries")]
    NumDims {
        /// Value index.
        index: usize,
        /// The declared rank.
        num_dims: u32,
        /// Entries in `dims`.
        dims: usize,
    },
    /// A datatype outside the enum.
    #[error("xvalues[{index}].datatype {datatype} is not an XNNDatatype")]
    Datatype {
        /// Value index.
        index: usize,
        /// Raw value.
        datatype: i16,
    },
    /// `external_id` not below `num_externs` (and not 0xFFFFFFFF).
    #[error("xvalues[{index}].external_id {external_id} is not below num_externs {num_externs}")]
    ExternalId {
        /// Value index.
        index: usize,
        /// The id.
        external_id: u32,
        /// The graph's count.
        num_externs: u32,
    },
    /// External flags without an external id, or an external id without flags.
    #[error("xvalues[{index}]: flags {flags:#x} disagree with external_id {external_id:#x}")]
    ExternalMismatch {
        /// Value index.
        index: usize,
        /// Flags.
        flags: u32,
        /// External id.
        external_id: u32,
    },
    /// Two values with one external id.
    #[error("xvalues[{index}].external_id {external_id} is also xvalues[{first}]'s")]
    DuplicateExternalId {
        /// Value index.
        index: usize,
        /// The id.
        external_id: u32,
        /// The earlier value.
        first: usize,
    },
    /// Two values with one `id_out` (the runtime would silently keep the first).
    #[error("xvalues[{index}].id_out {id_out} is also xvalues[{first}]'s")]
    DuplicateIdOut {
        /// Value index.
        index: usize,
        /// The id.
        id_out: u32,
        /// The earlier value.
        first: usize,
    },
    /// `dq_datatype` set where the runtime refuses it.
    #[error("xvalues[{index}].dq_datatype {dq_datatype}: only qint8 (3) on a non-constant external input")]
    DqDatatype {
        /// Value index.
        index: usize,
        /// Raw value.
        dq_datatype: i16,
    },
    /// The constant table the blob's form selects is absent.
    #[error("xvalues[{index}] is a constant but XNNGraph.{table} is missing ({why})")]
    ConstantTableMissing {
        /// Value index.
        index: usize,
        /// `constant_data` or `constant_buffer`.
        table: &'static str,
        /// Why that table.
        why: &'static str,
    },
    /// `constant_buffer_idx` beyond the table.
    #[error("xvalues[{index}].constant_buffer_idx {idx} is beyond XNNGraph.{table} (length {len})")]
    ConstantIndex {
        /// Value index.
        index: usize,
        /// The index.
        idx: u32,
        /// Table name.
        table: &'static str,
        /// Table length.
        len: usize,
    },
    /// A null constant table entry or `storage`.
    #[error("XNNGraph.{table}[{idx}] (xvalues[{index}]) has no data")]
    ConstantNull {
        /// Value index.
        index: usize,
        /// Entry index.
        idx: u32,
        /// Table name.
        table: &'static str,
    },
    /// An offset entry outside the constant region.
    #[error("constant_data[{idx}] (xvalues[{index}]): {offset}+{size} exceeds the {region}-byte constant region")]
    ConstantRange {
        /// Value index.
        index: usize,
        /// Entry index.
        idx: u32,
        /// Offset.
        offset: u64,
        /// Size.
        size: u64,
        /// Region size.
        region: u64,
    },
    /// A named key when the program has no named data at all.
    #[error("constant_data[{idx}] (xvalues[{index}]) names key {key:?} but the program has no named data")]
    NoNamedData {
        /// Value index.
        index: usize,
        /// Entry index.
        idx: u32,
        /// The key.
        key: String,
    },
    /// A named key the program's named data lacks.
    #[error("constant_data[{idx}] (xvalues[{index}]) names key {key:?}, absent from the program's named data")]
    NamedKeyMissing {
        /// Value index.
        index: usize,
        /// Entry index.
        idx: u32,
        /// The key.
        key: String,
    },
    /// Constant bytes of the wrong size for the value's shape and datatype.
    #[error("xvalues[{index}]: constant has {actual} bytes, its shape and datatype need {expected}")]
    ConstantSize {
        /// Value index.
        index: usize,
        /// Bytes needed.
        expected: u64,
        /// Bytes present.
        actual: u64,
    },
    /// Union tag 0 (NONE) on a node.
    #[error("xnodes[{index}] has no node type (tag 0)")]
    NodeTypeNone {
        /// Node index.
        index: usize,
    },
    /// A node union tag beyond the 47 the schema declares.
    #[error("xnodes[{index}]: node type tag {tag} is not one of the 47 XNodeUnion members")]
    NodeType {
        /// Node index.
        index: usize,
        /// The tag.
        tag: u8,
    },
    /// A node the runtime has no handler for (ScaledDotProductAttention).
    #[error("xnodes[{index}]: {node} is not implemented by ExecuTorch's XNNPACK runtime")]
    NodeNotImplemented {
        /// Node index.
        index: usize,
        /// Member name.
        node: &'static str,
    },
    /// A node id naming no value.
    #[error("xnodes[{index}] ({node}).{field} = {id} names no value")]
    UndefinedId {
        /// Node index.
        index: usize,
        /// Member name.
        node: &'static str,
        /// Field.
        field: &'static str,
        /// The id.
        id: u32,
    },
    /// A node writing a constant, an external input, or a value another node writes.
    #[error("xnodes[{index}] ({node}).{field} = {id} writes {what}")]
    BadOutput {
        /// Node index.
        index: usize,
        /// Member name.
        node: &'static str,
        /// Field.
        field: &'static str,
        /// The id.
        id: u32,
        /// What is wrong.
        what: String,
    },
    /// A node's list field malformed (absent, empty, too long, or lengths that disagree).
    #[error("xnodes[{index}] ({node}).{field}: {what}")]
    NodeField {
        /// Node index.
        index: usize,
        /// Member name.
        node: &'static str,
        /// Field.
        field: &'static str,
        /// What is wrong.
        what: String,
    },
    /// `output_min_max` NaN or min > max on a node XNNPACK validates it for.
    #[error("xnodes[{index}] ({node}).output_min_max [{min}, {max}] is NaN or empty")]
    MinMax {
        /// Node index.
        index: usize,
        /// Member name.
        node: &'static str,
        /// Lower bound.
        min: f32,
        /// Upper bound.
        max: f32,
    },
    /// The nodes read values in a cycle.
    #[error("xnodes[{index}] ({node}) is on a cycle: its inputs depend on its own output")]
    Cycle {
        /// Node index.
        index: usize,
        /// Member name.
        node: &'static str,
    },
}

impl XnnError {
    /// The variant name (a stable class for fuzz outcomes).
    pub fn kind(&self) -> &'static str {
        self.into()
    }

    /// ExecuTorch's error code for the same blob (`runtime/core/error.h`).
    pub fn et_code(&self) -> u32 {
        use XnnError::*;
        match self {
            TooShort { .. }
            | FlatbufferTooSmall { .. }
            | FlatbufferOutOfBounds { .. }
            | ConstantsOutOfBounds { .. }
            | ConstantsOverlap { .. } => 0x12,
            Identifier { .. } | Flatbuffer(_) | DecodeBudgetExceeded { .. } => 0x30,
            ValueType { .. } | QuantParamsType { .. } | NodeTypeNone { .. } | NodeType { .. } => 0x11,
            NodeNotImplemented { .. } => 0x11,
            NamedKeyMissing { .. } => 0x20,
            Datatype { .. }
            | ExternalId { .. }
            | UndefinedId { .. }
            | DqDatatype { .. }
            | MinMax { .. }
            | Rank { .. }
            | NumDims { .. }
            | BadOutput { .. } => 0x01,
            Missing { .. }
            | TooManyExterns { .. }
            | ValueFlags { .. }
            | ExternalMismatch { .. }
            | DuplicateExternalId { .. }
            | DuplicateIdOut { .. }
            | ConstantTableMissing { .. }
            | ConstantIndex { .. }
            | ConstantNull { .. }
            | ConstantRange { .. }
            | NoNamedData { .. }
            | ConstantSize { .. }
            | NodeField { .. }
            | Cycle { .. } => 0x23,
        }
    }
}
