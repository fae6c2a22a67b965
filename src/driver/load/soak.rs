//! A soak's own parts around the load: the idle phase before it (no client yet: the level memory
//! starts from) and its figures after it, fitted over the steady phase of the load's series (the
//! leak slope of RSS and cgroup usage, latency drift), with the leak named against the floor;
//! and the connect/disconnect cycles after its idle phase (each a load and an idle phase, the
//! peak and the level after recorded).

use std::time::{Duration, Instant};

use crate::driver::load::{idle, load_with_sampler, LoadPlan};
use crate::driver::stdio::ShimClient;
use crate::driver::workload::Progress;
use crate::mcp::suite::AnySuite;
use crate::spec::{DriverSpec, Failure, FailureReason, LoadMetrics, MemoryLevel, SoakFigures, Workload};
use crate::spec::{LoadSeries, MIN_CALLS_FOR_DRIFT};
use crate::spec::{SoakCycle, Warmup};
use crate::stats::{self, theil_sen, Slope};

const MS_PER_HOUR: f64 = 3_600_000.0;

/// A soak's idle phase before the load: its RSS level (None inside when no reading came back).
/// None for every other workload.
pub(super) fn idle_before(
    spec: &DriverSpec,
    shim: &mut ShimClient,
    pid: u32,
    progress: &mut Progress,
) -> Result<Option<Option<MemoryLevel>>, Failure> {
    let Workload::Soak { idle_before_ms, .. } = spec.workload else {
        return Ok(None);
    };
    let phase =
        idle::idle_phase(shim, pid, Instant::now(), Duration::from_millis(idle_before_ms), &mut |_, d, t| {
            progress("idle before", d, t)
        });
    if let Some(ms) = phase.died_at_ms {
        return Err(Failure::new(
            FailureReason::Crash,
            format!("the server exited in the idle phase before the load ({ms} ms into it)"),
        ));
    }
    Ok(Some(phase.levels(idle_before_ms).0))
}

/// The soak's connect/disconnect cycles, after its idle phase: each time, the plan's clients
/// connect at once (no ramp, no warm-up) and load the server for `cycle_load_ms`, then every
/// connection closes and an idle phase of `cycle_idle_ms` reads the level memory comes back to.
/// Each cycle is pushed to `done` as it ends, so a server that dies in cycle 3 keeps cycles 1
/// and 2; the death is the error. Nothing for other workloads or a soak without cycles.
pub(super) fn cycles(
    spec: &DriverSpec,
    plan: &LoadPlan,
    suite: &AnySuite,
    shim: &mut ShimClient,
    pid: u32,
    done: &mut Vec<SoakCycle>,
    progress: &mut Progress,
) -> Result<(), Failure> {
    let Workload::Soak { cycles, cycle_load_ms, cycle_idle_ms, .. } = spec.workload else {
        return Ok(());
    };
    let plan = LoadPlan {
        warmup: Warmup::Fixed(0),
        ramp: Duration::ZERO,
        duration: Duration::from_millis(cycle_load_ms),
        ..plan.clone()
    };
    for k in 1..=cycles {
        let label = format!("cycle {k}/{cycles}");
        let crash = |what: String| Failure::new(FailureReason::Crash, format!("the server exited {what}"));
        let (result, sampled, closed_at) = load_with_sampler(&plan, suite, shim, pid, &mut |phase, d, t| {
            progress(&format!("{label} {phase}"), d, t)
        })?;
        if sampled.died {
            return Err(crash(format!("during the load of connect/disconnect {label}")));
        }
        let m = result.map_err(|f| Failure { detail: format!("{label}: {}", f.detail), ..f })?;
        let phase =
            idle::idle_phase(shim, pid, closed_at, Duration::from_millis(cycle_idle_ms), &mut |_, d, t| {
                progress(&format!("{label} idle"), d, t)
            });
        if let Some(ms) = phase.died_at_ms {
            return Err(crash(format!("while idle after connect/disconnect {label} ({ms} ms into it)")));
        }
        done.push(SoakCycle {
            ok: m.ok,
            failed: m.failed,
            peak_rss_bytes: sampled.peak.map(|p| p.rss_bytes),
            after: phase.levels(cycle_idle_ms).0,
        });
    }
    Ok(())
}

/// The soak's figures from the load (its series) and the idle level before it (the level after
/// it is the load memory's `after_level`).
pub(super) fn figures(workload: &Workload, load: &LoadMetrics, before: Option<MemoryLevel>) -> SoakFigures {
    let floor = match workload {
        Workload::Soak { leak_floor_bytes_per_hour, .. } => *leak_floor_bytes_per_hour,
        _ => 0,
    };
    let mut f = SoakFigures { leak_floor_bytes_per_hour: floor, idle_before: before, ..Default::default() };
    let Some(s) = load.series.as_ref() else {
        return f;
    };
    f.rss_bytes_per_hour = memory_slope(s, |i| Some(s.resources.rss_bytes[i]));
    f.cgroup_bytes_per_hour = memory_slope(s, |i| s.resources.cgroup_bytes[i]);
    f.leak = f.rss_bytes_per_hour.is_some_and(|r| leaks(&r, floor));
    f.p50_ms_per_hour = drift(s, 0.50);
    f.p99_ms_per_hour = drift(s, 0.99);
    f
}

/// Whether a slope names a leak: its interval lies wholly above the floor and zero.
pub fn leaks(slope: &Slope, floor_bytes_per_hour: u64) -> bool {
    slope.lower > 0.0 && slope.lower > floor_bytes_per_hour as f64
}

/// Theil–Sen of a resource over the steady phase, per hour.
fn memory_slope(s: &LoadSeries, value: impl Fn(usize) -> Option<u64>) -> Option<Slope> {
    let r = &s.resources;
    let pts: Vec<(f64, f64)> = (0..r.t_ms.len())
        .filter(|&i| (s.window_from_ms..=s.window_to_ms).contains(&r.t_ms[i]))
        .filter_map(|i| Some((r.t_ms[i] as f64 / MS_PER_HOUR, value(i)? as f64)))
        .collect();
    theil_sen(&pts)
}

/// Theil–Sen of the q-quantile of the steady phase's whole intervals, ms per hour.
fn drift(s: &LoadSeries, q: f64) -> Option<Slope> {
    let pts: Vec<(f64, f64)> = s
        .intervals
        .iter()
        .filter(|i| i.t_ms >= s.window_from_ms && i.t_ms + s.interval_ms <= s.window_to_ms)
        .filter(|i| i.ok >= MIN_CALLS_FOR_DRIFT)
        .filter_map(|i| {
            let h = stats::decode_histogram(i.histogram.as_deref()?).ok()?;
            let mid = (i.t_ms as f64 + s.interval_ms as f64 / 2.0) / MS_PER_HOUR;
            Some((mid, h.value_at_quantile(q) as f64 / 1e6))
        })
        .collect();
    theil_sen(&pts)
}
