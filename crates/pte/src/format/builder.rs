//! `format::builder`: a FlatBuffers builder that lays bytes out exactly as the `flatbuffers`
//! crate's `FlatBufferBuilder` does — back to front, with its alignment, padding, vtable
//! sharing and `finish` — but finds a vtable written before by hashing its bytes, where the
//! crate writes each vtable, binary-searches the written ones and erases the copy (5 % of a
//! campaign). The crate's builder stays the oracle: the tests below drive both with the same
//! random calls and compare every byte.
//! Owns: the bytes of one buffer under construction. May not touch: what a table holds
//! (`format::write` decides that).

use hashbrown::HashMap;

/// A little-endian scalar the builder can write (the crate's `Push` for plain scalars).
pub(crate) trait Scalar: Copy {
    /// Bytes it takes (also its alignment).
    const SIZE: usize;
    /// Writes it into `dst` (exactly `SIZE` bytes).
    fn put(self, dst: &mut [u8]);
}

macro_rules! scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put(self, dst: &mut [u8]) {
                dst.copy_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
scalar!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

impl Scalar for bool {
    const SIZE: usize = 1;
    fn put(self, dst: &mut [u8]) {
        dst[0] = u8::from(self);
    }
}

/// Largest buffer the builder makes (FlatBuffers offsets are 32-bit; the crate panics past it).
pub(crate) const MAX_BUFFER: usize = (1 << 31) - 1;

/// A buffer built back to front: `buf[head..]` holds what is written so far; an offset is a
/// position counted from the end (the crate's "revloc").
#[derive(Default)]
pub(crate) struct Builder {
    buf: Vec<u8>,
    head: usize,
    /// Largest alignment asked so far (the whole buffer is aligned to it at `finish`).
    min_align: usize,
    /// Fields of the table under construction: vtable offset of the slot, position of the value.
    fields: Vec<(u16, u32)>,
    /// Each distinct vtable written since the last `finish`, by its bytes.
    vtables: HashMap<Box<[u8]>, u32>,
    /// The vtable being assembled (kept to reuse its allocation).
    scratch: Vec<u8>,
    /// Largest buffer allowed ([`MAX_BUFFER`]; lower in tests).
    limit: usize,
    /// Set when the buffer would pass `limit`; from then on nothing more is written.
    overflow: bool,
}

impl Builder {
    /// An empty builder with room for `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Builder { buf: vec![0; capacity], head: capacity, limit: MAX_BUFFER, ..Builder::default() }
    }

    /// Forgets what was written, keeping the buffer's room.
    pub(crate) fn reset(&mut self) {
        self.head = self.buf.len();
        self.min_align = 0;
        self.fields.clear();
        self.vtables.clear();
        self.overflow = false;
    }

    /// Bytes written so far.
    pub(crate) fn used(&self) -> usize {
        self.buf.len() - self.head
    }

    /// Whether the buffer would have passed [`MAX_BUFFER`] (what was built is then incomplete).
    pub(crate) fn overflowed(&self) -> bool {
        self.overflow
    }

    /// The finished buffer (after [`Builder::finish`]); empty when it overflowed.
    pub(crate) fn finished_data(&self) -> &[u8] {
        if self.overflow { &[] } else { &self.buf[self.head..] }
    }

    /// Moves the head `n` bytes towards the front, growing the buffer (its data kept at the
    /// end) when there is no room; the bytes taken are the caller's to fill. `None` past
    /// [`MAX_BUFFER`].
    #[inline(always)]
    fn take(&mut self, n: usize) -> Option<usize> {
        if self.head >= n && !self.overflow && self.used() + n <= self.limit {
            self.head -= n;
            return Some(self.head);
        }
        self.take_growing(n)
    }

    /// [`Builder::take`] when the buffer has no room for `n` more bytes (or is past its limit).
    #[cold]
    #[inline(never)]
    fn take_growing(&mut self, n: usize) -> Option<usize> {
        if self.overflow || self.used() + n > self.limit {
            self.overflow = true;
            return None;
        }
        if self.head < n {
            let used = self.used();
            let len = (self.buf.len() * 2).max(used + n).max(64).min(self.limit);
            let mut grown = vec![0; len];
            grown[len - used..].copy_from_slice(&self.buf[self.head..]);
            self.buf = grown;
            self.head = len - used;
        }
        self.head -= n;
        Some(self.head)
    }

    /// `n` zero bytes.
    fn zeros(&mut self, n: usize) {
        if let Some(at) = self.take(n) {
            self.buf[at..at + n].fill(0);
        }
    }

    /// Pads so that `len` more bytes end on a multiple of `alignment` (a power of two).
    #[inline]
    fn align(&mut self, len: usize, alignment: usize) {
        self.min_align = self.min_align.max(alignment);
        let pad = (self.used() + len).wrapping_neg() & alignment.max(1).wrapping_sub(1);
        if pad > 0 {
            self.zeros(pad);
        }
    }

    /// Writes `bytes` as they are (no alignment).
    fn raw(&mut self, bytes: &[u8]) {
        if let Some(at) = self.take(bytes.len()) {
            self.buf[at..at + bytes.len()].copy_from_slice(bytes);
        }
    }

    /// Writes one scalar, aligned to its size; returns its position.
    #[inline]
    pub(crate) fn scalar<T: Scalar>(&mut self, v: T) -> u32 {
        self.align(T::SIZE, T::SIZE);
        if let Some(at) = self.take(T::SIZE) {
            v.put(&mut self.buf[at..at + T::SIZE]);
        }
        self.used() as u32
    }

    /// Writes an offset to the object at `target`; returns its position.
    pub(crate) fn offset(&mut self, target: u32) -> u32 {
        self.align(4, 4);
        if let Some(at) = self.take(4) {
            let here = self.used() as u32;
            self.buf[at..at + 4].copy_from_slice(&here.wrapping_sub(target).to_le_bytes());
        }
        self.used() as u32
    }

    /// Starts a table; its fields follow, then [`Builder::end_table`] with what this returned.
    pub(crate) fn start_table(&mut self) -> u32 {
        self.fields.clear();
        self.used() as u32
    }

    /// Adds a scalar field at vtable offset `slot` to the table under construction.
    pub(crate) fn scalar_field<T: Scalar>(&mut self, slot: u16, v: T) {
        let at = self.scalar(v);
        self.fields.push((slot, at));
    }

    /// Adds an offset field at vtable offset `slot` to the table under construction.
    pub(crate) fn offset_field(&mut self, slot: u16, target: u32) {
        let at = self.offset(target);
        self.fields.push((slot, at));
    }

    /// Ends the table begun at `start`: writes its vtable offset and, unless an equal vtable was
    /// written since the last `finish`, its vtable. Returns the table's position.
    pub(crate) fn end_table(&mut self, start: u32) -> u32 {
        let table = self.scalar(0u32);
        let vt_len = self.fields.iter().map(|&(slot, _)| usize::from(slot) + 2).max().unwrap_or(4);
        let mut vt = std::mem::take(&mut self.scratch);
        vt.clear();
        vt.resize(vt_len, 0);
        vt[0..2].copy_from_slice(&(vt_len as u16).to_le_bytes());
        vt[2..4].copy_from_slice(&(table.wrapping_sub(start) as u16).to_le_bytes());
        for &(slot, at) in &self.fields {
            let s = usize::from(slot);
            vt[s..s + 2].copy_from_slice(&(table.wrapping_sub(at) as u16).to_le_bytes());
        }
        let vtable = match self.vtables.get(vt.as_slice()) {
            Some(&at) => at,
            None => {
                self.raw(&vt);
                let at = self.used() as u32;
                self.vtables.insert(vt.as_slice().into(), at);
                at
            }
        };
        self.scratch = vt;
        if !self.overflow {
            let at = self.buf.len() - table as usize;
            let soffset = (vtable as i32).wrapping_sub(table as i32);
            self.buf[at..at + 4].copy_from_slice(&soffset.to_le_bytes());
        }
        self.fields.clear();
        table
    }

    /// A vector of scalars; returns its position.
    pub(crate) fn scalars<T: Scalar>(&mut self, items: &[T]) -> u32 {
        let n = items.len() * T::SIZE;
        self.align(n, T::SIZE.max(4));
        if let Some(at) = self.take(n) {
            for (item, dst) in items.iter().zip(self.buf[at..at + n].chunks_exact_mut(T::SIZE)) {
                item.put(dst);
            }
        }
        self.scalar(items.len() as u32)
    }

    /// A vector of offsets to the objects at `targets`; returns its position.
    pub(crate) fn offsets<T: Copy + Into<u32>>(&mut self, targets: &[T]) -> u32 {
        let n = targets.len() * 4;
        self.align(n, 4);
        if let Some(at) = self.take(n) {
            let end = self.buf.len();
            for (i, (&target, dst)) in targets.iter().zip(self.buf[at..at + n].chunks_exact_mut(4)).enumerate() {
                let here = (end - (at + 4 * i)) as u32;
                dst.copy_from_slice(&here.wrapping_sub(target.into()).to_le_bytes());
            }
        }
        self.scalar(targets.len() as u32)
    }

    /// An empty vector begun as the crate's `start_vector::<u8>(0)` (only the length aligned).
    pub(crate) fn empty_vector(&mut self) -> u32 {
        self.align(0, 4);
        self.scalar(0u32)
    }

    /// A NUL-terminated string; returns its position.
    pub(crate) fn string(&mut self, s: &str) -> u32 {
        self.align(s.len() + 1, 4);
        self.scalar(0u8);
        self.raw(s.as_bytes());
        self.scalar(s.len() as u32)
    }

    /// Finishes the buffer with `root` as its root table and `identifier` after the root offset.
    pub(crate) fn finish(&mut self, root: u32, identifier: Option<&[u8; 4]>) {
        self.vtables.clear();
        self.align(4 + if identifier.is_some() { 4 } else { 0 }, self.min_align);
        if let Some(id) = identifier {
            self.raw(id);
        }
        self.offset(root);
    }
}

