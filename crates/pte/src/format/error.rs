//! Typed errors of the `.pte`/`.ptd` reader and writer. Every variant names what is wrong and
//! where (field path, index or byte offset).
//! May not touch: the bytes or the model (it names what the reader and writer refuse, and where).

use thiserror::Error;

/// Why a `.pte` (or `.ptd`) file was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FormatError {
    /// The input has no bytes.
    #[error("empty input at offset 0")]
    Empty,
    /// Fewer bytes than the 8-byte preamble.
    #[error("file too short: {len} bytes, the preamble needs 8 at offset 0")]
    TooShort {
        /// Input length.
        len: usize,
    },
    /// The identifier at offset 4 is not `ET12` (or `FT01` for `.ptd`).
    #[error("wrong file identifier {found:?} at offset 4 (expected {expected:?}{})",
        if found.starts_with("ET") && *expected == "ET12" { "; incompatible program version" } else { "" })]
    WrongIdentifier {
        /// What the file holds, lossily decoded.
        found: String,
        /// What the reader expects.
        expected: &'static str,
    },
    /// The extended header's magic is present but the file ends inside its fields.
    #[error("extended header truncated at offset {offset}: file has {len} bytes")]
    HeaderTruncated {
        /// Offset of the first missing byte.
        offset: usize,
        /// Input length.
        len: usize,
    },
    /// Extended header `length` below the 24 bytes its fields need.
    #[error("extended header length {length} at offset 12 is below 24")]
    HeaderTooShort {
        /// The declared length.
        length: u32,
    },
    /// `program_size` is too small to hold the preamble and header.
    #[error("program_size {program_size} at offset 16 is below the {minimum} bytes of preamble and header")]
    ProgramSizeTooSmall {
        /// Declared program size.
        program_size: u64,
        /// Minimum acceptable value.
        minimum: u64,
    },
    /// `program_size` points past the end of the file.
    #[error("program_size {program_size} at offset 16 is past the end of the {file_len}-byte file")]
    ProgramSizePastEnd {
        /// Declared program size.
        program_size: u64,
        /// Input length.
        file_len: usize,
    },
    /// `segment_base_offset + segment_data_size` overflows u64.
    #[error("segment_base_offset {base} + segment_data_size {size} (offsets 24, 32) overflows u64")]
    SegmentRegionOverflow {
        /// Declared base.
        base: u64,
        /// Declared data size.
        size: u64,
    },
    /// The segment region ends past the end of the file.
    #[error("segment data [{base}, {end}) (header offsets 24, 32) is past the end of the {file_len}-byte file")]
    SegmentRegionPastEnd {
        /// Declared base.
        base: u64,
        /// Declared end.
        end: u64,
        /// Input length.
        file_len: usize,
    },
    /// `segment_base_offset` lies inside the FlatBuffers data.
    #[error("segment_base_offset {base} at offset 24 lies inside the program data (program_size {program_size})")]
    SegmentBaseInsideProgram {
        /// Declared base.
        base: u64,
        /// Declared program size.
        program_size: u64,
    },
    /// The root table offset is outside the program data.
    #[error("root table offset {root} at offset 0 is outside [8, {limit}]")]
    RootOffsetOutOfRange {
        /// The root offset.
        root: u32,
        /// Largest acceptable value.
        limit: usize,
    },
    /// The FlatBuffers verifier hit one of its limits (depth, table count, apparent size).
    #[error("flatbuffers verifier limit exceeded: {detail}")]
    VerifierLimit {
        /// The verifier's message, with the path it was verifying.
        detail: String,
    },
    /// The FlatBuffers verifier found malformed data (bounds, alignment, utf-8, unions).
    #[error("malformed flatbuffer: {detail}")]
    Malformed {
        /// The verifier's message, with the path it was verifying.
        detail: String,
    },
    /// A union tag that the schema does not declare (or NONE where a member is needed).
    #[error("unknown {union} tag {tag} at {path}")]
    UnknownUnionTag {
        /// Union name.
        union: &'static str,
        /// The tag.
        tag: u8,
        /// Field path.
        path: String,
    },
    /// A union tag without its value table.
    #[error("{union} tag {tag} at {path} has no value")]
    MissingUnionValue {
        /// Union name.
        union: &'static str,
        /// The tag.
        tag: u8,
        /// Field path.
        path: String,
    },
    /// Decoding would allocate far more than the input's size (a shared-table bomb).
    #[error("decoding needs more than {budget} bytes of memory (input {input_len} bytes) at {path}")]
    DecodeBudgetExceeded {
        /// The budget.
        budget: usize,
        /// Input length.
        input_len: usize,
        /// Where the budget ran out.
        path: String,
    },
    /// A segment with data in a file that has no segment region (no extended header).
    #[error("segments[{index}] has size {size} but the file has no segment data (no extended header)")]
    SegmentWithoutHeader {
        /// Segment index.
        index: usize,
        /// Segment size.
        size: u64,
    },
    /// A segment's offset + size overflows.
    #[error("segments[{index}] offset {offset} + size {size} overflows u64")]
    SegmentOverflow {
        /// Segment index.
        index: usize,
        /// Relative offset.
        offset: u64,
        /// Size.
        size: u64,
    },
    /// A segment extends past the segment region.
    #[error("segments[{index}] [{start}, {end}) (absolute) is past the end of segment data at {limit}")]
    SegmentPastEnd {
        /// Segment index.
        index: usize,
        /// Absolute start.
        start: u64,
        /// Absolute end.
        end: u64,
        /// End of the segment region.
        limit: u64,
    },
    /// A reference to a segment index that does not exist.
    #[error("{field} = {index} is out of range: the program has {count} segments")]
    SegmentIndexOutOfRange {
        /// Field path.
        field: String,
        /// The index.
        index: u64,
        /// Number of segments.
        count: usize,
    },
    /// A sub-buffer offset past the end of its segment.
    #[error("{field} = {offset} is past the end of segment {segment} ({size} bytes)")]
    SubsegmentOffsetPastEnd {
        /// Field path.
        field: String,
        /// The offset.
        offset: u64,
        /// Segment index.
        segment: u32,
        /// Segment size.
        size: u64,
    },
    /// Both a constant segment with constants and a non-empty inline `constant_buffer`.
    #[error("constant_buffer has {count} entries although constant_segment holds constants")]
    ConstantBufferAndSegment {
        /// Inline entries.
        count: usize,
    },
    /// A required field is absent.
    #[error("missing required field {field}")]
    MissingField {
        /// Field path.
        field: String,
    },
    /// An INLINE delegate reference whose index is out of range.
    #[error("{field}.index = {index} is out of range: backend_delegate_data has {count} entries")]
    InlineIndexOutOfRange {
        /// Field path of the reference.
        field: String,
        /// The index.
        index: u32,
        /// Number of inline entries.
        count: usize,
    },
    /// An INLINE delegate reference while `backend_delegate_data` is absent.
    #[error("{field} is INLINE but Program.backend_delegate_data is absent")]
    InlineDataAbsent {
        /// Field path of the reference.
        field: String,
    },
    /// A delegate reference with a location the schema does not declare.
    #[error("{field}.location = {location} is not INLINE (0) or SEGMENT (1)")]
    UnknownDataLocation {
        /// Field path of the reference.
        field: String,
        /// Raw location.
        location: i8,
    },
    /// `.ptd`: a header field is inconsistent with the file.
    #[error("external data header: {detail}")]
    PtdHeader {
        /// What is wrong, with its offset.
        detail: String,
    },
    /// The writer was given inconsistent input.
    #[error("cannot write: {detail}")]
    Write {
        /// What is inconsistent.
        detail: String,
    },
}

