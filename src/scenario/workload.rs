//! A `[[workload]]` table as written → the typed `spec::Workload`s it stands for (one per worker
//! count of a sweep), with every misplaced, missing or out-of-range key reported at its span,
//! warm-up rules included (`RawWarmup`). Checks against the scenario's servers (tools,
//! transports) are the scenario's, not these.

use std::ops::Range;

use serde::{de, Deserialize, Deserializer};
use toml::Spanned;

use super::raw::{RawWorkload, SpanErr};
use crate::spec::{
    Lifecycle, MixEntry, StableRule, Warmup, Workload, DEFAULT_IDLE_AFTER_MS, DEFAULT_SERIES_INTERVAL_MS,
};

/// A soak's leak floor when the scenario does not state one: 1 MiB per hour.
pub const DEFAULT_LEAK_FLOOR: u64 = 1 << 20;
use crate::text::parse_duration_ms;

/// A typed workload with the suffix of its cell id (`-w10` for one count of a worker sweep).
type Typed = Vec<(Workload, String)>;

fn span_of<T>(v: &Option<Spanned<T>>) -> Option<Range<usize>> {
    v.as_ref().map(|t| t.span())
}

/// A soak's duration key written as text (`"60s"`), or its default when absent.
fn text_duration(key: &str, v: &Option<Spanned<String>>, default: u64) -> Result<u64, SpanErr> {
    v.as_ref().map_or(Ok(default), |t| {
        parse_duration_ms(t.get_ref()).map_err(|m| (t.span(), format!("`{key}`: {m}")))
    })
}

impl RawWorkload {
    /// The typed workloads (one per worker count of a sweep, with the suffix for its cell id),
    /// or the span and message of what is wrong.
    pub(super) fn typed(&self) -> Result<Typed, SpanErr> {
        let typed = match self.kind.get_ref().as_str() {
            "cold_start" => self.cold_start(),
            "serial_calls" => self.serial_calls(),
            "concurrency" => self.closed_loop(false),
            "http_api" => self.closed_loop(true),
            "open_loop" => self.open_loop(),
            "soak" => self.soak(),
            other => Err((
                self.kind.span(),
                format!("unknown workload kind {other:?} (known: cold_start, serial_calls, concurrency, open_loop, http_api, soak)"),
            )),
        }?;
        if self.kind.get_ref() != "concurrency" {
            self.no_shape_keys()?;
        }
        if self.kind.get_ref() != "soak" {
            for (name, v) in [
                ("idle_before", &self.idle_before),
                ("ramp", &self.ramp),
                ("interval", &self.interval),
                ("leak_floor", &self.leak_floor),
                ("cycle_load", &self.cycle_load),
                ("cycle_idle", &self.cycle_idle),
            ] {
                self.stray(name, span_of(v))?;
            }
            self.stray("cycles", span_of(&self.cycles))?;
        }
        Ok(typed)
    }