#[cfg(test)]
mod tests {
    //! Both builders, driven by the same random calls, must give the same bytes.
    use super::Builder;
    use flatbuffers::{FlatBufferBuilder, WIPOffset};
    use proptest::prelude::*;

    /// One value a table field or a vector may hold.
    #[derive(Clone, Debug)]
    enum Val {
        U8(u8),
        I8(i8),
        Bool(bool),
        I16(i16),
        U32(u32),
        I32(i32),
        F32(f32),
        I64(i64),
        U64(u64),
        F64(f64),
        /// An offset to the object made `n` calls back (modulo the objects made).
        Obj(usize),
    }

    /// One builder call.
    #[derive(Clone, Debug)]
    enum Call {
        Table(Vec<(u16, Val)>),
        Bytes(Vec<u8>),
        I64s(Vec<i64>),
        F32s(Vec<f32>),
        I16s(Vec<i16>),
        Objs(Vec<usize>),
        Empty,
        Str(String),
        Pad(usize),
    }

    fn val() -> impl Strategy<Value = Val> {
        prop_oneof![
            any::<u8>().prop_map(Val::U8),
            any::<i8>().prop_map(Val::I8),
            any::<bool>().prop_map(Val::Bool),
            any::<i16>().prop_map(Val::I16),
            any::<u32>().prop_map(Val::U32),
            any::<i32>().prop_map(Val::I32),
            any::<f32>().prop_map(Val::F32),
            any::<i64>().prop_map(Val::I64),
            any::<u64>().prop_map(Val::U64),
            any::<f64>().prop_map(Val::F64),
            (0usize..8).prop_map(Val::Obj),
        ]
    }

