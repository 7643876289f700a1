//! Reports of a loaded program for people and tools: a readable summary, a JSON document whose
//! `"program"` member has the shape of the corpus `NAME.json` dumps, and a Graphviz graph
//! (method -> call sites -> BackendDelegates -> blobs).
//!
//! Each ends with the runtime's verdict on the program (`runtime::verdict`).
//!
//! Reads [`LoadedProgram`]; may not change it or decide validity (that is `format`/`runtime`).

pub mod shape;
pub mod xnnpack;

use crate::format::{LoadedProgram, LoadedPtd};
use crate::program::{DataLocation, EValue, Instruction, sha256_hex};
use crate::runtime::verdict::CheckReport;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Who references each segment: `constant_segment`, `delegate:PLAN[i]`, `named_data:KEY`,
/// `mutable_data_segments[m]`.
pub fn segment_users(loaded: &LoadedProgram<'_>) -> Vec<Vec<String>> {
    let p = &loaded.program;
    let mut users = vec![Vec::new(); p.segment_table().len()];
    let mut add = |i: usize, who: String| {
        if let Some(u) = users.get_mut(i) {
            u.push(who);
        }
    };
    if let Some(cs) = &p.constant_segment {
        add(cs.segment_index as usize, "constant_segment".into());
    }
    for (m, e) in p.mutable_data_segments.iter().flatten().enumerate() {
        add(e.segment_index as usize, format!("mutable_data_segments[{m}]"));
    }
    for plan in p.plans() {
        for (i, d) in plan.delegate_list().iter().enumerate() {
            if let Some(r) = d.processed
                && r.location == DataLocation::SEGMENT
            {
                add(r.index as usize, format!("delegate:{}[{i}]", plan.name_str()));
            }
        }
    }
    for n in p.named_data.iter().flatten() {
        add(n.segment_index as usize, format!("named_data:{}", n.key.as_deref().unwrap_or("")));
    }
    users
}

/// For each plan, each delegate: the `(chain, instruction)` positions of the DelegateCalls that
/// name it.
pub fn delegate_call_sites(loaded: &LoadedProgram<'_>) -> Vec<Vec<Vec<(usize, usize)>>> {
    loaded
        .program
        .plans()
        .iter()
        .map(|plan| {
            let mut sites = vec![Vec::new(); plan.delegate_list().len()];
            for (ci, chain) in plan.chain_list().iter().enumerate() {
                for (ii, ins) in chain.instruction_list().iter().enumerate() {
                    if let Instruction::DelegateCall(d) = ins
                        && let Some(s) = usize::try_from(d.delegate_index).ok().and_then(|i| sites.get_mut(i))
                    {
                        s.push((ci, ii));
                    }
                }
            }
            sites
        })
        .collect()
}

/// The JSON document of `inspect --json`.
pub fn to_json(loaded: &LoadedProgram<'_>) -> Value {
    let p = &loaded.program;
    let users = segment_users(loaded);
    let base = loaded.segment_base;
    let segments: Vec<Value> = p
        .segment_table()
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({
                "index": i,
                "offset": s.offset,
                "size": s.size,
                "absolute_offset": if base == 0 { 0 } else { base + s.offset },
                "sha256": sha256_hex(loaded.segments.get(i).copied().unwrap_or(&[])),
                "referenced_by": users[i],
            })
        })
        .collect();
    let sites = delegate_call_sites(loaded);
    let named = loaded.named_data_map();
    let mut delegates = serde_json::Map::new();
    for (pi, plan) in p.plans().iter().enumerate() {
        let list: Vec<Value> = plan
            .delegate_list()
            .iter()
            .enumerate()
            .map(|(di, d)| {
                let blob = loaded.delegate_blobs.get(pi).and_then(|b| b.get(di)).copied().flatten();
                json!({
                    "index": di,
                    "id": d.id,
                    "location": d.processed.map(|r| r.location.to_string()),
                    "processed_index": d.processed.map(|r| r.index),
                    "blob_len": blob.map(<[u8]>::len),
                    "blob_sha256": blob.map(sha256_hex),
                    "compile_specs": d.compile_spec_list().iter().map(|c| c.key.clone()).collect::<Vec<_>>(),
                    "call_sites": sites[pi][di].iter().map(|(c, i)| json!({"chain": c, "instruction": i})).collect::<Vec<_>>(),
                    "xnnpack": blob.filter(|_| xnnpack::is_xnnpack(d.id.as_deref())).map(|b| xnnpack::json(b, &named)),
                })
            })
            .collect();
        delegates.insert(plan.name_str().to_string(), Value::Array(list));
    }
    json!({
        "file_size": loaded.file.len(),
        "file_sha256": sha256_hex(loaded.file),
        "root_table_offset": crate::format::header::root_offset(loaded.file),
        "file_identifier": "ET12",
        "extended_header": loaded.header.map(|h| json!({
            "magic": "eh00",
            "length": h.length,
            "program_size": h.program_size,
            "segment_base_offset": h.segment_base_offset,
            "segment_data_size": h.segment_data_size,
        })),
        "segments_resolved": segments,
        "delegates_resolved": delegates,
        "program": serde_json::to_value(p).unwrap_or(Value::Null),
    })
}

