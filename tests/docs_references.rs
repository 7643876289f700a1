//! The documents' references hold: every `file.rs::name`, and every citation written as a file
//! followed by names (`` (`tests/x.rs`, `name`) ``), names a function in that file, every
//! repository path in backticks exists, and semantics.md's rule table lists every test named
//! after a rule, with the count it states.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// README, ARCHITECTURE, the folders' READMEs and every document under docs/, by path relative
/// to the root.
fn documents() -> Vec<(String, String)> {
    let mut paths =
        ["README.md", "ARCHITECTURE.md", "corpus/README.md", "runners/README.md"].map(|p| root().join(p)).to_vec();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths.iter().map(|p| (p.strip_prefix(root()).expect("under root").display().to_string(), read(p))).collect()
}

/// The test files: tests/ and crates/pte/tests/.
fn test_dirs() -> [PathBuf; 2] {
    [root().join("tests"), root().join("crates/pte/tests")]
}

/// Code spans of a Markdown text outside fenced blocks, with their line numbers (a span is
/// taken within one line).
fn code_spans(text: &str) -> Vec<(usize, &str)> {
    let mut out = vec![];
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.extend(line.split('`').skip(1).step_by(2).map(|s| (n + 1, s)));
        }
    }
    out
}

/// Whether `source` defines a function `name`.
fn defines(source: &str, name: &str) -> bool {
    source.match_indices(&format!("fn {name}")).any(|(at, m)| {
        let next = source[at + m.len()..].chars().next();
        next.is_some_and(|c| c == '(' || c == '<')
    })
}

/// The file a `file.rs::name` reference means: a path from the root when it has a `/`,
/// otherwise a test file of that name.
fn referenced_file(file: &str) -> Option<PathBuf> {
    if file.contains('/') {
        let p = root().join(format!("{file}.rs"));
        return p.exists().then_some(p);
    }
    test_dirs().into_iter().map(|d| d.join(format!("{file}.rs"))).find(|p| p.exists())
}

#[test]
fn every_test_and_function_the_documents_name_exists() {
    let mut wrong = vec![];
    for (doc, text) in documents() {
        for (line, span) in code_spans(&text) {
            let Some((file, rest)) = span.split_once(".rs::") else { continue };
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if file.is_empty() || name.is_empty() || file.contains(' ') {
                continue;
            }
            match referenced_file(file) {
                None => wrong.push(format!("{doc}:{line}: `{span}`: no file {file}.rs")),
                Some(p) if !defines(&read(&p), &name) => {
                    wrong.push(format!("{doc}:{line}: `{span}`: {} has no fn {name}", p.display()))
                }
                Some(_) => {}
            }
        }
    }
    assert!(wrong.is_empty(), "stale references:\n{}", wrong.join("\n"));
}

/// Citations of a test file followed by the names of its functions, outside fenced blocks:
/// `` `tests/x.rs`, `name` `` or `` `tests/x.rs` (`a`, `b` ``, across line breaks, as
/// (line, file, name).
fn cited_pairs(text: &str) -> Vec<(usize, String, String)> {
    let mut kept = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            kept.push('\n');
            continue;
        }
        if !fenced {
            kept.push_str(line);
        }
        kept.push('\n');
    }
    let parts: Vec<&str> = kept.split('`').collect();
    let line_of = |i: usize| 1 + parts[..i].iter().map(|p| p.matches('\n').count()).sum::<usize>();
    let ident = |s: &str| {
        s.len() > 3 && s.contains('_') && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    let mut out = vec![];
    let mut i = 1;
    while i < parts.len() {
        let span = parts[i];
        if span.ends_with(".rs") && span.contains('/') && !span.contains(' ') {
            let mut j = i + 2;
            while j < parts.len() {
                let between: String = parts[j - 1].chars().filter(|c| !c.is_whitespace()).collect();
                if !matches!(between.as_str(), "," | "(" | ",(") || !ident(parts[j]) {
                    break;
                }
                out.push((line_of(j), span.to_string(), parts[j].to_string()));
                j += 2;
            }
        }
        i += 2;
    }
    out
}

