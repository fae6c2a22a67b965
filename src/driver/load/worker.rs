//! The load workers' plumbing: the prepared calls and their check, what every worker shares
//! (the target, the window, one call on a virtual user's connection, the answers a warm-up rule
//! judges) and what each worker counts. The loops that drive them are `closed` and `open`;
//! merging the counts is `drive`'s, judging the warm-up `settle`'s.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use serde_json::Value;

use crate::driver::httpclient::{
    response_in, Answer, CallError, CallTimer, Counts, ErrorKind, KnownAnswer, McpClient, RestClient,
};
use crate::mcp::suite::Expected;
use crate::mcp::transport::HttpTarget;
use crate::mcp::{self};
use crate::spec::Lifecycle;
use crate::stats;

/// How many distinct argument sets a load cycles through (so no layer answers from a cache).
pub(super) const PREPARED: u64 = 16;

/// One prepared call: its bodies, and the answer a correct server gives.
pub(super) struct Prepared {
    /// The tool it calls (a mix's slots call different tools).
    pub(super) tool: String,
    pub(super) params_json: String,
    pub(super) rest: Bytes,
    pub(super) args: Value,
    /// What a correct server answers (a value, or a data suite's check); none: any answer that
    /// is not an error (`benchlab measure --url` without a suite).
    pub(super) expected: Option<Expected>,
    /// The raw result text last verified correct: an identical answer needs no JSON tree.
    pub(super) verified: RefCell<Option<String>>,
    /// The last body found correct, kept around its id: the same body with a later id needs no
    /// parse at all.
    pub(super) known: RefCell<Option<KnownAnswer>>,
}

impl Prepared {
    pub(super) fn new(
        tool: &str,
        params_json: String,
        rest: Bytes,
        args: Value,
        expected: Option<Expected>,
    ) -> Prepared {
        Prepared {
            tool: tool.to_string(),
            params_json,
            rest,
            args,
            expected,
            verified: RefCell::new(None),
            known: RefCell::new(None),
        }
    }

    /// Checks a tools/call answer: a body that is a known correct one with this request's id,
    /// or else the response parsed out of it and checked in full (and then kept as known).
    pub(super) fn check_answer(&self, answer: Answer<'_>) -> Result<(), CallError> {
        let (outcome, body) = match answer {
            Answer::Body { body, sse, id } => {
                if self.known.borrow().as_ref().is_some_and(|k| k.matches(body, sse, id)) {
                    return Ok(());
                }
                (response_in(body, sse, id)?, Some((body, sse, id)))
            }
            Answer::Found(outcome) => (outcome, None),
        };
        let raw = outcome.map_err(|e| CallError {
            kind: ErrorKind::ToolError,
            detail: format!("{} {}: JSON-RPC error {} {}", self.tool, self.args, e.code, e.message),
        })?;
        self.check(&self.tool, &raw, true)?;
        if let Some((body, sse, id)) = body {
            *self.known.borrow_mut() = KnownAnswer::learn(body, sse, id);
        }
        Ok(())
    }

    /// Checks a raw answer: an MCP tools/call result (`mcp`) or a REST value.
    pub(super) fn check(&self, tool: &str, raw: &str, mcp_result: bool) -> Result<(), CallError> {
        if self.verified.borrow().as_deref() == Some(raw) {
            return Ok(());
        }
        let v: Value = serde_json::from_str(raw).map_err(|e| CallError {
            kind: ErrorKind::ProtocolError,
            detail: format!("{tool}: not JSON: {e}"),
        })?;
        let Some(expected) = &self.expected else {
            if mcp_result && v.get("isError").and_then(Value::as_bool) == Some(true) {
                return Err(CallError {
                    kind: ErrorKind::ToolError,
                    detail: format!("{tool} {}: the tool reported an error: {v}", self.args),
                });
            }
            return Ok(());
        };
        let value = if mcp_result {
            mcp::tool_value(&v).map_err(|e| CallError {
                kind: ErrorKind::ToolError,
                detail: format!("{tool} {}: the tool reported an error: {e}", self.args),
            })?
        } else {
            v
        };
        match expected.verdict(&value) {
            Ok(()) => {
                *self.verified.borrow_mut() = Some(raw.to_string());
                Ok(())
            }
            Err(why) => Err(CallError {
                kind: ErrorKind::WrongResult,
                detail: format!("{tool} {}: {why}", self.args),
            }),
        }
    }
}

