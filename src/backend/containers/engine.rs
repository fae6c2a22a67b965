//! What the lab needs from a container engine, as a trait the lab owns: images (inspect, import a
//! rootfs, pull, build), tmpfs volumes, containers (create, start, follow output, wait, copy a
//! file out, remove) and clean-up by label. Implementations: `docker` (bollard). It knows nothing
//! of MCP or workloads.
use crate::spec::Sandbox;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::backend::EngineError;
use crate::record::manifest::EngineManifest;

/// The label every object the lab creates carries, with the run id as its value.
pub const LABEL_RUN: &str = "org.benchlab.run";

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
    /// Loopback only; each of `hosts` is a name its `/etc/hosts` gives 127.0.0.1 (a cell's
    /// services by their names). Docker refuses such names on a container that joins another's
    /// network, whose `/etc/hosts` it shares: they are the joined container's to hold.
    Loopback { hosts: Vec<String> },
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
    /// A CPU quota on top of the cpuset, in billionths of a CPU (the engine's `NanoCpus`).
    pub nano_cpus: Option<i64>,
    pub network: Network,
    pub mounts: Vec<Mount>,
    /// What the container may do beyond its limits: user, capabilities, writable file system.
    pub sandbox: Sandbox,
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
    /// Tags `image` as `repo:tag` and pushes it to the registry `repo` names; returns the
    /// reference by digest the registry gave it (`repo@sha256:…`).
    async fn push(&self, image: &str, repo: &str, tag: &str) -> Result<String, EngineError>;
    /// The references by digest (`repo@sha256:…`) an image is known by.
    async fn repo_digests(&self, reference: &str) -> Result<Vec<String>, EngineError>;
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
    /// Reads a container's output as it stands, without following it: after the container
    /// exited, all of it. A follow stream can end before the last lines of a container that just
    /// exited (moby's log follower closes with the container), so this is the second read.
    async fn output(&self, id: &str, on_line: &mut (dyn FnMut(OutputLine) + Send))
        -> Result<(), EngineError>;
    /// Waits for a container to exit.
    async fn wait(&self, id: &str) -> Result<ExitState, EngineError>;
    /// Reads one file out of a container (created or running).
    async fn read_file(&self, id: &str, path: &str) -> Result<Option<Vec<u8>>, EngineError>;
    /// Runs a command in a running container (`docker exec`, as the container's user, with `env`
    /// added): its exit code and its output, stdout and stderr interleaved.
    async fn exec(
        &self,
        id: &str,
        argv: &[String],
        env: &[(String, String)],
    ) -> Result<(i64, String), EngineError>;
    /// Removes a container, killing it if needed.
    async fn remove_container(&self, id: &str) -> Result<(), EngineError>;
    async fn remove_volume(&self, name: &str) -> Result<(), EngineError>;
    /// Removes every container and volume carrying `label` (any value); returns how many.
    async fn remove_labelled(&self, label: &str) -> Result<usize, EngineError>;
}
