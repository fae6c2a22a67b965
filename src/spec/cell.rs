//! What one cell is beyond its workload: how the server starts, its limits (timeouts, placement,
//! memory, sandbox), what the scenario expects of it, and where it falls in its run's order (`Schedule`:
//! order, seed, position, A/A control). Pure serde types, no I/O; the stored ones
//! (placement, timeouts, repeat, expect, source, schedule) are pinned by tests/stored_shapes.rs.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use crate::text::parse_memory;

/// How to start the server process inside its container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerLaunch {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<String>,
}

/// Limits that turn misbehaviour into a failure instead of a hang.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    /// From the spawn request to the initialize result.
    pub startup_ms: u64,
    /// One request's answer.
    pub call_ms: u64,
    /// After stdin is closed, before SIGTERM.
    pub stop_grace_ms: u64,
    /// After SIGTERM, before SIGKILL.
    pub term_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { startup_ms: 30_000, call_ms: 10_000, stop_grace_ms: 2_000, term_ms: 2_000 }
    }
}

impl Timeouts {
    pub fn startup(&self) -> Duration {
        Duration::from_millis(self.startup_ms)
    }
    pub fn call(&self) -> Duration {
        Duration::from_millis(self.call_ms)
    }
}

/// How server and driver share the host's CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum PlacementMode {
    /// Disjoint CPU sets: the server on one, the driver on another (the default).
    #[default]
    Split,
    /// Server and driver on the same CPU set.
    Shared,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementSpec {
    #[serde(default)]
    pub mode: PlacementMode,
    /// Explicit cpusets (`"1"`, `"2-3"`); chosen from the host's CPUs when absent.
    pub server_cpus: Option<String>,
    pub driver_cpus: Option<String>,
    /// The server container's memory limit: bytes, or a string such as `"1GiB"`, `"512MiB"`.
    #[serde(default = "default_memory")]
    pub memory: Memory,
    /// A CPU quota for the server container on top of its cpuset (`cpus = 1.0`, as a compose
    /// file's `deploy.resources.limits.cpus`): CFS quota over period, in CPUs.
    #[serde(default)]
    pub cpus: Option<CpuQuota>,
}

impl Default for PlacementSpec {
    fn default() -> Self {
        PlacementSpec {
            mode: PlacementMode::Split,
            server_cpus: None,
            driver_cpus: None,
            memory: default_memory(),
            cpus: None,
        }
    }
}

fn default_memory() -> Memory {
    Memory(1 << 30)
}

/// A memory size in bytes, written as an integer or with a binary unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory(pub u64);

impl<'de> Deserialize<'de> for Memory {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bytes(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bytes(b) => Ok(Memory(b)),
            Raw::Text(s) => parse_memory(&s).map(Memory).map_err(serde::de::Error::custom),
        }
    }
}

/// What a cell is expected to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    #[default]
    Success,
    Failure,
}

/// The variable that tells a server how many workers to run (set only for more than one).
pub const ENV_SERVER_WORKERS: &str = "BENCHLAB_SERVER_WORKERS";

/// Where a cell ran: CPU sets and the memory limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    /// cpuset of the server container (`cpuset.cpus` syntax).
    pub server_cpus: String,
    /// cpuset of the sidecar (driver) container.
    pub driver_cpus: String,
    /// True when the scenario asked server and driver to share CPUs.
    pub shared: bool,
    /// The server container's memory limit (swap disabled), bytes.
    pub memory_limit_bytes: u64,
    /// Set when the cell ran under `--parallel`, beside other cells on disjoint CPU sets that
    /// share no physical core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<ParallelSlot>,
    /// cpuset of the cell's backing services (`[[service]]`); absent when it has none. The
    /// driver's own CPUs when the host has none left over: they then share them, and
    /// `services_share_driver` says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services_cpus: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub services_share_driver: bool,
    /// The server container's CPU quota on top of its cpuset, when the scenario set one
    /// (`[placement] cpus`); absent: the cpuset alone limits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<CpuQuota>,
}

