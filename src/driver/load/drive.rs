//! Drives one load on a single-threaded runtime: opens the open-loop connections, sets the
//! window (a warm-up rule's `settle` task moves it when warm-up ends), spawns the workers (closed
//! or open loop), reports progress, and merges the workers' counts and histograms into the
//! record's load metrics; names the failure of a load in which nothing succeeded.

use std::rc::Rc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::driver::httpclient::Counts;
use crate::driver::load::closed::{closed_worker, iteration_worker};
use crate::driver::load::gate::failure_of;
use crate::driver::load::open::{open_worker, Pacer, Schedule};
use crate::driver::load::series::{self, Intervals};
use crate::driver::load::settle::settle;
use crate::driver::load::worker::{Client, Latencies, Shared, Warming, Window, WorkerStats};
use crate::driver::load::LoadPlan;
use crate::driver::workload::Progress;
use crate::mcp::suite::AnySuite;
use crate::spec::{Failure, FailureReason, HistogramMetric, LoadMetrics, SeriesInterval};
use crate::spec::{Lifecycle, LoadMode, LoadSeries, WarmupExcludes, WarmupReport};
use crate::stats;

pub(super) fn runtime() -> Result<(tokio::runtime::Runtime, tokio::task::LocalSet), Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(FailureReason::EngineError, format!("tokio runtime: {e}")))?;
    Ok((rt, tokio::task::LocalSet::new()))
}

/// What the driver threads agree on before their workers start: the schedule's start (the main
/// thread sets it once every thread has opened its open-loop connections), and the first
/// failure to open them, which stops them all.
struct Start {
    barrier: Barrier,
    at: Mutex<Option<Instant>>,
    failure: Mutex<Option<Failure>>,
}

impl Start {
    fn new(threads: usize) -> Start {
        Start { barrier: Barrier::new(threads), at: Mutex::new(None), failure: Mutex::new(None) }
    }
}

/// One driver thread's two waits at the start's barrier: whatever happens to the thread (an early
/// return, a panic), both are made, so that no other driver thread waits for it forever.
struct Waits<'a> {
    start: &'a Start,
    left: u8,
}

impl Waits<'_> {
    fn wait(&mut self) {
        if self.left > 0 {
            self.left -= 1;
            self.start.barrier.wait();
        }
    }
}

impl Drop for Waits<'_> {
    fn drop(&mut self) {
        while self.left > 0 {
            self.wait();
        }
    }
}

/// One driver thread's share of a load, as it ended.
struct Part {
    stats: Vec<WorkerStats>,
    latencies: Latencies,
    intervals: Vec<SeriesInterval>,
    interval_ms: u64,
    opening: Counts,
    warmup: Option<WarmupReport>,
}

/// What only the main driver thread does: report progress, and tell the caller of the window.
type Caller<'a> = (&'a mut Progress<'a>, &'a mut dyn FnMut(Instant, Instant, Instant));

