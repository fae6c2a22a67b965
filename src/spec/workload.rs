//! The workload a cell runs, and the one duration model of a cell: its time limit (every backend's
//! bound) and its expected time (what `plan` estimates and `run`'s progress counts down from).
//! Pure serde types, no I/O; records store `Workload` as it is, so its JSON shape is pinned by
//! the stored-shape snapshot test (tests/stored_shapes.rs).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::spec::Timeouts;

mod shape;
mod warmup;
pub use shape::{
    flow_tools, next_wanted, peak_vus, stages_ms, vus_at, SessionScope, Stage, Think, WarmupExcludes,
    DEFAULT_THINK_SEED, LIST_STEP,
};
pub use warmup::{p50_ms, warmup_calls, CallWarmup, Settling, StableRule, Warmup, REPORTED_WINDOWS};

/// What a cell does to the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Workload {
    /// `spawns` fresh server processes, each timed from the spawn request to the initialize
    /// result, then the first tools/list.
    ColdStart { spawns: u32 },
    /// One session: unrecorded warm-up calls (`warmup`: a number of them, or until their p50
    /// settles, at most `max` calls), then `calls` sequential tools/call of `tool`, each answer
    /// checked.
    SerialCalls { tool: String, warmup: Warmup, calls: u32 },
    /// Closed loop over HTTP: `workers` virtual users, each on its own connection running the
    /// MCP lifecycle (or re-initializing per call), calling `tool` back to back; an unrecorded
    /// warm-up (`warmup_ms`: that long, or until the p50 settles, at most `max` ms), then
    /// `duration_ms` measured, then `idle_after_ms` of memory sampling with every connection
    /// closed.
    Concurrency {
        tool: String,
        workers: u32,
        warmup_ms: Warmup,
        duration_ms: u64,
        lifecycle: Lifecycle,
        /// The post-load idle phase (every connection closed, the server's memory sampled), ms;
        /// 0 = none. Absent (0) in records written before it existed, and when turned off.
        #[serde(default, skip_serializing_if = "is_zero")]
        idle_after_ms: u64,
        /// A weighted mix of tools instead of one (`tool` is then "mix"): calls follow a fixed
        /// interleaving of the tools in proportion to their weights. Empty: `tool` alone.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        mix: Vec<MixEntry>,
        /// `lifecycle = "iteration"`: the tool calls of one iteration (session).
        #[serde(default, skip_serializing_if = "is_zero_u32")]
        session_calls: u32,
        /// k6's ramping-vus: the virtual users wanted over time (`shape::vus_at`), from
        /// `start_vus`. `workers` is then their peak, and `warmup_ms` + `duration_ms` the
        /// stages' length (the warm-up is their first part). Empty: `workers` throughout.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        stages: Vec<Stage>,
        #[serde(default, skip_serializing_if = "is_zero_u32")]
        start_vus: u32,
        /// Slept at the end of every iteration (or call, outside iterations), outside every
        /// timed step. Absent: none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        think: Option<Think>,
        /// An iteration as sessions of steps (a tool of the suite, or `tools/list`), with
        /// `lifecycle = "iteration"` (`tool` is then "flow"). Empty: the mix's calls.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        flow: Vec<Vec<String>>,
        /// With a flow: a session per inner list per iteration, or one per virtual user.
        #[serde(default, skip_serializing_if = "SessionScope::is_default")]
        session: SessionScope,
        #[serde(default, skip_serializing_if = "WarmupExcludes::is_default")]
        warmup_excludes: WarmupExcludes,
    },
    /// Open loop over HTTP: `rate` calls per second spread over `connections`, each call's
    /// latency measured from its intended send time (corrected for coordinated omission); then
    /// `idle_after_ms` as for `concurrency`.
    OpenLoop {
        tool: String,
        rate: u64,
        connections: u32,
        warmup_ms: Warmup,
        duration_ms: u64,
        /// As for `concurrency`.
        #[serde(default, skip_serializing_if = "is_zero")]
        idle_after_ms: u64,
    },
    /// Closed loop through the server's plain REST route for `tool` (no MCP): the protocol's
    /// overhead is the difference to `concurrency`; then `idle_after_ms` as for `concurrency`.
    HttpApi {
        tool: String,
        workers: u32,
        warmup_ms: Warmup,
        duration_ms: u64,
        /// As for `concurrency`.
        #[serde(default, skip_serializing_if = "is_zero")]
        idle_after_ms: u64,
    },
    /// A long load with phases and memory watched throughout: `idle_before_ms` with no client
    /// (the idle level before), `ramp_ms` (virtual users start one by one, or the open loop's
    /// rate climbs linearly from 0), `steady_ms` at full load (the measured window; RSS is fitted
    /// over it for the leak slope), then `idle_after_ms` with every client gone. Closed loop of
    /// `workers` virtual users, or with `rate`, an open loop over `workers` connections. Every
    /// `interval_ms` the series takes a histogram and a resource sample. A leak is named only
    /// when the slope's interval lies above `leak_floor_bytes_per_hour`. Then, `cycles` times,
    /// the clients connect again (all at once) and load for `cycle_load_ms`, and leave for
    /// `cycle_idle_ms`: each cycle gives one more share of memory given back (0: no cycles).
    Soak {
        tool: String,
        workers: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rate: Option<u64>,
        lifecycle: Lifecycle,
        idle_before_ms: u64,
        ramp_ms: u64,
        steady_ms: u64,
        idle_after_ms: u64,
        interval_ms: u64,
        leak_floor_bytes_per_hour: u64,
        #[serde(default, skip_serializing_if = "is_zero_u32")]
        cycles: u32,
        #[serde(default, skip_serializing_if = "is_zero")]
        cycle_load_ms: u64,
        #[serde(default, skip_serializing_if = "is_zero")]
        cycle_idle_ms: u64,
    },
}

