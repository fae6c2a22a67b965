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

/// Copies the lab's executable to `<work>/bin/<sha256>/benchlab` (once per content) and returns
/// that path with the sha256.
pub fn freeze_binary(exe: &Path, work_dir: &Path) -> Result<(PathBuf, String), RunError> {
    let io = |what: String| move |source| RunError::Io { what, source };
    let sha = crate::hash::sha256_file(exe).map_err(io(format!("hash {}", exe.display())))?;
    let dir = work_dir.join("bin").join(&sha);
    let frozen = dir.join("benchlab");
    if crate::hash::sha256_file(&frozen).ok().as_deref() != Some(sha.as_str()) {
        std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
        let tmp = dir.join(format!("benchlab.{}", std::process::id()));
        std::fs::copy(exe, &tmp).map_err(io(format!("copy {} to {}", exe.display(), tmp.display())))?;
        std::fs::rename(&tmp, &frozen).map_err(io(format!("place {}", frozen.display())))?;
    }
    Ok((frozen, sha))
}
