//! `format::write`: owned program + segment bytes -> `.pte` file bytes.
//!
//! Lays the FlatBuffers data out the way ExecuTorch's serializer does. ExecuTorch >= 1.0 builds
//! it with the Python `flatbuffers` builder ([`Layout::PythonBuilder`], the default): a table's
//! children are serialised in dataclass field order as they are met, then its fields are added
//! in schema slot order. ExecuTorch 0.2 fed the dataclass JSON to flatc ([`Layout::Flatc`]):
//! fields are added largest scalar size first and, within a size, last field first. In both,
//! default scalars and absent fields are omitted and `[ubyte]` vectors marked `force_align`
//! start on that alignment. The `eh00` header is spliced after the preamble (root offset bumped) only
//! when there is segment data, and segments follow at `segment_base_offset`, each aligned.
//! Owns: one spare builder per thread, reset and reused by the next write (let go after a
//! program above 512 KiB or a panic), so that writes do not grow a fresh buffer each time.
//! May not touch: what the program holds (it lays out the model it is given; emission decides
//! that), execution.

use super::FormatError;
use super::builder::{Builder, Scalar};
use super::generated::executorch_flatbuffer as fb;
use super::header::{ExtendedHeader, HEADER_LENGTH, PTE_IDENTIFIER, align_up};
use super::read::LoadedProgram;
use crate::program::*;

/// Which ExecuTorch serializer's byte layout to reproduce (both read identically).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// ExecuTorch >= 1.0: the Python `flatbuffers` builder packing tables in slot order.
    #[default]
    PythonBuilder,
    /// ExecuTorch 0.2: `flatc` parsing the program JSON (fields sorted by size, reversed).
    Flatc,
}

/// Layout options of the writer (ExecuTorch's `ExecutorchBackendConfig` equivalents).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    /// Serializer generation whose layout to reproduce.
    pub layout: Layout,
    /// Alignment of every segment (default 128).
    pub segment_alignment: u64,
    /// `force_align` of `Buffer.storage` (default 16, a power of two).
    pub constant_alignment: usize,
    /// `force_align` of `BackendDelegateInlineData.data` (default 16, a power of two).
    pub delegate_alignment: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            layout: Layout::PythonBuilder,
            segment_alignment: 128,
            constant_alignment: 16,
            delegate_alignment: 16,
        }
    }
}

/// The position of an object written (counted from the buffer's end, as FlatBuffers builders do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Off(u32);

impl From<Off> for u32 {
    fn from(o: Off) -> u32 {
        o.0
    }
}

/// Largest padding gap the writer accepts before each segment.
pub const MAX_SEGMENT_GAP: u64 = 1 << 16;

/// A FlatBuffers builder that lays tables out like one of ExecuTorch's serializers (shared
/// with the XNNPACK blob writer).
pub(crate) struct TableWriter {
    pub(crate) b: Builder,
    /// Largest `force_align` actually applied (the C++ builder's minalign).
    pub(crate) max_forced: usize,
    pub(crate) opts: WriteOptions,
}

/// A field about to be added to a table: its slot and the value to add.
pub(crate) enum Field {
    Off(u16, Off),
    U64(u16, u64),
    I64(u16, i64),
    F64(u16, f64),
    U32(u16, u32),
    I32(u16, i32),
    F32(u16, f32),
    I16(u16, i16),
    U8(u16, u8),
    I8(u16, i8),
    Bool(u16, bool),
}

impl Field {
    fn size(&self) -> usize {
        match self {
            Field::U64(..) | Field::I64(..) | Field::F64(..) => 8,
            Field::Off(..) | Field::U32(..) | Field::I32(..) | Field::F32(..) => 4,
            Field::I16(..) => 2,
            Field::U8(..) | Field::I8(..) | Field::Bool(..) => 1,
        }
    }
}

/// A thread keeps its builder for the next writer only when the buffer last written held at
/// most this many bytes (the builder's own buffer is at most twice as large); a builder grown
/// for a larger program is let go, so what a thread holds stays bounded.
const KEPT_BUILDER_DATA: usize = 512 << 10;

/// A builder kept for the thread's next writer.
type Spare = std::cell::RefCell<Option<Builder>>;

