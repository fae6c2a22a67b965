//! The steps of a load with a mix of tools or iterations: one line per cell with each step's
//! p50 and p99 (initialize, tools/list, each tool, the session, its close, every HTTP request)
//! and the iterations completed. Pure.

use crate::record::Record;

/// The order steps are shown in: the session's own steps first, then the tools by name.
fn rank(name: &str) -> (u8, &str) {
    match name {
        "initialize" => (0, name),
        "tools/list" => (1, name),
        "session" => (3, name),
        "delete" => (4, name),
        "http" => (5, name),
        _ => (2, name),
    }
}

/// One line per load record with steps: `Steps first/sessions-w10: initialize p50 0.41 ms p99
/// 1.2 ms; tools/list …; get_cart …; session p50 4.1 ms p99 9.0 ms (812 iterations)`.
pub(super) fn step_lines(records: &[Record]) -> Vec<String> {
    super::in_cell_order(records, |r| r.metrics.load.as_ref().is_some_and(|l| !l.steps.is_empty()))
        .into_iter()
        .filter_map(|r| {
            let load = r.metrics.load.as_ref().filter(|l| !l.steps.is_empty())?;
            let mut steps: Vec<_> = load.steps.iter().collect();
            steps.sort_by_key(|(name, _)| rank(name));
            let parts: Vec<String> = steps
                .iter()
                .map(|(name, m)| {
                    // `http` holds every request, whatever its status.
                    let what = if name.as_str() == "http" { "requests" } else { "ok" };
                    format!(
                        "{name} p50 {:.2} ms p99 {:.2} ms ({} {what})",
                        m.summary.p50_ms, m.summary.p99_ms, m.summary.count
                    )
                })
                .collect();
            let mut iterations = load.iterations.map(|n| format!(" ({n} iterations)")).unwrap_or_default();
            if let (Some(n), Some(rps)) = (load.http_requests, load.http_rps) {
                iterations.push_str(&format!(", {n} HTTP requests ({rps:.1}/s)"));
            }
            if let Some(peak) = load.peak_vus {
                iterations.push_str(&format!(", at most {peak} virtual users at once"));
            }
            let run = r.cell.repeat.map(|p| format!(" (run {})", p.index + 1)).unwrap_or_default();
            Some(format!("Steps {}{run}: {}{iterations}", r.cell.id, parts.join("; ")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::sample_record;
    use crate::spec::outcome::HistogramMetric;

    #[test]
    fn a_flows_steps_come_in_session_order_with_its_http_requests_and_peak_users() {
        let mut h = crate::stats::latency_histogram();
        h.record(2_000_000).unwrap();
        let metric = HistogramMetric {
            summary: crate::stats::summarize(&h).unwrap(),
            histogram: crate::stats::encode_histogram(&h),
            warmup: None,
        };
        let mut r = sample_record("k6");
        r.cell.id = "k6/concurrency".into();
        let names = ["http", "delete", "session", "echo", "tools/list", "initialize"];
        r.metrics.load = Some(Box::new(crate::spec::LoadMetrics {
            steps: names.iter().map(|n| (n.to_string(), metric.clone())).collect(),
            iterations: Some(3),
            http_requests: Some(40),
            http_rps: Some(20.0),
            peak_vus: Some(5),
            ..Default::default()
        }));
        let lines = step_lines(&[r]);
        assert_eq!(lines.len(), 1);
        let l = &lines[0];
        let at = |s: &str| l.find(s).unwrap_or_else(|| panic!("{s} in {l}"));
        let order = ["initialize p50", "tools/list p50", "echo p50", "session p50", "delete p50", "http p50"];
        assert!(order.windows(2).all(|w| at(w[0]) < at(w[1])), "{l}");
        assert!(l.contains("http p50 2.00 ms p99 2.00 ms (1 requests)"), "{l}");
        assert!(
            l.ends_with("(3 iterations), 40 HTTP requests (20.0/s), at most 5 virtual users at once"),
            "{l}"
        );
    }
}