/// Drives the load: on this thread, or with `plan.driver_cpus` naming two or more CPUs, on one
/// thread pinned to each (this one the first), each a single-threaded runtime with its share of
/// the workers (worker `w` on thread `w mod n`; an open loop's schedule dealt slot by slot), the
/// counts, histograms and series merged at the end. Within a thread the figures do not depend
/// on hand-offs between threads. `on_window` is called with the series' origin (the first call's
/// due time) and the window's start and end before any worker starts (the caller starts its
/// samplers there), and again if a warm-up rule moves them when it ends warm-up (before that
/// they are the latest the rule's cap allows; the rule judges every thread's answers together).
/// Returns the merged metrics with their time series, `server_cpu_cores` and the series'
/// resources left for the caller.
pub fn drive(
    plan: &LoadPlan,
    suite: &AnySuite,
    progress: &mut Progress,
    on_window: &mut dyn FnMut(Instant, Instant, Instant),
) -> Result<LoadMetrics, Failure> {
    let threads = plan.driver_cpus.len().clamp(1, plan.workers.max(1) as usize);
    let (cpu0, wall0) = (process_cpu_ns(), Instant::now());
    let window = Arc::new(Window::new(wall0));
    let warming = Warming::default();
    let start = Start::new(threads);
    let parts: Vec<Option<Part>> = if threads == 1 {
        vec![run_part(plan, suite, 0, 1, &window, &warming, &start, Some((progress, on_window)))]
    } else {
        let before = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok();
        let parts = std::thread::scope(|s| {
            let others: Vec<_> = (1..threads)
                .map(|i| {
                    let (window, warming, start) = (&window, &warming, &start);
                    let cpu = plan.driver_cpus[i];
                    std::thread::Builder::new()
                        .name(format!("driver-{i}"))
                        .spawn_scoped(s, move || {
                            pin_thread(cpu);
                            run_part(plan, suite, i, threads, window, warming, start, None)
                        })
                        .expect("spawn a driver thread")
                })
                .collect();
            pin_thread(plan.driver_cpus[0]);
            let mut parts = vec![run_part(
                plan,
                suite,
                0,
                threads,
                &window,
                &warming,
                &start,
                Some((progress, on_window)),
            )];
            parts.extend(others.into_iter().map(|h| h.join().ok().flatten()));
            parts
        });
        if let Some(set) = before {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
        }
        parts
    };
    if let Some(f) = start.failure.lock().unwrap_or_else(|e| e.into_inner()).take() {
        return Err(f);
    }
    let mut parts: Vec<Part> = parts.into_iter().collect::<Option<_>>().ok_or_else(|| {
        Failure::new(FailureReason::EngineError, "a driver thread ended without its counts (it panicked)")
    })?;
    let origin = start.at.lock().unwrap_or_else(|e| e.into_inner()).unwrap_or(wall0);
    let w = window.bounds();
    let stats: Vec<WorkerStats> = parts.iter_mut().flat_map(|p| std::mem::take(&mut p.stats)).collect();
    let mut latencies = Latencies::new();
    for p in &parts {
        latencies.absorb(&p.latencies);
    }
    // Under `warmup_excludes = "latency"` the counts run from the load's start.
    let counted = match plan.warmup_excludes {
        WarmupExcludes::Latency => (origin, w.1),
        WarmupExcludes::Everything => w,
    };
    let mut m = merge(plan, counted, &stats, &latencies);
    if !plan.stages.is_empty() {
        m.peak_vus = Some(window.peak.load(std::sync::atomic::Ordering::Relaxed));
    }
    let from_origin = |t: Instant| t.saturating_duration_since(origin).as_millis() as u64;
    let interval_ms = parts.first().map_or(plan.interval.as_millis() as u64, |p| p.interval_ms);
    let mut warmup = None;
    let mut intervals = Vec::new();
    for p in parts {
        m.reconnects += p.opening.reconnects;
        warmup = warmup.or(p.warmup);
        intervals.push(p.intervals);
    }
    m.series = Some(LoadSeries {
        interval_ms,
        window_from_ms: from_origin(w.0),
        window_to_ms: from_origin(w.1),
        intervals: series::merge(intervals),
        resources: Default::default(),
    });
    if let Some(w) = warmup {
        m.warmup_ms = w.ms.round() as u64;
        m.warmup = Some(w);
    }
    let wall = wall0.elapsed().as_nanos() as f64;
    m.driver_cpu_cores = (wall > 0.0).then(|| process_cpu_ns().saturating_sub(cpu0) as f64 / wall);
    m.driver_threads = (threads > 1).then_some(threads as u32);
    Ok(m)
}

/// Pins the calling thread to one CPU (a driver thread; where that is refused it runs where the
/// process may).
fn pin_thread(cpu: u32) {
    if let Ok(set) = crate::placement::cpu_mask(&[cpu]) {
        let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
    }
}

