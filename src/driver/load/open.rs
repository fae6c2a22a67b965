//! The open loop (`open_loop`): connections take the slots of one fixed-rate schedule, a pacer
//! wakes each when its slot is due, and latency runs from each slot's intended send time, as
//! wrk2 does (no coordinated omission). What a call is and what is counted is `worker`'s.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::Waker;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::driver::httpclient::CallTimer;
use crate::driver::load::worker::{Client, Shared, WorkerStats};

/// A request that starts later than its intended time by more than this is `late`.
const LATE: Duration = Duration::from_millis(1);

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

/// The open loop's clock: hands out the schedule's slots in order, and wakes each connection
/// that took one when its slot is due. One task ([`Pacer::run`]) watches the time for all of
/// them — sleeping on the timer while the next slot is far, yielding while it is near (the
/// timer wheel is 1 ms coarse) — where each idle connection spinning on its own would take the
/// driver's CPU from the connections that have answers to read.
pub(super) struct Pacer {
    t0: Instant,
    schedule: Schedule,
    /// Several driver threads share one schedule: this pacer's slots are `phase`, `phase +
    /// stride`, `phase + 2 stride`, … (one thread: every slot).
    stride: u64,
    phase: u64,
    next: Cell<u64>,
    /// The connections waiting for their slot, in slot order (slots are taken in order, and a
    /// connection starts waiting as soon as it takes one).
    waiting: RefCell<VecDeque<(Instant, Waker)>>,
    /// Wakes the pacer when a connection starts waiting on an empty queue, or leaves.
    arrived: Notify,
    /// The connections still taking slots.
    live: Cell<usize>,
}

impl Pacer {
    /// The pacer of the slots `phase + k stride` (`stride` driver threads; one: `1, 0`).
    pub(super) fn new(t0: Instant, schedule: Schedule, connections: usize, stride: u64, phase: u64) -> Pacer {
        Pacer {
            t0,
            schedule,
            stride: stride.max(1),
            phase,
            next: Cell::new(0),
            waiting: RefCell::new(VecDeque::new()),
            arrived: Notify::new(),
            live: Cell::new(connections),
        }
    }

    /// A connection takes no more slots.
    fn leave(&self) {
        self.live.set(self.live.get().saturating_sub(1));
        self.arrived.notify_one();
    }

    /// The next of this pacer's slots (its index in the whole schedule) and when it is due.
    fn take(&self) -> (u64, Instant) {
        let n = self.next.get();
        self.next.set(n + 1);
        let k = n * self.stride + self.phase;
        (k, self.t0 + self.schedule.due(k))
    }

    /// Until `at`, when the pacer wakes the caller (at once if it has come).
    fn until(&self, at: Instant) -> SlotWait<'_> {
        SlotWait { pacer: self, at, queued: false }
    }

    /// Wakes every connection whose slot has come, until the last connection leaves. While the
    /// next slot is far it sleeps on a fine timer until [`SPIN`] before it; within that it
    /// yields to the connections until the slot comes, which keeps the CPU awake: on a VM,
    /// waking an idle vCPU from a timer adds tens of µs to every slot of a fast schedule. (The
    /// driver has its CPU to itself.)
    pub(super) async fn run(self: Rc<Self>) {
        let fine = FineTimer::new().ok();
        // A timer's expiry may otherwise come up to the thread's slack late (50 µs by default).
        // SAFETY: PR_SET_TIMERSLACK takes a value in ns and touches only this thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        while self.live.get() > 0 {
            let now = Instant::now();
            let front = {
                let mut q = self.waiting.borrow_mut();
                while q.front().is_some_and(|(at, _)| *at <= now) {
                    let (_, waker) = q.pop_front().expect("a front");
                    waker.wake();
                }
                q.front().map(|(at, _)| *at)
            };
            match (front, &fine) {
                (None, _) => self.arrived.notified().await,
                (Some(at), Some(fine)) if at > now + SPIN => fine.sleep(at - now - SPIN).await,
                (Some(at), None) if at > now + Duration::from_millis(2) => {
                    tokio::time::sleep_until((at - Duration::from_millis(1)).into()).await
                }
                (Some(_), _) => tokio::task::yield_now().await,
            }
        }
    }
}

/// How close the next slot must be for the pacer to stop sleeping and yield until it comes.
const SPIN: Duration = Duration::from_micros(200);