/// A CPU quota in thousandths of a CPU, written and stored as CPUs (`1.0`, `0.5`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpuQuota(pub u32);

impl CpuQuota {
    /// From CPUs, to the thousandth; None when not positive and finite.
    pub fn from_cpus(cpus: f64) -> Option<CpuQuota> {
        (0.001..=1024.0).contains(&cpus).then(|| CpuQuota((cpus * 1000.0).round() as u32))
    }

    pub fn cpus(self) -> f64 {
        f64::from(self.0) / 1000.0
    }

    /// The engine's `NanoCpus`.
    pub fn nano_cpus(self) -> i64 {
        i64::from(self.0) * 1_000_000
    }
}

impl Serialize for CpuQuota {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.cpus())
    }
}

impl<'de> Deserialize<'de> for CpuQuota {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        CpuQuota::from_cpus(v).ok_or_else(|| {
            serde::de::Error::custom(format!("`cpus` is a CPU quota from 0.001 to 1024 CPUs, not {v}"))
        })
    }
}

/// Which of a `--parallel` run's CPU slots a cell ran in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParallelSlot {
    /// 0-based slot index.
    pub slot: u32,
    /// How many cells could run at once.
    pub slots: u32,
}

/// The position of a record among the repeats of its cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repeat {
    /// 0-based.
    pub index: u32,
    pub of: u32,
    /// Whether each repeat ran in a fresh server container.
    pub fresh_container: bool,
}

/// The user every sandboxed server (and backing service) runs as: `nobody:nogroup`
/// (65534:65534). Every Debian (and Node, Bun) image knows it by name, so runtimes that look their
/// user up in /etc/passwd still work, and it owns no file of the image. The lab's own processes
/// run apart from it ([`LAB_UID`], [`Sandbox::lab_user`]), so the server reaches neither the
/// shim nor /lab.
pub const SANDBOX_UID: u32 = 65534;

pub const SANDBOX_GID: u32 = 65534;

/// The lab's own user (shim group, driver) in a sandbox that keeps the server out of the lab's
/// reach ([`Sandbox::lab_user`]): no image knows it by name and no server runs as it, so a server
/// can neither signal, trace nor write what runs or is written under it.
pub const LAB_UID: u32 = 65533;

pub const LAB_GID: u32 = 65533;

/// The capabilities the shim keeps when it starts the server as another user: to switch to that
/// user (`SETUID`, `SETGID`) and to kill what it leaves behind (`KILL`). The server loses them at
/// its `setuid`.
pub const SHIM_CAPABILITIES: [&str; 3] = ["SETUID", "SETGID", "KILL"];

/// Where sandboxed containers get writable scratch space; `HOME` and `TMPDIR` point there.
pub const SCRATCH_DIR: &str = "/tmp";