/// One driver thread's share of the load (`part` of `threads`) on a runtime of its own; the main
/// thread (`caller` given) sets the start and the window, reports progress and runs a warm-up
/// rule. None when it failed (the failure is in `start`) or a thread before the start did.
#[allow(clippy::too_many_arguments)]
fn run_part(
    plan: &LoadPlan,
    suite: &AnySuite,
    part: usize,
    threads: usize,
    window: &Arc<Window>,
    warming: &Warming,
    start: &Start,
    caller: Option<Caller<'_>>,
) -> Option<Part> {
    let fail = |f: Failure| {
        start.failure.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(f);
    };
    // Every thread reaches both waits, whatever happens before them.
    let mut waits = Waits { start, left: 2 };
    let prepared = plan.prepared(suite);
    let runtime = runtime();
    let (prepared, (rt, local)) = match (prepared, runtime) {
        (Ok(p), Ok(r)) => (p, r),
        (Err(f), _) | (_, Err(f)) => {
            fail(f);
            return None;
        }
    };
    let mut opening = Counts::default();
    let out = local.block_on(&rt, async {
        let sh = Rc::new(plan.shared_with(prepared, window.clone(), warming.clone()));
        let mine: Vec<u64> = (part as u64..u64::from(plan.workers)).step_by(threads).collect();
        // Open loop: every connection's session is opened before the schedule starts.
        let mut clients = Vec::new();
        if plan.rate.is_some() {
            for _ in &mine {
                match sh.open(&mut opening).await {
                    Ok(c) => clients.push(c),
                    Err(e) => {
                        fail(failure_of(e, "opening the open-loop connections"));
                        break;
                    }
                }
            }
        }
        // The threads wait for each other here (blocking: nothing else runs on this runtime yet).
        waits.wait();
        let rule = plan.warmup.rule();
        if part == 0 && start.failure.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
            let t_start = Instant::now() + Duration::from_millis(5);
            let warm_end = t_start + Duration::from_millis(plan.warmup.cap());
            sh.set_window(warm_end, warm_end + plan.duration);
            sh.keep_warming(rule.is_some());
            *start.at.lock().unwrap_or_else(|e| e.into_inner()) = Some(t_start);
        }
        waits.wait();
        let t_start = (*start.at.lock().unwrap_or_else(|e| e.into_inner()))?;
        sh.series.borrow_mut().set_origin(t_start);
        let all = futures_util::future::join_all(spawn_workers(plan, &sh, clients, &mine, t_start, (threads, part)));
        let mut warmup = None;
        let results = match caller {
            None => all.await,
            Some((progress, on_window)) => {
                on_window(t_start, sh.warm_end(), sh.end());
                let moved = Rc::new(Notify::new());
                let settler = rule.map(|r| {
                    tokio::task::spawn_local(settle(sh.clone(), r, t_start, plan.duration, moved.clone()))
                });
                tokio::pin!(all);
                let results = loop {
                    tokio::select! {
                        r = &mut all => break r,
                        _ = moved.notified() => on_window(t_start, sh.warm_end(), sh.end()),
                        _ = tokio::time::sleep(Duration::from_millis(500)) => {
                            let now = Instant::now();
                            let total_ms = sh.end().saturating_duration_since(t_start).as_millis() as u64;
                            let el = (now.saturating_duration_since(t_start).as_millis() as u64).min(total_ms);
                            progress(if now < sh.warm_end() { "warmup" } else { "load" }, el, total_ms);
                        }
                    }
                };
                // The rule has ended warm-up by the time the workers end: they run to the
                // window's end.
                if let Some(s) = settler {
                    warmup = s.await.ok();
                }
                results
            }
        };
        let series = sh.series.replace(Intervals::new(t_start, plan.interval));
        let interval_ms = series.interval_ms();
        Some(Part {
            stats: results.into_iter().filter_map(Result::ok).collect(),
            latencies: sh.latencies.replace(Latencies::new()),
            intervals: series.finish(),
            interval_ms,
            opening: Counts::default(),
            warmup,
        })
    });
    drop(local);
    drop(rt); // closes every connection
    out.map(|p| Part { opening, ..p })
}

/// Spawns the workers on the runtime: closed-loop virtual users, or the open loop's
/// connections sharing one schedule from `t_start` (a soak's ramp spreads the users' starts, or
/// climbs the rate).
fn spawn_workers(
    plan: &LoadPlan,
    sh: &Rc<Shared>,
    clients: Vec<Client>,
    mine: &[u64],
    t_start: Instant,
    (threads, part): (usize, usize),
) -> Vec<tokio::task::JoinHandle<WorkerStats>> {
    match plan.rate {
        None => mine
            .iter()
            .map(|&w| {
                let start = t_start + plan.ramp.mul_f64(w as f64 / f64::from(plan.workers.max(1)));
                match plan.lifecycle {
                    Lifecycle::Iteration => tokio::task::spawn_local(iteration_worker(sh.clone(), w, start)),
                    _ => tokio::task::spawn_local(closed_worker(sh.clone(), w, start, mine.len() > 1)),
                }
            })
            .collect(),
        Some(r) => {
            let schedule = Schedule { rate: r as f64, ramp_s: plan.ramp.as_secs_f64() };
            let pacer = Rc::new(Pacer::new(t_start, schedule, clients.len(), threads as u64, part as u64));
            // It ends with the last connection.
            tokio::task::spawn_local(pacer.clone().run());
            clients
                .into_iter()
                .map(|c| tokio::task::spawn_local(open_worker(sh.clone(), c, pacer.clone())))
                .collect()
        }
    }
}

