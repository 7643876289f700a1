//! `format::load`: bytes -> verified, decoded, fully resolved program.
//!
//! Order of work follows `Program::load` (pte-format §7): preamble and identifier, extended
//! header and size checks (overflow-checked), root offset, the FlatBuffers verifier with explicit
//! limits, decoding to the owned model, then every data reference resolved into a slice that
//! borrows the input (segments, inline delegate blobs, named data, constants, mutable data).
//! May not touch: the generated accessors (decoding is `wire`'s), execution, emission, backends.

use super::FormatError;
use super::header::{ExtendedHeader, HEADER_OFFSET, PTE_IDENTIFIER, root_offset};
use super::wire;
use crate::program::{DataLocation, Program};
use serde::Serialize;

/// Maximum table nesting the verifier accepts (ExecuTorch's default).
pub const MAX_DEPTH: usize = 64;
/// Maximum number of tables the verifier accepts (ExecuTorch's default).
pub const MAX_TABLES: usize = 1_000_000;

/// Explicit limits of the FlatBuffers verifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadLimits {
    /// Maximum table nesting.
    pub max_depth: usize,
    /// Maximum number of tables visited.
    pub max_tables: usize,
    /// Maximum apparent (tree-expanded) size as a multiple of the input length, plus 1 MiB.
    pub apparent_size_factor: usize,
}

impl Default for LoadLimits {
    fn default() -> Self {
        // A tree expansion of shared tables may not exceed a small multiple of the input
        // (vtables are shared by design and re-read for every table).
        LoadLimits { max_depth: MAX_DEPTH, max_tables: MAX_TABLES, apparent_size_factor: 8 }
    }
}

/// Verifier limits for an input of `len` bytes.
pub fn verifier_options(len: usize) -> flatbuffers::VerifierOptions {
    limits_to_options(&LoadLimits::default(), len)
}

fn limits_to_options(l: &LoadLimits, len: usize) -> flatbuffers::VerifierOptions {
    flatbuffers::VerifierOptions {
        max_depth: l.max_depth,
        max_tables: l.max_tables,
        max_apparent_size: len.saturating_mul(l.apparent_size_factor).saturating_add(1 << 20).min(1 << 31),
        ignore_missing_null_terminator: false,
    }
}

/// Where the constant tensors of a program come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ConstantSource {
    /// No constants.
    None,
    /// `constant_segment` names this segment.
    Segment(u32),
    /// Deprecated inline `Program.constant_buffer`.
    InlineBuffer,
}

/// A loaded program: the owned model plus every data reference resolved against the input.
#[derive(Clone, Debug)]
pub struct LoadedProgram<'a> {
    /// The decoded program.
    pub program: Program,
    /// The whole input.
    pub file: &'a [u8],
    /// The extended header, if present.
    pub header: Option<ExtendedHeader>,
    /// FlatBuffers data `[0, program_size)`.
    pub program_data: &'a [u8],
    /// Absolute file offset of segment data (0 = none).
    pub segment_base: u64,
    /// Bytes of each entry of `program.segments`.
    pub segments: Vec<&'a [u8]>,
    /// Where constants come from.
    pub constant_source: ConstantSource,
    /// Constant buffer `k`: its bytes from its offset to the end of its segment (or its inline
    /// storage); index 0 is the reserved placeholder.
    pub constants: Vec<&'a [u8]>,
    /// Mutable-data entry `m`, sub-buffer `k`: bytes from its offset to the segment end.
    pub mutable_data: Vec<Vec<&'a [u8]>>,
    /// Bytes of each entry of `program.named_data`.
    pub named_data: Vec<&'a [u8]>,
    /// Bytes of each entry of `program.backend_delegate_data` (borrowing the input).
    pub inline_delegate_data: Vec<&'a [u8]>,
    /// Per plan, per delegate: its processed blob (`None` when `processed` is absent).
    pub delegate_blobs: Vec<Vec<Option<&'a [u8]>>>,
}

