//! Run-time values of a method: scalars, lists and tensors whose bytes live in planned arenas,
//! constant buffers (borrowed from the program), user-supplied buffers, or nowhere yet.
//!
//! Tensors are objects in a table; a value slot names one, so a MoveCall makes two slots share
//! one tensor (ExecuTorch's EValue copy semantics), and two tensors planned at overlapping arena
//! offsets alias exactly as they do on device.
//! May not touch: IR, emission, backend handles.

use super::error::ErrorCode;
pub use crate::program::checked_numel;
use crate::program::{ScalarType, TensorShapeDynamism};
use serde::Serialize;

/// Where a tensor's bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Storage {
    /// Planned arena `arena` (0-based) at `offset`, `capacity` bytes reserved.
    Arena {
        /// Arena index (memory_id - 1).
        arena: usize,
        /// Byte offset in the arena.
        offset: usize,
        /// Bytes reserved for this tensor (its declared, upper-bound shape).
        capacity: usize,
    },
    /// Constant buffer `k` of the program (read-only).
    Constant(usize),
    /// Bytes owned by the method (a user input without planned memory, or external data).
    Owned(Vec<u8>),
    /// No data (not yet set, or freed).
    Null,
}

/// One tensor object.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorImpl {
    /// Element type.
    pub dtype: ScalarType,
    /// Current sizes.
    pub sizes: Vec<usize>,
    /// Whether and how the shape may change.
    pub dynamism: TensorShapeDynamism,
    /// Most elements a dynamic tensor may be resized to: its declared shape's (ExecuTorch's
    /// `numel_bound_`, which bounds DYNAMIC_UNBOUND tensors too).
    pub numel_bound: usize,
    /// Where the bytes are.
    pub storage: Storage,
}

impl TensorImpl {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.sizes.iter().product()
    }
    /// Bytes of the current shape.
    pub fn nbytes(&self) -> usize {
        self.numel() * self.dtype.element_size().unwrap_or(1)
    }
}

/// One value slot.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// None.
    None,
    /// i64 scalar.
    Int(i64),
    /// Boolean scalar.
    Bool(bool),
    /// f64 scalar.
    Double(f64),
    /// String.
    String(String),
    /// A tensor object (index into the tensor table).
    Tensor(usize),
    /// Value indices of Int values.
    IntList(Vec<usize>),
    /// Literal doubles.
    DoubleList(Vec<f64>),
    /// Literal booleans.
    BoolList(Vec<bool>),
    /// Value indices of tensor values.
    TensorList(Vec<usize>),
    /// Value indices of tensor values or None.
    OptionalTensorList(Vec<Option<usize>>),
}

impl Value {
    /// Schema-style name of the kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Int(_) => "Int",
            Value::Bool(_) => "Bool",
            Value::Double(_) => "Double",
            Value::String(_) => "String",
            Value::Tensor(_) => "Tensor",
            Value::IntList(_) => "IntList",
            Value::DoubleList(_) => "DoubleList",
            Value::BoolList(_) => "BoolList",
            Value::TensorList(_) => "TensorList",
            Value::OptionalTensorList(_) => "OptionalTensorList",
        }
    }
}

/// A tensor passed in or out of a method: dtype, shape and row-major bytes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostTensor {
    /// Element type.
    pub dtype: ScalarType,
    /// Shape.
    pub sizes: Vec<usize>,
    /// Row-major little-endian bytes.
    #[serde(skip)]
    pub data: Vec<u8>,
}

impl HostTensor {
    /// A float32 tensor.
    pub fn f32(sizes: Vec<usize>, values: &[f32]) -> Self {
        HostTensor { dtype: ScalarType::FLOAT, sizes, data: values.iter().flat_map(|v| v.to_le_bytes()).collect() }
    }
    /// A tensor of `dtype` and `sizes` filled with zeros (`None` when its byte count
    /// overflows; the caller bounds what it is willing to allocate).
    pub fn zeros(dtype: ScalarType, sizes: Vec<usize>) -> Option<Self> {
        let n = checked_numel(&sizes)?.checked_mul(dtype.element_size().unwrap_or(1))?;
        Some(HostTensor { dtype, sizes, data: vec![0; n] })
    }
    /// The elements as f64 (every numeric dtype; bool as 0/1).
    pub fn to_f64(&self) -> Vec<f64> {
        decode_f64(self.dtype, &self.data).unwrap_or_default()
    }
}

