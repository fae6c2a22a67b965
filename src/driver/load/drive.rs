//! Drives one load on a single-threaded runtime: opens the open-loop connections, fixes the
//! window, spawns the workers (closed or open loop), reports progress, and merges the workers'
//! counts and histograms into the record's load metrics; names the failure of a load in which
//! nothing succeeded.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::driver::httpclient::Counts;
use crate::driver::load::closed::closed_worker;
use crate::driver::load::gate::failure_of;
use crate::driver::load::open::open_worker;
use crate::driver::load::worker::WorkerStats;
use crate::driver::load::LoadPlan;
use crate::driver::workload::Progress;
use crate::mcp::suite::Suite;
use crate::spec::LoadMode;
use crate::spec::{Failure, FailureReason, HistogramMetric, LoadMetrics};
use crate::stats;

pub(super) fn runtime() -> Result<(tokio::runtime::Runtime, tokio::task::LocalSet), Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(FailureReason::EngineError, format!("tokio runtime: {e}")))?;
    Ok((rt, tokio::task::LocalSet::new()))
}

/// Drives the load on this thread (a single-threaded runtime: one core is enough, and the
/// figures do not depend on thread hand-offs). `on_window` is called once with the window's
/// start and end before any worker starts (the caller starts its samplers there). Returns the
/// merged metrics, with `server_cpu_cores` left for the caller.
pub fn drive(
    plan: &LoadPlan,
    suite: Suite,
    progress: &mut Progress,
    on_window: &mut dyn FnMut(Instant, Instant),
) -> Result<LoadMetrics, Failure> {
    let prepared = plan.prepared(suite)?;
    let (rt, local) = runtime()?;
    let total_ms = (plan.warmup + plan.duration).as_millis() as u64;
    let warmup_ms = plan.warmup.as_millis() as u64;
    // What opening the open-loop connections counted; each worker counts its own.
    let mut opening = Counts::default();
    let (cpu0, wall0) = (process_cpu_ns(), Instant::now());
    // The measured window's start and nominal end, as the workers see them.
    let mut window = (wall0, wall0);
    let stats = local.block_on(&rt, async {
        let mut sh = Rc::new(plan.shared(prepared));
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
        {
            let s = Rc::get_mut(&mut sh).expect("not shared yet");
            s.warm_end = t_start + plan.warmup;
            s.end = t_start + plan.warmup + plan.duration;
        }
        window = (sh.warm_end, sh.end);
        on_window(sh.warm_end, sh.end);
        let mut handles = Vec::new();
        match plan.rate {
            None => {
                for w in 0..u64::from(plan.workers) {
                    handles.push(tokio::task::spawn_local(closed_worker(sh.clone(), w)));
                }
            }
            Some(r) => {
                let next = Rc::new(Cell::new(0u64));
                let period_ns = 1e9 / r as f64;
                for c in clients {
                    handles.push(tokio::task::spawn_local(open_worker(
                        sh.clone(),
                        c,
                        next.clone(),
                        t_start,
                        period_ns,
                    )));
                }
            }
        }
        let all = futures_util::future::join_all(handles);
        tokio::pin!(all);
        let results = loop {
            tokio::select! {
                r = &mut all => break r,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {
                    let el = t_start.elapsed().as_millis() as u64;
                    progress(if el < warmup_ms { "warmup" } else { "load" }, el.min(total_ms), total_ms);
                }
            }
        };
        Ok::<_, Failure>(results.into_iter().filter_map(Result::ok).collect::<Vec<WorkerStats>>())
    })?;
    drop(local);
    drop(rt); // closes every connection
    let mut m = merge(plan, window, &stats);
    m.reconnects += opening.reconnects;
    let wall = wall0.elapsed().as_nanos() as f64;
    m.driver_cpu_cores = (wall > 0.0).then(|| process_cpu_ns().saturating_sub(cpu0) as f64 / wall);
    Ok(m)
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
        warmup_ms: plan.warmup.as_millis() as u64,
        window_nominal_ms: Some(plan.duration.as_millis() as u64),
        ..Default::default()
    };
    let (mut taken, mut late) = (0u64, 0u64);
    for s in stats {
        let _ = hist.add(&s.hist);
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
    m.latency = stats::summarize(&hist)
        .map(|summary| HistogramMetric { summary, histogram: stats::encode_histogram(&hist) });
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
