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
        // what it holds, but never takes one that is not JSON.
        assert_eq!(serde_json::from_str::<serde_json::Value>(line).is_ok(), ok, "serde_json: {line:.60}");
        if !ok {
            for (reader, taken) in [
                ("reply", Reply::parse(line).is_ok()),
                ("request", Request::parse(line).is_ok()),
                ("hello", protocol::parse_hello(line).is_ok()),
            ] {
                assert!(!taken, "the {reader} reader took a line that is not JSON: {line:.60}");
            }
        }
    }
}
