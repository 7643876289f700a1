//! External data files (`.ptd`, FlatTensor `FT01` with an `FH01` header; pte-format §8):
//! reader with the same guarantees as the `.pte` loader, and a writer (used by tests to make
//! programs with external constants; the emitter keeps constants in the program).
//! May not touch: the `.pte` program (a `.ptd` is loaded apart from it), execution, backends.

use super::FormatError;
use super::generated::flat_tensor_flatbuffer as ft;
use super::header::{align_up, root_offset};
use super::read::verifier_options;
use crate::program::ScalarType;
use flatbuffers::{FlatBufferBuilder, WIPOffset};
use serde::Serialize;

/// `.ptd` file identifier.
pub const PTD_IDENTIFIER: &[u8; 4] = b"FT01";
/// `.ptd` header magic.
pub const PTD_HEADER_MAGIC: &[u8; 4] = b"FH01";
/// Header length written and minimum accepted.
pub const PTD_HEADER_LENGTH: u32 = 40;
/// Header length padded to 16.
pub const PTD_HEADER_PADDED: usize = 48;

/// Shape and type recorded for a named tensor.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TensorLayout {
    /// Element type.
    pub scalar_type: ScalarType,
    /// Dimensions.
    pub sizes: Vec<i32>,
    /// Dim order.
    pub dim_order: Vec<u8>,
}

/// One named blob of a `.ptd`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PtdEntry<'a> {
    /// Unique key.
    pub key: String,
    /// Segment index.
    pub segment_index: u32,
    /// Optional tensor layout.
    pub layout: Option<TensorLayout>,
    /// The bytes (borrowing the input).
    #[serde(skip)]
    pub data: &'a [u8],
}

/// A loaded `.ptd`.
#[derive(Clone, Debug)]
pub struct LoadedPtd<'a> {
    /// Schema version.
    pub version: u32,
    /// Named entries in file order.
    pub entries: Vec<PtdEntry<'a>>,
}

impl<'a> LoadedPtd<'a> {
    /// The first entry with this key (lookup is first match, like the runtime's linear scan).
    pub fn get(&self, key: &str) -> Option<&PtdEntry<'a>> {
        self.entries.iter().find(|e| e.key == key)
    }
}

fn u64_at(d: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&d[off..off + 8]);
    u64::from_le_bytes(a)
}

fn err(detail: String) -> FormatError {
    FormatError::PtdHeader { detail }
}

