//! The open loop (`open_loop`): connections take the slots of one fixed-rate schedule and latency
//! runs from each slot's intended send time, as wrk2 does (no coordinated omission). What a call
//! is and what is counted is `worker`'s.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::driver::load::worker::{Client, Shared, WorkerStats};

/// A request that starts later than its intended time by more than this is `late`.
const LATE: Duration = Duration::from_millis(1);

/// Waits until `t`: sleeps while it is far, then yields until it comes (the timer wheel is
/// 1 ms coarse; sub-millisecond spacing needs the yield loop).
async fn wait_until(t: Instant) {
    loop {
        let now = Instant::now();
        if now >= t {
            return;
        }
        if t - now > Duration::from_millis(2) {
            tokio::time::sleep_until((t - Duration::from_millis(1)).into()).await;
        } else {
            tokio::task::yield_now().await;
        }
    }
}

/// Open loop: take the next slot of the global schedule, wait for its intended time, send,
/// measure from the intended time.
pub(super) async fn open_worker(
    sh: Rc<Shared>,
    mut client: Client,
    next: Rc<Cell<u64>>,
    t0: Instant,
    period_ns: f64,
) -> WorkerStats {
    let mut st = WorkerStats::new();
    st.sessions = 1;
    loop {
        // Slots not taken by the end of the window are dropped, not sent late after it.
        if Instant::now() >= sh.end() {
            break;
        }
        let k = next.get();
        next.set(k + 1);
        let intended = t0 + Duration::from_nanos((k as f64 * period_ns) as u64);
        if intended >= sh.end() {
            break;
        }
        wait_until(intended).await;
        // A warm-up rule may have moved the window's end while this slot waited.
        if intended >= sh.end() {
            break;
        }
        let sent = Instant::now();
        let in_window = intended >= sh.warm_end();
        if in_window {
            st.taken += 1;
            if sent - intended > LATE {
                st.late += 1;
            }
        }
        let r = sh.call(&mut client, k, &mut st.counts).await;
        let done = Instant::now();
        if in_window {
            st.account(done, done - intended, &r);
        } else {
            sh.warming_call(done, done - intended, &r);
        }
        if matches!(&r, Err(e) if e.kind.poisons_connection()) {
            match sh.open(&mut st.counts).await {
                Ok(c) => {
                    client = c;
                    st.sessions += 1;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }
    if let Client::Mcp(m) = client {
        m.close(&mut st.counts).await;
    }
    st
}
