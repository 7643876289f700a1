//! Shrinking: the smallest generator input that still fails. The generator is total, so every
//! input tried is a valid program.
//! May not touch: what a failure is (the caller's `fails` decides).

use crate::generator::{GenConfig, Generated, generate};
use crate::oracle::{CheckOptions, Report, check_case};
use arbitrary::Unstructured;

/// Generates (with the fault plan's preprocess) and checks one input.
pub fn run_input(cfg: &GenConfig, bytes: &[u8], check: &CheckOptions) -> (Generated, Report) {
    let g = generate(cfg, &mut Unstructured::new(bytes), check.fault);
    let r = check_case(&g, check);
    (g, r)
}

/// Whether the program `bytes` generate under `cfg` still fails `invariant`.
pub fn keeps_failing(cfg: &GenConfig, bytes: &[u8], check: &CheckOptions, invariant: &str) -> bool {
    run_input(cfg, bytes, check).1.failures.iter().any(|f| f.invariant == invariant)
}

/// Shrinks `bytes` while the program keeps failing `invariant`.
pub fn shrink(cfg: &GenConfig, bytes: &[u8], check: &CheckOptions, invariant: &str, budget: usize) -> Vec<u8> {
    shrink_bytes(bytes, budget, |b| keeps_failing(cfg, b, check, invariant)).0
}

/// Shrinks `bytes` while `fails` holds: chunk deletion (halving chunk sizes, from the end),
/// then zeroing single bytes, repeated while either improves; at most `budget` calls of
/// `fails`. Returns the smallest failing input found and the calls made.
pub fn shrink_bytes(bytes: &[u8], budget: usize, mut fails: impl FnMut(&[u8]) -> bool) -> (Vec<u8>, usize) {
    let mut best = bytes.to_vec();
    let mut tries = 0usize;
    let mut improved = true;
    while improved && tries < budget {
        improved = false;
        let mut chunk = best.len().max(1).next_power_of_two() / 2;
        while chunk >= 1 && tries < budget {
            let mut i = best.len().saturating_sub(chunk);
            loop {
                if tries >= budget {
                    break;
                }
                let mut cand = best.clone();
                cand.drain(i..(i + chunk).min(cand.len()));
                tries += 1;
                if fails(&cand) {
                    best = cand;
                    improved = true;
                }
                if i == 0 {
                    break;
                }
                i = i.saturating_sub(chunk);
                if i >= best.len() {
                    i = best.len().saturating_sub(chunk);
                }
            }
            chunk /= 2;
        }
        for i in 0..best.len() {
            if tries >= budget {
                break;
            }
            if best[i] == 0 {
                continue;
            }
            let mut cand = best.clone();
            cand[i] = 0;
            tries += 1;
            if fails(&cand) {
                best = cand;
                improved = true;
            }
        }
    }
    (best, tries)
}