/// The measured window's start and end, read by every driver thread's workers at every call and
/// moved by a warm-up rule on one of them: nanoseconds after a fixed instant, in atomics.
pub(super) struct Window {
    base: Instant,
    warm_end_ns: AtomicU64,
    end_ns: AtomicU64,
    /// Closed-loop virtual users running now, and the most that ran at once (`flows::Turn`).
    pub(super) active: AtomicU32,
    pub(super) peak: AtomicU32,
}

impl Window {
    pub(super) fn new(base: Instant) -> Window {
        Window {
            base,
            warm_end_ns: AtomicU64::new(0),
            end_ns: AtomicU64::new(0),
            active: AtomicU32::new(0),
            peak: AtomicU32::new(0),
        }
    }

    fn at(&self, ns: &AtomicU64) -> Instant {
        self.base + Duration::from_nanos(ns.load(Ordering::Relaxed))
    }

    /// The window's start and end.
    pub(super) fn bounds(&self) -> (Instant, Instant) {
        (self.at(&self.warm_end_ns), self.at(&self.end_ns))
    }

    /// Moves the window to [`warm_end`, `end`) (instants before the base clamp to it).
    pub(super) fn set(&self, warm_end: Instant, end: Instant) {
        let ns = |t: Instant| t.saturating_duration_since(self.base).as_nanos() as u64;
        self.warm_end_ns.store(ns(warm_end), Ordering::Relaxed);
        self.end_ns.store(ns(end), Ordering::Relaxed);
    }
}

/// Under a warm-up rule, until it ends: the correct answers' completion instants and latencies
/// (ns), for `settle` to judge window by window; every driver thread adds to it.
pub(super) type Warming = Arc<Mutex<Option<Vec<(Instant, u64)>>>>;

/// What every worker of one driver thread shares (`Rc`); the window and the warm-up's answers
/// are shared with the other driver threads too.
pub(super) struct Shared {
    pub(super) target: HttpTarget,
    pub(super) rest: bool,
    pub(super) lifecycle: Lifecycle,
    /// The calls cycled through, in order (a mix's slots interleave its tools).
    pub(super) prepared: Vec<Prepared>,
    /// Whether each tool's latency is kept apart (`LoadMetrics::steps`): a mix, or iterations.
    pub(super) per_tool: bool,
    /// `lifecycle = "iteration"`: the calls of one iteration.
    pub(super) session_calls: u32,
    /// `lifecycle = "iteration"`: what an iteration does.
    pub(super) flow: Option<super::flows::Flow>,
    /// Slept after each iteration (or call).
    pub(super) think: Option<crate::spec::Think>,
    /// A staged load: its start and stages (`flows::Turn`).
    pub(super) staging: Option<(u32, Vec<crate::spec::Stage>)>,
    /// `warmup_excludes = "latency"`: the warm-up's calls count, only not their latency.
    pub(super) warmup_counts: bool,
    pub(super) call_limit: Duration,
    /// The measured window's start and end. Set before the workers start; under a warm-up rule
    /// they are the latest they can be (the cap) until the rule ends warm-up and moves them
    /// (`settle`), so the workers read them at every call.
    pub(super) window: Arc<Window>,
    /// The warm-up's answers while a rule judges them (none otherwise).
    pub(super) warming: Warming,
    /// The time series of every completion, warm-up included (`drive` sets its origin).
    pub(super) series: RefCell<super::series::Intervals>,
    /// The window's correct answers' latencies, every worker of this thread together.
    pub(super) latencies: RefCell<Latencies>,
}

/// A virtual user's connection: an MCP session or a REST client.
pub(super) enum Client {
    Mcp(Box<McpClient>),
    Rest(RestClient),
}

impl Shared {
    pub(super) fn warm_end(&self) -> Instant {
        self.window.at(&self.window.warm_end_ns)
    }

