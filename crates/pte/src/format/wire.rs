//! The loader's reader of untrusted FlatBuffers bytes: verifies them by the `flatbuffers`
//! crate's verifier rules and decodes them into the owned [`Program`] in one pass.
//!
//! Owns the loader's hot path. The rules are the crate verifier's, kept exactly so that both
//! accept and reject the same buffers ([`super::oracle::decoders_agree`] holds the two against
//! each other in `tests/` and in the `load_pte` fuzz target):
//! - every scalar, offset and vtable entry read lies inside the buffer and is aligned to its own
//!   size, counted from the buffer's start;
//! - a table's signed vtable offset lands inside the buffer, the vtable's length is even and the
//!   vtable lies inside the buffer;
//! - a vector's length word and elements lie inside the buffer, elements aligned to their size;
//! - a string is valid UTF-8 followed by a NUL byte;
//! - a union's tag and value are both present or both absent; the value of a tag the schema
//!   does not declare is not followed;
//! - limits: table nesting depth, number of tables and apparent (tree-expanded) size, each
//!   counted as the crate counts it, so the same buffers hit the same limit.
//!
//! Decoding adds two rules of its own: every owned allocation is charged against a budget
//! proportional to the input (a shared-table bomb is refused, not expanded), and a union tag the
//! schema does not declare is refused with its field path. When a buffer breaks both a verifier
//! rule and a decoding rule, the verifier rule is reported wherever each lies, as a
//! verify-then-decode pipeline would.
//!
//! One schema walk serves every pass: decoding or verifying only (`BUILD`), and recording a
//! refusal's place and field path or nothing ([`Failure`]). The loader runs the pass that
//! records nothing; only a refused buffer is read again to say what is wrong and where.
//! May not touch: anything outside the FlatBuffers data (preamble, header, segments).

use super::FormatError;
use crate::program::*;
use std::ops::Range;

/// A decoded program with the byte ranges (within the FlatBuffers data) of its inline blobs.
#[derive(Debug)]
pub(crate) struct Decoded {
    /// The owned program.
    pub program: Program,
    /// `constant_buffer[i].storage`, when present.
    pub constant_storage: Vec<Option<Range<usize>>>,
    /// `backend_delegate_data[i].data`, when present.
    pub inline_data: Vec<Option<Range<usize>>>,
}

/// Most elements a vector of tables reserves before its elements verify; a longer one grows as
/// they do (`tests/decode_reservation.rs`: 200,000 declared values that break at the first are
/// refused within the fuzz targets' allocation guard).
const RESERVED_TABLES: usize = 1024;

/// Verifies and decodes `buf` (the FlatBuffers data of a file of `input_len` bytes).
///
/// The fast pass records nothing on the way; only what it refuses is read again, recording the
/// place and field path of the fault. When a buffer breaks both a verifier rule and a decoding
/// rule, the verifier rule is reported wherever each lies, as a verify-then-decode pipeline
/// would: the first decoding error triggers a verify-only pass.
pub(crate) fn decode(
    buf: &[u8],
    opts: &flatbuffers::VerifierOptions,
    input_len: usize,
) -> Result<Decoded, FormatError> {
    if let Ok(decoded) = Reader::<true, Refused>::new(buf, opts, input_len).root() {
        return Ok(decoded);
    }
    match Reader::<true, Box<Fail>>::new(buf, opts, input_len).root() {
        Ok(decoded) => Ok(decoded),
        Err(first) if first.kind.is_decoding() => match Reader::<false, Box<Fail>>::new(buf, opts, input_len).root() {
            Err(verifier) => Err(verifier.into_error(buf.len())),
            Ok(_) => Err(first.into_error(buf.len())),
        },
        Err(e) => Err(e.into_error(buf.len())),
    }
}

/// The verifier's rules alone on `buf`, building nothing (what a reader that decodes on demand
/// does up front), with the place and field path of the fault when refused.
pub(crate) fn verify(buf: &[u8], opts: &flatbuffers::VerifierOptions, input_len: usize) -> Result<(), FormatError> {
    if Reader::<false, Refused>::new(buf, opts, input_len).root().is_ok() {
        return Ok(());
    }
    Reader::<false, Box<Fail>>::new(buf, opts, input_len).root().map(drop).map_err(|e| e.into_error(buf.len()))
}

/// Whether the pass that records nothing and the pass that names the fault reach the same
/// verdict on `buf`, decoding and verifying only. The loader trusts the first when it accepts
/// and asks the second when it refuses, so a first pass that refused too much would only slow
/// loading down: [`super::oracle::decoders_agree`] checks this too, in `tests/` and the
/// `load_pte` fuzz target.
pub(crate) fn passes_agree(buf: &[u8], opts: &flatbuffers::VerifierOptions, input_len: usize) -> Result<(), String> {
    let verdict = |ok: bool| if ok { "accepts" } else { "refuses" };
    let [decoding, named_decoding, verifying, named_verifying] = verdicts(buf, opts, input_len);
    for (what, (fast, named)) in
        [("decoding", (decoding, named_decoding)), ("verifying only", (verifying, named_verifying))]
    {
        if fast != named {
            return Err(format!(
                "{what}, the pass that records nothing {} and the pass that names the fault {}",
                verdict(fast),
                verdict(named)
            ));
        }
    }
    Ok(())
}

