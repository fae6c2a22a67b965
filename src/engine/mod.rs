//! What the lab needs from a container engine, as a trait the lab owns: images (inspect, import a
//! rootfs, pull, build), tmpfs volumes, containers (create, start, follow output, wait, copy a
//! file out, remove) and clean-up by label. Implementations: `docker` (bollard). It knows nothing
//! of MCP or workloads.

pub mod docker;
pub mod fake;
pub mod native;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::record::manifest::EngineManifest;

/// The label every object the lab creates carries, with the run id as its value.
pub const LABEL_RUN: &str = "org.benchlab.run";

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("no container engine answers at {endpoint}: {detail}\n  start one: `scripts/engine.sh` (installs docker.io and starts dockerd), or `dockerd &`")]
    Unreachable { endpoint: String, detail: String },
    #[error("image {reference} cannot be pulled: {detail}\n  without a registry, bootstrap a base here instead: `benchlab base --suite bookworm`, and name the suite in the recipe's runtime (suite = \"bookworm\") in place of base_image")]
    Pull { reference: String, detail: String },
    #[error("building image {reference} failed at step {step:?}: {detail}\n--- last lines of the build log ---\n{tail}")]
    Build { reference: String, step: String, detail: String, tail: String },
    #[error("{op} {object}: {detail}")]
    Op { op: &'static str, object: String, detail: String },
}

impl EngineError {
    pub fn op(op: &'static str, object: impl Into<String>, detail: impl std::fmt::Display) -> Self {
        EngineError::Op { op, object: object.into(), detail: detail.to_string() }
    }
}

/// An image known to the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageInfo {
    pub id: String,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Mount {
    /// A host path, e.g. the lab's own binary.
    Bind { source: PathBuf, target: String, read_only: bool },
    /// A named volume.
    Volume { name: String, target: String },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Network {
    /// Loopback only.
    None,
    /// Join another container's network namespace (the sidecar joins the server's).
    Container(String),
    /// The engine's default network, which reaches out: only for `benchlab lock`, never for a
    /// measured cell.
    Egress,
}

/// A container to create.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerSpec {
    pub name: String,
    pub image: String,
    pub cmd: Vec<String>,
    pub env: Vec<(String, String)>,
    pub labels: BTreeMap<String, String>,
    pub cpuset: String,
    /// Memory limit in bytes, with swap disabled.
    pub memory: Option<u64>,
    pub network: Network,
    pub mounts: Vec<Mount>,
    /// What the container may do beyond its limits: user, capabilities, writable file system.
    pub sandbox: Sandbox,
}

/// The user every sandboxed lab container runs as: `nobody:nogroup` (65534:65534). Every Debian
/// (and Node, Bun) image knows it by name, so runtimes that look their user up in /etc/passwd
/// still work, it owns no file of the image, and server and sidecar share it: the sidecar can
/// connect to the shim's socket and read the logs in /lab (the volume is mode 1777) without
/// either side being root.
pub const SANDBOX_UID: u32 = 65534;
pub const SANDBOX_GID: u32 = 65534;

/// Where sandboxed containers get writable scratch space; `HOME` and `TMPDIR` point there.
pub const SCRATCH_DIR: &str = "/tmp";

/// Hardening of a container, in engine-agnostic terms. Third-party servers run with
/// [`Sandbox::hardened`]; [`Sandbox::none`] is the engine's default (root, its default
/// capabilities, a writable root file system), kept for the lock containers and for showing in
/// tests that the hardening is what stops a hostile server.
#[derive(Debug, Clone, PartialEq)]
pub struct Sandbox {
    /// Run as this `(uid, gid)` instead of the image's user; `None` keeps the image's (root).
    pub user: Option<(u32, u32)>,
    /// Drop every Linux capability, the bounding set included.
    pub drop_all_capabilities: bool,
    /// Forbid gaining privileges across exec (setuid/setgid binaries, file capabilities).
    pub no_new_privileges: bool,
    /// Mount the image's root file system read-only; mounts (`/lab`, scratch) stay writable.
    pub read_only_root: bool,
    /// In-memory scratch folders, `(path, size in bytes)`: mode 1777, nosuid, nodev, noexec.
    pub scratch: Vec<(String, u64)>,
    /// The most processes and threads the container may hold at once (a fork bomb stops here).
    pub pids_limit: Option<u32>,
}

