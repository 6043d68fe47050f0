//! The protocol crate promises no I/O: no files, no sockets, no processes, no writes to a
//! stream. This reads every source file of `protocol/src` (its unit tests included) and fails
//! on any use of them outside comments. Generated files are text the crate returns; `carrier
//! schema` writes them.
//!
//! A test rather than a CI grep: `cargo test -p carrier-protocol` runs it wherever the crate is
//! built, its scanner has tests of its own, and it skips what comments (and doc examples) say.

use std::path::{Path, PathBuf};

/// What the crate must not use. A name that starts with an identifier character only matches
/// at the start of a word (`fs::` is not `OutputFs::`).
const FORBIDDEN: &[&str] = &[
    "std::fs",
    "fs::",
    "File::",
    "OpenOptions",
    "std::io::Write",
    "io::Write",
    "write_all",
    "io::stdout",
    "io::stderr",
    "io::stdin",
    "print!",
    "println!",
    "eprint!",
    "eprintln!",
    "dbg!",
    "std::net",
    "TcpStream",
    "UdpSocket",
    "std::process",
];

/// `source` with every comment blanked out (string and char literals kept, so a `//` inside a
/// string does not hide the code after it). Line breaks are kept for line numbers.
fn without_comments(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    let at = |i: usize, text: &str| {
        text.chars()
            .enumerate()
            .all(|(k, c)| chars.get(i + k) == Some(&c))
    };
    while i < chars.len() {
        if at(i, "//") {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if at(i, "/*") {
            // Block comments nest in Rust.
            let mut depth = 0;
            while i < chars.len() {
                if at(i, "/*") {
                    depth += 1;
                    i += 2;
                } else if at(i, "*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if let Some(end) = raw_string_end(&chars, i) {
            out.extend(&chars[i..end]);
            i = end;
        } else if chars[i] == '"' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i = (i + 1).min(chars.len());
            out.extend(&chars[start..i]);
        } else if chars[i] == '\'' {
            // A char literal ('"', '\'', '\n') or a lifetime ('a).
            let end = match (chars.get(i + 1), chars.get(i + 2)) {
                (Some('\\'), _) => chars[i + 2..]
                    .iter()
                    .position(|&c| c == '\'')
                    .map(|p| i + 3 + p),
                (Some(_), Some('\'')) => Some(i + 3),
                _ => None,
            };
            let end = end.unwrap_or(i + 1).min(chars.len());
            out.extend(&chars[i..end]);
            i = end;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Where the raw string (`r"…"`, `r#"…"#`, `br#"…"#`) starting at `i` ends, if one does.
fn raw_string_end(chars: &[char], i: usize) -> Option<usize> {
    let previous_is_word = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if previous_is_word || chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|&&c| c == '#').count();
    j += hashes;
    if chars.get(j) != Some(&'"') {
        return None;
    }
    let close: Vec<char> = std::iter::once('"')
        .chain(std::iter::repeat_n('#', hashes))
        .collect();
    let body = j + 1;
    let end = (body..chars.len())
        .find(|&k| chars[k..].starts_with(&close))
        .map_or(chars.len(), |k| k + close.len());
    Some(end)
}

/// Every `(line, forbidden name)` in `source` outside comments.
fn io_uses(source: &str) -> Vec<(usize, &'static str)> {
    let code = without_comments(source);
    let mut found = Vec::new();
    for (number, line) in code.lines().enumerate() {
        for &name in FORBIDDEN {
            let word = name.starts_with(|c: char| c.is_alphanumeric() || c == '_');
            let hit = line.match_indices(name).any(|(at, _)| {
                !word
                    || !line[..at]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if hit {
                found.push((number + 1, name));
            }
        }
    }
    found
}

fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

#[test]
fn the_protocol_crate_uses_no_files_sockets_processes_or_stream_writes() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() >= 10, "{files:?}");
    let mut uses = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        for (line, name) in io_uses(&source) {
            uses.push(format!("{}:{line}: {name}", file.display()));
        }
    }
    assert!(
        uses.is_empty(),
        "the protocol crate does no I/O (generators return text; the CLI writes it):\n{}",
        uses.join("\n")
    );
}

#[test]
fn the_scan_finds_io_in_code_and_ignores_it_in_comments() {
    let source = r##"
        //! Doc: `std::fs::write` in a comment is fine.
        /* so is File::create /* nested */ println!("x") */
        fn text() -> &'static str { "a // not a comment" } fn f() { std::fs::write("a", "b"); }
        fn g(out: &mut impl io::Write) { out.write_all(b"x").unwrap(); }
        fn h() { let c = '"'; let s = r#"fs::"#; dbg!(c); }
        fn i() { let _ = OutputFs::new(); let _ = my_fs::read(); }
    "##;
    assert_eq!(
        io_uses(source),
        [
            (4, "std::fs"),
            (4, "fs::"),
            (5, "io::Write"),
            (5, "write_all"),
            (6, "fs::"),
            (6, "dbg!"),
        ]
    );
}
