//! Every single-byte flip of a real file is rejected by the loader with a typed error, or loads
//! and is then checked and run without a panic, hang or leak (the loader alone is tested in
//! `crates/pte/tests`; this one needs the runtime).

use ptecheck::format;

#[test]
fn every_single_byte_flip_of_a_real_file_is_rejected_or_handled() {
    let d = std::fs::read(format!("{}/corpus/real/demo_repeated_call_3x.pte", env!("CARGO_MANIFEST_DIR")))
        .expect("corpus file");
    let full = format::load(&d).expect("loads");
    let rt = ptecheck::backends::default_runtime();
    let (mut rejected, mut same, mut changed) = (0, 0, 0);
    for i in 0..d.len() {
        let mut m = d.clone();
        m[i] ^= 0xff;
        match format::load(&m) {
            Err(e) => {
                rejected += 1;
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
                    changed += 1;
                }
                // Whatever loads is checked and run without a panic, hang or leak.
                let _ = ptecheck::runtime::check_all_methods(&l);
                let _ = ptecheck::oracle::fuzz::run_all(&l, &rt);
            }
        }
    }
    assert_eq!(rejected + same + changed, d.len());
    assert!(rejected > 0 && changed > 0, "rejected {rejected}, unchanged {same}, changed {changed}");
}