impl Sandbox {
    /// The engine's defaults: no hardening at all.
    pub fn none() -> Sandbox {
        Sandbox {
            user: None,
            drop_all_capabilities: false,
            no_new_privileges: false,
            read_only_root: false,
            scratch: Vec::new(),
            pids_limit: None,
        }
    }

    /// What every measured container gets: the sandbox user, no capabilities, no new
    /// privileges, a read-only root with a 64 MiB scratch tmpfs at [`SCRATCH_DIR`], and at most
    /// 1024 processes/threads (Node and the Python SDKs run a few dozen threads at most).
    pub fn hardened() -> Sandbox {
        Sandbox {
            user: Some((SANDBOX_UID, SANDBOX_GID)),
            drop_all_capabilities: true,
            no_new_privileges: true,
            read_only_root: true,
            scratch: vec![(SCRATCH_DIR.to_string(), 64 << 20)],
            pids_limit: Some(1024),
        }
    }

    /// The environment a process needs when its user has no writable home and the root file
    /// system is read-only (`nobody`'s home is `/nonexistent`): HOME and TMPDIR in the scratch.
    pub fn environment(&self) -> Vec<(String, String)> {
        if self.user.is_none() && !self.read_only_root {
            return Vec::new();
        }
        let scratch = self.scratch.first().map_or(SCRATCH_DIR, |(p, _)| p.as_str());
        vec![("HOME".to_string(), scratch.to_string()), ("TMPDIR".to_string(), scratch.to_string())]
    }
}

/// How a container ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExitState {
    pub code: i64,
    pub oom_killed: bool,
}

/// A line a container wrote.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputLine {
    Stdout(String),
    Stderr(String),
}

#[allow(async_fn_in_trait)]
pub trait Engine {
    /// Engine kind, version and API version, for the environment manifest.
    async fn describe(&self) -> Result<EngineManifest, EngineError>;
    /// The image with this reference, if the engine has it.
    async fn image(&self, reference: &str) -> Result<Option<ImageInfo>, EngineError>;
    /// Imports a rootfs tar as an image (`docker import`), with labels.
    async fn import_rootfs(
        &self,
        tar: &Path,
        reference: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<ImageInfo, EngineError>;
    /// Pulls an image from its registry.
    async fn pull(&self, reference: &str) -> Result<ImageInfo, EngineError>;
    /// Builds an image from a context tar; `log` gets each line of build output.
    async fn build(
        &self,
        context: Vec<u8>,
        reference: &str,
        labels: &BTreeMap<String, String>,
        log: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ImageInfo, EngineError>;
    /// Creates an in-memory (tmpfs) volume.
    async fn create_volume(
        &self,
        name: &str,
        size_bytes: u64,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), EngineError>;
    async fn create_container(&self, spec: &ContainerSpec) -> Result<String, EngineError>;
    async fn start(&self, id: &str) -> Result<(), EngineError>;
    /// Follows a container's output until it exits, a line at a time.
    async fn follow(&self, id: &str, on_line: &mut (dyn FnMut(OutputLine) + Send))
        -> Result<(), EngineError>;
    /// Waits for a container to exit.
    async fn wait(&self, id: &str) -> Result<ExitState, EngineError>;
    /// Reads one file out of a container (created or running).
    async fn read_file(&self, id: &str, path: &str) -> Result<Option<Vec<u8>>, EngineError>;
    /// Removes a container, killing it if needed.
    async fn remove_container(&self, id: &str) -> Result<(), EngineError>;
    async fn remove_volume(&self, name: &str) -> Result<(), EngineError>;
    /// Removes every container and volume carrying `label` (any value); returns how many.
    async fn remove_labelled(&self, label: &str) -> Result<usize, EngineError>;
}
