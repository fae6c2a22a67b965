//! Guards the shape of src/: no import cycle between top-level modules (a cycle is a type in the
//! wrong room), no source file over 800 lines and no function over 120 lines outside
//! `#[cfg(test)]` code. The checks read the source text only (they mirror
//! /work/shared/hooks/modcycles.py and tools/longfns.py, but skip comments and literals) and take a
//! root folder, so the fixture tests at the bottom run them on tiny trees. They judge nothing about
//! what the code does.
//!
//! What the text scan does not understand: braces or `crate::` produced by macros, a line that
//! starts with `#[cfg(test)]` inside a multi-line string (it ends the scanned part there), and
//! paths that reach another module without naming it (`super::super::x`, a re-export in lib.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 800;
const MAX_FN_LINES: usize = 120;

/// Every `.rs` file under `root`, sorted, so reports and "first location" are stable.
fn rust_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `root`'s file as the report names it: relative to the folder holding `root` (`src/cli.rs`).
fn shown(root: &Path, file: &Path) -> String {
    let base = root.parent().unwrap_or(root);
    file.strip_prefix(base).unwrap_or(file).display().to_string()
}

/// The code of each line before the first line that starts with `#[cfg(test)]`, one entry per
/// line: comments dropped, string and char literals emptied (`""`, `'.'`), so braces and paths
/// inside them count for nothing. Handles `//` and nested `/* */` comments, `"…"` with escapes,
/// raw strings `r#"…"#` (and the `b`/`br`/`c` prefixes), char and byte literals (`'{'`, `'\''`,
/// `'\u{7b}'`) told apart from lifetimes and labels (`'a`).
fn code_lines(text: &str) -> Vec<String> {
    let kept: Vec<&str> = text.lines().take_while(|l| !l.trim_start().starts_with("#[cfg(test)]")).collect();
    let src: Vec<char> = kept.join("\n").chars().collect();
    let mut lines = vec![String::new()];
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    // Moves over `src[from..to]` outside code, keeping line breaks so line numbers stay right.
    let skip = |lines: &mut Vec<String>, from: usize, to: usize| {
        for _ in src[from..to.min(src.len())].iter().filter(|&&c| c == '\n') {
            lines.push(String::new());
        }
        to
    };
    let mut i = 0;
    while i < src.len() {
        let (c, next) = (src[i], src.get(i + 1).copied());
        let prev = |k: usize| if i >= k { Some(src[i - k]) } else { None };
        if c == '\n' {
            lines.push(String::new());
            i += 1;
        } else if c == '/' && next == Some('/') {
            i = (i..src.len()).find(|&j| src[j] == '\n').unwrap_or(src.len());
        } else if c == '/' && next == Some('*') {
            let (mut j, mut depth) = (i + 2, 1);
            while j < src.len() && depth > 0 {
                if src[j] == '/' && src.get(j + 1) == Some(&'*') {
                    (depth, j) = (depth + 1, j + 2);
                } else if src[j] == '*' && src.get(j + 1) == Some(&'/') {
                    (depth, j) = (depth - 1, j + 2);
                } else {
                    j += 1;
                }
            }
            i = skip(&mut lines, i, j);
        } else if c == 'r'
            && (!prev(1).is_some_and(ident) || (prev(1) == Some('b') && !prev(2).is_some_and(ident)))
            && raw_string_end(&src, i + 1).is_some()
        {
            let end = raw_string_end(&src, i + 1).unwrap();
            lines.last_mut().unwrap().push_str("\"\"");
            i = skip(&mut lines, i, end);
        } else if c == '"' {
            let mut j = i + 1;
            while j < src.len() && src[j] != '"' {
                j += if src[j] == '\\' { 2 } else { 1 };
            }
            lines.last_mut().unwrap().push_str("\"\"");
            i = skip(&mut lines, i, j + 1);
        } else if c == '\'' && next == Some('\\') {
            let end = (i + 3..src.len()).find(|&j| src[j] == '\'').map_or(src.len(), |j| j + 1);
            lines.last_mut().unwrap().push_str("'.'");
            i = end;
        } else if c == '\'' && src.get(i + 2) == Some(&'\'') && next != Some('\n') {
            lines.last_mut().unwrap().push_str("'.'");
            i += 3;
        } else {
            lines.last_mut().unwrap().push(c);
            i += 1;
        }
    }
    lines
}

