//! Tests of merging the workers' counts, naming a load's failure, and a warm-up rule ending the
//! warm-up of a load.

use std::time::{Duration, Instant};

use std::rc::Rc;

use super::drive::merge;
use super::worker::{Latencies, WorkerStats};
use super::*;
use crate::driver::httpclient::{CallError, ErrorKind};
use crate::spec::StableRule;

fn plan(rate: Option<u64>) -> LoadPlan {
    LoadPlan {
        target: HttpTarget {
            transport: crate::mcp::transport::Transport::StreamableHttp,
            port: 1,
            path: "/mcp".into(),
            reply: None,
            session: None,
            api_route: None,
            api_style: None,
            host: None,
        },
        tool: "echo".into(),
        workers: 2,
        warmup: Warmup::Fixed(1_000),
        duration: Duration::from_secs(2),
        lifecycle: Lifecycle::Session,
        rest: false,
        rate,
        call_limit: Duration::from_secs(1),
        ramp: Duration::ZERO,
        interval: Duration::from_secs(1),
        mix: Vec::new(),
        session_calls: 0,
        stages: Vec::new(),
        start_vus: 0,
        think: None,
        flow: Vec::new(),
        session: crate::spec::SessionScope::PerIteration,
        warmup_excludes: crate::spec::WarmupExcludes::Everything,
        ungated: None,
        driver_cpus: Vec::new(),
    }
}

/// A 2 s window starting now (the plans' `duration`).
fn window() -> (Instant, Instant) {
    let t0 = Instant::now();
    (t0, t0 + Duration::from_secs(2))
}

#[test]
fn workers_merge_into_rates_errors_and_one_histogram() {
    let (t0, end) = window();
    // Two workers of one thread: one histogram, fed by both.
    let sh = plan(Some(250)).shared(Vec::new());
    let mut a = WorkerStats::new();
    let mut b = WorkerStats::new();
    for _ in 0..300 {
        a.account(&sh, t0 + Duration::from_secs(1), Duration::from_micros(500), &Ok(()));
    }
    for _ in 0..100 {
        b.account(&sh, t0 + Duration::from_secs(1), Duration::from_millis(2), &Ok(()));
    }
    let timeout = CallError { kind: ErrorKind::Timeout, detail: "slow".into() };
    for _ in 0..4 {
        b.account(&sh, end, Duration::ZERO, &Err(timeout.clone()));
    }
    b.taken = 90;
    b.late = 7;
    let m = merge(&plan(Some(250)), (t0, end), &[a, b], &sh.latencies.borrow());
    assert_eq!((m.ok, m.failed), (400, 4));
    assert_eq!((m.window_ms, m.window_nominal_ms), (2_000.0, Some(2_000)));
    assert_eq!(m.throughput_rps, 200.0);
    assert!((m.error_rate - 4.0 / 404.0).abs() < 1e-12);
    assert_eq!(m.errors.get("timeout"), Some(&4));
    assert_eq!(m.error_examples.len(), 3, "examples are capped per worker");
    let s = &m.latency.as_ref().unwrap().summary;
    assert_eq!(s.count, 400);
    assert!((s.p50_ms - 0.5).abs() < 0.01 && (s.max_ms - 2.0).abs() < 0.01, "{s:?}");
    // Open loop: 2 s at 250/s is 500 slots; 90 taken, so 410 were dropped.
    assert_eq!((m.target_rps, m.late, m.dropped), (Some(250.0), Some(7), Some(410)));
    assert!(no_success_failure(&m).is_none());
}

#[test]
fn a_load_without_one_success_fails_by_its_most_common_error() {
    let (t0, end) = window();
    let sh = plan(None).shared(Vec::new());
    let mut w = WorkerStats::new();
    let e = |kind| Err(CallError { kind, detail: String::new() });
    w.account(&sh, t0, Duration::ZERO, &e(ErrorKind::Timeout));
    w.account(&sh, t0, Duration::ZERO, &e(ErrorKind::Timeout));
    w.account(&sh, t0, Duration::ZERO, &e(ErrorKind::HttpStatus));
    let m = merge(&plan(None), (t0, end), &[w], &sh.latencies.borrow());
    assert_eq!((m.mode, m.error_rate, m.dropped), (crate::spec::LoadMode::Closed, 1.0, None));
    let f = no_success_failure(&m).unwrap();
    assert_eq!(f.reason, FailureReason::Timeout);
    assert!(f.detail.contains("http_status 1, timeout 2"), "{}", f.detail);
    let none = merge(&plan(None), (t0, end), &[WorkerStats::new()], &Latencies::new());
    let f = no_success_failure(&none).unwrap();
    assert_eq!(f.reason, FailureReason::Timeout);
    assert!(f.detail.contains("no call completed within the 2.0 s"), "{}", f.detail);
}

