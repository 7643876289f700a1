//! Two readers of the same bytes, compared: the loader's one-pass reader ([`super::wire`]) and
//! the `flatbuffers` crate's verifier with its generated accessors ([`super::decode`]).
//!
//! They must accept the same buffers, decode them to the same [`Program`], and refuse the same
//! buffers with the same kind of error (an undeclared union tag with the same tag and path).
//! The loader's reader runs in two passes (one that records nothing, one that names the
//! fault), which must also reach the same verdict.
//! Called by `tests/` over every corpus file and thousands of mutations of each, and by the
//! `load_pte` fuzz target on every input. May not touch anything past the FlatBuffers data.

use super::read::{region, verifier_options};
use super::{FormatError, decode, wire};
use crate::program::Program;
use thiserror::Error;

/// Two readings of one input that should agree do not.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum DecoderDisagreement {
    /// The loader's reader and the crate's verifier and accessors.
    #[error("the loader's reader and the flatbuffers crate's verifier disagree: loader {ours}; crate {reference}")]
    WithCrate {
        /// What the loader's reader concluded.
        ours: String,
        /// What the crate's verifier and accessors concluded.
        reference: String,
    },
    /// The loader's pass that records nothing and its pass that names the fault.
    #[error("the loader's two passes disagree: {0}")]
    Passes(String),
}

fn outcome(r: &Result<Program, FormatError>) -> String {
    match r {
        Ok(_) => "accepts".into(),
        Err(e) => format!("refuses ({}: {e})", e.kind()),
    }
}

/// `read` on the FlatBuffers data of `data` with the loader's verifier options and the file's
/// length (`None` when the preamble, header or root offset is refused).
fn on_program_data<T>(data: &[u8], read: impl FnOnce(&[u8], &flatbuffers::VerifierOptions, usize) -> T) -> Option<T> {
    let region = region(data).ok()?;
    let opts = verifier_options(region.program_data.len());
    Some(read(region.program_data, &opts, data.len()))
}

/// The loader's one-pass reader on the FlatBuffers data of `data` (`None` when the preamble,
/// header or root offset is refused; for comparing and timing the two readers).
pub fn one_pass(data: &[u8]) -> Option<Result<Program, FormatError>> {
    on_program_data(data, |buf, opts, len| wire::decode(buf, opts, len).map(|d| d.program))
}

/// The one-pass reader's verify-only pass on the FlatBuffers data of `data`: every verifier
/// rule, nothing decoded (`None` as for [`one_pass`]; for timing against a lazy reader).
pub fn verify_only(data: &[u8]) -> Option<Result<(), FormatError>> {
    on_program_data(data, wire::verify)
}

/// The `flatbuffers` crate's verifier, then its generated accessors, on the FlatBuffers data
/// of `data` (`None` as for [`one_pass`]).
pub fn with_crate(data: &[u8]) -> Option<Result<Program, FormatError>> {
    on_program_data(data, decode::decode_with_crate)
}

/// Runs both readers on the FlatBuffers data of `data` (nothing to compare when the preamble,
/// header or root offset is already refused) and reports any difference; also holds the
/// loader's pass that records nothing to its pass that names the fault.
pub fn decoders_agree(data: &[u8]) -> Result<(), DecoderDisagreement> {
    if let Some(Err(e)) = on_program_data(data, wire::passes_agree) {
        return Err(DecoderDisagreement::Passes(e));
    }
    let (Some(ours), Some(reference)) = (one_pass(data), with_crate(data)) else { return Ok(()) };
    let same = match (&ours, &reference) {
        // Debug text, not ==: a NaN double decodes to the same bits on both sides.
        (Ok(a), Ok(b)) => format!("{a:?}") == format!("{b:?}"),
        (Err(a @ FormatError::UnknownUnionTag { .. }), Err(b)) => a == b,
        (Err(a), Err(b)) => a.kind() == b.kind(),
        _ => false,
    };
    if same {
        return Ok(());
    }
    let describe = |r: &Result<Program, FormatError>| match r {
        Ok(p) if ours.is_ok() && reference.is_ok() => format!("decodes {p:?}"),
        _ => outcome(r),
    };
    Err(DecoderDisagreement::WithCrate { ours: describe(&ours), reference: describe(&reference) })
}