    /// `soak`: a long closed loop of `workers` (or, with `rate`, an open loop over
    /// `connections`) with an idle phase before, a ramp, a steady phase (`duration`) and an idle
    /// phase after; its series' interval and leak floor.
    fn soak(&self) -> Result<Typed, SpanErr> {
        self.load_only()?;
        self.stray("warmup", span_of(&self.warmup))?;
        self.stray("mix", span_of(&self.mix))?;
        self.stray("session_calls", span_of(&self.session_calls))?;
        if let Some(l) = self.lifecycle.as_ref().filter(|l| *l.get_ref() == Lifecycle::Iteration) {
            return Err((l.span(), "a soak keeps its sessions (\"session\") or renews them per call (\"per_call\"); \"iteration\" is for concurrency".into()));
        }
        let rate = self.rate.as_ref().map(|r| *r.get_ref());
        if let Some(r) = &self.rate {
            if !(1..=10_000_000).contains(r.get_ref()) {
                return Err((r.span(), "`rate` is calls per second, from 1 to 10,000,000".into()));
            }
            self.stray("workers", span_of(&self.workers))?;
            self.stray("lifecycle", span_of(&self.lifecycle))?;
        } else {
            self.stray("connections", span_of(&self.connections))?;
        }
        let workers = match rate {
            Some(_) => self.connections.as_ref().map_or(64, |c| *c.get_ref()),
            None => match self.worker_counts()?.as_slice() {
                [one] => *one,
                _ => {
                    let sp = span_of(&self.workers).unwrap_or(self.kind.span());
                    return Err((sp, "a soak runs one count of `workers` (a number, not a list)".into()));
                }
            },
        };
        let steady = self.duration.as_ref().ok_or_else(|| {
            (
                self.kind.span(),
                "a soak workload needs `duration` (its steady phase, e.g. \"30m\")".to_string(),
            )
        })?;
        let steady_ms = parse_duration_ms(steady.get_ref()).map_err(|m| (steady.span(), m))?;
        if steady_ms < 10_000 {
            return Err((
                steady.span(),
                "a soak's `duration` is at least \"10s\" (a slope needs points)".into(),
            ));
        }
        let interval_ms = text_duration("interval", &self.interval, DEFAULT_SERIES_INTERVAL_MS)?;
        if !(100..=3_600_000).contains(&interval_ms) || interval_ms * 10 > steady_ms {
            let sp = span_of(&self.interval).unwrap_or(self.kind.span());
            return Err((
                sp,
                "a soak's `interval` is from \"100ms\" to \"60m\" and a tenth of `duration` at most".into(),
            ));
        }
        let leak_floor_bytes_per_hour = match &self.leak_floor {
            None => DEFAULT_LEAK_FLOOR,
            Some(f) => {
                let t = f.get_ref().trim();
                let per_hour = t.strip_suffix("/h").ok_or_else(|| {
                    (f.span(), "`leak_floor` is memory per hour, e.g. \"1MiB/h\"".to_string())
                })?;
                crate::text::parse_memory(per_hour).map_err(|m| (f.span(), m))?
            }
        };
        let idle_after_ms = self.idle_after()?;
        let (cycles, cycle_load_ms, cycle_idle_ms) = self.cycles(idle_after_ms)?;
        Ok(vec![(
            Workload::Soak {
                tool: self.tool_name()?,
                workers,
                rate,
                lifecycle: self.lifecycle.as_ref().map(|l| *l.get_ref()).unwrap_or_default(),
                idle_before_ms: text_duration("idle_before", &self.idle_before, 30_000)?,
                ramp_ms: text_duration("ramp", &self.ramp, 30_000)?,
                steady_ms,
                idle_after_ms,
                interval_ms,
                leak_floor_bytes_per_hour,
                cycles,
                cycle_load_ms,
                cycle_idle_ms,
            },
            String::new(),
        )])
    }

    /// A soak's connect/disconnect cycles: their count, each one's load and idle phase, ms (all
    /// zero without `cycles`). Each cycle's idle phase defaults to the soak's `idle_after`.
    fn cycles(&self, idle_after_ms: u64) -> Result<(u32, u64, u64), SpanErr> {
        let Some(n) = &self.cycles else {
            for (key, v) in [("cycle_load", &self.cycle_load), ("cycle_idle", &self.cycle_idle)] {
                if let Some(sp) = span_of(v) {
                    return Err((
                        sp,
                        format!("`{key}` without `cycles` (how many connect/disconnect cycles, e.g. 5)"),
                    ));
                }
            }
            return Ok((0, 0, 0));
        };
        if !(1..=1_000).contains(n.get_ref()) {
            return Err((
                n.span(),
                "`cycles` is a count of connect/disconnect cycles, from 1 to 1000".into(),
            ));
        }
        let load = text_duration("cycle_load", &self.cycle_load, 60_000)?;
        let idle = text_duration("cycle_idle", &self.cycle_idle, idle_after_ms)?;
        if load < 1_000 || idle < 1_000 {
            let sp = if load < 1_000 { span_of(&self.cycle_load) } else { span_of(&self.cycle_idle) };
            return Err((
                sp.unwrap_or(n.span()),
                "a cycle's `cycle_load` and `cycle_idle` are at least \"1s\" (the idle phase reads a level at its end)".into(),
            ));
        }
        Ok((*n.get_ref(), load, idle))
    }

