//! The lab's own control groups for native cells, under a parent `benchlab/` group (cgroups-rs,
//! v1 or v2, whichever the host mounts): create with a cpuset, a memory limit without swap and a
//! pids limit; add a process; read the memory peak and whether the OOM killer struck; kill and
//! remove. It knows nothing of what runs inside.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cgroups_rs::fs::cpuset::CpuSetController;
use cgroups_rs::fs::memory::MemController;
use cgroups_rs::fs::pid::PidController;
use cgroups_rs::fs::{hierarchies, Cgroup, Controller, MaxValue};
use cgroups_rs::CgroupPid;

/// The parent group every lab cgroup lives under.
pub const PARENT: &str = "benchlab";

/// The controllers a cell needs.
const CONTROLLERS: [&str; 3] = ["cpuset", "memory", "pids"];

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("create cgroup {path}: {detail}\n  the native engine needs root and the cpuset, memory and pids controllers (run as root, or use --engine docker)")]
    Create { path: String, detail: String },
    #[error("set {what} of cgroup {path} to {value}: {detail}")]
    Limit { path: String, what: &'static str, value: String, detail: String },
    #[error("add pid {pid} to cgroup {path}: {detail}")]
    AddTask { path: String, pid: u32, detail: String },
    #[error("remove cgroup {path}: {detail}")]
    Remove { path: String, detail: String },
}

/// The cgroup version the host uses: "v2" (unified) or "v1".
pub fn version() -> &'static str {
    if hierarchies::is_cgroup2_unified_mode() {
        "v2"
    } else {
        "v1"
    }
}

/// What the lab's cgroups run on, for the environment manifest: "cgroup v1" or "cgroup v2".
pub fn describe() -> String {
    format!("cgroup {}", version())
}

fn load(path: &str) -> Cgroup {
    Cgroup::load_with_specified_controllers(
        hierarchies::auto(),
        path,
        CONTROLLERS.iter().map(|c| c.to_string()).collect(),
    )
}

/// One lab cgroup: `benchlab/<name>`. Dropping it kills what is left inside and removes it.
#[derive(Debug)]
pub struct NativeCgroup {
    cg: Cgroup,
    path: String,
    removed: bool,
}

/// How long a kill waits for a group to empty, and the pause between two rounds.
const KILL_WAIT: Duration = Duration::from_secs(5);
const KILL_PAUSE: Duration = Duration::from_millis(5);

