//! A run's folder and identity: its id, the scenario copy kept beside its records, the frozen
//! copy of the lab's executable that every cell of it runs, and the signals that interrupt it.

use std::path::{Path, PathBuf};

use super::RunError;

/// A fresh run id: UTC time and scenario name.
pub fn new_run_id(scenario: &str) -> String {
    let t = crate::record::now_rfc3339().replace([':', '-'], "");
    let nonce = std::process::id() % 10_000;
    format!("{t}-{scenario}-{nonce:04}")
}

/// Keeps the files the scenario's `[[suite]]` tables read beside the run's copy of it, at the
/// paths the scenario names them by (relative, inside its folder), so the copy reads again
/// (`verify`, `site`, `--resume`). A path that leaves the folder is not kept.
pub fn keep_suite_files(run_dir: &Path, files: &[(String, String)]) -> Result<(), RunError> {
    for (rel, text) in files {
        let p = Path::new(rel);
        if p.is_absolute() || p.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
            continue;
        }
        let path = run_dir.join(p);
        let io = |what: String| move |source| RunError::Io { what, source };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(format!("create {}", parent.display())))?;
        }
        std::fs::write(&path, text).map_err(io(format!("write {}", path.display())))?;
    }
    Ok(())
}

/// Keeps the scenario beside its records (`scenario.toml`), written atomically. A run folder that
/// already holds a different scenario is refused: its records name the old one's sha256.
pub fn keep_scenario_copy(run_dir: &Path, source: &str) -> Result<(), RunError> {
    let path = run_dir.join(crate::record::audit::SCENARIO_FILE);
    let io = |what: String| move |source| RunError::Io { what, source };
    if let Ok(existing) = std::fs::read_to_string(&path) {
        if existing == source {
            return Ok(());
        }
        return Err(RunError::Input {
            what: format!("continue the run in {}", run_dir.display()),
            message: "it was started from a different scenario file; use a new --run-id".into(),
        });
    }
    let tmp = run_dir.join(format!(".scenario.toml.{}", std::process::id()));
    std::fs::write(&tmp, source).map_err(io(format!("write {}", tmp.display())))?;
    std::fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(io(format!("sync {}", tmp.display())))?;
    std::fs::rename(&tmp, &path).map_err(io(format!("place {}", path.display())))
}

/// Resolves when the user interrupts (SIGINT) or the system asks the run to stop (SIGTERM).
pub async fn interrupted() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

/// A frozen copy of the lab's executable, held in use for as long as this value lives: a shared
/// flock on the copy tells other benchlabs not to prune it.
pub struct FrozenBinary {
    pub path: PathBuf,
    pub sha256: String,
    _in_use: Option<nix::fcntl::Flock<std::fs::File>>,
}

/// Copies younger than this are never pruned: another benchlab may have copied one and not yet
/// taken its lock.
const PRUNE_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// Copies the lab's executable to `<work>/bin/<sha256>/benchlab` (once per content), holds it in
/// use, and removes the other copies no running benchlab holds (older than an hour): each rebuild
/// of the lab would otherwise leave a copy of its executable behind for good.
pub fn freeze_binary(exe: &Path, work_dir: &Path) -> Result<FrozenBinary, RunError> {
    let io = |what: String| move |source| RunError::Io { what, source };
    let sha = crate::hash::sha256_file(exe).map_err(io(format!("hash {}", exe.display())))?;
    let bin = work_dir.join("bin");
    let dir = bin.join(&sha);
    let frozen = dir.join("benchlab");
    if crate::hash::sha256_file(&frozen).ok().as_deref() != Some(sha.as_str()) {
        std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
        let tmp = dir.join(format!("benchlab.{}", std::process::id()));
        std::fs::copy(exe, &tmp).map_err(io(format!("copy {} to {}", exe.display(), tmp.display())))?;
        std::fs::rename(&tmp, &frozen).map_err(io(format!("place {}", frozen.display())))?;
    }
    let in_use = hold(&frozen, nix::fcntl::FlockArg::LockSharedNonblock);
    prune_frozen(&bin, &sha);
    Ok(FrozenBinary { path: frozen, sha256: sha, _in_use: in_use })
}

fn hold(path: &Path, how: nix::fcntl::FlockArg) -> Option<nix::fcntl::Flock<std::fs::File>> {
    nix::fcntl::Flock::lock(std::fs::File::open(path).ok()?, how).ok()
}

/// Removes `<bin>/<sha>/` for every sha but `keep` whose copy is older than [`PRUNE_AFTER`] and
/// held by no benchlab (an exclusive flock can be taken). Best effort: what cannot be removed
/// stays.
fn prune_frozen(bin: &Path, keep: &str) {
    let Ok(entries) = std::fs::read_dir(bin) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name == keep || name.len() != 64 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let copy = entry.path().join("benchlab");
        let old = std::fs::metadata(&copy)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= PRUNE_AFTER);
        if !old {
            continue;
        }
        // Held while removing, so no benchlab can take it up in between.
        if let Some(_unused) = hold(&copy, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn age(path: &Path, by: std::time::Duration) {
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(std::time::SystemTime::now() - by).unwrap();
    }

    #[test]
    fn frozen_copies_are_pruned_unless_held_or_young() {
        let work = tempfile::tempdir().unwrap();
        let exe = work.path().join("exe");
        let copy = |content: &str| {
            std::fs::write(&exe, content).unwrap();
            freeze_binary(&exe, work.path()).unwrap()
        };
        let held = copy("held by a running benchlab");
        let unused = copy("left by an earlier build");
        let young = copy("copied a moment ago");
        drop(unused);
        drop(young);
        let (held_dir, unused_dir, young_dir) = {
            let d = |s: &str| work.path().join("bin").join(crate::hash::sha256_hex(s.as_bytes()));
            (d("held by a running benchlab"), d("left by an earlier build"), d("copied a moment ago"))
        };
        for d in [&held_dir, &unused_dir] {
            age(&d.join("benchlab"), PRUNE_AFTER * 2);
        }
        let current = copy("this build");
        assert!(current.path.exists());
        assert!(held_dir.join("benchlab").exists(), "a copy a live run holds stays");
        assert!(!unused_dir.exists(), "an old copy nobody holds goes");
        assert!(young_dir.join("benchlab").exists(), "a young copy stays");
        assert_eq!(std::fs::read(&held.path).unwrap(), b"held by a running benchlab");
        assert_eq!(current.sha256, crate::hash::sha256_hex(b"this build"));
    }

    #[test]
    fn suite_files_are_kept_at_their_paths_inside_the_run_folder_only() {
        let d = tempfile::tempdir().unwrap();
        let files = vec![
            ("suites/a.toml".to_string(), "name = \"a\"\n".to_string()),
            ("suites/calls.jsonl".to_string(), "{}\n".to_string()),
            ("../outside.toml".to_string(), "x".to_string()),
            ("/abs.toml".to_string(), "x".to_string()),
        ];
        super::keep_suite_files(d.path(), &files).unwrap();
        assert_eq!(std::fs::read_to_string(d.path().join("suites/a.toml")).unwrap(), "name = \"a\"\n");
        assert_eq!(std::fs::read_to_string(d.path().join("suites/calls.jsonl")).unwrap(), "{}\n");
        assert!(!d.path().parent().unwrap().join("outside.toml").exists());
        assert!(!std::path::Path::new("/abs.toml").exists());
    }
}