    fn cold_start(&self) -> Result<Typed, SpanErr> {
        self.stray("tool", span_of(&self.tool))?;
        self.stray("warmup", span_of(&self.warmup))?;
        self.stray("calls", span_of(&self.calls))?;
        self.no_load_keys()?;
        Ok(vec![(Workload::ColdStart { spawns: self.need("spawns", &self.spawns)? }, String::new())])
    }

    fn serial_calls(&self) -> Result<Typed, SpanErr> {
        self.stray("spawns", span_of(&self.spawns))?;
        self.no_load_keys()?;
        let warmup = match &self.warmup {
            None => Warmup::Fixed(0),
            Some(w) => self.warmup_of(w, Unit::Calls)?,
        };
        Ok(vec![(
            Workload::SerialCalls {
                tool: self.tool_name()?,
                warmup,
                calls: self.need("calls", &self.calls)?,
            },
            String::new(),
        )])
    }

    /// `concurrency` (MCP calls) and `http_api` (the plain REST route): closed-loop load, one
    /// cell per worker count.
    fn closed_loop(&self, http_api: bool) -> Result<Typed, SpanErr> {
        self.load_only()?;
        self.stray("rate", span_of(&self.rate))?;
        self.stray("connections", span_of(&self.connections))?;
        if http_api {
            self.stray("lifecycle", span_of(&self.lifecycle))?;
        }
        let shape = if http_api { Default::default() } else { self.shape()? };
        let (warmup_ms, duration_ms, counts) = match shape.stages.is_empty() {
            true => {
                let (w, d) = self.load_time()?;
                (w, d, self.worker_counts()?)
            }
            false => self.staged_time(&shape).map(|(w, d, peak)| (w, d, vec![peak]))?,
        };
        let idle_after_ms = self.idle_after()?;
        let lifecycle = match shape.flow.is_empty() {
            true => self.lifecycle.as_ref().map(|l| *l.get_ref()).unwrap_or_default(),
            false => Lifecycle::Iteration,
        };
        let (tool, mix, session_calls) = match shape.flow.is_empty() {
            true => self.mix_and_sessions(http_api, lifecycle)?,
            false => ("flow".into(), Vec::new(), 0),
        };
        Ok(counts
            .into_iter()
            .map(|workers| {
                let w = if http_api {
                    Workload::HttpApi { tool: tool.clone(), workers, warmup_ms, duration_ms, idle_after_ms }
                } else {
                    Workload::Concurrency {
                        tool: tool.clone(),
                        workers,
                        warmup_ms,
                        duration_ms,
                        lifecycle,
                        idle_after_ms,
                        mix: mix.clone(),
                        session_calls,
                        stages: shape.stages.clone(),
                        start_vus: shape.start_vus,
                        think: shape.think,
                        flow: shape.flow.clone(),
                        session: shape.session,
                        warmup_excludes: shape.warmup_excludes,
                    }
                };
                (w, format!("-w{workers}"))
            })
            .collect())
    }

    /// A closed loop's `tool` or `mix` (one of them), and its iterations' calls.
    fn mix_and_sessions(
        &self,
        http_api: bool,
        lifecycle: Lifecycle,
    ) -> Result<(String, Vec<MixEntry>, u32), SpanErr> {
        if http_api {
            self.stray("mix", span_of(&self.mix))?;
        }
        let iteration = lifecycle == Lifecycle::Iteration;
        if !iteration {
            self.stray_unless("session_calls", span_of(&self.session_calls), "lifecycle = \"iteration\"")?;
        }
        let session_calls = match &self.session_calls {
            Some(n) if !(1..=10_000).contains(n.get_ref()) => {
                return Err((n.span(), "`session_calls` is from 1 to 10000".into()))
            }
            Some(n) => *n.get_ref(),
            None if iteration => 5,
            None => 0,
        };
        let Some(mix) = &self.mix else {
            return Ok((self.tool_name()?, Vec::new(), session_calls));
        };
        if let Some(t) = &self.tool {
            return Err((t.span(), "`tool` and `mix` exclude each other: a mix names its tools".into()));
        }
        if mix.get_ref().is_empty() || mix.get_ref().values().any(|w| !(1..=1000).contains(w)) {
            return Err((
                mix.span(),
                "`mix` maps each tool to a weight from 1 to 1000, e.g. { get_cart = 3, search_products = 1 }"
                    .into(),
            ));
        }
        let entries = mix
            .get_ref()
            .iter()
            .map(|(tool, weight)| MixEntry { tool: tool.clone(), weight: *weight })
            .collect();
        Ok(("mix".into(), entries, session_calls))
    }