impl<'a> LoadedProgram<'a> {
    /// Named data as `(key, bytes)` pairs.
    pub fn named_data_map(&self) -> Vec<(&str, &'a [u8])> {
        let entries = self.program.named_data.as_deref().unwrap_or(&[]);
        entries.iter().zip(&self.named_data).map(|(e, b)| (e.key.as_deref().unwrap_or(""), *b)).collect()
    }
}

fn slice(data: &[u8], start: u64, len: u64) -> Option<&[u8]> {
    let start = usize::try_from(start).ok()?;
    let len = usize::try_from(len).ok()?;
    data.get(start..start.checked_add(len)?)
}

/// Loads and checks a `.pte` file. Never panics; rejects with a typed error naming the place.
pub fn load(data: &[u8]) -> Result<LoadedProgram<'_>, FormatError> {
    load_with(data, &LoadLimits::default())
}

/// [`load`] with explicit verifier limits.
pub fn load_with<'a>(data: &'a [u8], limits: &LoadLimits) -> Result<LoadedProgram<'a>, FormatError> {
    let Region { header, program_data, segment_base, segment_limit } = region(data)?;
    let opts = limits_to_options(limits, program_data.len());
    let wire::Decoded { program, constant_storage, inline_data } = wire::decode(program_data, &opts, data.len())?;

    let segments = resolve_segments(&program, data, segment_base, segment_limit)?;
    let inline_delegate_data = borrowed(program_data, &inline_data, "backend_delegate_data", "data")?;
    let named_data = resolve_named_data(&program, &segments)?;
    let (constant_source, constants) = resolve_constants(&program, program_data, &constant_storage, &segments)?;
    let mutable_data = resolve_mutable(&program, &segments)?;
    let delegate_blobs = resolve_delegates(&program, &segments, &inline_delegate_data)?;
    Ok(LoadedProgram {
        program,
        file: data,
        header,
        program_data,
        segment_base,
        segments,
        constant_source,
        constants,
        mutable_data,
        named_data,
        inline_delegate_data,
        delegate_blobs,
    })
}

/// Where the parts of a file lie, once preamble, header and root offset are checked.
pub(crate) struct Region<'a> {
    /// The extended header, if present.
    pub header: Option<ExtendedHeader>,
    /// FlatBuffers data `[0, program_size)`.
    pub program_data: &'a [u8],
    /// Absolute file offset of segment data (0 = none).
    pub segment_base: u64,
    /// End of the segment region.
    pub segment_limit: u64,
}

/// Checks preamble, identifier, extended header and root offset (pte-format §7, in order).
pub(crate) fn region(data: &[u8]) -> Result<Region<'_>, FormatError> {
    if data.is_empty() {
        return Err(FormatError::Empty);
    }
    if data.len() < 8 {
        return Err(FormatError::TooShort { len: data.len() });
    }
    if &data[4..8] != PTE_IDENTIFIER {
        return Err(FormatError::WrongIdentifier {
            found: String::from_utf8_lossy(&data[4..8]).into_owned(),
            expected: "ET12",
        });
    }
    let file_len = data.len();
    let header = ExtendedHeader::parse(data)?;
    let (program_size, segment_base, segment_limit) = match header {
        None => (file_len as u64, 0u64, 0u64),
        Some(h) => {
            let minimum = (HEADER_OFFSET as u64) + u64::from(h.length.min(32));
            if h.program_size < minimum {
                return Err(FormatError::ProgramSizeTooSmall { program_size: h.program_size, minimum });
            }
            if h.program_size > file_len as u64 {
                return Err(FormatError::ProgramSizePastEnd { program_size: h.program_size, file_len });
            }
            let end = h
                .segment_base_offset
                .checked_add(h.segment_data_size)
                .ok_or(FormatError::SegmentRegionOverflow { base: h.segment_base_offset, size: h.segment_data_size })?;
            if h.segment_base_offset != 0 {
                // `end` is at least the base (the sum did not overflow), so this covers it.
                if end > file_len as u64 {
                    return Err(FormatError::SegmentRegionPastEnd { base: h.segment_base_offset, end, file_len });
                }
                if h.segment_base_offset < h.program_size {
                    return Err(FormatError::SegmentBaseInsideProgram {
                        base: h.segment_base_offset,
                        program_size: h.program_size,
                    });
                }
            } else if h.segment_data_size != 0 {
                return Err(FormatError::SegmentRegionPastEnd { base: 0, end, file_len });
            }
            // Old 24-byte headers carry no data size (`parse` gives 0): segments may run to the
            // end of the file.
            let limit = if h.length >= 32 { end } else { file_len as u64 };
            (h.program_size, h.segment_base_offset, limit)
        }
    };
    let program_data = &data[..program_size as usize];
    let root = root_offset(program_data).unwrap_or(0);
    let root_limit = program_data.len().saturating_sub(4);
    if (root as usize) < 8 || root as usize > root_limit {
        return Err(FormatError::RootOffsetOutOfRange { root, limit: root_limit });
    }
    Ok(Region { header, program_data, segment_base, segment_limit })
}