    fn call() -> impl Strategy<Value = Call> {
        prop_oneof![
            4 => proptest::collection::btree_map(0u16..10, val(), 0..8)
                .prop_map(|m| Call::Table(m.into_iter().map(|(s, v)| (4 + 2 * s, v)).collect())),
            1 => proptest::collection::vec(any::<u8>(), 0..24).prop_map(Call::Bytes),
            1 => proptest::collection::vec(any::<i64>(), 0..6).prop_map(Call::I64s),
            1 => proptest::collection::vec(any::<f32>(), 0..6).prop_map(Call::F32s),
            1 => proptest::collection::vec(any::<i16>(), 0..6).prop_map(Call::I16s),
            1 => proptest::collection::vec(0usize..8, 0..6).prop_map(Call::Objs),
            1 => Just(Call::Empty),
            1 => "[a-z]{0,12}".prop_map(Call::Str),
            1 => (0usize..9).prop_map(Call::Pad),
        ]
    }

    /// The object `back` calls before the latest (the latest when there is none that far).
    fn pick(made: &[u32], back: usize) -> u32 {
        made.len().checked_sub(1 + back).map_or_else(|| made.last().copied().unwrap_or(0), |i| made[i])
    }

    fn ours(calls: &[Call], root: usize, id: bool) -> Vec<u8> {
        let mut b = Builder::with_capacity(16);
        let mut made: Vec<u32> = Vec::new();
        for c in calls {
            let at = match c {
                Call::Table(fields) => {
                    let start = b.start_table();
                    for (slot, v) in fields {
                        match *v {
                            Val::U8(x) => b.scalar_field(*slot, x),
                            Val::I8(x) => b.scalar_field(*slot, x),
                            Val::Bool(x) => b.scalar_field(*slot, x),
                            Val::I16(x) => b.scalar_field(*slot, x),
                            Val::U32(x) => b.scalar_field(*slot, x),
                            Val::I32(x) => b.scalar_field(*slot, x),
                            Val::F32(x) => b.scalar_field(*slot, x),
                            Val::I64(x) => b.scalar_field(*slot, x),
                            Val::U64(x) => b.scalar_field(*slot, x),
                            Val::F64(x) => b.scalar_field(*slot, x),
                            Val::Obj(n) => b.offset_field(*slot, pick(&made, n)),
                        }
                    }
                    b.end_table(start)
                }
                Call::Bytes(v) => b.scalars(v),
                Call::I64s(v) => b.scalars(v),
                Call::F32s(v) => b.scalars(v),
                Call::I16s(v) => b.scalars(v),
                Call::Objs(v) => b.offsets(&v.iter().map(|&n| pick(&made, n)).collect::<Vec<_>>()),
                Call::Empty => b.empty_vector(),
                Call::Str(s) => b.string(s),
                Call::Pad(n) => {
                    (0..*n).for_each(|_| {
                        b.scalar(0u8);
                    });
                    continue;
                }
            };
            made.push(at);
        }
        b.finish(pick(&made, root), id.then_some(b"ET12"));
        b.finished_data().to_vec()
    }