/// Loads and checks a `.ptd` file.
pub fn load_ptd(data: &[u8]) -> Result<LoadedPtd<'_>, FormatError> {
    if data.is_empty() {
        return Err(FormatError::Empty);
    }
    if data.len() < 8 {
        return Err(FormatError::TooShort { len: data.len() });
    }
    if &data[4..8] != PTD_IDENTIFIER {
        return Err(FormatError::WrongIdentifier {
            found: String::from_utf8_lossy(&data[4..8]).into_owned(),
            expected: "FT01",
        });
    }
    if data.get(8..12) != Some(&PTD_HEADER_MAGIC[..]) {
        return Err(err("missing FH01 header magic at offset 8".into()));
    }
    if data.len() < 8 + PTD_HEADER_LENGTH as usize {
        return Err(err(format!("header truncated: file has {} bytes, header needs 48", data.len())));
    }
    let length = u32::from_le_bytes([data[12], data[13], data[14], data[15]]);
    if length < PTD_HEADER_LENGTH {
        return Err(err(format!("header length {length} at offset 12 is below 40")));
    }
    let fb_offset = u64_at(data, 16);
    let fb_size = u64_at(data, 24);
    let base = u64_at(data, 32);
    let seg_size = u64_at(data, 40);
    let fb_end = fb_offset.checked_add(fb_size).ok_or_else(|| {
        err(format!("flatbuffer_offset {fb_offset} + flatbuffer_size {fb_size} (offsets 16, 24) overflows"))
    })?;
    if fb_end > data.len() as u64 {
        return Err(err(format!("flatbuffer data ends at {fb_end}, past the end of the {}-byte file", data.len())));
    }
    let seg_end = base.checked_add(seg_size).ok_or_else(|| {
        err(format!("segment_base_offset {base} + segment_data_size {seg_size} (offsets 32, 40) overflows"))
    })?;
    if seg_end > data.len() as u64 {
        return Err(err(format!("segment data [{base}, {seg_end}) is past the end of the {}-byte file", data.len())));
    }
    if base < fb_end && seg_size > 0 {
        return Err(err(format!("segment_base_offset {base} lies inside the flatbuffer data (ends at {fb_end})")));
    }
    let fbuf = &data[..fb_end as usize];
    let root = root_offset(fbuf).unwrap_or(0);
    let limit = fbuf.len().saturating_sub(4);
    if (root as usize) < 8 || root as usize > limit {
        return Err(FormatError::RootOffsetOutOfRange { root, limit });
    }
    let t = flatbuffers::root_with_opts::<ft::FlatTensor>(&verifier_options(fbuf.len()), fbuf)
        .map_err(|e| FormatError::Malformed { detail: e.to_string().trim().replace('\n', " ").replace('\t', "") })?;
    let segments = t.segments().ok_or(FormatError::MissingField { field: "FlatTensor.segments".into() })?;
    let named = t.named_data().ok_or(FormatError::MissingField { field: "FlatTensor.named_data".into() })?;
    let region = &data[base as usize..seg_end as usize];
    let mut entries = Vec::with_capacity(named.len());
    for (i, n) in named.iter().enumerate() {
        let key = n.key().ok_or_else(|| FormatError::MissingField { field: format!("named_data[{i}].key") })?;
        let si = n.segment_index() as usize;
        if si >= segments.len() {
            return Err(FormatError::SegmentIndexOutOfRange {
                field: format!("named_data[{i}].segment_index"),
                index: si as u64,
                count: segments.len(),
            });
        }
        let s = segments.get(si);
        let end = s.offset().checked_add(s.size()).ok_or(FormatError::SegmentOverflow {
            index: si,
            offset: s.offset(),
            size: s.size(),
        })?;
        if end > region.len() as u64 {
            return Err(FormatError::SegmentPastEnd {
                index: si,
                start: base.saturating_add(s.offset()),
                end: base.saturating_add(end),
                limit: seg_end,
            });
        }
        // A layout's sizes and dim order are required (ExecuTorch reads both unchecked): an
        // absent one is refused, not read as a 0-dim layout.
        let missing = |what: &str| FormatError::MissingField { field: format!("named_data[{i}].tensor_layout.{what}") };
        let layout = match n.tensor_layout() {
            None => None,
            Some(l) => Some(TensorLayout {
                scalar_type: ScalarType(l.scalar_type().0),
                sizes: l.sizes().ok_or_else(|| missing("sizes"))?.iter().collect(),
                dim_order: l.dim_order().ok_or_else(|| missing("dim_order"))?.bytes().to_vec(),
            }),
        };
        entries.push(PtdEntry {
            key: key.to_string(),
            segment_index: si as u32,
            layout,
            data: &region[s.offset() as usize..end as usize],
        });
    }
    Ok(LoadedPtd { version: t.version(), entries })
}

