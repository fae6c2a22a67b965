//! How long cells take, one model for `plan` and `run`: a cell's expected time is its workload's
//! work at the pace of its family and runtime (`spec::Workload::expected_seconds`) plus what the
//! lab adds per cell, the pace coming from earlier records of the same family and runtime where
//! the results folder has some, from rough per-runtime figures otherwise. A run counts down from
//! the same estimates, scaled by how its own cells have gone so far.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::plan::PlannedCell;
use crate::recipe::RuntimeKind;
use crate::record::Record;
use crate::spec::Pace;

/// What earlier records say, by (family, runtime name).
pub type Learned = BTreeMap<(String, String), Pace>;

/// Seconds a cell is expected to take, and where the figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    pub seconds: f64,
    /// True when earlier records of the same family and runtime gave the per-spawn and per-call
    /// times; false for the built-in rough figures.
    pub from_records: bool,
}

/// What the lab adds to a cell's own work: its containers (or processes) and their clean-up.
const PER_CELL_S: f64 = 2.5;

/// Rough figures where no earlier record helps.
fn rough(runtime_kind: RuntimeKind) -> Pace {
    let (spawn_s, call_s) = match runtime_kind {
        RuntimeKind::Cpython => (0.6, 0.0008),
        RuntimeKind::Pypy => (1.2, 0.0008),
        RuntimeKind::Node => (0.12, 0.0002),
        RuntimeKind::Bun => (0.08, 0.0002),
        RuntimeKind::Native | RuntimeKind::Shell | RuntimeKind::Rust => (0.01, 0.00005),
    };
    Pace { spawn_s, call_s }
}