impl NativeCgroup {
    /// Creates `benchlab/<pid>.<name>` (the pid of this lab process, so that
    /// [`remove_leftovers`] never takes a live lab's group) with its cpuset (`cpus`, `mems`; set before any task joins, as
    /// v1 requires), a memory limit with swap disabled (where the kernel accounts swap), and a
    /// pids limit.
    pub fn create(
        name: &str,
        cpus: &str,
        mems: &str,
        memory_limit: Option<u64>,
        pids_limit: Option<u32>,
    ) -> Result<NativeCgroup, CgroupError> {
        let path = format!("{PARENT}/{}.{name}", std::process::id());
        let create_err = |detail: String| CgroupError::Create { path: path.clone(), detail };
        // The parent first, so that (v1) its cpuset is filled from its own parent and (v2) its
        // subtree_control enables our controllers.
        let parent = load(PARENT);
        parent.create().map_err(|e| CgroupError::Create { path: PARENT.into(), detail: error_chain(&e) })?;
        let cg = load(&path);
        cg.create().map_err(|e| create_err(error_chain(&e)))?;
        let mut me = NativeCgroup { cg, path: path.clone(), removed: false };
        if me.cg.subsystems().len() < CONTROLLERS.len() {
            let have: Vec<String> = me.cg.subsystems().iter().map(|s| s.controller_name()).collect();
            return Err(create_err(format!("only the controllers {have:?} are available")));
        }
        let limit = |what: &'static str, value: String, e: cgroups_rs::fs::error::Error| CgroupError::Limit {
            path: path.clone(),
            what,
            value,
            detail: error_chain(&e),
        };
        let cpuset: &CpuSetController =
            me.cg.controller_of().ok_or_else(|| create_err("no cpuset controller".into()))?;
        cpuset.set_mems(mems).map_err(|e| limit("cpuset.mems", mems.into(), e))?;
        cpuset.set_cpus(cpus).map_err(|e| limit("cpuset.cpus", cpus.into(), e))?;
        if let Some(bytes) = memory_limit {
            let mem: &MemController =
                me.cg.controller_of().ok_or_else(|| create_err("no memory controller".into()))?;
            mem.set_limit(bytes as i64).map_err(|e| limit("the memory limit", bytes.to_string(), e))?;
            // No swap: v1's memory+swap limit equals the memory limit (only when the kernel
            // accounts swap, swapaccount=1); v2's swap limit is zero.
            let swap = if me.cg.v2() { 0 } else { bytes as i64 };
            let _ = mem.set_memswap_limit(swap);
        }
        if let Some(n) = pids_limit {
            let pids: &PidController =
                me.cg.controller_of().ok_or_else(|| create_err("no pids controller".into()))?;
            pids.set_pid_max(MaxValue::Value(i64::from(n)))
                .map_err(|e| limit("pids.max", n.to_string(), e))?;
        }
        me.removed = false;
        Ok(me)
    }

    /// The group's path under each hierarchy's root (`benchlab/<pid>.<name>`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The `cgroup.procs` file of every hierarchy the group lives in (one on v2): writing a pid
    /// there moves that process, e.g. from a child's `pre_exec` before it executes anything.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> =
            self.cg.subsystems().iter().map(|s| s.to_controller().path().join("cgroup.procs")).collect();
        files.dedup();
        files
    }

    /// The memory controller's folder (where `memory.peak` or `memory.max_usage_in_bytes` is).
    pub fn memory_dir(&self) -> Option<PathBuf> {
        let mem: &MemController = self.cg.controller_of()?;
        Some(mem.path().to_path_buf())
    }

    /// Moves a process (all its threads) into the group.
    pub fn add_task(&self, pid: u32) -> Result<(), CgroupError> {
        self.cg.add_task_by_tgid(CgroupPid::from(u64::from(pid))).map_err(|e| CgroupError::AddTask {
            path: self.path.clone(),
            pid,
            detail: error_chain(&e),
        })
    }

    /// The processes in the group now.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self.cg.procs().into_iter().map(|p| p.pid as u32).collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// The most memory the group has used: v2 `memory.peak`, v1 `memory.max_usage_in_bytes`.
    pub fn memory_peak(&self) -> Option<u64> {
        let dir = self.memory_dir()?;
        ["memory.peak", "memory.max_usage_in_bytes"]
            .iter()
            .find_map(|f| std::fs::read_to_string(dir.join(f)).ok()?.trim().parse().ok())
    }

    /// Whether the kernel's OOM killer killed a process of the group (v2 `memory.events`
    /// oom_kill; v1 `memory.oom_control` oom_kill, or under_oom on kernels without the counter).
    pub fn oom_killed(&self) -> bool {
        let Some(dir) = self.memory_dir() else {
            return false;
        };
        let field = |file: &str, key: &str| -> Option<u64> {
            let text = std::fs::read_to_string(dir.join(file)).ok()?;
            text.lines().find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
        };
        if let Some(n) = field("memory.events", "oom_kill ") {
            return n > 0;
        }
        match field("memory.oom_control", "oom_kill ") {
            Some(n) => n > 0,
            None => field("memory.oom_control", "under_oom ").unwrap_or(0) > 0,
        }
    }

    /// SIGKILLs every process in the group until none is left (or 5 s pass). Blocking: async
    /// code calls [`NativeCgroup::kill_all_async`].
    pub fn kill_all(&self) {
        let deadline = Instant::now() + KILL_WAIT;
        while !self.kill_round() && Instant::now() < deadline {
            std::thread::sleep(KILL_PAUSE);
        }
    }

    /// [`NativeCgroup::kill_all`] for async code: it waits with the runtime's timer.
    pub async fn kill_all_async(&self) {
        let deadline = Instant::now() + KILL_WAIT;
        while !self.kill_round() && Instant::now() < deadline {
            tokio::time::sleep(KILL_PAUSE).await;
        }
    }

    /// One SIGKILL to every process in the group; true when there was none left.
    fn kill_round(&self) -> bool {
        let pids = self.pids();
        for &pid in &pids {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL);
        }
        pids.is_empty()
    }

    /// Kills what is left inside and deletes the group.
    pub fn remove(mut self) -> Result<(), CgroupError> {
        self.remove_inner()
    }

    fn remove_inner(&mut self) -> Result<(), CgroupError> {
        if self.removed {
            return Ok(());
        }
        self.kill_all();
        // A killed process leaves its group a moment after it dies.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.cg.delete() {
                Ok(()) if !self.cg.exists() => break,
                Ok(()) | Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                Ok(()) => {
                    return Err(CgroupError::Remove {
                        path: self.path.clone(),
                        detail: "it is still there".into(),
                    })
                }
                Err(e) => {
                    return Err(CgroupError::Remove { path: self.path.clone(), detail: error_chain(&e) })
                }
            }
        }
        self.removed = true;
        Ok(())
    }
}

impl Drop for NativeCgroup {
    fn drop(&mut self) {
        let _ = self.remove_inner();
    }
}

/// Deletes every `benchlab/*` group that holds no process and whose lab process is gone (left by
/// a lab that was killed); returns how many went.
pub fn remove_leftovers() -> usize {
    let parent = load(PARENT);
    let mut names = std::collections::BTreeSet::new();
    for sub in parent.subsystems() {
        if let Ok(entries) = std::fs::read_dir(sub.to_controller().path()) {
            for e in entries.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    names.insert(e.file_name().to_string_lossy().into_owned());
                }
            }
        }
    }
    let mut removed = 0;
    for name in names {
        let owner = name.split('.').next().and_then(|p| p.parse::<u32>().ok());
        if owner.is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists()) {
            continue;
        }
        let cg = load(&format!("{PARENT}/{name}"));
        if cg.procs().is_empty() && cg.delete().is_ok() && !cg.exists() {
            removed += 1;
        }
    }
    removed
}

/// Whether a process could be placed in a lab cgroup here: creates and removes a probe group.
pub fn probe() -> Result<(), CgroupError> {
    let name = format!("probe-{}", std::process::id());
    let cg = NativeCgroup::create(&name, &allowed_cpus().unwrap_or_else(|| "0".into()), "0", None, None)?;
    cg.remove()
}

/// The CPUs this process may run on, as a cpuset list ("0-1"), from /proc/self/status.
pub fn allowed_cpus() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).map(|v| v.trim().to_string())
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(cause) = src {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        src = cause.source();
    }
    s
}
