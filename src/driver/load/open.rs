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

/// When the open loop's slots are due: at a fixed rate, after a ramp over which the rate climbs
/// linearly from 0 (a soak's; none elsewhere).
#[derive(Debug, Clone, Copy)]
pub(super) struct Schedule {
    /// Calls per second at full rate.
    pub(super) rate: f64,
    /// The ramp, seconds.
    pub(super) ramp_s: f64,
}

impl Schedule {
    /// When slot `k` is due after the start. Over the ramp the rate is `rate * t / ramp`, so
    /// `k` slots are due by `t = sqrt(2 k ramp / rate)`; the ramp holds `rate * ramp / 2` slots,
    /// and the rest come at the full rate after it.
    pub(super) fn due(&self, k: u64) -> Duration {
        let k = k as f64;
        let in_ramp = self.rate * self.ramp_s / 2.0;
        let s = if k < in_ramp {
            (2.0 * k * self.ramp_s / self.rate).sqrt()
        } else {
            self.ramp_s + (k - in_ramp) / self.rate
        };
        Duration::from_secs_f64(s)
    }
}

/// Open loop: take the next slot of the global schedule, wait for its intended time, send,
/// measure from the intended time.
pub(super) async fn open_worker(
    sh: Rc<Shared>,
    mut client: Client,
    next: Rc<Cell<u64>>,
    t0: Instant,
    schedule: Schedule,
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
        let intended = t0 + schedule.due(k);
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
        sh.tick(done, done - intended, &r);
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

#[cfg(test)]
mod tests {
    use super::Schedule;

    #[test]
    fn a_ramp_climbs_to_the_rate_and_without_one_slots_are_evenly_spaced() {
        let flat = Schedule { rate: 100.0, ramp_s: 0.0 };
        assert_eq!(flat.due(0).as_secs_f64(), 0.0);
        assert!((flat.due(250).as_secs_f64() - 2.5).abs() < 1e-9);
        let ramp = Schedule { rate: 100.0, ramp_s: 10.0 };
        // 500 slots in the ramp (half the full rate's 1000), the 500th at its end.
        assert!((ramp.due(500).as_secs_f64() - 10.0).abs() < 1e-9);
        assert!((ramp.due(600).as_secs_f64() - 11.0).abs() < 1e-9);
        // A quarter of the ramp's slots are due by half its time.
        assert!((ramp.due(125).as_secs_f64() - 5.0).abs() < 1e-9);
        let gaps: Vec<f64> = (1..500).map(|k| (ramp.due(k) - ramp.due(k - 1)).as_secs_f64()).collect();
        assert!(gaps.windows(2).all(|w| w[1] <= w[0] + 1e-12), "the rate only climbs");
    }
}
