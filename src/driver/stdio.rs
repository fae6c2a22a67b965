//! The driver's side of the stdio bridge: the control-socket client of the shim, and a server
//! session speaking newline-delimited JSON-RPC over the anonymous pipes the shim spawned the
//! server on (the client's ends arrive over the control socket, as SCM_RIGHTS).
//! Reads use poll(2) with deadlines so a hung server becomes a `timeout`, never a hung driver.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use serde_json::Value;

use crate::mcp::{self, Incoming, RpcError};
use crate::shim::{self};
use crate::spec::ServerLaunch;
use crate::spec::{CgroupMemory, ExitInfo, Reply, Request, TreeMemory};
use crate::spec::{Failure, FailureReason};

/// The control-socket client of the shim.
pub struct ShimClient {
    sock: UnixStream,
}

impl ShimClient {
    /// Connects to the shim's socket in `dir`, retrying until `limit` passes (the shim may still
    /// be starting in the other container).
    pub fn connect(dir: &Path, limit: Duration) -> Result<Self, Failure> {
        let path = dir.join(crate::spec::SOCKET);
        let deadline = Instant::now() + limit;
        loop {
            match UnixStream::connect(&path) {
                Ok(sock) => return Ok(ShimClient { sock }),
                Err(e) if Instant::now() >= deadline => {
                    return Err(Failure::new(
                        FailureReason::EngineError,
                        format!("the shim did not answer on {} within {limit:?}: {e}", path.display()),
                    ))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }

    /// Sends a request; returns the reply and any descriptors that came with it.
    pub fn call_with_fds(&mut self, req: &Request) -> Result<(Reply, Vec<OwnedFd>), Failure> {
        let mut line = serde_json::to_string(req).expect("requests serialise");
        line.push('\n');
        (&self.sock).write_all(line.as_bytes()).map_err(engine_failure)?;
        let (answer, fds) = shim::recv_reply(&self.sock).map_err(engine_failure)?;
        let reply: Reply = serde_json::from_str(&answer).map_err(|e| {
            Failure::new(FailureReason::EngineError, format!("bad shim reply {answer:?}: {e}"))
        })?;
        if let Reply::Error { message } = reply {
            return Err(Failure::new(FailureReason::EngineError, format!("shim: {message}")));
        }
        Ok((reply, fds))
    }

    pub fn call(&mut self, req: &Request) -> Result<Reply, Failure> {
        self.call_with_fds(req).map(|(reply, _)| reply)
    }

    /// A second client on the same connection, for a sampler thread while this one is idle.
    pub fn try_clone(&self) -> Result<ShimClient, Failure> {
        Ok(ShimClient { sock: self.sock.try_clone().map_err(engine_failure)? })
    }

    /// Spawns a server whose stdout and stderr go to `log` (HTTP servers); returns its pid.
    pub fn spawn_logged(&mut self, launch: &ServerLaunch, log: &Path) -> Result<u32, Failure> {
        match self.call(&Request::Spawn {
            argv: launch.argv.clone(),
            env: launch.env.clone(),
            cwd: launch.cwd.clone(),
            stderr_log: log.to_path_buf(),
            output_to_log: true,
        })? {
            Reply::Spawned { pid } => Ok(pid),
            other => Err(unexpected(other)),
        }
    }

    /// CPU time used so far by the server's live process tree, in nanoseconds.
    pub fn cpu_ns(&mut self, pid: u32) -> Result<u64, Failure> {
        match self.call(&Request::Cpu { pid })? {
            Reply::Cpu { cpu_ns } => Ok(cpu_ns),
            other => Err(unexpected(other)),
        }
    }

    /// The server container's cgroup memory peak, if the shim can read it.
    pub fn cgroup_peak(&mut self) -> Result<Option<u64>, Failure> {
        match self.call(&Request::CgroupPeak)? {
            Reply::CgroupPeak { bytes, .. } => Ok(bytes),
            other => Err(unexpected(other)),
        }
    }

    /// The server container's cgroup memory usage now, if the shim can read it.
    pub fn cgroup_usage(&mut self) -> Result<Option<u64>, Failure> {
        match self.call(&Request::CgroupUsage)? {
            Reply::CgroupUsage { bytes, .. } => Ok(bytes),
            other => Err(unexpected(other)),
        }
    }

    /// The server container's cgroup memory beside `pid`'s process tree, if the shim can read it.
    pub fn cgroup_memory(&mut self, pid: u32) -> Result<Option<CgroupMemory>, Failure> {
        match self.call(&Request::CgroupMemory { pid })? {
            Reply::CgroupMemory { memory, .. } => Ok(memory),
            other => Err(unexpected(other)),
        }
    }

    /// Stops a server that has no stdin of ours: SIGTERM at once, SIGKILL after `term`.
    pub fn stop_pid(&mut self, pid: u32, term: Duration) -> Result<(ExitInfo, Option<TreeMemory>), Failure> {
        match self.call(&Request::Stop { pid, grace_ms: 0, term_ms: term.as_millis() as u64 })? {
            Reply::Stopped { exit, memory_before_stop } => Ok((exit, memory_before_stop)),
            other => Err(unexpected(other)),
        }
    }

    pub fn memory(&mut self, pid: u32) -> Result<TreeMemory, Failure> {
        match self.call(&Request::Memory { pid })? {
            Reply::Memory { memory } => Ok(memory),
            other => Err(unexpected(other)),
        }
    }
}

fn engine_failure(e: std::io::Error) -> Failure {
    Failure::new(FailureReason::EngineError, format!("control socket: {e}"))
}

fn unexpected(reply: Reply) -> Failure {
    Failure::new(FailureReason::EngineError, format!("unexpected shim reply {reply:?}"))
}

/// One running server, as its stdio client sees it.
pub struct Session {
    pub pid: u32,
    stdin: Option<File>,
    stdout: File,
    buf: Vec<u8>,
    start: usize,
    filled: usize,
    last_read: Instant,
    next_id: u64,
    write_limit: Duration,
    pub stderr_log: PathBuf,
}

/// A completed request: its latency and the server's outcome.
pub struct Answer {
    pub latency: Duration,
    pub outcome: Result<Value, RpcError>,
}

impl Session {
    /// Spawns the server through the shim and returns with the client's ends of its pipes; the
    /// caller starts its clock before this call (the spawn is part of a cold start).
    pub fn spawn(
        shim: &mut ShimClient,
        launch: &ServerLaunch,
        dir: &Path,
        n: u32,
        write_limit: Duration,
    ) -> Result<Session, Failure> {
        let stderr_log = dir.join(format!("s{n}.stderr.log"));
        let (reply, mut fds) = shim.call_with_fds(&Request::Spawn {
            argv: launch.argv.clone(),
            env: launch.env.clone(),
            cwd: launch.cwd.clone(),
            stderr_log: stderr_log.clone(),
            output_to_log: false,
        })?;
        let pid = match reply {
            Reply::Spawned { pid } => pid,
            other => return Err(unexpected(other)),
        };
        if fds.len() != 2 {
            return Err(Failure::new(
                FailureReason::EngineError,
                format!("the shim sent {} descriptors with the spawn, not 2", fds.len()),
            ));
        }
        let stdout = File::from(fds.pop().expect("two descriptors"));
        let stdin = File::from(fds.pop().expect("two descriptors"));
        // Both ends non-blocking: reads and writes wait in poll(2), with deadlines.
        for f in [&stdin, &stdout] {
            let fd = f.as_raw_fd();
            // SAFETY: fcntl on a descriptor we own.
            unsafe {
                let flags = libc::fcntl(fd, libc::F_GETFL);
                libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
            }
        }
        Ok(Session {
            pid,
            stdin: Some(stdin),
            stdout,
            buf: vec![0; 1 << 16],
            start: 0,
            filled: 0,
            last_read: Instant::now(),
            next_id: 1,
            write_limit,
            stderr_log,
        })
    }

    /// Sends one pre-rendered line. stdin is non-blocking: a server that stops reading fills the
    /// pipe, and the write waits for room only until the call limit.
    pub fn send(&mut self, line: &str) -> Result<(), Failure> {
        let deadline = Instant::now() + self.write_limit;
        let stdin =
            self.stdin.as_ref().ok_or_else(|| Failure::new(FailureReason::Crash, "stdin already closed"))?;
        let mut rest = line.as_bytes();
        while !rest.is_empty() {
            match nix::unistd::write(stdin, rest) {
                Ok(n) => rest = &rest[n..],
                Err(nix::errno::Errno::EAGAIN) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(Failure::new(
                            FailureReason::Timeout,
                            "the server stopped reading its stdin (pipe full)",
                        ));
                    }
                    let ms = (deadline - now).as_millis().clamp(1, i32::MAX as u128) as i32;
                    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLOUT)];
                    let _ = poll(&mut fds, PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX));
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => {
                    return Err(Failure::new(
                        FailureReason::Crash,
                        format!("write to the server's stdin: {e}"),
                    ))
                }
            }
        }
        Ok(())
    }

    /// Sends a request and waits for its response; the latency runs from just before the write
    /// to the read that completed the response line.
    pub fn request(&mut self, method: &str, params: &Value, timeout: Duration) -> Result<Answer, Failure> {
        let id = self.reserve_ids(1);
        let line = mcp::request_line(id, method, params);
        self.request_prerendered(id, &line, timeout, method)
    }

    /// Like `request`, with the line rendered by the caller before the clock starts.
    pub fn request_prerendered(
        &mut self,
        id: u64,
        line: &str,
        timeout: Duration,
        what: &str,
    ) -> Result<Answer, Failure> {
        let started = Instant::now();
        self.send(line)?;
        self.await_response(id, started, timeout, what)
    }

    /// Reserves `n` request ids for pre-rendered requests; returns the first.
    pub fn reserve_ids(&mut self, n: u64) -> u64 {
        let first = self.next_id;
        self.next_id += n;
        first
    }

    fn await_response(
        &mut self,
        id: u64,
        started: Instant,
        timeout: Duration,
        what: &str,
    ) -> Result<Answer, Failure> {
        let deadline = started + timeout;
        loop {
            let (line, arrived) = self.read_line(deadline, what)?;
            match mcp::parse_incoming(&line) {
                Ok(Incoming::Response { id: got, outcome }) if got == id => {
                    return Ok(Answer { latency: arrived - started, outcome });
                }
                Ok(Incoming::Response { id: got, .. }) => {
                    return Err(Failure::new(
                        FailureReason::ProtocolError,
                        format!("{what}: a response to id {got} arrived while waiting for id {id}"),
                    ))
                }
                Ok(Incoming::Notification { .. }) => continue,
                Ok(Incoming::Request { id: rid, method }) => {
                    // Answer pings as a client must; refuse what a benchmark client does not offer.
                    let reply = if method == "ping" {
                        serde_json::json!({"jsonrpc": "2.0", "id": rid, "result": {}})
                    } else {
                        serde_json::json!({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "not supported by benchlab"}})
                    };
                    self.send(&format!("{reply}\n"))?;
                }
                Err(e) => {
                    let shown: String = String::from_utf8_lossy(&line).chars().take(200).collect();
                    return Err(Failure::new(
                        FailureReason::ProtocolError,
                        format!("{what}: the server wrote a line that is not JSON-RPC ({e}): {shown:?}"),
                    ));
                }
            }
        }
    }

    /// The next line from the server's stdout and the instant the read that completed it
    /// returned.
    fn read_line(&mut self, deadline: Instant, what: &str) -> Result<(Vec<u8>, Instant), Failure> {
        let mut searched = self.start;
        let mut end = self.filled;
        loop {
            if let Some(pos) = self.buf[searched..end].iter().position(|&b| b == b'\n') {
                let line = self.buf[self.start..searched + pos].to_vec();
                self.start = searched + pos + 1;
                return Ok((line, self.last_read));
            }
            searched = end;
            if self.start > 0 {
                self.buf.copy_within(self.start..end, 0);
                end -= self.start;
                searched -= self.start;
                self.start = 0;
            }
            if end == self.buf.len() {
                if self.buf.len() >= 64 << 20 {
                    return Err(Failure::new(
                        FailureReason::ProtocolError,
                        format!("{what}: a line longer than 64 MiB"),
                    ));
                }
                self.buf.resize(self.buf.len() * 2, 0);
            }
            let now = Instant::now();
            if now >= deadline {
                self.filled = end;
                return Err(Failure::new(
                    FailureReason::Timeout,
                    format!("{what}: no answer within the time limit"),
                ));
            }
            let left = deadline - now;
            let mut fds = [PollFd::new(self.stdout.as_fd(), PollFlags::POLLIN)];
            let ms = left.as_millis().min(i32::MAX as u128) as i32;
            match poll(&mut fds, PollTimeout::try_from(ms.max(1)).unwrap_or(PollTimeout::MAX)) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(Failure::new(FailureReason::EngineError, format!("poll: {e}"))),
            }
            match nix::unistd::read(self.stdout.as_raw_fd(), &mut self.buf[end..]) {
                Ok(0) => {
                    self.filled = end;
                    return Err(Failure::new(
                        FailureReason::Crash,
                        format!("{what}: the server closed its stdout (it exited or crashed)"),
                    ));
                }
                Ok(n) => {
                    self.last_read = Instant::now();
                    end += n;
                }
                Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => {
                    return Err(Failure::new(FailureReason::Crash, format!("{what}: read stdout: {e}")))
                }
            }
            self.filled = end;
        }
    }

    /// Closes the server's stdin (the first step of the MCP shutdown).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Stops the server through the shim: close stdin, wait, SIGTERM, SIGKILL.
    pub fn stop(
        mut self,
        shim: &mut ShimClient,
        grace: Duration,
        term: Duration,
    ) -> Result<(ExitInfo, Option<TreeMemory>), Failure> {
        self.close_stdin();
        match shim.call(&Request::Stop {
            pid: self.pid,
            grace_ms: grace.as_millis() as u64,
            term_ms: term.as_millis() as u64,
        })? {
            Reply::Stopped { exit, memory_before_stop } => Ok((exit, memory_before_stop)),
            other => Err(unexpected(other)),
        }
    }
}

/// Reads the tail of a session's stderr log, for failure details.
pub fn stderr_tail(session_log: &Path) -> Option<String> {
    shim::tail(session_log, 2048).filter(|s| !s.trim().is_empty())
}