/// For `skip_serializing_if`: a zero count that stands for "absent" in stored shapes.
pub(crate) fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// For `skip_serializing_if`: a zero that stands for "absent" in stored shapes.
pub(crate) fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The post-load idle phase of a load workload when the scenario does not say (`idle_after`).
pub const DEFAULT_IDLE_AFTER_MS: u64 = 30_000;

/// How a virtual user of a `concurrency` workload uses its MCP session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    /// initialize once, then tools/call in a loop (as the seeds did).
    #[default]
    Session,
    /// A fresh initialize (and session) before every call.
    PerCall,
    /// As load tools such as k6 drive MCP servers: each iteration of a virtual user opens a
    /// session (initialize, initialized, tools/list), makes `session_calls` calls of the mix and
    /// closes it; every step (initialize, tools/list, each tool, the whole session) is timed.
    Iteration,
}

/// One tool of a workload's mix and its weight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixEntry {
    pub tool: String,
    pub weight: u32,
}

/// The tool of each call slot of a mix, in order: a smooth weighted round robin (each tool as
/// evenly spread as its weight allows), one cycle of `sum(weights)` slots, the same for every run.
pub fn mix_cycle(mix: &[MixEntry]) -> Vec<&str> {
    let total: i64 = mix.iter().map(|m| i64::from(m.weight)).sum();
    let mut current = vec![0i64; mix.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        for (c, m) in current.iter_mut().zip(mix) {
            *c += i64::from(m.weight);
        }
        let best =
            (0..mix.len()).max_by_key(|&i| (current[i], std::cmp::Reverse(i))).expect("a mix has tools");
        current[best] -= total;
        out.push(mix[best].tool.as_str());
    }
    out
}

