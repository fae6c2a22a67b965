//! The closed loop (`concurrency`, `http_api`): every virtual user calls back to back on its own
//! connection until the window ends (a soak's ramp starts them one by one; stages start and stop
//! them, `flows::Turn`; think time pauses them). What a call is and what is counted is
//! `worker`'s. `iteration_worker`: iterations of a flow's sessions, each step timed.

use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::driver::httpclient::CallTimer;
use crate::driver::httpclient::McpClient;
use crate::driver::load::flows::{Flow, Step, Turn};
use crate::driver::load::worker::{Client, Shared, WorkerStats, PREPARED};
use crate::spec::Lifecycle;

/// Closed loop: open a session, then call back to back until the end; count completions in the
/// window (those of the warm-up go to a warm-up rule, if one judges).
///
/// `together`: other users share this thread. Each call after the first then waits, before its
/// clock starts, for the thread's next look at its sockets (`yield_now`), so that the answers
/// that came in together are all read before any next request is written, and those requests
/// reach the server together — as wrk's do: it writes a connection's next request on the
/// socket's next writable event, not as the answer completes. The server then takes them in
/// one wake-up rather than one each; in alternating rounds against wrk on the null server
/// (`benches/http_driver.rs`), about 5 % more calls/s at 10 and at 100 connections.
pub(super) async fn closed_worker(sh: Rc<Shared>, w: u64, start: Instant, together: bool) -> WorkerStats {
    let mut st = WorkerStats::new();
    let mut timer = CallTimer::new();
    tokio::time::sleep_until(start.into()).await;
    let mut client: Option<Client> = None;
    let mut i = w;
    let per_call = sh.lifecycle == Lifecycle::PerCall && !sh.rest;
    let mut turn = Turn::new(&sh, w, start);
    let mut think = sh.think.map(|t| (t, t.rng(w)));
    loop {
        if turn.must_stop() {
            if let Some(Client::Mcp(m)) = client.take() {
                m.close(&mut st.counts).await;
            }
            if !turn.wait().await {
                break;
            }
            continue;
        }
        if together && i != w {
            tokio::task::yield_now().await;
        }
        let t0 = Instant::now();
        if t0 >= sh.end() {
            break;
        }
        let fresh = client.is_none() || per_call;
        if fresh {
            match sh.open(&mut st.counts).await {
                Ok(c) => {
                    st.sessions += 1;
                    client = Some(c);
                }
                Err(e) => {
                    let done = Instant::now();
                    let r = Err(e);
                    sh.tick(done, done - t0, &r);
                    if sh.counts_at(done) {
                        st.account(&sh, done, done - t0, &r);
                    }
                    // Do not spin on a refusing server.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            }
        }
        let c = client.as_mut().expect("opened above");
        // Per call: the lifecycle is the measured unit. Otherwise only the call is (a session
        // reopened after an error is not part of it).
        let t_call = if per_call || !fresh { t0 } else { Instant::now() };
        let r = sh.call(c, i, &mut timer, &mut st.counts).await;
        let tool = &sh.slot(i).tool;
        i += 1;
        let done = Instant::now();
        sh.tick(done, done - t_call, &r);
        if sh.counts_at(done) {
            st.account(&sh, done, done - t_call, &r);
        }
        if !sh.times_at(done) {
            sh.warming_call(done, done - t_call, &r);
        } else if sh.per_tool && r.is_ok() {
            sh.step(tool, done - t_call);
        }
        let poisoned = matches!(&r, Err(e) if e.kind.poisons_connection());
        if per_call || poisoned {
            if let Some(Client::Mcp(m)) = client.take() {
                if !poisoned {
                    m.close(&mut st.counts).await;
                }
            }
        }
        if let Some((t, rng)) = think.as_mut() {
            tokio::time::sleep(t.draw(rng)).await;
        }
    }
    if let Some(Client::Mcp(m)) = client {
        m.close(&mut st.counts).await;
    }
    st
}

/// Iterations (`lifecycle = "iteration"`), as load tools like k6 drive MCP servers: each runs the
/// flow's sessions (`flows::Flow`: a flow as written, or one session of tools/list and the mix's
/// calls); a session is initialize and initialized, its steps in order, then its close (a DELETE
/// with its id). Each step is timed on its own, every HTTP request too (`http`), and a session
/// whose steps were all correct from its start to its last answer (`session`, the close apart:
/// `delete`). A failed step is counted by its kind (the calls' error counts and rate include it)
/// and ends the iteration. Only steps that complete in the window count; an iteration the
/// window's end cuts short is not counted whole. Think time follows each iteration.
pub(super) async fn iteration_worker(sh: Rc<Shared>, w: u64, start: Instant) -> WorkerStats {
    let mut st = WorkerStats::new();
    let mut timer = CallTimer::new();
    tokio::time::sleep_until(start.into()).await;
    let flow = sh.flow.clone().expect("an iteration worker has its flow");
    let mut turn = Turn::new(&sh, w, start);
    let mut think = sh.think.map(|t| (t, t.rng(w)));
    let calls = u64::from(sh.session_calls.max(1));
    let mut vu = Vu { conn: None, in_session: false, mix_i: w * calls, n: w };
    loop {
        if turn.must_stop() {
            vu.end(&sh, &mut st).await;
            vu.conn = None;
            if !turn.wait().await {
                break;
            }
            continue;
        }
        let t0 = Instant::now();
        if t0 >= sh.end() {
            break;
        }
        let whole = vu.iteration(&sh, &flow, &mut st, &mut timer).await;
        if whole && sh.counts_at(t0) && Instant::now() <= sh.end() {
            st.iterations += 1;
        }
        vu.n += 1;
        if let Some((t, rng)) = think.as_mut() {
            tokio::time::sleep(t.draw(rng)).await;
        }
    }
    vu.end(&sh, &mut st).await;
    st
}

/// One virtual user of iterations: its connection and session, and which calls come next.
struct Vu {
    conn: Option<Box<McpClient>>,
    /// A session is open on `conn` (initialized, not yet closed).
    in_session: bool,
    /// The mix's next slot.
    mix_i: u64,
    /// The user's iterations so far, with its number: each tool step's slot.
    n: u64,
}

impl Vu {
    /// One iteration; whether every step was correct.
    async fn iteration(
        &mut self,
        sh: &Shared,
        flow: &Flow,
        st: &mut WorkerStats,
        timer: &mut CallTimer,
    ) -> bool {
        if flow.per_vu {
            let mut whole = self.in_session || self.begin(sh, flow, st).await;
            for steps in &flow.sessions {
                whole = whole && self.steps(sh, steps, st, timer).await.is_some();
            }
            if !whole {
                self.end(sh, st).await;
            }
            return whole;
        }
        for steps in &flow.sessions {
            let t0 = Instant::now();
            let last = match self.begin(sh, flow, st).await {
                true => self.steps(sh, steps, st, timer).await,
                false => None,
            };
            if let Some(done) = last.filter(|d| sh.times_at(t0) && *d <= sh.end()) {
                sh.step("session", done - t0);
            }
            self.end(sh, st).await;
            if last.is_none() {
                return false;
            }
        }
        true
    }

    /// Opens a session: on the user's connection, or a fresh one (`flow.fresh`, or none yet).
    /// `initialize` is its initialize request's time (over the legacy transport, the handshake).
    async fn begin(&mut self, sh: &Shared, flow: &Flow, st: &mut WorkerStats) -> bool {
        let t0 = Instant::now();
        let opened = match self.conn.as_mut() {
            Some(c) if !flow.fresh => c.renew(&sh.target, sh.call_limit, &mut st.counts).await,
            _ => sh.open_timed(&mut st.counts).await.map(|c| self.conn = Some(c)),
        };
        let done = Instant::now();
        let times = self.http(sh, st, done);
        match opened {
            Ok(()) => {
                st.sessions += 1;
                self.in_session = true;
                if sh.times_at(done) {
                    sh.step("initialize", times.first().copied().unwrap_or(done - t0));
                }
                true
            }
            Err(e) => {
                if sh.counts_at(done) {
                    st.account(sh, done, done - t0, &Err(e));
                }
                // Whatever the connection holds is unknown: the next session starts afresh.
                self.conn = None;
                // Do not spin on a refusing server.
                tokio::time::sleep(Duration::from_millis(10)).await;
                false
            }
        }
    }

    /// A session's steps in order; when the last one was answered, if all were correct.
    async fn steps(
        &mut self,
        sh: &Shared,
        steps: &[Step],
        st: &mut WorkerStats,
        timer: &mut CallTimer,
    ) -> Option<Instant> {
        let mut last = None;
        for step in steps {
            let conn = self.conn.as_mut().expect("a session is open");
            let t = Instant::now();
            let i = match *step {
                Step::List => None,
                Step::Tool { first } => Some(first + self.n % PREPARED),
                Step::Mix => {
                    self.mix_i += 1;
                    Some(self.mix_i - 1)
                }
            };
            let (r, name) = match i {
                None => (sh.list(conn, &mut st.counts).await, "tools/list"),
                Some(i) => {
                    let r = sh.call_mcp(conn, i, timer, &mut st.counts).await;
                    sh.tick(Instant::now(), t.elapsed(), &r);
                    (r, sh.slot(i).tool.as_str())
                }
            };
            let done = Instant::now();
            self.http(sh, st, done);
            let is_call = *step != Step::List;
            if sh.counts_at(done) && (is_call || r.is_err()) {
                st.account(sh, done, done - t, &r);
            }
            if sh.times_at(done) && r.is_ok() {
                sh.step(name, done - t);
            } else if is_call {
                sh.warming_call(done, done - t, &r);
            }
            r.ok()?;
            last = Some(done);
        }
        last
    }

    /// Closes the open session (a DELETE with its id over streamable HTTP), timed as `delete`;
    /// a fresh-connection user's connection goes with it.
    async fn end(&mut self, sh: &Shared, st: &mut WorkerStats) {
        if !std::mem::take(&mut self.in_session) {
            return;
        }
        let Some(conn) = self.conn.as_mut() else { return };
        conn.end_session(&mut st.counts).await;
        let done = Instant::now();
        let times = self.http(sh, st, done);
        if let Some(d) = times.last().filter(|_| sh.times_at(done)) {
            sh.step("delete", *d);
        }
        if sh.flow.as_ref().is_some_and(|f| f.fresh) {
            self.conn = None;
        }
    }

    /// The HTTP requests made since the last look: each one's time into `http` (when the window
    /// times it) and its count (when it counts); returned for the step that made them.
    fn http(&mut self, sh: &Shared, st: &mut WorkerStats, done: Instant) -> Vec<Duration> {
        let times = self.conn.as_mut().map(|c| c.take_times()).unwrap_or_default();
        if sh.counts_at(done) {
            st.http += times.len() as u64;
        }
        if sh.times_at(done) {
            for d in &times {
                sh.step("http", *d);
            }
        }
        times
    }
}
