//! Inside the server container: `benchlab shim` stands in for a stdio client's parent process.
//! It spawns the server on request with stdin/stdout on anonymous pipes and hands the client's
//! ends to the driver over the control socket (SCM_RIGHTS), keeps the server's stderr drained into
//! a log file, stops it the way the MCP lifecycle says (close stdin, wait, SIGTERM, SIGKILL) and
//! reads its process tree's memory from /proc. It never measures latency: that is the driver's
//! job, on the other CPU set. Out of the server's reach (`guard`): non-dumpable, the server started
//! as another user when the sandbox says so, under a seccomp filter, its stderr copied into the
//! log by the shim; and nothing the server starts outlives its spawn (`sweep`).

pub mod guard;
pub mod sweep;

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, IoSlice, IoSliceMut, Read, Seek, SeekFrom};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::spec::{ExitInfo, Leftovers, Reply, Request, TreeMemory, SOCKET};
use nix::fcntl::OFlag;
use nix::sys::signal::{killpg, Signal};
use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use nix::unistd::Pid;
use sweep::Scope;

/// Reads the memory of `root` and its descendants from a /proc-like folder (a root path, so
/// tests can point it at fixtures).
pub fn tree_memory(proc_root: &Path, root: u32) -> std::io::Result<TreeMemory> {
    let mut mem = TreeMemory::default();
    for pid in tree_pids(proc_root, root)? {
        let Ok(status) = std::fs::read_to_string(proc_root.join(pid.to_string()).join("status")) else {
            continue;
        };
        if is_dead(&status) {
            continue; // exited, not yet reaped: no memory, and not a live server
        }
        mem.processes += 1;
        mem.rss_bytes += status_kib(&status, "VmRSS:") * 1024;
        mem.hwm_bytes += status_kib(&status, "VmHWM:") * 1024;
    }
    Ok(mem)
}

/// Whether a `/proc/<pid>/status` is a zombie's or a dead process's (`State: Z` or `X`): a
/// server killed by the OOM killer or exited stays a zombie until the shim reaps it, and must
/// count as gone.
pub(crate) fn is_dead(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .is_some_and(|v| matches!(v.trim_start().chars().next(), Some('Z' | 'X')))
}

/// `root` and its descendants, from the parent links in a /proc-like folder.
pub fn tree_pids(proc_root: &Path, root: u32) -> std::io::Result<Vec<u32>> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir(proc_root)? {
        let entry = entry?;
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue; // the process went away while we looked
        };
        if let Some(ppid) = parse_ppid(&stat) {
            parents.push((pid, ppid));
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    Ok(tree)
}

/// User plus system CPU time of `root`'s live process tree, in clock ticks.
pub fn tree_cpu_ticks(proc_root: &Path, root: u32) -> std::io::Result<u64> {
    let mut ticks = 0;
    for pid in tree_pids(proc_root, root)? {
        if let Ok(stat) = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")) {
            ticks += parse_cpu_ticks(&stat).unwrap_or(0);
        }
    }
    Ok(ticks)
}

/// utime + stime (fields 14 and 15 of /proc/<pid>/stat), parsed from past the last ')'.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    Some(f.next()?.parse::<u64>().ok()? + f.next()?.parse::<u64>().ok()?)
}

/// The first of `files` (under `cgroup_root`) that holds a number, and where it was read; else
/// None and what was tried.
fn cgroup_number(cgroup_root: &Path, files: [&str; 2]) -> (Option<u64>, String) {
    for rel in files {
        let path = cgroup_root.join(rel);
        if let Ok(text) = std::fs::read_to_string(&path) {
            if let Ok(v) = text.trim().parse() {
                return (Some(v), path.display().to_string());
            }
        }
    }
    (None, format!("no {} or {} readable", files[0], files[1]))
}

