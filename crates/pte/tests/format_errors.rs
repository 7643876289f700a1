//! One test per class of bad input: each is rejected by `format::load` with its own typed error
//! naming the field, index or offset — never a panic.

#![forbid(unsafe_code)]

use flatbuffers::FlatBufferBuilder;
use pte::format::{self, FormatError, LoadLimits, WriteOptions};
use pte::program::*;

fn real(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../../corpus/real/{name}.pte", env!("CARGO_MANIFEST_DIR"))).expect("corpus file")
}

/// A small program with one plan, one delegate (SEGMENT 1), constants in segment 0 and one
/// named blob in segment 2.
fn sample() -> (Program, Vec<Vec<u8>>) {
    let seg_data = vec![vec![7u8; 32], b"blob-bytes".to_vec(), vec![1, 2, 3, 4]];
    let segments = format::layout_segments(&seg_data.iter().map(|d| (d.len() as u64, 1)).collect::<Vec<_>>(), 128);
    let plan = ExecutionPlan {
        name: Some("forward".into()),
        values: Some(vec![
            EValue::Int(1),
            EValue::IntList(Some(vec![0])),
            EValue::Tensor(Tensor {
                scalar_type: ScalarType::FLOAT,
                sizes: Some(vec![2, 2]),
                dim_order: Some(vec![0, 1]),
                data_buffer_idx: 1,
                ..Tensor::default()
            }),
        ]),
        inputs: Some(vec![]),
        outputs: Some(vec![0]),
        chains: Some(vec![Chain {
            inputs: Some(vec![]),
            outputs: Some(vec![]),
            instructions: Some(vec![Instruction::DelegateCall(DelegateCall {
                delegate_index: 0,
                args: Some(vec![2, 2]),
            })]),
            stacktrace: None,
        }]),
        operators: Some(vec![]),
        delegates: Some(vec![BackendDelegate {
            id: Some("demo".into()),
            processed: Some(BackendDelegateDataReference { location: DataLocation::SEGMENT, index: 1 }),
            compile_specs: Some(vec![CompileSpec::new("k", vec![1])]),
        }]),
        non_const_buffer_sizes: Some(vec![0]),
        ..ExecutionPlan::default()
    };
    let program = Program {
        execution_plan: Some(vec![plan]),
        constant_buffer: Some(vec![]),
        backend_delegate_data: Some(vec![]),
        segments: Some(segments),
        constant_segment: Some(SubsegmentOffsets { segment_index: 0, offsets: Some(vec![0, 0, 16]) }),
        named_data: Some(vec![NamedData { key: Some("weights".into()), segment_index: 2 }]),
        ..Program::default()
    };
    (program, seg_data)
}

fn write(p: &Program, segs: &[Vec<u8>]) -> Vec<u8> {
    let refs: Vec<&[u8]> = segs.iter().map(Vec::as_slice).collect();
    format::write(p, &refs, &WriteOptions::default()).expect("writes")
}

fn err(data: &[u8]) -> FormatError {
    match format::load(data) {
        Ok(_) => panic!("expected a rejection"),
        Err(e) => e,
    }
}