    fn crates(calls: &[Call], root: usize, id: bool) -> Vec<u8> {
        type Any = flatbuffers::UnionWIPOffset;
        let mut b = FlatBufferBuilder::with_capacity(16);
        let mut made: Vec<u32> = Vec::new();
        let off = |made: &[u32], n| WIPOffset::<Any>::new(pick(made, n));
        for c in calls {
            let at = match c {
                Call::Table(fields) => {
                    let start = b.start_table();
                    for (slot, v) in fields {
                        match *v {
                            Val::U8(x) => b.push_slot_always(*slot, x),
                            Val::I8(x) => b.push_slot_always(*slot, x),
                            Val::Bool(x) => b.push_slot_always(*slot, x),
                            Val::I16(x) => b.push_slot_always(*slot, x),
                            Val::U32(x) => b.push_slot_always(*slot, x),
                            Val::I32(x) => b.push_slot_always(*slot, x),
                            Val::F32(x) => b.push_slot_always(*slot, x),
                            Val::I64(x) => b.push_slot_always(*slot, x),
                            Val::U64(x) => b.push_slot_always(*slot, x),
                            Val::F64(x) => b.push_slot_always(*slot, x),
                            Val::Obj(n) => b.push_slot_always(*slot, off(&made, n)),
                        }
                    }
                    b.end_table(start).value()
                }
                Call::Bytes(v) => b.create_vector(v).value(),
                Call::I64s(v) => b.create_vector(v).value(),
                Call::F32s(v) => b.create_vector(v).value(),
                Call::I16s(v) => b.create_vector(v).value(),
                Call::Objs(v) => b.create_vector(&v.iter().map(|&n| off(&made, n)).collect::<Vec<_>>()).value(),
                Call::Empty => {
                    b.start_vector::<u8>(0);
                    b.end_vector::<u8>(0).value()
                }
                Call::Str(s) => b.create_string(s).value(),
                Call::Pad(n) => {
                    (0..*n).for_each(|_| {
                        b.push(0u8);
                    });
                    continue;
                }
            };
            made.push(at);
        }
        b.finish(off(&made, root), id.then_some("ET12"));
        b.finished_data().to_vec()
    }

