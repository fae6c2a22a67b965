//! The instrument's own speed: benchlab's HTTP driver against wrk on the same endpoint and the
//! same placement (driver or wrk pinned to CPU 0, the built-in null server pinned to CPU 1), at
//! 10 and 100 connections, then the open loop at 100,000 requests/s. The driver must reach at
//! least wrk's throughput, so that it is never the bottleneck of a measurement.
//!
//! Run: `cargo bench --bench http_driver` (needs `wrk`, Debian's package, and two CPUs).
//! BENCH_SECONDS sets each measurement's length (default 10).

use std::process::Command;
use std::time::{Duration, Instant};

use benchlab::driver::load::{drive, LoadPlan};
use benchlab::mcp::suite::Suite;
use benchlab::mcp::transport::{ApiStyle, HttpTarget, ReplyMode, SessionMode, Transport};
use benchlab::spec::{Lifecycle, Warmup, Workload};
use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;

const SERVE_ENV: &str = "BENCHLAB_BENCH_SERVE_PORT";
const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add_numbers","arguments":{"a":17,"b":25}}}"#;

fn pin(cpu: usize) {
    let mut set = CpuSet::new();
    set.set(cpu).expect("cpu index");
    sched_setaffinity(Pid::from_raw(0), &set).expect("sched_setaffinity");
}

fn main() {
    if let Ok(port) = std::env::var(SERVE_ENV) {
        pin(1);
        benchlab::nullserver::serve_http(Suite::Weekly, port.parse().expect("port"), false).expect("serve");
        return;
    }
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this binary without it, and a
    // speed measurement has no place in the test suite (the machine is shared and noisy).
    if !std::env::args().any(|a| a == "--bench") {
        println!("benches/http_driver: a benchmark; run it with `cargo bench --bench http_driver`");
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(cpus >= 2, "this benchmark needs two CPUs (driver on 0, server on 1); this host has {cpus}");
    let secs: u64 = std::env::var("BENCH_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    // A free port, and a server that goes away with us even if a measurement panics.
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    struct Server(std::process::Child);
    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _server = Server(
        Command::new(std::env::current_exe().expect("own path"))
            .env(SERVE_ENV, port.to_string())
            .spawn()
            .expect("spawn the null server"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the null server did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    pin(0);
    let script = std::env::temp_dir().join("benchlab-wrk-post.lua");
    std::fs::write(
        &script,
        format!(
            "wrk.method = \"POST\"\nwrk.body = '{BODY}'\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.headers[\"Accept\"] = \"application/json, text/event-stream\"\n"
        ),
    )
    .expect("write the wrk script");
    let target = HttpTarget {
        transport: Transport::StreamableHttp,
        port,
        path: "/mcp".into(),
        reply: Some(ReplyMode::Json),
        session: Some(SessionMode::Stateless),
        api_route: Some("/api/{tool}".into()),
        api_style: Some(ApiStyle::Plain),
    };
    let ms = |s: u64| s * 1000;
    println!("benchlab HTTP driver vs wrk: null server (streamable HTTP, JSON, stateless) pinned to CPU 1, client pinned to CPU 0, {secs} s each");
    println!(
        "{:<34} {:>14} {:>14} {:>8} {:>10} {:>10}",
        "load", "benchlab req/s", "wrk req/s", "ratio", "p50 ms", "p99 ms"
    );
    for conns in [10u32, 100] {
        let w = Workload::Concurrency {
            tool: "add_numbers".into(),
            workers: conns,
            warmup_ms: Warmup::Fixed(2000),
            duration_ms: ms(secs),
            lifecycle: Lifecycle::Session,
            idle_after_ms: 0,
            mix: Vec::new(),
            session_calls: 0,
        };
        let plan = LoadPlan::new(&w, target.clone(), Duration::from_secs(10)).expect("plan");
        let m = drive(&plan, Suite::Weekly, &mut |_, _, _| {}, &mut |_, _, _| {}).expect("drive");
        assert_eq!(m.failed, 0, "the driver saw errors: {:?}", m.error_examples);
        let out = Command::new("taskset")
            .args(["-c", "0", "wrk", "-t1", &format!("-c{conns}"), &format!("-d{secs}s"), "-s"])
            .arg(&script)
            .arg(format!("http://127.0.0.1:{port}/mcp"))
            .output()
            .expect("run wrk (apt-get install wrk)");
        let text = String::from_utf8_lossy(&out.stdout);
        let wrk_rps: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("Requests/sec:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no Requests/sec in wrk's output:\n{text}"));
        let s = m.latency.as_ref().map(|l| l.summary.clone()).expect("latencies");
        println!(
            "{:<34} {:>14.0} {:>14.0} {:>8.2} {:>10.3} {:>10.3}",
            format!("closed loop, {conns} connections"),
            m.throughput_rps,
            wrk_rps,
            m.throughput_rps / wrk_rps,
            s.p50_ms,
            s.p99_ms
        );
    }
    for rate in [50_000u64, 100_000] {
        let w = Workload::OpenLoop {
            tool: "add_numbers".into(),
            rate,
            connections: 100,
            warmup_ms: Warmup::Fixed(2000),
            duration_ms: ms(secs),
            idle_after_ms: 0,
        };
        let plan = LoadPlan::new(&w, target.clone(), Duration::from_secs(10)).expect("plan");
        let m = drive(&plan, Suite::Weekly, &mut |_, _, _| {}, &mut |_, _, _| {}).expect("drive");
        let Some(s) = m.latency.as_ref().map(|l| l.summary.clone()) else {
            println!("open loop, {rate}/s: no call completed in the window");
            continue;
        };
        println!(
            "{:<34} {:>14.0} {:>14} {:>8} {:>10.3} {:>10.3}   late {} dropped {} errors {}",
            format!("open loop, {rate}/s, 100 conns"),
            m.throughput_rps,
            "-",
            "-",
            s.p50_ms,
            s.p99_ms,
            m.late.unwrap_or(0),
            m.dropped.unwrap_or(0),
            m.failed
        );
    }
}
