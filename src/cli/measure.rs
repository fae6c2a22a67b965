//! `benchlab measure`'s output: the progress bar, the notices, and the result as a table or JSON
//! on stdout. The measuring lives in `crate::measure`, which prints nothing.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, Table};
use indicatif::{ProgressBar, ProgressStyle};

use super::exit::{Exit, OK};
use crate::measure::url::UrlResult;
use crate::measure::{MeasureArgs, MeasureError, MeasureErrorKind, MeasureEvent, MeasureResult};
use crate::spec::{LoadMode, TreeMemory};

/// Runs `benchlab measure`.
pub(super) fn run(args: MeasureArgs) -> Result<i32, Exit> {
    let durations = [
        ("--duration", args.duration),
        ("--warmup-secs", args.warmup_secs),
        ("--startup-timeout", Some(args.startup_timeout)),
        ("--call-timeout", Some(args.call_timeout)),
    ];
    for (flag, d) in durations {
        if let Some(n) = d.and_then(|d| d.deprecation(flag)) {
            eprintln!("benchlab: {n}");
        }
    }
    if let Some(url) = args.url.clone() {
        let r = with_progress(|on_event| crate::measure::url::measure_url(&args, &url, on_event))?;
        let text = match args.json {
            true => format!("{}\n", serde_json::to_string_pretty(&r).expect("results serialise")),
            false => render_url(&r),
        };
        let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
        return Ok(OK);
    }
    let result = with_progress(|on_event| crate::measure::measure(&args, on_event))?;
    let text = if args.json {
        format!("{}\n", serde_json::to_string_pretty(&result).expect("results serialise"))
    } else {
        render(&result)
    };
    // A closed pipe (`| head`) is the reader's choice, not an error.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
    Ok(OK)
}

/// Runs a measurement with its notices on stderr and a progress bar.
fn with_progress<T>(
    f: impl FnOnce(&mut (dyn FnMut(MeasureEvent) + Send)) -> Result<T, MeasureError>,
) -> Result<T, Exit> {
    // The bar is made when the first workload starts, after any notice.
    let mut bar: Option<ProgressBar> = None;
    let result = f(&mut |e| match e {
        MeasureEvent::Notice(text) => eprintln!("{text}"),
        MeasureEvent::Workload(what) => bar.get_or_insert_with(new_bar).set_prefix(what),
        MeasureEvent::Progress { phase, done, total } => {
            let b = bar.get_or_insert_with(new_bar);
            b.set_prefix(phase);
            b.set_length(total);
            b.set_position(done);
        }
    });
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            // A failed or interrupted workload clears the bar before the error is printed; an
            // engine error leaves it where it stopped.
            if e.kind != MeasureErrorKind::Environment {
                if let Some(b) = &bar {
                    b.finish_and_clear();
                }
            }
            return Err(e.into());
        }
    };
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    Ok(result)
}

fn new_bar() -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 1.0 {
        format!("{v:.2} ms")
    } else {
        format!("{:.1} µs", v * 1000.0)
    }
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
}

/// The human-readable result: a table, then where it ran.
pub fn render(r: &MeasureResult) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(vec!["measure", "result", "range / detail"]);
    if let Some(c) = &r.cold_start {
        t.add_row(vec![
            Cell::new(format!("cold start ({} runs)", c.count)),
            Cell::new(format!("median {}, p95 {}", ms(c.p50_ms), ms(c.p95_ms))),
            Cell::new(format!("{} .. {}", ms(c.min_ms), ms(c.max_ms))),
        ]);
    }
    if let Some(c) = &r.tools_list {
        t.add_row(vec![
            Cell::new("tools/list".to_string()),
            Cell::new(format!("median {}", ms(c.p50_ms))),
            Cell::new(format!("{} .. {}", ms(c.min_ms), ms(c.max_ms))),
        ]);
    }
    if let Some(c) = &r.calls {
        let tool = r.tool.clone().unwrap_or_else(|| "first listed tool".into());
        t.add_row(vec![
            Cell::new(format!("serial calls ({} × {tool})", c.count)),
            Cell::new(format!("p50 {}, p99 {}, mean {}", ms(c.p50_ms), ms(c.p99_ms), ms(c.mean_ms))),
            Cell::new(format!("{} .. {}", ms(c.min_ms), ms(c.max_ms))),
        ]);
    }
    if let Some(tp) = r.throughput_per_s {
        t.add_row(vec![
            Cell::new("throughput"),
            Cell::new(format!("{tp:.0} calls/s")),
            Cell::new("one client, serial"),
        ]);
    }
    let rss =
        |m: &Option<TreeMemory>| m.as_ref().map(|m| format!("{} ({} proc.)", mib(m.rss_bytes), m.processes));
    if let Some(a) = rss(&r.memory_after_initialize) {
        let end = rss(&r.memory_end).map(|e| format!("at the end {e}")).unwrap_or_default();
        t.add_row(vec![Cell::new("RSS after initialize"), Cell::new(a), Cell::new(end)]);
    }
    if let Some(p) = r.cgroup_peak_bytes {
        t.add_row(vec![
            Cell::new("cgroup memory peak"),
            Cell::new(mib(p)),
            Cell::new("server, its children and the shim"),
        ]);
    }
    let mut out = format!("{t}\n");
    let server = r.server_info.as_ref().and_then(crate::record::claimed::claim_text).unwrap_or_default();
    out.push_str(&format!(
        "server: {} — {}protocol {}\n",
        r.command.join(" "),
        if server.is_empty() { String::new() } else { format!("serverInfo claims \"{server}\", ") },
        r.protocol_version.as_deref().unwrap_or("?")
    ));
    out.push_str(&format!(
        "placement: server on CPU {}, client on CPU {}, memory limit {}, isolation {}\n",
        r.placement.server_cpus,
        r.placement.driver_cpus,
        r.placement.memory_limit_bytes.map(mib).unwrap_or_else(|| "none".into()),
        r.placement.isolation
    ));
    out.push_str(&format!(
        "gate: {}\n",
        match &r.suite {
            Some(s) => format!("the {s} suite's correctness gate passed"),
            None => "off (no --suite): any tool list and any non-error answer counted".into(),
        }
    ));
    out
}

