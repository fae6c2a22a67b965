//! The sampler thread beside a load: the server tree's memory every interval and its CPU time at
//! the window's edges (which a warm-up rule moves while it runs), through its own handle on the
//! shim's socket. It runs on a thread of its own, so it sleeps with `std::thread::sleep`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::driver::stdio::ShimClient;
use crate::spec::TreeMemory;

/// How often the server's memory is sampled during a load.
pub(super) const SAMPLE_INTERVAL: Duration = Duration::from_millis(250);

/// What the sampler thread saw.
#[derive(Default)]
pub(super) struct Sampled {
    pub(super) peak: Option<TreeMemory>,
    pub(super) samples: u32,
    pub(super) cpu_window: Option<(u64, Duration)>,
    pub(super) died: bool,
}

/// The measured window's start and end as the load last set them.
pub(super) type Edges = Arc<Mutex<(Instant, Instant)>>;

fn edges_now(edges: &Edges) -> (Instant, Instant) {
    *edges.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Samples the server tree's memory every interval, and its CPU time at the window's start and
/// end (exactly at edges set in advance; within 20 ms of edges a warm-up rule moves), through
/// its own handle on the shim's socket.
pub(super) fn sampler(mut shim: ShimClient, pid: u32, edges: Edges, stop: Arc<AtomicBool>) -> Sampled {
    let mut out = Sampled::default();
    let mut cpu_a: Option<(u64, Instant)> = None;
    loop {
        let now = Instant::now();
        let seen = edges_now(&edges);
        let (warm_end, end) = seen;
        if cpu_a.is_none() && now >= warm_end {
            cpu_a = shim.cpu_ns(pid).ok().map(|c| (c, Instant::now()));
        }
        if out.cpu_window.is_none() && now >= end {
            if let (Some((a, ta)), Ok(b)) = (cpu_a, shim.cpu_ns(pid)) {
                out.cpu_window = Some((b.saturating_sub(a), Instant::now() - ta));
            }
        }
        match shim.memory(pid) {
            Ok(m) if m.processes == 0 => out.died = true,
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
        for edge in [warm_end, end] {
            if edge > Instant::now() && edge < next {
                next = edge;
            }
        }
        while Instant::now() < next && !stop.load(Ordering::Relaxed) && edges_now(&edges) == seen {
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(20)));
        }
    }
}