impl FormatError {
    /// A short stable name of the variant (for tests, reports and fuzz statistics).
    pub fn kind(&self) -> &'static str {
        match self {
            FormatError::Empty => "Empty",
            FormatError::TooShort { .. } => "TooShort",
            FormatError::WrongIdentifier { .. } => "WrongIdentifier",
            FormatError::HeaderTruncated { .. } => "HeaderTruncated",
            FormatError::HeaderTooShort { .. } => "HeaderTooShort",
            FormatError::ProgramSizeTooSmall { .. } => "ProgramSizeTooSmall",
            FormatError::ProgramSizePastEnd { .. } => "ProgramSizePastEnd",
            FormatError::SegmentRegionOverflow { .. } => "SegmentRegionOverflow",
            FormatError::SegmentRegionPastEnd { .. } => "SegmentRegionPastEnd",
            FormatError::SegmentBaseInsideProgram { .. } => "SegmentBaseInsideProgram",
            FormatError::RootOffsetOutOfRange { .. } => "RootOffsetOutOfRange",
            FormatError::VerifierLimit { .. } => "VerifierLimit",
            FormatError::Malformed { .. } => "Malformed",
            FormatError::UnknownUnionTag { .. } => "UnknownUnionTag",
            FormatError::MissingUnionValue { .. } => "MissingUnionValue",
            FormatError::DecodeBudgetExceeded { .. } => "DecodeBudgetExceeded",
            FormatError::SegmentWithoutHeader { .. } => "SegmentWithoutHeader",
            FormatError::SegmentOverflow { .. } => "SegmentOverflow",
            FormatError::SegmentPastEnd { .. } => "SegmentPastEnd",
            FormatError::SegmentIndexOutOfRange { .. } => "SegmentIndexOutOfRange",
            FormatError::SubsegmentOffsetPastEnd { .. } => "SubsegmentOffsetPastEnd",
            FormatError::ConstantBufferAndSegment { .. } => "ConstantBufferAndSegment",
            FormatError::MissingField { .. } => "MissingField",
            FormatError::InlineIndexOutOfRange { .. } => "InlineIndexOutOfRange",
            FormatError::InlineDataAbsent { .. } => "InlineDataAbsent",
            FormatError::UnknownDataLocation { .. } => "UnknownDataLocation",
            FormatError::PtdHeader { .. } => "PtdHeader",
            FormatError::Write { .. } => "Write",
        }
    }
}