/// The inline blobs at `ranges` (`table[i].field`), each required.
fn borrowed<'a>(
    program_data: &'a [u8],
    ranges: &[Option<std::ops::Range<usize>>],
    table: &str,
    field: &str,
) -> Result<Vec<&'a [u8]>, FormatError> {
    let mut out = Vec::with_capacity(ranges.len());
    for (i, range) in ranges.iter().enumerate() {
        let missing = || FormatError::MissingField { field: format!("{table}[{i}].{field}") };
        out.push(range.clone().and_then(|r| program_data.get(r)).ok_or_else(missing)?);
    }
    Ok(out)
}

fn resolve_segments<'a>(
    program: &Program,
    data: &'a [u8],
    base: u64,
    limit: u64,
) -> Result<Vec<&'a [u8]>, FormatError> {
    let table = program.segment_table();
    let mut out = Vec::with_capacity(table.len());
    for (index, s) in table.iter().enumerate() {
        if base == 0 {
            if s.size != 0 {
                return Err(FormatError::SegmentWithoutHeader { index, size: s.size });
            }
            out.push(&data[..0]);
            continue;
        }
        let overflow = FormatError::SegmentOverflow { index, offset: s.offset, size: s.size };
        let start = base.checked_add(s.offset).ok_or_else(|| overflow.clone())?;
        let end = start.checked_add(s.size).ok_or(overflow)?;
        if end > limit {
            return Err(FormatError::SegmentPastEnd { index, start, end, limit });
        }
        out.push(slice(data, start, s.size).ok_or(FormatError::SegmentPastEnd { index, start, end, limit })?);
    }
    Ok(out)
}

/// Segment `index`; `field` names the referring field (made only for the error).
fn segment<'a>(segments: &[&'a [u8]], field: impl FnOnce() -> String, index: u64) -> Result<&'a [u8], FormatError> {
    usize::try_from(index)
        .ok()
        .and_then(|i| segments.get(i).copied())
        .ok_or_else(|| FormatError::SegmentIndexOutOfRange { field: field(), index, count: segments.len() })
}

fn resolve_named_data<'a>(program: &Program, segments: &[&'a [u8]]) -> Result<Vec<&'a [u8]>, FormatError> {
    let Some(entries) = program.named_data.as_deref() else { return Ok(Vec::new()) };
    if program.segments.is_none() {
        return Err(FormatError::MissingField { field: "segments (required by named_data)".into() });
    }
    let mut out = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        if e.key.is_none() {
            return Err(FormatError::MissingField { field: format!("named_data[{i}].key") });
        }
        out.push(segment(segments, || format!("named_data[{i}].segment_index"), e.segment_index.into())?);
    }
    Ok(out)
}

