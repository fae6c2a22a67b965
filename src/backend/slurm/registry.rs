//! The registry a cluster's nodes pull images from: one the user names (`--registry HOST:PORT`),
//! or Debian's `docker-registry` started by the lab on loopback for the length of a run (its
//! storage kept under the lab's work folder, so later runs push only what is new). Images are
//! pushed once and pulled by digest, so every node runs the same bytes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::backend::containers::owners::{owner_alive, owner_token};
use crate::backend::EngineError;

/// A registry the run pushes to; a registry the lab started stops when this is dropped.
pub struct Registry {
    /// `host:port`, as image references name it.
    pub address: String,
    /// The lab's own registry process, when it started one.
    child: Option<tokio::process::Child>,
    pub log: Option<PathBuf>,
}

impl Registry {
    /// The user's registry, checked to answer the registry API.
    pub async fn given(address: &str) -> Result<Registry, EngineError> {
        if !answers(address).await {
            return Err(EngineError::op(
                "reach registry",
                address,
                "no registry API answers at http://{address}/v2/ (give HOST:PORT of a Docker registry \
                 every node can pull from, or leave --registry out so the lab starts its own on loopback)",
            ));
        }
        Ok(Registry { address: address.to_string(), child: None, log: None })
    }

    /// Starts Debian's `docker-registry` on a free loopback port, with its storage in
    /// `<work>/registry/storage`, and waits until it answers.
    pub async fn start_own(work_dir: &Path) -> Result<Registry, EngineError> {
        let dir = work_dir.join("registry");
        let io = |what: String| move |source| EngineError::Io { what, source };
        std::fs::create_dir_all(dir.join("storage")).map_err(io(format!("create {}", dir.display())))?;
        sweep_orphans(&dir);
        let port = free_port().map_err(io("find a free loopback port".into()))?;
        let address = format!("127.0.0.1:{port}");
        let config = dir.join(format!("config-{port}.yml"));
        std::fs::write(&config, config_yaml(&dir.join("storage"), &address))
            .map_err(io(format!("write {}", config.display())))?;
        let log = dir.join(format!("registry-{port}.log"));
        let log_file = std::fs::File::create(&log).map_err(io(format!("create {}", log.display())))?;
        let err_file = log_file.try_clone().map_err(io(format!("open {}", log.display())))?;
        let child = tokio::process::Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(std::process::Stdio::null())
            .stdout(log_file)
            .stderr(err_file)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                EngineError::op(
                    "start",
                    "docker-registry",
                    format!(
                        "{e}\n  install Debian's docker-registry (apt-get install docker-registry), or \
                         name a registry every node can pull from with --registry HOST:PORT"
                    ),
                )
            })?;
        // Whose registry this is, so a later run stops it if this benchlab dies without doing so.
        let owner = dir.join(format!("registry-{port}.owner"));
        let pid = child.id().unwrap_or(0);
        let _ = std::fs::write(&owner, format!("{pid} {}\n", owner_token()));
        let registry = Registry { address: address.clone(), child: Some(child), log: Some(log.clone()) };
        for _ in 0..100 {
            if answers(&address).await {
                return Ok(registry);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let tail = crate::shim::tail(&log, 2000).unwrap_or_default();
        Err(EngineError::op(
            "start",
            "docker-registry",
            format!("it did not answer on {address} within 10 s:\n{tail}"),
        ))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
            if let (Some(log), Some(port)) = (&self.log, self.address.rsplit(':').next()) {
                if let Some(dir) = log.parent() {
                    let _ = std::fs::remove_file(dir.join(format!("registry-{port}.owner")));
                    let _ = std::fs::remove_file(dir.join(format!("config-{port}.yml")));
                }
            }
        }
    }
}

/// Stops the registries of benchlabs that died without stopping theirs (`kill -9`): each
/// `registry-<port>.owner` names the registry's pid and its owner's token.
fn sweep_orphans(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.ends_with(".owner") {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let mut parts = text.split_whitespace();
        let (Some(pid), Some(token)) = (parts.next().and_then(|p| p.parse::<i32>().ok()), parts.next())
        else {
            continue;
        };
        if owner_alive(token) {
            continue; // its benchlab runs: its registry is in use
        }
        // Only a docker-registry process is stopped (the pid may have been reused).
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if pid > 0 && String::from_utf8_lossy(&cmd).contains("docker-registry") {
            let _ =
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
        }
        let _ = std::fs::remove_file(e.path());
    }
}

/// The repository an image is pushed to at `address`: the local name's repository under it.
pub fn repository(address: &str, local_reference: &str) -> String {
    let repo = local_reference.split('@').next().unwrap_or(local_reference);
    let repo = match repo.rsplit_once(':') {
        Some((r, tag)) if !tag.contains('/') => r,
        _ => repo,
    };
    format!("{address}/{repo}")
}

/// The registry's configuration: filesystem storage, loopback only, no auth.
fn config_yaml(storage: &Path, address: &str) -> String {
    format!(
        "version: 0.1\nlog:\n  level: info\n  fields:\n    service: benchlab-registry\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {address}\n",
        storage.display()
    )
}

/// A loopback port nothing listens on now.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Whether `GET /v2/` at `host:port` answers as a registry does (200, or 401 when it wants auth).
pub async fn answers(address: &str) -> bool {
    let probe = async {
        let mut s = tokio::net::TcpStream::connect(address).await.ok()?;
        let req = format!("GET /v2/ HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        let head = String::from_utf8_lossy(&buf);
        let status = head.split_whitespace().nth(1)?.to_string();
        Some(status == "200" || status == "401")
    };
    tokio::time::timeout(Duration::from_secs(3), probe).await.ok().flatten().unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_keep_the_local_name_under_the_registry() {
        let r = "127.0.0.1:5000";
        assert_eq!(repository(r, "benchlab/python-mcp:2.3.0-abc"), "127.0.0.1:5000/benchlab/python-mcp");
        assert_eq!(repository(r, "benchlab/null"), "127.0.0.1:5000/benchlab/null");
        assert!(config_yaml(Path::new("/s"), "127.0.0.1:9").contains("addr: 127.0.0.1:9"));
    }
}
