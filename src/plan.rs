//! `benchlab plan`: what a scenario would do before it does it — its cells (after its matrices
//! are expanded and every combination validated), the images they need and which of those the
//! engine already holds, and an estimate of the time a run takes. Estimates come from earlier
//! records of the same server family and runtime where the results folder has them, from rough
//! per-runtime figures otherwise; the plan says which.

use std::collections::BTreeMap;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde::Serialize;

use crate::orchestrate::PlannedCell;
use crate::recipe::RuntimeKind;
use crate::record::Record;
use crate::spec::Workload;

/// Whether an image exists already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageState {
    /// The engine holds it with the same input hash: a cache hit.
    Cached,
    /// It must be built (its base exists).
    Build,
    /// Its base must be bootstrapped (or pulled) first, then it is built.
    BuildWithBase,
    /// No engine answered: unknown.
    Unknown,
    /// A native cell's server: installed into the native cache at run time (or found there).
    Native,
}

/// One image of the plan.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedImage {
    /// `docker` or `native`.
    pub engine: String,
    pub family: String,
    pub version: String,
    pub runtime: String,
    pub state: ImageState,
}

/// Seconds a cell is expected to take, and where the figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    pub seconds: f64,
    /// True when earlier records of the same family and runtime gave the per-spawn and per-call
    /// times; false for the built-in rough figures.
    pub from_records: bool,
}

/// What a run would do.
#[derive(Debug, Clone, Serialize)]
pub struct PlanView {
    pub scenario: String,
    pub cells: usize,
    pub servers: usize,
    pub workloads: BTreeMap<String, usize>,
    pub images: Vec<PlannedImage>,
    pub cell_seconds: f64,
    pub build_seconds: f64,
    /// Cells whose estimate came from earlier records.
    pub estimated_from_records: usize,
    pub parallel_slots: usize,
}

/// Rough figures where no earlier record helps: (spawn to initialized, one call), seconds.
fn rough(runtime_kind: RuntimeKind) -> (f64, f64) {
    match runtime_kind {
        RuntimeKind::Cpython => (0.6, 0.0008),
        RuntimeKind::Node => (0.12, 0.0002),
        RuntimeKind::Bun => (0.08, 0.0002),
        RuntimeKind::Native => (0.01, 0.00005),
    }
}

/// What earlier records say of a family × runtime: median cold start and mean call, seconds.
pub fn learned(records: &[Record]) -> BTreeMap<(String, String), (f64, f64)> {
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
                (k, (s.unwrap_or(r.0), c.unwrap_or(r.1)))
            })
        })
        .collect()
}

/// A cell's expected wall time: the work plus the fixed cost of its containers.
pub fn estimate(cell: &PlannedCell, learned: &BTreeMap<(String, String), (f64, f64)>) -> Estimate {
    const CONTAINERS: f64 = 2.5;
    let key = (cell.image.family.clone(), cell.image.runtime_name.clone());
    let (spawn, call, from_records) = match learned.get(&key) {
        Some(&(s, c)) => (s, c, true),
        None => {
            let (s, c) = rough(cell.image.runtime_kind);
            (s, c, false)
        }
    };
    // Every session also stops its server (stdin closed, then a grace period).
    let session = spawn + 0.2;
    let work = match &cell.workload {
        Workload::ColdStart { spawns } => f64::from(*spawns) * session,
        Workload::SerialCalls { warmup, calls, .. } => session + f64::from(warmup + calls) * call,
        w => session + w.load_time_ms() as f64 / 1e3 + 1.0,
    };
    Estimate { seconds: CONTAINERS + work, from_records }
}

/// Seconds an image build takes here, roughly (download and install of the locked set).
fn build_seconds(state: ImageState, runtime_kind: RuntimeKind) -> f64 {
    let one = if runtime_kind == RuntimeKind::Cpython { 25.0 } else { 20.0 };
    match state {
        ImageState::Cached => 0.0,
        ImageState::Build | ImageState::Unknown => one,
        ImageState::Native => one / 2.0,
        ImageState::BuildWithBase => one + 90.0,
    }
}

impl PlanView {
    pub fn new(
        scenario: &str,
        cells: &[PlannedCell],
        images: Vec<(PlannedImage, RuntimeKind)>,
        learned: &BTreeMap<(String, String), (f64, f64)>,
        parallel_slots: usize,
    ) -> PlanView {
        let mut workloads = BTreeMap::new();
        let mut servers: Vec<&str> = Vec::new();
        let mut cell_seconds = 0.0;
        let mut from = 0;
        for c in cells {
            *workloads.entry(c.workload.kind().to_string()).or_insert(0) += 1;
            if !servers.contains(&c.server_id.as_str()) {
                servers.push(&c.server_id);
            }
            let e = estimate(c, learned);
            cell_seconds += e.seconds;
            from += usize::from(e.from_records);
        }
        let build_seconds = images.iter().map(|(i, kind)| build_seconds(i.state, *kind)).sum();
        PlanView {
            scenario: scenario.to_string(),
            cells: cells.len(),
            servers: servers.len(),
            workloads,
            images: images.into_iter().map(|(i, _)| i).collect(),
            cell_seconds: cell_seconds / parallel_slots.max(1) as f64,
            build_seconds,
            estimated_from_records: from,
            parallel_slots,
        }
    }

    /// The plan for a person.
    pub fn text(&self) -> String {
        let count = |s: ImageState| self.images.iter().filter(|i| i.state == s).count();
        let mut out = format!(
            "{}: {} cell(s) = {} server(s) x workloads ({})\n",
            self.scenario,
            self.cells,
            self.servers,
            self.workloads.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
        );
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED)
            .set_header(vec!["engine", "family", "version", "runtime", "image"]);
        for i in &self.images {
            t.add_row(vec![
                i.engine.clone(),
                i.family.clone(),
                i.version.clone(),
                i.runtime.clone(),
                match i.state {
                    ImageState::Cached => "cached".into(),
                    ImageState::Build => "to build".into(),
                    ImageState::BuildWithBase => "to build (base first)".into(),
                    ImageState::Unknown => "unknown (no engine)".into(),
                    ImageState::Native => "native cache (installed at run if missing)".into(),
                },
            ]);
        }
        out.push_str(&t.to_string());
        out.push('\n');
        let unknown = count(ImageState::Unknown);
        out.push_str(&format!(
            "images: {} distinct, {} cached, {} to build{}\n",
            self.images.len(),
            count(ImageState::Cached),
            count(ImageState::Build) + count(ImageState::BuildWithBase),
            if unknown > 0 { format!(", {unknown} unknown (no engine answered)") } else { String::new() }
        ));
        out.push_str(&format!(
            "estimated time: builds {} + cells {}{} = {} ({} of {} cell estimates from earlier records in results/, the rest rough per-runtime figures)\n",
            crate::cli::eta_text(self.build_seconds),
            crate::cli::eta_text(self.cell_seconds),
            if self.parallel_slots > 1 { format!(" ({} cells at a time)", self.parallel_slots) } else { String::new() },
            crate::cli::eta_text(self.build_seconds + self.cell_seconds),
            self.estimated_from_records,
            self.cells,
        ));
        out
    }
}