fn count_by<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let mut m: BTreeMap<&str, usize> = BTreeMap::new();
    for i in items {
        *m.entry(i).or_default() += 1;
    }
    m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
}

/// The readable summary of `inspect`.
pub fn to_text(loaded: &LoadedProgram<'_>) -> String {
    let p = &loaded.program;
    let mut s = String::new();
    let _ = writeln!(s, "file: {} bytes, sha256 {}", loaded.file.len(), sha256_hex(loaded.file));
    match loaded.header {
        Some(h) => {
            let _ = writeln!(
                s,
                "header: eh00 length {}, program_size {}, segment_base_offset {}, segment_data_size {}",
                h.length, h.program_size, h.segment_base_offset, h.segment_data_size
            );
        }
        None => {
            let _ = writeln!(s, "header: none (no segment data)");
        }
    }
    let sites = delegate_call_sites(loaded);
    for (pi, plan) in p.plans().iter().enumerate() {
        let _ = writeln!(s, "\nmethod {:?}", plan.name_str());
        let values = plan.value_list();
        let _ = writeln!(s, "  values: {} ({})", values.len(), count_by(values.iter().map(EValue::kind)));
        let _ = writeln!(
            s,
            "  inputs: {:?}  outputs: {:?}",
            plan.inputs.as_deref().unwrap_or(&[]),
            plan.outputs.as_deref().unwrap_or(&[])
        );
        for (ci, c) in plan.chain_list().iter().enumerate() {
            let ins = c.instruction_list();
            let _ = writeln!(
                s,
                "  chain {ci}: {} instructions ({})",
                ins.len(),
                count_by(ins.iter().map(Instruction::kind))
            );
        }
        let ops: Vec<String> = plan.operator_list().iter().map(|o| o.qualified()).collect();
        let _ = writeln!(s, "  operators: [{}]", ops.join(", "));
        let _ = writeln!(s, "  non_const_buffer_sizes: {:?}", plan.non_const_buffer_sizes.as_deref().unwrap_or(&[]));
        let _ = writeln!(s, "  delegates: {}", plan.delegate_list().len());
        for (di, d) in plan.delegate_list().iter().enumerate() {
            let blob = loaded.delegate_blobs.get(pi).and_then(|b| b.get(di)).copied().flatten();
            let loc = match d.processed {
                Some(r) => {
                    format!("{}[{}]", if r.location == DataLocation::INLINE { "inline" } else { "segment" }, r.index)
                }
                None => "absent".into(),
            };
            let _ = writeln!(
                s,
                "    [{di}] {} blob {loc} {} B sha256 {}",
                d.id.as_deref().unwrap_or("<no id>"),
                blob.map_or(0, <[u8]>::len),
                blob.map(sha256_hex).map(|h| h[..16].to_string()).unwrap_or_default()
            );
            for c in d.compile_spec_list() {
                let v = c.value.as_ref().map(|v| v.as_slice()).unwrap_or(&[]);
                let shown = crate::program::printable_utf8(v)
                    .map(|u| format!("{u:?}"))
                    .unwrap_or_else(|| format!("0x{}", hex::encode(v)));
                let _ = writeln!(s, "        spec {} = {shown}", c.key.as_deref().unwrap_or("<no key>"));
            }
            let calls: Vec<String> = sites[pi][di].iter().map(|(c, i)| format!("chain {c} instr {i}")).collect();
            let _ = writeln!(
                s,
                "        called by: {}",
                if calls.is_empty() { "nothing".into() } else { calls.join(", ") }
            );
            if let Some(b) = blob.filter(|_| xnnpack::is_xnnpack(d.id.as_deref())) {
                s.push_str(&xnnpack::text(b, &loaded.named_data_map(), "        "));
            }
        }
    }
    let users = segment_users(loaded);
    let _ = writeln!(s, "\nsegments: {}", p.segment_table().len());
    for (i, seg) in p.segment_table().iter().enumerate() {
        let _ = writeln!(s, "  [{i}] offset {} size {}  <- {}", seg.offset, seg.size, users[i].join(", "));
    }
    let _ = writeln!(s, "inline delegate blobs: {}", p.inline_delegate_data().len());
    match loaded.constant_source {
        crate::format::ConstantSource::None => {
            let _ = writeln!(s, "constants: none");
        }
        crate::format::ConstantSource::Segment(i) => {
            let _ = writeln!(s, "constants: {} buffers in segment {i}", loaded.constants.len().saturating_sub(1));
        }
        crate::format::ConstantSource::InlineBuffer => {
            let _ = writeln!(
                s,
                "constants: {} inline buffers (deprecated constant_buffer)",
                loaded.constants.len().saturating_sub(1)
            );
        }
    }
    let named = loaded.named_data_map();
    let _ = writeln!(s, "named data: {}", named.len());
    for (k, b) in named {
        let _ = writeln!(s, "  {k}: {} B", b.len());
    }
    s
}

