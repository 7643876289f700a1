//! Every single-byte flip of a real file is rejected by the loader with a typed error, or loads
//! and is then checked and run without a panic (executions are bounded by the instruction
//! budget; the loader alone, with its allocation guard, is tested in `crates/pte/tests` and the
//! fuzz targets). The rejections must come from several different checks, flips of the
//! identifier from exactly its check, and flips of delegate segment bytes must load the same
//! program (segment data is not part of the flatbuffer).

#![forbid(unsafe_code)]

use ptecheck::format;

#[test]
fn every_single_byte_flip_of_a_real_file_is_rejected_or_handled() {
    let d = std::fs::read(format!("{}/corpus/real/demo_repeated_call_3x.pte", env!("CARGO_MANIFEST_DIR")))
        .expect("corpus file");
    let full = format::load(&d).expect("loads");
    let rt = ptecheck::backends::default_runtime();
    let (mut rejected, mut same, mut changed) = (0, 0, 0);
    let mut kinds = std::collections::BTreeSet::new();
    let segment_bytes: Vec<std::ops::Range<usize>> = full
        .segments
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| {
            let start = s.as_ptr() as usize - full.file.as_ptr() as usize;
            start..start + s.len()
        })
        .collect();
    assert!(!segment_bytes.is_empty(), "the file has delegate segments");
    for i in 0..d.len() {
        let mut m = d.clone();
        m[i] ^= 0xff;
        match format::load(&m) {
            Err(e) => {
                rejected += 1;
                kinds.insert(e.kind());
                assert!(!segment_bytes.iter().any(|r| r.contains(&i)), "flip at {i} in segment data rejected: {e}");
                // The preamble's identifier is checked exactly.
                if (4..8).contains(&i) {
                    assert_eq!(e.kind(), "WrongIdentifier", "flip at {i}");
                }
            }
            Ok(l) => {
                assert!(!(4..8).contains(&i), "flip at {i} of the identifier accepted");
                if l.program == full.program {
                    same += 1;
                } else {
                    assert!(
                        !segment_bytes.iter().any(|r| r.contains(&i)),
                        "flip at {i} in segment data changed the program"
                    );
                    changed += 1;
                }
                // Whatever loads is checked and run without a panic, hang or leak.
                let _ = ptecheck::runtime::check_all_methods(&l);
                let _ = ptecheck::campaign::fuzz::run_all(&l, &rt);
            }
        }
    }
    assert_eq!(rejected + same + changed, d.len());
    assert!(rejected > 0 && changed > 0, "rejected {rejected}, unchanged {same}, changed {changed}");
    assert!(kinds.len() >= 5, "rejections from only {kinds:?}");
    let in_segments: usize = segment_bytes.iter().map(|r| r.len()).sum();
    assert!(same >= in_segments, "{same} unchanged programs, {in_segments} segment bytes");
}
