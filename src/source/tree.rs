//! A source tree by content: its files read from a tar stream (git's archive, a tarball) or a
//! folder, its listing (format 1: one line per file, sorted, `file 644 <sha256> <path>`) and the
//! listing's sha256, which pins it; written into the cache under that hash. No git, no fetching.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::hash::sha256_hex;

/// One entry of a tree: a regular file (with whether it is executable) or a symbolic link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    File { executable: bool, data: Vec<u8> },
    Link { target: String },
}

/// A tree: entries by their `/`-separated relative path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    pub entries: BTreeMap<String, Entry>,
}

/// Why a tree could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("entry {path:?} {why}")]
    Refused { path: String, why: &'static str },
    #[error("nothing under {0:?} (no such folder in the tree)")]
    NoPath(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TreeError {
    let what = what.into();
    move |source| TreeError::Io { what, source }
}

/// A relative path as a tree keeps it, or why it is refused: absolute paths and `..` would
/// write outside the tree.
fn clean(path: &Path) -> Result<Option<String>, TreeError> {
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            _ => {
                return Err(TreeError::Refused {
                    path: path.display().to_string(),
                    why: "leaves the tree (absolute, or `..`)",
                })
            }
        }
    }
    Ok((!parts.is_empty()).then(|| parts.join("/")))
}

impl Tree {
    /// The entries of a tar stream under `prefix` (a `/`-separated folder, empty for all),
    /// re-rooted at it. Folders are implied by their files; device files, fifos and hard links
    /// are refused (no source needs them, and they would not hash as what they are).
    pub fn from_tar(reader: impl Read, prefix: &str) -> Result<Tree, TreeError> {
        let mut tree = Tree::default();
        let mut archive = tar::Archive::new(reader);
        for entry in archive.entries().map_err(io("read the archive"))? {
            let mut entry = entry.map_err(io("read the archive"))?;
            let raw = entry.path().map_err(io("read an archive entry's name"))?.into_owned();
            let Some(path) = clean(&raw)? else { continue };
            let Some(rel) = under(&path, prefix) else { continue };
            let kind = entry.header().entry_type();
            let e = if kind.is_file() {
                let mut data = Vec::with_capacity(entry.size() as usize);
                entry.read_to_end(&mut data).map_err(io(format!("read {path}")))?;
                let executable =
                    entry.header().mode().map_err(io(format!("read {path}'s mode")))? & 0o111 != 0;
                Entry::File { executable, data }
            } else if kind.is_symlink() {
                let target =
                    entry.link_name().map_err(io(format!("read {path}'s link")))?.unwrap_or_default();
                Entry::Link { target: target.to_string_lossy().into_owned() }
            } else if kind.is_dir() || kind.is_pax_global_extensions() || kind.is_pax_local_extensions() {
                continue;
            } else {
                return Err(TreeError::Refused { path, why: "is neither a file, a folder nor a link" });
            };
            tree.entries.insert(rel, e);
        }
        tree.require(prefix)
    }

    /// The files under `root` (a folder on this host), `.git` folders left out.
    pub fn from_dir(root: &Path) -> Result<Tree, TreeError> {
        let mut tree = Tree::default();
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            let dir = root.join(&rel);
            let mut names: Vec<_> = std::fs::read_dir(&dir)
                .map_err(io(format!("read {}", dir.display())))?
                .collect::<Result<_, _>>()
                .map_err(io(format!("read {}", dir.display())))?;
            names.sort_by_key(|e| e.file_name());
            for e in names {
                let name = e.file_name();
                if name == ".git" {
                    continue;
                }
                let rel = rel.join(&name);
                let full = root.join(&rel);
                let meta =
                    std::fs::symlink_metadata(&full).map_err(io(format!("read {}", full.display())))?;
                let key = clean(&rel)?.expect("a named entry");
                if meta.is_dir() {
                    stack.push(rel);
                } else if meta.file_type().is_symlink() {
                    let target = std::fs::read_link(&full).map_err(io(format!("read {}", full.display())))?;
                    tree.entries.insert(key, Entry::Link { target: target.to_string_lossy().into_owned() });
                } else if meta.is_file() {
                    use std::os::unix::fs::PermissionsExt;
                    let data = std::fs::read(&full).map_err(io(format!("read {}", full.display())))?;
                    tree.entries.insert(
                        key,
                        Entry::File { executable: meta.permissions().mode() & 0o111 != 0, data },
                    );
                } else {
                    return Err(TreeError::Refused {
                        path: key,
                        why: "is neither a file, a folder nor a link",
                    });
                }
            }
        }
        Ok(tree)
    }

    /// The tree re-rooted at `prefix`, or an error when nothing lies under it.
    pub fn subtree(self, prefix: &str) -> Result<Tree, TreeError> {
        let entries =
            self.entries.into_iter().filter_map(|(p, e)| under(&p, prefix).map(|r| (r, e))).collect();
        Tree { entries }.require(prefix)
    }

    fn require(self, prefix: &str) -> Result<Tree, TreeError> {
        if self.entries.is_empty() {
            return Err(TreeError::NoPath(prefix.to_string()));
        }
        Ok(self)
    }

    /// The listing, format 1: a line per entry in path order, `file 644|755 <sha256> <path>` or
    /// `link 777 <sha256 of the target> <path>`. Its sha256 is the tree's hash.
    pub fn listing(&self) -> String {
        let mut out = String::from("benchlab-tree 1\n");
        for (path, e) in &self.entries {
            let line = match e {
                Entry::File { executable, data } => {
                    format!("file {} {} {path}\n", if *executable { 755 } else { 644 }, sha256_hex(data))
                }
                Entry::Link { target } => format!("link 777 {} {path}\n", sha256_hex(target.as_bytes())),
            };
            out.push_str(&line);
        }
        out
    }

    pub fn sha256(&self) -> String {
        sha256_hex(self.listing().as_bytes())
    }

    /// How many entries, and their bytes (a link counts its target's length).
    pub fn size(&self) -> (u64, u64) {
        let bytes = self
            .entries
            .values()
            .map(|e| match e {
                Entry::File { data, .. } => data.len() as u64,
                Entry::Link { target } => target.len() as u64,
            })
            .sum();
        (self.entries.len() as u64, bytes)
    }

    /// Writes the tree into `dir` (which must not exist): files with their modes, links.
    pub fn write(&self, dir: &Path) -> Result<(), TreeError> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
        for (path, e) in &self.entries {
            let to = dir.join(path);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(io(format!("create {}", parent.display())))?;
            }
            match e {
                Entry::File { executable, data } => {
                    std::fs::write(&to, data).map_err(io(format!("write {}", to.display())))?;
                    let mode = if *executable { 0o755 } else { 0o644 };
                    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode))
                        .map_err(io(format!("set {}'s mode", to.display())))?;
                }
                Entry::Link { target } => {
                    std::os::unix::fs::symlink(target, &to).map_err(io(format!("link {}", to.display())))?
                }
            }
        }
        Ok(())
    }
}

