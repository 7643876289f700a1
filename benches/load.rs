//! Load+verify benchmark (`cargo bench --bench load`): time per corpus file, and a generated
//! program with one 30 MB segment against the same program with a 30 KB segment, measured side
//! by side in one run. Loading borrows segment bytes, so the ratio should stay near 1.

use ptecheck::format::{self, WriteOptions};
use ptecheck::program::*;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Median time of one `f()` call over `rounds` rounds of `iters` calls each.
fn measure(iters: u32, rounds: usize, mut f: impl FnMut()) -> Duration {
    let mut samples: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed() / iters
        })
        .collect();
    samples.sort();
    samples[rounds / 2]
}

fn with_segment(size: usize) -> Vec<u8> {
    let data = vec![0xabu8; size];
    let program = Program {
        execution_plan: Some(vec![ExecutionPlan {
            name: Some("forward".into()),
            values: Some(vec![EValue::Int(0)]),
            inputs: Some(vec![]),
            outputs: Some(vec![0]),
            chains: Some(vec![Chain { instructions: Some(vec![]), ..Chain::default() }]),
            operators: Some(vec![]),
            delegates: Some(vec![BackendDelegate {
                id: Some("demo".into()),
                processed: Some(BackendDelegateDataReference { location: DataLocation::SEGMENT, index: 1 }),
                compile_specs: Some(vec![]),
            }]),
            non_const_buffer_sizes: Some(vec![0]),
            ..ExecutionPlan::default()
        }]),
        constant_buffer: Some(vec![]),
        backend_delegate_data: Some(vec![]),
        segments: Some(format::layout_segments(&[(0, 1), (size as u64, 1)], 128)),
        constant_segment: Some(SubsegmentOffsets { segment_index: 0, offsets: Some(vec![0]) }),
        ..Program::default()
    };
    format::write(&program, &[&[], &data], &WriteOptions::default()).expect("writes")
}

fn main() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/real");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("corpus")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pte"))
        .collect();
    files.sort();
    println!("{:40} {:>8} {:>12} {:>10}", "corpus file", "bytes", "load+verify", "MB/s");
    for p in &files {
        let data = std::fs::read(p).expect("read");
        let t = measure(2000, 9, || {
            black_box(format::load(black_box(&data)).expect("loads"));
        });
        let mbps = data.len() as f64 / t.as_secs_f64() / 1e6;
        println!(
            "{:40} {:>8} {:>10.2}µs {:>10.1}",
            p.file_stem().unwrap_or_default().to_string_lossy(),
            data.len(),
            t.as_secs_f64() * 1e6,
            mbps
        );
    }
    let small = with_segment(30 * 1024);
    let large = with_segment(30 * 1024 * 1024);
    let ts = measure(2000, 15, || {
        black_box(format::load(black_box(&small)).expect("loads"));
    });
    let tl = measure(2000, 15, || {
        black_box(format::load(black_box(&large)).expect("loads"));
    });
    println!("\nsegment size   file bytes  load+verify");
    println!("30 KB     {:>15} {:>10.2}µs", small.len(), ts.as_secs_f64() * 1e6);
    println!("30 MB     {:>15} {:>10.2}µs", large.len(), tl.as_secs_f64() * 1e6);
    println!(
        "ratio 30 MB / 30 KB: {:.2}x (segment bytes are borrowed, never copied or scanned)",
        tl.as_secs_f64() / ts.as_secs_f64()
    );
}