/// CPU time this process has used, in nanoseconds.
fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own; the clock id is a constant.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Merges the workers' counts and histograms into the record's metrics. `window` is the measured
/// window's start and nominal end; it is measured to the later of that end and the last
/// completion the workers counted (see `LoadMetrics::window_ms`).
pub(super) fn merge(
    plan: &LoadPlan,
    window: (Instant, Instant),
    stats: &[WorkerStats],
    latencies: &Latencies,
) -> LoadMetrics {
    let mut m = LoadMetrics {
        mode: if plan.rate.is_some() { LoadMode::Open } else { LoadMode::Closed },
        workers: plan.workers,
        connections: plan.workers,
        // A rule's warm-up is the time it took (`drive` sets it).
        warmup_ms: plan.warmup.cap(),
        window_nominal_ms: Some(plan.duration.as_millis() as u64),
        ..Default::default()
    };
    let (mut taken, mut late) = (0u64, 0u64);
    let (mut iterations, mut http) = (0, 0);
    for s in stats {
        iterations += s.iterations;
        http += s.http;
        m.ok += s.ok;
        for (k, v) in &s.errors {
            *m.errors.entry(k.to_string()).or_default() += v;
        }
        m.sessions += s.sessions;
        m.reinitializations += s.counts.reinit;
        m.reconnects += s.counts.reconnects;
        taken += s.taken;
        late += s.late;
        for e in &s.examples {
            if m.error_examples.len() < 5 {
                m.error_examples.push(e.clone());
            }
        }
    }
    m.failed = m.errors.values().sum();
    let (start, end) = window;
    let closed = stats.iter().filter_map(|s| s.last_done).fold(end, Instant::max);
    let secs = closed.saturating_duration_since(start).as_secs_f64();
    m.window_ms = secs * 1e3;
    m.throughput_rps = if secs > 0.0 { m.ok as f64 / secs } else { 0.0 };
    let sent = m.ok + m.failed;
    m.error_rate = if sent > 0 { m.failed as f64 / sent as f64 } else { 0.0 };
    if let Some(r) = plan.rate {
        // The schedule's slots are those of the nominal window.
        let slots = (plan.duration.as_secs_f64() * r as f64).floor() as u64;
        m.target_rps = Some(r as f64);
        m.late = Some(late);
        m.dropped = Some(slots.saturating_sub(taken));
    }
    let metric = |h: &hdrhistogram::Histogram<u64>| {
        stats::summarize(h).map(|summary| HistogramMetric {
            summary,
            histogram: stats::encode_histogram(h),
            warmup: None,
        })
    };
    m.latency = metric(&latencies.all);
    m.steps = latencies.steps.iter().filter_map(|(k, h)| Some((k.clone(), metric(h)?))).collect();
    m.iterations = (plan.lifecycle == Lifecycle::Iteration).then_some(iterations);
    if m.iterations.is_some() {
        m.http_requests = Some(http);
        m.http_rps = Some(if secs > 0.0 { http as f64 / secs } else { 0.0 });
    }
    if !plan.stages.is_empty() {
        m.stages.clone_from(&plan.stages);
        m.start_vus = Some(plan.start_vus);
    }
    m
}

/// The failure of a load in which no call succeeded, named by its most common error.
pub fn no_success_failure(m: &LoadMetrics) -> Option<Failure> {
    if m.ok > 0 {
        return None;
    }
    if m.failed == 0 {
        return Some(Failure::new(
            FailureReason::Timeout,
            format!(
                "no call completed within the {:.1} s measured window ({} sessions open): every call took longer",
                m.window_ms / 1e3,
                m.sessions
            ),
        ));
    }
    let dominant = m.errors.iter().max_by_key(|(_, v)| **v).map(|(k, _)| k.as_str());
    let reason = match dominant {
        Some("timeout") => FailureReason::Timeout,
        Some("tool_error") => FailureReason::ToolError,
        Some("wrong_result") => FailureReason::WrongResult,
        Some("connect") => FailureReason::Crash,
        _ => FailureReason::ProtocolError,
    };
    let summary = m.errors.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
    Some(Failure::new(reason, format!("no call succeeded in the measured window ({summary})")))
}

#[cfg(test)]
mod tests {
    use super::{Start, Waits};

    #[test]
    fn a_driver_thread_that_panics_before_the_start_still_makes_its_waits() {
        let start = Start::new(2);
        std::thread::scope(|s| {
            let other = s.spawn(|| {
                let _waits = Waits { start: &start, left: 2 };
                panic!("a driver thread failing before the start (expected by this test)");
            });
            // Without the other thread's waits, these would block forever.
            let mut waits = Waits { start: &start, left: 2 };
            waits.wait();
            waits.wait();
            assert!(other.join().is_err());
        });
    }
}
