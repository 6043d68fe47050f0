//! The server's modules import one another without a loop (issue 13): every file of
//! `src/server/` is a node, every path it names into the server — `use super::…`,
//! `use crate::server::…`, `use self::…`, a child module's name, and the same paths written
//! inline in code — is an edge to the file that path lands in, and the edges form a DAG.
//!
//! Comments and string literals are skipped (a doc link names a type without depending on it);
//! inside an inline `mod tests { … }` a `super::` means the file itself, so `use super::*` in a
//! test module is no edge. The checker reads the sources as rustfmt leaves them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path below the crate root, e.g. `["server", "registry", "router"]`.
type ModPath = Vec<String>;

#[test]
fn server_modules_import_each_other_without_a_loop() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = read_tree(&root.join("server"), &root);
    assert!(
        files.len() > 20,
        "expected the server's files, found {}",
        files.len()
    );
    let graph = import_graph(&files);
    let edges: usize = graph.values().map(BTreeSet::len).sum();
    assert!(edges > 40, "expected the server's imports, found {edges}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("import loop in src/server: {}", show(&cycle));
    }
}

#[test]
fn the_checker_finds_a_loop_through_a_use_and_an_inline_path() {
    let files = vec![
        file("server", "mod a;\nmod b;\n"),
        file("server::a", "use super::b::Thing;\n"),
        file("server::b", "fn f() { crate::server::a::g(); }\n"),
    ];
    let cycle = find_cycle(&import_graph(&files)).expect("a → b → a is a loop");
    assert_eq!(show(&cycle), "server::a → server::b → server::a");
}

#[test]
fn the_checker_finds_a_loop_through_a_facade_and_a_group() {
    let files = vec![
        file("server", "mod reg;\n"),
        file(
            "server::reg",
            "mod map;\nmod router;\npub use router::route;\n",
        ),
        file("server::reg::map", "fn m() {}\n"),
        file(
            "server::reg::router",
            "use super::{map::ChannelMap, ChannelRegistry};\n",
        ),
    ];
    let cycle = find_cycle(&import_graph(&files)).expect("reg → router → reg is a loop");
    assert_eq!(
        show(&cycle),
        "server::reg → server::reg::router → server::reg"
    );
}

#[test]
fn the_checker_ignores_comments_strings_and_test_modules() {
    let files = vec![
        file("server", "mod a;\nmod b;\n"),
        file("server::a", "use super::b::Thing;\n"),
        file(
            "server::b",
            concat!(
                "//! See [`super::a::X`].\n",
                "const S: &str = \"super::a::Y\";\n",
                "const R: &str = r#\"crate::server::a::Z\"#;\n",
                "fn f<'a>(c: char) -> bool { c == 'x' }\n",
                "#[cfg(test)]\n",
                "mod tests {\n",
                "    use super::*;\n",
                "}\n",
            ),
        ),
    ];
    let graph = import_graph(&files);
    assert_eq!(find_cycle(&graph), None);
    assert_eq!(graph[&path("server::b")], BTreeSet::new());
}

fn file(module: &str, src: &str) -> (ModPath, String) {
    (path(module), src.to_string())
}

fn path(module: &str) -> ModPath {
    module.split("::").map(str::to_string).collect()
}

fn show(cycle: &[ModPath]) -> String {
    cycle
        .iter()
        .map(|m| m.join("::"))
        .collect::<Vec<_>>()
        .join(" → ")
}

/// Every `.rs` file under `dir`, with its module path relative to the crate root `root`.
fn read_tree(dir: &Path, root: &Path) -> Vec<(ModPath, String)> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("readable source directory") {
            let p = entry.expect("directory entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p.strip_prefix(root).expect("under src/").with_extension("");
                let mut module: ModPath = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if module.last().is_some_and(|m| m == "mod") {
                    module.pop();
                }
                let src = std::fs::read_to_string(&p).expect("readable source file");
                out.push((module, src));
            }
        }
    }
    out.sort();
    out
}