/// Where a raw string that opens at `src[at..]` (`#…#"`, after its `r`) ends, just past its last
/// `#`; `None` when `r` is not followed by a raw string (an identifier such as `r#type`, `return`).
fn raw_string_end(src: &[char], at: usize) -> Option<usize> {
    let hashes = src[at..].iter().take_while(|&&c| c == '#').count();
    if src.get(at + hashes) != Some(&'"') {
        return None;
    }
    let mut j = at + hashes + 1;
    while j < src.len() {
        if src[j] == '"' && src[j + 1..].iter().take(hashes).filter(|&&c| c == '#').count() == hashes {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(src.len())
}

// ---------------------------------------------------------------------------------------------
// Import cycles between top-level modules

/// The top-level module a file belongs to (`cli`, `record` for `record/store.rs`); `None` for the
/// crate roots `lib.rs` and `main.rs`.
fn top_module(root: &Path, file: &Path) -> Option<String> {
    let first = file.strip_prefix(root).ok()?.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (name != "lib" && name != "main").then_some(name)
}

/// The top-level modules a `crate::` path starting at `rest` names: one for `crate::x…`, each
/// entry's first name for a group `crate::{x::A, y}`.
fn named_modules(rest: &str) -> Vec<String> {
    let first_ident = |s: &str| -> String {
        s.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
    };
    let Some(group) = rest.strip_prefix('{') else {
        return vec![first_ident(rest)];
    };
    let (mut depth, mut entries, mut start) = (0, Vec::new(), 0);
    for (k, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                entries.push(&group[start..k]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                entries.push(&group[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    entries.into_iter().map(first_ident).collect()
}

/// Edges `from -> to` between top-level modules, each with the first `file:line` that makes it.
fn module_edges(root: &Path) -> BTreeMap<(String, String), String> {
    let mut edges = BTreeMap::new();
    for file in rust_files(root) {
        let Some(from) = top_module(root, &file) else { continue };
        let code = code_lines(&std::fs::read_to_string(&file).unwrap()).join("\n");
        for (at, _) in code.match_indices("crate::") {
            if code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let line = 1 + code[..at].matches('\n').count();
            for to in named_modules(&code[at + "crate::".len()..]) {
                if !to.is_empty() && to != from && to != "self" {
                    edges
                        .entry((from.clone(), to))
                        .or_insert_with(|| format!("{}:{line}", shown(root, &file)));
                }
            }
        }
    }
    edges
}

/// Strongly connected components of the graph (Tarjan), those of more than one module, sorted.
fn cyclic_components(edges: &BTreeMap<(String, String), String>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        next: BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.next.get(v).cloned().unwrap_or_default() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    self.low.insert(v, self.low[v].min(self.low[w]));
                } else if self.on_stack.contains(w) {
                    self.low.insert(v, self.low[v].min(self.index[w]));
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on_stack.remove(w);
                    comp.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = Tarjan {
        next: BTreeMap::new(),
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for (from, to) in edges.keys() {
        t.next.entry(from.as_str()).or_default().push(to.as_str());
    }
    let nodes: Vec<&str> = t.next.keys().copied().collect();
    for v in nodes {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}

/// One line per cycle: its modules, then each edge inside it with the file:line that makes it.
fn module_cycles(root: &Path) -> Vec<String> {
    let edges = module_edges(root);
    cyclic_components(&edges)
        .into_iter()
        .map(|comp| {
            let inside: Vec<String> = edges
                .iter()
                .filter(|((a, b), _)| comp.contains(a) && comp.contains(b))
                .map(|((a, b), at)| format!("    {a} -> {b} at {at}"))
                .collect();
            format!("cycle: {}\n{}", comp.join(" <-> "), inside.join("\n"))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// File and function lengths

/// The function a line of code declares (`pub(crate) async fn name`), if it declares one.
fn declared_fn(code: &str) -> Option<String> {
    let mut s = code.trim_start();
    if let Some(rest) = s.strip_prefix("pub") {
        if let Some(vis) = rest.strip_prefix('(') {
            s = vis.split_once(')')?.1.trim_start();
        } else if rest.starts_with(char::is_whitespace) {
            s = rest.trim_start();
        }
    }
    loop {
        let before = s;
        for q in ["const ", "async ", "unsafe ", "default "] {
            s = s.strip_prefix(q).unwrap_or(s).trim_start();
        }
        if let Some(rest) = s.strip_prefix("extern ") {
            s = rest.trim_start().strip_prefix("\"\"").unwrap_or(rest).trim_start();
        }
        if s == before {
            break;
        }
    }
    let name: String =
        s.strip_prefix("fn ")?.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!name.is_empty()).then_some(name)
}

/// Functions of one file's non-test code longer than `limit` lines, as `(line, name, length)`:
/// from the `fn` line to the line where its braces close (a declaration without a body ends at
/// its `;`).
fn long_fns_in(text: &str, limit: usize) -> Vec<(usize, String, usize)> {
    let code = code_lines(text);
    let mut out = Vec::new();
    for (i, line) in code.iter().enumerate() {
        let Some(name) = declared_fn(line) else { continue };
        let (mut depth, mut started, mut end) = (0i64, false, code.len() - 1);
        for (j, l) in code.iter().enumerate().skip(i) {
            depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
            started |= l.contains('{');
            if (started && depth <= 0) || (!started && l.trim_end().ends_with(';')) {
                end = j;
                break;
            }
        }
        if end - i + 1 > limit {
            out.push((i + 1, name, end - i + 1));
        }
    }
    out
}

/// Files over [`MAX_FILE_LINES`] and functions over [`MAX_FN_LINES`] under `root`, one line each.
fn oversized(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for file in rust_files(root) {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = shown(root, &file);
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            out.push(format!("file {shown}: {lines} lines (at most {MAX_FILE_LINES})"));
        }
        for (line, name, len) in long_fns_in(&text, MAX_FN_LINES) {
            out.push(format!("fn {shown}:{line} {name}: {len} lines (at most {MAX_FN_LINES})"));
        }
    }
    out
}

fn crate_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_import_cycle_between_top_level_modules() {
    let cycles = module_cycles(&crate_src());
    assert!(
        cycles.is_empty(),
        "top-level modules of src/ import each other in a cycle (a type in the wrong room; move it to \
         `spec` or the module both sides need):\n{}",
        cycles.join("\n")
    );
}

#[test]
fn no_file_over_800_lines_and_no_function_over_120() {
    let found = oversized(&crate_src());
    assert!(
        found.is_empty(),
        "{} source file(s) or function(s) of src/ are too long (move test modules to a tests.rs \
         sibling, cut functions along their steps):\n{}",
        found.len(),
        found.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// The checks on tiny fixture trees

mod fixtures {
    use super::*;

    /// A `src/` folder in a fresh temporary directory holding `files` (path, text).
    fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        for (path, text) in files {
            let p = src.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        (dir, src)
    }

    /// A function of exactly `total` lines (header and closing brace included) whose body holds
    /// braces that only a naive count would see: in strings, raw strings, chars and comments.
    fn function(name: &str, total: usize) -> String {
        let tricky = [
            "    let open = \"{{ not a block\";",
            "    let close = '}';",
            "    let brace = '{'; let quote = '\"'; let esc = '\\''; let u = '\\u{7b}';",
            "    let raw = r#\"}\" still { in here\"#;",
            "    let bytes = (b'{', br\"}\", b\"{\\\"\");",
            "    // a comment with } closes nothing",
            "    /* a block { comment /* nested } */ still { comment */",
            "    let multi = \"a string over",
            "        two lines with a { brace\";",
            "    'outer: loop { break 'outer; }",
        ];
        let mut lines = vec![format!("pub(crate) fn {name}<'a>(x: &'a str) -> &'a str {{")];
        for k in 0..total - 3 {
            lines.push(tricky.get(k).map_or_else(|| format!("    let _v{k} = {k};"), |t| t.to_string()));
        }
        lines.push("    x".into());
        lines.push("}".into());
        lines.join("\n") + "\n"
    }

    #[test]
    fn a_cycle_is_caught_with_its_edges() {
        let (_d, src) = tree(&[
            ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n"),
            ("a.rs", "//! a\nuse crate::b::Thing;\n"),
            ("b/mod.rs", "//! b\npub mod inner;\n"),
            ("b/inner.rs", "fn f() {}\nfn g() -> crate::a::Other { crate::a::Other::default() }\n"),
            ("c.rs", "use crate::a::Other;\n"),
        ]);
        let cycles = module_cycles(&src);
        assert_eq!(cycles.len(), 1, "{cycles:#?}");
        assert_eq!(cycles[0], "cycle: a <-> b\n    a -> b at src/a.rs:2\n    b -> a at src/b/inner.rs:2");
    }

    #[test]
    fn a_grouped_import_over_lines_makes_edges_too() {
        let (_d, src) = tree(&[
            ("a.rs", "use crate::{\n    b::X,\n    c::{self, Y},\n};\n"),
            ("c.rs", "pub fn f() -> u8 { crate::a::F }\n"),
        ]);
        assert_eq!(
            module_cycles(&src),
            vec!["cycle: a <-> c\n    a -> c at src/a.rs:1\n    c -> a at src/c.rs:1"]
        );
        let edges: Vec<_> = module_edges(&src).into_keys().collect();
        assert!(edges.contains(&("a".to_string(), "b".to_string())), "{edges:?}");
    }

    #[test]
    fn a_tree_without_a_cycle_passes() {
        let (_d, src) = tree(&[
            ("lib.rs", "pub mod a;\npub mod b;\nuse crate::a::X;\n"),
            ("main.rs", "use crate::b::Y;\n"),
            ("a.rs", "use crate::b::Y;\nuse self::inner::Z;\n"),
            // Back-references only in tests, comments, strings or other crates' paths do not count.
            (
                "b.rs",
                "// crate::a::X\n/* crate::a::X */\nconst S: &str = \"crate::a::X\";\nuse mycrate::a;\n\
                 #[cfg(test)]\nmod tests { use crate::a::X; }\n",
            ),
        ]);
        assert_eq!(module_cycles(&src), Vec::<String>::new());
        assert_eq!(module_edges(&src).len(), 1);
    }

    #[test]
    fn a_121_line_function_is_caught_and_a_120_line_one_passes() {
        let text = format!("//! f\n{}\n{}", function("long_one", 121), function("fits", 120));
        assert_eq!(long_fns_in(&text, MAX_FN_LINES), vec![(2, "long_one".to_string(), 121)]);
        let (_d, src) = tree(&[("x.rs", &text)]);
        assert_eq!(oversized(&src), vec!["fn src/x.rs:2 long_one: 121 lines (at most 120)".to_string()]);
    }

    #[test]
    fn braces_in_literals_and_comments_do_not_count() {
        for total in [15, 60] {
            let text = function("tricky", total);
            let code = code_lines(&text);
            assert_eq!(code.len(), total, "line numbers stay aligned");
            let opens: usize = code.iter().map(|l| l.matches('{').count()).sum();
            let closes: usize = code.iter().map(|l| l.matches('}').count()).sum();
            assert_eq!(opens, closes, "{code:#?}");
            assert_eq!(long_fns_in(&text, total - 1), vec![(1, "tricky".to_string(), total)]);
            assert_eq!(long_fns_in(&text, total), vec![]);
        }
    }

    #[test]
    fn test_code_declarations_and_qualifiers() {
        let body = "    let _x = 1;\n".repeat(130);
        let text = format!(
            "trait T {{\n    fn declared(&self);\n}}\nextern \"C\" fn c_abi() {{\n{body}}}\n\
             pub const unsafe fn q() {{ }}\n#[cfg(test)]\nmod tests {{\n    fn in_tests() {{\n{body}    }}\n}}\n"
        );
        assert_eq!(long_fns_in(&text, MAX_FN_LINES), vec![(4, "c_abi".to_string(), 132)]);
        assert_eq!(declared_fn("pub(in crate::x) async fn go() {").as_deref(), Some("go"));
        assert_eq!(declared_fn("let fnord = 1;"), None);
        assert_eq!(declared_fn("publish(fn_ptr);"), None);
    }

    #[test]
    fn files_over_800_lines_are_caught() {
        let (_d, src) = tree(&[("fits.rs", &"//\n".repeat(800)), ("big/mod.rs", &"//\n".repeat(801))]);
        assert_eq!(oversized(&src), vec!["file src/big/mod.rs: 801 lines (at most 800)".to_string()]);
    }
}
