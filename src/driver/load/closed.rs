//! The closed loop (`concurrency`, `http_api`): every virtual user calls back to back on its own
//! connection until the window ends (a soak's ramp starts them one by one). What a call is and
//! what is counted is `worker`'s. `iteration_worker`: a session per iteration, each step timed.

use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::driver::httpclient::{CallError, CallTimer, ErrorKind};
use crate::driver::load::worker::{Client, Shared, WorkerStats};
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
    loop {
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
                    if done >= sh.warm_end() && done <= sh.end() {
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
        if done >= sh.warm_end() && done <= sh.end() {
            st.account(&sh, done, done - t_call, &r);
            if sh.per_tool && r.is_ok() {
                sh.step(tool, done - t_call);
            }
        } else {
            sh.warming_call(done, done - t_call, &r);
        }
        let poisoned = matches!(&r, Err(e) if e.kind.poisons_connection());
        if per_call || poisoned {
            if let Some(Client::Mcp(m)) = client.take() {
                if !poisoned {
                    m.close(&mut st.counts).await;
                }
            }
        }
    }
    if let Some(Client::Mcp(m)) = client {
        m.close(&mut st.counts).await;
    }
    st
}

/// Iterations (`lifecycle = "iteration"`), as load tools like k6 drive MCP servers: each opens a
/// session (initialize and initialized, on a fresh connection), lists the tools, makes the
/// iteration's calls of the mix and closes the session; each step is timed on its own, and the
/// whole iteration too when every step was correct. A failed step is counted by its kind (the
/// calls' error counts and rate include it) and ends the iteration. Only steps that complete in
/// the window count; an iteration the window's end cuts short is not counted whole.
pub(super) async fn iteration_worker(sh: Rc<Shared>, w: u64, start: Instant) -> WorkerStats {
    let mut st = WorkerStats::new();
    let mut timer = CallTimer::new();
    tokio::time::sleep_until(start.into()).await;
    let calls = u64::from(sh.session_calls.max(1));
    let mut i = w * calls;
    let in_window = |sh: &Shared, t: Instant| t >= sh.warm_end() && t <= sh.end();
    while Instant::now() < sh.end() {
        let t0 = Instant::now();
        let mut client = match sh.open(&mut st.counts).await {
            Ok(c) => c,
            Err(e) => {
                let done = Instant::now();
                if in_window(&sh, done) {
                    st.account(&sh, done, done - t0, &Err(e));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        st.sessions += 1;
        let opened = Instant::now();
        if in_window(&sh, opened) {
            sh.step("initialize", opened - t0);
        }
        // tools/list: a JSON-RPC error is the server's protocol failing, as for the calls.
        let listed = match &mut client {
            Client::Mcp(m) => {
                m.request("tools/list", "{}", sh.call_limit, &mut st.counts).await.and_then(|r| {
                    r.map(|_| ()).map_err(|rpc| CallError {
                        kind: ErrorKind::ProtocolError,
                        detail: format!("tools/list: JSON-RPC error {} {}", rpc.code, rpc.message),
                    })
                })
            }
            Client::Rest(_) => unreachable!("iterations are refused on the REST route"),
        };
        let done = Instant::now();
        if in_window(&sh, done) {
            match &listed {
                Ok(()) => sh.step("tools/list", done - opened),
                Err(_) => st.account(&sh, done, done - opened, &listed),
            }
        }
        let mut whole = listed.is_ok();
        for _ in 0..calls {
            if !whole {
                break;
            }
            let t_call = Instant::now();
            let r = sh.call(&mut client, i, &mut timer, &mut st.counts).await;
            let tool = &sh.slot(i).tool;
            i += 1;
            let done = Instant::now();
            sh.tick(done, done - t_call, &r);
            if in_window(&sh, done) {
                st.account(&sh, done, done - t_call, &r);
                if r.is_ok() {
                    sh.step(tool, done - t_call);
                }
            } else {
                sh.warming_call(done, done - t_call, &r);
            }
            whole = r.is_ok();
        }
        if let Client::Mcp(m) = client {
            m.close(&mut st.counts).await;
        }
        let done = Instant::now();
        if whole && in_window(&sh, t0) && done <= sh.end() {
            sh.step("session", done - t0);
            st.iterations += 1;
        }
    }
    st
}
