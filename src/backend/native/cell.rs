//! One native cell: a private lab folder, `benchlab shim` in a fresh lab cgroup (server cpuset,
//! memory and pids limits) or pinned by affinity when there are no cgroups, `benchlab driver`
//! pinned to the driver CPUs; the driver's JSON lines become events and an outcome; everything is
//! killed on a time limit or drop, and the cgroup's memory peak and OOM kills are read before it
//! is removed. The quiet check's during window (`host::quiet`) spans the driver's run, the cell
//! cgroup, shim and driver (and this process) being the cell's own. What is measured is the
//! driver's business.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nix::sched::CpuSet;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::cgroup::NativeCgroup;
use crate::backend::link::DriverLink;
use crate::backend::EngineError;
use crate::host::quiet::{self, During, Own};
use crate::spec::{DriverEvent, DriverOutcome, DriverSpec};

/// What a native cell produced.
#[derive(Debug, Clone)]
pub struct NativeRun {
    pub outcome: DriverOutcome,
    /// The kernel's OOM killer struck inside the server's cgroup.
    pub oom_killed: bool,
    /// The server cgroup's memory peak (shim, server and its children), when cgroups are used.
    pub memory_peak: Option<u64>,
    /// The quiet check's window from the driver's start to its end.
    pub quiet_during: Option<quiet::Window>,
}

/// Where and how a cell's processes run.
#[derive(Debug, Clone)]
pub struct CellPlacement<'a> {
    pub server_cpus: &'a str,
    pub driver_cpus: &'a str,
    pub memory_limit: Option<u64>,
    pub pids_limit: Option<u32>,
    /// Put the server side in a lab cgroup; without, both sides are pinned by affinity only.
    pub cgroups: bool,
    /// Start shim and driver with a minimal environment (PATH, LANG, HOME and TMPDIR in the lab
    /// folder), as a container would, instead of this process's.
    pub clean_env: bool,
}

/// The PATH of a clean environment (Debian's default for root).
const CLEAN_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A private folder (mode 0700) removed with its contents on drop.
struct LabDir(PathBuf);

static CELLS: AtomicU64 = AtomicU64::new(0);