fn dot_id(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The Graphviz graph of `inspect --dot`.
pub fn to_dot(loaded: &LoadedProgram<'_>) -> String {
    let p = &loaded.program;
    let sites = delegate_call_sites(loaded);
    let mut s = String::from("digraph pte {\n  rankdir=LR;\n  node [fontname=\"monospace\"];\n");
    let mut blobs: BTreeMap<String, usize> = BTreeMap::new();
    for (pi, plan) in p.plans().iter().enumerate() {
        let m = format!("method:{}", plan.name_str());
        let _ = writeln!(s, "  {} [shape=box, label={}];", dot_id(&m), dot_id(&format!("method {}", plan.name_str())));
        for (di, d) in plan.delegate_list().iter().enumerate() {
            let dn = format!("delegate:{pi}:{di}");
            let _ = writeln!(
                s,
                "  {} [shape=component, label={}];",
                dot_id(&dn),
                dot_id(&format!("[{di}] {}", d.id.as_deref().unwrap_or("?")))
            );
            for (c, i) in &sites[pi][di] {
                let cn = format!("call:{pi}:{c}:{i}");
                let _ = writeln!(s, "  {} [shape=ellipse, label={}];", dot_id(&cn), dot_id(&format!("instr {i}")));
                let _ = writeln!(s, "  {} -> {};", dot_id(&m), dot_id(&cn));
                let _ = writeln!(s, "  {} -> {};", dot_id(&cn), dot_id(&dn));
            }
            if let Some(blob) = loaded.delegate_blobs.get(pi).and_then(|b| b.get(di)).copied().flatten() {
                let h = sha256_hex(blob);
                let bn = format!("blob:{h}");
                blobs.insert(bn.clone(), blob.len());
                let _ = writeln!(s, "  {} -> {};", dot_id(&dn), dot_id(&bn));
            }
        }
    }
    for (bn, len) in blobs {
        let _ =
            writeln!(s, "  {} [shape=note, label={}];", dot_id(&bn), dot_id(&format!("blob {} ({len} B)", &bn[5..17])));
    }
    s.push_str("}\n");
    s
}

fn value_text(v: &EValue) -> String {
    match v {
        EValue::Null => "None".into(),
        EValue::Int(i) => format!("Int({i})"),
        EValue::Bool(b) => format!("Bool({b})"),
        EValue::Double(d) => format!("Double({d})"),
        EValue::String(s) => format!("String({:?})", s.as_deref().unwrap_or("")),
        EValue::IntList(l) => format!("IntList{:?}", l.as_deref().unwrap_or(&[])),
        EValue::DoubleList(l) => format!("DoubleList{:?}", l.as_deref().unwrap_or(&[])),
        EValue::BoolList(l) => format!("BoolList{:?}", l.as_deref().unwrap_or(&[])),
        EValue::TensorList(l) => format!("TensorList{:?}", l.as_deref().unwrap_or(&[])),
        EValue::OptionalTensorList(l) => format!("OptionalTensorList{:?}", l.as_deref().unwrap_or(&[])),
        EValue::Tensor(t) => {
            let mut s = format!("Tensor {} {:?}", t.scalar_type, t.sizes.as_deref().unwrap_or(&[]));
            if t.shape_dynamism != crate::program::TensorShapeDynamism::STATIC {
                let _ = write!(s, " {}", t.shape_dynamism);
            }
            if let Some(a) = &t.allocation_info {
                let _ = write!(s, " @arena{}+{}", a.memory_id, a.offset());
            }
            if t.data_buffer_idx > 0 {
                let _ = write!(s, " const#{}", t.data_buffer_idx);
            }
            s
        }
    }
}

/// A full listing for review diffs: per method every value, every instruction with its
/// operands, every delegate with its blob and call sites; then segments.
pub fn listing(loaded: &LoadedProgram<'_>) -> String {
    let p = &loaded.program;
    let sites = delegate_call_sites(loaded);
    let mut s = String::new();
    for (pi, plan) in p.plans().iter().enumerate() {
        let _ = writeln!(s, "method {}", plan.name_str());
        let _ = writeln!(
            s,
            "  inputs {:?} outputs {:?}",
            plan.inputs.as_deref().unwrap_or(&[]),
            plan.outputs.as_deref().unwrap_or(&[])
        );
        let _ = writeln!(s, "  values:");
        for (i, v) in plan.value_list().iter().enumerate() {
            let _ = writeln!(s, "    v{i}: {}", value_text(v));
        }
        let ops = plan.operator_list();
        for (ci, chain) in plan.chain_list().iter().enumerate() {
            let _ = writeln!(s, "  chain {ci}:");
            for (ii, ins) in chain.instruction_list().iter().enumerate() {
                let text = match ins {
                    Instruction::KernelCall(k) => format!(
                        "{} {:?}",
                        usize::try_from(k.op_index)
                            .ok()
                            .and_then(|i| ops.get(i))
                            .map(|o| o.qualified())
                            .unwrap_or_else(|| format!("op#{}", k.op_index)),
                        k.args.as_deref().unwrap_or(&[])
                    ),
                    Instruction::DelegateCall(d) => {
                        format!("delegate[{}] {:?}", d.delegate_index, d.args.as_deref().unwrap_or(&[]))
                    }
                    Instruction::MoveCall(m) => format!("move v{} -> v{}", m.move_from, m.move_to),
                    Instruction::JumpFalseCall(j) => {
                        format!("jump_false v{} -> {}", j.cond_value_index, j.destination_instruction)
                    }
                    Instruction::FreeCall(f) => format!("free v{}", f.value_index),
                };
                let _ = writeln!(s, "    {ii:>3}: {text}");
            }
        }
        let _ = writeln!(s, "  delegates:");
        for (di, d) in plan.delegate_list().iter().enumerate() {
            let blob = loaded.delegate_blobs.get(pi).and_then(|b| b.get(di)).copied().flatten();
            let loc = d.processed.map(|r| format!("{}[{}]", r.location, r.index)).unwrap_or_else(|| "absent".into());
            let specs: Vec<String> = d
                .compile_spec_list()
                .iter()
                .map(|c| {
                    format!(
                        "{}={}",
                        c.key.as_deref().unwrap_or(""),
                        hex::encode(c.value.as_ref().map(|v| v.as_slice()).unwrap_or(&[]))
                    )
                })
                .collect();
            let calls: Vec<String> = sites[pi][di].iter().map(|(c, i)| format!("{c}:{i}")).collect();
            let _ = writeln!(
                s,
                "    [{di}] {} blob {loc} {} B sha256 {} specs [{}] called at [{}]",
                d.id.as_deref().unwrap_or("?"),
                blob.map_or(0, <[u8]>::len),
                blob.map(|b| sha256_hex(b)[..12].to_string()).unwrap_or_default(),
                specs.join(", "),
                calls.join(", ")
            );
        }
    }
    let users = segment_users(loaded);
    let _ = writeln!(s, "segments:");
    for (i, seg) in p.segment_table().iter().enumerate() {
        let _ = writeln!(s, "  [{i}] offset {} size {} <- {}", seg.offset, seg.size, users[i].join(", "));
    }
    let _ = writeln!(s, "inline blobs: {}", p.inline_delegate_data().len());
    s
}

/// The summary of an external-data file (`.ptd`): every entry with its segment, size, layout
/// and content hash.
pub fn ptd_text(ptd: &LoadedPtd<'_>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "external data (.ptd), version {}, {} entries", ptd.version, ptd.entries.len());
    for e in &ptd.entries {
        let layout = e
            .layout
            .as_ref()
            .map(|l| format!(" {} {:?} dim_order {:?}", l.scalar_type, l.sizes, l.dim_order))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  {}: segment {} {} B sha256 {}{layout}",
            e.key,
            e.segment_index,
            e.data.len(),
            &sha256_hex(e.data)[..12]
        );
    }
    s
}