thread_local! {
    /// The builder the thread's next writer starts from: reset, with the buffer it grew before,
    /// so that writing a program does not grow and zero a fresh buffer again.
    static SPARE_BUILDER: Spare = const { std::cell::RefCell::new(None) };
}

impl Drop for TableWriter {
    fn drop(&mut self) {
        // A write cut short by a panic may leave state `reset` does not clear: not kept.
        if std::thread::panicking() {
            return;
        }
        let mut b = std::mem::take(&mut self.b);
        if b.used() <= KEPT_BUILDER_DATA {
            b.reset();
            // The thread may be tearing its locals down: then nothing is kept.
            let _ = SPARE_BUILDER.try_with(|spare| *spare.borrow_mut() = Some(b));
        }
    }
}

impl TableWriter {
    /// A writer with `opts`'s layout.
    pub(crate) fn new(opts: WriteOptions) -> Self {
        let spare = SPARE_BUILDER.try_with(|spare| spare.borrow_mut().take()).ok().flatten();
        let b = spare.unwrap_or_else(|| Builder::with_capacity(4096));
        TableWriter { b, max_forced: 1, opts }
    }

    /// Builds a table from its fields in schema slot order (`None` = absent).
    pub(crate) fn table(&mut self, fields: &[Option<Field>]) -> Off {
        let start = self.b.start_table();
        match self.opts.layout {
            // Python builder (ExecuTorch >= 1.0): every field in slot order.
            Layout::PythonBuilder => fields.iter().flatten().for_each(|f| self.push_field(f)),
            // flatc JSON parser (ExecuTorch 0.2): largest size first, last field first.
            Layout::Flatc => {
                for size in [8usize, 4, 2, 1] {
                    fields.iter().rev().flatten().filter(|f| f.size() == size).for_each(|f| self.push_field(f));
                }
            }
        }
        Off(self.b.end_table(start))
    }

    /// Pushes one field of the table being built.
    fn push_field(&mut self, f: &Field) {
        match *f {
            Field::Off(s, o) => self.b.offset_field(s, o.0),
            // A default (zero) scalar is left out. flatc compares floats with the default
            // bit-for-bit, so -0.0 is written.
            Field::F64(s, v) => self.slot(s, v, v.to_bits() != 0),
            Field::F32(s, v) => self.slot(s, v, v.to_bits() != 0),
            Field::U64(s, v) => self.slot(s, v, v != 0),
            Field::I64(s, v) => self.slot(s, v, v != 0),
            Field::I16(s, v) => self.slot(s, v, v != 0),
            Field::U32(s, v) => self.slot(s, v, v != 0),
            Field::I32(s, v) => self.slot(s, v, v != 0),
            Field::U8(s, v) => self.slot(s, v, v != 0),
            Field::I8(s, v) => self.slot(s, v, v != 0),
            Field::Bool(s, v) => self.slot(s, v, v),
        }
    }

    pub(crate) fn empty_vector(&mut self) -> Off {
        // The C++ builder (flatc) skips the element pre-alignment of an empty vector; only
        // its length is aligned.
        Off(self.b.empty_vector())
    }

    /// Finishes the buffer with `root` as its root table, under `identifier`.
    pub(crate) fn finish(&mut self, root: Off, identifier: &[u8; 4]) {
        self.b.finish(root.0, Some(identifier));
    }

    /// Adds scalar field `v` at vtable offset `slot` when `present`.
    fn slot<T: Scalar>(&mut self, slot: u16, v: T, present: bool) {
        if present {
            self.b.scalar_field(slot, v);
        }
    }

    pub(crate) fn scalars<T: Scalar>(&mut self, v: &[T]) -> Off {
        // An empty vector of 8-byte elements keeps its element alignment even in the flatc
        // layout: the Rust verifier checks it (the C++ one does not).
        if v.is_empty() && self.opts.layout == Layout::Flatc && T::SIZE <= 4 {
            return self.empty_vector();
        }
        Off(self.b.scalars(v))
    }

    pub(crate) fn opt_scalars<T: Scalar>(&mut self, v: &Option<Vec<T>>) -> Option<Off> {
        v.as_ref().map(|v| self.scalars(v))
    }

