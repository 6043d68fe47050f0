//! Generated files against the disk: writing a set of them, and comparing a set with what is
//! on disk (stale, missing, unexpected). The protocol crate only returns their text.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};

/// Which other files in a set's directory belong to the set, so that one this build no longer
/// generates shows up as unexpected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strays {
    /// None: the directory holds other files too (a `.d.ts` file beside hand-written ones).
    None,
    /// Every file: the directory is the set's alone (`schemas/`).
    AnyFile,
    /// The files that begin with this marker (the JavaScript package's generated files, which
    /// share their directory with hand-written modules).
    MarkedWith(&'static str),
}

/// Files one generator defines, all in one directory.
#[derive(Debug, Clone)]
pub(crate) struct FileSet {
    /// What they are, for messages ("the JSON Schemas").
    pub(crate) what: &'static str,
    /// Where they go.
    pub(crate) dir: PathBuf,
    /// File name → contents.
    pub(crate) files: BTreeMap<String, String>,
    /// Which other files of `dir` count as the set's.
    pub(crate) strays: Strays,
}

impl FileSet {
    fn paths(&self) -> impl Iterator<Item = (PathBuf, &str)> {
        self.files
            .iter()
            .map(|(name, text)| (self.dir.join(name), text.as_str()))
    }
}

/// A file that could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub(crate) struct FileError {
    /// The file or directory.
    pub(crate) path: PathBuf,
    /// What went wrong.
    pub(crate) source: io::Error,
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> FileError + '_ {
    move |source| FileError {
        path: path.to_owned(),
        source,
    }
}

/// The text of the file at `path` (a hand-written file that a set fills in).
pub(crate) fn read(path: &Path) -> Result<String, FileError> {
    std::fs::read_to_string(path).map_err(at(path))
}

/// Writes every file of `set`, creating its directory unless the set is a single file beside
/// others ([`Strays::None`]), and returns how many it wrote. Files it does not define are left
/// alone ([`check`] reports them).
pub(crate) fn write(set: &FileSet) -> Result<usize, FileError> {
    if set.strays != Strays::None {
        std::fs::create_dir_all(&set.dir).map_err(at(&set.dir))?;
    }
    for (path, text) in set.paths() {
        std::fs::write(&path, text).map_err(at(&path))?;
    }
    Ok(set.files.len())
}

/// How the files on disk differ from a set.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Drift {
    /// Files whose contents differ.
    pub(crate) stale: Vec<PathBuf>,
    /// Files the set defines that are absent.
    pub(crate) missing: Vec<PathBuf>,
    /// Files of the set's directory that count as the set's ([`Strays`]) but that no set of
    /// this run defines.
    pub(crate) unexpected: Vec<PathBuf>,
}

impl Drift {
    /// True when the disk matches.
    pub(crate) fn is_empty(&self) -> bool {
        self.stale.is_empty() && self.missing.is_empty() && self.unexpected.is_empty()
    }
}

impl fmt::Display for Drift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (label, paths) in [
            ("stale", &self.stale),
            ("missing", &self.missing),
            ("unexpected", &self.unexpected),
        ] {
            for p in paths {
                write!(f, "\n  {label}: {}", p.display())?;
            }
        }
        Ok(())
    }
}

