//! No crate of the workspace has an import loop between its modules.
//!
//! Which crates: every target of every workspace member, as `cargo metadata` lists them — each
//! library, binary, test, example and bench root (`src/lib.rs`, `cli/src/main.rs`,
//! `server/tests/it/main.rs`, …). The layers between the crates are the compiler's to hold (a crate
//! names only what it depends on, and Cargo refuses a dependency cycle); what it does not hold
//! is the order inside a crate, which this checks.
//!
//! Each crate is read from its root file by following its `mod` declarations, whatever
//! attributes they carry (`#[cfg(feature = …)]`, `#[cfg(test)]`); every file is a node, and
//! every path it names into its own crate — `use super::…`, `use crate::…`, `use self::…`, a
//! child module's name, groups (`use crate::{a::X, b::Y}`), re-exports (`pub(crate) use …`), and
//! the same paths written inline in code — is an edge to the file that path lands in. In each
//! crate the edges form a DAG; `crate::` means the crate's own root, and a path into another
//! crate (`carrier_server::…`) is no edge.
//!
//! Comments and string literals are skipped (a doc link names a type without depending on it),
//! and so is test code: an inline `#[cfg(test)] mod tests { … }` is built only into the crate's
//! tests, and may reach the code it tests any way a user would (the crate's facades included).
//! (A `#[cfg(test)] mod tests;` file would be a node that nothing imports, closing no loop; the
//! workspace writes its unit tests inline.) The checker reads the sources as rustfmt leaves them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// A module path below the crate root, e.g. `["registry", "router"]`; the root is `[]`.
type ModPath = Vec<String>;

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// One crate of the workspace: its package, its kind (`lib`, `bin`, `test`, …) and its root.
struct Target {
    package: String,
    kind: String,
    root: PathBuf,
}

/// Every member of the workspace: its folder and its targets, from `cargo metadata`.
fn members() -> Vec<(PathBuf, Vec<Target>)> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(workspace())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    packages
        .iter()
        .map(|package| {
            let name = package["name"].as_str().expect("name").to_string();
            let manifest = PathBuf::from(package["manifest_path"].as_str().expect("manifest"));
            let targets = package["targets"]
                .as_array()
                .expect("targets")
                .iter()
                .map(|target| Target {
                    package: name.clone(),
                    kind: target["kind"][0].as_str().expect("kind").to_string(),
                    root: PathBuf::from(target["src_path"].as_str().expect("src_path")),
                })
                .collect();
            let folder = manifest
                .parent()
                .expect("a manifest has a folder")
                .to_path_buf();
            (folder, targets)
        })
        .collect()
}

/// One crate's import graph and the files it is made of.
fn read_target(target: &Target) -> (BTreeMap<ModPath, BTreeSet<ModPath>>, Vec<PathBuf>) {
    let files = read_crate(&target.root);
    let paths = files.iter().map(|(_, file, _)| file.clone()).collect();
    let modules: Vec<(ModPath, String)> = files.into_iter().map(|(m, _, src)| (m, src)).collect();
    (import_graph(&modules), paths)
}

fn edges(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> usize {
    graph.values().map(BTreeSet::len).sum()
}

#[test]
fn every_crate_of_the_workspace_imports_its_modules_without_a_loop() {
    let mut libraries = BTreeMap::new();
    let mut loops = Vec::new();
    let (mut crates, mut files, mut imports) = (0, 0, 0);
    for (_, targets) in members() {
        for target in &targets {
            let (graph, _) = read_target(target);
            if let Some(cycle) = find_cycle(&graph) {
                loops.push(format!(
                    "{} ({} {}): {}",
                    target.package,
                    target.kind,
                    target.root.display(),
                    show(&cycle)
                ));
            }
            crates += 1;
            files += graph.len();
            imports += edges(&graph);
            if target.kind == "lib" {
                libraries.insert(target.package.clone(), graph.len());
            }
        }
    }
    assert!(loops.is_empty(), "import loops:\n{}", loops.join("\n"));
    // The layers, each a library of its own, all read.
    for (package, at_least) in [
        ("carrier-protocol", 15),
        ("carrier-discovery", 4),
        ("carrier-server", 40),
        ("carrier-agent", 30),
        ("carrier-client", 25),
        ("carrier-robota", 6),
        ("carrier-acp", 10),
        ("carrier-cli", 10),
    ] {
        let read = libraries.get(package).copied().unwrap_or(0);
        assert!(
            read >= at_least,
            "{package}: {read} files read, expected {at_least} or more"
        );
    }
    assert!(crates > 40, "expected every target, found {crates}");
    assert!(files > 250, "expected the workspace's files, found {files}");
    assert!(imports > 400, "expected the imports, found {imports}");
}

#[test]
fn every_source_file_is_a_module_of_a_checked_crate() {
    let members = members();
    let folders: Vec<PathBuf> = members.iter().map(|(folder, _)| folder.clone()).collect();
    let mut read = BTreeSet::new();
    let mut on_disk = BTreeSet::new();
    for (folder, targets) in &members {
        for target in targets {
            read.extend(read_target(target).1);
        }
        rust_files(folder, folder, &folders, &mut on_disk);
    }
    let missed: Vec<_> = on_disk.difference(&read).collect();
    assert!(missed.is_empty(), "files no crate declares: {missed:?}");
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
                "    use crate::server::a::Z;\n",
                "\n",
                "    mod nested {\n",
                "        use crate::server::a::W;\n",
                "    }\n",
                "}\n",
                "#[cfg(test)] mod more_tests {\n",
                "    fn f() { super::super::a::g(); }\n",
                "}\n",
            ),
        ),
    ];
    let graph = import_graph(&files);
    assert_eq!(find_cycle(&graph), None);
    assert_eq!(graph[&path("server::b")], BTreeSet::new());
}

