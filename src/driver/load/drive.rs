//! Drives one load on a single-threaded runtime: opens the open-loop connections, sets the
//! window (a warm-up rule's `settle` task moves it when warm-up ends), spawns the workers (closed
//! or open loop), reports progress, and merges the workers' counts and histograms into the
//! record's load metrics; names the failure of a load in which nothing succeeded.

use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::driver::httpclient::Counts;
use crate::driver::load::closed::{closed_worker, iteration_worker};
use crate::driver::load::gate::failure_of;
use crate::driver::load::open::{open_worker, Pacer, Schedule};
use crate::driver::load::series::Intervals;
use crate::driver::load::settle::settle;
use crate::driver::load::worker::{Client, Shared, WorkerStats};
use crate::driver::load::LoadPlan;
use crate::driver::workload::Progress;
use crate::mcp::suite::Suite;
use crate::spec::{Failure, FailureReason, HistogramMetric, LoadMetrics};
use crate::spec::{Lifecycle, LoadMode, LoadSeries};
use crate::stats;

pub(super) fn runtime() -> Result<(tokio::runtime::Runtime, tokio::task::LocalSet), Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(FailureReason::EngineError, format!("tokio runtime: {e}")))?;
    Ok((rt, tokio::task::LocalSet::new()))
}

/// Drives the load on this thread (a single-threaded runtime: one core is enough, and the
/// figures do not depend on thread hand-offs). `on_window` is called with the series' origin
/// (the first call's due time) and the window's start and end before any worker starts (the caller starts its samplers there), and again if a warm-up
/// rule moves them when it ends warm-up (before that they are the latest the rule's cap allows).
/// Returns the merged metrics with their time series, `server_cpu_cores` and the series'
/// resources left for the caller.
pub fn drive(
    plan: &LoadPlan,
    suite: Suite,
    progress: &mut Progress,
    on_window: &mut dyn FnMut(Instant, Instant, Instant),
) -> Result<LoadMetrics, Failure> {
    let prepared = plan.prepared(suite)?;
    let (rt, local) = runtime()?;
    // What opening the open-loop connections counted; each worker counts its own.
    let mut opening = Counts::default();
    let (cpu0, wall0) = (process_cpu_ns(), Instant::now());
    // The measured window's start and nominal end, as the workers saw them at the end.
    let mut window = (wall0, wall0);
    let mut warmup = None;
    let (mut origin, mut intervals, mut interval_ms) = (wall0, Vec::new(), 0);
    let stats = local.block_on(&rt, async {
        let sh = Rc::new(plan.shared(prepared));
        // Open loop: every connection's session is opened before the schedule starts.
        let mut clients = Vec::new();
        if plan.rate.is_some() {
            for _ in 0..plan.workers {
                clients.push(
                    sh.open(&mut opening)
                        .await
                        .map_err(|e| failure_of(e, "opening the open-loop connections"))?,
                );
            }
        }
        let t_start = Instant::now() + Duration::from_millis(5);
        sh.warm_end.set(t_start + Duration::from_millis(plan.warmup.cap()));
        sh.end.set(sh.warm_end() + plan.duration);
        sh.series.borrow_mut().set_origin(t_start);
        let rule = plan.warmup.rule();
        if rule.is_some() {
            *sh.warming.borrow_mut() = Some(Vec::new());
        }
        on_window(t_start, sh.warm_end(), sh.end());
        let moved = Rc::new(Notify::new());
        let settler = rule
            .map(|r| tokio::task::spawn_local(settle(sh.clone(), r, t_start, plan.duration, moved.clone())));
        let all = futures_util::future::join_all(spawn_workers(plan, &sh, clients, t_start));
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
        // The rule has ended warm-up by the time the workers end: they run to the window's end.
        if let Some(s) = settler {
            warmup = s.await.ok();
        }
        window = (sh.warm_end(), sh.end());
        origin = t_start;
        let series = sh.series.replace(Intervals::new(t_start, plan.interval));
        interval_ms = series.interval_ms();
        intervals = series.finish();
        Ok::<_, Failure>(results.into_iter().filter_map(Result::ok).collect::<Vec<WorkerStats>>())
    })?;
    drop(local);
    drop(rt); // closes every connection
    let mut m = merge(plan, window, &stats);
    let from_origin = |t: Instant| t.saturating_duration_since(origin).as_millis() as u64;
    m.series = Some(LoadSeries {
        interval_ms,
        window_from_ms: from_origin(window.0),
        window_to_ms: from_origin(window.1),
        intervals,
        resources: Default::default(),
    });
    if let Some(w) = warmup {
        m.warmup_ms = w.ms.round() as u64;
        m.warmup = Some(w);
    }
    m.reconnects += opening.reconnects;
    let wall = wall0.elapsed().as_nanos() as f64;
    m.driver_cpu_cores = (wall > 0.0).then(|| process_cpu_ns().saturating_sub(cpu0) as f64 / wall);
    Ok(m)
}

/// Spawns the workers on the runtime: closed-loop virtual users, or the open loop's
/// connections sharing one schedule from `t_start` (a soak's ramp spreads the users' starts, or
/// climbs the rate).
fn spawn_workers(
    plan: &LoadPlan,
    sh: &Rc<Shared>,
    clients: Vec<Client>,
    t_start: Instant,
) -> Vec<tokio::task::JoinHandle<WorkerStats>> {
    match plan.rate {
        None => (0..u64::from(plan.workers))
            .map(|w| {
                let start = t_start + plan.ramp.mul_f64(w as f64 / f64::from(plan.workers.max(1)));
                match plan.lifecycle {
                    Lifecycle::Iteration => tokio::task::spawn_local(iteration_worker(sh.clone(), w, start)),
                    _ => tokio::task::spawn_local(closed_worker(sh.clone(), w, start)),
                }
            })
            .collect(),
        Some(r) => {
            let schedule = Schedule { rate: r as f64, ramp_s: plan.ramp.as_secs_f64() };
            let pacer = Rc::new(Pacer::new(t_start, schedule, clients.len()));
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
pub(super) fn merge(plan: &LoadPlan, window: (Instant, Instant), stats: &[WorkerStats]) -> LoadMetrics {
    let mut hist = stats::latency_histogram();
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
    let mut steps: std::collections::BTreeMap<String, hdrhistogram::Histogram<u64>> = Default::default();
    let mut iterations = 0;
    for s in stats {
        let _ = hist.add(&s.hist);
        for (name, h) in &s.steps {
            let _ = steps.entry(name.clone()).or_insert_with(stats::latency_histogram).add(h);
        }
        iterations += s.iterations;
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
    m.latency = metric(&hist);
    m.steps = steps.iter().filter_map(|(k, h)| Some((k.clone(), metric(h)?))).collect();
    m.iterations = (plan.lifecycle == Lifecycle::Iteration).then_some(iterations);
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