/// Whether each pass accepts `buf`: decoding recording nothing, decoding naming the fault,
/// verifying only recording nothing, verifying only naming the fault.
fn verdicts(buf: &[u8], opts: &flatbuffers::VerifierOptions, input_len: usize) -> [bool; 4] {
    [
        Reader::<true, Refused>::new(buf, opts, input_len).root().is_ok(),
        Reader::<true, Box<Fail>>::new(buf, opts, input_len).root().is_ok(),
        Reader::<false, Refused>::new(buf, opts, input_len).root().is_ok(),
        Reader::<false, Box<Fail>>::new(buf, opts, input_len).root().is_ok(),
    ]
}

/// What is wrong, at the byte position of the failure.
#[derive(Debug)]
enum Kind {
    Unaligned { ty: &'static str },
    OutOfBounds { end: usize },
    SignedOffset { soffset: i32 },
    Utf8 { end: usize },
    NoTerminator { end: usize },
    InconsistentUnion { union: &'static str },
    TooManyTables,
    TooDeep,
    TooLarge,
    UnknownTag { union: &'static str, tag: u8 },
    Budget { budget: usize },
}

impl Kind {
    fn is_decoding(&self) -> bool {
        matches!(self, Kind::UnknownTag { .. } | Kind::Budget { .. })
    }
}

/// One step of a field path.
#[derive(Debug)]
enum Step {
    Field(&'static str),
    Index(usize),
    Variant(&'static str),
}

#[derive(Debug)]
struct Fail {
    kind: Kind,
    pos: usize,
    /// Innermost step first.
    path: Vec<Step>,
    input_len: usize,
}

impl Fail {
    fn path(&self) -> String {
        let mut out = String::new();
        for step in self.path.iter().rev() {
            match step {
                Step::Field(name) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(name);
                }
                Step::Index(i) => out.push_str(&format!("[{i}]")),
                Step::Variant(v) => out.push_str(&format!("<{v}>")),
            }
        }
        if out.is_empty() { "Program".into() } else { out }
    }

    fn into_error(self, len: usize) -> FormatError {
        let path = self.path();
        let pos = self.pos;
        let at = format!("at {path} (byte {pos} of {len})");
        match self.kind {
            Kind::Unaligned { ty } => FormatError::Malformed { detail: format!("{ty} not aligned to its size {at}") },
            Kind::OutOfBounds { end } => {
                FormatError::Malformed { detail: format!("range [{pos}, {end}) out of bounds {at}") }
            }
            Kind::SignedOffset { soffset } => {
                FormatError::Malformed { detail: format!("vtable offset {soffset} points outside the buffer {at}") }
            }
            Kind::Utf8 { end } => FormatError::Malformed { detail: format!("string [{pos}, {end}) is not UTF-8 {at}") },
            Kind::NoTerminator { end } => {
                FormatError::Malformed { detail: format!("string [{pos}, {end}) lacks its NUL terminator {at}") }
            }
            Kind::InconsistentUnion { union } => FormatError::Malformed {
                detail: format!("{union} union has a tag without a value or a value without a tag {at}"),
            },
            Kind::TooManyTables => FormatError::VerifierLimit { detail: format!("too many tables {at}") },
            Kind::TooDeep => FormatError::VerifierLimit { detail: format!("tables nested past the depth limit {at}") },
            Kind::TooLarge => FormatError::VerifierLimit { detail: format!("apparent size too large {at}") },
            Kind::UnknownTag { union, tag } => FormatError::UnknownUnionTag { union, tag, path },
            Kind::Budget { budget } => FormatError::DecodeBudgetExceeded { budget, input_len: self.input_len, path },
        }
    }
}

/// How a pass records a refusal: [`Fail`], with its place and field path, or [`Refused`], with
/// nothing (the fast pass; what it refuses is read again with [`Fail`] to say why).
trait Failure: Sized {
    /// Whether the apparent-size limit is checked at the read that passes it (else at the next
    /// table and at the end of the walk).
    const EXACT: bool;
    /// A refusal of `kind` at byte `pos` of a file of `input_len` bytes.
    fn new(kind: Kind, pos: usize, input_len: usize) -> Self;
    /// Adds a step to the path on the way out.
    fn step(self, step: Step) -> Self;
}

impl Failure for Box<Fail> {
    const EXACT: bool = true;
    #[cold]
    fn new(kind: Kind, pos: usize, input_len: usize) -> Self {
        Box::new(Fail { kind, pos, path: Vec::new(), input_len })
    }
    #[inline]
    fn step(mut self, step: Step) -> Self {
        self.path.push(step);
        self
    }
}

/// A refusal that records nothing.
#[derive(Debug)]
struct Refused;

impl Failure for Refused {
    const EXACT: bool = false;
    #[inline(always)]
    fn new(_: Kind, _: usize, _: usize) -> Self {
        Refused
    }
    #[inline(always)]
    fn step(self, _: Step) -> Self {
        self
    }
}

type R<T, E> = Result<T, E>;

/// Adds a step to the path of a failure on its way out.
trait Trace {
    fn field(self, name: &'static str) -> Self;
    fn index(self, i: usize) -> Self;
}

impl<T, E: Failure> Trace for R<T, E> {
    #[inline(always)]
    fn field(self, name: &'static str) -> Self {
        self.map_err(|e| e.step(Step::Field(name)))
    }
    #[inline(always)]
    fn index(self, i: usize) -> Self {
        self.map_err(|e| e.step(Step::Index(i)))
    }
}

/// A little-endian scalar as FlatBuffers stores it.
trait Scalar: Sized + Copy {
    /// Size in bytes.
    const SIZE: usize;
    /// Alignment the verifier requires: the Rust type's, as the crate checks it.
    const ALIGN: usize = std::mem::align_of::<Self>();
    /// Name in errors.
    const NAME: &'static str;
    /// The value at the start of `b` (`None` if `b` is short).
    fn from(b: &[u8]) -> Option<Self>;
}

macro_rules! scalar {
    ($($t:ty = $n:literal),+) => {$(
        impl Scalar for $t {
            const SIZE: usize = $n;
            const NAME: &'static str = stringify!($t);
            #[inline]
            fn from(b: &[u8]) -> Option<Self> {
                b.first_chunk::<$n>().map(|a| <$t>::from_le_bytes(*a))
            }
        }
    )+};
}
scalar!(u8 = 1, i8 = 1, u16 = 2, i32 = 4, u32 = 4, i64 = 8, u64 = 8, f64 = 8);

impl Scalar for bool {
    const SIZE: usize = 1;
    const NAME: &'static str = "bool";
    #[inline]
    fn from(b: &[u8]) -> Option<Self> {
        b.first().map(|&v| v != 0)
    }
}

/// A verified table: its position, its vtable's position and bytes.
struct Table<'b> {
    pos: usize,
    /// The vtable's position.
    vtable_at: usize,
    /// The vtable's bytes.
    vtable: &'b [u8],
}

/// `BUILD`: decode into the owned model (else verify only: nothing is allocated or charged, the
/// decoding rules are off).
struct Reader<'b, const BUILD: bool, E> {
    refusal: std::marker::PhantomData<E>,
    buf: &'b [u8],
    max_depth: usize,
    max_tables: usize,
    max_apparent: usize,
    depth: usize,
    tables: usize,
    apparent: usize,
    /// Whether a string must be followed by a NUL byte (the options' negation).
    terminated_strings: bool,
    used: usize,
    budget: usize,
    input_len: usize,
}

impl<'b, const BUILD: bool, E: Failure> Reader<'b, BUILD, E> {
    fn new(buf: &'b [u8], opts: &flatbuffers::VerifierOptions, input_len: usize) -> Self {
        Reader {
            refusal: std::marker::PhantomData,
            buf,
            max_depth: opts.max_depth,
            max_tables: opts.max_tables,
            max_apparent: opts.max_apparent_size,
            depth: 0,
            tables: 0,
            apparent: 0,
            terminated_strings: !opts.ignore_missing_null_terminator,
            used: 0,
            // Owned values are larger than their wire form (an EValue is ~100 bytes, its wire
            // offset 4): allow a generous multiple of the input, plus a floor for tiny inputs.
            budget: input_len.saturating_mul(48).saturating_add(1 << 20),
            input_len,
        }
    }

    fn fail<T>(&self, kind: Kind, pos: usize) -> R<T, E> {
        Err(E::new(kind, pos, self.input_len))
    }

    // ---- verifier primitives (each mirrors one of the crate's checks and its accounting) ----

    #[inline(always)]
    fn range(&mut self, pos: usize, size: usize) -> R<(), E> {
        let end = pos.saturating_add(size);
        if end > self.buf.len() {
            return self.fail(Kind::OutOfBounds { end }, pos);
        }
        self.count(pos, size)
    }

    /// Adds `size` bytes read at `pos` to the apparent size, checked against its limit here
    /// when the pass records where a refusal lies, else at the next table and at the end (the
    /// size only grows, so both passes refuse the same buffers).
    #[inline(always)]
    fn count(&mut self, pos: usize, size: usize) -> R<(), E> {
        self.apparent = self.apparent.saturating_add(size);
        if E::EXACT { self.within_apparent(pos) } else { Ok(()) }
    }

    #[inline(always)]
    fn within_apparent(&self, pos: usize) -> R<(), E> {
        if self.apparent > self.max_apparent { self.fail(Kind::TooLarge, pos) } else { Ok(()) }
    }

    #[inline(always)]
    fn aligned(&self, pos: usize, align: usize, ty: &'static str) -> R<(), E> {
        if pos.is_multiple_of(align) { Ok(()) } else { self.fail(Kind::Unaligned { ty }, pos) }
    }

    #[inline(always)]
    fn read<S: Scalar>(&mut self, pos: usize) -> R<S, E> {
        self.aligned(pos, S::ALIGN, S::NAME)?;
        match self.buf.get(pos..).and_then(S::from) {
            Some(v) => {
                self.count(pos, S::SIZE)?;
                Ok(v)
            }
            None => self.fail(Kind::OutOfBounds { end: pos.saturating_add(S::SIZE) }, pos),
        }
    }

    /// Follows the unsigned offset stored at `pos`.
    #[inline(always)]
    fn offset(&mut self, pos: usize) -> R<usize, E> {
        let off: u32 = self.read(pos)?;
        Ok((off as usize).saturating_add(pos))
    }

    /// The element range of the vector at `pos`, of elements `size` bytes long aligned to
    /// `align`: `(start, len)`.
    #[inline(always)]
    fn vector(&mut self, pos: usize, size: usize, align: usize, ty: &'static str) -> R<(usize, usize), E> {
        let len = self.read::<u32>(pos)? as usize;
        let start = pos.saturating_add(4);
        self.aligned(start, align, ty)?;
        self.range(start, len.saturating_mul(size))?;
        Ok((start, len))
    }

    #[inline(always)]
    fn table(&mut self, pos: usize) -> R<Table<'b>, E> {
        if !E::EXACT {
            self.within_apparent(pos)?;
        }
        let soffset: i32 = self.read(pos)?;
        let magnitude = soffset.unsigned_abs() as usize;
        let vtable = if soffset > 0 { pos.checked_sub(magnitude) } else { pos.checked_add(magnitude) };
        let vtable = match vtable {
            Some(v) if v < self.buf.len() => v,
            _ => return self.fail(Kind::SignedOffset { soffset }, pos),
        };
        let vtable_len = self.read::<u16>(vtable)? as usize;
        self.aligned(vtable.saturating_add(vtable_len), u16::ALIGN, "u16")?;
        // The vtable's range, as `range` checks and counts it, kept as the table's slot bytes.
        let buf = self.buf;
        let Some(bytes) = buf.get(vtable..vtable.saturating_add(vtable_len)) else {
            return self.fail(Kind::OutOfBounds { end: vtable.saturating_add(vtable_len) }, vtable);
        };
        self.count(vtable, vtable_len)?;
        self.tables += 1;
        if self.tables > self.max_tables {
            return self.fail(Kind::TooManyTables, pos);
        }
        self.depth += 1;
        if self.depth > self.max_depth {
            return self.fail(Kind::TooDeep, pos);
        }
        Ok(Table { pos, vtable_at: vtable, vtable: bytes })
    }

    #[inline(always)]
    fn done(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Position of the field in vtable slot `slot`, if present.
    #[inline(always)]
    fn slot(&mut self, t: &Table<'_>, slot: usize) -> R<Option<usize>, E> {
        // The vtable was verified whole ([vtable, vtable + len) inside the buffer, its start
        // aligned to 2, its length even) and every slot is even, so a slot below the length
        // lies inside it, aligned: only the apparent size is counted, as the crate counts it.
        let Some(off) = t.vtable.get(slot..).and_then(<u16 as Scalar>::from) else { return Ok(None) };
        self.count(t.vtable_at.saturating_add(slot), 2)?;
        Ok(if off > 0 { Some(t.pos.saturating_add(off as usize)) } else { None })
    }

    // ---- decoding helpers: verify a field and produce its owned value ----

    fn charge(&mut self, bytes: usize) -> R<(), E> {
        if !BUILD {
            return Ok(());
        }
        self.used = self.used.saturating_add(bytes);
        if self.used > self.budget {
            return self.fail(Kind::Budget { budget: self.budget }, 0);
        }
        Ok(())
    }

    #[inline(always)]
    fn scalar<S: Scalar>(&mut self, t: &Table<'_>, slot: usize, default: S, name: &'static str) -> R<S, E> {
        match self.slot(t, slot)? {
            Some(p) => self.read(p).field(name),
            None => Ok(default),
        }
    }

    /// Verifies the string whose offset is at `pos` and returns it, unowned (verifying only, an
    /// ASCII string comes back empty: the text is not used).
    fn str_at(&mut self, pos: usize) -> R<&'b str, E> {
        let at = self.offset(pos)?;
        let (start, len) = self.vector(at, 1, 1, "u8")?;
        let end = start + len;
        let buf = self.buf;
        let Some(bytes) = buf.get(start..end) else { return self.fail(Kind::OutOfBounds { end }, start) };
        let terminated = buf.get(end) == Some(&0);
        // Verifying only, the text is not needed: ASCII (the common case) is checked a word at
        // a time.
        let s = if !BUILD && bytes.is_ascii() { Ok("") } else { std::str::from_utf8(bytes) };
        let Ok(s) = s else { return self.fail(Kind::Utf8 { end }, start) };
        if self.terminated_strings && !terminated {
            return self.fail(Kind::NoTerminator { end }, start);
        }
        Ok(s)
    }

    /// An owned copy of a verified string, charged against the budget.
    fn own(&mut self, s: &str) -> R<String, E> {
        self.charge(s.len() + 24)?;
        Ok(if BUILD { s.to_owned() } else { String::new() })
    }

    fn string(&mut self, t: &Table<'_>, slot: usize, name: &'static str) -> R<Option<String>, E> {
        let Some(p) = self.slot(t, slot)? else { return Ok(None) };
        let s = self.str_at(p).field(name)?;
        self.own(s).field(name).map(Some)
    }

    /// The byte range of the `[ubyte]` vector in `slot`, verified (not yet charged).
    fn byte_range(&mut self, t: &Table<'_>, slot: usize, name: &'static str) -> R<Option<Range<usize>>, E> {
        let Some(p) = self.slot(t, slot)? else { return Ok(None) };
        let at = self.offset(p).field(name)?;
        let (start, len) = self.vector(at, 1, 1, "u8").field(name)?;
        Ok(Some(start..start + len))
    }

    fn own_bytes(&mut self, range: Option<Range<usize>>, name: &'static str) -> R<Option<Bytes>, E> {
        let Some(range) = range else { return Ok(None) };
        self.charge(range.len() + 24).field(name)?;
        if !BUILD {
            return Ok(Some(Bytes::default()));
        }
        match self.buf.get(range.clone()) {
            Some(b) => Ok(Some(Bytes(b.to_vec()))),
            None => self.fail(Kind::OutOfBounds { end: range.end }, range.start).field(name),
        }
    }

    fn bytes(&mut self, t: &Table<'_>, slot: usize, name: &'static str) -> R<Option<Bytes>, E> {
        let range = self.byte_range(t, slot, name)?;
        self.own_bytes(range, name)
    }

    fn scalars<S: Scalar>(&mut self, t: &Table<'_>, slot: usize, name: &'static str) -> R<Option<Vec<S>>, E> {
        let Some(p) = self.slot(t, slot)? else { return Ok(None) };
        let at = self.offset(p).field(name)?;
        let (start, len) = self.vector(at, S::SIZE, S::ALIGN, S::NAME).field(name)?;
        self.charge(len * std::mem::size_of::<S>() + 24).field(name)?;
        if !BUILD {
            return Ok(Some(Vec::new()));
        }
        let bytes = match self.buf.get(start..start + len * S::SIZE) {
            Some(b) => b,
            None => return self.fail(Kind::OutOfBounds { end: start + len * S::SIZE }, start).field(name),
        };
        // Charged above: the exact length is reserved, not grown into.
        let mut out = Vec::with_capacity(len);
        out.extend(bytes.chunks_exact(S::SIZE).filter_map(S::from));
        Ok(Some(out))
    }

    /// Verifies the vector of tables in `slot` and decodes each element with `each`, charging
    /// `up_front.0` bytes per element plus `up_front.1` before decoding any, and `per_element`
    /// before each one.
    fn tables<T>(
        &mut self,
        t: &Table<'_>,
        slot: usize,
        name: &'static str,
        up_front: (usize, usize),
        per_element: usize,
        mut each: impl FnMut(&mut Self, Table<'b>) -> R<T, E>,
    ) -> R<Option<Vec<T>>, E> {
        let Some(p) = self.slot(t, slot)? else { return Ok(None) };
        let at = self.offset(p).field(name)?;
        let (start, len) = self.vector(at, 4, u32::ALIGN, "offset").field(name)?;
        if up_front != (0, 0) {
            self.charge(len.saturating_mul(up_front.0).saturating_add(up_front.1)).field(name)?;
        }
        // Reserved from the declared length, so that a vector is allocated once rather than
        // grown element by element, but only up to RESERVED_TABLES elements and never more
        // than the budget has left (the reservation is not charged; each element is, as it
        // verifies): an owned element is up to ~60 times its 4-byte offset and a bad element
        // may end the vector early, so what a refused file makes the loader allocate stays
        // bounded by the cap on each vector being decoded, however long its declared length.
        let mut out = if BUILD {
            let affordable = self.budget.saturating_sub(self.used) / std::mem::size_of::<T>().max(1);
            Vec::with_capacity(len.min(affordable).min(RESERVED_TABLES))
        } else {
            Vec::new()
        };
        for i in 0..len {
            let element = self.element(start + 4 * i, per_element, &mut each).index(i).field(name)?;
            if BUILD {
                out.push(element);
            }
        }
        Ok(Some(out))
    }

    /// Follows the table offset at `pos`, charges `charge` bytes, decodes the table with `f`.
    fn element<T>(&mut self, pos: usize, charge: usize, f: impl FnOnce(&mut Self, Table<'b>) -> R<T, E>) -> R<T, E> {
        let at = self.offset(pos)?;
        let table = self.table(at)?;
        if charge > 0 {
            self.charge(charge)?;
        }
        let value = f(self, table)?;
        self.done();
        Ok(value)
    }

    /// Verifies the table in `slot` and decodes it with `f`.
    fn child<T>(
        &mut self,
        t: &Table<'_>,
        slot: usize,
        name: &'static str,
        f: impl FnOnce(&mut Self, Table<'b>) -> R<T, E>,
    ) -> R<Option<T>, E> {
        let Some(p) = self.slot(t, slot)? else { return Ok(None) };
        self.element(p, 0, f).field(name).map(Some)
    }

    /// A union: its tag in `slot`, its value in `slot + 2`. Returns the tag and the value's
    /// table (`None` for a tag the schema does not declare, whose value is not followed).
    fn union(&mut self, t: &Table<'_>, slot: usize, union: &'static str, known: u8) -> R<(u8, Option<Table<'b>>), E> {
        let value = self.slot(t, slot + 2)?;
        let key = self.slot(t, slot)?;
        match (key, value) {
            (None, None) => Ok((0, None)),
            (Some(k), Some(v)) => {
                let tag: u8 = self.read(k)?;
                if tag == 0 || tag > known {
                    return Ok((tag, None));
                }
                let pos = self.offset(v)?;
                Ok((tag, Some(self.table(pos)?)))
            }
            (Some(k), None) => self.fail(Kind::InconsistentUnion { union }, k),
            (None, Some(v)) => self.fail(Kind::InconsistentUnion { union }, v),
        }
    }

    /// A union tag the schema does not declare: refused while decoding, skipped when verifying.
    fn unknown_tag(&self, union: &'static str, tag: u8, tag_field: &'static str) -> R<(), E> {
        if BUILD { self.fail(Kind::UnknownTag { union, tag }, 0).field(tag_field) } else { Ok(()) }
    }

    // ---- the schema, table by table, fields in slot order ----

    fn root(&mut self) -> R<Decoded, E> {
        let pos = self.offset(0)?;
        let t = self.table(pos)?;
        let mut constant_storage = Vec::new();
        let mut inline_data = Vec::new();
        let version = self.scalar(&t, 4, 0u32, "version")?;
        let execution_plan =
            self.tables(&t, 6, "execution_plan", (std::mem::size_of::<ExecutionPlan>(), 0), 0, Self::plan)?;
        let constant_buffer =
            self.tables(&t, 8, "constant_buffer", (0, 0), std::mem::size_of::<Buffer>(), |r, b| {
                let range = r.byte_range(&b, 4, "storage")?;
                constant_storage.push(range.clone());
                Ok(Buffer { storage: r.own_bytes(range, "storage")? })
            })?;
        let backend_delegate_data = self.tables(
            &t,
            10,
            "backend_delegate_data",
            (0, 0),
            std::mem::size_of::<BackendDelegateInlineData>(),
            |r, b| {
                let range = r.byte_range(&b, 4, "data")?;
                inline_data.push(range.clone());
                Ok(BackendDelegateInlineData { data: r.own_bytes(range, "data")? })
            },
        )?;
        let segments = self.segments(&t)?;
        let constant_segment = self.child(&t, 14, "constant_segment", Self::subsegment)?;
        let mutable_data_segments = self.tables(&t, 16, "mutable_data_segments", (0, 0), 0, Self::subsegment)?;
        let named_data = self.tables(&t, 18, "named_data", (0, 0), std::mem::size_of::<NamedData>(), |r, n| {
            Ok(NamedData { key: r.string(&n, 4, "key")?, segment_index: r.scalar(&n, 6, 0, "segment_index")? })
        })?;
        self.done();
        self.within_apparent(pos)?;
        let program = Program {
            version,
            execution_plan,
            constant_buffer,
            backend_delegate_data,
            segments,
            constant_segment,
            mutable_data_segments,
            named_data,
        };
        Ok(Decoded { program, constant_storage, inline_data })
    }

    fn segments(&mut self, t: &Table<'_>) -> R<Option<Vec<DataSegment>>, E> {
        // Charged as one block before the elements, as 16 bytes per segment.
        self.tables(t, 12, "segments", (16, 24), 0, |r, s| {
            Ok(DataSegment { offset: r.scalar(&s, 4, 0, "offset")?, size: r.scalar(&s, 6, 0, "size")? })
        })
    }

    fn subsegment(&mut self, t: Table<'b>) -> R<SubsegmentOffsets, E> {
        Ok(SubsegmentOffsets {
            segment_index: self.scalar(&t, 4, 0, "segment_index")?,
            offsets: self.scalars(&t, 6, "offsets")?,
        })
    }

    fn plan(&mut self, t: Table<'b>) -> R<ExecutionPlan, E> {
        let name = self.string(&t, 4, "name")?;
        let container_meta_type = self.child(&t, 6, "container_meta_type", |r, c| {
            Ok(ContainerMetadata {
                encoded_inp_str: r.string(&c, 4, "encoded_inp_str")?,
                encoded_out_str: r.string(&c, 6, "encoded_out_str")?,
            })
        })?;
        let values = self.tables(&t, 8, "values", (std::mem::size_of::<EValue>(), 0), 0, Self::evalue)?;
        let inputs = self.scalars(&t, 10, "inputs")?;
        let outputs = self.scalars(&t, 12, "outputs")?;
        let chains = self.tables(&t, 14, "chains", (0, 0), std::mem::size_of::<Chain>(), Self::chain)?;
        let operators = self.tables(&t, 16, "operators", (0, 0), std::mem::size_of::<Operator>(), |r, o| {
            Ok(Operator { name: r.string(&o, 4, "name")?, overload: r.string(&o, 6, "overload")? })
        })?;
        let delegates =
            self.tables(&t, 18, "delegates", (0, 0), std::mem::size_of::<BackendDelegate>(), Self::delegate)?;
        let non_const_buffer_sizes = self.scalars(&t, 20, "non_const_buffer_sizes")?;
        let non_const_buffer_device = self.buffer_devices(&t)?;
        Ok(ExecutionPlan {
            name,
            container_meta_type,
            values,
            inputs,
            outputs,
            chains,
            operators,
            delegates,
            non_const_buffer_sizes,
            non_const_buffer_device,
        })
    }

    fn buffer_devices(&mut self, t: &Table<'_>) -> R<Option<Vec<NonConstBufferDevice>>, E> {
        self.tables(t, 22, "non_const_buffer_device", (16, 24), 0, |r, d| {
            Ok(NonConstBufferDevice {
                buffer_idx: r.scalar(&d, 4, 0, "buffer_idx")?,
                device_type: DeviceType(r.scalar(&d, 6, 0i8, "device_type")?),
                device_index: r.scalar(&d, 8, 0, "device_index")?,
            })
        })
    }

    fn delegate(&mut self, t: Table<'b>) -> R<BackendDelegate, E> {
        // The id is verified first (slot order) and charged after the compile specs.
        let id = match self.slot(&t, 4)? {
            None => None,
            Some(p) => Some(self.str_at(p).field("id")?),
        };
        let processed = self.child(&t, 6, "processed", |r, p| {
            Ok(BackendDelegateDataReference {
                location: DataLocation(r.scalar(&p, 4, 0i8, "location")?),
                index: r.scalar(&p, 6, 0, "index")?,
            })
        })?;
        let compile_specs =
            self.tables(&t, 8, "compile_specs", (0, 0), std::mem::size_of::<CompileSpec>(), |r, s| {
                Ok(CompileSpec { key: r.string(&s, 4, "key")?, value: r.bytes(&s, 6, "value")? })
            })?;
        let id = match id {
            None => None,
            Some(s) => Some(self.own(s).field("id")?),
        };
        Ok(BackendDelegate { id, processed, compile_specs })
    }

    fn chain(&mut self, t: Table<'b>) -> R<Chain, E> {
        let inputs = self.scalars(&t, 4, "inputs")?;
        let outputs = self.scalars(&t, 6, "outputs")?;
        let instructions =
            self.tables(&t, 8, "instructions", (std::mem::size_of::<Instruction>(), 0), 0, Self::instruction)?;
        let stacktrace = self.tables(&t, 10, "stacktrace", (0, 0), std::mem::size_of::<FrameList>(), |r, l| {
            let items = r.tables(&l, 4, "items", (0, 0), std::mem::size_of::<Frame>(), |r, f| {
                Ok(Frame {
                    filename: r.string(&f, 4, "filename")?,
                    lineno: r.scalar(&f, 6, 0, "lineno")?,
                    name: r.string(&f, 8, "name")?,
                    context: r.string(&f, 10, "context")?,
                })
            })?;
            Ok(FrameList { items })
        })?;
        Ok(Chain { inputs, outputs, instructions, stacktrace })
    }

    fn instruction(&mut self, t: Table<'b>) -> R<Instruction, E> {
        const UNION: &str = "InstructionArguments";
        let (tag, value) = self.union(&t, 4, UNION, 5).field("instr_args")?;
        let Some(v) = value else {
            self.unknown_tag(UNION, tag, "instr_args_type")?;
            return Ok(Instruction::FreeCall(FreeCall { value_index: 0 }));
        };
        let ins = in_variant(self.instruction_args(tag, &v), INSTRUCTION_NAMES[usize::from(tag)], "instr_args")?;
        self.done();
        Ok(ins)
    }

    fn instruction_args(&mut self, tag: u8, v: &Table<'_>) -> R<Instruction, E> {
        Ok(match tag {
            1 => Instruction::KernelCall(KernelCall {
                op_index: self.scalar(v, 4, 0, "op_index")?,
                args: self.scalars(v, 6, "args")?,
            }),
            2 => Instruction::DelegateCall(DelegateCall {
                delegate_index: self.scalar(v, 4, 0, "delegate_index")?,
                args: self.scalars(v, 6, "args")?,
            }),
            3 => Instruction::MoveCall(MoveCall {
                move_from: self.scalar(v, 4, 0, "move_from")?,
                move_to: self.scalar(v, 6, 0, "move_to")?,
            }),
            4 => Instruction::JumpFalseCall(JumpFalseCall {
                cond_value_index: self.scalar(v, 4, 0, "cond_value_index")?,
                destination_instruction: self.scalar(v, 6, 0, "destination_instruction")?,
            }),
            _ => Instruction::FreeCall(FreeCall { value_index: self.scalar(v, 4, 0, "value_index")? }),
        })
    }

    fn evalue(&mut self, t: Table<'b>) -> R<EValue, E> {
        const UNION: &str = "KernelTypes";
        let (tag, value) = self.union(&t, 4, UNION, 11).field("val")?;
        let Some(v) = value else {
            self.unknown_tag(UNION, tag, "val_type")?;
            return Ok(EValue::Null);
        };
        let value = in_variant(self.evalue_value(tag, &v), KERNEL_TYPE_NAMES[usize::from(tag)], "val")?;
        self.done();
        Ok(value)
    }

    fn evalue_value(&mut self, tag: u8, v: &Table<'_>) -> R<EValue, E> {
        Ok(match tag {
            1 => EValue::Null,
            2 => EValue::Int(self.scalar(v, 4, 0, "int_val")?),
            3 => EValue::Bool(self.scalar(v, 4, false, "bool_val")?),
            4 => EValue::Double(self.scalar(v, 4, 0.0, "double_val")?),
            5 => EValue::Tensor(self.tensor(v)?),
            6 => EValue::String(self.string(v, 4, "string_val")?),
            7 => EValue::IntList(self.scalars(v, 4, "items")?),
            8 => EValue::DoubleList(self.scalars(v, 4, "items")?),
            9 => EValue::BoolList(self.scalars(v, 4, "items")?),
            10 => EValue::TensorList(self.scalars(v, 4, "items")?),
            _ => EValue::OptionalTensorList(self.scalars(v, 4, "items")?),
        })
    }

    fn tensor(&mut self, t: &Table<'_>) -> R<Tensor, E> {
        let scalar_type = ScalarType(self.scalar(t, 4, 0i8, "scalar_type")?);
        let storage_offset = self.scalar(t, 6, 0, "storage_offset")?;
        let sizes = self.scalars(t, 8, "sizes")?;
        let dim_order = self.scalars(t, 10, "dim_order")?;
        let requires_grad = self.scalar(t, 12, false, "requires_grad")?;
        let data_buffer_idx = self.scalar(t, 14, 0, "data_buffer_idx")?;
        let allocation_info = self.child(t, 16, "allocation_info", |r, a| {
            Ok(AllocationDetails {
                memory_id: r.scalar(&a, 4, 0, "memory_id")?,
                memory_offset_low: r.scalar(&a, 6, 0, "memory_offset_low")?,
                memory_offset_high: r.scalar(&a, 8, 0, "memory_offset_high")?,
            })
        })?;
        let layout = self.scalar(t, 18, 0, "layout")?;
        let shape_dynamism = TensorShapeDynamism(self.scalar(t, 20, 0i8, "shape_dynamism")?);
        let extra_tensor_info = self.child(t, 22, "extra_tensor_info", |r, x| {
            Ok(ExtraTensorInfo {
                mutable_data_segments_idx: r.scalar(&x, 4, 0, "mutable_data_segments_idx")?,
                fully_qualified_name: r.string(&x, 6, "fully_qualified_name")?,
                location: TensorDataLocation(r.scalar(&x, 8, 0i8, "location")?),
                device_type: DeviceType(r.scalar(&x, 10, 0i8, "device_type")?),
                device_index: r.scalar(&x, 12, 0, "device_index")?,
            })
        })?;
        Ok(Tensor {
            scalar_type,
            storage_offset,
            sizes,
            dim_order,
            requires_grad,
            layout,
            data_buffer_idx,
            allocation_info,
            shape_dynamism,
            extra_tensor_info,
        })
    }
}

/// Adds `field<variant>` to the path of a failure inside a union's value.
fn in_variant<T, E: Failure>(r: R<T, E>, variant: &'static str, field: &'static str) -> R<T, E> {
    r.map_err(|e| e.step(Step::Variant(variant)).step(Step::Field(field)))
}

/// `KernelTypes` member names by tag (0 = NONE).
const KERNEL_TYPE_NAMES: [&str; 12] = [
    "NONE",
    "Null",
    "Int",
    "Bool",
    "Double",
    "Tensor",
    "String",
    "IntList",
    "DoubleList",
    "BoolList",
    "TensorList",
    "OptionalTensorList",
];

/// `InstructionArguments` member names by tag (0 = NONE).
const INSTRUCTION_NAMES: [&str; 6] = ["NONE", "KernelCall", "DelegateCall", "MoveCall", "JumpFalseCall", "FreeCall"];

#[cfg(test)]
mod tests {
    //! The pass that records nothing against the pass that names the fault, at the limits.
    use super::*;
    use crate::format::generated::executorch_flatbuffer as fb;
    use crate::format::read::region;
    use flatbuffers::{FlatBufferBuilder, VerifierOptions};

    fn options(max_apparent_size: usize) -> VerifierOptions {
        VerifierOptions { max_apparent_size, ..crate::format::verifier_options(0) }
    }

    fn corpus() -> Vec<Vec<u8>> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../corpus/real");
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .expect("corpus/real")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "pte"))
            .collect();
        files.sort();
        files.iter().map(|p| std::fs::read(p).expect("read")).collect()
    }

    #[test]
    fn every_pass_and_the_crate_draw_the_apparent_size_line_at_the_same_byte() {
        let files = corpus();
        assert!(files.len() >= 17);
        for file in &files {
            let buf = region(file).expect("region").program_data;
            let mut probe = Reader::<false, Box<Fail>>::new(buf, &options(usize::MAX), buf.len());
            probe.root().map_err(|e| e.into_error(buf.len())).expect("verifies");
            let exact = probe.apparent;
            assert_eq!(verdicts(buf, &options(exact), buf.len()), [true; 4], "limit {exact}");
            assert_eq!(verdicts(buf, &options(exact - 1), buf.len()), [false; 4], "limit {}", exact - 1);
            assert!(flatbuffers::root_with_opts::<fb::Program>(&options(exact), buf).is_ok());
            assert!(flatbuffers::root_with_opts::<fb::Program>(&options(exact - 1), buf).is_err());
        }
    }

    /// A program whose values are `refs` EValues sharing one Tensor table with a `sizes`-entry
    /// vector: its apparent size grows by about 4 × `sizes` bytes per reference.
    fn shared_tensor(sizes: usize, refs: usize) -> Vec<u8> {
        let mut b = FlatBufferBuilder::new();
        let sizes = b.create_vector(&vec![1i32; sizes]);
        let s = b.start_table();
        b.push_slot_always(8, sizes);
        let tensor = b.end_table(s);
        let s = b.start_table();
        b.push_slot::<u8>(4, 5, 0);
        b.push_slot_always(6, tensor);
        let value = b.end_table(s);
        let values = b.create_vector(&vec![value; refs]);
        let s = b.start_table();
        b.push_slot_always(8, values);
        let plan = b.end_table(s);
        let plans = b.create_vector(&[plan]);
        let s = b.start_table();
        b.push_slot_always(6, plans);
        let program = b.end_table(s);
        b.finish(program, Some("ET12"));
        b.finished_data().to_vec()
    }

    #[test]
    fn the_pass_that_records_nothing_stops_within_a_table_of_the_limit() {
        // 10,000 references to a 2,000-entry sizes vector: ~80 MB of apparent size from a
        // ~100 KB buffer. Checking the limit only at tables, the pass that records nothing
        // must still stop at most one table after the pass that checks at every read.
        let data = shared_tensor(2000, 10_000);
        let o = crate::format::verifier_options(data.len());
        let buf = region(&data).expect("region").program_data;
        let mut fast = Reader::<false, Refused>::new(buf, &o, data.len());
        let mut named = Reader::<false, Box<Fail>>::new(buf, &o, data.len());
        assert!(fast.root().is_err());
        let refused = named.root().map(drop).expect_err("refused");
        assert!(matches!(refused.kind, Kind::TooLarge), "{:?}", refused.kind);
        assert!(named.tables < 1000, "the limit is crossed early: {} tables", named.tables);
        assert!(fast.tables <= named.tables + 1, "{} tables read past the limit", fast.tables - named.tables);
    }
}