fn subsegments<'a>(
    seg: &'a [u8],
    offsets: &[u64],
    field: &dyn Fn() -> String,
    segment_index: u32,
) -> Result<Vec<&'a [u8]>, FormatError> {
    let mut out = Vec::with_capacity(offsets.len());
    for (k, &off) in offsets.iter().enumerate() {
        let rest = usize::try_from(off).ok().and_then(|o| seg.get(o..)).ok_or_else(|| {
            FormatError::SubsegmentOffsetPastEnd {
                field: format!("{}[{k}]", field()),
                offset: off,
                segment: segment_index,
                size: seg.len() as u64,
            }
        })?;
        out.push(rest);
    }
    Ok(out)
}

fn resolve_constants<'a>(
    program: &Program,
    program_data: &'a [u8],
    constant_storage: &[Option<std::ops::Range<usize>>],
    segments: &[&'a [u8]],
) -> Result<(ConstantSource, Vec<&'a [u8]>), FormatError> {
    let inline_count = program.constant_buffer.as_ref().map_or(0, Vec::len);
    if let Some(cs) = &program.constant_segment {
        let offsets = cs.offsets.as_deref().unwrap_or(&[]);
        if offsets.len() > 1 {
            if inline_count > 0 {
                return Err(FormatError::ConstantBufferAndSegment { count: inline_count });
            }
            if program.segments.is_none() {
                return Err(FormatError::MissingField { field: "segments (required by constant_segment)".into() });
            }
            let seg = segment(segments, || "constant_segment.segment_index".into(), cs.segment_index.into())?;
            let subs = subsegments(seg, offsets, &|| "constant_segment.offsets".into(), cs.segment_index)?;
            return Ok((ConstantSource::Segment(cs.segment_index), subs));
        }
        // At most the placeholder offset: the segment is empty and constants, if any, are the
        // inline `constant_buffer` (ExecuTorch's Program::load takes the same branch).
    }
    if constant_storage.is_empty() {
        return Ok((ConstantSource::None, Vec::new()));
    }
    let out = borrowed(program_data, constant_storage, "constant_buffer", "storage")?;
    Ok((ConstantSource::InlineBuffer, out))
}

fn resolve_mutable<'a>(program: &Program, segments: &[&'a [u8]]) -> Result<Vec<Vec<&'a [u8]>>, FormatError> {
    let Some(entries) = program.mutable_data_segments.as_deref() else { return Ok(Vec::new()) };
    let mut out = Vec::with_capacity(entries.len());
    for (m, e) in entries.iter().enumerate() {
        let seg = segment(segments, || format!("mutable_data_segments[{m}].segment_index"), e.segment_index.into())?;
        let offsets = e.offsets.as_deref().unwrap_or(&[]);
        out.push(subsegments(seg, offsets, &|| format!("mutable_data_segments[{m}].offsets"), e.segment_index)?);
    }
    Ok(out)
}

fn resolve_delegates<'a>(
    program: &Program,
    segments: &[&'a [u8]],
    inline: &[&'a [u8]],
) -> Result<Vec<Vec<Option<&'a [u8]>>>, FormatError> {
    let mut out = Vec::with_capacity(program.plans().len());
    for (pi, plan) in program.plans().iter().enumerate() {
        let mut blobs = Vec::with_capacity(plan.delegate_list().len());
        for (di, d) in plan.delegate_list().iter().enumerate() {
            let field = || format!("execution_plan[{pi}].delegates[{di}].processed");
            let Some(r) = d.processed else {
                blobs.push(None);
                continue;
            };
            let blob = match r.location {
                DataLocation::INLINE => {
                    if program.backend_delegate_data.is_none() {
                        return Err(FormatError::InlineDataAbsent { field: field() });
                    }
                    *inline.get(r.index as usize).ok_or_else(|| FormatError::InlineIndexOutOfRange {
                        field: field(),
                        index: r.index,
                        count: inline.len(),
                    })?
                }
                DataLocation::SEGMENT => segment(segments, || format!("{}.index", field()), r.index.into())?,
                other => return Err(FormatError::UnknownDataLocation { field: field(), location: other.0 }),
            };
            blobs.push(Some(blob));
        }
        out.push(blobs);
    }
    Ok(out)
}
