//! The `__et_scratch` compile spec (semantics.md P1): how a delegate records the scratch
//! buffers its lowered module declared. Part of the file format: the emitter writes it, the
//! runtime's checks read it.
//! May not touch: the scratch rules (the emitter and the runtime's checks apply them), files.

/// Reserved compile-spec key marking a delegate that declares scratch memory (P1).
pub const SCRATCH_KEY: &str = "__et_scratch";

/// One declared scratch buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScratchSpec {
    /// Size in bytes (> 0).
    pub nbytes: u64,
    /// Memory arena id, -1 = default.
    pub mem_id: i32,
}

/// Why an `__et_scratch` value does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScratchError {
    /// Fewer than the 4 bytes of its count.
    #[error("shorter than its count ({len} bytes, 4 needed)")]
    NoCount {
        /// The value's length.
        len: usize,
    },
    /// A count whose byte length overflows.
    #[error("count {count} overflows")]
    CountOverflows {
        /// The count read.
        count: u32,
    },
    /// A length other than the count's 4 + 12 bytes per spec.
    #[error("count {count} needs {want} bytes, value has {len}")]
    WrongLength {
        /// The count read.
        count: u32,
        /// The bytes it needs.
        want: usize,
        /// The value's length.
        len: usize,
    },
}

/// Parses an `__et_scratch` value: u32 LE count, then per spec u64 LE nbytes, i32 LE mem_id.
pub fn parse_scratch(value: &[u8]) -> Result<Vec<ScratchSpec>, ScratchError> {
    let len = value.len();
    let count = value.first_chunk::<4>().map(|b| u32::from_le_bytes(*b)).ok_or(ScratchError::NoCount { len })?;
    let want = (count as usize)
        .checked_mul(12)
        .and_then(|n| n.checked_add(4))
        .ok_or(ScratchError::CountOverflows { count })?;
    if len != want {
        return Err(ScratchError::WrongLength { count, want, len });
    }
    Ok(value[4..]
        .chunks_exact(12)
        .map(|c| ScratchSpec {
            nbytes: u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
            mem_id: i32::from_le_bytes([c[8], c[9], c[10], c[11]]),
        })
        .collect())
}

/// Encodes scratch specs as an `__et_scratch` value.
pub fn encode_scratch(specs: &[ScratchSpec]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + 12 * specs.len());
    v.extend_from_slice(&(specs.len() as u32).to_le_bytes());
    for s in specs {
        v.extend_from_slice(&s.nbytes.to_le_bytes());
        v.extend_from_slice(&s.mem_id.to_le_bytes());
    }
    v
}