    pub(super) fn end(&self) -> Instant {
        self.window.at(&self.window.end_ns)
    }

    /// Whether a completion at `t` counts (calls, errors, HTTP requests): in the window, or
    /// under `warmup_excludes = "latency"` in the warm-up too.
    pub(super) fn counts_at(&self, t: Instant) -> bool {
        t <= self.end() && (self.warmup_counts || t >= self.warm_end())
    }

    /// Whether a completion at `t` is timed (its latency kept): in the window.
    pub(super) fn times_at(&self, t: Instant) -> bool {
        t >= self.warm_end() && t <= self.end()
    }

    /// Sets the measured window (before the workers start, or when a warm-up rule ends warm-up).
    pub(super) fn set_window(&self, warm_end: Instant, end: Instant) {
        self.window.set(warm_end, end);
    }

    /// Starts or stops keeping the warm-up's answers for a rule.
    pub(super) fn keep_warming(&self, keep: bool) {
        *self.warming.lock().unwrap_or_else(|e| e.into_inner()) = keep.then(Vec::new);
    }

    /// Whether the warm-up's answers are being kept.
    #[cfg(test)]
    pub(super) fn keeps_warming(&self) -> bool {
        self.warming.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// One correct completion of a step in the window, into this thread's latencies.
    pub(super) fn step(&self, name: &str, latency: Duration) {
        self.latencies.borrow_mut().step(name, latency);
    }

    /// Puts a completion at `done` into the time series.
    pub(super) fn tick(&self, done: Instant, latency: Duration, r: &Result<(), CallError>) {
        self.series.borrow_mut().add(done, latency, r.is_ok());
    }

    /// A call outside the measured window that completed at `done` after `latency`: kept for the
    /// warm-up rule when it is a correct answer of the warm-up and a rule is judging.
    pub(super) fn warming_call(&self, done: Instant, latency: Duration, r: &Result<(), CallError>) {
        if r.is_ok() && done < self.warm_end() {
            if let Some(answers) = self.warming.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                answers.push((done, latency.as_nanos() as u64));
            }
        }
    }

    /// The latencies (ns) of the warm-up's correct answers completed before `edge`, taken out
    /// (several driver threads add them, so they are not in completion order).
    pub(super) fn take_warming(&self, edge: Instant) -> Vec<u64> {
        let mut warming = self.warming.lock().unwrap_or_else(|e| e.into_inner());
        let Some(answers) = warming.as_mut() else {
            return Vec::new();
        };
        let mut taken = Vec::new();
        answers.retain(|&(done, ns)| {
            let before = done < edge;
            if before {
                taken.push(ns);
            }
            !before
        });
        taken
    }

    /// Opens a virtual user's connection (its handshake's reconnects count in `counts`).
    pub(super) async fn open(&self, counts: &mut Counts) -> Result<Client, CallError> {
        if self.rest {
            Ok(Client::Rest(RestClient::open(&self.target).await?))
        } else {
            Ok(Client::Mcp(Box::new(McpClient::open(&self.target, self.call_limit, counts).await?.0)))
        }
    }

    /// Opens an iteration's MCP session, its HTTP requests' durations kept.
    pub(super) async fn open_timed(&self, counts: &mut Counts) -> Result<Box<McpClient>, CallError> {
        Ok(Box::new(McpClient::open_with(&self.target, self.call_limit, counts, true).await?.0))
    }

    /// The i-th call's prepared slot.
    pub(super) fn slot(&self, i: u64) -> &Prepared {
        &self.prepared[(i % self.prepared.len() as u64) as usize]
    }

    /// The i-th call on `client`, bounded by the worker's `timer`, its answer checked.
    pub(super) async fn call(
        &self,
        client: &mut Client,
        i: u64,
        timer: &mut CallTimer,
        counts: &mut Counts,
    ) -> Result<(), CallError> {
        let p = self.slot(i);
        match client {
            Client::Mcp(c) => self.call_mcp(c, i, timer, counts).await,
            Client::Rest(c) => {
                let raw = timer.bound(self.call_limit, c.call(&p.tool, &p.rest, counts)).await?;
                p.check(&p.tool, &raw, false)
            }
        }
    }
}