impl LabDir {
    fn create() -> Result<LabDir, EngineError> {
        let n = CELLS.fetch_add(1, Ordering::Relaxed);
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("benchlab-native-{}-{n}-{nonce:08x}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| EngineError::op("create the lab folder", dir.display().to_string(), e))?;
        Ok(LabDir(dir))
    }
}

impl Drop for LabDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A CPU list ("0-1,3") as an affinity mask.
fn cpu_set(list: &str) -> Result<CpuSet, EngineError> {
    let cpus =
        crate::placement::parse_cpu_list(list).map_err(|e| EngineError::op("parse the CPU list", list, e))?;
    crate::placement::cpu_mask(&cpus).map_err(|e| EngineError::op("pin to CPUs", list, e))
}

/// Writes the calling process's pid into each file (cgroup.procs), in a child before exec: only
/// async-signal-safe calls, no allocation.
fn join_cgroups(files: &[CString]) -> std::io::Result<()> {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    // Rendered on the stack: no allocation.
    let pid = crate::http1::Decimal::new(pid as u64);
    let digits = pid.as_bytes();
    for f in files {
        // SAFETY: f is a valid C string; the descriptor is closed below.
        let fd = unsafe { libc::open(f.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `digits` is valid for its length.
        let w = unsafe { libc::write(fd, digits.as_ptr().cast(), digits.len()) };
        let err = std::io::Error::last_os_error();
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        if w < 0 {
            return Err(err);
        }
    }
    Ok(())
}

/// Runs one cell natively. `spec.lab_dir` is replaced by a private folder; a server argv
/// element naming the container's lab binary is replaced by `benchlab_exe`.
pub async fn run_cell(
    mut spec: DriverSpec,
    placement: &CellPlacement<'_>,
    benchlab_exe: &Path,
    time_limit: Duration,
    on_event: &mut (dyn FnMut(DriverEvent) + Send),
) -> Result<NativeRun, EngineError> {
    if spec.http.is_some() {
        return Err(EngineError::op(
            "run",
            "an HTTP cell",
            "the native engine runs stdio servers only; use --engine docker for HTTP cells",
        ));
    }
    let lab = LabDir::create()?;
    spec.lab_dir = lab.0.clone();
    let exe = benchlab_exe.display().to_string();
    for a in spec.server.argv.iter_mut() {
        if a == crate::recipe::LAB_BINARY {
            a.clone_from(&exe);
        }
    }
    let cgroup = server_cgroup(&lab, placement)?;
    let scratch = lab.0.join("tmp");
    std::fs::create_dir(&scratch).map_err(|e| EngineError::op("create", scratch.display().to_string(), e))?;
    let env = CleanEnv { clean: placement.clean_env, scratch: &scratch };
    let shim_log = lab.0.join("shim.log");
    let mut shim = spawn_shim(&lab.0, &shim_log, placement, cgroup.as_ref(), benchlab_exe, &env)?;
    // Without a cgroup, the servers (in their own process groups) would outlive a killed shim:
    // whatever ends this cell, its process tree goes.
    let mut tree_guard = TreeGuard(shim.id());
    let mut driver = match spawn_driver(&spec, placement, benchlab_exe, &env) {
        Ok(d) => d,
        Err(e) => {
            let _ = shim.start_kill();
            return Err(e);
        }
    };

    let during =
        During::start(Path::new("/"), &cell_cpus(placement), own(cgroup.as_ref(), &shim, &driver)).await;
    let mut link = DriverLink::new(on_event);
    let waited = tokio::time::timeout(time_limit, follow(&mut driver, &mut link)).await;
    let quiet_during = Some(during.end().await);
    let driver_status = match waited {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => {
            kill_everything(&mut shim, cgroup.as_ref()).await;
            return Err(EngineError::op("wait for", "the native driver", e));
        }
        Err(_) => {
            let _ = driver.start_kill();
            kill_everything(&mut shim, cgroup.as_ref()).await;
            let _ = shim.wait().await;
            tree_guard.0 = None;
            return Err(EngineError::op(
                "run",
                "a native cell",
                format!("the cell did not finish within {time_limit:?}; its processes were killed"),
            ));
        }
    };
    // The shim exits after the driver's shutdown request; give it a moment.
    if tokio::time::timeout(Duration::from_secs(10), shim.wait()).await.is_err() {
        kill_everything(&mut shim, cgroup.as_ref()).await;
        let _ = shim.wait().await;
    }
    // Reaped: its pid may be reused by now, so the guard must not act on it.
    tree_guard.0 = None;
    let (oom_killed, memory_peak) = match &cgroup {
        Some(cg) => (cg.oom_killed(), cg.memory_peak()),
        None => (false, None),
    };
    if let Some(cg) = cgroup {
        // Removing a group waits for its last processes to leave: off the async threads.
        tokio::task::spawn_blocking(move || cg.remove())
            .await
            .map_err(|e| EngineError::op("clean up after", "a native cell", e))?
            .map_err(|e| EngineError::op("clean up after", "a native cell", e))?;
    }
    match link.finish() {
        Ok(outcome) => Ok(NativeRun { outcome, oom_killed, memory_peak, quiet_during }),
        Err(stderr_tail) => Err(no_outcome(driver_status, &stderr_tail, &shim_log)),
    }
}

/// The cell's CPUs: server and driver together.
fn cell_cpus(placement: &CellPlacement<'_>) -> Vec<u32> {
    quiet::cell_cpus(&[placement.server_cpus, placement.driver_cpus])
}

/// The cell's own processes for the quiet check: its cgroup's, the shim's and the driver's (and,
/// as always, this process and its descendants).
fn own(cgroup: Option<&NativeCgroup>, shim: &tokio::process::Child, driver: &tokio::process::Child) -> Own {
    let path = cgroup.map(|c| c.path().to_string());
    let pids: Vec<u32> = [shim.id(), driver.id()].into_iter().flatten().collect();
    Own::by(move |text, pid| {
        pids.contains(&pid) || path.as_deref().is_some_and(|p| text.lines().any(|l| l.ends_with(p)))
    })
}

/// The server side's lab cgroup (server cpuset, memory and pids limits), when cgroups are used.
fn server_cgroup(lab: &LabDir, placement: &CellPlacement<'_>) -> Result<Option<NativeCgroup>, EngineError> {
    if !placement.cgroups {
        return Ok(None);
    }
    let name = lab.0.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    NativeCgroup::create(&name, placement.server_cpus, "0", placement.memory_limit, placement.pids_limit)
        .map(Some)
        .map_err(|e| EngineError::op("create the server cgroup for", "a native cell", e))
}

/// The environment shim and driver start with: this process's, or a minimal one (PATH, LANG,
/// HOME and TMPDIR in the cell's scratch folder) as a container would give them.
struct CleanEnv<'a> {
    clean: bool,
    scratch: &'a Path,
}

impl CleanEnv<'_> {
    fn apply(&self, cmd: &mut tokio::process::Command) {
        if self.clean {
            cmd.env_clear()
                .env("PATH", CLEAN_PATH)
                .env("LANG", "C.UTF-8")
                .env("HOME", self.scratch)
                .env("TMPDIR", self.scratch);
        }
    }
}

/// Starts `benchlab shim` in the server cgroup (or pinned to the server CPUs without one), its
/// standard error in `shim_log`.
fn spawn_shim(
    lab: &Path,
    shim_log: &Path,
    placement: &CellPlacement<'_>,
    cgroup: Option<&NativeCgroup>,
    benchlab_exe: &Path,
    env: &CleanEnv<'_>,
) -> Result<tokio::process::Child, EngineError> {
    let server_set = cpu_set(placement.server_cpus)?;
    let procs: Vec<CString> = cgroup
        .map(|c| {
            c.procs_files().iter().map(|p| CString::new(p.as_os_str().as_bytes()).expect("no NUL")).collect()
        })
        .unwrap_or_default();
    let shim_err = std::fs::File::create(shim_log)
        .map_err(|e| EngineError::op("create", shim_log.display().to_string(), e))?;
    let mut shim_cmd = tokio::process::Command::new(benchlab_exe);
    shim_cmd.arg("shim").arg("--dir").arg(lab);
    // The lab cgroup holds the server side alone: its memory is the server's, beside the tree's.
    if let Some(dir) = cgroup.and_then(NativeCgroup::memory_dir) {
        shim_cmd.arg("--memory-cgroup").arg(dir);
    }
    shim_cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(shim_err))
        .process_group(0)
        .kill_on_drop(true);
    env.apply(&mut shim_cmd);
    let with_cgroup = cgroup.is_some();
    // SAFETY: the closure only makes async-signal-safe calls (open, write, close,
    // sched_setaffinity) on data prepared before the fork.
    unsafe {
        shim_cmd.pre_exec(move || {
            if with_cgroup {
                join_cgroups(&procs)
            } else {
                nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &server_set)
                    .map_err(std::io::Error::from)
            }
        });
    }
    shim_cmd.spawn().map_err(|e| {
        EngineError::op(
            "start",
            format!("{} shim", benchlab_exe.display()),
            format!("{e}: the shim could not join its cgroup or start"),
        )
    })
}

