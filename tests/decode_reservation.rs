//! What the loader allocates for a vector of tables before its elements verify: a vector that
//! declares many elements and breaks at its first is refused having reserved little, under the
//! fuzz targets' allocation guard (4 x the input + 1 MiB). Its own test binary, so that no other
//! test allocates while the guard is set.

#![forbid(unsafe_code)]

use flatbuffers::FlatBufferBuilder;
use ptecheck::format::{self, FormatError};

#[global_allocator]
static ALLOC: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

/// A program whose one plan's `values` declares `n` elements, each an offset past the end of
/// the buffer.
fn values_past_the_end(n: usize) -> Vec<u8> {
    let mut b = FlatBufferBuilder::new();
    let values = b.create_vector(&vec![u32::MAX / 2; n]);
    let plan = {
        let s = b.start_table();
        b.push_slot_always(8, values);
        b.end_table(s)
    };
    let plans = b.create_vector(&[plan]);
    let program = {
        let s = b.start_table();
        b.push_slot_always(6, plans);
        b.end_table(s)
    };
    b.finish(program, Some("ET12"));
    b.finished_data().to_vec()
}

#[test]
fn a_long_vector_that_breaks_at_its_first_element_is_refused_having_reserved_little() {
    // 200,000 declared values: reserving them all (an owned EValue is far larger than its
    // 4-byte offset) would be many times the guard.
    let data = values_past_the_end(200_000);
    let _ = ALLOC.set_limit(ALLOC.allocated() + 4 * data.len() + (1 << 20));
    let loaded = format::load(&data).map(drop);
    let _ = ALLOC.set_limit(usize::MAX);
    match loaded {
        Err(FormatError::Malformed { detail }) => assert!(detail.contains("values[0]"), "{detail}"),
        other => panic!("expected a refusal at values[0], got {other:?}"),
    }
}