/// The container's cgroup memory peak: cgroup v2 `memory.peak`, or v1
/// `memory/memory.max_usage_in_bytes`, under `cgroup_root`.
pub fn cgroup_peak(cgroup_root: &Path) -> (Option<u64>, String) {
    cgroup_number(cgroup_root, ["memory.peak", "memory/memory.max_usage_in_bytes"])
}

/// The container's cgroup memory usage now: cgroup v1 `memory/memory.usage_in_bytes` (what this
/// lab's hosts mount; the server container's own cgroup appears there), else v2
/// `memory.current` (untested: no v2 host here), under `cgroup_root`.
pub fn cgroup_usage(cgroup_root: &Path) -> (Option<u64>, String) {
    cgroup_number(cgroup_root, ["memory/memory.usage_in_bytes", "memory.current"])
}

/// The process group from /proc/<pid>/stat (the field after the parent pid).
fn parse_pgrp(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// The parent pid from /proc/<pid>/stat; the command name may hold spaces and parentheses, so
/// parse from the last ')'.
fn parse_ppid(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

pub(crate) fn status_kib(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l[key.len()..].split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Shim {
    proc_root: PathBuf,
    children: HashMap<u32, Child>,
    /// `(uid, gid)` the server runs as, when not the shim's own.
    server_user: Option<(u32, u32)>,
    /// Where leftovers are looked for.
    scope: Scope,
    /// The memory cgroup folder that holds the server side alone, when there is one.
    memory_cgroup: Option<PathBuf>,
    /// The seccomp program each server gets before its exec.
    filter: Vec<libc::sock_filter>,
    /// Each live server's stderr pump (pipe to log) and what was swept before its spawn.
    /// A pump says it is done on its channel (the pipe closed: every writer is gone).
    pumps: HashMap<u32, std::sync::mpsc::Receiver<()>>,
    swept_at_spawn: HashMap<u32, Leftovers>,
}

/// How long the shim waits for the processes it killed to be gone, and for a stopped server's
/// stderr to reach its log.
const SWEEP_LIMIT: Duration = Duration::from_secs(5);
const PUMP_LIMIT: Duration = Duration::from_secs(2);

impl Shim {
    /// Handles a request; a spawn also returns the client's ends of the server's pipes.
    fn handle(&mut self, req: Request) -> (Reply, Vec<OwnedFd>) {
        let reply = match req {
            Request::Spawn { argv, env, cwd, stderr_log, output_to_log } => {
                // Nothing of an earlier spawn may still run when this one starts.
                let keep: Vec<u32> = self.children.keys().copied().collect();
                let swept = match sweep::sweep(&self.proc_root, &self.scope, &keep, SWEEP_LIMIT) {
                    Ok(swept) => swept,
                    Err(message) => return (Reply::Error { message }, Vec::new()),
                };
                return match self.spawn(&argv, &env, cwd.as_deref(), &stderr_log, output_to_log) {
                    Ok((pid, ends)) => {
                        if swept.processes > 0 {
                            self.swept_at_spawn.insert(pid, swept);
                        }
                        (Reply::Spawned { pid }, ends)
                    }
                    Err(e) => (Reply::Error { message: format!("spawn {argv:?}: {e}") }, Vec::new()),
                };
            }
            Request::Memory { pid } => match tree_memory(&self.proc_root, pid) {
                Ok(memory) => Reply::Memory { memory },
                Err(e) => Reply::Error { message: format!("read /proc for pid {pid}: {e}") },
            },
            Request::Cpu { pid } => match tree_cpu_ticks(&self.proc_root, pid) {
                Ok(ticks) => {
                    // SAFETY: sysconf has no preconditions.
                    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
                    Reply::Cpu { cpu_ns: ticks * (1_000_000_000 / hz) }
                }
                Err(e) => Reply::Error { message: format!("read /proc for pid {pid}: {e}") },
            },
            Request::CgroupPeak => {
                let (bytes, source) = cgroup_peak(Path::new("/sys/fs/cgroup"));
                Reply::CgroupPeak { bytes, source }
            }
            Request::CgroupUsage => {
                let (bytes, source) = cgroup_usage(Path::new("/sys/fs/cgroup"));
                Reply::CgroupUsage { bytes, source }
            }
            Request::CgroupMemory { pid } => {
                let tree = tree_pids(&self.proc_root, pid).unwrap_or_default();
                let tree_anon = sweep::anon_of(&self.proc_root, &tree);
                let shim_anon = sweep::anon_of(&self.proc_root, &[std::process::id()]);
                match &self.memory_cgroup {
                    Some(dir) => {
                        let (memory, source) = sweep::cgroup_memory(dir, tree_anon, shim_anon);
                        Reply::CgroupMemory { memory, source }
                    }
                    None => Reply::CgroupMemory {
                        memory: None,
                        source:
                            "no memory cgroup of the server's own (a shim outside a container, given none)"
                                .into(),
                    },
                }
            }
            Request::Stop { pid, grace_ms, term_ms } => {
                let memory_before_stop = tree_memory(&self.proc_root, pid).ok().filter(|m| m.processes > 0);
                match self.stop(pid, grace_ms, term_ms) {
                    Ok(exit) => Reply::Stopped { exit, memory_before_stop },
                    Err(message) => Reply::Error { message },
                }
            }
            Request::Shutdown => Reply::Bye,
        };
        (reply, Vec::new())
    }

    /// Spawns the server on fresh anonymous pipes (what a local client's fork would give it) and
    /// returns its pid with the client's ends: stdin's write end, stdout's read end.
    fn spawn(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
        cwd: Option<&str>,
        stderr_log: &Path,
        output_to_log: bool,
    ) -> std::io::Result<(u32, Vec<OwnedFd>)> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty argv"))?;
        // The server writes its stderr into a pipe; the shim copies it into the log, which the
        // server never holds (it cannot rewrite or append to another spawn's log).
        let log = File::create(stderr_log)?;
        let (err_r, err_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let stderr = File::from(err_w);
        let mut ends = Vec::new();
        let (stdin, stdout) = if output_to_log {
            (Stdio::null(), Stdio::from(stderr.try_clone()?))
        } else {
            let (stdin, stdin_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
            let (stdout_r, stdout) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
            ends = vec![stdin_w, stdout_r];
            (Stdio::from(stdin), Stdio::from(stdout))
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(stdin)
            .stdout(stdout)
            .stderr(Stdio::from(stderr))
            // Its own process group, so a stop reaches every process the server started.
            .process_group(0);
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        if let Some((uid, gid)) = self.server_user {
            // std drops the supplementary groups, then setgid, setuid: the capabilities go too.
            cmd.uid(uid).gid(gid);
        }
        let filter = self.filter.clone();
        // SAFETY: the closure runs in the forked child before exec and only makes two prctl
        // calls on memory allocated before the fork (`install_filter` does not allocate).
        unsafe {
            cmd.pre_exec(move || guard::install_filter(&filter));
        }
        // The child's ends are dropped (closed here) with `cmd`; only the server holds them.
        let child = cmd.spawn()?;
        drop(cmd);
        let pid = child.id();
        let (done, pump) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut from = File::from(err_r);
            let mut log = log;
            let _ = std::io::copy(&mut from, &mut log);
            let _ = done.send(());
        });
        self.children.insert(pid, child);
        self.pumps.insert(pid, pump);
        Ok((pid, ends))
    }

    fn stop(&mut self, pid: u32, grace_ms: u64, term_ms: u64) -> Result<ExitInfo, String> {
        let mut child = self.children.remove(&pid).ok_or_else(|| format!("no server with pid {pid}"))?;
        let started = Instant::now();
        let group = Pid::from_raw(pid as i32);
        let mut how = "already_exited";
        let mut status = child.try_wait().map_err(|e| e.to_string())?;
        if status.is_none() {
            how = "exited";
            status = wait_until(&mut child, Duration::from_millis(grace_ms));
        }
        if status.is_none() {
            how = "terminated";
            let _ = killpg(group, Signal::SIGTERM);
            status = wait_until(&mut child, Duration::from_millis(term_ms));
        }
        if status.is_none() {
            how = "killed";
            let _ = killpg(group, Signal::SIGKILL);
            status = child.wait().ok();
        }
        let status = status.ok_or_else(|| format!("could not reap pid {pid}"))?;
        // Whatever the server left behind, in its group or out of it, is found, counted and
        // killed before the stop is answered.
        let keep: Vec<u32> = self.children.keys().copied().collect();
        let now = match &self.scope {
            Scope::GroupOnly => self.group_members(pid, &keep),
            scope => sweep::sweep(&self.proc_root, scope, &keep, SWEEP_LIMIT)?,
        };
        let _ = killpg(group, Signal::SIGKILL);
        reap_orphans();
        let left = now.plus(self.swept_at_spawn.remove(&pid).unwrap_or_default());
        self.finish_pump(pid);
        Ok(ExitInfo {
            how: how.into(),
            code: status.code(),
            signal: status.signal(),
            stop_ms: started.elapsed().as_secs_f64() * 1e3,
            left_behind: (left.processes > 0).then_some(left),
        })
    }

    /// The live processes of the server's process group once the server itself is gone (its
    /// children left running), outside the trees of `keep`; counted before the group is killed.
    /// A shim that can see no further (on the host, without a user of the server's own) counts
    /// only these.
    fn group_members(&self, pgid: u32, keep: &[u32]) -> Leftovers {
        let mut kept = Vec::new();
        for k in keep {
            kept.extend(tree_pids(&self.proc_root, *k).unwrap_or_default());
        }
        let mut left = Leftovers::default();
        let Ok(entries) = std::fs::read_dir(&self.proc_root) else {
            return left;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let (Ok(stat), Ok(status)) = (
                std::fs::read_to_string(entry.path().join("stat")),
                std::fs::read_to_string(entry.path().join("status")),
            ) else {
                continue;
            };
            if is_dead(&status) || kept.contains(&pid) || parse_pgrp(&stat) != Some(pgid) {
                continue;
            }
            left = left.plus(Leftovers { processes: 1, rss_bytes: status_kib(&status, "VmRSS:") * 1024 });
        }
        left
    }

    /// Waits (a bounded time) for a stopped server's stderr pump to copy the last of it.
    fn finish_pump(&mut self, pid: u32) {
        let Some(pump) = self.pumps.remove(&pid) else { return };
        // Its end, or the limit: a pipe still held open (a leftover the sweep has not reached)
        // must not hold the stop's answer; the pump then ends with the pipe's last writer.
        let _ = pump.recv_timeout(PUMP_LIMIT);
    }

    /// Kills every server and whatever they left (a driver gone without stopping them, or the
    /// end of the cell): nothing of this driver's cell waits for the next.
    fn kill_all(&mut self) {
        for (pid, mut child) in self.children.drain() {
            let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
            let _ = child.wait();
        }
        // No one to answer: what was left is in the stops already answered, or goes unrecorded
        // with a driver that left without asking.
        let _ = sweep::sweep(&self.proc_root, &self.scope, &[], SWEEP_LIMIT);
        self.pumps.clear();
        self.swept_at_spawn.clear();
    }
}

fn wait_until(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The shim is PID 1 of the server container: processes re-parented to it must be reaped. Only
/// called when none of our own children is alive, so no exit status of ours is taken.
fn reap_orphans() {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    if std::process::id() != 1 {
        return;
    }
    while let Ok(s) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
        if s == WaitStatus::StillAlive {
            break;
        }
    }
}

/// Runs the shim: serves the control socket in `dir` until a `shutdown` request. With a
/// `server_user`, servers run as that user and `dir` is closed to it (mode 0750, the shim's
/// group: the driver's). `memory_cgroup` is the memory cgroup folder of the server side (its
/// container's own when the shim is PID 1 and given none).
pub fn run(
    dir: &Path,
    proc_root: &Path,
    server_user: Option<(u32, u32)>,
    memory_cgroup: Option<PathBuf>,
) -> anyhow::Result<()> {
    guard::make_non_dumpable().map_err(|e| anyhow::anyhow!("make the shim non-dumpable: {e}"))?;
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER, 1) takes no pointers. Orphans of the server come to
    // the shim (it reaps what it kills) when it is not PID 1 already.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if server_user.is_some() {
        guard::close_lab(dir).map_err(|e| anyhow::anyhow!("close the lab folder to the server: {e}"))?;
    }
    let sock = dir.join(SOCKET);
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock)
        .map_err(|e| anyhow::anyhow!("bind control socket {}: {e}", sock.display()))?;
    if server_user.is_some() {
        // The driver connects through the lab's group.
        guard::lab_only(&sock, 0o770).map_err(|e| anyhow::anyhow!("chmod {}: {e}", sock.display()))?;
    }
    let procs = memory_cgroup.as_ref().map(|d| d.join("cgroup.procs")).filter(|p| p.exists());
    let scope = match (server_user, procs) {
        (Some((uid, _)), _) => Scope::Uid(uid),
        (None, _) if std::process::id() == 1 => Scope::Container { shim: 1 },
        (None, Some(procs)) => Scope::Cgroup { procs, shim: std::process::id() },
        (None, None) => Scope::GroupOnly,
    };
    let mut shim = Shim {
        proc_root: proc_root.to_path_buf(),
        children: HashMap::new(),
        server_user,
        scope,
        memory_cgroup: memory_cgroup
            .or_else(|| sweep::default_memory_cgroup(Path::new("/sys/fs/cgroup"), std::process::id() == 1)),
        filter: guard::tracing_filter(),
        pumps: HashMap::new(),
        swept_at_spawn: HashMap::new(),
    };
    for conn in listener.incoming() {
        let conn = conn?;
        if serve_connection(&mut shim, conn)? {
            break;
        }
    }
    shim.kill_all();
    let _ = std::fs::remove_file(&sock);
    Ok(())
}