/// Compares `set` with the disk. `defined` holds every path the run generates (all sets), so a
/// file of another set sharing the directory is not unexpected. A missing directory counts as
/// every file missing.
pub(crate) fn check(set: &FileSet, defined: &BTreeSet<PathBuf>) -> Result<Drift, FileError> {
    let mut drift = Drift::default();
    for (path, text) in set.paths() {
        match std::fs::read(&path) {
            Ok(actual) if actual == text.as_bytes() => {}
            Ok(_) => drift.stale.push(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => drift.missing.push(path),
            Err(e) => return Err(at(&path)(e)),
        }
    }
    if set.strays == Strays::None {
        return Ok(drift);
    }
    let entries = match std::fs::read_dir(&set.dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(drift),
        Err(e) => return Err(at(&set.dir)(e)),
    };
    for entry in entries {
        let path = entry.map_err(at(&set.dir))?.path();
        if defined.contains(&path) || !path.is_file() {
            continue;
        }
        let ours = match set.strays {
            Strays::None => false,
            Strays::AnyFile => true,
            Strays::MarkedWith(marker) => begins_with(&path, marker).map_err(at(&path))?,
        };
        if ours {
            drift.unexpected.push(path);
        }
    }
    drift.unexpected.sort();
    Ok(drift)
}

/// Whether the file at `path` begins with `marker` (reading no more than its length).
fn begins_with(path: &Path, marker: &str) -> io::Result<bool> {
    let mut head = Vec::with_capacity(marker.len());
    std::fs::File::open(path)?
        .take(marker.len() as u64)
        .read_to_end(&mut head)?;
    Ok(head == marker.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(dir: &Path, strays: Strays) -> FileSet {
        FileSet {
            what: "test files",
            dir: dir.to_owned(),
            files: BTreeMap::from([
                ("a.json".to_owned(), "{}\n".to_owned()),
                ("b.json".to_owned(), "[]\n".to_owned()),
            ]),
            strays,
        }
    }

    fn defined(sets: &[&FileSet]) -> BTreeSet<PathBuf> {
        sets.iter()
            .flat_map(|s| s.paths().map(|(p, _)| p))
            .collect()
    }

    #[test]
    fn write_then_check_passes_and_detects_drift() {
        let dir = tempfile::tempdir().unwrap();
        let schemas = set(&dir.path().join("schemas"), Strays::AnyFile);
        let all = defined(&[&schemas]);
        assert_eq!(write(&schemas).unwrap(), 2);
        assert_eq!(check(&schemas, &all).unwrap(), Drift::default());

        std::fs::write(schemas.dir.join("a.json"), "{\"x\":1}\n").unwrap();
        std::fs::remove_file(schemas.dir.join("b.json")).unwrap();
        std::fs::write(schemas.dir.join("old.json"), "{}").unwrap();
        let drift = check(&schemas, &all).unwrap();
        assert_eq!(drift.stale, [schemas.dir.join("a.json")]);
        assert_eq!(drift.missing, [schemas.dir.join("b.json")]);
        assert_eq!(drift.unexpected, [schemas.dir.join("old.json")]);
        assert!(drift.to_string().contains("\n  unexpected: "));
    }

    #[test]
    fn only_marked_files_are_unexpected_in_a_shared_directory() {
        let dir = tempfile::tempdir().unwrap();
        let tables = set(dir.path(), Strays::MarkedWith("// GENERATED"));
        let beside = FileSet {
            what: "a file of another set",
            dir: dir.path().to_owned(),
            files: BTreeMap::from([("wire.d.ts".to_owned(), "// GENERATED x\n".to_owned())]),
            strays: Strays::None,
        };
        let all = defined(&[&tables, &beside]);
        write(&tables).unwrap();
        write(&beside).unwrap();
        std::fs::write(dir.path().join("client.js"), "export {};\n").unwrap();
        assert!(check(&tables, &all).unwrap().is_empty());

        std::fs::write(dir.path().join("old.js"), "// GENERATED old\n").unwrap();
        let drift = check(&tables, &all).unwrap();
        assert_eq!(drift.unexpected, [dir.path().join("old.js")]);
        // Without the other set in this run, its file is not accounted for either.
        let drift = check(&tables, &defined(&[&tables])).unwrap();
        assert_eq!(
            drift.unexpected,
            [dir.path().join("old.js"), dir.path().join("wire.d.ts")]
        );
    }

    #[test]
    fn a_missing_directory_is_every_file_missing() {
        let dir = tempfile::tempdir().unwrap();
        let schemas = set(&dir.path().join("nowhere"), Strays::AnyFile);
        let drift = check(&schemas, &defined(&[&schemas])).unwrap();
        assert_eq!(drift.missing.len(), 2);
        assert!(drift.stale.is_empty() && drift.unexpected.is_empty());
    }
}