impl Workload {
    pub fn kind(&self) -> &'static str {
        match self {
            Workload::ColdStart { .. } => "cold_start",
            Workload::SerialCalls { .. } => "serial_calls",
            Workload::Concurrency { .. } => "concurrency",
            Workload::OpenLoop { .. } => "open_loop",
            Workload::HttpApi { .. } => "http_api",
            Workload::Soak { .. } => "soak",
        }
    }

    /// Whether the workload drives the server over HTTP (its server must have an HTTP transport).
    pub fn is_load(&self) -> bool {
        matches!(
            self,
            Workload::Concurrency { .. }
                | Workload::OpenLoop { .. }
                | Workload::HttpApi { .. }
                | Workload::Soak { .. }
        )
    }

    /// The tool a workload calls, if it calls one.
    /// Every tool the workload calls: its mix's, or its one tool.
    pub fn tools(&self) -> Vec<&str> {
        match self {
            Workload::Concurrency { flow, .. } if !flow.is_empty() => flow_tools(flow),
            Workload::Concurrency { mix, .. } if !mix.is_empty() => {
                mix.iter().map(|m| m.tool.as_str()).collect()
            }
            w => w.tool().into_iter().collect(),
        }
    }

    pub fn tool(&self) -> Option<&str> {
        match self {
            Workload::ColdStart { .. } => None,
            Workload::SerialCalls { tool, .. }
            | Workload::Concurrency { tool, .. }
            | Workload::OpenLoop { tool, .. }
            | Workload::HttpApi { tool, .. }
            | Workload::Soak { tool, .. } => Some(tool),
        }
    }

    /// Replaces the warm-up and measured durations of a load workload (a reduced run); a
    /// warm-up given here is fixed, whatever the scenario's was.
    /// Staged, the stages are scaled to the new length (their shape kept; a warm-up given here
    /// is their first part).
    pub fn override_times(&mut self, warmup: Option<u64>, duration: Option<u64>) {
        if let Workload::Concurrency { stages, warmup_ms, duration_ms, .. } = self {
            if !stages.is_empty() {
                let w = warmup.unwrap_or(warmup_ms.cap());
                let total = w + duration.unwrap_or(*duration_ms);
                shape::scale_stages(stages, total);
                *warmup_ms = Warmup::Fixed(w);
                *duration_ms = total.saturating_sub(w).max(1);
                return;
            }
        }
        if let Workload::Concurrency { warmup_ms, duration_ms, .. }
        | Workload::OpenLoop { warmup_ms, duration_ms, .. }
        | Workload::HttpApi { warmup_ms, duration_ms, .. } = self
        {
            if let Some(w) = warmup {
                *warmup_ms = Warmup::Fixed(w);
            }
            if let Some(d) = duration {
                *duration_ms = d;
            }
        }
        if let Workload::Soak { ramp_ms, steady_ms, .. } = self {
            if let Some(w) = warmup {
                *ramp_ms = w;
            }
            if let Some(d) = duration {
                *steady_ms = d;
            }
        }
    }

    /// The most a load workload's load takes, ms: its warm-up (a rule's cap) and its measured
    /// window (the idle phase after it is not included).
    pub fn load_time_ms(&self) -> u64 {
        self.load_ms(Warmup::cap)
    }

    /// A load workload's warm-up and measured window, ms, the warm-up counted by `warm`.
    fn load_ms(&self, warm: fn(&Warmup) -> u64) -> u64 {
        match self {
            Workload::Concurrency { warmup_ms, duration_ms, .. }
            | Workload::OpenLoop { warmup_ms, duration_ms, .. }
            | Workload::HttpApi { warmup_ms, duration_ms, .. } => warm(warmup_ms) + duration_ms,
            // The idle phase before the load counts with the load: the server is up through it.
            Workload::Soak { idle_before_ms, ramp_ms, steady_ms, .. } => idle_before_ms + ramp_ms + steady_ms,
            _ => 0,
        }
    }

    /// The interval of a load's time series, ms (a soak states it; other loads take the default).
    pub fn series_interval_ms(&self) -> u64 {
        match self {
            Workload::Soak { interval_ms, .. } => *interval_ms,
            _ => super::DEFAULT_SERIES_INTERVAL_MS,
        }
    }

    /// The workload's warm-up (None for `cold_start`, and for `soak`, whose ramp is load).
    pub fn warmup(&self) -> Option<&Warmup> {
        match self {
            Workload::ColdStart { .. } | Workload::Soak { .. } => None,
            Workload::SerialCalls { warmup, .. } => Some(warmup),
            Workload::Concurrency { warmup_ms, .. }
            | Workload::OpenLoop { warmup_ms, .. }
            | Workload::HttpApi { warmup_ms, .. } => Some(warmup_ms),
        }
    }

    /// The post-load idle phase of a load workload, ms (0: none, and for stdio workloads).
    pub fn idle_after_ms(&self) -> u64 {
        match self {
            Workload::Concurrency { idle_after_ms, .. }
            | Workload::OpenLoop { idle_after_ms, .. }
            | Workload::HttpApi { idle_after_ms, .. }
            | Workload::Soak { idle_after_ms, .. } => *idle_after_ms,
            _ => 0,
        }
    }

    /// A soak's connect/disconnect cycles after its idle phase, ms: their loads and idle
    /// phases together (0 without cycles, and for every other workload).
    pub fn cycles_ms(&self) -> u64 {
        match self {
            Workload::Soak { cycles, cycle_load_ms, cycle_idle_ms, .. } => {
                u64::from(*cycles) * (cycle_load_ms + cycle_idle_ms)
            }
            _ => 0,
        }
    }
}

/// How long a server of some family and runtime takes: to start (spawn to initialized) and per
/// call, in seconds. From earlier records where there are some, rough figures otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pace {
    pub spawn_s: f64,
    pub call_s: f64,
}

