//! Compatibility with files ExecuTorch itself wrote (corpus/real, copied from the shared corpus):
//! decoding matches ExecuTorch's own decoder, and our writer reproduces the bytes.

#![forbid(unsafe_code)]

use pte::format::{self, Layout, WriteOptions};
use serde_json::Value;
use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus/real")
}

fn cases() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(corpus_dir())
        .expect("corpus/real exists")
        .filter_map(|e| {
            let p = e.ok()?.path();
            if p.extension()? != "pte" {
                return None;
            }
            Some(p.file_stem()?.to_string_lossy().into_owned())
        })
        .collect();
    v.sort();
    assert_eq!(v.len(), 21, "the public corpus has 21 programs");
    v
}

fn read(name: &str, ext: &str) -> Vec<u8> {
    std::fs::read(corpus_dir().join(format!("{name}.{ext}"))).expect("corpus file")
}

/// Written by ExecuTorch 0.2.1 (flatc-based serializer); every other file by 1.5.1.
fn layout_of(name: &str) -> Layout {
    if name.starts_with("legacy_") { Layout::Flatc } else { Layout::PythonBuilder }
}

#[test]
fn every_corpus_file_decodes_to_what_executorch_reads() {
    for name in cases() {
        let data = read(&name, "pte");
        let loaded = format::load(&data).unwrap_or_else(|e| panic!("{name}: {e}"));
        let ours = serde_json::to_value(&loaded.program).expect("serialises");
        let reference: Value = serde_json::from_slice(&read(&name, "json")).expect("json");
        assert_eq!(ours, reference["program"], "{name}: program differs");
    }
}

#[test]
fn delegate_blobs_resolve_to_the_recorded_sha256() {
    for name in cases() {
        let data = read(&name, "pte");
        let loaded = format::load(&data).expect("loads");
        let reference: Value = serde_json::from_slice(&read(&name, "json")).expect("json");
        for (pi, plan) in loaded.program.plans().iter().enumerate() {
            let recorded = reference["delegates_resolved"][plan.name_str()].as_array().cloned().unwrap_or_default();
            assert_eq!(recorded.len(), plan.delegate_list().len(), "{name}");
            for (di, rec) in recorded.iter().enumerate() {
                let blob = loaded.delegate_blobs[pi][di].expect("blob resolved");
                let sha = pte::program::sha256_hex(blob);
                assert_eq!(Some(sha.as_str()), rec["blob_sha256"].as_str(), "{name} delegate {di}");
                assert_eq!(Some(blob.len() as u64), rec["blob_len"].as_u64(), "{name} delegate {di}");
            }
        }
    }
}

#[test]
fn writer_reproduces_executorch_bytes_exactly() {
    for name in cases() {
        let data = read(&name, "pte");
        let loaded = format::load(&data).expect("loads");
        let opts = WriteOptions { layout: layout_of(&name), ..WriteOptions::default() };
        let out = format::write_loaded(&loaded, &opts).expect("writes");
        let first_diff = data.iter().zip(&out).position(|(a, b)| a != b);
        assert!(out == data, "{name}: {} vs {} bytes, first difference at {first_diff:?}", out.len(), data.len());
    }
}

#[test]
fn rewritten_files_load_to_an_equal_program_in_either_layout() {
    for name in cases() {
        let data = read(&name, "pte");
        let loaded = format::load(&data).expect("loads");
        for layout in [Layout::PythonBuilder, Layout::Flatc] {
            let opts = WriteOptions { layout, ..WriteOptions::default() };
            let out = format::write_loaded(&loaded, &opts).expect("writes");
            let again = format::load(&out).unwrap_or_else(|e| panic!("{name} {layout:?}: {e}"));
            assert_eq!(again.program, loaded.program, "{name} {layout:?}");
            assert_eq!(again.segments, loaded.segments, "{name} {layout:?}");
            assert_eq!(again.delegate_blobs, loaded.delegate_blobs, "{name} {layout:?}");
            assert_eq!(format::write_loaded(&again, &opts).expect("writes"), out, "{name}: write∘load∘write");
        }
    }
}

#[test]
fn legacy_inline_constants_resolve_from_constant_buffer() {
    let data = read("legacy_et021_inline_constants", "pte");
    let loaded = format::load(&data).expect("loads");
    assert!(loaded.header.is_none());
    assert_eq!(loaded.constant_source, format::ConstantSource::InlineBuffer);
    assert_eq!(loaded.constants.iter().map(|c| c.len()).collect::<Vec<_>>(), vec![0, 128, 16, 4]);
    // A constant segment holding only the placeholder offset is empty: the inline buffers are
    // still the constants (ExecuTorch's Program::load takes its inline branch unless there are
    // two offsets or more), not dropped.
    for offsets in [vec![], vec![0]] {
        let mut p = loaded.program.clone();
        p.constant_segment = Some(pte::program::SubsegmentOffsets { segment_index: 0, offsets: Some(offsets.clone()) });
        let bytes = format::write(&p, &[], &format::WriteOptions::default()).expect("writes");
        let again = format::load(&bytes).expect("loads");
        assert_eq!(again.constant_source, format::ConstantSource::InlineBuffer, "{offsets:?}");
        assert_eq!(again.constants, loaded.constants, "{offsets:?}");
    }
}

#[test]
fn shared_blob_is_one_segment_for_three_delegates() {
    let data = read("xnn_repeated_call_3x", "pte");
    let loaded = format::load(&data).expect("loads");
    let plan = &loaded.program.plans()[0];
    assert_eq!(plan.delegate_list().len(), 3);
    let refs: Vec<_> = plan.delegate_list().iter().map(|d| d.processed.expect("processed")).collect();
    assert!(refs.windows(2).all(|w| w[0] == w[1]), "all three reference the same blob: {refs:?}");
    let ptrs: Vec<_> = loaded.delegate_blobs[0].iter().map(|b| b.expect("blob").as_ptr()).collect();
    assert!(ptrs.windows(2).all(|w| w[0] == w[1]), "blobs borrow the same input bytes");
    let within = |p: *const u8| {
        let r = data.as_ptr_range();
        r.start <= p && p < r.end
    };
    assert!(ptrs.iter().all(|p| within(*p)), "segment bytes are borrowed, not copied");
}