#[test]
fn the_checker_finds_a_loop_inside_agent_through_a_crate_group() {
    // The circle the agent had: the hub starts turns, and a turn's sink held the hub.
    let files = vec![
        file("", "pub mod agent;\npub mod server;\n"),
        file(
            "agent",
            "mod hub;\nmod turn;\npub(crate) use turn::TurnSink;\n",
        ),
        file(
            "agent::hub",
            "use crate::{agent::turn::TurnSink, server::Connection};\n",
        ),
        file(
            "agent::turn",
            "pub struct TurnSink { hub: Weak<crate::agent::hub::SessionHub> }\n",
        ),
        file("server", "pub struct Connection;\n"),
    ];
    let graph = import_graph(&files);
    assert_eq!(
        graph[&path("agent::hub")],
        BTreeSet::from([path("agent::turn"), path("server")])
    );
    let cycle = find_cycle(&graph).expect("hub → turn → hub is a loop");
    assert_eq!(show(&cycle), "agent::turn → agent::hub → agent::turn");
}

#[test]
fn the_checker_finds_a_loop_inside_the_cli_crate() {
    // `crate::` is the CLI's own root; `carrier::client` is the library, another crate.
    let files = vec![
        file("", "pub mod client;\npub mod serve;\n"),
        file("client", "mod send;\nuse carrier::client::Client;\n"),
        file("client::send", "use crate::serve::ServeArgs;\n"),
        file("serve", "pub(crate) use crate::client::send::send_with;\n"),
    ];
    let graph = import_graph(&files);
    assert_eq!(graph[&path("client")], BTreeSet::new());
    let cycle = find_cycle(&graph).expect("client::send → serve → client::send is a loop");
    assert_eq!(show(&cycle), "client::send → serve → client::send");
}

#[test]
fn the_reader_follows_mod_declarations_whatever_their_attributes() {
    let src = concat!(
        "//! mod not_this;\n",
        "pub mod agent;\n",
        "#[cfg(feature = \"client\")]\n",
        "pub mod client;\n",
        "#[cfg(feature = \"client\")] pub(crate) mod inline_attr;\n",
        "#[doc(hidden)]\n",
        "pub mod bench_support;\n",
        "#[cfg(test)]\n",
        "mod tests;\n",
        "mod inline {\n",
        "    fn f() {}\n",
        "}\n",
    );
    assert_eq!(
        mods_declared(src),
        ["agent", "client", "inline_attr", "bench_support", "tests"]
    );
}

fn file(module: &str, src: &str) -> (ModPath, String) {
    (path(module), src.to_string())
}

fn path(module: &str) -> ModPath {
    if module.is_empty() {
        return Vec::new();
    }
    module.split("::").map(str::to_string).collect()
}

fn show(cycle: &[ModPath]) -> String {
    cycle
        .iter()
        .map(|m| {
            if m.is_empty() {
                "crate".to_string()
            } else {
                m.join("::")
            }
        })
        .collect::<Vec<_>>()
        .join(" → ")
}

/// Every module file of the crate whose root file is `root`, found by following `mod name;`
/// declarations, each with its module path, its file and its source.
fn read_crate(root: &Path) -> Vec<(ModPath, PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![(Vec::new(), root.to_path_buf())];
    while let Some((module, file)) = stack.pop() {
        let src = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        // A crate root or a `mod.rs` keeps its children beside it; `a.rs` keeps them in `a/`.
        let dir = match file.file_name().and_then(|n| n.to_str()) {
            _ if module.is_empty() => file.parent().map(Path::to_path_buf),
            Some("mod.rs") => file.parent().map(Path::to_path_buf),
            _ => Some(file.with_extension("")),
        }
        .expect("a source file has a folder");
        let moved = path_attributes(&src);
        for name in mods_declared(&src) {
            let flat = dir.join(format!("{name}.rs"));
            let nested = dir.join(&name).join("mod.rs");
            // `#[path]` is relative to the folder of the file that declares the module, as
            // rustc resolves it outside inline modules (for a crate root or a `mod.rs`, the
            // folder its children are in; for `a/b.rs`, `a/`).
            let child = match moved.get(&name) {
                Some(path) => file.parent().map(|p| p.join(path)).unwrap_or_default(),
                None if flat.is_file() => flat,
                None => nested,
            };
            assert!(
                child.is_file(),
                "{} declares mod {name}, which has no file",
                file.display()
            );
            let mut child_module = module.clone();
            child_module.push(name);
            stack.push((child_module, child));
        }
        out.push((module, file, src));
    }
    out.sort();
    out
}