    pub(crate) fn bytes(&mut self, v: &[u8], force_align: usize) -> Off {
        if v.is_empty() && self.opts.layout == Layout::Flatc {
            return self.empty_vector();
        }
        if force_align > 1 {
            let used = self.b.used();
            let pad = (force_align - (used + v.len()) % force_align) % force_align;
            for _ in 0..pad {
                self.b.scalar(0u8);
            }
            self.max_forced = self.max_forced.max(force_align);
        }
        Off(self.b.scalars(v))
    }

    pub(crate) fn string(&mut self, s: &Option<String>) -> Option<Off> {
        s.as_ref().map(|s| Off(self.b.string(s)))
    }

    pub(crate) fn offsets(&mut self, v: &[Off]) -> Off {
        if v.is_empty() && self.opts.layout == Layout::Flatc {
            return self.empty_vector();
        }
        Off(self.b.offsets(v))
    }

    pub(crate) fn list<T>(&mut self, v: &Option<Vec<T>>, mut each: impl FnMut(&mut Self, &T) -> Off) -> Option<Off> {
        let v = v.as_ref()?;
        let offs: Vec<Off> = v.iter().map(|x| each(self, x)).collect();
        Some(self.offsets(&offs))
    }

    fn program(&mut self, p: &Program) -> Off {
        let plans = self.list(&p.execution_plan, |w, x| w.plan(x));
        let ca = self.opts.constant_alignment;
        let constant_buffer = self.list(&p.constant_buffer, |w, x| {
            let storage = x.storage.as_ref().map(|s| w.bytes(s.as_slice(), ca));
            w.table(&[storage.map(|o| Field::Off(fb::Buffer::VT_STORAGE, o))])
        });
        let da = self.opts.delegate_alignment;
        let inline = self.list(&p.backend_delegate_data, |w, x| {
            let data = x.data.as_ref().map(|s| w.bytes(s.as_slice(), da));
            w.table(&[data.map(|o| Field::Off(fb::BackendDelegateInlineData::VT_DATA, o))])
        });
        let segments = self.list(&p.segments, |w, s| {
            w.table(&[
                Some(Field::U64(fb::DataSegment::VT_OFFSET, s.offset)),
                Some(Field::U64(fb::DataSegment::VT_SIZE, s.size)),
            ])
        });
        let constant_segment = p.constant_segment.as_ref().map(|c| self.subsegment(c));
        let mutable = self.list(&p.mutable_data_segments, |w, c| w.subsegment(c));
        let named = self.list(&p.named_data, |w, n| {
            let key = w.string(&n.key);
            w.table(&[
                key.map(|o| Field::Off(fb::NamedData::VT_KEY, o)),
                Some(Field::U32(fb::NamedData::VT_SEGMENT_INDEX, n.segment_index)),
            ])
        });
        use fb::Program as P;
        self.table(&[
            Some(Field::U32(P::VT_VERSION, p.version)),
            plans.map(|o| Field::Off(P::VT_EXECUTION_PLAN, o)),
            constant_buffer.map(|o| Field::Off(P::VT_CONSTANT_BUFFER, o)),
            inline.map(|o| Field::Off(P::VT_BACKEND_DELEGATE_DATA, o)),
            segments.map(|o| Field::Off(P::VT_SEGMENTS, o)),
            constant_segment.map(|o| Field::Off(P::VT_CONSTANT_SEGMENT, o)),
            mutable.map(|o| Field::Off(P::VT_MUTABLE_DATA_SEGMENTS, o)),
            named.map(|o| Field::Off(P::VT_NAMED_DATA, o)),
        ])
    }

    fn subsegment(&mut self, c: &SubsegmentOffsets) -> Off {
        let offsets = self.opt_scalars(&c.offsets);
        use fb::SubsegmentOffsets as S;
        self.table(&[
            Some(Field::U32(S::VT_SEGMENT_INDEX, c.segment_index)),
            offsets.map(|o| Field::Off(S::VT_OFFSETS, o)),
        ])
    }