/// A one-shot timer with microsecond precision: a timerfd in the runtime's epoll (tokio's timer
/// wheel has 1 ms slots).
struct FineTimer {
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

impl FineTimer {
    fn new() -> std::io::Result<FineTimer> {
        use std::os::fd::FromRawFd;
        // SAFETY: timerfd_create takes only constants; it returns a new descriptor or -1.
        let fd =
            unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and nothing else owns it.
        let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        // SAFETY: `owned` is a valid open descriptor, moved into the AsyncFd, which keeps it open
        // and the same until it is dropped.
        let fd =
            unsafe { tokio::io::unix::AsyncFd::register_with_interest(owned, tokio::io::Interest::READABLE) }
                .map_err(std::io::Error::from)?;
        Ok(FineTimer { fd })
    }

    /// Sleeps for `d` (falling back to the runtime's timer if the timerfd refuses it).
    async fn sleep(&self, d: Duration) {
        use std::os::fd::AsRawFd;
        let fd = self.fd.as_raw_fd();
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        let value =
            libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long };
        let spec = libc::itimerspec { it_interval: zero, it_value: value };
        // SAFETY: `fd` is our live timerfd; `spec` is a valid itimerspec; no old value is asked for.
        if unsafe { libc::timerfd_settime(fd, 0, &spec, std::ptr::null_mut()) } != 0 {
            return tokio::time::sleep(d).await;
        }
        loop {
            let Ok(mut guard) = self.fd.readable().await else {
                return tokio::time::sleep(d).await;
            };
            let mut expirations = [0u8; 8];
            // SAFETY: reads at most 8 bytes into the buffer we own.
            let n = unsafe { libc::read(fd, expirations.as_mut_ptr().cast(), expirations.len()) };
            // Read or not, nothing more is due until the next expiry.
            guard.clear_ready();
            if n == 8 {
                return;
            }
        }
    }
}

/// A connection waiting for its slot.
pub(super) struct SlotWait<'a> {
    pacer: &'a Pacer,
    at: Instant,
    queued: bool,
}

impl std::future::Future for SlotWait<'_> {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if Instant::now() >= self.at {
            return std::task::Poll::Ready(());
        }
        if !self.queued {
            let mut q = self.pacer.waiting.borrow_mut();
            if q.is_empty() {
                self.pacer.arrived.notify_one();
            }
            q.push_back((self.at, cx.waker().clone()));
            drop(q);
            self.queued = true;
        }
        std::task::Poll::Pending
    }
}

/// Open loop: take the next slot of the global schedule, wait for its intended time, send,
/// measure from the intended time.
pub(super) async fn open_worker(sh: Rc<Shared>, mut client: Client, pacer: Rc<Pacer>) -> WorkerStats {
    let mut st = WorkerStats::new();
    let mut timer = CallTimer::new();
    st.sessions = 1;
    loop {
        // Slots not taken by the end of the window are dropped, not sent late after it.
        if Instant::now() >= sh.end() {
            break;
        }
        let (k, intended) = pacer.take();
        if intended >= sh.end() {
            break;
        }
        pacer.until(intended).await;
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
        let r = sh.call(&mut client, k, &mut timer, &mut st.counts).await;
        let done = Instant::now();
        sh.tick(done, done - intended, &r);
        if in_window {
            st.account(&sh, done, done - intended, &r);
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
    pacer.leave();
    if let Client::Mcp(m) = client {
        m.close(&mut st.counts).await;
    }
    st
}

#[cfg(test)]
mod tests {
    use super::{Pacer, Schedule};

    #[test]
    fn the_pacers_of_several_driver_threads_take_every_slot_of_one_schedule_once() {
        let t0 = std::time::Instant::now();
        let schedule = Schedule { rate: 1000.0, ramp_s: 2.0 };
        let pacers: Vec<Pacer> = (0..3).map(|i| Pacer::new(t0, schedule, 1, 3, i)).collect();
        let mut taken: Vec<(u64, std::time::Instant)> =
            pacers.iter().flat_map(|p| (0..100).map(|_| p.take()).collect::<Vec<_>>()).collect();
        taken.sort();
        assert_eq!(taken.iter().map(|(k, _)| *k).collect::<Vec<_>>(), (0..300).collect::<Vec<_>>());
        assert!(taken.iter().all(|(k, at)| *at == t0 + schedule.due(*k)), "each slot at its schedule's time");
        let one = Pacer::new(t0, schedule, 1, 1, 0);
        assert_eq!((0..5).map(|_| one.take().0).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    }

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
