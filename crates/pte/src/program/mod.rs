//! Owned model of a `.pte` program: one plain Rust type per schema table.
//!
//! Owns: the data types every later stage works on (emitter output, runtime input, oracle
//! subject). Fields that may be absent on the wire are `Option`s so that a decoded file is
//! represented exactly (absent and empty differ, and the runtime treats them differently).
//! Field order follows ExecuTorch's Python dataclasses, which is the order of the corpus JSON
//! dumps and of the serializer's JSON (it fixes the byte layout, see `format::write`).
//! May not touch: bytes, files, the generated FlatBuffers accessors.

mod bytes;
mod enums;
mod scratch;
mod unions;

pub use bytes::{Bytes, printable_utf8, sha256_hex};
pub use enums::{DataLocation, DeviceType, ScalarType, TensorDataLocation, TensorShapeDynamism};
pub use scratch::{SCRATCH_KEY, ScratchError, ScratchSpec, encode_scratch, parse_scratch};
pub use unions::{EValue, Instruction};

use serde::{Deserialize, Serialize};

/// The root table: every method plus program-wide data.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Schema version; writers store 0 and nobody reads it.
    pub version: u32,
    /// One plan per method.
    pub execution_plan: Option<Vec<ExecutionPlan>>,
    /// Deprecated inline constants (index 0 reserved); current writers emit it empty.
    pub constant_buffer: Option<Vec<Buffer>>,
    /// Inline delegate blobs, targets of INLINE references.
    pub backend_delegate_data: Option<Vec<BackendDelegateInlineData>>,
    /// Data segments after the FlatBuffers data, offsets relative to `segment_base_offset`.
    pub segments: Option<Vec<DataSegment>>,
    /// Constant tensor offsets inside one segment.
    pub constant_segment: Option<SubsegmentOffsets>,
    /// Initial values of mutable (planned) tensors; writers emit at most one entry.
    pub mutable_data_segments: Option<Vec<SubsegmentOffsets>>,
    /// Named blobs stored in segments.
    pub named_data: Option<Vec<NamedData>>,
}

impl Program {
    /// The plans, or an empty slice when the field is absent.
    pub fn plans(&self) -> &[ExecutionPlan] {
        self.execution_plan.as_deref().unwrap_or(&[])
    }
    /// The segment table, or an empty slice when absent.
    pub fn segment_table(&self) -> &[DataSegment] {
        self.segments.as_deref().unwrap_or(&[])
    }
    /// The inline delegate blobs, or an empty slice when absent.
    pub fn inline_delegate_data(&self) -> &[BackendDelegateInlineData] {
        self.backend_delegate_data.as_deref().unwrap_or(&[])
    }
    /// The plan named `name`.
    pub fn plan(&self, name: &str) -> Option<&ExecutionPlan> {
        self.plans().iter().find(|p| p.name.as_deref() == Some(name))
    }
}

/// One method: its values, instructions, operators and delegates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecutionPlan {
    /// Method name.
    pub name: Option<String>,
    /// Pytree encodings of inputs and outputs.
    pub container_meta_type: Option<ContainerMetadata>,
    /// Every value of the method; indices elsewhere point here.
    pub values: Option<Vec<EValue>>,
    /// Value indices of user inputs.
    pub inputs: Option<Vec<i32>>,
    /// Value indices of user outputs.
    pub outputs: Option<Vec<i32>>,
    /// Instruction chains; the emitter writes exactly one.
    pub chains: Option<Vec<Chain>>,
    /// Operator table, target of `KernelCall.op_index`.
    pub operators: Option<Vec<Operator>>,
    /// Backend delegates, target of `DelegateCall.delegate_index`.
    pub delegates: Option<Vec<BackendDelegate>>,
    /// Planned arena sizes; index 0 reserved.
    pub non_const_buffer_sizes: Option<Vec<i64>>,
    /// Devices of non-CPU arenas.
    pub non_const_buffer_device: Option<Vec<NonConstBufferDevice>>,
}

impl ExecutionPlan {
    /// The values, or an empty slice when absent.
    pub fn value_list(&self) -> &[EValue] {
        self.values.as_deref().unwrap_or(&[])
    }
    /// The delegates, or an empty slice when absent.
    pub fn delegate_list(&self) -> &[BackendDelegate] {
        self.delegates.as_deref().unwrap_or(&[])
    }
    /// The operators, or an empty slice when absent.
    pub fn operator_list(&self) -> &[Operator] {
        self.operators.as_deref().unwrap_or(&[])
    }
    /// The chains, or an empty slice when absent.
    pub fn chain_list(&self) -> &[Chain] {
        self.chains.as_deref().unwrap_or(&[])
    }
    /// The method name, or `""` when absent.
    pub fn name_str(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }
}

/// Pytree specs of a method's inputs and outputs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerMetadata {
    /// Encoded input spec.
    pub encoded_inp_str: Option<String>,
    /// Encoded output spec.
    pub encoded_out_str: Option<String>,
}

/// A list of instructions executed in order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Chain {
    /// Written empty; ignored.
    pub inputs: Option<Vec<i32>>,
    /// Written empty; ignored.
    pub outputs: Option<Vec<i32>>,
    /// The instructions; jump destinations index this list.
    pub instructions: Option<Vec<Instruction>>,
    /// Optional stack frames, parallel to `instructions`.
    pub stacktrace: Option<Vec<FrameList>>,
}

impl Chain {
    /// The instructions, or an empty slice when absent.
    pub fn instruction_list(&self) -> &[Instruction] {
        self.instructions.as_deref().unwrap_or(&[])
    }
}

