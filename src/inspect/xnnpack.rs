//! The XNNPACK part of `inspect`: each `XnnpackBackend` blob's header, values, nodes and
//! constants, as text and JSON. Reads the blob with `pte::xnnpack` (verified against the
//! program's named data); a blob that does not verify is shown as far as it parses, with the
//! error.
//! May not touch: validity decisions (the loader's verdict is shown as it is), the backends.

use pte::xnnpack::{self, NodeType, Payload, XValue, XnnBlob};
use serde_json::{Value, json};
use std::fmt::Write as _;

/// Whether a delegate with this id carries an XNNPACK blob.
pub fn is_xnnpack(id: Option<&str>) -> bool {
    id == Some(xnnpack::BACKEND_ID)
}

/// The blob parsed, and the verifier's complaint if it has one.
fn read(blob: &[u8], named: &[(&str, &[u8])]) -> Result<(XnnBlob, Option<String>), String> {
    let parsed = xnnpack::parse(blob).map_err(|e| e.to_string())?;
    let verdict = xnnpack::verify(parsed.clone(), Some(named)).err().map(|e| e.to_string());
    Ok((parsed, verdict))
}

fn node_text(node_type: NodeType, p: &Payload) -> String {
    let ins: Vec<String> =
        p.inputs(node_type).iter().map(|(f, id)| format!("{}={id}", f.trim_end_matches("_id"))).collect();
    let outs: Vec<String> = p.outputs().iter().map(|(_, id)| id.to_string()).collect();
    let extra = match p {
        Payload::StaticTranspose { perm, .. } => format!(" perm {:?}", perm.as_deref().unwrap_or(&[])),
        Payload::StaticReshape { new_shape, .. } => format!(" new_shape {:?}", new_shape.as_deref().unwrap_or(&[])),
        _ => String::new(),
    };
    format!("{}({} -> {}){extra} flags {:#x}", node_type.name(), ins.join(", "), outs.join(", "), p.flags())
}

fn value_text(v: &XValue) -> String {
    let t = v.tensor();
    let dt: &str = t.datatype().map_or("invalid", Into::into);
    let role = match (t.flags, t.constant_buffer_idx) {
        (1, _) => format!("external input {}", t.external_id),
        (2, _) => format!("external output {}", t.external_id),
        (_, c) if c != 0 => format!("constant {c}"),
        _ => "internal".into(),
    };
    let q = if matches!(v, XValue::Quantized { .. }) { " quantized" } else { "" };
    format!("id {} {dt}{q} {:?} {role}", t.id_out, t.shape())
}

/// Indented text lines for one blob.
pub fn text(blob: &[u8], named: &[(&str, &[u8])], indent: &str) -> String {
    let mut s = String::new();
    let (b, verdict) = match read(blob, named) {
        Ok(x) => x,
        Err(e) => {
            let _ = writeln!(s, "{indent}xnnpack: unreadable: {e}");
            return s;
        }
    };
    let g = &b.graph;
    let form = match &b.header {
        Some(h) => format!(
            "header: flatbuffer {}+{}, constants {}+{}",
            h.flatbuffer_offset, h.flatbuffer_size, h.constant_data_offset, h.constant_data_size
        ),
        None => "bare flatbuffer".into(),
    };
    let n_const = g.values.iter().filter(|v| v.tensor().constant_buffer_idx != 0).count();
    let _ = writeln!(
        s,
        "{indent}xnnpack {} ({form}); {} values, {} nodes, {n_const} constants, num_externs {}",
        b.identifier,
        g.values.len(),
        g.nodes.len(),
        g.num_externs
    );
    if let Some(e) = verdict {
        let _ = writeln!(s, "{indent}  does not verify: {e}");
    }
    for (i, v) in g.values.iter().enumerate() {
        let _ = writeln!(s, "{indent}  value {i}: {}", value_text(v));
    }
    for (i, n) in g.nodes.iter().enumerate() {
        let mm = n.output_min_max.map(|m| format!(" clamp [{}, {}]", m.output_min, m.output_max)).unwrap_or_default();
        let _ = writeln!(s, "{indent}  node {i}: {}{mm}", node_text(n.node_type, &n.payload));
    }
    for (i, c) in g.constant_data.iter().flatten().enumerate().skip(1) {
        let at = match &c.named_key {
            Some(k) => format!("named {k:?}"),
            None => format!("offset {}", c.offset),
        };
        let _ = writeln!(s, "{indent}  constant {i}: {at}, {} B", c.size);
    }
    s
}

/// The JSON of one blob: the parsed model, plus `verify_error` (null when it verifies).
pub fn json(blob: &[u8], named: &[(&str, &[u8])]) -> Value {
    match read(blob, named) {
        Ok((b, verdict)) => json!({
            "blob": serde_json::to_value(&b).unwrap_or(Value::Null),
            "verify_error": verdict,
        }),
        Err(e) => json!({ "parse_error": e }),
    }
}
