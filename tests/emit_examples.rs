//! Every built-in example emits, loads, passes (or, for scratch-repeated, fails exactly) the
//! init checks, runs, and matches the eager interpreter with and without sharing; its listing is
//! snapshotted in snapshots/ for review.

#![forbid(unsafe_code)]

use ptecheck::backends::default_runtime;
use ptecheck::emit::{EmitOptions, emit};
use ptecheck::format;
use ptecheck::generator::examples::{EXAMPLES, example};
use ptecheck::ir::eval::{eval_method, sample_inputs};
use ptecheck::oracle::values::encode as to_host;
use ptecheck::runtime::{HostValue, Trace};

#[test]
fn examples_emit_run_and_match_eager_shared_and_unshared() {
    for name in EXAMPLES {
        let p = example(name).expect("exists");
        for share in [true, false] {
            let e = emit(&p, &EmitOptions { share, ..EmitOptions::default() })
                .unwrap_or_else(|err| panic!("{name}: {err}"));
            let bytes = e.to_bytes().expect("writes");
            let loaded = format::load(&bytes).unwrap_or_else(|err| panic!("{name}: {err}"));
            for m in &p.methods {
                let inputs = sample_inputs(&m.graph, 7);
                let want = eval_method(&p, &m.name, &inputs).expect("eager");
                let trace = Trace::default();
                let rt = default_runtime();
                let mut method = rt
                    .load_method(&loaded, &m.name, None, &trace)
                    .unwrap_or_else(|err| panic!("{name} {}: {err}", m.name));
                for (i, v) in inputs.iter().enumerate() {
                    method.set_input(i, &to_host(v)).expect("input");
                }
                method.execute().unwrap_or_else(|err| panic!("{name} {} share={share}: {err}", m.name));
                let got = method.outputs().expect("outputs");
                let want: Vec<HostValue> = want.iter().map(to_host).collect();
                assert_eq!(got, want, "{name} {} share={share}", m.name);
            }
        }
    }
}

#[test]
fn example_listings_snapshot() {
    for name in EXAMPLES {
        let p = example(name).expect("exists");
        let bytes = emit(&p, &EmitOptions::default()).expect("emits").to_bytes().expect("writes");
        let loaded = format::load(&bytes).expect("loads");
        let text = ptecheck::inspect::listing(&loaded);
        insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!(format!("example_{name}"), text);
        });
    }
}