/// `path` relative to `prefix` when it lies under it (the prefix itself is no entry).
fn under(path: &str, prefix: &str) -> Option<String> {
    if prefix.is_empty() {
        return Some(path.to_string());
    }
    path.strip_prefix(prefix).and_then(|r| r.strip_prefix('/')).filter(|r| !r.is_empty()).map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(entries: &[(&str, &[u8], u32)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data, mode) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(*mode);
            h.set_cksum();
            b.append_data(&mut h, name, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn a_tree_hashes_by_content_and_mode_whatever_the_order_it_was_read_in() {
        let a =
            Tree::from_tar(&tar_of(&[("s/a.py", b"print(1)\n", 0o644), ("s/run.sh", b"x", 0o755)])[..], "s")
                .unwrap();
        let b =
            Tree::from_tar(&tar_of(&[("s/run.sh", b"x", 0o700), ("s/a.py", b"print(1)\n", 0o600)])[..], "s")
                .unwrap();
        assert_eq!(a.sha256(), b.sha256(), "only the executable bit of a mode counts");
        assert_eq!(a.size(), (2, 10));
        assert!(a.listing().contains(&format!("file 755 {} run.sh\n", sha256_hex(b"x"))), "{}", a.listing());
        let c =
            Tree::from_tar(&tar_of(&[("s/a.py", b"print(2)\n", 0o644), ("s/run.sh", b"x", 0o755)])[..], "s")
                .unwrap();
        assert_ne!(a.sha256(), c.sha256(), "one byte changes the hash");
        let d =
            Tree::from_tar(&tar_of(&[("s/a.py", b"print(1)\n", 0o644), ("s/run.sh", b"x", 0o644)])[..], "s")
                .unwrap();
        assert_ne!(a.sha256(), d.sha256(), "so does the executable bit");
    }

    #[test]
    fn a_prefix_selects_and_reroots_and_a_missing_one_or_an_escape_is_refused() {
        let tar = tar_of(&[("s/a", b"1", 0o644), ("sx/b", b"2", 0o644), ("t/c", b"3", 0o644)]);
        let s = Tree::from_tar(&tar[..], "s").unwrap();
        assert_eq!(s.entries.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(Tree::from_tar(&tar[..], "").unwrap().entries.len(), 3);
        assert!(matches!(Tree::from_tar(&tar[..], "u"), Err(TreeError::NoPath(p)) if p == "u"));
        assert!(clean(Path::new("../etc/passwd")).is_err());
        assert!(clean(Path::new("/etc/passwd")).is_err());
        assert_eq!(clean(Path::new("./a/b")).unwrap().as_deref(), Some("a/b"));
    }

    #[test]
    fn a_folder_written_and_read_back_keeps_its_hash_and_leaves_git_out() {
        let d = tempfile::tempdir().unwrap();
        let tree = Tree::from_tar(
            &tar_of(&[("s/a/b.txt", b"hello", 0o644), ("s/run", b"#!/bin/sh\n", 0o755)])[..],
            "s",
        )
        .unwrap();
        let mut with_link = tree.clone();
        with_link.entries.insert("l".into(), Entry::Link { target: "a/b.txt".into() });
        with_link.write(&d.path().join("w")).unwrap();
        std::fs::create_dir_all(d.path().join("w/.git")).unwrap();
        std::fs::write(d.path().join("w/.git/HEAD"), "ref").unwrap();
        let back = Tree::from_dir(&d.path().join("w")).unwrap();
        assert_eq!(back, with_link);
        assert_eq!(back.clone().subtree("a").unwrap().entries.keys().collect::<Vec<_>>(), ["b.txt"]);
    }
}
