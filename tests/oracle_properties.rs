//! Properties over the generators: every generated program satisfies every invariant
//! (semantics.md E). `PROPTEST_CASES` raises the case count; failures persist in
//! proptest-regressions/. Shrinking works on the generator's input bytes, so every shrunk
//! program is valid.

#![forbid(unsafe_code)]

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use ptecheck::generator::{GenConfig, Switch, generate_from_bytes};
use ptecheck::oracle::{CheckOptions, check_case};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(cases),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/oracle_properties.txt",
        ))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn every_generated_program_satisfies_every_invariant(bytes in proptest::collection::vec(any::<u8>(), 0..2048), seed in any::<u64>()) {
        let g = generate_from_bytes(&GenConfig::default(), &bytes);
        let r = check_case(&g, &CheckOptions { inject_seed: seed, ..CheckOptions::default() });
        prop_assert!(r.ok(), "{:#?}\n{}", r.failures, ptecheck::ir::pretty::program(&g.program));
    }

    #[test]
    fn swarm_configurations_generate_valid_programs(cfg_bytes in proptest::collection::vec(any::<u8>(), 64), bytes in proptest::collection::vec(any::<u8>(), 0..1024)) {
        let mut cfg = GenConfig::default().swarm(&mut arbitrary::Unstructured::new(&cfg_bytes));
        cfg.features.set(Switch::WhileLoop, cfg_bytes[0] % 2 == 0);
        let g = generate_from_bytes(&cfg, &bytes);
        prop_assert!(ptecheck::ir::infer::typecheck_program(&g.program).is_ok());
        let r = check_case(&g, &CheckOptions { negative: false, ..CheckOptions::default() });
        prop_assert!(r.ok(), "{:#?}", r.failures);
    }
}

#[test]
fn the_empty_input_generates_a_valid_program() {
    let g = generate_from_bytes(&GenConfig::default(), &[]);
    assert!(check_case(&g, &CheckOptions::default()).ok());
}

proptest! {
    #![proptest_config(config(1000))]

    /// The runner protocol's writers and readers agree on drawn values, requests and replies:
    /// what the corpus encoding holds reads back as written, what it does not hold (a float16
    /// tensor, bytes that do not fill the shape) is refused by the writer (`runner_lines`'s
    /// generative half, which the fuzz target runs too).
    #[test]
    fn runner_protocol_lines_read_back_as_written(bytes in proptest::collection::vec(any::<u8>(), 0..1024)) {
        ptecheck::campaign::fuzz::runner_lines(&bytes);
    }
}