    /// Refuses a key that belongs only with another key's value.
    pub(super) fn stray_unless(
        &self,
        name: &str,
        span: Option<Range<usize>>,
        with: &str,
    ) -> Result<(), SpanErr> {
        match span {
            Some(sp) => Err((sp, format!("`{name}` belongs only to a workload with {with}"))),
            None => Ok(()),
        }
    }

    fn open_loop(&self) -> Result<Typed, SpanErr> {
        self.load_only()?;
        self.stray("workers", span_of(&self.workers))?;
        self.stray("lifecycle", span_of(&self.lifecycle))?;
        self.stray("mix", span_of(&self.mix))?;
        self.stray("session_calls", span_of(&self.session_calls))?;
        let (warmup_ms, duration_ms) = self.load_time()?;
        let idle_after_ms = self.idle_after()?;
        let rate = self.rate.as_ref().ok_or_else(|| {
            (self.kind.span(), "an open_loop workload needs `rate` (calls per second)".to_string())
        })?;
        if !(1..=10_000_000).contains(rate.get_ref()) {
            return Err((rate.span(), "`rate` is calls per second, from 1 to 10,000,000".into()));
        }
        let connections = self.connections.as_ref().map_or(64, |c| *c.get_ref());
        if !(1..=10_000).contains(&connections) {
            return Err((
                span_of(&self.connections).unwrap_or(self.kind.span()),
                "`connections` is from 1 to 10000".into(),
            ));
        }
        Ok(vec![(
            Workload::OpenLoop {
                tool: self.tool_name()?,
                rate: *rate.get_ref(),
                connections,
                warmup_ms,
                duration_ms,
                idle_after_ms,
            },
            String::new(),
        )])
    }

    /// Refuses a key that does not belong to this kind of workload.
    pub(super) fn stray(&self, name: &str, span: Option<Range<usize>>) -> Result<(), SpanErr> {
        match span {
            Some(sp) => Err((sp, format!("`{name}` does not belong to a {} workload", self.kind.get_ref()))),
            None => Ok(()),
        }
    }

    /// A count this kind of workload cannot do without.
    fn need(&self, name: &str, v: &Option<Spanned<u32>>) -> Result<u32, SpanErr> {
        v.as_ref()
            .map(|x| *x.get_ref())
            .ok_or_else(|| (self.kind.span(), format!("a {} workload needs `{name}`", self.kind.get_ref())))
    }

    fn tool_name(&self) -> Result<String, SpanErr> {
        self.tool
            .as_ref()
            .map(|t| t.get_ref().clone())
            .ok_or_else(|| (self.kind.span(), format!("a {} workload needs `tool`", self.kind.get_ref())))
    }

    /// A duration key of a load workload (`"2s"`), or its default.
    fn duration_of(&self, key: &str, v: Option<&Spanned<toml::Value>>, default: u64) -> Result<u64, SpanErr> {
        match v {
            None => Ok(default),
            Some(v) => match v.get_ref() {
                toml::Value::String(t) => parse_duration_ms(t).map_err(|m| (v.span(), m)),
                _ => Err((
                    v.span(),
                    format!("`{key}` of a {} workload is a duration such as \"2s\"", self.kind.get_ref()),
                )),
            },
        }
    }

    /// A load workload's warm-up and duration (milliseconds).
    fn load_time(&self) -> Result<(Warmup, u64), SpanErr> {
        let kind = self.kind.get_ref();
        let warmup = match &self.warmup {
            None => Warmup::Fixed(1_000),
            Some(w) => self.warmup_of(w, Unit::Ms)?,
        };
        let d = self.duration.as_ref().ok_or_else(|| {
            (self.kind.span(), format!("a {kind} workload needs `duration` (e.g. \"10s\")"))
        })?;
        let dur = parse_duration_ms(d.get_ref()).map_err(|m| (d.span(), m))?;
        if dur == 0 {
            return Err((d.span(), "`duration` must be more than 0".into()));
        }
        Ok((warmup, dur))
    }