#[test]
fn the_window_runs_on_to_the_last_answer_counted_in_it() {
    let (t0, end) = window();
    // Closed loop: nothing completed after the window counts, so the window is the nominal one
    // even when the last answer came well before its end.
    let sh = plan(None).shared(Vec::new());
    let mut closed = WorkerStats::new();
    for _ in 0..100 {
        closed.account(&sh, t0 + Duration::from_millis(1_500), Duration::from_millis(1), &Ok(()));
    }
    let m = merge(&plan(None), (t0, end), &[closed], &sh.latencies.borrow());
    assert_eq!((m.window_ms, m.throughput_rps), (2_000.0, 50.0));
    // Open loop: the calls sent in the last half second of the window were answered 500 ms after
    // it closed, so the window is 2.5 s and the rate is over 2.5 s.
    let sh = plan(Some(250)).shared(Vec::new());
    let (mut a, mut b) = (WorkerStats::new(), WorkerStats::new());
    for _ in 0..400 {
        a.account(&sh, t0 + Duration::from_millis(1_000), Duration::from_millis(1), &Ok(()));
    }
    for _ in 0..100 {
        b.account(&sh, end + Duration::from_millis(500), Duration::from_millis(1_000), &Ok(()));
    }
    (a.taken, b.taken) = (400, 100);
    let m = merge(&plan(Some(250)), (t0, end), &[a, b], &sh.latencies.borrow());
    assert_eq!((m.window_ms, m.window_nominal_ms), (2_500.0, Some(2_000)));
    assert_eq!(m.throughput_rps, 200.0);
    assert_eq!(m.dropped, Some(0), "the slots are those of the nominal window");
}

#[test]
fn the_warmup_keeps_the_correct_answers_before_its_end_for_the_rule() {
    let sh = plan(None).shared(Vec::new());
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    sh.set_window(t0 + ms(1_000), sh.end());
    let err = || Err(CallError { kind: ErrorKind::Timeout, detail: String::new() });
    sh.warming_call(t0, ms(1), &Ok(()));
    assert!(sh.take_warming(t0 + ms(1)).is_empty(), "no rule judges: nothing is kept");
    sh.keep_warming(true);
    sh.warming_call(t0 + ms(10), ms(2), &Ok(()));
    sh.warming_call(t0 + ms(20), ms(9), &err());
    sh.warming_call(t0 + ms(30), ms(3), &Ok(()));
    sh.warming_call(t0 + ms(120), ms(4), &Ok(()));
    sh.warming_call(t0 + ms(1_000), ms(5), &Ok(()));
    assert_eq!(sh.take_warming(t0 + ms(100)), [2_000_000, 3_000_000], "correct answers before the edge");
    assert_eq!(sh.take_warming(t0 + ms(1_000)), [4_000_000], "none after the warm-up's end");
}

