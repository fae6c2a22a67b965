//! The sampler thread beside a load: the server tree's memory every `SAMPLE_INTERVAL` (for its
//! peak), its CPU time at the window's edges (which a warm-up rule moves while it runs), and at
//! the start of every interval of the load's time series its RSS, CPU time and cgroup usage
//! (`ResourceSeries`, on the series' clock), through its own handle on the shim's socket. It runs
//! on a thread of its own, so it sleeps with `std::thread::sleep`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::driver::stdio::ShimClient;
use crate::spec::{ResourceSeries, TreeMemory};

/// How often the server's memory is sampled during a load.
pub(super) const SAMPLE_INTERVAL: Duration = Duration::from_millis(250);

/// What the sampler thread saw.
#[derive(Default)]
pub(super) struct Sampled {
    pub(super) peak: Option<TreeMemory>,
    pub(super) samples: u32,
    pub(super) cpu_window: Option<(u64, Duration)>,
    pub(super) died: bool,
    /// When the server was found dead, ms from the series' origin.
    pub(super) died_at_ms: Option<u64>,
    pub(super) resources: ResourceSeries,
}

/// The series' origin and the measured window's start and end, as the load last set them.
pub(super) type Edges = Arc<Mutex<(Instant, Instant, Instant)>>;

fn edges_now(edges: &Edges) -> (Instant, Instant, Instant) {
    *edges.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Samples the server tree's memory every interval, and its CPU time at the window's start and
/// end (exactly at edges set in advance; within 20 ms of edges a warm-up rule moves), through
/// its own handle on the shim's socket.
pub(super) fn sampler(
    mut shim: ShimClient,
    pid: u32,
    edges: Edges,
    interval: Duration,
    stop: Arc<AtomicBool>,
) -> Sampled {
    let mut out = Sampled::default();
    let mut cpu_a: Option<(u64, Instant)> = None;
    // The next interval of the series to sample.
    let mut tick = 0u32;
    loop {
        let now = Instant::now();
        let seen = edges_now(&edges);
        let (origin, warm_end, end) = seen;
        let due = origin + interval * tick;
        if now >= due {
            if !resource_sample(&mut shim, pid, origin, &mut out) {
                out.died = true;
            }
            // A late reading stands for its interval; the next one keeps to the clock.
            tick = (now.saturating_duration_since(origin).as_nanos() / interval.as_nanos().max(1)) as u32 + 1;
        }
        if cpu_a.is_none() && now >= warm_end {
            cpu_a = shim.cpu_ns(pid).ok().map(|c| (c, Instant::now()));
        }
        if out.cpu_window.is_none() && now >= end {
            if let (Some((a, ta)), Ok(b)) = (cpu_a, shim.cpu_ns(pid)) {
                out.cpu_window = Some((b.saturating_sub(a), Instant::now() - ta));
            }
        }
        match shim.memory(pid) {
            Ok(m) if m.processes == 0 => {
                out.died = true;
                out.died_at_ms
                    .get_or_insert(Instant::now().saturating_duration_since(origin).as_millis() as u64);
            }
            Ok(m) => {
                out.samples += 1;
                if out.peak.as_ref().is_none_or(|p| m.rss_bytes > p.rss_bytes) {
                    out.peak = Some(m);
                }
            }
            Err(_) => {}
        }
        if stop.load(Ordering::Relaxed) || out.died {
            return out;
        }
        let mut next = Instant::now() + SAMPLE_INTERVAL;
        for edge in [warm_end, end, origin + interval * tick] {
            if edge > Instant::now() && edge < next {
                next = edge;
            }
        }
        while Instant::now() < next && !stop.load(Ordering::Relaxed) && edges_now(&edges) == seen {
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(20)));
        }
    }
}

/// Reads the server's RSS, CPU time and cgroup usage into the series; false when it is dead.
fn resource_sample(shim: &mut ShimClient, pid: u32, origin: Instant, out: &mut Sampled) -> bool {
    let t_ms = Instant::now().saturating_duration_since(origin).as_millis() as u64;
    match shim.memory(pid) {
        Ok(m) if m.processes == 0 => {
            out.died_at_ms.get_or_insert(t_ms);
            false
        }
        Ok(m) => {
            let r = &mut out.resources;
            r.t_ms.push(t_ms);
            r.rss_bytes.push(m.rss_bytes);
            r.cpu_ns.push(shim.cpu_ns(pid).ok());
            r.cgroup_bytes.push(shim.cgroup_usage().ok().flatten());
            true
        }
        Err(_) => true,
    }
}