/// What earlier records say of a family × runtime: median cold start and median mean call.
pub fn learned(records: &[Record]) -> Learned {
    let mut acc: BTreeMap<(String, String), (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for r in records {
        let key = (r.cell.server.family.clone(), r.cell.server.runtime.clone());
        let e = acc.entry(key).or_default();
        if let Some(c) = &r.metrics.cold_start {
            e.0.push(c.summary.p50_ms / 1e3);
        }
        if let Some(c) = &r.metrics.calls {
            e.1.push(c.summary.mean_ms / 1e3);
        }
    }
    acc.into_iter()
        .filter_map(|(k, (spawn, call))| {
            let mid = |mut v: Vec<f64>| {
                v.sort_by(|a, b| a.total_cmp(b));
                v.get(v.len() / 2).copied()
            };
            let (s, c) = (mid(spawn), mid(call));
            (s.is_some() || c.is_some()).then(|| {
                let r = rough(RuntimeKind::Native);
                (k, Pace { spawn_s: s.unwrap_or(r.spawn_s), call_s: c.unwrap_or(r.call_s) })
            })
        })
        .collect()
}

/// What the ok records under a results folder (`<results>/<scenario>/<run>/records.jsonl`) say;
/// runs that cannot be read are passed over (an estimate is no reason to fail). `plan` and
/// `run` both learn here.
pub fn learned_from(results: &Path) -> Learned {
    let mut records = Vec::new();
    for path in record_files(results) {
        if let Ok(r) = crate::record::store::read_records(&path) {
            records.extend(r.into_iter().filter(|r| r.status == crate::record::Status::Ok));
        }
    }
    learned(&records)
}

/// Every records file under a results folder, sorted.
pub fn record_files(results: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for scenario in std::fs::read_dir(results).into_iter().flatten().flatten() {
        for run in std::fs::read_dir(scenario.path()).into_iter().flatten().flatten() {
            let p = run.path().join(crate::record::store::RECORDS_FILE);
            if p.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A cell's expected wall time: its work plus the fixed cost of its containers.
pub fn estimate(cell: &PlannedCell, learned: &Learned) -> Estimate {
    let key = (cell.image.family.clone(), cell.image.runtime_name.clone());
    let (pace, from_records) = match learned.get(&key) {
        Some(&p) => (p, true),
        None => (rough(cell.image.runtime_kind), false),
    };
    Estimate { seconds: PER_CELL_S + cell.workload.expected_seconds(pace), from_records }
}

/// Seconds an image build takes here, roughly (download and install of the locked set).
pub fn build_seconds(state: crate::backend::ImageState, runtime_kind: RuntimeKind) -> f64 {
    use crate::backend::ImageState;
    // A Rust server compiles its dependencies in the build stage: minutes on two cores.
    let one = match runtime_kind {
        RuntimeKind::Cpython | RuntimeKind::Pypy => 25.0,
        RuntimeKind::Rust => 240.0,
        _ => 20.0,
    };
    match state {
        ImageState::Cached => 0.0,
        ImageState::Build | ImageState::Unknown => one,
        ImageState::Native => one / 2.0,
        ImageState::BuildWithBase => one + 90.0,
    }
}

/// The time left of a run's cells: the estimates of the cells not started yet, scaled by how
/// the finished ones went against theirs, over the slots that run at once.
#[derive(Debug, Clone)]
pub struct Countdown {
    estimates: Vec<f64>,
    /// Which cells have finished.
    done: Vec<bool>,
    slots: usize,
    estimated_done: f64,
    actual_done: f64,
    /// Every cell was handed to a cluster's queue at once.
    queued: bool,
}

impl Countdown {
    pub fn new(estimates: Vec<f64>, slots: usize) -> Countdown {
        let done = vec![false; estimates.len()];
        Countdown {
            estimates,
            done,
            slots: slots.max(1),
            estimated_done: 0.0,
            actual_done: 0.0,
            queued: false,
        }
    }

    /// A countdown for cells handed to a cluster's queue all at once, `at_once` of them running
    /// at a time: its figure is the unfinished cells' estimates, without a pace (a queued cell's
    /// time includes its wait).
    pub fn queued(estimates: Vec<f64>, at_once: usize) -> Countdown {
        Countdown { queued: true, ..Countdown::new(estimates, at_once) }
    }

    /// The figure shown when cell `index` starts: what is left from it on; for a queue, only
    /// with the first cell (they all start at once).
    pub fn at_start(&self, index: usize) -> Option<f64> {
        match self.queued {
            true => (index == 0).then(|| self.unfinished()),
            false => Some(self.left(index)),
        }
    }

    /// The figure shown when a cell finishes: for a queue, what its unfinished cells have left;
    /// otherwise none (the next cell's start shows it).
    pub fn after_finish(&self) -> Option<f64> {
        self.queued.then(|| self.unfinished())
    }

    /// Cell `index` took `seconds`.
    pub fn finished(&mut self, index: usize, seconds: f64) {
        self.estimated_done += self.estimates.get(index).copied().unwrap_or(0.0);
        self.actual_done += seconds;
        if let Some(d) = self.done.get_mut(index) {
            *d = true;
        }
    }

    /// Seconds left for the cells not finished yet (started or not), at the run's pace: what a
    /// run whose cells all started at once (a cluster's queue) has left.
    pub fn unfinished(&self) -> f64 {
        let left: f64 = self.estimates.iter().zip(&self.done).filter(|(_, d)| !**d).map(|(e, _)| e).sum();
        left * self.ratio() / self.slots as f64
    }

    fn ratio(&self) -> f64 {
        match self.estimated_done > 0.0 && !self.queued {
            true => self.actual_done / self.estimated_done,
            false => 1.0,
        }
    }

    /// Seconds left when cells `from..` have not started.
    pub fn left(&self, from: usize) -> f64 {
        self.estimates.iter().skip(from).sum::<f64>() * self.ratio() / self.slots as f64
    }
}

/// The mean of finished steps, times the steps left (image builds).
#[derive(Debug, Default)]
pub struct Eta {
    n: u32,
    sum: f64,
}

impl Eta {
    pub fn add(&mut self, seconds: f64) {
        self.n += 1;
        self.sum += seconds;
    }
    pub fn left(&self, remaining: usize) -> Option<f64> {
        (self.n > 0).then(|| self.sum / f64::from(self.n) * remaining as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_counts_down_its_unfinished_cells_without_a_pace() {
        let mut c = Countdown::queued(vec![10.0, 10.0, 20.0, 20.0], 2);
        assert_eq!(c.at_start(0), Some(30.0));
        assert_eq!(c.at_start(1), None, "every cell starts at once; the first says it");
        // A queued cell's seconds include its wait: they teach no pace.
        c.finished(2, 200.0);
        assert_eq!(c.after_finish(), Some(20.0));
        c.finished(0, 99.0);
        assert_eq!(c.after_finish(), Some(15.0));
        let local = Countdown::new(vec![10.0], 1);
        assert_eq!(local.after_finish(), None);
    }

    #[test]
    fn the_countdown_starts_at_the_estimates_and_follows_the_pace_of_the_run() {
        let mut c = Countdown::new(vec![10.0, 10.0, 20.0, 20.0], 2);
        assert_eq!(c.left(0), 30.0, "the plan's figure: 60 s over two slots");
        c.finished(0, 20.0); // twice as slow as estimated
        assert_eq!(c.left(2), 40.0);
    }
}