/// Writes a `.ptd` holding `entries` (key, layout, bytes), one segment per distinct blob,
/// aligned to `segment_alignment`.
pub fn write_ptd(entries: &[(&str, Option<&TensorLayout>, &[u8])], segment_alignment: u64) -> Vec<u8> {
    let mut blobs: Vec<&[u8]> = Vec::new();
    let mut index_of = Vec::with_capacity(entries.len());
    for (_, _, d) in entries {
        let i = blobs.iter().position(|b| b == d).unwrap_or_else(|| {
            blobs.push(d);
            blobs.len() - 1
        });
        index_of.push(i as u32);
    }
    let mut offsets = Vec::with_capacity(blobs.len());
    let mut end = 0u64;
    for b in &blobs {
        let off = align_up(end, segment_alignment.max(1));
        offsets.push(off);
        end = off + b.len() as u64;
    }
    let mut b = FlatBufferBuilder::new();
    let segs: Vec<WIPOffset<ft::DataSegment>> = blobs
        .iter()
        .zip(&offsets)
        .map(|(d, o)| ft::DataSegment::create(&mut b, &ft::DataSegmentArgs { offset: *o, size: d.len() as u64 }))
        .collect();
    let segs = b.create_vector(&segs);
    let mut named = Vec::with_capacity(entries.len());
    for ((key, layout, _), si) in entries.iter().zip(&index_of) {
        let k = b.create_string(key);
        let l = layout.map(|l| {
            let sizes = b.create_vector(&l.sizes);
            let dims = b.create_vector(&l.dim_order);
            ft::TensorLayout::create(
                &mut b,
                &ft::TensorLayoutArgs {
                    scalar_type: super::generated::executorch_flatbuffer::ScalarType(l.scalar_type.0),
                    sizes: Some(sizes),
                    dim_order: Some(dims),
                },
            )
        });
        named.push(ft::NamedData::create(
            &mut b,
            &ft::NamedDataArgs { key: Some(k), segment_index: *si, tensor_layout: l },
        ));
    }
    let named = b.create_vector(&named);
    let root = ft::FlatTensor::create(
        &mut b,
        &ft::FlatTensorArgs { version: 0, segments: Some(segs), named_data: Some(named) },
    );
    b.finish(root, Some("FT01"));
    let fbuf = b.finished_data();
    let fb_size = fbuf.len() as u64;
    let base = align_up(PTD_HEADER_PADDED as u64 + fb_size, segment_alignment.max(1));
    let mut header = Vec::with_capacity(PTD_HEADER_PADDED);
    header.extend_from_slice(PTD_HEADER_MAGIC);
    header.extend_from_slice(&PTD_HEADER_LENGTH.to_le_bytes());
    header.extend_from_slice(&(PTD_HEADER_PADDED as u64).to_le_bytes());
    header.extend_from_slice(&fb_size.to_le_bytes());
    header.extend_from_slice(&base.to_le_bytes());
    header.extend_from_slice(&end.to_le_bytes());
    header.resize(PTD_HEADER_PADDED, 0);
    let root = u32::from_le_bytes([fbuf[0], fbuf[1], fbuf[2], fbuf[3]]) + PTD_HEADER_PADDED as u32;
    let mut out = Vec::with_capacity((base + end) as usize);
    out.extend_from_slice(&root.to_le_bytes());
    out.extend_from_slice(&fbuf[4..8]);
    out.extend_from_slice(&header);
    out.extend_from_slice(&fbuf[8..]);
    out.resize(base as usize, 0);
    for (d, o) in blobs.iter().zip(&offsets) {
        out.resize((base + o) as usize, 0);
        out.extend_from_slice(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_without_sizes_or_dim_order_is_refused_not_read_as_0_dim() {
        let layout = TensorLayout { scalar_type: ScalarType::FLOAT, sizes: vec![2], dim_order: vec![0] };
        let good = write_ptd(&[("w", Some(&layout), &[0u8; 8][..])], 16);
        assert_eq!(load_ptd(&good).expect("loads").entries[0].layout.as_ref(), Some(&layout));
        // The file's FlatBuffers data reads from offset 0 (the header sits in unreferenced
        // bytes), so the layout table's vtable is found through the generated accessors.
        let fb_end = u64::from_le_bytes(good[16..24].try_into().expect("8"))
            + u64::from_le_bytes(good[24..32].try_into().expect("8"));
        let root = flatbuffers::root::<ft::FlatTensor>(&good[..fb_end as usize]).expect("verifies");
        let table = root.named_data().expect("named").get(0).tensor_layout().expect("layout")._tab.loc();
        let soffset = i32::from_le_bytes(good[table..table + 4].try_into().expect("4"));
        let vtable = (table as i64 - i64::from(soffset)) as usize;
        for (slot, field) in [(6, "sizes"), (8, "dim_order")] {
            // Marks the field absent in the vtable.
            let mut d = good.clone();
            d[vtable + slot..vtable + slot + 2].copy_from_slice(&[0, 0]);
            let e = load_ptd(&d).expect_err("refused");
            assert_eq!(e, FormatError::MissingField { field: format!("named_data[0].tensor_layout.{field}") });
        }
    }
}
