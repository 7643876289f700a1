//! The stage order of ARCHITECTURE.md, checked beyond what the crate split enforces: each
//! module of `src/` may only use the modules listed for it (doc comments aside). The file format
//! and program model are the `pte` crate, which cannot see this crate at all.

#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::path::Path;

/// Module -> the modules of this crate it may use (`pte`'s `format` and `program` re-exports
/// count as modules here).
const ALLOWED: &[(&str, &[&str])] = &[
    ("allocator", &[]),
    ("fault", &[]),
    ("ir", &[]),
    ("emit", &["ir", "program", "format", "fault"]),
    ("runtime", &["program", "format", "fault"]),
    ("backends", &["runtime", "emit", "ir", "program", "format", "fault"]),
    ("generator", &["ir", "backends", "fault"]),
    ("inspect", &["program", "format"]),
    ("runner", &["runtime", "backends", "program", "format", "fault"]),
    ("oracle", &["runner", "generator", "backends", "runtime", "emit", "ir", "program", "format", "fault"]),
];

fn sources(path: &Path, out: &mut Vec<std::path::PathBuf>) {
    if path.is_dir() {
        for e in std::fs::read_dir(path).expect("read dir").flatten() {
            sources(&e.path(), out);
        }
    } else if path.extension().is_some_and(|x| x == "rs") {
        out.push(path.to_path_buf());
    }
}

/// The `crate::NAME` modules a file's code (not its comments) uses.
fn uses(file: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(file).expect("read");
    let mut out = BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let name: String = rest[at + 7..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            out.insert(name);
            rest = &rest[at + 7..];
        }
        // `use crate::{a, b}` groups.
        if let Some(at) = line.find("crate::{") {
            for part in line[at + 8..].split(['}', ',']) {
                let name: String = part.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        }
    }
    out.retain(|n| !n.is_empty());
    out
}

#[test]
fn every_module_uses_only_the_stages_it_may() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut checked = 0;
    for (module, allowed) in ALLOWED {
        let mut files = Vec::new();
        let dir = src.join(module);
        let path = if dir.is_dir() { dir } else { src.join(format!("{module}.rs")) };
        sources(&path, &mut files);
        assert!(!files.is_empty(), "module {module} not found");
        for f in files {
            for used in uses(&f) {
                assert!(
                    used == *module || allowed.contains(&used.as_str()),
                    "{} (module `{module}`) uses `crate::{used}`, which it may not",
                    f.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 40, "{checked} files checked");
}

/// A source file holding `text`, in a temporary folder of its own (`tag`), removed when the
/// returned directory is dropped.
fn probe(tag: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir =
        tempfile::Builder::new().prefix(&format!("ptecheck-layering-{tag}-")).tempdir().expect("temporary directory");
    let f = dir.path().join("x.rs");
    std::fs::write(&f, text).expect("write");
    (dir, f)
}

#[test]
fn the_checker_sees_a_forbidden_use() {
    let (_dir, f) = probe(
        "uses",
        "//! crate::oracle in a comment\nuse crate::{runtime::Trace, ir};\nfn f() { crate::emit::emit(); }\n",
    );
    assert_eq!(uses(&f), ["emit", "ir", "runtime"].iter().map(|s| s.to_string()).collect());
}

/// The statements of `file` (its code outside comments, split at `;`, whitespace collapsed) that
/// name `module` = [outer, inner]: `outer::inner` anywhere, or a `crate::outer::{…}` group that
/// lists `inner`.
fn names(file: &Path, module: &[&str; 2]) -> Vec<String> {
    let text = std::fs::read_to_string(file).expect("read");
    let code: String = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join(" ");
    let [outer, inner] = module;
    code.split(';')
        .map(|st| st.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|st| {
            st.contains(&format!("{outer}::{inner}"))
                || (st.contains(&format!("crate::{outer}::{{"))
                    && st.split(['{', ',', '}', ' ', ':']).any(|w| w == *inner))
        })
        .collect()
}

#[test]
fn xnnpack_uses_neither_the_eager_interpreter_nor_the_cpu_kernels() {
    let mut files = Vec::new();
    sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backends/xnnpack"), &mut files);
    assert!(files.len() >= 3, "{files:?}");
    for f in &files {
        for module in [["ir", "eval"], ["runtime", "kernels"]] {
            let lines = names(f, &module);
            assert!(lines.is_empty(), "{} uses crate::{}::{}: {lines:?}", f.display(), module[0], module[1]);
        }
    }
    // The check sees such a use.
    let (_dir, f) = probe(
        "names",
        "// crate::ir::eval\nuse crate::runtime::{\n    frame,\n    kernels,\n};\nuse crate::ir;\nfn f() { ir::eval::run(); }\n",
    );
    assert_eq!(names(&f, &["runtime", "kernels"]).len(), 1);
    assert_eq!(names(&f, &["ir", "eval"]).len(), 1);
}
