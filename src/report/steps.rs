//! The steps of a load with a mix of tools or iterations: one line per cell with each step's
//! p50 and p99 (initialize, tools/list, each tool, the whole session) and the iterations
//! completed. Pure.

use crate::record::Record;

/// The order steps are shown in: the session's own steps first, then the tools by name.
fn rank(name: &str) -> (u8, &str) {
    match name {
        "initialize" => (0, name),
        "tools/list" => (1, name),
        "session" => (3, name),
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
                    format!(
                        "{name} p50 {:.2} ms p99 {:.2} ms ({} ok)",
                        m.summary.p50_ms, m.summary.p99_ms, m.summary.count
                    )
                })
                .collect();
            let iterations = load.iterations.map(|n| format!(" ({n} iterations)")).unwrap_or_default();
            let run = r.cell.repeat.map(|p| format!(" (run {})", p.index + 1)).unwrap_or_default();
            Some(format!("Steps {}{run}: {}{iterations}", r.cell.id, parts.join("; ")))
        })
        .collect()
}