    fn plan(&mut self, p: &ExecutionPlan) -> Off {
        use fb::ExecutionPlan as E;
        let name = self.string(&p.name);
        let meta = p.container_meta_type.as_ref().map(|c| {
            let i = self.string(&c.encoded_inp_str);
            let o = self.string(&c.encoded_out_str);
            use fb::ContainerMetadata as C;
            self.table(&[
                i.map(|x| Field::Off(C::VT_ENCODED_INP_STR, x)),
                o.map(|x| Field::Off(C::VT_ENCODED_OUT_STR, x)),
            ])
        });
        let values = self.list(&p.values, |w, v| w.evalue(v));
        let inputs = self.opt_scalars(&p.inputs);
        let outputs = self.opt_scalars(&p.outputs);
        let chains = self.list(&p.chains, |w, c| w.chain(c));
        let operators = self.list(&p.operators, |w, o| {
            let n = w.string(&o.name);
            let ov = w.string(&o.overload);
            use fb::Operator as O;
            w.table(&[n.map(|x| Field::Off(O::VT_NAME, x)), ov.map(|x| Field::Off(O::VT_OVERLOAD, x))])
        });
        let delegates = self.list(&p.delegates, |w, d| w.delegate(d));
        let sizes = self.opt_scalars(&p.non_const_buffer_sizes);
        let devices = self.list(&p.non_const_buffer_device, |w, d| {
            use fb::NonConstBufferDevice as N;
            w.table(&[
                Some(Field::I32(N::VT_BUFFER_IDX, d.buffer_idx)),
                Some(Field::I8(N::VT_DEVICE_TYPE, d.device_type.0)),
                Some(Field::I8(N::VT_DEVICE_INDEX, d.device_index)),
            ])
        });
        self.table(&[
            name.map(|o| Field::Off(E::VT_NAME, o)),
            meta.map(|o| Field::Off(E::VT_CONTAINER_META_TYPE, o)),
            values.map(|o| Field::Off(E::VT_VALUES, o)),
            inputs.map(|o| Field::Off(E::VT_INPUTS, o)),
            outputs.map(|o| Field::Off(E::VT_OUTPUTS, o)),
            chains.map(|o| Field::Off(E::VT_CHAINS, o)),
            operators.map(|o| Field::Off(E::VT_OPERATORS, o)),
            delegates.map(|o| Field::Off(E::VT_DELEGATES, o)),
            sizes.map(|o| Field::Off(E::VT_NON_CONST_BUFFER_SIZES, o)),
            devices.map(|o| Field::Off(E::VT_NON_CONST_BUFFER_DEVICE, o)),
        ])
    }

    fn delegate(&mut self, d: &BackendDelegate) -> Off {
        use fb::BackendDelegate as B;
        let id = self.string(&d.id);
        let processed = d.processed.map(|r| {
            use fb::BackendDelegateDataReference as R;
            self.table(&[Some(Field::I8(R::VT_LOCATION, r.location.0)), Some(Field::U32(R::VT_INDEX, r.index))])
        });
        let specs = self.list(&d.compile_specs, |w, s| {
            let k = w.string(&s.key);
            let v = s.value.as_ref().map(|v| w.bytes(v.as_slice(), 1));
            use fb::CompileSpec as C;
            w.table(&[k.map(|x| Field::Off(C::VT_KEY, x)), v.map(|x| Field::Off(C::VT_VALUE, x))])
        });
        self.table(&[
            id.map(|o| Field::Off(B::VT_ID, o)),
            processed.map(|o| Field::Off(B::VT_PROCESSED, o)),
            specs.map(|o| Field::Off(B::VT_COMPILE_SPECS, o)),
        ])
    }

    fn chain(&mut self, c: &Chain) -> Off {
        use fb::Chain as C;
        let inputs = self.opt_scalars(&c.inputs);
        let outputs = self.opt_scalars(&c.outputs);
        let instructions = self.list(&c.instructions, |w, i| w.instruction(i));
        let stacktrace = self.list(&c.stacktrace, |w, fl| {
            let items = w.list(&fl.items, |w, f| {
                use fb::Frame as Fr;
                let filename = w.string(&f.filename);
                let name = w.string(&f.name);
                let context = w.string(&f.context);
                w.table(&[
                    filename.map(|x| Field::Off(Fr::VT_FILENAME, x)),
                    Some(Field::I32(Fr::VT_LINENO, f.lineno)),
                    name.map(|x| Field::Off(Fr::VT_NAME, x)),
                    context.map(|x| Field::Off(Fr::VT_CONTEXT, x)),
                ])
            });
            w.table(&[items.map(|x| Field::Off(fb::FrameList::VT_ITEMS, x))])
        });
        self.table(&[
            inputs.map(|o| Field::Off(C::VT_INPUTS, o)),
            outputs.map(|o| Field::Off(C::VT_OUTPUTS, o)),
            instructions.map(|o| Field::Off(C::VT_INSTRUCTIONS, o)),
            stacktrace.map(|o| Field::Off(C::VT_STACKTRACE, o)),
        ])
    }