/// File → the files it imports from (never itself).
fn import_graph(files: &[(ModPath, String)]) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let known: BTreeSet<ModPath> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = BTreeMap::new();
    for (module, src) in files {
        let mut targets = BTreeSet::new();
        for (scope, path) in paths_named(src) {
            let mut here = module.clone();
            here.extend(scope);
            if let Some(target) = resolve(&here, &path, &known) {
                if &target != module {
                    targets.insert(target);
                }
            }
        }
        graph.insert(module.clone(), targets);
    }
    graph
}

/// Where `path`, written in module `here`, lands: the deepest file module it names, or `None`
/// when it leaves the server (std, other crates, `crate::protocol`).
fn resolve(here: &ModPath, path: &[String], known: &BTreeSet<ModPath>) -> Option<ModPath> {
    let mut segs = path.iter().peekable();
    let mut cur = here.clone();
    match segs.peek().map(|s| s.as_str()) {
        Some("crate") => {
            segs.next();
            if segs.next().map(String::as_str) != Some("server") {
                return None;
            }
            cur = vec!["server".to_string()];
        }
        Some("super") | Some("self") => {
            while let Some(s) = segs.peek() {
                match s.as_str() {
                    "super" => {
                        cur.pop()?;
                    }
                    "self" => {}
                    _ => break,
                }
                segs.next();
            }
        }
        Some(first) => {
            // A child module named without `self::` (2018 paths); anything else is external.
            let mut child = deepest_file(&cur, known)?;
            child.push(first.to_string());
            if !known.contains(&child) {
                return None;
            }
            segs.next();
            cur = child;
        }
        None => return None,
    }
    for s in segs {
        let mut next = cur.clone();
        next.push(s.clone());
        if known.contains(&next) {
            cur = next;
        } else {
            break;
        }
    }
    deepest_file(&cur, known)
}

/// The longest prefix of `module` that is a file (an inline module belongs to its file).
fn deepest_file(module: &ModPath, known: &BTreeSet<ModPath>) -> Option<ModPath> {
    (1..=module.len())
        .rev()
        .map(|n| module[..n].to_vec())
        .find(|m| known.contains(m))
}

/// A loop in `graph`, as the nodes along it with the first repeated at the end.
fn find_cycle(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Option<Vec<ModPath>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &ModPath,
        graph: &BTreeMap<ModPath, BTreeSet<ModPath>>,
        marks: &mut BTreeMap<ModPath, Mark>,
        trail: &mut Vec<ModPath>,
    ) -> Option<Vec<ModPath>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = trail.iter().position(|n| n == node)?;
                let mut cycle = trail[from..].to_vec();
                cycle.push(node.clone());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.clone(), Mark::Open);
        trail.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, marks, trail) {
                return Some(cycle);
            }
        }
        trail.pop();
        marks.insert(node.clone(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, graph, &mut marks, &mut Vec::new()) {
            return Some(cycle);
        }
    }
    None
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
}

/// Every module path `src` names, each with the inline modules (`mod x { … }`) it is written
/// in: the paths of `use` items, flattened, and the paths written inline in code that start at
/// `crate`, `super`, `self` or a plain name (filtered later by [`resolve`]).
fn paths_named(src: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let code = strip_comments_and_literals(src);
    let scopes = inline_scopes(&code);
    let toks = tokens(&code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let (line, tok) = &toks[i];
        let scope = scopes.get(*line).cloned().unwrap_or_default();
        match tok {
            Tok::Ident(w) if w == "use" => {
                let mut paths = Vec::new();
                i = use_tree(&toks, i + 1, Vec::new(), &mut paths);
                out.extend(paths.into_iter().map(|p| (scope.clone(), p)));
            }
            Tok::Ident(w) if matches!(toks.get(i + 1), Some((_, Tok::PathSep))) => {
                // An inline path `a::b::c`, unless it continues one (`x::a::b`).
                let continues = i > 0 && matches!(toks[i - 1].1, Tok::PathSep);
                let mut path = vec![w.clone()];
                let mut j = i + 1;
                while let (Some((_, Tok::PathSep)), Some((_, Tok::Ident(s)))) =
                    (toks.get(j), toks.get(j + 1))
                {
                    path.push(s.clone());
                    j += 2;
                }
                if !continues {
                    out.push((scope, path));
                }
                i = j;
            }
            _ => i += 1,
        }
    }
    out
}