/// A tensor value's metadata and where its data comes from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tensor {
    /// Element type.
    pub scalar_type: ScalarType,
    /// Must be 0 for the runtime.
    pub storage_offset: i32,
    /// Dimensions.
    pub sizes: Option<Vec<i32>>,
    /// Permutation of `0..rank`.
    pub dim_order: Option<Vec<u8>>,
    /// Ignored by the runtime.
    pub requires_grad: bool,
    /// Ignored by the runtime.
    pub layout: i8,
    /// 0 = no serialized data; else an index into the constant (or mutable) offsets.
    pub data_buffer_idx: u32,
    /// Present = memory planned.
    pub allocation_info: Option<AllocationDetails>,
    /// Static or dynamic shape.
    pub shape_dynamism: TensorShapeDynamism,
    /// Extra placement information.
    pub extra_tensor_info: Option<ExtraTensorInfo>,
}

/// Where a planned tensor lives in its arena.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationDetails {
    /// 1-based arena id.
    pub memory_id: u32,
    /// Low 32 bits of the offset.
    pub memory_offset_low: u32,
    /// High 32 bits of the offset.
    pub memory_offset_high: u32,
}

impl AllocationDetails {
    /// The full 64-bit offset.
    pub fn offset(&self) -> u64 {
        u64::from(self.memory_offset_low) | (u64::from(self.memory_offset_high) << 32)
    }
}

/// Extra placement information of a tensor.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtraTensorInfo {
    /// Index into `mutable_data_segments`.
    pub mutable_data_segments_idx: u64,
    /// Key of external data.
    pub fully_qualified_name: Option<String>,
    /// SEGMENT or EXTERNAL.
    pub location: TensorDataLocation,
    /// Device type.
    pub device_type: DeviceType,
    /// Device index.
    pub device_index: i8,
}

/// An operator name and overload.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Operator {
    /// Qualified name, e.g. `aten::add`.
    pub name: Option<String>,
    /// Overload, e.g. `out`; empty = default.
    pub overload: Option<String>,
}

impl Operator {
    /// `name.overload`, or `name` when the overload is empty.
    pub fn qualified(&self) -> String {
        let name = self.name.as_deref().unwrap_or("");
        match self.overload.as_deref() {
            Some(o) if !o.is_empty() => format!("{name}.{o}"),
            _ => name.to_string(),
        }
    }
}

/// A stack frame.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// Source file.
    pub filename: Option<String>,
    /// Line number.
    pub lineno: i32,
    /// Function name.
    pub name: Option<String>,
    /// Source line.
    pub context: Option<String>,
}

/// The frames of one instruction.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameList {
    /// Frames, outermost first.
    pub items: Option<Vec<Frame>>,
}

/// One key/value compile spec handed to a backend's `init`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CompileSpec {
    /// Key.
    pub key: Option<String>,
    /// Opaque value bytes.
    pub value: Option<Bytes>,
}

impl CompileSpec {
    /// A spec with both fields present.
    pub fn new(key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        CompileSpec { key: Some(key.into()), value: Some(Bytes(value.into())) }
    }
}

/// Where a delegate's processed blob is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BackendDelegateDataReference {
    /// INLINE (index into `backend_delegate_data`) or SEGMENT (index into `segments`).
    pub location: DataLocation,
    /// The index.
    pub index: u32,
}

/// One backend delegate: backend id, blob reference and compile specs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendDelegate {
    /// Backend registry name.
    pub id: Option<String>,
    /// The processed blob.
    pub processed: Option<BackendDelegateDataReference>,
    /// Compile specs, in order.
    pub compile_specs: Option<Vec<CompileSpec>>,
}

impl BackendDelegate {
    /// The compile specs, or an empty slice when absent.
    pub fn compile_spec_list(&self) -> &[CompileSpec] {
        self.compile_specs.as_deref().unwrap_or(&[])
    }
}

/// Device of one planned arena.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NonConstBufferDevice {
    /// 1-based arena index.
    pub buffer_idx: i32,
    /// Device type.
    pub device_type: DeviceType,
    /// Device index.
    pub device_index: i8,
}

/// Deprecated inline constant storage.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Buffer {
    /// The bytes.
    pub storage: Option<Bytes>,
}

/// An inline delegate blob.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendDelegateInlineData {
    /// The bytes.
    pub data: Option<Bytes>,
}

/// A data segment, relative to `segment_base_offset`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DataSegment {
    /// Offset from the segment base.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

/// Offsets of sub-buffers inside one segment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubsegmentOffsets {
    /// Segment holding the sub-buffers.
    pub segment_index: u32,
    /// Byte offset of each sub-buffer; index 0 reserved.
    pub offsets: Option<Vec<u64>>,
}

/// A named blob in a segment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedData {
    /// Unique key.
    pub key: Option<String>,
    /// Segment holding the blob.
    pub segment_index: u32,
}

/// Kernel-call arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelCall {
    /// Index into the plan's operators.
    pub op_index: i32,
    /// Value indices: schema arguments then outputs.
    pub args: Option<Vec<i32>>,
}

/// Delegate-call arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegateCall {
    /// Index into the plan's delegates.
    pub delegate_index: i32,
    /// Value indices: inputs, then outputs (then scratch slots).
    pub args: Option<Vec<i32>>,
}

/// Copy one value slot into another.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveCall {
    /// Source value index.
    pub move_from: i32,
    /// Destination value index.
    pub move_to: i32,
}

/// Jump to `destination_instruction` when the condition value is false.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JumpFalseCall {
    /// Value index of the condition (Bool or bool tensor).
    pub cond_value_index: i32,
    /// Instruction index in the same chain.
    pub destination_instruction: i32,
}

/// Release a tensor's data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreeCall {
    /// Value index of the tensor.
    pub value_index: i32,
}

/// Elements of a tensor of `shape`, or `None` when the count overflows (a shape read from a file).
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, d| a.checked_mul(*d))
}