    /// A load workload's post-load idle phase, milliseconds: `"0s"` turns it off; at most an
    /// hour (a typo such as `"300m"` for `"300s"` would otherwise hold a cell for five hours).
    fn idle_after(&self) -> Result<u64, SpanErr> {
        let ms = self.duration_of("idle_after", self.idle_after.as_ref(), DEFAULT_IDLE_AFTER_MS)?;
        match &self.idle_after {
            Some(v) if ms > 3_600_000 => {
                Err((v.span(), "`idle_after` is at most \"60m\" (\"0s\" turns it off)".into()))
            }
            _ => Ok(ms),
        }
    }

    /// A load workload's worker counts: one number, or a list of distinct ones.
    fn worker_counts(&self) -> Result<Vec<u32>, SpanErr> {
        let w = self.workers.as_ref().ok_or_else(|| {
            (
                self.kind.span(),
                format!("a {} workload needs `workers` (a number or a list)", self.kind.get_ref()),
            )
        })?;
        let bad = || {
            (
                w.span(),
                "`workers` is a number of virtual users from 1 to 10000, or a list of them".to_string(),
            )
        };
        let one = |v: &toml::Value| v.as_integer().filter(|n| (1..=10_000).contains(n)).map(|n| n as u32);
        let list = match w.get_ref() {
            toml::Value::Array(a) if !a.is_empty() => {
                a.iter().map(|v| one(v).ok_or_else(bad)).collect::<Result<Vec<_>, _>>()?
            }
            v => vec![one(v).ok_or_else(bad)?],
        };
        let mut seen = list.clone();
        seen.sort();
        seen.dedup();
        if seen.len() != list.len() {
            return Err((w.span(), "`workers` lists a count twice".into()));
        }
        Ok(list)
    }

    /// Refuses the keys of stdio workloads on a load workload.
    fn load_only(&self) -> Result<(), SpanErr> {
        self.stray("spawns", span_of(&self.spawns))?;
        self.stray("calls", span_of(&self.calls))
    }

    /// Refuses the keys of load workloads on a stdio workload.
    fn no_load_keys(&self) -> Result<(), SpanErr> {
        let kind = self.kind.get_ref();
        let spans = [
            ("workers", self.workers.as_ref().map(|t| t.span())),
            ("duration", self.duration.as_ref().map(|t| t.span())),
            ("rate", self.rate.as_ref().map(|t| t.span())),
            ("connections", self.connections.as_ref().map(|t| t.span())),
            ("lifecycle", self.lifecycle.as_ref().map(|t| t.span())),
            ("mix", self.mix.as_ref().map(|t| t.span())),
            ("session_calls", self.session_calls.as_ref().map(|t| t.span())),
            ("idle_after", self.idle_after.as_ref().map(|t| t.span())),
        ];
        for (name, span) in spans {
            if let Some(sp) = span {
                return Err((sp, format!("`{name}` does not belong to a {kind} workload")));
            }
        }
        Ok(())
    }
}

/// A `warmup` as written: a number (of calls), a string (a duration, or `"stable"`: the rule
/// with its defaults) or a rule's table. Read by hand, not `untagged`, so that a wrong key or
/// type inside the table is reported at itself.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum RawWarmup {
    Number(i64),
    Text(String),
    Rule(Box<RawRule>),
}

/// `warmup = { until = "stable", window = …, tolerance = "5%", max = …, windows = 3 }`; what is
/// left out takes the kind's default (`spec::StableRule::CALLS`, `spec::StableRule::LOAD`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    until: Spanned<String>,
    window: Option<Spanned<toml::Value>>,
    tolerance: Option<Spanned<toml::Value>>,
    max: Option<Spanned<toml::Value>>,
    windows: Option<Spanned<toml::Value>>,
}