    proptest! {
        // 2,000 cases, or PROPTEST_CASES when it asks for more.
        #![proptest_config(ProptestConfig { cases: ProptestConfig::default().cases.max(2000), ..ProptestConfig::default() })]
        /// Same calls, same bytes: layout, padding, vtable sharing and `finish`.
        #[test]
        fn lays_bytes_out_as_the_crate_builder_does(
            calls in proptest::collection::vec(call(), 1..40),
            root in 0usize..8,
            id: bool,
        ) {
            // One object at least: the crate's `finish` of an empty buffer pads without bound.
            let calls: Vec<Call> = std::iter::once(Call::Str("first".into())).chain(calls).collect();
            prop_assert_eq!(ours(&calls, root, id), crates(&calls, root, id));
        }
    }

    #[test]
    fn a_buffer_past_its_limit_is_reported_not_cut_short() {
        let mut b = Builder { limit: 64, ..Builder::with_capacity(8) };
        let s = b.string(&"x".repeat(40));
        assert!(!b.overflowed());
        let t = b.start_table();
        b.offset_field(4, s);
        b.scalar_field(6, 1u64);
        let t = b.end_table(t);
        b.finish(t, Some(b"ET12"));
        assert!(b.overflowed());
        assert!(b.finished_data().is_empty());
        b.reset();
        let s = b.string("x");
        b.finish(s, None);
        assert!(!b.overflowed());
        assert_eq!(b.finished_data().len(), 12);
    }

    #[test]
    fn a_reset_builder_lays_out_as_a_fresh_one() {
        let calls = [
            Call::Str("abc".into()),
            Call::Table(vec![(4, Val::I64(7)), (6, Val::Obj(0))]),
            Call::Table(vec![(4, Val::I64(8)), (6, Val::Obj(0))]),
            Call::Pad(3),
            Call::Bytes(vec![1, 2, 3]),
        ];
        let fresh = ours(&calls, 0, true);
        assert_eq!(fresh, crates(&calls, 0, true));
        let mut b = Builder::with_capacity(8);
        let s = b.string("something else entirely");
        let t = b.start_table();
        b.offset_field(4, s);
        let t = b.end_table(t);
        b.finish(t, None);
        b.reset();
        let s = b.string("abc");
        let mut made = vec![s];
        for v in [7i64, 8] {
            let t = b.start_table();
            b.scalar_field(4, v);
            b.offset_field(6, *made.last().unwrap_or(&0));
            made.push(b.end_table(t));
        }
        (0..3).for_each(|_| {
            b.scalar(0u8);
        });
        let v = b.scalars(&[1u8, 2, 3]);
        b.finish(v, Some(b"ET12"));
        assert_eq!(b.finished_data(), fresh.as_slice());
    }
}
