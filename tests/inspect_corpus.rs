//! `inspect --json` of every file ExecuTorch wrote (corpus/real) matches ExecuTorch's own dump:
//! the program, the extended header, the root offset and every segment's users. (Decoding and
//! the writer's byte-exactness are tested in `crates/pte/tests/corpus.rs`.)

#![forbid(unsafe_code)]

use ptecheck::format;
use serde_json::Value;
use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/real")
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

#[test]
fn every_corpus_file_decodes_to_what_executorch_reads() {
    for name in cases() {
        let data = read(&name, "pte");
        let loaded = format::load(&data).unwrap_or_else(|e| panic!("{name}: {e}"));
        let ours = ptecheck::inspect::to_json(&loaded);
        let reference: Value = serde_json::from_slice(&read(&name, "json")).expect("json");
        assert_eq!(ours["program"], reference["program"], "{name}: program differs");
        assert_eq!(ours["extended_header"], reference["extended_header"], "{name}: header differs");
        assert_eq!(ours["root_table_offset"], reference["root_table_offset"], "{name}");
        assert_eq!(ours["segments_resolved"], reference["segments_resolved"], "{name}: segments differ");
    }
}