    fn instruction(&mut self, i: &Instruction) -> Off {
        let payload = match i {
            Instruction::KernelCall(k) => {
                let args = self.opt_scalars(&k.args);
                use fb::KernelCall as K;
                self.table(&[Some(Field::I32(K::VT_OP_INDEX, k.op_index)), args.map(|o| Field::Off(K::VT_ARGS, o))])
            }
            Instruction::DelegateCall(d) => {
                let args = self.opt_scalars(&d.args);
                use fb::DelegateCall as D;
                self.table(&[
                    Some(Field::I32(D::VT_DELEGATE_INDEX, d.delegate_index)),
                    args.map(|o| Field::Off(D::VT_ARGS, o)),
                ])
            }
            Instruction::MoveCall(m) => {
                use fb::MoveCall as M;
                self.table(&[
                    Some(Field::I32(M::VT_MOVE_FROM, m.move_from)),
                    Some(Field::I32(M::VT_MOVE_TO, m.move_to)),
                ])
            }
            Instruction::JumpFalseCall(j) => {
                use fb::JumpFalseCall as J;
                self.table(&[
                    Some(Field::I32(J::VT_COND_VALUE_INDEX, j.cond_value_index)),
                    Some(Field::I32(J::VT_DESTINATION_INSTRUCTION, j.destination_instruction)),
                ])
            }
            Instruction::FreeCall(f) => self.table(&[Some(Field::I32(fb::FreeCall::VT_VALUE_INDEX, f.value_index))]),
        };
        use fb::Instruction as I;
        self.table(&[Some(Field::U8(I::VT_INSTR_ARGS_TYPE, i.tag())), Some(Field::Off(I::VT_INSTR_ARGS, payload))])
    }

    fn evalue(&mut self, v: &EValue) -> Off {
        let items = |w: &mut Self, o: Option<Off>| w.table(&[o.map(|x| Field::Off(fb::IntList::VT_ITEMS, x))]);
        let payload = match v {
            EValue::Null => self.table(&[]),
            EValue::Int(x) => self.table(&[Some(Field::I64(fb::Int::VT_INT_VAL, *x))]),
            EValue::Bool(x) => self.table(&[Some(Field::Bool(fb::Bool::VT_BOOL_VAL, *x))]),
            EValue::Double(x) => self.table(&[Some(Field::F64(fb::Double::VT_DOUBLE_VAL, *x))]),
            EValue::String(s) => {
                let s = self.string(s);
                self.table(&[s.map(|x| Field::Off(fb::String::VT_STRING_VAL, x))])
            }
            EValue::Tensor(t) => self.tensor(t),
            EValue::IntList(l) => {
                let o = self.opt_scalars(l);
                items(self, o)
            }
            EValue::DoubleList(l) => {
                let o = self.opt_scalars(l);
                items(self, o)
            }
            EValue::BoolList(l) => {
                let o = self.opt_scalars(l);
                items(self, o)
            }
            EValue::TensorList(l) | EValue::OptionalTensorList(l) => {
                let o = self.opt_scalars(l);
                items(self, o)
            }
        };
        use fb::EValue as E;
        self.table(&[Some(Field::U8(E::VT_VAL_TYPE, v.tag())), Some(Field::Off(E::VT_VAL, payload))])
    }

