//! The state one method executes on: value slots, the tensor table, planned arenas and the
//! program's constant buffers, with the typed accessors kernels and delegates use.
//! May not touch: IR, emission, backend handles (the method holds them and runs the instructions).

use super::error::ErrorCode;
use super::value::*;
use crate::program::{ScalarType, TensorShapeDynamism};
use thiserror::Error;

/// A kernel or delegate failure: an ExecuTorch code and what went wrong.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{detail}")]
pub struct OpError {
    /// ExecuTorch error code.
    pub code: ErrorCode,
    /// What went wrong, naming the argument.
    pub detail: String,
    /// What the reference runtime lacks, when that is the failure (`backend:ID …`, `kernel:…`):
    /// ExecuTorch would run this, so the program is valid but not supported here.
    pub lacks: Option<String>,
}

impl OpError {
    /// A new error.
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        OpError { code, detail: detail.into(), lacks: None }
    }

    /// A failure because the reference runtime lacks `what`, which ExecuTorch has.
    pub fn lacking(code: ErrorCode, what: impl Into<String>, detail: impl Into<String>) -> Self {
        OpError { code, detail: detail.into(), lacks: Some(what.into()) }
    }
}

/// Result of a kernel or accessor.
pub type OpResult<T> = Result<T, OpError>;

fn bad(detail: impl Into<String>) -> OpError {
    OpError::new(ErrorCode::InvalidArgument, detail)
}

/// Value slots, tensors and memory of one method.
#[derive(Debug)]
pub struct Frame<'a> {
    /// Value slots.
    pub values: Vec<Value>,
    /// Tensor objects.
    pub tensors: Vec<TensorImpl>,
    /// Planned arenas (index = memory_id - 1).
    pub arenas: Vec<Vec<u8>>,
    /// Constant buffers of the program (index 0 reserved).
    pub constants: Vec<&'a [u8]>,
    /// Largest tensor (in bytes) that may live outside the planned arenas.
    pub memory_limit: usize,
    /// A seeded bug the kernels exhibit (mutation testing only; `None` in normal use).
    pub fault: Option<crate::fault::Fault>,
    /// Bytes of working copies (elements as f64 or i64, broadcast maps) the running kernel
    /// has made, bounded by `memory_limit` ([`Frame::working`]; reset before each kernel).
    pub working: std::cell::Cell<usize>,
    /// Elements of work the kernels may still do in this `execute()` ([`Frame::spend`]; set
    /// from `Runtime::work_budget` as it starts).
    pub work_left: WorkLeft,
}

/// What one spends work through: elements of work, and what does it (named in a refusal).
pub type Spend<'s> = &'s dyn Fn(u64, &dyn std::fmt::Display) -> OpResult<()>;

/// Elements of work left to spend, refused (InvalidProgram, as a spent instruction budget is)
/// past what is left.
#[derive(Debug, Default)]
pub struct WorkLeft(std::cell::Cell<u64>);

impl WorkLeft {
    /// A budget of `elements`.
    pub fn new(elements: u64) -> Self {
        WorkLeft(std::cell::Cell::new(elements))
    }

    /// What is left.
    pub fn get(&self) -> u64 {
        self.0.get()
    }

    /// Starts over with `elements`.
    pub fn set(&self, elements: u64) {
        self.0.set(elements);
    }

    /// Spends `elements`, or refuses them naming `what` and what was left (then nothing is).
    pub fn spend(&self, elements: u64, what: &dyn std::fmt::Display) -> OpResult<()> {
        let left = self.0.get();
        if elements > left {
            self.0.set(0);
            return Err(OpError::new(
                ErrorCode::InvalidProgram,
                format!(
                    "{what}: {elements} more elements of work pass the work budget ({left} left in this execution)"
                ),
            ));
        }
        self.0.set(left - elements);
        Ok(())
    }
}