/// Serves one driver connection; true when the driver asked the shim to exit.
fn serve_connection(shim: &mut Shim, conn: UnixStream) -> anyhow::Result<bool> {
    let writer = conn.try_clone()?;
    let reader = BufReader::new(conn);
    for line in reader.lines() {
        let line = line?;
        let (reply, fds) = match serde_json::from_str::<Request>(&line) {
            Ok(Request::Shutdown) => {
                shim.kill_all();
                send_reply(&writer, &Reply::Bye, &[])?;
                return Ok(true);
            }
            Ok(req) => shim.handle(req),
            Err(e) => (Reply::Error { message: format!("bad request: {e}") }, Vec::new()),
        };
        send_reply(&writer, &reply, &fds)?;
        // Our copies of the client's ends close here: the driver holds them now.
        drop(fds);
    }
    // The driver went away without a shutdown: stop its servers, wait for the next driver.
    shim.kill_all();
    Ok(false)
}

/// Sends one reply line, with descriptors attached (SCM_RIGHTS) when there are any.
fn send_reply(sock: &UnixStream, reply: &Reply, fds: &[OwnedFd]) -> std::io::Result<()> {
    let mut line = serde_json::to_string(reply).expect("replies serialise");
    line.push('\n');
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let cmsgs = [ControlMessage::ScmRights(&raw)];
    let mut sent = 0;
    while sent < line.len() {
        let iov = [IoSlice::new(&line.as_bytes()[sent..])];
        // The descriptors ride with the first byte.
        let c: &[ControlMessage] = if sent == 0 && !raw.is_empty() { &cmsgs } else { &[] };
        sent += sendmsg::<()>(sock.as_raw_fd(), &iov, c, MsgFlags::empty(), None)?;
    }
    Ok(())
}