/// The JSON document of `inspect --json` for a `.ptd`.
pub fn ptd_json(ptd: &LoadedPtd<'_>) -> Value {
    json!({
        "kind": "ptd",
        "version": ptd.version,
        "entries": ptd.entries.iter().map(|e| json!({
            "key": e.key,
            "segment_index": e.segment_index,
            "len": e.data.len(),
            "sha256": sha256_hex(e.data),
            "layout": e.layout.as_ref().map(|l| json!({"scalar_type": l.scalar_type.to_string(), "sizes": l.sizes, "dim_order": l.dim_order})),
        })).collect::<Vec<_>>(),
    })
}

/// How `inspect` shows a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// The readable summary.
    Text,
    /// The JSON document.
    Json,
    /// The Graphviz graph (a `.ptd` is shown as text).
    Dot,
}

/// Whether `bytes` are a `.ptd` file (its identifier at bytes 4..8).
pub fn is_ptd(bytes: &[u8]) -> bool {
    bytes.get(4..8) == Some(crate::format::ptd::PTD_IDENTIFIER)
}

/// One file's document in `form`: a `.pte` or a `.ptd`, told by its identifier. `file` names
/// the file in the document (a JSON `file` member, a heading line or a graph comment) when
/// several are shown, so that no document can be taken for another file's. `Err`: why the
/// loader refused it, and the document that says so when one is due (JSON of several files).
/// A program's text and JSON end with the verdict `judge` gives it (what `check` says).
pub fn document(
    bytes: &[u8],
    form: Form,
    file: Option<&str>,
    judge: &dyn Fn(&LoadedProgram<'_>) -> CheckReport,
) -> Result<String, (String, Option<String>)> {
    let named = |mut v: Value| {
        if let (Some(f), Some(o)) = (file, v.as_object_mut()) {
            o.insert("file".into(), json!(f));
        }
        serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
    };
    let heading = match (file, form) {
        (Some(f), Form::Text) => format!("== {f}\n"),
        (Some(f), Form::Dot) => format!("// == {f}\n"),
        _ => String::new(),
    };
    let refused = |e: String| {
        let mut doc = heading.clone();
        if file.is_some() && form == Form::Json {
            doc += &named(json!({"error": e}));
        }
        (e, Some(doc).filter(|d| !d.is_empty()))
    };
    let body = if is_ptd(bytes) {
        match crate::format::load_ptd(bytes) {
            Ok(ptd) if form == Form::Json => named(ptd_json(&ptd)),
            Ok(ptd) => ptd_text(&ptd),
            Err(e) => return Err(refused(e.to_string())),
        }
    } else {
        match crate::format::load(bytes) {
            Ok(l) if form == Form::Json => {
                let mut doc = to_json(&l);
                if let Some(o) = doc.as_object_mut() {
                    o.insert("verdict".into(), judge(&l).to_json());
                }
                named(doc)
            }
            Ok(l) if form == Form::Dot => to_dot(&l),
            Ok(l) => {
                let verdict = judge(&l);
                format!("{}verdict: {verdict}", to_text(&l))
            }
            Err(e) => return Err(refused(e.to_string())),
        }
    };
    Ok(heading + &body)
}