    fn tensor(&mut self, t: &Tensor) -> Off {
        use fb::Tensor as T;
        let sizes = self.opt_scalars(&t.sizes);
        let dim_order = self.opt_scalars(&t.dim_order);
        let alloc = t.allocation_info.map(|a| {
            use fb::AllocationDetails as A;
            self.table(&[
                Some(Field::U32(A::VT_MEMORY_ID, a.memory_id)),
                Some(Field::U32(A::VT_MEMORY_OFFSET_LOW, a.memory_offset_low)),
                Some(Field::U32(A::VT_MEMORY_OFFSET_HIGH, a.memory_offset_high)),
            ])
        });
        let extra = t.extra_tensor_info.as_ref().map(|x| {
            use fb::ExtraTensorInfo as X;
            let fqn = self.string(&x.fully_qualified_name);
            self.table(&[
                Some(Field::U64(X::VT_MUTABLE_DATA_SEGMENTS_IDX, x.mutable_data_segments_idx)),
                fqn.map(|o| Field::Off(X::VT_FULLY_QUALIFIED_NAME, o)),
                Some(Field::I8(X::VT_LOCATION, x.location.0)),
                Some(Field::I8(X::VT_DEVICE_TYPE, x.device_type.0)),
                Some(Field::I8(X::VT_DEVICE_INDEX, x.device_index)),
            ])
        });
        self.table(&[
            Some(Field::I8(T::VT_SCALAR_TYPE, t.scalar_type.0)),
            Some(Field::I32(T::VT_STORAGE_OFFSET, t.storage_offset)),
            sizes.map(|o| Field::Off(T::VT_SIZES, o)),
            dim_order.map(|o| Field::Off(T::VT_DIM_ORDER, o)),
            Some(Field::Bool(T::VT_REQUIRES_GRAD, t.requires_grad)),
            Some(Field::U32(T::VT_DATA_BUFFER_IDX, t.data_buffer_idx)),
            alloc.map(|o| Field::Off(T::VT_ALLOCATION_INFO, o)),
            Some(Field::I8(T::VT_LAYOUT, t.layout)),
            Some(Field::I8(T::VT_SHAPE_DYNAMISM, t.shape_dynamism.0)),
            extra.map(|o| Field::Off(T::VT_EXTRA_TENSOR_INFO, o)),
        ])
    }
}

/// Serialises only the FlatBuffers part (no extended header, no segments).
pub fn write_flatbuffer(program: &Program, opts: &WriteOptions) -> Result<Vec<u8>, FormatError> {
    let (w, pad) = build(program, opts)?;
    Ok(with_inserted(w.b.finished_data(), &[], pad, 0))
}

/// The finished flatbuffer of `program`, and the zeros that go after its 8-byte preamble: the
/// Rust builder aligns the whole buffer to its own minimum alignment only; the C++ builder also
/// counts forced vector alignments, and its extra padding sits right after the preamble (where
/// `Finish` pre-aligns).
fn build(program: &Program, opts: &WriteOptions) -> Result<(TableWriter, usize), FormatError> {
    let mut w = TableWriter::new(*opts);
    let root = w.program(program);
    w.finish(root, PTE_IDENTIFIER);
    if w.b.overflowed() {
        return Err(FormatError::Write {
            detail: format!("the program's flatbuffer passes {} bytes (32-bit offsets)", super::builder::MAX_BUFFER),
        });
    }
    let misalign = w.b.finished_data().len() % w.max_forced;
    let pad = if misalign == 0 { 0 } else { w.max_forced - misalign };
    Ok((w, pad))
}

/// `fb` with `header` and then `zeros` zero bytes inserted after its 8-byte preamble (the root
/// offset bumped by their length), in one buffer of at least `capacity` bytes.
fn with_inserted(fb: &[u8], header: &[u8], zeros: usize, capacity: usize) -> Vec<u8> {
    let n = header.len() + zeros;
    let mut out = Vec::with_capacity(capacity.max(fb.len() + n));
    // A finished buffer holds at least its root offset and identifier.
    let (preamble, rest) = fb.split_at(8.min(fb.len()));
    let root = preamble.get(..4).map_or(0, |r| u32::from_le_bytes([r[0], r[1], r[2], r[3]]));
    out.extend_from_slice(&root.wrapping_add(n as u32).to_le_bytes());
    out.extend_from_slice(preamble.get(4..).unwrap_or(&[]));
    out.extend_from_slice(header);
    out.resize(out.len() + zeros, 0);
    out.extend_from_slice(rest);
    out
}