/// Parses a use tree from `toks[i]`, pushing each flattened path (`*` for a glob) onto `out`.
/// Returns the index after the tree (after the `;` at the top level).
fn use_tree(
    toks: &[(usize, Tok)],
    mut i: usize,
    prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let mut path = prefix;
    if matches!(toks.get(i), Some((_, Tok::PathSep))) {
        // `use ::std::…`: an external crate.
        while i < toks.len() && toks[i].1 != Tok::Punct(';') {
            i += 1;
        }
        return i + 1;
    }
    loop {
        match toks.get(i).map(|t| &t.1) {
            Some(Tok::Ident(s)) if s == "as" => {
                i += 2; // the alias
            }
            Some(Tok::Ident(s)) => {
                if s != "self" || path.is_empty() {
                    path.push(s.clone());
                }
                i += 1;
            }
            Some(Tok::PathSep) => i += 1,
            Some(Tok::Punct('*')) => {
                path.push("*".to_string());
                i += 1;
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                loop {
                    i = use_tree(toks, i, path.clone(), out);
                    match toks.get(i.saturating_sub(1)).map(|t| &t.1) {
                        Some(Tok::Punct('}')) | None => break,
                        _ => {}
                    }
                }
                // After the group: `;` (top level), `,` or `}` (nested).
                return match toks.get(i).map(|t| &t.1) {
                    Some(Tok::Punct(';' | ',' | '}')) => i + 1,
                    _ => i,
                };
            }
            Some(Tok::Punct(';' | ',' | '}')) | None => {
                if !path.is_empty() {
                    out.push(path);
                }
                return i + 1;
            }
            Some(Tok::Punct(_)) => i += 1,
        }
    }
}

/// Identifiers, `::` and single punctuation, each with its line number.
fn tokens(code: &str) -> Vec<(usize, Tok)> {
    let mut out = Vec::new();
    for (line, text) in code.lines().enumerate() {
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c.is_alphanumeric() || c == '_' {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                out.push((line, Tok::Ident(chars[start..i].iter().collect())));
            } else if c == ':' && chars.get(i + 1) == Some(&':') {
                out.push((line, Tok::PathSep));
                i += 2;
            } else {
                if !c.is_whitespace() {
                    out.push((line, Tok::Punct(c)));
                }
                i += 1;
            }
        }
    }
    out
}

/// For each line, the inline modules it is written in. rustfmt indents an inline module's
/// body and closes it with a `}` at the module's own indentation.
fn inline_scopes(code: &str) -> Vec<Vec<String>> {
    let mut open: Vec<(usize, String)> = Vec::new();
    let mut out = Vec::new();
    for line in code.lines() {
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if t == "}" && open.last().is_some_and(|(i, _)| *i == indent) {
            out.push(open.iter().map(|(_, n)| n.clone()).collect());
            open.pop();
            continue;
        }
        out.push(open.iter().map(|(_, n)| n.clone()).collect());
        let decl = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        if let Some(rest) = decl.strip_prefix("mod ") {
            if let Some(name) = rest.strip_suffix('{') {
                open.push((indent, name.trim().to_string()));
            }
        }
    }
    out
}

/// `src` with comments and the contents of string and char literals blanked out, keeping
/// every line break, so a path in a doc comment or a string is no import.
fn strip_comments_and_literals(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let prev_ident = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if !prev_ident && (c[i] == 'r' || (c[i] == 'b' && c.get(i + 1) == Some(&'r'))) && {
            let mut j = i + if c[i] == 'b' { 2 } else { 1 };
            while c.get(j) == Some(&'#') {
                j += 1;
            }
            c.get(j) == Some(&'"')
        } {
            // A raw string: r"…", r#"…"#, br"…".
            i += if c[i] == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while c[i] == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
            out.push_str("\"\"");
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime ('a), which stays.
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}