impl<'de> Deserialize<'de> for RawWarmup {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = RawWarmup;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number of calls, a duration such as \"1s\", \"stable\", or a table { until = \"stable\", ... }")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<RawWarmup, E> {
                Ok(RawWarmup::Number(n))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<RawWarmup, E> {
                Ok(RawWarmup::Number(i64::try_from(n).unwrap_or(i64::MAX)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RawWarmup, E> {
                Ok(RawWarmup::Text(s.to_string()))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<RawWarmup, A::Error> {
                RawRule::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|r| RawWarmup::Rule(Box::new(r)))
            }
        }
        d.deserialize_any(V)
    }
}

/// What a warm-up is counted in: calls (`serial_calls`) or milliseconds (load workloads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Calls,
    Ms,
}

/// The bounds of a rule's `window` and `max`, per unit: the least (fewer calls, or less time,
/// make a window's p50 too noisy to judge) and the most (a typo must not hold a cell for hours).
const MIN_WINDOW_CALLS: u64 = 10;
const MAX_CALLS: u64 = 10_000_000;
const MIN_WINDOW_MS: u64 = 100;
const MAX_MS: u64 = 600_000;

impl RawWorkload {
    /// The workload's `warmup` in its unit: a fixed amount, `"stable"` or a rule's table.
    fn warmup_of(&self, w: &Spanned<RawWarmup>, unit: Unit) -> Result<Warmup, SpanErr> {
        let kind = self.kind.get_ref();
        let (fixed, defaults, example) = match unit {
            Unit::Calls => {
                ("a number of calls", StableRule::CALLS, "window = 200, tolerance = \"5%\", max = 10000")
            }
            Unit::Ms => (
                "a duration such as \"2s\"",
                StableRule::LOAD,
                "window = \"500ms\", tolerance = \"5%\", max = \"30s\"",
            ),
        };
        let wrong = || {
            (
                w.span(),
                format!(
                    "`warmup` of a {kind} workload is {fixed}, \"stable\", or a table {{ until = \"stable\", {example} }}"
                ),
            )
        };
        match (w.get_ref(), unit) {
            (RawWarmup::Text(t), _) if t == "stable" => Ok(Warmup::Stable(defaults)),
            (RawWarmup::Number(n), Unit::Calls) => {
                u32::try_from(*n).map(|n| Warmup::Fixed(n.into())).map_err(|_| wrong())
            }
            (RawWarmup::Text(t), Unit::Ms) => {
                parse_duration_ms(t).map(Warmup::Fixed).map_err(|m| (w.span(), format!("{m}; {}", wrong().1)))
            }
            (RawWarmup::Rule(r), _) => r.rule(kind, unit, defaults, w.span()).map(Warmup::Stable),
            _ => Err(wrong()),
        }
    }
}

impl RawRule {
    /// The rule, its left-out figures from `defaults`; `whole` is the table's span.
    fn rule(
        &self,
        kind: &str,
        unit: Unit,
        defaults: StableRule,
        whole: Range<usize>,
    ) -> Result<StableRule, SpanErr> {
        if self.until.get_ref() != "stable" {
            return Err((
                self.until.span(),
                "`until` is \"stable\": warm-up ends when the p50 settles".into(),
            ));
        }
        let window = match &self.window {
            None => defaults.window,
            Some(v) => amount(kind, "window", v, unit)?,
        };
        let max = match &self.max {
            None => defaults.max,
            Some(v) => amount(kind, "max", v, unit)?,
        };
        let tolerance = match &self.tolerance {
            None => defaults.tolerance,
            Some(v) => percentage(v)?,
        };
        let windows = match &self.windows {
            None => defaults.windows,
            Some(v) => {
                v.get_ref().as_integer().filter(|n| (2..=20).contains(n)).map(|n| n as u32).ok_or_else(
                    || {
                        (
                            v.span(),
                            "`windows` is how many consecutive windows must agree, from 2 to 20".to_string(),
                        )
                    },
                )?
            }
        };
        if u64::from(windows) * window > max {
            let at = [&self.max, &self.window].into_iter().flatten().next().map_or(whole, |v| v.span());
            let unit = if unit == Unit::Calls { " calls" } else { " ms" };
            return Err((
                at,
                format!(
                    "the warm-up rule needs {windows} windows of {window}{unit} to settle, more than its `max` of {max}{unit}: make `max` at least {}{unit} or `window` smaller",
                    u64::from(windows) * window
                ),
            ));
        }
        Ok(StableRule { window, tolerance, max, windows })
    }
}