#[test]
fn every_test_a_citation_names_is_in_the_file_it_names() {
    let mut wrong = vec![];
    let mut checked = 0;
    for (doc, text) in documents() {
        for (line, file, name) in cited_pairs(&text) {
            let path = root().join(&file);
            if !path.exists() {
                wrong.push(format!("{doc}:{line}: `{file}` does not exist"));
            } else if !defines(&read(&path), &name) {
                wrong.push(format!("{doc}:{line}: `{file}` has no fn `{name}`"));
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} citations found: the parser misses the README's form");
    assert!(wrong.is_empty(), "citations of tests that are not where they are said to be:\n{}", wrong.join("\n"));
}

#[test]
fn every_repository_path_the_documents_name_exists() {
    let tops = ["src/", "crates/", "tests/", "benches/", "runners/", "fuzz/", "docs/", "corpus/", "snapshots/", ".ci/"];
    let mut wrong = vec![];
    for (doc, text) in documents() {
        for (line, span) in code_spans(&text) {
            let path = span.split([' ', ':']).next().unwrap_or_default();
            if !tops.iter().any(|t| path.starts_with(t)) || path.contains(['*', '{', '<']) || span.contains("::") {
                continue;
            }
            if !root().join(path).exists() {
                wrong.push(format!("{doc}:{line}: `{span}`: {path} does not exist"));
            }
        }
    }
    assert!(wrong.is_empty(), "paths that do not exist:\n{}", wrong.join("\n"));
}

/// Every `#[test]` function of the test files, as (file name, function name).
fn tests() -> Vec<(String, String)> {
    let mut out = vec![];
    for dir in test_dirs() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("tests dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .collect();
        files.sort();
        for f in files {
            let text = read(&f);
            let lines: Vec<&str> = text.lines().collect();
            for (i, l) in lines.iter().enumerate() {
                if l.trim() != "#[test]" {
                    continue;
                }
                let Some(def) = lines[i + 1..].iter().take(4).find_map(|l| l.trim().strip_prefix("fn ")) else {
                    continue;
                };
                let name: String = def.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                out.push((f.file_name().expect("name").to_string_lossy().into_owned(), name));
            }
        }
    }
    out
}

/// The rows of semantics.md's "Where each rule is tested": rule id -> (named column, other column).
fn rule_table(text: &str) -> BTreeMap<String, (String, String)> {
    let section = text.split("## Where each rule is tested").nth(1).expect("the rule table section");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let [_, id, named, other, ..] = cells.as_slice() else { return None };
            let is_id = id.len() >= 2
                && id.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && id.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
                && id.chars().any(|c| c.is_ascii_digit());
            is_id.then(|| (id.to_string(), (named.to_string(), other.to_string())))
        })
        .collect()
}

/// The rule id a word of a test name stands for (`e01` is E1).
fn rule_of(word: &str) -> String {
    let letters: String = word.chars().take_while(char::is_ascii_alphabetic).collect();
    let digits = word[letters.len()..].trim_start_matches('0');
    format!("{}{digits}", letters.to_ascii_uppercase())
}

#[test]
fn the_rule_table_lists_every_test_named_after_a_rule_and_states_its_count() {
    let text = read(&root().join("docs/semantics.md"));
    let table = rule_table(&text);
    assert!(table.len() > 100, "the rule table has {} rows", table.len());
    let mut missing = vec![];
    for (file, name) in tests() {
        for word in name.split('_') {
            let id = rule_of(word);
            if word.len() < 2 || !word.chars().any(|c| c.is_ascii_digit()) {
                continue;
            }
            if let Some((named, _)) = table.get(&id)
                && !named.contains(&format!("{name}`"))
            {
                missing.push(format!("{id}: {file}::{name}"));
            }
        }
    }
    assert!(missing.is_empty(), "tests named after a rule that its row does not list:\n{}", missing.join("\n"));
    let invariant = |id: &str| id.starts_with('I') && id[1..].chars().all(|c| c.is_ascii_digit());
    let rules = table.iter().filter(|(id, _)| !invariant(id));
    let named = rules.clone().filter(|(_, (n, _))| n != "—").count();
    let other = rules.filter(|(_, (n, o))| n == "—" && o != "—").count();
    let invariants: Vec<&String> = table.keys().filter(|id| invariant(id)).collect();
    let named_invariants: Vec<&str> = table
        .iter()
        .filter(|(id, (n, _))| invariant(id) && n.contains("named after it"))
        .map(|(id, _)| id.as_str())
        .collect();
    let stated = format!(
        "Count: {} rule ids. {named} rules have a test named after them, and {other} more only tests in the \
         third column. The {} invariants are checked by the oracle ({} also by tests named after them).",
        table.len(),
        invariants.len(),
        named_invariants.join(", "),
    );
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(&stated), "semantics.md should state: {stated}");
}

