//! What reading a long runner-protocol line allocates: a reply (or request) holding a tensor of
//! millions of values is read holding the line and the tensor's bytes, not a JSON tree of the
//! line (through `serde_json::Value`, a 62 MiB reply of `0,0,…` took 3.5 GB on 2026-12-03).
//! Under an allocation guard; its own test binary, so that no other test allocates while the
//! guard is set.

#![forbid(unsafe_code)]

use ptecheck::runner::{Reply, Request};
use ptecheck::runtime::HostValue;

#[global_allocator]
static ALLOC: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

/// A float32 tensor of `n` zeros in the corpus encoding, the shortest JSON per value.
fn zeros(n: usize) -> String {
    let mut t = String::with_capacity(2 * n + 100);
    t.push_str(r#"{"kind":"tensor","dtype":"float32","shape":["#);
    t.push_str(&n.to_string());
    t.push_str(r#"],"values":["#);
    for i in 0..n {
        t.push_str(if i == 0 { "0" } else { ",0" });
    }
    t.push_str("]}");
    t
}

/// Runs `read` with at most `allowed` bytes allocated on top of what is held now.
fn within<T>(allowed: usize, read: impl FnOnce() -> T) -> T {
    let _ = ALLOC.set_limit(ALLOC.allocated() + allowed);
    let out = read();
    let _ = ALLOC.set_limit(usize::MAX);
    out
}

#[test]
fn a_long_line_is_read_into_its_values_bytes_not_a_tree_of_its_text() {
    let n = 4_000_000;
    let tensor = zeros(n);
    // The tensor's 16 MB of float32 bytes, plus 1 MiB for the rest: a JSON tree of the
    // 8 MB line would be over 200 MB.
    let allowed = 4 * n + (1 << 20);
    let reply_line = format!(r#"{{"id":7,"outputs":[{tensor}]}}"#);
    let (id, reply) = within(allowed, || Reply::parse(&reply_line)).expect("a reply");
    assert_eq!(id, 7);
    let Reply::Outputs(outs) = reply else { panic!("outputs") };
    let [HostValue::Tensor(t)] = outs.as_slice() else { panic!("one tensor") };
    assert_eq!((t.sizes.as_slice(), t.data.len()), (&[n][..], 4 * n));
    drop(outs);
    // The server reads requests the same way.
    let request_line = format!(r#"{{"id":8,"op":"run","pte":"/p.pte","method":"forward","inputs":[{tensor}]}}"#);
    let request = within(allowed, || Request::parse(&request_line)).expect("a request");
    assert_eq!(request.inputs.len(), 1);
    // A member nobody reads, as long as the tensor, is read whole (it must be JSON) and kept
    // nowhere; a digest is held to the bytes without a copy of them.
    let digest = ptecheck::program::sha256_hex(&vec![0u8; 4 * n]);
    let kept = tensor.replacen("]}", &format!(r#"],"bytes_sha256":"{digest}"}}"#), 1);
    let skipped = tensor.replace("\"kind\":\"tensor\"", "\"k\":\"t\"");
    let busy = format!(r#"{{"id":9,"junk":[{skipped}],"outputs":[{kept}]}}"#);
    let (_, reply) = within(allowed, || Reply::parse(&busy)).expect("a reply");
    let Reply::Outputs(outs) = reply else { panic!("outputs") };
    assert!(matches!(outs.as_slice(), [HostValue::Tensor(t)] if t.data.len() == 4 * n));
    drop(outs);
    // A line whose values are refused is refused holding no more.
    let bad = reply_line.replacen(",0]", ",\"zero\"]", 1);
    let refused = within(allowed, || Reply::parse(&bad)).expect_err("refused");
    assert!(refused.0.contains(&format!("$.outputs[0].values[{}]", n - 1)), "{refused}");
}