/// Hardening of a container, in engine-agnostic terms. Third-party servers run with
/// [`Sandbox::hardened`]; [`Sandbox::none`] is the engine's default (root, its default
/// capabilities, a writable root file system), kept for the lock containers and for showing in
/// tests that the hardening is what stops a hostile server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// The lab's own `(uid, gid)`, apart from the server's `user`: the driver runs as it, the
    /// shim runs as root in its group with only [`SHIM_CAPABILITIES`] and starts the server as
    /// `user`, non-dumpable, with `/lab` closed to the server (mode 0750, the lab's group). `None`
    /// (every record written before it existed): shim, driver and server share `user`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab_user: Option<(u32, u32)>,
    /// Capabilities this container keeps although `drop_all_capabilities` (only the shim's
    /// container, see [`Sandbox::for_shim`]); never set on a cell's stored sandbox.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep_capabilities: Vec<String>,
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
            lab_user: None,
            keep_capabilities: Vec::new(),
        }
    }

    /// What every measured container gets: the sandbox user, no capabilities, no new
    /// privileges, a read-only root with a 64 MiB scratch tmpfs at [`SCRATCH_DIR`], and at most
    /// 1024 processes/threads (Node and the Python SDKs run a few dozen threads at most); the
    /// lab's own processes under [`LAB_UID`], out of the server's reach.
    pub fn hardened() -> Sandbox {
        Sandbox {
            user: Some((SANDBOX_UID, SANDBOX_GID)),
            drop_all_capabilities: true,
            no_new_privileges: true,
            read_only_root: true,
            scratch: vec![(SCRATCH_DIR.to_string(), 64 << 20)],
            pids_limit: Some(1024),
            lab_user: Some((LAB_UID, LAB_GID)),
            keep_capabilities: Vec::new(),
        }
    }

    /// The server container's own sandbox: with a `lab_user`, the shim runs as root in the lab's
    /// group keeping only [`SHIM_CAPABILITIES`] (it starts the server as `user`); otherwise this
    /// sandbox as it is.
    pub fn for_shim(&self) -> Sandbox {
        match self.lab_user {
            Some((_, gid)) => Sandbox {
                user: Some((0, gid)),
                keep_capabilities: SHIM_CAPABILITIES.iter().map(|c| c.to_string()).collect(),
                ..self.clone()
            },
            None => self.clone(),
        }
    }

    /// The sidecar's sandbox: the driver runs as the `lab_user` when there is one.
    pub fn for_driver(&self) -> Sandbox {
        match self.lab_user {
            Some(lab) => Sandbox { user: Some(lab), ..self.clone() },
            None => self.clone(),
        }
    }

    /// The user the shim starts the server as, when it is not the shim's own (`lab_user` set).
    pub fn server_user(&self) -> Option<(u32, u32)> {
        self.lab_user.and(self.user)
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

/// The server source a cell runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceInfo {
    /// Path in the checkout.
    pub file: String,
    pub sha256: String,
    /// Non-blank, non-comment lines.
    pub loc: u32,
}

/// How a cell's driver reached its server, as records store it: an MCP transport, or a plain
/// REST route (`http-api`, the protocol-overhead comparison).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CellTransport {
    Stdio,
    StreamableHttp,
    Sse,
    HttpApi,
}

impl CellTransport {
    pub fn as_str(self) -> &'static str {
        match self {
            CellTransport::Stdio => "stdio",
            CellTransport::StreamableHttp => "streamable-http",
            CellTransport::Sse => "sse",
            CellTransport::HttpApi => "http-api",
        }
    }
}

impl From<crate::mcp::transport::Transport> for CellTransport {
    fn from(t: crate::mcp::transport::Transport) -> Self {
        use crate::mcp::transport::Transport;
        match t {
            Transport::Stdio => CellTransport::Stdio,
            Transport::StreamableHttp => CellTransport::StreamableHttp,
            Transport::Sse => CellTransport::Sse,
        }
    }
}

impl std::fmt::Display for CellTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a run ordered its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// A seeded permutation of the cells within each round of repeats (round-robin repeats), so
    /// the host's drift spreads across versions instead of lining up with them.
    Random,
    /// The scenario's order: server by server, workload by workload, repeats together.
    AsWritten,
}

impl Order {
    pub fn as_str(self) -> &'static str {
        match self {
            Order::Random => "random",
            Order::AsWritten => "as-written",
        }
    }
}

/// Where an A/A control measurement fell in its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlAt {
    Start,
    Middle,
    End,
}

impl ControlAt {
    pub const ALL: [ControlAt; 3] = [ControlAt::Start, ControlAt::Middle, ControlAt::End];

    pub fn as_str(self) -> &'static str {
        match self {
            ControlAt::Start => "start",
            ControlAt::Middle => "middle",
            ControlAt::End => "end",
        }
    }
}

/// A record's place in its run's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    pub order: Order,
    /// The permutation's seed (`random` only); `--order-seed` gives it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u32>,
    /// This cell's place in the run's order, from 0, of `of` places.
    pub position: u32,
    pub of: u32,
    /// A sweep's A/A control: a control release measured again at the start, middle or end of
    /// the run (history points leave these out and show their drift instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<ControlAt>,
}
