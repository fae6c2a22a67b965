//! A `[[workload]]` table as written → the typed `spec::Workload`s it stands for (one per worker
//! count of a sweep), with every misplaced, missing or out-of-range key reported at its span.
//! Checks against the scenario's servers (tools, transports) are the scenario's, not these.

use std::ops::Range;

use toml::Spanned;

use super::raw::{RawWorkload, SpanErr};
use crate::spec::{Workload, DEFAULT_IDLE_AFTER_MS};
use crate::text::parse_duration_ms;

/// A typed workload with the suffix of its cell id (`-w10` for one count of a worker sweep).
type Typed = Vec<(Workload, String)>;

fn span_of<T>(v: &Option<Spanned<T>>) -> Option<Range<usize>> {
    v.as_ref().map(|t| t.span())
}

impl RawWorkload {
    /// The typed workloads (one per worker count of a sweep, with the suffix for its cell id),
    /// or the span and message of what is wrong.
    pub(super) fn typed(&self) -> Result<Typed, SpanErr> {
        match self.kind.get_ref().as_str() {
            "cold_start" => self.cold_start(),
            "serial_calls" => self.serial_calls(),
            "concurrency" => self.closed_loop(false),
            "http_api" => self.closed_loop(true),
            "open_loop" => self.open_loop(),
            other => Err((
                self.kind.span(),
                format!("unknown workload kind {other:?} (known: cold_start, serial_calls, concurrency, open_loop, http_api)"),
            )),
        }
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
            None => 0,
            Some(w) => w.get_ref().as_integer().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| {
                (w.span(), "`warmup` of a serial_calls workload is a number of calls".to_string())
            })?,
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
        let (warmup_ms, duration_ms) = self.load_time()?;
        let idle_after_ms = self.idle_after()?;
        let tool = self.tool_name()?;
        let lifecycle = self.lifecycle.as_ref().map(|l| *l.get_ref()).unwrap_or_default();
        Ok(self
            .worker_counts()?
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
                    }
                };
                (w, format!("-w{workers}"))
            })
            .collect())
    }

    fn open_loop(&self) -> Result<Typed, SpanErr> {
        self.load_only()?;
        self.stray("workers", span_of(&self.workers))?;
        self.stray("lifecycle", span_of(&self.lifecycle))?;
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
    fn stray(&self, name: &str, span: Option<Range<usize>>) -> Result<(), SpanErr> {
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

    /// A load workload's warm-up and duration, milliseconds.
    fn load_time(&self) -> Result<(u64, u64), SpanErr> {
        let kind = self.kind.get_ref();
        let warmup = self.duration_of("warmup", self.warmup.as_ref(), 1_000)?;
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
