//! Both ends of the runner protocol read a line as JSON alike: every case of
//! `runners/json_cases.txt` is taken (`ok`) or refused (`no`) by ptecheck's readers as the file
//! says, and `runners/test_protocol_json.py` holds the ExecuTorch runner's reader to the same
//! file (standard-library Python, run by hand: `python3 runners/test_protocol_json.py`).

#![forbid(unsafe_code)]

use ptecheck::runner::{Reply, Request, protocol};

#[test]
fn every_shared_case_is_read_or_refused_as_the_runner_reads_it() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/runners/json_cases.txt");
    let text = std::fs::read_to_string(path).expect("runners/json_cases.txt");
    let cases: Vec<(&str, bool)> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| match l.split_at(3) {
            ("ok ", line) => (line, true),
            ("no ", line) => (line, false),
            _ => panic!("a case starts with `ok ` or `no `: {l:.40}"),
        })
        .collect();
    assert!(cases.iter().filter(|c| c.1).count() >= 5 && cases.iter().filter(|c| !c.1).count() >= 10);
    for (line, ok) in cases {
        // serde_json's reading, and each protocol reader's: a reader may refuse a JSON line for
        // what it holds, but never as not JSON, and refuses every line that is not JSON as such.
        assert_eq!(serde_json::from_str::<serde_json::Value>(line).is_ok(), ok, "serde_json: {line:.60}");
        // Why each protocol reader refused the line, if it did: "not JSON", or what it holds.
        let not_json = |why: Option<String>| why.is_some_and(|w| w.starts_with("not JSON"));
        for (reader, refused_as_not_json) in [
            ("reply", not_json(Reply::parse(line).err().map(|e| e.to_string()))),
            ("request", not_json(Request::parse(line).err().map(|e| e.fault.to_string()))),
            ("hello", not_json(protocol::parse_hello(line).err().map(|e| e.to_string()))),
        ] {
            assert_eq!(refused_as_not_json, !ok, "the {reader} reader on: {line:.60}");
        }
    }
}
