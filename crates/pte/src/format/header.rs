//! The preamble (root offset + identifier) and the `eh00` extended header (pte-format §1-§2).
//! May not touch: the FlatBuffers data or the segments (it handles a file's first bytes only).

use super::FormatError;
use serde::Serialize;

/// The `.pte` file identifier at offset 4.
pub const PTE_IDENTIFIER: &[u8; 4] = b"ET12";
/// Magic of the extended header at offset 8.
pub const HEADER_MAGIC: &[u8; 4] = b"eh00";
/// Header length writers put in the `length` field.
pub const HEADER_LENGTH: u32 = 32;
/// Smallest `length` readers accept.
pub const HEADER_MIN_LENGTH: u32 = 24;
/// Offset of the extended header.
pub const HEADER_OFFSET: usize = 8;

/// The decoded `eh00` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ExtendedHeader {
    /// Declared header length (>= 24).
    pub length: u32,
    /// Size of the FlatBuffers data including the header.
    pub program_size: u64,
    /// File offset of the first segment; 0 = no segments.
    pub segment_base_offset: u64,
    /// Bytes of segment data (0 for 24-byte headers).
    pub segment_data_size: u64,
}

fn u32_at(data: &[u8], off: usize) -> Option<u32> {
    let b = data.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn u64_at(data: &[u8], off: usize) -> Option<u64> {
    let b = data.get(off..off.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_le_bytes(a))
}

/// Reads the root offset at byte 0.
pub fn root_offset(data: &[u8]) -> Option<u32> {
    u32_at(data, 0)
}

impl ExtendedHeader {
    /// Parses the header after the preamble: `Ok(None)` when the magic is absent.
    pub fn parse(data: &[u8]) -> Result<Option<ExtendedHeader>, FormatError> {
        if data.get(HEADER_OFFSET..HEADER_OFFSET + 4) != Some(&HEADER_MAGIC[..]) {
            return Ok(None);
        }
        let truncated = |offset: usize| FormatError::HeaderTruncated { offset, len: data.len() };
        let length = u32_at(data, 12).ok_or_else(|| truncated(data.len()))?;
        if length < HEADER_MIN_LENGTH {
            return Err(FormatError::HeaderTooShort { length });
        }
        let program_size = u64_at(data, 16).ok_or_else(|| truncated(data.len()))?;
        let segment_base_offset = u64_at(data, 24).ok_or_else(|| truncated(data.len()))?;
        let segment_data_size = if length >= 32 { u64_at(data, 32).ok_or_else(|| truncated(data.len()))? } else { 0 };
        Ok(Some(ExtendedHeader { length, program_size, segment_base_offset, segment_data_size }))
    }

    /// Encodes the header padded with zeros to `padded_len` bytes (>= 32).
    pub fn encode(&self, padded_len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(padded_len.max(40));
        out.extend_from_slice(HEADER_MAGIC);
        out.extend_from_slice(&self.length.to_le_bytes());
        out.extend_from_slice(&self.program_size.to_le_bytes());
        out.extend_from_slice(&self.segment_base_offset.to_le_bytes());
        out.extend_from_slice(&self.segment_data_size.to_le_bytes());
        out.resize(padded_len.max(out.len()), 0);
        out
    }
}

/// Smallest multiple of `align` (a power of two or any positive number) that is >= `x`.
pub fn align_up(x: u64, align: u64) -> u64 {
    if align <= 1 {
        return x;
    }
    x.div_ceil(align) * align
}

/// Least common multiple.
pub fn lcm(a: u64, b: u64) -> u64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    if a == 0 || b == 0 {
        return a.max(b);
    }
    a / gcd(a, b) * b
}