/// A value passed in or out of a method.
#[derive(Clone, Debug, PartialEq)]
pub enum HostValue {
    /// A tensor.
    Tensor(HostTensor),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A double.
    Double(f64),
    /// None or a value kind with no host form.
    None,
}

/// Decodes little-endian elements of `dtype` as f64.
pub fn decode_f64(dtype: ScalarType, data: &[u8]) -> Result<Vec<f64>, ErrorCode> {
    let size = dtype.element_size().ok_or(ErrorCode::InvalidType)?;
    let chunks = data.chunks_exact(size);
    Ok(match dtype {
        ScalarType::FLOAT => chunks.map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect(),
        ScalarType::DOUBLE => chunks.map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect(),
        _ => decode_i64(dtype, data)?.into_iter().map(|v| v as f64).collect(),
    })
}

/// Decodes little-endian integer (or bool, or truncated float) elements of `dtype` as i64.
pub fn decode_i64(dtype: ScalarType, data: &[u8]) -> Result<Vec<i64>, ErrorCode> {
    let size = dtype.element_size().ok_or(ErrorCode::InvalidType)?;
    let chunks = data.chunks_exact(size);
    Ok(match dtype {
        ScalarType::BYTE => chunks.map(|c| c[0] as i64).collect(),
        ScalarType::CHAR => chunks.map(|c| c[0] as i8 as i64).collect(),
        ScalarType::BOOL => chunks.map(|c| (c[0] != 0) as i64).collect(),
        ScalarType::SHORT => chunks.map(|c| i16::from_le_bytes([c[0], c[1]]) as i64).collect(),
        ScalarType::INT => chunks.map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64).collect(),
        ScalarType::LONG => chunks.map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect(),
        ScalarType::FLOAT => chunks.map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64).collect(),
        ScalarType::DOUBLE => chunks.map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as i64).collect(),
        _ => return Err(ErrorCode::NotSupported),
    })
}

/// Encodes f64 values as little-endian elements of `dtype` (rounding or truncating).
pub fn encode_f64(dtype: ScalarType, values: &[f64]) -> Result<Vec<u8>, ErrorCode> {
    Ok(match dtype {
        ScalarType::FLOAT => values.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect(),
        ScalarType::DOUBLE => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ScalarType::BOOL => values.iter().map(|v| (*v != 0.0) as u8).collect(),
        _ => encode_i64(dtype, &values.iter().map(|v| *v as i64).collect::<Vec<_>>())?,
    })
}

/// Encodes i64 values as little-endian elements of `dtype` (wrapping).
pub fn encode_i64(dtype: ScalarType, values: &[i64]) -> Result<Vec<u8>, ErrorCode> {
    Ok(match dtype {
        ScalarType::BYTE | ScalarType::CHAR => values.iter().map(|v| *v as u8).collect(),
        ScalarType::BOOL => values.iter().map(|v| (*v != 0) as u8).collect(),
        ScalarType::SHORT => values.iter().flat_map(|v| (*v as i16).to_le_bytes()).collect(),
        ScalarType::INT => values.iter().flat_map(|v| (*v as i32).to_le_bytes()).collect(),
        ScalarType::LONG => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ScalarType::FLOAT => values.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect(),
        ScalarType::DOUBLE => values.iter().flat_map(|v| (*v as f64).to_le_bytes()).collect(),
        _ => return Err(ErrorCode::NotSupported),
    })
}

/// Whether `dtype` holds floating-point values.
pub fn is_float(dtype: ScalarType) -> bool {
    matches!(dtype, ScalarType::FLOAT | ScalarType::DOUBLE | ScalarType::HALF | ScalarType::BFLOAT16)
}
