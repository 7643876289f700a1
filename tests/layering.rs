//! The stage order of ARCHITECTURE.md, checked beyond what the crate split enforces: each
//! module of `src/` may only use the modules listed for it (doc comments aside). The file format
//! and program model are the `pte` crate, which cannot see this crate at all.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module -> the modules of this crate it may use (`pte`'s `format` and `program` re-exports
/// count as modules here).
const ALLOWED: &[(&str, &[&str])] = &[
    ("allocator", &[]),
    ("fault", &[]),
    ("exit", &[]),
    ("ir", &[]),
    ("emit", &["ir", "program", "format", "fault"]),
    ("runtime", &["program", "format", "fault"]),
    ("backends", &["runtime", "emit", "ir", "program", "format", "fault"]),
    ("generator", &["ir", "backends", "fault"]),
    ("bounds", &["backends", "runtime", "ir", "program", "format"]),
    ("inspect", &["runtime", "program", "format"]),
    ("child", &[]),
    ("exporter", &["child", "oracle", "emit", "ir", "backends", "runtime", "program", "format", "fault"]),
    ("runner", &["child", "runtime", "backends", "program", "format", "fault"]),
    ("oracle", &["generator", "bounds", "backends", "runtime", "emit", "ir", "program", "format", "fault"]),
    (
        "campaign",
        &[
            "exit",
            "oracle",
            "child",
            "runner",
            "exporter",
            "inspect",
            "generator",
            "bounds",
            "backends",
            "runtime",
            "emit",
            "ir",
            "program",
            "format",
            "fault",
        ],
    ),
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
        for module in [["ir", "eval"], ["ir", "kernels"], ["runtime", "kernels"]] {
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

/// The modules of `src/` (one per file, `a::b` for `src/a/b.rs` or `src/a/b/mod.rs`; `lib.rs`
/// and `main.rs` are not modules) and each one's code outside comments and `mod tests`.
fn module_files() -> BTreeMap<String, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut out = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).expect("under src").with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        if parts == ["lib"] || parts == ["main"] {
            continue;
        }
        out.insert(parts.join("::"), code_of(&std::fs::read_to_string(&f).expect("read")));
    }
    out
}

/// A file's code: comments dropped, and nothing from its `mod tests` on.
fn code_of(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines.iter().position(|l| l.starts_with("mod tests")).map_or(lines.len(), |i| i.saturating_sub(1));
    lines[..end].iter().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join(" ")
}

/// The paths `code` names from `crate`, `super` or `self`, `use` groups expanded one level
/// (`crate::a::{b, c::d}` names `crate::a::b` and `crate::a::c::d`).
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut texts = vec![code.to_string()];
    let mut rest = code;
    while let Some(open) = rest.find("::{") {
        let start = rest[..open].rfind(|c: char| !(word(c) || c == ':')).map_or(0, |i| i + 1);
        let base = &rest[start..open];
        let Some(close) = rest[open..].find('}') else { break };
        for item in rest[open + 3..open + close].split(',') {
            texts.push(format!("{base}::{}", item.trim()));
        }
        rest = &rest[open + 3..];
    }
    let mut out = Vec::new();
    for text in &texts {
        for root in ["crate::", "super::", "self::"] {
            let mut at = 0;
            while let Some(i) = text[at..].find(root) {
                let i = at + i;
                at = i + root.len();
                if i > 0 && text[..i].chars().next_back().is_some_and(|c| word(c) || c == ':') {
                    continue;
                }
                let path: String = text[i..].chars().take_while(|c| word(*c) || *c == ':').collect();
                out.push(path.split("::").filter(|p| !p.is_empty()).map(str::to_string).collect());
            }
        }
    }
    out
}

/// Module -> the modules of this crate it uses: each named path resolved to the longest module
/// it starts with (`super` and `self` from the module's place), and each child module a
/// `mod.rs` names relatively (`child::item`).
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = module_files();
    let mut graph = BTreeMap::new();
    for (module, code) in &files {
        let here: Vec<&str> = module.split("::").collect();
        let mut uses = BTreeSet::new();
        for path in named_paths(code) {
            let mut parts: Vec<String> = Vec::new();
            let mut base = here.clone();
            let mut relative = true;
            for (k, p) in path.iter().enumerate() {
                match p.as_str() {
                    "crate" if k == 0 => {
                        base.clear();
                        relative = false;
                    }
                    "super" if relative => {
                        base.pop();
                    }
                    "self" if relative => {}
                    _ => {
                        relative = false;
                        parts.push(p.clone());
                    }
                }
            }
            let full: Vec<String> = base.iter().map(|s| s.to_string()).chain(parts).collect();
            if let Some(target) = (1..=full.len()).rev().map(|k| full[..k].join("::")).find(|m| files.contains_key(m)) {
                uses.insert(target);
            }
        }
        for child in files.keys().filter_map(|k| k.strip_prefix(&format!("{module}::"))).filter(|c| !c.contains("::")) {
            if code.contains(&format!(" {child}::")) || code.contains(&format!("({child}::")) {
                uses.insert(format!("{module}::{child}"));
            }
        }
        uses.remove(module);
        graph.insert(module.clone(), uses);
    }
    graph
}

/// Edges from a module to one of its ancestors (`oracle::structure` using `oracle`).
fn back_arrows(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for (m, uses) in graph {
        for u in uses.iter().filter(|u| m.starts_with(&format!("{u}::"))) {
            out.push(format!("{m} -> {u}"));
        }
    }
    out
}

/// The groups of modules that use each other in a circle (strongly connected, two or more).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for u in graph.get(&m).into_iter().flatten() {
                if seen.insert(u.clone()) {
                    todo.push(u.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|m| (m, reach(m))).collect();
    let mut groups: Vec<Vec<String>> = Vec::new();
    for m in graph.keys() {
        if !reached[m].contains(m) || groups.iter().any(|g| g.contains(m)) {
            continue;
        }
        groups.push(graph.keys().filter(|o| reached[m].contains(*o) && reached[*o].contains(m)).cloned().collect());
    }
    groups
}

#[test]
fn no_module_uses_its_ancestors_and_no_modules_use_each_other_in_a_circle() {
    let graph = module_graph();
    assert!(graph.len() > 60, "{} modules", graph.len());
    assert!(graph["campaign::run"].contains("campaign::options"), "{:?}", graph["campaign::run"]);
    assert!(graph["oracle"].contains("oracle::case"), "{:?}", graph["oracle"]);
    let (back, circles) = (back_arrows(&graph), circles(&graph));
    println!("{} modules, {} back arrows, {} circles", graph.len(), back.len(), circles.len());
    assert!(back.is_empty(), "modules using an ancestor: {back:?}");
    assert!(circles.is_empty(), "modules using each other in a circle: {circles:?}");
}

#[test]
fn the_graph_check_sees_a_back_arrow_and_a_circle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["a::x"]),
        ("a::x", vec!["a"]),
        ("b::y", vec!["b::z"]),
        ("b::z", vec!["c"]),
        ("c", vec!["b::y"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(m, u)| (m.to_string(), u.into_iter().map(str::to_string).collect()))
    .collect();
    assert_eq!(back_arrows(&graph), ["a::x -> a"]);
    assert_eq!(circles(&graph), [vec!["a", "a::x"], vec!["b::y", "b::z", "c"]]);
    let paths = named_paths("use super::report::{Report, x::Y}; fn f() { crate::ir::eval::run(); my_super::x(); }");
    let paths: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(paths, ["crate::ir::eval::run", "super::report", "super::report::Report", "super::report::x::Y"]);
}
