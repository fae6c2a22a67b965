//! Who owns what a run leaves in the engine: every container and volume carries its benchlab
//! process's owner token (`<pid>-<start time>`), and each running benchlab has an entry in
//! `<work>/owners/`. At the start of a run, what belongs to owners that are gone (`kill -9`, a
//! crash) is removed; live owners' things are theirs.

use std::path::{Path, PathBuf};

use super::engine::Engine;
use crate::backend::{EngineError, Leftover};

/// Label on every container and volume of a run: the benchlab process that made it, as
/// `<pid>-<start time>` (the start time tells a reused pid from the original).
pub const LABEL_OWNER: &str = "org.benchlab.owner";

/// This process's owner token, read once.
pub fn owner_token() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| {
        let pid = std::process::id();
        process_token(Path::new("/proc"), pid).unwrap_or_else(|| format!("{pid}-0"))
    })
}

/// `<pid>-<start time>` of a live process, from a /proc-like folder; None when it is gone.
pub fn process_token(proc_root: &Path, pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    // Field 22 (starttime), counted from past the command name's last ')'.
    let start = stat[stat.rfind(')')? + 1..].split_whitespace().nth(19)?;
    Some(format!("{pid}-{start}"))
}

/// Whether the benchlab an owner token (`<pid>-<start time>`) names still runs (a reused pid
/// has another start time).
pub fn owner_alive(token: &str) -> bool {
    let pid = token.split('-').next().and_then(|p| p.parse::<u32>().ok()).unwrap_or(0);
    pid > 0 && process_token(Path::new("/proc"), pid).as_deref() == Some(token)
}

/// This benchlab's entry in `<work>/owners/` (file name: its owner token; content: its run id),
/// removed when the run ends by any path but a kill.
pub struct OwnerEntry(PathBuf);

impl Drop for OwnerEntry {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Removes the containers and volumes of every registered benchlab that is no longer alive
/// (found by their owner label), then registers this one.
pub async fn sweep_leftovers<E: Engine>(
    engine: &E,
    work_dir: &Path,
    run_id: &str,
) -> Result<(OwnerEntry, Vec<Leftover>), EngineError> {
    let io = |what: String| move |source| EngineError::Io { what, source };
    let mut found = Vec::new();
    let dir = work_dir.join("owners");
    std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
    for entry in std::fs::read_dir(&dir).map_err(io(format!("read {}", dir.display())))? {
        let Ok(entry) = entry else { continue };
        let Some(token) = entry.file_name().to_str().map(String::from) else { continue };
        if token.split('-').next().and_then(|p| p.parse::<u32>().ok()).is_none() {
            continue; // not an owner entry
        }
        if owner_alive(&token) {
            continue; // alive: its containers are its own business
        }
        let dead_run = std::fs::read_to_string(entry.path()).unwrap_or_default().trim().to_string();
        let removed = engine.remove_labelled(&format!("{LABEL_OWNER}={token}")).await?;
        let _ = std::fs::remove_file(entry.path());
        if removed > 0 {
            found.push(Leftover { run_id: dead_run, owner: token, removed });
        }
    }
    let path = dir.join(owner_token());
    std::fs::write(&path, format!("{run_id}\n")).map_err(io(format!("write {}", path.display())))?;
    Ok((OwnerEntry(path), found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::containers::fake::FakeEngine;

    #[test]
    fn owner_tokens_name_a_live_process_and_its_start_time() {
        let me = owner_token();
        assert!(me.starts_with(&format!("{}-", std::process::id())), "{me}");
        assert_ne!(me, format!("{}-0", std::process::id()), "the start time was read");
        assert_eq!(process_token(Path::new("/proc"), std::process::id()).as_deref(), Some(me));
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("42")).unwrap();
        let stat = "42 (a) b) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        std::fs::write(d.path().join("42/stat"), stat).unwrap();
        assert_eq!(process_token(d.path(), 42).as_deref(), Some("42-987654"));
        assert_eq!(process_token(d.path(), 43), None);
    }

    #[tokio::test]
    async fn leftovers_of_dead_benchlabs_are_removed_by_owner_and_live_ones_kept() {
        let d = tempfile::tempdir().unwrap();
        let owners = d.path().join("owners");
        std::fs::create_dir_all(&owners).unwrap();
        // A pid that cannot exist, and a live pid (ours) with another start time: a reused pid.
        let dead = "4194399-12345".to_string();
        let reused = format!("{}-1", std::process::id());
        let alive = owner_token().to_string();
        for (token, run) in [(&dead, "run-a"), (&reused, "run-b")] {
            std::fs::write(owners.join(token), format!("{run}\n")).unwrap();
        }
        let engine = FakeEngine::new();
        let (entry, events) = sweep_leftovers(&engine, d.path(), "run-c").await.unwrap();
        let calls = engine.calls();
        for token in [&dead, &reused] {
            assert!(calls.contains(&format!("remove_labelled {LABEL_OWNER}={token}")), "{calls:?}");
            assert!(!owners.join(token).exists());
        }
        assert!(!calls.iter().any(|c| c.contains(&format!("={alive}"))), "{calls:?}");
        assert_eq!(std::fs::read_to_string(owners.join(&alive)).unwrap(), "run-c\n");
        // The fake removes nothing, so nothing is reported.
        assert!(events.is_empty());
        drop(entry);
        assert!(!owners.join(&alive).exists(), "the entry goes when the run ends");
    }
}
