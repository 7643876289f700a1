//! External data (`.ptd`): write -> load round trip, shared blobs, and typed rejections.

#![forbid(unsafe_code)]

use pte::format::{FormatError, TensorLayout, load_ptd, write_ptd};
use pte::program::ScalarType;

fn sample() -> Vec<u8> {
    let layout = TensorLayout { scalar_type: ScalarType::FLOAT, sizes: vec![2, 2], dim_order: vec![0, 1] };
    write_ptd(
        &[
            ("linear.weight", Some(&layout), &[1u8; 16][..]),
            ("linear.bias", None, &[2u8; 8][..]),
            ("alias", None, &[1u8; 16][..]),
        ],
        128,
    )
}

#[test]
fn round_trip_with_layouts_and_shared_blobs() {
    let d = sample();
    assert_eq!(&d[4..8], b"FT01");
    assert_eq!(&d[8..12], b"FH01");
    let p = load_ptd(&d).expect("loads");
    assert_eq!(p.entries.len(), 3);
    let w = p.get("linear.weight").expect("present");
    assert_eq!(w.data, &[1u8; 16][..]);
    assert_eq!(w.layout.as_ref().map(|l| l.sizes.clone()), Some(vec![2, 2]));
    assert_eq!(p.get("linear.bias").expect("present").data, &[2u8; 8][..]);
    assert_eq!(p.get("alias").expect("present").segment_index, w.segment_index, "same bytes share a segment");
    assert!(p.get("missing").is_none());
    let base = u64::from_le_bytes(d[32..40].try_into().expect("8 bytes"));
    assert_eq!(base % 128, 0);
}

#[test]
fn wrong_identifier() {
    let mut d = sample();
    d[4..8].copy_from_slice(b"ET12");
    assert!(matches!(load_ptd(&d), Err(FormatError::WrongIdentifier { expected: "FT01", .. })));
}

#[test]
fn missing_header() {
    let mut d = sample();
    d[8..12].copy_from_slice(b"XXXX");
    assert!(matches!(load_ptd(&d), Err(FormatError::PtdHeader { detail }) if detail.contains("FH01")));
}

#[test]
fn header_length_below_40() {
    let mut d = sample();
    d[12..16].copy_from_slice(&32u32.to_le_bytes());
    assert!(matches!(load_ptd(&d), Err(FormatError::PtdHeader { detail }) if detail.contains("below 40")));
}

#[test]
fn file_shorter_than_segment_data() {
    let d = sample();
    let e = load_ptd(&d[..d.len() - 1]).expect_err("truncated");
    assert!(matches!(&e, FormatError::PtdHeader { detail } if detail.contains("past the end")), "{e}");
}

#[test]
fn segment_region_overflow() {
    let mut d = sample();
    d[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(load_ptd(&d), Err(FormatError::PtdHeader { detail }) if detail.contains("overflows")));
}

#[test]
fn truncations_never_panic() {
    let d = sample();
    for n in 0..d.len() {
        assert!(load_ptd(&d[..n]).is_err(), "prefix of {n} bytes");
    }
}

fn put_u64(d: &mut [u8], at: usize, v: u64) {
    d[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn u64_at(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().expect("8 bytes"))
}

#[test]
fn a_file_without_segment_data_ends_with_its_flatbuffer() {
    let mut d = write_ptd(&[], 16);
    let fb_end = u64_at(&d, 16) + u64_at(&d, 24);
    // Cut the padding and point the (empty) segment data at 0: the flatbuffer runs to the
    // last byte, which is allowed.
    d.truncate(fb_end as usize);
    put_u64(&mut d, 32, 0);
    assert_eq!(load_ptd(&d).expect("loads").entries.len(), 0);
}

#[test]
fn segment_base_inside_the_flatbuffer() {
    let mut d = sample();
    put_u64(&mut d, 32, 8);
    let e = load_ptd(&d).expect_err("overlapping");
    assert!(matches!(&e, FormatError::PtdHeader { detail } if detail.contains("inside the flatbuffer")), "{e}");
    // With no segment data the base is irrelevant.
    let mut d = write_ptd(&[], 16);
    put_u64(&mut d, 32, 8);
    assert!(load_ptd(&d).is_ok());
}

#[test]
fn root_offset_at_and_past_the_limit() {
    let d = sample();
    let fb_end = (u64_at(&d, 16) + u64_at(&d, 24)) as usize;
    let limit = fb_end - 4;
    let mut past = d.clone();
    past[0..4].copy_from_slice(&(limit as u32 + 1).to_le_bytes());
    assert!(matches!(load_ptd(&past), Err(FormatError::RootOffsetOutOfRange { .. })));
    let mut at = d.clone();
    at[0..4].copy_from_slice(&(limit as u32).to_le_bytes());
    let r = load_ptd(&at);
    assert!(!matches!(r, Err(FormatError::RootOffsetOutOfRange { .. })), "the last word is in range: {:?}", r.err());
}

#[test]
fn every_preamble_header_and_root_bound_lies_where_the_format_puts_it() {
    let header = |e: &FormatError, says: &str| matches!(e, FormatError::PtdHeader { detail } if detail.contains(says));
    // Exactly the 8-byte preamble is not too short: what it lacks is the header.
    let e = load_ptd(b"\x08\0\0\0FT01").expect_err("no header");
    assert!(header(&e, "missing FH01"), "{e}");
    assert_eq!(load_ptd(b"\x08\0\0\0FT0").expect_err("short"), FormatError::TooShort { len: 7 });
    // Exactly preamble and header (48 bytes) is not a truncated header: what is wrong is past it.
    let d = sample();
    let e = load_ptd(&d[..48]).expect_err("nothing after the header");
    assert!(!header(&e, "header truncated"), "{e}");
    assert!(header(&load_ptd(&d[..47]).expect_err("cut"), "header truncated"));
    // The root table may start right after the preamble, not before it.
    let mut d = sample();
    d[0..4].copy_from_slice(&8u32.to_le_bytes());
    assert!(matches!(load_ptd(&d).expect_err("the header is no table"), FormatError::Malformed { .. }));
    d[0..4].copy_from_slice(&7u32.to_le_bytes());
    assert!(matches!(
        load_ptd(&d).expect_err("inside the preamble"),
        FormatError::RootOffsetOutOfRange { root: 7, .. }
    ));
}

#[test]
fn the_writer_puts_segment_data_at_the_first_aligned_offset_after_the_flatbuffer() {
    for alignment in [1, 16, 128, 4096] {
        let d = write_ptd(&[("w", None, &[3u8; 24][..])], alignment);
        let fb_end = u64_at(&d, 16) + u64_at(&d, 24);
        let base = u64_at(&d, 32);
        assert_eq!(base % alignment, 0, "alignment {alignment}");
        assert!(
            base >= fb_end && base - fb_end < alignment,
            "alignment {alignment}: base {base}, flatbuffer ends at {fb_end}"
        );
        assert_eq!((base + u64_at(&d, 40)) as usize, d.len(), "the segment data ends the file");
    }
}