fn put_u64(data: &mut [u8], at: usize, v: u64) {
    data[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn sample_is_valid() {
    let (p, s) = sample();
    let data = write(&p, &s);
    let loaded = format::load(&data).expect("the unmodified sample loads");
    assert_eq!(loaded.program, p);
    assert_eq!(loaded.delegate_blobs[0][0], Some(&b"blob-bytes"[..]));
    assert_eq!(loaded.named_data_map(), vec![("weights", &[1u8, 2, 3, 4][..])]);
    assert_eq!(loaded.constants[2], &[7u8; 16][..]);
}

#[test]
fn empty_input() {
    assert_eq!(err(&[]), FormatError::Empty);
}

#[test]
fn shorter_than_preamble() {
    assert_eq!(err(b"\x08\0\0\0ET1"), FormatError::TooShort { len: 7 });
}

#[test]
fn wrong_identifier() {
    let mut d = real("cpu_add_mul");
    d[4..8].copy_from_slice(b"ET11");
    let e = err(&d);
    assert!(matches!(&e, FormatError::WrongIdentifier { found, .. } if found == "ET11"), "{e}");
    assert!(e.to_string().contains("incompatible program version"), "{e}");
    d[4..8].copy_from_slice(b"ABCD");
    assert!(!err(&d).to_string().contains("incompatible"));
}

#[test]
fn header_length_below_24() {
    let mut d = real("cond_cpu");
    d[12..16].copy_from_slice(&20u32.to_le_bytes());
    assert_eq!(err(&d), FormatError::HeaderTooShort { length: 20 });
}

#[test]
fn header_truncated() {
    let d = b"\x20\0\0\0ET12eh00\x20\0\0\0\x01\x02".to_vec();
    assert!(matches!(err(&d), FormatError::HeaderTruncated { .. }));
}

#[test]
fn program_size_past_end_of_file() {
    let mut d = real("cond_cpu");
    let len = d.len() as u64;
    put_u64(&mut d, 16, len + 1);
    assert_eq!(err(&d), FormatError::ProgramSizePastEnd { program_size: len + 1, file_len: len as usize });
}

#[test]
fn segment_base_offset_past_end() {
    let mut d = real("cond_cpu");
    put_u64(&mut d, 24, 1 << 40);
    assert!(matches!(err(&d), FormatError::SegmentRegionPastEnd { base, .. } if base == 1 << 40));
}

#[test]
fn segment_region_overflowing_u64() {
    let mut d = real("cond_cpu");
    put_u64(&mut d, 24, u64::MAX - 4);
    assert!(matches!(err(&d), FormatError::SegmentRegionOverflow { .. }));
}

#[test]
fn segment_base_inside_program_data() {
    let mut d = real("cond_cpu");
    put_u64(&mut d, 24, 64);
    assert!(matches!(err(&d), FormatError::SegmentBaseInsideProgram { base: 64, .. }));
}

#[test]
fn segment_offset_plus_size_overflowing_u64() {
    let (mut p, s) = sample();
    let d = write(&p, &s);
    let n = d.len();
    // Rewrite the table in the model, then splice its bytes into the original file layout.
    p.segments.as_mut().expect("segments")[1] = DataSegment { offset: u64::MAX - 2, size: 10 };
    let bad = write_unchecked_segments(&p, &d);
    assert_eq!(bad.len(), n);
    assert!(matches!(err(&bad), FormatError::SegmentOverflow { index: 1, .. }), "{}", err(&bad));
}

#[test]
fn segment_past_end_of_segment_data() {
    let (mut p, s) = sample();
    let d = write(&p, &s);
    p.segments.as_mut().expect("segments")[2].size = 4096;
    let bad = write_unchecked_segments(&p, &d);
    assert!(matches!(err(&bad), FormatError::SegmentPastEnd { index: 2, .. }), "{}", err(&bad));
}

/// Writes `p`'s FlatBuffers with the header and segment bytes of `file` (no consistency check).
fn write_unchecked_segments(p: &Program, file: &[u8]) -> Vec<u8> {
    let fb = format::write_flatbuffer(p, &WriteOptions::default()).expect("written");
    let header = format::ExtendedHeader::parse(file).expect("parses").expect("has header");
    let mut h = header;
    h.program_size = 32 + fb.len() as u64;
    assert!(h.program_size <= header.segment_base_offset, "fits before the segments");
    let mut out = Vec::new();
    let root = u32::from_le_bytes([fb[0], fb[1], fb[2], fb[3]]) + 32;
    out.extend_from_slice(&root.to_le_bytes());
    out.extend_from_slice(&fb[4..8]);
    out.extend_from_slice(&h.encode(32));
    out.extend_from_slice(&fb[8..]);
    out.resize(header.segment_base_offset as usize, 0);
    out.extend_from_slice(&file[header.segment_base_offset as usize..]);
    out
}

#[test]
fn segment_data_without_header() {
    let (mut p, _) = sample();
    p.segments = Some(vec![DataSegment { offset: 0, size: 0 }, DataSegment { offset: 0, size: 8 }]);
    p.named_data = None;
    p.execution_plan.as_mut().expect("plans")[0].delegates = Some(vec![]);
    p.constant_segment = Some(SubsegmentOffsets { segment_index: 0, offsets: Some(vec![0]) });
    let fb = format::write_flatbuffer(&p, &WriteOptions::default()).expect("written");
    assert_eq!(err(&fb), FormatError::SegmentWithoutHeader { index: 1, size: 8 });
}

#[test]
fn root_offset_out_of_range() {
    let mut d = real("cpu_add_mul");
    d[0..4].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    assert!(matches!(err(&d), FormatError::RootOffsetOutOfRange { root: 0xffff_fff0, .. }));
    d[0..4].copy_from_slice(&4u32.to_le_bytes());
    assert!(matches!(err(&d), FormatError::RootOffsetOutOfRange { root: 4, .. }));
}

/// A program whose only plan has one EValue with the given union tag and an empty payload.
fn program_with_value_tag(tag: u8, with_payload: bool) -> Vec<u8> {
    let mut b = FlatBufferBuilder::new();
    let payload = {
        let s = b.start_table();
        b.end_table(s)
    };
    let ev = {
        let s = b.start_table();
        b.push_slot::<u8>(4, tag, 0);
        if with_payload {
            b.push_slot_always(6, payload);
        }
        b.end_table(s)
    };
    let vals = b.create_vector(&[ev]);
    finish_with_values(&mut b, vals)
}

/// Finishes a Program whose only plan has `vals` as its values (slot 2 of ExecutionPlan,
/// slot 1 of Program).
fn finish_with_values<T>(b: &mut FlatBufferBuilder, vals: flatbuffers::WIPOffset<T>) -> Vec<u8> {
    let plan = {
        let s = b.start_table();
        b.push_slot_always(8, vals);
        b.end_table(s)
    };
    let plans = b.create_vector(&[plan]);
    let prog = {
        let s = b.start_table();
        b.push_slot_always(6, plans);
        b.end_table(s)
    };
    b.finish(prog, Some("ET12"));
    b.finished_data().to_vec()
}

#[test]
fn union_tag_out_of_range() {
    assert!(format::load(&program_with_value_tag(1, true)).is_ok(), "Null with payload is fine");
    let e = err(&program_with_value_tag(42, true));
    assert_eq!(
        e,
        FormatError::UnknownUnionTag {
            union: "KernelTypes",
            tag: 42,
            path: "execution_plan[0].values[0].val_type".into()
        }
    );
    assert!(matches!(err(&program_with_value_tag(0, false)), FormatError::UnknownUnionTag { tag: 0, .. }));
}

#[test]
fn a_verifier_error_after_an_undeclared_tag_is_the_one_reported() {
    // values[0] has an undeclared tag; values[1] (an Int) is the 5th table, past a limit of 4.
    // As in verify-then-decode, the verifier's refusal wins wherever it lies.
    let mut b = FlatBufferBuilder::new();
    let payload = {
        let s = b.start_table();
        b.end_table(s)
    };
    let unknown = {
        let s = b.start_table();
        b.push_slot::<u8>(4, 42, 0);
        b.push_slot_always(6, payload);
        b.end_table(s)
    };
    let int = {
        let s = b.start_table();
        b.push_slot::<i64>(4, 7, 0);
        b.end_table(s)
    };
    let second = {
        let s = b.start_table();
        b.push_slot::<u8>(4, 2, 0);
        b.push_slot_always(6, int);
        b.end_table(s)
    };
    let vals = b.create_vector(&[unknown, second]);
    let d = finish_with_values(&mut b, vals);
    assert!(matches!(err(&d), FormatError::UnknownUnionTag { tag: 42, .. }), "{}", err(&d));
    let limits = LoadLimits { max_tables: 4, ..LoadLimits::default() };
    let e = format::load_with(&d, &limits).expect_err("five tables");
    assert!(matches!(&e, FormatError::VerifierLimit { detail } if detail.contains("values[1]")), "{e}");
}

#[test]
fn union_tag_without_value() {
    // The verifier already refuses a discriminant without its value, naming the path.
    let e = err(&program_with_value_tag(2, false));
    assert!(
        matches!(&e, FormatError::Malformed { detail } if detail.contains("execution_plan[0].values[0].val ")),
        "{e}"
    );
}

#[test]
fn nesting_past_the_verifier_depth() {
    let d = real("cpu_add_mul");
    let limits = LoadLimits { max_depth: 3, ..LoadLimits::default() };
    let e = format::load_with(&d, &limits).expect_err("depth 3 is too shallow for a program");
    assert!(matches!(&e, FormatError::VerifierLimit { detail } if detail.contains("depth")), "{e}");
    assert!(format::load(&d).is_ok(), "the default depth ({}) accepts it", format::MAX_DEPTH);
}

#[test]
fn too_many_tables() {
    let d = real("xnn_single_partition");
    let limits = LoadLimits { max_tables: 10, ..LoadLimits::default() };
    let e = format::load_with(&d, &limits).expect_err("10 tables is too few");
    assert!(matches!(&e, FormatError::VerifierLimit { detail } if detail.contains("tables")), "{e}");
}

#[test]
fn vector_length_far_past_the_end() {
    let (mut p, s) = sample();
    let marker = 0x1122_3344_5566_7788i64;
    p.execution_plan.as_mut().expect("plans")[0].non_const_buffer_sizes = Some(vec![marker]);
    let mut d = write(&p, &s);
    let at = d.windows(8).position(|w| w == marker.to_le_bytes()).expect("marker present");
    d[at - 4..at].copy_from_slice(&0x0fff_ffffu32.to_le_bytes());
    let e = err(&d);
    assert!(matches!(&e, FormatError::Malformed { detail } if detail.contains("non_const_buffer_sizes")), "{e}");
}

#[test]
fn dangling_constant_segment_index() {
    let (mut p, s) = sample();
    p.constant_segment.as_mut().expect("cs").segment_index = 9;
    let e = err(&write(&p, &s));
    assert_eq!(
        e,
        FormatError::SegmentIndexOutOfRange { field: "constant_segment.segment_index".into(), index: 9, count: 3 }
    );
}

#[test]
fn constant_offset_past_its_segment() {
    let (mut p, s) = sample();
    p.constant_segment.as_mut().expect("cs").offsets = Some(vec![0, 0, 33]);
    let e = err(&write(&p, &s));
    assert!(
        matches!(&e, FormatError::SubsegmentOffsetPastEnd { field, offset: 33, segment: 0, size: 32 } if field == "constant_segment.offsets[2]"),
        "{e}"
    );
}

#[test]
fn constant_buffer_together_with_constant_segment() {
    let (mut p, s) = sample();
    p.constant_buffer = Some(vec![Buffer { storage: Some(Bytes(vec![])) }, Buffer { storage: Some(Bytes(vec![1])) }]);
    assert_eq!(err(&write(&p, &s)), FormatError::ConstantBufferAndSegment { count: 2 });
}

#[test]
fn dangling_named_data_segment() {
    let (mut p, s) = sample();
    p.named_data.as_mut().expect("nd")[0].segment_index = 3;
    let e = err(&write(&p, &s));
    assert_eq!(
        e,
        FormatError::SegmentIndexOutOfRange { field: "named_data[0].segment_index".into(), index: 3, count: 3 }
    );
}

#[test]
fn named_data_without_segments_table() {
    let (mut p, _) = sample();
    p.segments = None;
    p.constant_segment = None;
    p.execution_plan.as_mut().expect("plans")[0].delegates = Some(vec![]);
    let d = format::write_flatbuffer(&p, &WriteOptions::default()).expect("written");
    assert!(matches!(err(&d), FormatError::MissingField { field } if field.starts_with("segments")));
}

#[test]
fn dangling_mutable_data_segment() {
    let (mut p, s) = sample();
    p.mutable_data_segments = Some(vec![SubsegmentOffsets { segment_index: 5, offsets: Some(vec![0]) }]);
    let e = err(&write(&p, &s));
    assert!(
        matches!(&e, FormatError::SegmentIndexOutOfRange { field, index: 5, .. } if field == "mutable_data_segments[0].segment_index"),
        "{e}"
    );
}

#[test]
fn mutable_offset_past_its_segment() {
    let (mut p, s) = sample();
    p.mutable_data_segments = Some(vec![SubsegmentOffsets { segment_index: 2, offsets: Some(vec![0, 5]) }]);
    let e = err(&write(&p, &s));
    assert!(
        matches!(&e, FormatError::SubsegmentOffsetPastEnd { field, offset: 5, .. } if field == "mutable_data_segments[0].offsets[1]"),
        "{e}"
    );
}

fn with_processed(r: BackendDelegateDataReference) -> FormatError {
    let (mut p, s) = sample();
    p.execution_plan.as_mut().expect("plans")[0].delegates.as_mut().expect("delegates")[0].processed = Some(r);
    err(&write(&p, &s))
}

#[test]
fn dangling_delegate_segment_index() {
    let e = with_processed(BackendDelegateDataReference { location: DataLocation::SEGMENT, index: 7 });
    assert_eq!(
        e,
        FormatError::SegmentIndexOutOfRange {
            field: "execution_plan[0].delegates[0].processed.index".into(),
            index: 7,
            count: 3
        }
    );
}

#[test]
fn dangling_delegate_inline_index() {
    let e = with_processed(BackendDelegateDataReference { location: DataLocation::INLINE, index: 0 });
    assert_eq!(
        e,
        FormatError::InlineIndexOutOfRange {
            field: "execution_plan[0].delegates[0].processed".into(),
            index: 0,
            count: 0
        }
    );
}

#[test]
fn inline_reference_without_backend_delegate_data() {
    let (mut p, s) = sample();
    p.backend_delegate_data = None;
    p.execution_plan.as_mut().expect("plans")[0].delegates.as_mut().expect("delegates")[0].processed =
        Some(BackendDelegateDataReference { location: DataLocation::INLINE, index: 0 });
    assert_eq!(
        err(&write(&p, &s)),
        FormatError::InlineDataAbsent { field: "execution_plan[0].delegates[0].processed".into() }
    );
}

#[test]
fn inline_entry_without_data() {
    let (mut p, s) = sample();
    p.backend_delegate_data = Some(vec![BackendDelegateInlineData { data: None }]);
    assert_eq!(err(&write(&p, &s)), FormatError::MissingField { field: "backend_delegate_data[0].data".into() });
}

#[test]
fn unknown_delegate_data_location() {
    let e = with_processed(BackendDelegateDataReference { location: DataLocation(5), index: 0 });
    assert!(matches!(e, FormatError::UnknownDataLocation { location: 5, .. }));
}

/// A program whose values are `refs` references to one Tensor with `sizes` sizes.
fn shared_tensor(sizes: usize, refs: usize) -> Vec<u8> {
    let mut b = FlatBufferBuilder::new();
    let sizes = b.create_vector(&vec![1i32; sizes]);
    let tensor = {
        let s = b.start_table();
        b.push_slot_always(8, sizes);
        b.end_table(s)
    };
    let ev = {
        let s = b.start_table();
        b.push_slot::<u8>(4, 5, 0);
        b.push_slot_always(6, tensor);
        b.end_table(s)
    };
    let vals = b.create_vector(&vec![ev; refs]);
    finish_with_values(&mut b, vals)
}

#[test]
fn shared_table_bomb_is_bounded() {
    // One Tensor table with a 4,000-entry sizes vector, referenced 20,000 times: a tiny file
    // whose tree expansion is ~320 MB. It must be refused, not expanded.
    let d = shared_tensor(4000, 20_000);
    assert!(d.len() < 200_000);
    let e = err(&d);
    assert!(matches!(e, FormatError::VerifierLimit { .. } | FormatError::DecodeBudgetExceeded { .. }), "{e}");
}

#[test]
fn shared_tables_are_counted_as_the_crate_verifier_counts_them() {
    // One Tensor with a 2,000-entry sizes vector, referenced n times: around n = 135 its tree
    // expansion crosses the apparent-size limit (8 x the data + 1 MiB). The loader's reader and
    // the crate's verifier must draw that line at the same n.
    let (mut accepted, mut refused) = (0, 0);
    for n in 100..=170 {
        let d = shared_tensor(2000, n);
        if let Err(disagreement) = format::oracle::decoders_agree(&d) {
            panic!("{n} references: {disagreement}");
        }
        let loads = format::load(&d);
        let verified = format::oracle::verify_only(&d).is_some_and(|r| r.is_ok());
        assert_eq!(verified, loads.is_ok(), "{n} references: the verify-only pass");
        match loads {
            Ok(_) => accepted += 1,
            Err(FormatError::VerifierLimit { .. }) => refused += 1,
            Err(e) => panic!("{n} references: {e}"),
        }
    }
    assert!(accepted > 0 && refused > 0, "the sweep crosses the limit: {accepted} accepted, {refused} refused");
}

#[test]
fn every_truncation_of_a_real_file_is_rejected_or_only_drops_unused_bytes() {
    for name in ["cond_cpu", "xnn_delegate_inline", "demo_repeated_call_3x", "legacy_et021_inline_constants"] {
        let d = real(name);
        let full = format::load(&d).expect("loads");
        let has_header = full.header.is_some();
        let mut accepted = Vec::new();
        for len in 0..d.len() {
            match format::load(&d[..len]) {
                Err(e) => assert!(!e.to_string().is_empty(), "{name}[..{len}]"),
                Ok(l) => {
                    // A prefix that still loads only lost bytes nothing refers to.
                    assert_eq!(l.program, full.program, "{name}[..{len}] loads another program");
                    accepted.push(len);
                }
            }
        }
        if has_header {
            // With an extended header the file's length is declared: every cut is detected.
            assert_eq!(accepted, Vec::<usize>::new(), "{name}");
        } else {
            // Without one only trailing bytes after the last referenced one can go.
            assert!(accepted.iter().all(|l| *l + 16 >= d.len()), "{name}: {accepted:?} of {}", d.len());
        }
    }
}

#[test]
fn program_size_inside_the_header() {
    let mut d = real("map_cpu");
    put_u64(&mut d, 16, 20);
    assert!(matches!(err(&d), FormatError::ProgramSizeTooSmall { program_size: 20, minimum: 40 }), "{}", err(&d));
}

#[test]
fn every_preamble_header_and_root_bound_lies_where_pte_format_puts_it() {
    // Each bound on its accepting side, then one past it (pte-format §7): a reader off by one
    // at any of them refuses or accepts the wrong file.
    // Exactly the 8-byte preamble is not too short: its root offset is what is out of range.
    assert_eq!(err(b"\x08\0\0\0ET12"), FormatError::RootOffsetOutOfRange { root: 8, limit: 4 });
    assert_eq!(err(b"\x08\0\0\0ET1"), FormatError::TooShort { len: 7 });
    let file = real("map_cpu");
    let len = file.len() as u64;
    // map_cpu: a 32-byte header, program_size 2248, one segment region [2304, 2308) ending at
    // the end of the file, which loads.
    assert!(format::load(&file).is_ok());
    // program_size: the preamble and header (40 bytes) is the least, the file's length the most.
    let mut d = file.clone();
    put_u64(&mut d, 16, 40);
    assert!(matches!(err(&d), FormatError::RootOffsetOutOfRange { .. }), "{}", err(&d));
    put_u64(&mut d, 16, 39);
    assert_eq!(err(&d), FormatError::ProgramSizeTooSmall { program_size: 39, minimum: 40 });
    let mut d = file.clone();
    put_u64(&mut d, 16, len);
    put_u64(&mut d, 24, 0);
    put_u64(&mut d, 32, 0);
    assert!(!matches!(err(&d), FormatError::ProgramSizePastEnd { .. }), "{}", err(&d));
    put_u64(&mut d, 16, len + 1);
    assert_eq!(err(&d), FormatError::ProgramSizePastEnd { program_size: len + 1, file_len: file.len() });
    // The segment region may end at the end of the file, not a byte past it, wherever it starts.
    let mut d = file.clone();
    put_u64(&mut d, 32, 5);
    assert_eq!(err(&d), FormatError::SegmentRegionPastEnd { base: 2304, end: len + 1, file_len: file.len() });
    put_u64(&mut d, 24, len);
    put_u64(&mut d, 32, 0);
    // An empty region at the very end is a region; it is the segment in it that does not fit.
    assert!(matches!(err(&d), FormatError::SegmentPastEnd { index: 0, .. }), "{}", err(&d));
    // A 32-byte header bounds the segments by its data size, 0 included; a 24-byte one (no size)
    // by the end of the file.
    let mut d = file.clone();
    put_u64(&mut d, 32, 0);
    assert!(matches!(err(&d), FormatError::SegmentPastEnd { index: 0, .. }), "{}", err(&d));
    d[12..16].copy_from_slice(&24u32.to_le_bytes());
    assert!(format::load(&d).is_ok(), "a 24-byte header lets segments run to the end of the file");
    // The root table may start right after the preamble (where the verifier then judges it).
    let mut d = file.clone();
    d[0..4].copy_from_slice(&8u32.to_le_bytes());
    assert!(matches!(err(&d), FormatError::Malformed { .. }), "the header is no table: {}", err(&d));
    d[0..4].copy_from_slice(&7u32.to_le_bytes());
    assert!(matches!(err(&d), FormatError::RootOffsetOutOfRange { root: 7, .. }), "{}", err(&d));
}

#[test]
fn segment_data_size_without_a_segment_base() {
    let mut d = real("map_cpu");
    put_u64(&mut d, 24, 0);
    put_u64(&mut d, 32, 64);
    assert!(matches!(err(&d), FormatError::SegmentRegionPastEnd { base: 0, end: 64, .. }), "{}", err(&d));
}

#[test]
fn named_data_entry_without_a_key() {
    let (mut p, s) = sample();
    p.named_data = Some(vec![NamedData { key: None, segment_index: 2 }]);
    assert_eq!(err(&write(&p, &s)), FormatError::MissingField { field: "named_data[0].key".into() });
}

#[test]
fn constant_segment_without_a_segment_table() {
    let (mut p, _) = sample();
    p.segments = None;
    p.named_data = None;
    p.execution_plan.as_mut().expect("plans")[0].delegates = Some(vec![]);
    let d = format::write(&p, &[], &WriteOptions::default()).expect("writes");
    assert_eq!(err(&d), FormatError::MissingField { field: "segments (required by constant_segment)".into() });
}

#[test]
fn inline_constant_buffer_without_storage() {
    let (mut p, s) = sample();
    p.constant_segment = None;
    p.constant_buffer = Some(vec![Buffer { storage: Some(Bytes(vec![])) }, Buffer { storage: None }]);
    assert_eq!(err(&write(&p, &s)), FormatError::MissingField { field: "constant_buffer[1].storage".into() });
}

/// A program whose only plan has one chain with one instruction of the given union tag.
fn program_with_instruction_tag(tag: u8, with_payload: bool) -> Vec<u8> {
    let mut b = FlatBufferBuilder::new();
    let payload = {
        let s = b.start_table();
        b.end_table(s)
    };
    let ins = {
        let s = b.start_table();
        b.push_slot::<u8>(4, tag, 0);
        if with_payload {
            b.push_slot_always(6, payload);
        }
        b.end_table(s)
    };
    let instrs = b.create_vector(&[ins]);
    let chain = {
        let s = b.start_table();
        b.push_slot_always(8, instrs);
        b.end_table(s)
    };
    let chains = b.create_vector(&[chain]);
    let plan = {
        let s = b.start_table();
        b.push_slot_always(14, chains);
        b.end_table(s)
    };
    let plans = b.create_vector(&[plan]);
    let prog = {
        let s = b.start_table();
        b.push_slot_always(6, plans);
        b.end_table(s)
    };
    b.finish(prog, Some("ET12"));
    b.finished_data().to_vec()
}

#[test]
fn instruction_union_tag_out_of_range() {
    let e = err(&program_with_instruction_tag(9, true));
    assert_eq!(
        e,
        FormatError::UnknownUnionTag {
            union: "InstructionArguments",
            tag: 9,
            path: "execution_plan[0].chains[0].instructions[0].instr_args_type".into()
        }
    );
    assert!(matches!(err(&program_with_instruction_tag(0, false)), FormatError::UnknownUnionTag { tag: 0, .. }));
}

#[test]
fn alignments_combine_by_least_common_multiple() {
    use pte::format::header::lcm;
    assert_eq!(lcm(4, 6), 12);
    assert_eq!(lcm(16, 128), 128);
    assert_eq!(lcm(0, 8), 8);
    assert_eq!(lcm(3, 0), 3);
}

#[test]
fn root_offset_at_the_limit_is_in_range_but_not_a_table() {
    let mut d = real("cpu_add_mul");
    let limit = d.len() - 4;
    d[0..4].copy_from_slice(&(limit as u32).to_le_bytes());
    assert!(matches!(err(&d), FormatError::Malformed { .. }), "{}", err(&d));
}

/// A program whose `n` plans all share one `non_const_buffer_sizes` vector of `m` entries.
fn shared_vector_program(n: usize, m: usize) -> Vec<u8> {
    let mut b = FlatBufferBuilder::new();
    let sizes = b.create_vector(&vec![0i64; m]);
    let plan = {
        let s = b.start_table();
        b.push_slot_always(20, sizes);
        b.end_table(s)
    };
    let plans = b.create_vector(&vec![plan; n]);
    let prog = {
        let s = b.start_table();
        b.push_slot_always(6, plans);
        b.end_table(s)
    };
    b.finish(prog, Some("ET12"));
    b.finished_data().to_vec()
}

#[test]
fn a_small_file_may_fan_out_within_one_mebibyte() {
    // 100 plans sharing one 1,000-entry vector: ~8 KB on disk, ~800 KB decoded. Within the
    // verifier's 8 × input + 1 MiB and the decoder's 48 × input + 1 MiB.
    let d = shared_vector_program(100, 1000);
    assert!(d.len() < 10_000);
    let l = format::load(&d).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(l.program.plans().len(), 100);
    // Twenty times that fans out past both budgets.
    let d = shared_vector_program(2000, 1000);
    assert!(matches!(err(&d), FormatError::VerifierLimit { .. } | FormatError::DecodeBudgetExceeded { .. }));
}

#[test]
fn the_writer_refuses_gaps_between_segments_beyond_64_kib_each() {
    let (mut p, s) = sample();
    let refs: Vec<&[u8]> = s.iter().map(Vec::as_slice).collect();
    let table = p.segments.clone().expect("segments");
    // Push the last segment 64 KiB × (segments + 1) further: refused.
    let slack = format::MAX_SEGMENT_GAP * (table.len() as u64 + 1);
    let mut far = table.clone();
    let last = far.len() - 1;
    far[last].offset += slack + 1;
    p.segments = Some(far);
    let e = format::write(&p, &refs, &WriteOptions::default()).expect_err("refused");
    assert!(matches!(&e, FormatError::Write { detail } if detail.contains("gaps above")), "{e}");
    // Exactly at the allowance it is written.
    let data_total: u64 = s.iter().map(|d| d.len() as u64).sum();
    let mut edge = table.clone();
    let end = edge[last].offset + edge[last].size;
    edge[last].offset += data_total + slack - end;
    p.segments = Some(edge);
    assert!(format::write(&p, &refs, &WriteOptions::default()).is_ok());
}

#[test]
fn an_old_24_byte_header_lets_segments_run_to_the_end_of_the_file() {
    // The same file with its header declared 24 bytes long (ExecuTorch before the data-size
    // field): no segment data size is read, and the segments still resolve.
    let d = real("demo_repeated_call_3x");
    let full = pte::format::load(&d).expect("loads");
    assert!(full.segments.iter().any(|s| !s.is_empty()), "the file has segment data");
    let mut old = d.clone();
    old[12..16].copy_from_slice(&24u32.to_le_bytes());
    let loaded = pte::format::load(&old).expect("a 24-byte header loads");
    assert_eq!(loaded.header.map(|h| (h.length, h.segment_data_size)), Some((24, 0)));
    assert_eq!(loaded.segments, full.segments);
    assert_eq!(loaded.program, full.program);
}

#[test]
fn a_malformed_scratch_declaration_says_which_way_it_is_malformed() {
    use pte::program::{ScratchError, ScratchSpec, encode_scratch, parse_scratch};
    let specs = [ScratchSpec { nbytes: 64, mem_id: -1 }, ScratchSpec { nbytes: 8, mem_id: 2 }];
    let value = encode_scratch(&specs);
    assert_eq!(parse_scratch(&value), Ok(specs.to_vec()));
    assert_eq!(parse_scratch(&value[..3]), Err(ScratchError::NoCount { len: 3 }));
    assert_eq!(parse_scratch(&value[..27]), Err(ScratchError::WrongLength { count: 2, want: 28, len: 27 }));
    // A count whose bytes overflow on this machine, or merely exceed the value.
    let huge = u32::MAX.to_le_bytes();
    let expected = match (u32::MAX as usize).checked_mul(12).and_then(|n| n.checked_add(4)) {
        Some(want) => ScratchError::WrongLength { count: u32::MAX, want, len: 4 },
        None => ScratchError::CountOverflows { count: u32::MAX },
    };
    assert_eq!(parse_scratch(&huge), Err(expected));
}