/// The file modules `src` declares (`mod name;`, with any visibility and attributes); inline
/// modules (`mod name { … }`) are part of their file.
fn mods_declared(src: &str) -> Vec<String> {
    let toks = tokens(&strip_comments_and_literals(src));
    toks.windows(3)
        .filter_map(|w| match (&w[0].1, &w[1].1, &w[2].1) {
            (Tok::Ident(m), Tok::Ident(name), Tok::Punct(';')) if m == "mod" => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// The modules `src` declares with a `#[path = "…"]` attribute (a test that compiles an
/// example as one of its modules), with that path.
fn path_attributes(src: &str) -> BTreeMap<String, String> {
    let mut moved = BTreeMap::new();
    let mut pending = None;
    for line in src.lines() {
        let t = line.trim();
        if let Some(path) = t
            .strip_prefix("#[path = \"")
            .and_then(|rest| rest.strip_suffix("\"]"))
        {
            pending = Some(path.to_string());
        } else if t.starts_with("#[") || t.starts_with("//") {
            continue;
        } else if let Some(path) = pending.take() {
            let decl = t.rsplit_once("mod ").map(|(_, name)| name);
            if let Some(name) = decl.and_then(|name| name.strip_suffix(';')) {
                moved.insert(name.trim().to_string(), path);
            }
        }
    }
    moved
}

/// Every `.rs` file of the package whose folder is `package`, under `dir`: not in another
/// package's folder (a workspace member's, or a package of its own such as a bench baseline or
/// the fuzz targets), the build output or the JavaScript package's dependencies.
fn rust_files(package: &Path, dir: &Path, members: &[PathBuf], out: &mut BTreeSet<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source directory") {
        let p = entry.expect("directory entry").path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if p.is_dir() {
            let another_package =
                p != package && (members.contains(&p) || p.join("Cargo.toml").is_file());
            if !(another_package
                || name.starts_with('.')
                || name == "target"
                || name == "node_modules")
            {
                rust_files(package, &p, members, out);
            }
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.insert(p);
        }
    }
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
/// when it leaves the crate (std, other crates).
fn resolve(here: &ModPath, path: &[String], known: &BTreeSet<ModPath>) -> Option<ModPath> {
    let mut segs = path.iter().peekable();
    let mut cur = here.clone();
    match segs.peek().map(|s| s.as_str()) {
        Some("crate") => {
            segs.next();
            cur = Vec::new();
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
    (0..=module.len())
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
        let Some(Scope {
            modules: scope,
            test: false,
        }) = scopes.get(*line).cloned()
        else {
            // Test code is no part of the graph (see the module docs).
            i += 1;
            continue;
        };
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

/// Where a line is: the inline modules (`mod x { … }`) it is written in, and whether one of
/// them is a `#[cfg(test)]` module.
#[derive(Debug, Clone, Default)]
struct Scope {
    modules: Vec<String>,
    test: bool,
}

/// For each line, its [`Scope`]. rustfmt indents an inline module's body and closes it with a
/// `}` at the module's own indentation, and puts each attribute on a line of its own (the
/// checker also takes one written before `mod` on the same line).
fn inline_scopes(code: &str) -> Vec<Scope> {
    // Each open module: its indentation, its name, whether it is test code.
    let mut open: Vec<(usize, String, bool)> = Vec::new();
    let scope = |open: &[(usize, String, bool)]| Scope {
        modules: open.iter().map(|(_, n, _)| n.clone()).collect(),
        test: open.iter().any(|(_, _, test)| *test),
    };
    let mut out = Vec::new();
    let mut cfg_test = false;
    for line in code.lines() {
        let indent = line.len() - line.trim_start().len();
        let mut t = line.trim();
        if t == "}" && open.last().is_some_and(|(i, _, _)| *i == indent) {
            out.push(scope(&open));
            open.pop();
            continue;
        }
        out.push(scope(&open));
        // Attributes (`#[cfg(test)]`) before an item, on its line or the lines above.
        let mut attributes_only = false;
        while let Some(rest) = t.strip_prefix("#[") {
            cfg_test |= rest.starts_with("cfg(test)]");
            match rest.split_once(']') {
                Some((_, after)) => t = after.trim_start(),
                None => t = "",
            }
            attributes_only = t.is_empty();
        }
        if attributes_only {
            continue;
        }
        let decl = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        if let Some(rest) = decl.strip_prefix("mod ") {
            if let Some(name) = rest.strip_suffix('{') {
                open.push((indent, name.trim().to_string(), cfg_test));
            }
        }
        if !t.is_empty() {
            cfg_test = false;
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