/// Receives one reply line and the descriptors that came with it.
pub fn recv_reply(sock: &UnixStream) -> std::io::Result<(String, Vec<OwnedFd>)> {
    let mut line = Vec::with_capacity(256);
    let mut fds = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let mut cmsg = nix::cmsg_space!([RawFd; 4]);
        let mut iov = [IoSliceMut::new(&mut buf)];
        let msg = recvmsg::<()>(sock.as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::MSG_CMSG_CLOEXEC)?;
        for c in msg.cmsgs()? {
            if let ControlMessageOwned::ScmRights(received) = c {
                // SAFETY: the kernel just installed these descriptors in our table; we own them.
                fds.extend(received.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
            }
        }
        let n = msg.bytes;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the shim closed its control socket",
            ));
        }
        line.extend_from_slice(&buf[..n]);
        // Request and reply alternate, so a reply never shares a read with the next one.
        if line.ends_with(b"\n") {
            line.pop();
            return Ok((String::from_utf8_lossy(&line).into_owned(), fds));
        }
    }
}

/// The last `max` bytes of a log file, as text (for failure details).
pub fn tail(path: &Path, max: u64) -> Option<String> {
    let mut f = File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(max))).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_proc(root: &Path, pid: u32, ppid: u32, comm: &str, rss_kib: u64, hwm_kib: u64) {
        let d = root.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("stat"), format!("{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560")).unwrap();
        std::fs::write(
            d.join("status"),
            format!("Name:\t{comm}\nVmHWM:\t {hwm_kib} kB\nVmRSS:\t {rss_kib} kB\n"),
        )
        .unwrap();
    }

    #[test]
    fn sums_the_whole_tree_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        write_proc(r, 1, 0, "benchlab", 1000, 1000);
        write_proc(r, 10, 1, "python3", 30_000, 35_000);
        write_proc(r, 11, 10, "worker (a) b", 5_000, 6_000);
        write_proc(r, 12, 11, "grandchild", 100, 200);
        write_proc(r, 20, 1, "other", 7_000, 7_000);
        std::fs::create_dir_all(r.join("self")).unwrap();
        let m = tree_memory(r, 10).unwrap();
        assert_eq!(m.processes, 3);
        assert_eq!(m.rss_bytes, (30_000 + 5_000 + 100) * 1024);
        assert_eq!(m.hwm_bytes, (35_000 + 6_000 + 200) * 1024);
        assert_eq!(tree_memory(r, 99).unwrap().processes, 0);
        // A zombie (exited or OOM-killed, not yet reaped) is no process of the tree.
        std::fs::write(r.join("12/status"), "Name:\tgrandchild\nState:\tZ (zombie)\n").unwrap();
        let m = tree_memory(r, 10).unwrap();
        assert_eq!((m.processes, m.rss_bytes), (2, (30_000 + 5_000) * 1024));
    }

    #[test]
    fn cpu_ticks_are_utime_plus_stime() {
        let stat = "42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 250 70 0 0 20 0 1 0";
        assert_eq!(parse_cpu_ticks(stat), Some(320));
    }

    #[test]
    fn cgroup_usage_reads_v1_then_v2() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        assert_eq!(cgroup_usage(r).0, None);
        std::fs::write(r.join("memory.current"), "2048\n").unwrap();
        assert_eq!(cgroup_usage(r).0, Some(2048));
        std::fs::create_dir_all(r.join("memory")).unwrap();
        std::fs::write(r.join("memory/memory.usage_in_bytes"), "4096\n").unwrap();
        let (bytes, source) = cgroup_usage(r);
        assert_eq!(bytes, Some(4096));
        assert!(source.ends_with("memory/memory.usage_in_bytes"), "{source}");
    }

    #[test]
    fn parses_ppid_past_odd_command_names() {
        assert_eq!(parse_ppid("42 (a) b) c) R 7 42 42"), Some(7));
    }
}
