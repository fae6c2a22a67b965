//! Where a leak appeared in a version sweep of soaks. A leak slope can be zero or negative, so it
//! is not a level for the step fit on ln(value): each version of a soak series gets its runs' RSS
//! slopes and how many named a leak (the soak's own rule: the slope's 95 % interval wholly above
//! the floor the scenario states), and a change is named between two neighbouring versions
//! (versions without a soak record skipped) where every run of one named a leak and no run of the
//! other did. A version whose runs disagree names no change either side of it and says so.

use serde::Serialize;

use crate::record::Record;
use crate::stats::Slope;

use super::History;

/// One version's soaks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SoakPoint {
    /// Each run's RSS slope over the steady phase, bytes per hour.
    pub slopes: Vec<Slope>,
    /// The runs that named a leak, of `slopes.len()`.
    pub leaks: u32,
    /// The largest floor the runs stated, bytes per hour.
    pub floor: u64,
}

impl SoakPoint {
    /// `Some(true)` when every run named a leak, `Some(false)` when none did, `None` when they
    /// disagree.
    pub fn verdict(&self) -> Option<bool> {
        match self.leaks {
            0 => Some(false),
            k if k as usize == self.slopes.len() => Some(true),
            _ => None,
        }
    }
}

/// A leak that appeared (or went away) between two neighbouring versions with soaks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeakChange {
    pub from_version: String,
    pub to_version: String,
    pub from_index: usize,
    pub index: usize,
    /// True where the leak appeared at `to_version`, false where it went away.
    pub appeared: bool,
}

/// The soak figures of one version's ok records (`None` when none had them).
pub(super) fn soak_point(records: &[&Record]) -> Option<SoakPoint> {
    let soaks: Vec<_> = records.iter().filter_map(|r| r.metrics.load.as_ref()?.soak.as_ref()).collect();
    let slopes: Vec<Slope> = soaks.iter().filter_map(|s| s.rss_bytes_per_hour).collect();
    if slopes.is_empty() {
        return None;
    }
    let leaks = soaks.iter().filter(|s| s.leak && s.rss_bytes_per_hour.is_some()).count() as u32;
    let floor = soaks.iter().map(|s| s.leak_floor_bytes_per_hour).max().unwrap_or(0);
    Some(SoakPoint { slopes, leaks, floor })
}

/// The changes between neighbouring versions with a soak verdict (see the module's rule).
pub(super) fn leak_changes(versions: &[String], points: &[Option<SoakPoint>]) -> Vec<LeakChange> {
    let judged: Vec<(usize, Option<bool>)> =
        points.iter().enumerate().filter_map(|(i, p)| Some((i, p.as_ref()?.verdict()))).collect();
    judged
        .windows(2)
        .filter_map(|w| match (w[0], w[1]) {
            ((i, Some(a)), (j, Some(b))) if a != b => Some(LeakChange {
                from_version: versions[i].clone(),
                to_version: versions[j].clone(),
                from_index: i,
                index: j,
                appeared: b,
            }),
            _ => None,
        })
        .collect()
}

/// `12.1 MiB/h [11.2–13.0]`.
fn slope_text(s: &Slope) -> String {
    let mib = |v: f64| v / 1_048_576.0;
    format!("{:.2} MiB/h [{:.2}–{:.2}]", mib(s.estimate), mib(s.lower), mib(s.upper))
}

/// A version's slopes: `1.2.0 12.1 MiB/h [11.2–13.0] leak` (runs joined by `, `; `2 of 3
/// leak` when they disagree).
fn point_text(version: &str, p: &SoakPoint) -> String {
    let slopes: Vec<String> = p.slopes.iter().map(slope_text).collect();
    let verdict = match p.verdict() {
        Some(true) => "leak".to_string(),
        Some(false) => "no leak".to_string(),
        None => format!("{} of {} runs leak", p.leaks, p.slopes.len()),
    };
    format!("{version} {} {verdict}", slopes.join(", "))
}

/// The lines a soak history adds under its table: `LEAK APPEARS at ts-sdk 1.2.0 (1.1.0 0.00
/// MiB/h [−0.10–0.12] no leak → 1.2.0 12.10 MiB/h [11.20–13.00] leak; floor 1.00 MiB/h)`, then
/// `RSS slope per version: …`. None for a series without soaks.
pub fn soak_lines(h: &History) -> Vec<String> {
    if h.soak.iter().all(Option::is_none) {
        return Vec::new();
    }
    let text = |i: usize| h.soak[i].as_ref().map(|p| point_text(&h.versions[i], p)).unwrap_or_default();
    let floor = h.soak.iter().flatten().map(|p| p.floor).max().unwrap_or(0) as f64 / 1_048_576.0;
    let mut lines: Vec<String> = h
        .leak_changes
        .iter()
        .map(|c| {
            format!(
                "{} at {} {} ({} → {}; floor {floor:.2} MiB/h)",
                if c.appeared { "LEAK APPEARS" } else { "leak gone" },
                h.key.family,
                c.to_version,
                text(c.from_index),
                text(c.index)
            )
        })
        .collect();
    let each: Vec<String> = (0..h.versions.len()).filter(|&i| h.soak[i].is_some()).map(text).collect();
    lines.push(format!("RSS slope per version (soak, steady phase, 95 %): {}", each.join("; ")));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(slopes_mib: &[(f64, bool)]) -> Option<SoakPoint> {
        let slopes = slopes_mib
            .iter()
            .map(|(m, _)| {
                let e = m * 1_048_576.0;
                Slope { estimate: e, lower: e - 524_288.0, upper: e + 524_288.0, n: 100, n_effective: 50.0 }
            })
            .collect();
        let leaks = slopes_mib.iter().filter(|(_, l)| *l).count() as u32;
        Some(SoakPoint { slopes, leaks, floor: 1 << 20 })
    }

    #[test]
    fn a_leak_is_named_where_every_run_of_a_version_leaks_after_one_where_none_did() {
        let versions: Vec<String> = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"].map(String::from).to_vec();
        let points = vec![
            point(&[(0.0, false), (0.1, false)]),
            None, // not soaked: skipped
            point(&[(0.2, false)]),
            point(&[(12.0, true), (11.0, true)]),
            point(&[(12.0, true)]),
            point(&[(0.0, false)]),
        ];
        let changes = leak_changes(&versions, &points);
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert_eq!((changes[0].from_version.as_str(), changes[0].to_version.as_str()), ("1.2", "1.3"));
        assert!(changes[0].appeared);
        assert_eq!((changes[1].to_version.as_str(), changes[1].appeared), ("1.5", false));
        // Runs that disagree name nothing either side.
        let points = vec![point(&[(0.0, false)]), point(&[(5.0, true), (0.0, false)]), point(&[(9.0, true)])];
        assert_eq!(leak_changes(&versions[..3], &points), []);
        assert_eq!(
            point_text("1.1", points[1].as_ref().unwrap()),
            "1.1 5.00 MiB/h [4.50–5.50], 0.00 MiB/h [-0.50–0.50] 1 of 2 runs leak"
        );
    }
}