/// Starts `benchlab driver` with the cell's spec, pinned to the driver CPUs, output piped.
fn spawn_driver(
    spec: &DriverSpec,
    placement: &CellPlacement<'_>,
    benchlab_exe: &Path,
    env: &CleanEnv<'_>,
) -> Result<tokio::process::Child, EngineError> {
    let driver_set = cpu_set(placement.driver_cpus)?;
    let spec_json = serde_json::to_string(spec).expect("specs serialise");
    let mut driver_cmd = tokio::process::Command::new(benchlab_exe);
    driver_cmd
        .arg("driver")
        .arg("--spec")
        .arg(spec_json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    env.apply(&mut driver_cmd);
    // SAFETY: sched_setaffinity is async-signal-safe; the set was built before the fork.
    unsafe {
        driver_cmd.pre_exec(move || {
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &driver_set)
                .map_err(std::io::Error::from)
        });
    }
    driver_cmd.spawn().map_err(|e| EngineError::op("start", format!("{} driver", benchlab_exe.display()), e))
}

/// Reads the driver's standard output and error into the link until both close, then waits
/// for it.
async fn follow(
    driver: &mut tokio::process::Child,
    link: &mut DriverLink<'_>,
) -> std::io::Result<std::process::ExitStatus> {
    let mut out_lines = BufReader::new(driver.stdout.take().expect("piped")).lines();
    let mut err_lines = BufReader::new(driver.stderr.take().expect("piped")).lines();
    let (mut out_done, mut err_done) = (false, false);
    while !(out_done && err_done) {
        tokio::select! {
            l = out_lines.next_line(), if !out_done => match l {
                Ok(Some(text)) => link.stdout(text),
                _ => out_done = true,
            },
            l = err_lines.next_line(), if !err_done => match l {
                Ok(Some(text)) => link.stderr(text),
                _ => err_done = true,
            },
        }
    }
    driver.wait().await
}

/// Kills the shim's process tree, the shim, and whatever is left in the server cgroup.
async fn kill_everything(shim: &mut tokio::process::Child, cgroup: Option<&NativeCgroup>) {
    if let Some(pid) = shim.id() {
        kill_tree(pid);
    }
    let _ = shim.start_kill();
    if let Some(cg) = cgroup {
        cg.kill_all_async().await;
    }
}

/// The error of a driver that ended without an outcome: its output and the shim's log tail.
fn no_outcome(status: std::process::ExitStatus, driver_tail: &str, shim_log: &Path) -> EngineError {
    let shim_tail = crate::shim::tail(shim_log, 4000).unwrap_or_default();
    EngineError::op(
        "run the native driver for",
        "a cell",
        format!(
            "it exited with {status} without an outcome; its output:\n{driver_tail}{}",
            if shim_tail.trim().is_empty() {
                String::new()
            } else {
                format!("\n--- shim ---\n{}", shim_tail.trim_end())
            }
        ),
    )
}

/// Kills a process tree when dropped while armed (a cancelled or failed cell), leaves first;
/// disarmed once its root is reaped.
struct TreeGuard(Option<u32>);

impl Drop for TreeGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            kill_tree(pid);
        }
    }
}

/// SIGKILLs `root`'s descendants (from /proc's parent links), then `root` itself; a process
/// that exited already is skipped (its pid is not in the tree any more).
fn kill_tree(root: u32) {
    let proc_root = std::path::Path::new("/proc");
    if !proc_root.join(root.to_string()).join("stat").exists() {
        return;
    }
    let Ok(tree) = crate::shim::tree_pids(proc_root, root) else { return };
    for pid in tree.iter().rev() {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid as i32), nix::sys::signal::SIGKILL);
    }
}