impl Workload {
    /// A generous bound on a whole cell's run from its limits (every backend's time limit); a
    /// warm-up rule counts with its cap.
    pub fn time_limit(&self, t: &Timeouts) -> Duration {
        let per_session = t.startup_ms + t.stop_grace_ms + t.term_ms + 10 * t.call_ms;
        let ms = match self {
            Workload::ColdStart { spawns } => u64::from(*spawns) * per_session,
            Workload::SerialCalls { warmup, calls, .. } => {
                per_session + warmup.cap().saturating_add(u64::from(*calls)).saturating_mul(t.call_ms)
            }
            // The idle phase samples through the shim (two round trips per 250 ms): its own
            // length plus a tenth covers slow reads.
            w => {
                per_session + w.load_time_ms() + (w.idle_after_ms() + w.cycles_ms()) * 11 / 10 + 2 * t.call_ms
            }
        };
        // A bound against typos; a soak may run a day and its idle phases.
        let cap_h = if matches!(self, Workload::Soak { .. }) { 27 } else { 6 };
        Duration::from_millis(ms.min(cap_h * 3600 * 1000) + 60_000)
    }

    /// The expected time of the workload's own work at a pace, in seconds (without what the
    /// backend adds per cell). `plan` estimates with it, and `run` counts its progress down
    /// from the same figures. A warm-up rule counts with the least it takes
    /// (`Warmup::expected`); its cap is in the time limit.
    pub fn expected_seconds(&self, pace: Pace) -> f64 {
        // Every session also stops its server (stdin closed, then a grace period).
        let session = pace.spawn_s + 0.2;
        match self {
            Workload::ColdStart { spawns } => f64::from(*spawns) * session,
            Workload::SerialCalls { warmup, calls, .. } => {
                session + (warmup.expected() + u64::from(*calls)) as f64 * pace.call_s
            }
            w => {
                session + (w.load_ms(Warmup::expected) + w.idle_after_ms() + w.cycles_ms()) as f64 / 1e3 + 1.0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mix_cycle_spreads_each_tool_by_its_weight() {
        let m = |t: &str, w| MixEntry { tool: t.into(), weight: w };
        let three = [m("a", 3), m("b", 1), m("c", 1)];
        let cycle = mix_cycle(&three);
        assert_eq!(cycle, ["a", "b", "a", "c", "a"]);
        assert_eq!(mix_cycle(&[m("x", 2)]), ["x", "x"]);
        let two = [m("a", 7), m("b", 5)];
        let big = mix_cycle(&two);
        assert_eq!(big.iter().filter(|t| **t == "a").count(), 7);
        // Never more than one call of the lighter tool in a row.
        assert!(!big.windows(2).any(|w| w == ["b", "b"]));
    }

    fn load(idle_after_ms: u64) -> Workload {
        Workload::Concurrency {
            tool: "echo".into(),
            workers: 4,
            warmup_ms: Warmup::Fixed(1_000),
            duration_ms: 10_000,
            lifecycle: Lifecycle::Session,
            idle_after_ms,
            mix: Vec::new(),
            session_calls: 0,
            stages: Vec::new(),
            start_vus: 0,
            think: None,
            flow: Vec::new(),
            session: SessionScope::PerIteration,
            warmup_excludes: WarmupExcludes::Everything,
        }
    }

    #[test]
    fn the_idle_phase_counts_in_the_time_limit_and_the_estimate() {
        let t = Timeouts::default();
        let pace = Pace { spawn_s: 2.0, call_s: 0.001 };
        let (off, on) = (load(0), load(30_000));
        assert_eq!(on.idle_after_ms(), 30_000);
        assert_eq!(on.load_time_ms(), off.load_time_ms(), "the load itself is the same");
        assert_eq!(on.time_limit(&t) - off.time_limit(&t), Duration::from_millis(33_000));
        assert!((on.expected_seconds(pace) - off.expected_seconds(pace) - 30.0).abs() < 1e-9);
        assert_eq!(Workload::ColdStart { spawns: 3 }.idle_after_ms(), 0);
    }

    #[test]
    fn an_idle_phase_of_zero_is_absent_from_the_stored_shape() {
        let off = serde_json::to_value(load(0)).unwrap();
        assert!(off.get("idle_after_ms").is_none(), "{off}");
        // A record written before the key existed reads as no idle phase.
        let back: Workload = serde_json::from_value(off).unwrap();
        assert_eq!(back, load(0));
        let on = serde_json::to_value(load(3_000)).unwrap();
        assert_eq!(on["idle_after_ms"], 3_000);
        assert_eq!(serde_json::from_value::<Workload>(on).unwrap(), load(3_000));
    }

    #[test]
    fn stored_workloads_of_every_form_read_and_write_back_byte_identical() {
        // As records written before warm-up rules store them, and the rule forms.
        let stored = [
            r#"{"kind":"serial_calls","tool":"add","warmup":200,"calls":1000}"#,
            r#"{"kind":"serial_calls","tool":"add","warmup":{"until":"stable","window":100,"tolerance":0.03,"max":5000,"windows":3},"calls":1000}"#,
            r#"{"kind":"concurrency","tool":"add","workers":8,"warmup_ms":1000,"duration_ms":10000,"lifecycle":"session"}"#,
            r#"{"kind":"open_loop","tool":"add","rate":2000,"connections":4,"warmup_ms":{"until":"stable","window":500,"tolerance":0.05,"max":30000,"windows":3},"duration_ms":5000,"idle_after_ms":1000}"#,
            r#"{"kind":"http_api","tool":"add","workers":8,"warmup_ms":500,"duration_ms":5000}"#,
        ];
        for json in stored {
            let w: Workload = serde_json::from_str(json).unwrap();
            assert_eq!(serde_json::to_string(&w).unwrap(), json);
        }
        let w: Workload = serde_json::from_str(stored[0]).unwrap();
        assert_eq!(w, Workload::SerialCalls { tool: "add".into(), warmup: Warmup::Fixed(200), calls: 1000 });
        let w: Workload = serde_json::from_str(stored[1]).unwrap();
        let rule = StableRule { window: 100, tolerance: 0.03, max: 5_000, windows: 3 };
        assert_eq!(w.warmup(), Some(&Warmup::Stable(rule)));
        // A rule that does not say what it waits for, or says more, is refused.
        let bad = stored[1].replace(r#""until":"stable","#, "");
        assert!(serde_json::from_str::<Workload>(&bad).is_err(), "{bad}");
        let bad = stored[1].replace(r#""windows":3"#, r#""windows":3,"k":2"#);
        assert!(serde_json::from_str::<Workload>(&bad).is_err(), "{bad}");
    }

    #[test]
    fn a_warmup_rule_counts_with_its_cap_in_the_limit_and_its_least_in_the_estimate() {
        let t = Timeouts { call_ms: 100, ..Timeouts::default() };
        let pace = Pace { spawn_s: 0.0, call_s: 0.001 };
        let serial = |warmup| Workload::SerialCalls { tool: "add".into(), warmup, calls: 1_000 };
        let rule = StableRule { window: 100, tolerance: 0.03, max: 5_000, windows: 3 };
        let (fixed, stable) = (serial(Warmup::Fixed(200)), serial(Warmup::Stable(rule)));
        let extra = stable.time_limit(&t) - fixed.time_limit(&t);
        assert_eq!(extra, Duration::from_millis(4_800 * t.call_ms), "the cap's calls, at the call limit");
        // The least the rule takes: 3 windows of 100 calls, 100 more than the fixed 200.
        assert!((stable.expected_seconds(pace) - fixed.expected_seconds(pace) - 0.1).abs() < 1e-9);
        let mut l = load(0);
        if let Workload::Concurrency { warmup_ms, .. } = &mut l {
            *warmup_ms = Warmup::Stable(StableRule::LOAD);
        }
        assert_eq!(l.load_time_ms(), 30_000 + 10_000);
        assert_eq!(l.time_limit(&t) - load(0).time_limit(&t), Duration::from_millis(29_000));
        assert!((l.expected_seconds(pace) - load(0).expected_seconds(pace) - 0.5).abs() < 1e-9);
        // `run --warmup` makes it fixed again.
        l.override_times(Some(250), None);
        assert_eq!(l.warmup(), Some(&Warmup::Fixed(250)));
    }

    #[test]
    fn a_staged_load_lasts_its_stages_and_a_reduced_run_scales_them() {
        let mut w = load(5_000);
        if let Workload::Concurrency { stages, warmup_ms, duration_ms, .. } = &mut w {
            *stages =
                vec![Stage { duration_ms: 10_000, target: 50 }, Stage { duration_ms: 30_000, target: 0 }];
            (*warmup_ms, *duration_ms) = (Warmup::Fixed(0), 40_000);
        }
        assert_eq!(w.load_time_ms(), 40_000);
        let pace = Pace { spawn_s: 0.0, call_s: 0.0 };
        assert!((w.expected_seconds(pace) - (0.2 + 40.0 + 5.0 + 1.0)).abs() < 1e-9);
        w.override_times(Some(1_000), Some(3_000));
        let Workload::Concurrency { stages, warmup_ms, duration_ms, .. } = &w else { unreachable!() };
        assert_eq!((*warmup_ms, *duration_ms), (Warmup::Fixed(1_000), 3_000));
        assert_eq!(stages_ms(stages), 4_000, "the stages last the reduced run");
        assert_eq!(stages[0], Stage { duration_ms: 1_000, target: 50 });
    }
}