impl Frame<'_> {
    /// The tensor object in value slot `v`.
    pub fn tensor_id(&self, v: usize) -> OpResult<usize> {
        match self.values.get(v) {
            Some(Value::Tensor(t)) => Ok(*t),
            Some(other) => {
                Err(OpError::new(ErrorCode::InvalidType, format!("values[{v}] is {}, not a tensor", other.kind())))
            }
            None => Err(bad(format!("value index {v} out of range"))),
        }
    }

    /// The tensor in value slot `v`.
    pub fn tensor(&self, v: usize) -> OpResult<&TensorImpl> {
        let t = self.tensor_id(v)?;
        Ok(&self.tensors[t])
    }

    /// The current bytes of the tensor in slot `v`.
    pub fn bytes(&self, v: usize) -> OpResult<&[u8]> {
        let t = self.tensor(v)?;
        let n = t.nbytes();
        let data: &[u8] = match &t.storage {
            Storage::Arena { arena, offset, .. } => {
                self.arenas.get(*arena).and_then(|a| a.get(*offset..offset + n)).ok_or_else(|| {
                    OpError::new(ErrorCode::MemoryAllocationFailed, format!("values[{v}] does not fit its arena"))
                })?
            }
            Storage::Constant(k) => self.constants.get(*k).and_then(|c| c.get(..n)).ok_or_else(|| {
                OpError::new(ErrorCode::InvalidArgument, format!("values[{v}] constant {k} too small"))
            })?,
            Storage::Owned(b) => b.get(..n).ok_or_else(|| bad(format!("values[{v}] owned buffer too small")))?,
            Storage::Null => return Err(OpError::new(ErrorCode::InvalidState, format!("values[{v}] has no data"))),
        };
        Ok(data)
    }

    /// Writes `data` (exactly the current nbytes) into the tensor of slot `v`.
    pub fn write_bytes(&mut self, v: usize, data: &[u8]) -> OpResult<()> {
        let tid = self.tensor_id(v)?;
        let limit = self.memory_limit;
        let t = &mut self.tensors[tid];
        let n = t.nbytes();
        if matches!(t.storage, Storage::Null | Storage::Owned(_)) && n > limit {
            return Err(OpError::new(
                ErrorCode::MemoryAllocationFailed,
                format!("values[{v}]: {n} bytes exceed the {limit}-byte memory limit"),
            ));
        }
        if data.len() != n {
            return Err(OpError::new(
                ErrorCode::Internal,
                format!("values[{v}]: writing {} bytes into {n}", data.len()),
            ));
        }
        let dst: &mut [u8] = match &mut t.storage {
            Storage::Arena { arena, offset, .. } => {
                let (a, o) = (*arena, *offset);
                self.arenas.get_mut(a).and_then(|buf| buf.get_mut(o..o + n)).ok_or_else(|| {
                    OpError::new(ErrorCode::MemoryAllocationFailed, format!("values[{v}] does not fit its arena"))
                })?
            }
            Storage::Owned(b) => {
                if b.len() < n {
                    b.resize(n, 0);
                }
                &mut b[..n]
            }
            Storage::Null => {
                t.storage = Storage::Owned(vec![0; n]);
                match &mut t.storage {
                    Storage::Owned(b) => &mut b[..],
                    _ => return Err(OpError::new(ErrorCode::Internal, "storage")),
                }
            }
            Storage::Constant(k) => {
                return Err(OpError::new(
                    ErrorCode::InvalidState,
                    format!("values[{v}] is constant buffer {k}; not writable"),
                ));
            }
        };
        dst.copy_from_slice(data);
        Ok(())
    }

    /// Sizes of the tensor in slot `v`.
    pub fn sizes(&self, v: usize) -> OpResult<Vec<usize>> {
        Ok(self.tensor(v)?.sizes.clone())
    }

    /// Element type of the tensor in slot `v`.
    pub fn dtype(&self, v: usize) -> OpResult<ScalarType> {
        Ok(self.tensor(v)?.dtype)
    }

    /// Charges `elements` working elements of 8 bytes each (an f64, i64 or index copy) to the
    /// running kernel, before it makes them: refused with MemoryAllocationFailed, naming
    /// `what`, when its working copies would pass the memory limit. A kernel's copies are
    /// several times its tensors' bytes (a bool tensor read as f64 is 8x), so planned arenas
    /// within the limit do not bound them by themselves.
    pub fn working(&self, elements: usize, what: &dyn std::fmt::Display) -> OpResult<()> {
        let limit = self.memory_limit;
        let total = elements.checked_mul(8).and_then(|b| b.checked_add(self.working.get()));
        match total {
            Some(total) if total <= limit => {
                self.working.set(total);
                self.spend(elements as u64, what)
            }
            _ => Err(OpError::new(
                ErrorCode::MemoryAllocationFailed,
                format!("{what}: working copies of {elements} more elements pass the {limit}-byte memory limit"),
            )),
        }
    }

    /// Spends `elements` of the method's work budget (elements a kernel reads, broadcasts or
    /// multiplies; a nested plan's whole run): refused (InvalidProgram, as a spent instruction
    /// budget is) when less is left, naming `what` and the budget's remainder.
    pub fn spend(&self, elements: u64, what: &dyn std::fmt::Display) -> OpResult<()> {
        self.work_left.spend(elements, what)
    }

    /// Elements of the tensor in slot `v` as f64.
    pub fn read_f64(&self, v: usize) -> OpResult<Vec<f64>> {
        self.working(self.tensor(v)?.numel(), &format_args!("values[{v}]"))?;
        let dtype = self.dtype(v)?;
        decode_f64(dtype, self.bytes(v)?)
            .map_err(|c| OpError::new(c, format!("values[{v}]: dtype {dtype} unsupported")))
    }

    /// Elements of the tensor in slot `v` as i64.
    pub fn read_i64(&self, v: usize) -> OpResult<Vec<i64>> {
        self.working(self.tensor(v)?.numel(), &format_args!("values[{v}]"))?;
        let dtype = self.dtype(v)?;
        decode_i64(dtype, self.bytes(v)?)
            .map_err(|c| OpError::new(c, format!("values[{v}]: dtype {dtype} unsupported")))
    }

    /// Writes f64 values, converted to the tensor's dtype.
    pub fn write_f64(&mut self, v: usize, values: &[f64]) -> OpResult<()> {
        let dtype = self.dtype(v)?;
        let bytes = encode_f64(dtype, values).map_err(|c| OpError::new(c, format!("values[{v}]: dtype {dtype}")))?;
        self.write_bytes(v, &bytes)
    }

    /// Writes i64 values, converted to the tensor's dtype.
    pub fn write_i64(&mut self, v: usize, values: &[i64]) -> OpResult<()> {
        let dtype = self.dtype(v)?;
        let bytes = encode_i64(dtype, values).map_err(|c| OpError::new(c, format!("values[{v}]: dtype {dtype}")))?;
        self.write_bytes(v, &bytes)
    }

    /// Resizes the tensor of slot `v` as ExecuTorch's `resize_tensor` does: a static tensor
    /// keeps its shape; a dynamic one takes any shape of the same rank within its declared
    /// element count (NotSupported otherwise).
    pub fn resize(&mut self, v: usize, sizes: &[usize]) -> OpResult<()> {
        if let Some(tid) = self.resize_target(v, sizes)? {
            self.tensors[tid].sizes = sizes.to_vec();
        }
        Ok(())
    }

    /// The error [`Frame::resize`] would give for these sizes, without resizing (a kernel that
    /// reads its inputs first still reports a refused output first, as ExecuTorch's do).
    pub fn check_resize(&self, v: usize, sizes: &[usize]) -> OpResult<()> {
        self.resize_target(v, sizes).map(drop)
    }

    /// The checks of [`Frame::resize`]: the tensor to give `sizes`, or `None` when it has them.
    fn resize_target(&self, v: usize, sizes: &[usize]) -> OpResult<Option<usize>> {
        let tid = self.tensor_id(v)?;
        let t = &self.tensors[tid];
        let limit = self.memory_limit;
        let elem = t.dtype.element_size().unwrap_or(1);
        let need = sizes.iter().try_fold(elem, |a, s| a.checked_mul(*s));
        // ExecuTorch's sizes are int32: a larger one (reachable through a given input's shape,
        // whose element count may still be 0) is no tensor it could hold.
        if let Some(d) = sizes.iter().position(|s| *s > i32::MAX as usize) {
            return Err(OpError::new(
                ErrorCode::NotSupported,
                format!("values[{v}]: size {} of dim {d} exceeds int32, ExecuTorch's size type", sizes[d]),
            ));
        }
        // ExecuTorch's resize rules first, with its code (NotSupported): a static tensor keeps
        // its sizes; a dynamic one keeps its rank and its declared element count.
        if t.sizes != sizes {
            let refused = |why: String| Err(OpError::new(ErrorCode::NotSupported, format!("values[{v}]: {why}")));
            if t.dynamism == TensorShapeDynamism::STATIC {
                return refused(format!("static {:?}; cannot resize to {sizes:?}", t.sizes));
            }
            if sizes.len() != t.sizes.len() {
                return refused(format!("resize from rank {} to rank {}", t.sizes.len(), sizes.len()));
            }
            if checked_numel(sizes).is_none_or(|n| n > t.numel_bound) {
                return refused(format!("shape {sizes:?} exceeds its bound of {} elements", t.numel_bound));
            }
        }
        // Every shape a kernel is about to fill is bounded: by the arena slot, or by the memory
        // limit for tensors that live outside the arenas (their bytes are allocated on write).
        if !matches!(t.storage, Storage::Arena { .. } | Storage::Constant(_)) && need.is_none_or(|n| n > limit) {
            return Err(OpError::new(
                ErrorCode::MemoryAllocationFailed,
                format!("values[{v}]: shape {sizes:?} needs more than the {limit}-byte memory limit"),
            ));
        }
        if t.sizes == sizes {
            return Ok(None);
        }
        match &t.storage {
            Storage::Arena { capacity, .. } if need.is_none_or(|n| n > *capacity) => {
                Err(bad(format!("values[{v}]: shape {sizes:?} exceeds its {capacity}-byte bound")))
            }
            Storage::Constant(_) => Err(bad(format!("values[{v}] is constant; cannot resize"))),
            _ if need.is_none() => Err(bad(format!("values[{v}]: shape {sizes:?} overflows"))),
            _ => Ok(Some(tid)),
        }
    }

    /// The value in slot `v`.
    pub fn value(&self, v: usize) -> OpResult<&Value> {
        self.values.get(v).ok_or_else(|| bad(format!("value index {v} out of range")))
    }

    /// An Int scalar.
    pub fn int(&self, v: usize) -> OpResult<i64> {
        match self.value(v)? {
            Value::Int(i) => Ok(*i),
            other => Err(OpError::new(ErrorCode::InvalidType, format!("values[{v}] is {}, not Int", other.kind()))),
        }
    }

    /// A Bool scalar.
    pub fn bool(&self, v: usize) -> OpResult<bool> {
        match self.value(v)? {
            Value::Bool(b) => Ok(*b),
            other => Err(OpError::new(ErrorCode::InvalidType, format!("values[{v}] is {}, not Bool", other.kind()))),
        }
    }

    /// A numeric scalar (Int, Double or Bool) as f64.
    pub fn scalar(&self, v: usize) -> OpResult<f64> {
        match self.value(v)? {
            Value::Int(i) => Ok(*i as f64),
            Value::Double(d) => Ok(*d),
            Value::Bool(b) => Ok(*b as i64 as f64),
            other => {
                Err(OpError::new(ErrorCode::InvalidType, format!("values[{v}] is {}, not a scalar", other.kind())))
            }
        }
    }

    /// Sets scalar slot `v`.
    pub fn set(&mut self, v: usize, value: Value) -> OpResult<()> {
        let slot = self.values.get_mut(v).ok_or_else(|| bad(format!("value index {v} out of range")))?;
        *slot = value;
        Ok(())
    }

    /// The ints of an IntList (whose items are value indices of Int values).
    pub fn int_list(&self, v: usize) -> OpResult<Vec<i64>> {
        match self.value(v)? {
            Value::IntList(items) => items.iter().map(|i| self.int(*i)).collect(),
            other => Err(OpError::new(ErrorCode::InvalidType, format!("values[{v}] is {}, not IntList", other.kind()))),
        }
    }

    /// A copy of the tensor of slot `v` for the host.
    pub fn host_tensor(&self, v: usize) -> OpResult<HostTensor> {
        let t = self.tensor(v)?;
        Ok(HostTensor { dtype: t.dtype, sizes: t.sizes.clone(), data: self.bytes(v)?.to_vec() })
    }

    /// A copy of slot `v` for the host.
    pub fn host_value(&self, v: usize) -> OpResult<HostValue> {
        Ok(match self.value(v)? {
            Value::Tensor(_) => HostValue::Tensor(self.host_tensor(v)?),
            Value::Int(i) => HostValue::Int(*i),
            Value::Bool(b) => HostValue::Bool(*b),
            Value::Double(d) => HostValue::Double(*d),
            _ => HostValue::None,
        })
    }

    /// Writes a host value into slot `v`: a tensor of the slot's dtype is resized to its shape
    /// and copied in; a scalar replaces a scalar of the same kind.
    pub fn set_host_value(&mut self, v: usize, value: &HostValue) -> OpResult<()> {
        match (self.value(v)?, value) {
            (Value::Tensor(_), HostValue::Tensor(t)) => {
                let want = self.dtype(v)?;
                if want != t.dtype {
                    return Err(OpError::new(
                        ErrorCode::InvalidType,
                        format!("values[{v}] is {want}, the value written is {}", t.dtype),
                    ));
                }
                self.resize(v, &t.sizes)?;
                self.write_bytes(v, &t.data)
            }
            (Value::Int(_), HostValue::Int(x)) => self.set(v, Value::Int(*x)),
            (Value::Bool(_), HostValue::Bool(x)) => self.set(v, Value::Bool(*x)),
            (Value::Double(_), HostValue::Double(x)) => self.set(v, Value::Double(*x)),
            (slot, given) => Err(OpError::new(
                ErrorCode::InvalidType,
                format!("values[{v}] is {}, cannot hold {given:?}", slot.kind()),
            )),
        }
    }
}