impl Shared {
    /// The i-th call on an MCP session.
    pub(super) async fn call_mcp(
        &self,
        c: &mut McpClient,
        i: u64,
        timer: &mut CallTimer,
        counts: &mut Counts,
    ) -> Result<(), CallError> {
        let p = self.slot(i);
        p.check_answer(c.call(&p.params_json, self.call_limit, timer, counts).await?)
    }

    /// tools/list on an MCP session: a JSON-RPC error is the server's protocol failing, as for
    /// the calls.
    pub(super) async fn list(&self, c: &mut McpClient, counts: &mut Counts) -> Result<(), CallError> {
        c.request("tools/list", "{}", self.call_limit, counts).await.and_then(|r| {
            r.map(|_| ()).map_err(|rpc| CallError {
                kind: ErrorKind::ProtocolError,
                detail: format!("tools/list: JSON-RPC error {} {}", rpc.code, rpc.message),
            })
        })
    }
}

/// The latencies of one driver thread's correct answers in the window, every worker's together
/// (one histogram per thread, not per worker: a thousand connections do not hold a thousand).
pub(super) struct Latencies {
    pub(super) all: Histogram<u64>,
    /// Per step (a mix's tools; an iteration's steps).
    pub(super) steps: BTreeMap<String, Histogram<u64>>,
}

impl Latencies {
    pub(super) fn new() -> Latencies {
        Latencies { all: stats::latency_histogram(), steps: BTreeMap::new() }
    }

    /// One correct completion of a step.
    pub(super) fn step(&mut self, name: &str, latency: Duration) {
        if !self.steps.contains_key(name) {
            self.steps.insert(name.to_string(), stats::latency_histogram());
        }
        stats::record(self.steps.get_mut(name).expect("inserted"), latency);
    }

    /// Adds another thread's latencies.
    pub(super) fn absorb(&mut self, other: &Latencies) {
        let _ = self.all.add(&other.all);
        for (name, h) in &other.steps {
            let _ = self.steps.entry(name.clone()).or_insert_with(stats::latency_histogram).add(h);
        }
    }
}

/// One worker's counts (its latencies go to its thread's [`Latencies`]).
pub(super) struct WorkerStats {
    pub(super) ok: u64,
    pub(super) errors: BTreeMap<&'static str, u64>,
    pub(super) examples: Vec<String>,
    pub(super) sessions: u64,
    /// Sessions re-initialized and kept-alive connections reopened, as the clients counted them.
    pub(super) counts: Counts,
    /// Open loop: requests taken in the window, and those that started late.
    pub(super) taken: u64,
    pub(super) late: u64,
    /// When the last call counted in the window completed (the measured window's end).
    pub(super) last_done: Option<Instant>,
    /// Iterations completed in the window.
    pub(super) iterations: u64,
    /// Iterations: HTTP requests completed in the window (as `Shared::counts_at` counts).
    pub(super) http: u64,
}

impl WorkerStats {
    pub(super) fn new() -> Self {
        WorkerStats {
            ok: 0,
            errors: BTreeMap::new(),
            examples: Vec::new(),
            sessions: 0,
            counts: Counts::default(),
            taken: 0,
            late: 0,
            last_done: None,
            iterations: 0,
            http: 0,
        }
    }

    /// Counts a call of the window that completed at `done` after `latency` (a correct one's
    /// latency into the thread's histogram unless it completed in the warm-up, which counts under
    /// `warmup_excludes = "latency"`).
    pub(super) fn account(
        &mut self,
        sh: &Shared,
        done: Instant,
        latency: Duration,
        r: &Result<(), CallError>,
    ) {
        self.last_done = self.last_done.max(Some(done));
        match r {
            Ok(()) => {
                self.ok += 1;
                if done >= sh.warm_end() {
                    stats::record(&mut sh.latencies.borrow_mut().all, latency);
                }
            }
            Err(e) => {
                *self.errors.entry(e.kind.as_str()).or_default() += 1;
                if self.examples.len() < 3 {
                    self.examples.push(format!("{}: {}", e.kind.as_str(), e.detail));
                }
            }
        }
    }
}
