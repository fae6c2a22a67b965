//! The closed loop (`concurrency`, `http_api`): every virtual user calls back to back on its own
//! connection until the window ends (a soak's ramp starts them one by one). What a call is and
//! what is counted is `worker`'s.

use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::driver::load::worker::{Client, Shared, WorkerStats};
use crate::spec::Lifecycle;

/// Closed loop: open a session, then call back to back until the end; count completions in the
/// window (those of the warm-up go to a warm-up rule, if one judges).
pub(super) async fn closed_worker(sh: Rc<Shared>, w: u64, start: Instant) -> WorkerStats {
    let mut st = WorkerStats::new();
    tokio::time::sleep_until(start.into()).await;
    let mut client: Option<Client> = None;
    let mut i = w;
    let per_call = sh.lifecycle == Lifecycle::PerCall && !sh.rest;
    loop {
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
                        st.account(done, done - t0, &r);
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
        let r = sh.call(c, i, &mut st.counts).await;
        i += 1;
        let done = Instant::now();
        sh.tick(done, done - t_call, &r);
        if done >= sh.warm_end() && done <= sh.end() {
            st.account(done, done - t_call, &r);
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