/// The human-readable result of `--url`: the load table, then what was measured and from where.
pub fn render_url(r: &UrlResult) -> String {
    let m = &r.load;
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(vec!["measure", "result", "range / detail"]);
    let window = m.window_ms / 1000.0;
    let (load, detail) = match m.mode {
        LoadMode::Open => (
            format!("open loop, {} connections", m.connections),
            format!("target {:.0}/s over {window:.1} s", m.target_rps.unwrap_or(0.0)),
        ),
        LoadMode::Closed => (
            format!("closed loop, {} virtual users", m.workers),
            format!("{window:.1} s after {} ms warm-up", m.warmup_ms),
        ),
    };
    t.add_row(vec![
        Cell::new(load),
        Cell::new(format!("{:.0} calls/s", m.throughput_rps)),
        Cell::new(detail),
    ]);
    if let Some(l) = &m.latency {
        let s = &l.summary;
        let from = if m.mode == LoadMode::Open { " (from intended send)" } else { "" };
        t.add_row(vec![
            Cell::new(format!("latency{from}")),
            Cell::new(format!("p50 {}, p90 {}, p99 {}", ms(s.p50_ms), ms(s.p90_ms), ms(s.p99_ms))),
            Cell::new(format!("{} .. {}, mean {}", ms(s.min_ms), ms(s.max_ms), ms(s.mean_ms))),
        ]);
    }
    if m.mode == LoadMode::Open {
        let taken = m.ok + m.failed;
        let late = m.late.unwrap_or(0);
        let pct = if taken > 0 { 100.0 * late as f64 / taken as f64 } else { 0.0 };
        t.add_row(vec![
            Cell::new("schedule"),
            Cell::new(format!("late {late} ({pct:.3} %), dropped {}", m.dropped.unwrap_or(0))),
            Cell::new("late: sent > 1 ms after its intended time"),
        ]);
    }
    let errors = if m.errors.is_empty() {
        "none".to_string()
    } else {
        m.errors.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
    };
    t.add_row(vec![
        Cell::new("answers"),
        Cell::new(format!("{} correct, errors: {errors}", m.ok)),
        Cell::new(format!("{} sessions, {} reconnects", m.sessions, m.reconnects)),
    ]);
    if let Some(c) = m.driver_cpu_cores {
        t.add_row(vec![
            Cell::new("client CPU"),
            Cell::new(format!("{c:.2} of a core")),
            Cell::new("near 1.0: the client may be the limit"),
        ]);
    }
    let mut out = format!("{t}\n");
    for e in &m.error_examples {
        out.push_str(&format!("error: {e}\n"));
    }
    let server = r
        .server_info
        .as_ref()
        .and_then(crate::record::claimed::claim_text)
        .map(|s| format!("serverInfo claims \"{s}\", "))
        .unwrap_or_default();
    out.push_str(&format!("server: {} ({}) — {server}protocol {}\n", r.url, r.transport, r.protocol_version));
    let threads = match r.driver_threads {
        1 => String::new(),
        n => format!(", {n} threads (one pinned to each CPU)"),
    };
    out.push_str(&format!("placement: client on CPU {}{threads}; the server's is yours\n", r.driver_cpus));
    out.push_str(&match &r.suite {
        Some(s) => format!("gate: the {s} suite's correctness gate passed; every answer checked against its expected value\n"),
        None => format!(
            "gate: off (no --suite): {} with {} called, any answer that is not an error counted\n",
            r.tool,
            r.args.as_ref().map(|a| a.to_string()).unwrap_or_default()
        ),
    });
    out
}