/// Writes a complete `.pte`: `segment_data[i]` holds the bytes of `program.segments[i]`, placed
/// at that entry's offset (relative to the segment base).
pub fn write(program: &Program, segment_data: &[&[u8]], opts: &WriteOptions) -> Result<Vec<u8>, FormatError> {
    let table = program.segment_table();
    if table.len() != segment_data.len() {
        return Err(FormatError::Write {
            detail: format!(
                "program has {} segments but {} segment buffers were given",
                table.len(),
                segment_data.len()
            ),
        });
    }
    let mut region_len: u64 = 0;
    for (i, (s, d)) in table.iter().zip(segment_data).enumerate() {
        if s.size != d.len() as u64 {
            return Err(FormatError::Write {
                detail: format!("segments[{i}].size is {} but its buffer has {} bytes", s.size, d.len()),
            });
        }
        let end = s.offset.checked_add(s.size).ok_or_else(|| FormatError::Write {
            detail: format!("segments[{i}] offset {} + size {} overflows", s.offset, s.size),
        })?;
        // The serializer appends each segment's alignment padding before it, so even a
        // trailing empty segment extends the segment data to its offset.
        region_len = region_len.max(end);
    }
    // Serializers leave only alignment padding between segments; a layout with gaps beyond
    // 64 KiB per segment is refused rather than materialised as a huge zero-filled file.
    let data_total: u64 = segment_data.iter().map(|d| d.len() as u64).sum();
    let slack = MAX_SEGMENT_GAP * (table.len() as u64 + 1);
    if region_len > data_total.saturating_add(slack) {
        return Err(FormatError::Write {
            detail: format!(
                "segments span {region_len} bytes for {data_total} bytes of data (gaps above {MAX_SEGMENT_GAP} bytes)"
            ),
        });
    }
    let (w, pad) = build(program, opts)?;
    let fb = w.b.finished_data();
    if region_len == 0 {
        return Ok(with_inserted(fb, &[], pad, 0));
    }
    let max_align = opts.constant_alignment.max(opts.delegate_alignment).max(16) as u64;
    let header_len = align_up(u64::from(HEADER_LENGTH), max_align);
    let program_size = header_len + (fb.len() + pad) as u64;
    let base = align_up(program_size, opts.segment_alignment.max(1));
    let total = base
        .checked_add(region_len)
        .filter(|t| *t <= isize::MAX as u64)
        .ok_or_else(|| FormatError::Write { detail: format!("file of {base} + {region_len} bytes is too large") })?;
    let header = ExtendedHeader {
        length: HEADER_LENGTH,
        program_size,
        segment_base_offset: base,
        segment_data_size: region_len,
    };
    let mut out = with_inserted(fb, &header.encode(header_len as usize), pad, total as usize);
    out.resize(total as usize, 0);
    let base = base as usize;
    for (s, d) in table.iter().zip(segment_data) {
        if s.size == 0 {
            continue;
        }
        let at = base + s.offset as usize;
        out[at..at + d.len()].copy_from_slice(d);
    }
    for (i, (s, d)) in table.iter().zip(segment_data).enumerate() {
        let at = base + s.offset as usize;
        if s.size > 0 && &out[at..at + d.len()] != *d {
            return Err(FormatError::Write {
                detail: format!("segments[{i}] overlaps another segment with different bytes"),
            });
        }
    }
    Ok(out)
}

/// Re-encodes a loaded program with its own segment bytes.
pub fn write_loaded(loaded: &LoadedProgram<'_>, opts: &WriteOptions) -> Result<Vec<u8>, FormatError> {
    write(&loaded.program, &loaded.segments, opts)
}

/// Places segments of the given sizes back to back: each starts at the previous end aligned
/// up to `lcm(segment_alignment, its own alignment)` (pte-format §3).
pub fn layout_segments(sizes_and_alignments: &[(u64, u64)], segment_alignment: u64) -> Vec<DataSegment> {
    let mut prev_end = 0u64;
    let mut out = Vec::with_capacity(sizes_and_alignments.len());
    for &(size, align) in sizes_and_alignments {
        let a = super::header::lcm(segment_alignment.max(1), align.max(1));
        let offset = align_up(prev_end, a);
        out.push(DataSegment { offset, size });
        prev_end = offset + size;
    }
    out
}