#[test]
fn a_warmup_rule_starts_the_window_when_the_p50_settles() {
    let (rt, local) = drive::runtime().unwrap();
    let rule = StableRule { window: 20, tolerance: 0.05, max: 5_000, windows: 3 };
    let duration = Duration::from_secs(1);
    let sh = Rc::new(plan(None).shared(Vec::new()));
    let t0 = Instant::now();
    sh.set_window(t0 + Duration::from_millis(rule.max), t0 + Duration::from_millis(rule.max) + duration);
    sh.keep_warming(true);
    let moved = Rc::new(tokio::sync::Notify::new());
    let report = local.block_on(&rt, async {
        // A steady server: an answer of 1 ms every millisecond.
        let feeder = sh.clone();
        tokio::task::spawn_local(async move {
            while Instant::now() < feeder.warm_end() {
                feeder.warming_call(Instant::now(), Duration::from_millis(1), &Ok(()));
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        let report = settle::settle(sh.clone(), rule, t0, duration, moved.clone()).await;
        moved.notified().await;
        report
    });
    assert!(report.stable, "{report:?}");
    assert!(report.windows_seen >= 3 && report.calls > 0, "{report:?}");
    assert_eq!(report.window_p50_ms.last(), Some(&Some(1.0)));
    assert!(sh.warm_end() < t0 + Duration::from_millis(rule.max), "the window moved");
    assert_eq!(sh.end() - sh.warm_end(), duration);
    assert!(!sh.keeps_warming(), "nothing more is kept once warm-up ended");
    assert!((report.ms - (sh.warm_end() - t0).as_secs_f64() * 1e3).abs() < 0.01, "{report:?}");
}

/// The null server (weekly suite, stateful streamable HTTP) on a free loopback port, in a thread
/// of this process that ends with it.
fn null_server() -> u16 {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::thread::spawn(move || crate::nullserver::serve_http(crate::mcp::suite::Suite::Weekly, port, true));
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the null server did not listen");
        std::thread::sleep(Duration::from_millis(10));
    }
    port
}

/// A closed loop of iterations against the null server on `port`: `flow` in every iteration.
fn flow_plan(port: u16, flow: &[&[&str]]) -> LoadPlan {
    let mut p = plan(None);
    p.target.port = port;
    p.lifecycle = Lifecycle::Iteration;
    p.tool = "flow".into();
    p.warmup = Warmup::Fixed(0);
    p.flow = flow.iter().map(|s| s.iter().map(|t| t.to_string()).collect()).collect();
    p
}

fn count(m: &crate::spec::LoadMetrics, step: &str) -> u64 {
    m.steps.get(step).map_or(0, |h| h.summary.count)
}

#[test]
fn a_staged_flow_runs_its_sessions_and_counts_every_http_request() {
    let port = null_server();
    let mut p = flow_plan(port, &[&["echo"], &["add_numbers"], &["tools/list"]]);
    let st = |duration_ms, target| crate::spec::Stage { duration_ms, target };
    p.stages = vec![st(300, 3), st(600, 3), st(300, 0)];
    p.workers = 3;
    p.duration = Duration::from_millis(1_200);
    p.think = Some(crate::spec::Think { min_ms: 5, max_ms: 15, seed: 1 });
    let suite = AnySuite::Builtin(crate::mcp::suite::Suite::Weekly);
    let m = drive(&p, &suite, &mut |_, _, _| {}, &mut |_, _, _| {}).unwrap();
    assert_eq!(m.failed, 0, "{:?}", m.error_examples);
    let names: Vec<&str> = m.steps.keys().map(String::as_str).collect();
    assert_eq!(names, ["add_numbers", "delete", "echo", "http", "initialize", "session", "tools/list"]);
    // Never more users than the stages want, and some ran.
    let peak = m.peak_vus.expect("a staged load has its peak");
    assert!((1..=3).contains(&peak), "{peak}");
    assert_eq!((m.stages.len(), m.start_vus), (3, Some(0)));
    // Every request of a session is one of `http`: initialize and initialized, its step, its
    // DELETE; nothing failed, so each was counted where its step was.
    let http = m.http_requests.unwrap();
    assert_eq!(count(&m, "http"), http);
    let steps = count(&m, "echo") + count(&m, "add_numbers") + count(&m, "tools/list");
    assert_eq!(http, 2 * count(&m, "initialize") + steps + count(&m, "delete"), "{m:?}");
    assert_eq!(m.ok, count(&m, "echo") + count(&m, "add_numbers"), "the calls are the tool steps");
    assert!(
        count(&m, "delete") <= count(&m, "initialize") && count(&m, "session") <= count(&m, "initialize")
    );
    let iterations = m.iterations.unwrap();
    assert!(iterations >= 1 && 3 * iterations <= count(&m, "session"), "{iterations}");
    assert!(m.sessions >= count(&m, "initialize"));
    let rps = m.http_rps.unwrap();
    assert!((rps - http as f64 / (m.window_ms / 1e3)).abs() < 1e-6, "{rps}");
}

#[test]
fn a_session_per_user_is_opened_once_and_kept_across_iterations() {
    let port = null_server();
    let mut p = flow_plan(port, &[&["echo", "tools/list"], &["word_count"]]);
    p.session = crate::spec::SessionScope::PerVu;
    p.duration = Duration::from_millis(400);
    p.warmup_excludes = crate::spec::WarmupExcludes::Latency;
    let suite = AnySuite::Builtin(crate::mcp::suite::Suite::Weekly);
    let m = drive(&p, &suite, &mut |_, _, _| {}, &mut |_, _, _| {}).unwrap();
    assert_eq!(m.failed, 0, "{:?}", m.error_examples);
    assert_eq!(m.sessions, 2, "one session for each of the two users");
    assert_eq!(count(&m, "initialize"), 2);
    assert!(!m.steps.contains_key("session"), "a user's session is not an iteration's");
    assert!(count(&m, "delete") <= 2);
    let iterations = m.iterations.unwrap();
    assert!(iterations >= 2, "{iterations}");
    // Each iteration is its three steps; the last of each user may be cut short.
    assert!(count(&m, "echo") >= iterations && count(&m, "echo") <= iterations + 2);
    assert_eq!(m.peak_vus, None, "no stages");
}

#[test]
fn a_user_runs_only_while_the_stages_want_it_and_the_peak_is_kept() {
    let st = |duration_ms, target| crate::spec::Stage { duration_ms, target };
    let mut p = plan(None);
    // One user at once, a second after 100 ms, none more before the window's end.
    p.stages = vec![st(0, 1), st(100, 2), st(60_000, 2)];
    p.workers = 3;
    let sh = p.shared(Vec::new());
    let t0 = Instant::now();
    sh.set_window(t0, t0 + Duration::from_secs(60));
    let (rt, local) = drive::runtime().unwrap();
    let peak = |sh: &worker::Shared| sh.window.peak.load(std::sync::atomic::Ordering::Relaxed);
    let active = |sh: &worker::Shared| sh.window.active.load(std::sync::atomic::Ordering::Relaxed);
    local.block_on(&rt, async {
        let mut first = flows::Turn::new(&sh, 0, t0);
        let mut second = flows::Turn::new(&sh, 1, t0);
        let mut third = flows::Turn::new(&sh, 2, t0);
        assert!(!first.must_stop());
        assert!(third.must_stop());
        assert!(!third.wait().await, "the third is never wanted before the window's end");
        if second.must_stop() {
            assert!(second.wait().await, "the second is wanted once the ramp has reached 2");
        }
        assert!(!second.must_stop(), "and from then on");
        assert_eq!((active(&sh), peak(&sh)), (2, 2));
        drop(first);
        assert_eq!((active(&sh), peak(&sh)), (1, 2), "a user gone is no longer running");
    });
    // Without stages every user always runs.
    let sh = plan(None).shared(Vec::new());
    let mut any = flows::Turn::new(&sh, 7, t0);
    assert!(!any.must_stop());
}

#[test]
fn a_warmup_that_excludes_latency_alone_counts_its_calls() {
    let port = null_server();
    let suite = AnySuite::Builtin(crate::mcp::suite::Suite::Weekly);
    let mut p = plan(None);
    p.target.port = port;
    p.warmup = Warmup::Fixed(200);
    p.duration = Duration::from_millis(300);
    let timed = |m: &crate::spec::LoadMetrics| m.latency.as_ref().map_or(0, |l| l.summary.count);
    // Everything excluded: every counted call is timed, over the window alone.
    let m = drive(&p, &suite, &mut |_, _, _| {}, &mut |_, _, _| {}).unwrap();
    assert_eq!(m.ok, timed(&m));
    assert!(m.window_ms < 500.0, "{}", m.window_ms);
    // Latency alone: the warm-up's calls count (over warm-up and window), untimed.
    p.warmup_excludes = crate::spec::WarmupExcludes::Latency;
    let m = drive(&p, &suite, &mut |_, _, _| {}, &mut |_, _, _| {}).unwrap();
    assert!(m.ok > timed(&m) && timed(&m) > 0, "{} {}", m.ok, timed(&m));
    assert!(m.window_ms >= 500.0, "{}", m.window_ms);
    assert!((m.throughput_rps - m.ok as f64 / (m.window_ms / 1e3)).abs() < 1e-6);
}
