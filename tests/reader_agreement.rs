//! The loader's one-pass reader and the `flatbuffers` crate's verifier with its generated
//! accessors (`format::oracle::decoders_agree`) agree on every real file and on thousands of
//! seeded structural mutations of each: same acceptance, same decoded program, same kind of
//! refusal. The `load_pte` fuzz target runs the same comparison on every input it tries.

#![forbid(unsafe_code)]

use ptecheck::format::{self, oracle::decoders_agree};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use std::path::PathBuf;

fn real_files() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/real");
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .expect("corpus/real")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pte"))
        .map(|p| (p.file_name().unwrap_or_default().to_string_lossy().into_owned(), std::fs::read(&p).expect("read")))
        .collect();
    out.sort();
    out
}

/// One seeded edit of the FlatBuffers data: a byte, an offset-sized or vtable-sized word set to
/// a boundary value, or a truncation.
fn mutate(file: &mut Vec<u8>, program_len: usize, rng: &mut ChaCha8Rng) {
    let pick = |rng: &mut ChaCha8Rng, n: usize| (rng.next_u32() as usize) % n.max(1);
    match pick(rng, 5) {
        0 => {
            let at = pick(rng, program_len);
            file[at] = rng.next_u32() as u8;
        }
        1 | 2 => {
            let at = pick(rng, program_len.saturating_sub(4) / 4) * 4;
            let len = program_len as u32;
            let values = [0, 1, 2, 4, 8, len - 4, len, len + 4, u32::MAX, 0x8000_0000, rng.next_u32() % 64];
            let v = values[pick(rng, values.len())];
            file[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        3 => {
            let at = pick(rng, program_len.saturating_sub(2) / 2) * 2;
            let values = [0u16, 1, 2, 3, 4, 6, 0xfffe, 0xffff, (rng.next_u32() % 32) as u16];
            let v = values[pick(rng, values.len())];
            file[at..at + 2].copy_from_slice(&v.to_le_bytes());
        }
        _ => {
            let cut = 8 + pick(rng, file.len() - 8);
            file.truncate(cut);
        }
    }
}

#[test]
fn the_two_readers_agree_on_every_real_file() {
    for (name, bytes) in real_files() {
        if let Err(d) = decoders_agree(&bytes) {
            panic!("{name}: {d}");
        }
    }
}

#[test]
fn the_two_readers_agree_on_seeded_mutations_of_every_real_file() {
    // PTECHECK_MUTATIONS raises the count for a longer run.
    let per_file: u32 = std::env::var("PTECHECK_MUTATIONS").ok().and_then(|n| n.parse().ok()).unwrap_or(5000);
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for (k, (name, bytes)) in real_files().into_iter().enumerate() {
        let program_len = format::load(&bytes).map(|l| l.program_data.len()).unwrap_or(bytes.len());
        let mut rng = ChaCha8Rng::seed_from_u64(k as u64);
        for i in 0..per_file {
            let mut file = bytes.clone();
            for _ in 0..1 + i % 3 {
                let len = program_len.min(file.len());
                mutate(&mut file, len, &mut rng);
            }
            if let Err(d) = decoders_agree(&file) {
                panic!("{name}, mutation {i}: {d}");
            }
            let class = match format::load(&file) {
                Ok(_) => "loads".to_string(),
                Err(e) => e.kind().to_string(),
            };
            *kinds.entry(class).or_default() += 1;
        }
    }
    // The mutations reach acceptance and the verifier's refusals, not only one class.
    for class in ["loads", "Malformed"] {
        assert!(kinds.get(class).is_some_and(|&n| n > 10), "few mutations end as {class}: {kinds:?}");
    }
}

#[test]
fn the_verify_only_pass_refuses_what_the_verifier_refuses_and_nothing_else() {
    use ptecheck::format::oracle::{one_pass, verify_only};
    let (mut accepted, mut refused) = (0usize, 0usize);
    for (k, (name, bytes)) in real_files().into_iter().enumerate() {
        assert!(matches!(verify_only(&bytes), Some(Ok(()))) == matches!(one_pass(&bytes), Some(Ok(_))), "{name}");
        let program_len = format::load(&bytes).map(|l| l.program_data.len()).unwrap_or(bytes.len());
        let mut rng = ChaCha8Rng::seed_from_u64(1000 + k as u64);
        for i in 0..500 {
            let mut file = bytes.clone();
            let len = program_len.min(file.len());
            mutate(&mut file, len, &mut rng);
            // The one-pass reader refuses with a verifier rule exactly when the verify-only
            // pass does, and with the same error; it may also refuse a decoding rule (an
            // undeclared union tag, its budget) that verifying alone does not check.
            match (verify_only(&file), one_pass(&file)) {
                (None, None) => {}
                (Some(Ok(())), Some(_)) => accepted += 1,
                (Some(Err(v)), Some(Err(d))) => {
                    assert_eq!(v.to_string(), d.to_string(), "{name}, mutation {i}");
                    refused += 1;
                }
                (v, d) => panic!("{name}, mutation {i}: verify-only {v:?}, one pass {:?}", d.map(|r| r.map(drop))),
            }
        }
    }
    assert!(accepted > 100 && refused > 100, "accepted {accepted}, refused {refused}");
}
