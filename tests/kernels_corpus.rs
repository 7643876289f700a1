//! The copy kernels ExecuTorch 1.5.1's pipeline inserts into ordinary programs
//! (`dim_order_ops::_clone_dim_order.out`, `dim_order_ops::_to_dim_order_copy.out`,
//! `aten::view_copy.out`) run here as in ExecuTorch: every file of `corpus/kernels` (made by
//! `corpus/kernels/make.py`) replays to ExecuTorch's recorded outputs bit for bit.

#![forbid(unsafe_code)]

use ptecheck::campaign::replay::replay;
use ptecheck::runtime::Session;
use std::collections::BTreeSet;
use std::path::PathBuf;

#[test]
fn every_inserted_copy_kernel_runs_to_executorchs_outputs() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/kernels");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("corpus/kernels")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "pte"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    let mut kernels = BTreeSet::new();
    for pte in &files {
        let bytes = std::fs::read(pte).expect("read");
        let loaded = ptecheck::format::load(&bytes).expect("loads");
        kernels.extend(loaded.program.plans().iter().flat_map(|p| p.operator_list().iter().map(|o| o.qualified())));
        let io: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(pte.with_extension("io.json")).expect("io.json"))
                .expect("JSON");
        let rt = ptecheck::backends::default_runtime();
        let r = replay(&Session::new(&loaded, &rt), &io, false).expect("replays");
        assert!(r.all_ok(), "{}: {r}", pte.display());
        assert_eq!(r.worst(), Some(0), "{}: {r}", pte.display());
    }
    for k in ["dim_order_ops::_clone_dim_order.out", "dim_order_ops::_to_dim_order_copy.out", "aten::view_copy.out"] {
        assert!(kernels.contains(k), "no file calls {k}: {kernels:?}");
    }
}