/// The repository paths named in the section of `text` under `heading`, up to the next heading.
fn paths_in_section(text: &str, heading: &str) -> Vec<String> {
    let Some(start) = text.find(heading) else { return vec![] };
    let body = &text[start + heading.len()..];
    let body = &body[..body.find("\n#").unwrap_or(body.len())];
    code_spans(body).into_iter().map(|(_, s)| s.to_string()).filter(|s| s.contains('/') && s.contains('.')).collect()
}

/// Every source file that enumerates the operators: it names `scalar_ge` in one of its spellings
/// (`ScalarGe`, `scalar_ge`, `executorch_prim::ge`), as every operator table does (this file
/// aside, which names the spellings).
fn operator_enumerations() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.ends_with("generated") {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs" || x == "py") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    for d in ["src", "tests", "runners"] {
        walk(&root().join(d), &mut files);
    }
    let mut out: Vec<String> = files
        .into_iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            ["ScalarGe", "scalar_ge", "executorch_prim::ge"].iter().any(|m| text.contains(m))
        })
        .map(|f| f.strip_prefix(root()).expect("under root").display().to_string())
        .filter(|f| f != "tests/docs_references.rs")
        .collect();
    out.sort();
    out
}

#[test]
fn the_how_to_add_an_operator_list_names_every_file_that_enumerates_the_operators() {
    let arch = read(&root().join("ARCHITECTURE.md"));
    let listed = paths_in_section(&arch, "### An operator");
    assert!(listed.len() >= 8, "{listed:?}");
    let enumerating = operator_enumerations();
    assert!(enumerating.iter().any(|f| f == "src/ir/op.rs"), "{enumerating:?}");
    let missing: Vec<&String> = enumerating.iter().filter(|f| !listed.contains(f)).collect();
    assert!(missing.is_empty(), "ARCHITECTURE.md, How to add an operator, does not name {missing:?}");
    for section in ["### An operator", "### An invariant", "### A backend", "### A runner", "### An exporter"] {
        assert!(!paths_in_section(&arch, section).is_empty(), "{section} names no file");
    }
}

/// The `(`path/file.rs`, `name`, `name`…)` citations of `text`, a paragraph broken over lines
/// included: (line, file, name) for each name.
fn cited_tests(text: &str) -> Vec<(usize, String, String)> {
    let mut out = vec![];
    let mut at = 0;
    while let Some(i) = text[at..].find("(`") {
        let start = at + i + 2;
        at = start;
        let Some(end) = text[start..].find('`') else { break };
        let file = &text[start..start + end];
        if !file.ends_with(".rs") || !file.contains('/') || file.contains(' ') {
            continue;
        }
        let line = text[..start].matches('\n').count() + 1;
        let mut rest = &text[start + end + 1..];
        loop {
            let after_comma = rest.trim_start();
            let Some(r) = after_comma.strip_prefix(',') else { break };
            let Some(r) = r.trim_start().strip_prefix('`') else { break };
            let Some(close) = r.find('`') else { break };
            let name = &r[..close];
            if !name.contains('_') || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
                break;
            }
            out.push((line, file.to_string(), name.to_string()));
            rest = &r[close + 1..];
        }
    }
    out
}

#[test]
fn every_test_a_document_cites_beside_its_file_is_in_that_file() {
    let mut wrong = vec![];
    let mut seen = 0;
    for (doc, text) in documents() {
        for (line, file, name) in cited_tests(&text) {
            seen += 1;
            let path = root().join(&file);
            if !path.exists() {
                wrong.push(format!("{doc}:{line}: {file} does not exist"));
            } else if !defines(&read(&path), &name) {
                wrong.push(format!("{doc}:{line}: {file} has no fn {name}"));
            }
        }
    }
    assert!(seen >= 5, "{seen} citations found");
    assert!(wrong.is_empty(), "citations of tests that are not there:\n{}", wrong.join("\n"));
    // The form is read across a line break and through a list of names.
    let cites = cited_tests("x (`tests/a.rs`, `one_test`,\n  `two_test`) and (`tests/b.rs`, `Not_a_test`)");
    assert_eq!(cites, [(1, "tests/a.rs".into(), "one_test".into()), (1, "tests/a.rs".into(), "two_test".into())]);
}