/// A rule's `window` or `max`: calls (an integer) or a duration (a string), within bounds (a
/// `max` below `windows` × `window` is the rule's check).
fn amount(kind: &str, key: &str, v: &Spanned<toml::Value>, unit: Unit) -> Result<u64, SpanErr> {
    let n = match (unit, v.get_ref()) {
        (Unit::Calls, toml::Value::Integer(n)) => u64::try_from(*n).ok(),
        (Unit::Ms, toml::Value::String(s)) => Some(parse_duration_ms(s).map_err(|m| (v.span(), m))?),
        _ => None,
    };
    let (least, most) = match unit {
        Unit::Calls => (MIN_WINDOW_CALLS, MAX_CALLS),
        Unit::Ms => (MIN_WINDOW_MS, MAX_MS),
    };
    let what = match unit {
        Unit::Calls => format!("a number of calls from {least} to {most}"),
        Unit::Ms => format!("a duration from \"{least}ms\" to \"{}m\" such as \"500ms\"", most / 60_000),
    };
    n.filter(|n| (least..=most).contains(n))
        .ok_or_else(|| (v.span(), format!("`{key}` of a {kind} warm-up rule is {what}")))
}

/// A rule's `tolerance`: a percentage such as `"5%"`, more than 0 and at most 50.
fn percentage(v: &Spanned<toml::Value>) -> Result<f64, SpanErr> {
    let pct = v
        .get_ref()
        .as_str()
        .and_then(|s| s.trim().strip_suffix('%'))
        .and_then(|n| n.trim().parse::<f64>().ok())
        .filter(|p| p.is_finite() && *p > 0.0 && *p <= 50.0);
    pct.map(|p| p / 100.0).ok_or_else(|| {
        (v.span(), "`tolerance` is a percentage such as \"5%\", more than 0 and at most 50".to_string())
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::Scenario;
    use crate::spec::{StableRule, Warmup};

    /// A stdio and an HTTP server; the workload under test follows.
    const HEAD: &str = "name = \"w\"\n[[server]]\nid = \"stdio\"\nfamily = \"benchlab-null\"\n[[server]]\n\
        id = \"http\"\nfamily = \"benchlab-null\"\ntransport = \"streamable-http\"\n";

    fn serial(warmup: &str) -> String {
        format!("{HEAD}[[workload]]\nkind = \"serial_calls\"\ntool = \"echo\"\ncalls = 10\nservers = [\"stdio\"]\n{warmup}\n")
    }

    fn load(warmup: &str) -> String {
        format!("{HEAD}[[workload]]\nkind = \"concurrency\"\ntool = \"echo\"\nworkers = 2\nduration = \"2s\"\nservers = [\"http\"]\n{warmup}\n")
    }

    fn warmup(src: &str) -> Result<Warmup, String> {
        let s = Scenario::parse(Path::new("w.toml"), src.to_string()).map_err(|e| e.to_string())?;
        Ok(*s.workloads[0].warmup().expect("a warm-up"))
    }

    /// The scenario is refused at the first `at` on its `warmup` line, saying `says`.
    fn refused(src: &str, at: &str, says: &str) {
        let e = warmup(src).unwrap_err();
        let line_no = src.lines().position(|l| l.starts_with("warmup")).unwrap() + 1;
        let col = src.lines().nth(line_no - 1).unwrap().find(at).unwrap() + 1;
        assert!(e.starts_with(&format!("w.toml:{line_no}:{col}: ")), "{e}");
        assert!(e.contains(says), "{e}");
    }

    #[test]
    fn the_fixed_forms_read_as_before() {
        assert_eq!(warmup(&serial("warmup = 200")), Ok(Warmup::Fixed(200)));
        assert_eq!(warmup(&serial("")), Ok(Warmup::Fixed(0)));
        assert_eq!(warmup(&load("warmup = \"2s\"")), Ok(Warmup::Fixed(2_000)));
        assert_eq!(warmup(&load("")), Ok(Warmup::Fixed(1_000)));
    }

    #[test]
    fn stable_takes_the_defaults_of_the_kind() {
        assert_eq!(warmup(&serial("warmup = \"stable\"")), Ok(Warmup::Stable(StableRule::CALLS)));
        assert_eq!(warmup(&load("warmup = \"stable\"")), Ok(Warmup::Stable(StableRule::LOAD)));
    }

    #[test]
    fn a_rule_table_counts_calls_or_time_and_defaults_what_it_leaves_out() {
        let t = r#"warmup = { until = "stable", window = 100, tolerance = "3%", max = 5000 }"#;
        let rule = StableRule { window: 100, tolerance: 0.03, max: 5_000, windows: 3 };
        assert_eq!(warmup(&serial(t)), Ok(Warmup::Stable(rule)));
        let t = r#"warmup = { until = "stable", window = "250ms", tolerance = "2.5%", max = "20s", windows = 4 }"#;
        let rule = StableRule { window: 250, tolerance: 0.025, max: 20_000, windows: 4 };
        assert_eq!(warmup(&load(t)), Ok(Warmup::Stable(rule)));
        let t = r#"warmup = { until = "stable", max = 20000 }"#;
        assert_eq!(warmup(&serial(t)), Ok(Warmup::Stable(StableRule { max: 20_000, ..StableRule::CALLS })));
    }

    #[test]
    fn a_bad_tolerance_is_refused_at_itself() {
        for bad in [r#""5""#, r#""0%""#, r#""80%""#, "5", r#""x%""#] {
            let t = format!(r#"warmup = {{ until = "stable", tolerance = {bad} }}"#);
            refused(
                &serial(&t),
                bad,
                "`tolerance` is a percentage such as \"5%\", more than 0 and at most 50",
            );
        }
    }

    #[test]
    fn a_rule_that_could_never_settle_is_refused() {
        let t = r#"warmup = { until = "stable", window = 1000, max = 500 }"#;
        refused(
            &serial(t),
            "500",
            "needs 3 windows of 1000 calls to settle, more than its `max` of 500 calls",
        );
        let t = r#"warmup = { until = "stable", window = "2s", max = "5s" }"#;
        refused(&load(t), "\"5s\"", "more than its `max` of 5000 ms: make `max` at least 6000 ms");
        let t = r#"warmup = { until = "stable", window = 20000 }"#;
        refused(&serial(t), "20000", "more than its `max` of 10000 calls");
    }

    #[test]
    fn a_rule_in_the_units_of_another_kind_is_refused() {
        let t = r#"warmup = { until = "stable", window = 100 }"#;
        refused(
            &load(t),
            "100",
            "`window` of a concurrency warm-up rule is a duration from \"100ms\" to \"10m\"",
        );
        let t = r#"warmup = { until = "stable", window = "500ms" }"#;
        refused(
            &serial(t),
            "\"500ms\"",
            "`window` of a serial_calls warm-up rule is a number of calls from 10",
        );
        refused(
            &serial("warmup = \"1s\""),
            "\"1s\"",
            "`warmup` of a serial_calls workload is a number of calls,",
        );
        refused(
            &load("warmup = 200"),
            "200",
            "`warmup` of a concurrency workload is a duration such as \"2s\",",
        );
        refused(&load("warmup = \"stabel\""), "\"stabel\"", "\"stable\", or a table { until = \"stable\"");
    }

    #[test]
    fn a_warmup_table_where_none_belongs_is_refused() {
        let src = format!(
            "{HEAD}[[workload]]\nkind = \"cold_start\"\nspawns = 2\nwarmup = {{ until = \"stable\" }}\n"
        );
        refused(&src, "{", "`warmup` does not belong to a cold_start workload");
    }

    #[test]
    fn a_rule_table_refuses_what_it_does_not_know() {
        refused(&serial(r#"warmup = { until = "steady" }"#), "\"steady\"", "`until` is \"stable\"");
        refused(&serial(r#"warmup = { window = 100 }"#), "{", "missing field `until`");
        refused(&serial(r#"warmup = { until = "stable", windw = 3 }"#), "windw", "unknown field `windw`");
        refused(&serial(r#"warmup = { until = "stable", windows = 1 }"#), "1 }", "`windows` is how many");
        refused(&serial("warmup = true"), "true", "a number of calls, a duration such as \"1s\", \"stable\"");
    }
}
