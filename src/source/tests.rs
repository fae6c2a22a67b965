//! Sources fetched from a git repository the test makes (two commits), a folder and a tarball of
//! the same files: one content, one hash, whatever the origin; the cache; and each bad input
//! blamed on its key.

use std::path::Path;
use std::process::Command;

use super::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository with `srv/main.py` and an executable `srv/run.sh`, then a second commit that
/// changes main.py. Returns the two commits.
fn repo(dir: &Path) -> (String, String) {
    std::fs::create_dir_all(dir.join("srv")).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("srv/main.py"), "print('one')\n").unwrap();
    std::fs::write(dir.join("srv/run.sh"), "#!/bin/sh\nexec python3 main.py\n").unwrap();
    std::fs::write(dir.join("README"), "top\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("srv/run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(dir.join("srv/main.py"), std::fs::Permissions::from_mode(0o644)).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "one"]);
    let first = git(dir, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join("srv/main.py"), "print('two')\n").unwrap();
    git(dir, &["commit", "-q", "-am", "two"]);
    (first, git(dir, &["rev-parse", "HEAD"]))
}

fn at(url: &str, commit: &str, path: &str) -> ServerSource {
    ServerSource { origin: SourceOrigin::Git { url: url.into(), commit: commit.into() }, path: path.into() }
}

#[test]
fn a_commit_through_a_mirror_is_fetched_once_resolved_in_full_and_hashed_by_content() {
    let d = tempfile::tempdir().unwrap();
    let (one, two) = repo(&d.path().join("repo"));
    let cache = d.path().join("cache");
    let url = "https://example.invalid/lab/bench.git";
    let mirrors =
        Mirrors::parse(&[format!("{}={}", url.trim_end_matches(".git"), d.path().join("repo").display())])
            .unwrap();

    let a = fetch(&at(url, &one[..7], "srv"), d.path(), &mirrors, &cache).unwrap();
    assert!(!a.cached);
    assert_eq!(a.record.source, at(url, &one, "srv"), "the record keeps the URL and the full commit");
    assert_eq!((a.record.files, a.record.bytes), (2, 13 + 31));
    assert_eq!(std::fs::read_to_string(a.tree_dir.join("main.py")).unwrap(), "print('one')\n");
    assert!(!a.tree_dir.join("README").exists(), "only the path's folder");
    let listing = std::fs::read_to_string(&a.listing).unwrap();
    assert_eq!(crate::hash::sha256_hex(listing.as_bytes()), a.record.tree_sha256);
    assert!(listing.contains(" 755 ") && listing.ends_with(" run.sh\n"), "{listing}");

    let again = fetch(&at(url, &one, "srv"), d.path(), &mirrors, &cache).unwrap();
    assert!(again.cached, "a commit already fetched is read from the cache");
    assert_eq!(again.record, a.record);

    let b = fetch(&at(url, &two, "srv"), d.path(), &mirrors, &cache).unwrap();
    assert_ne!(b.record.tree_sha256, a.record.tree_sha256, "another commit, other content");
    let whole = fetch(&at(url, &two, ""), d.path(), &mirrors, &cache).unwrap();
    assert_eq!(whole.record.files, 3);
}

#[test]
fn a_folder_a_tarball_and_a_commit_with_the_same_files_have_the_same_hash() {
    let d = tempfile::tempdir().unwrap();
    let (_, two) = repo(&d.path().join("repo"));
    let cache = d.path().join("cache");
    let from_git = fetch(&at("repo", &two, "srv"), d.path(), &Mirrors::default(), &cache).unwrap();

    let dir = ServerSource { origin: SourceOrigin::Dir { dir: "repo".into() }, path: "srv".into() };
    let from_dir = fetch(&dir, d.path(), &Mirrors::default(), &cache).unwrap();
    assert_eq!(from_dir.record.tree_sha256, from_git.record.tree_sha256);
    assert!(!from_dir.cached, "a folder is read every time");

    // The same files as a .tar.gz made by tar, under a top folder as hosting sites make them.
    let tgz = d.path().join("src.tgz");
    let status = Command::new("tar")
        .current_dir(d.path())
        .args(["--exclude=.git", "-czf", "src.tgz", "repo"])
        .status()
        .unwrap();
    assert!(status.success());
    let sha = crate::hash::sha256_file(&tgz).unwrap();
    let tarball = |sha256: &str, path: &str| ServerSource {
        origin: SourceOrigin::Tarball { file: "src.tgz".into(), sha256: sha256.into() },
        path: path.into(),
    };
    let from_tar = fetch(&tarball(&sha, "repo/srv"), d.path(), &Mirrors::default(), &cache).unwrap();
    assert_eq!(from_tar.record.tree_sha256, from_git.record.tree_sha256);
    assert!(fetch(&tarball(&sha, "repo/srv"), d.path(), &Mirrors::default(), &cache).unwrap().cached);

    let wrong = "0".repeat(64);
    let e = fetch(&tarball(&wrong, "repo/srv"), d.path(), &Mirrors::default(), &cache).unwrap_err();
    assert_eq!(e.field(), Some(SourceField::Sha256), "{e}");
    assert!(e.to_string().contains(&sha), "{e}");
}

#[test]
fn each_bad_source_is_blamed_on_its_key_and_nothing_is_left_half_written() {
    let d = tempfile::tempdir().unwrap();
    let (one, _) = repo(&d.path().join("repo"));
    let cache = d.path().join("cache");
    let none = Mirrors::default();
    let blame = |s: ServerSource| fetch(&s, d.path(), &none, &cache).unwrap_err();

    let e = blame(at("repo", &"e".repeat(40), "srv"));
    assert_eq!(e.field(), Some(SourceField::Commit), "{e}");
    assert!(e.to_string().contains("is not in repo"), "{e}");
    let e = blame(at("repo", &one, "server"));
    assert_eq!(e.field(), Some(SourceField::Path), "{e}");
    let e = blame(at("not-a-repo", &one, ""));
    assert_eq!(e.field(), Some(SourceField::Git), "{e}");
    let e = blame(ServerSource { origin: SourceOrigin::Dir { dir: "missing".into() }, path: String::new() });
    assert_eq!(e.field(), Some(SourceField::Dir), "{e}");
    let e = blame(ServerSource {
        origin: SourceOrigin::Tarball { file: "missing.tgz".into(), sha256: "0".repeat(64) },
        path: String::new(),
    });
    assert_eq!(e.field(), Some(SourceField::Tarball), "{e}");

    let trees = std::fs::read_dir(cache.join("trees")).map(|r| r.count()).unwrap_or(0);
    assert_eq!(trees, 0, "no tree was stored for a failed fetch");
    let index = std::fs::read_dir(cache.join("index")).unwrap().count();
    assert_eq!(index, 0);
}

#[test]
fn mirrors_parse_url_path_pairs_and_match_urls_with_or_without_git() {
    let m = Mirrors::parse(&["https://h/o/r.git=/m/r".into()]).unwrap();
    assert_eq!(m.get("https://h/o/r"), Some(Path::new("/m/r")));
    assert_eq!(m.get("https://h/o/r.git/"), Some(Path::new("/m/r")));
    assert!(Mirrors::parse(&["nothing".into()]).unwrap_err().contains("URL=PATH"));
    assert!(Mirrors::parse(&["=x".into()]).is_err());
    assert!(Mirrors::parse(&["u=a".into(), "u.git=b".into()]).unwrap_err().contains("twice"));
}
