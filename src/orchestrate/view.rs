//! What `benchlab plan` shows: what a scenario would do before it does it — its cells (after its matrices
//! are expanded and every combination validated), the images they need and which of those the
//! engine already holds, and an estimate of the time a run takes. Estimates come from earlier
//! records of the same server family and runtime where the results folder has them, from rough
//! per-runtime figures otherwise; the plan says which.

use std::collections::BTreeMap;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde::Serialize;

use super::estimate::{build_seconds, estimate, Learned};
use super::plan::PlannedCell;
use crate::backend::ImageState;
use crate::recipe::RuntimeKind;

/// One image of the plan.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedImage {
    /// `docker` or `native`.
    pub engine: String,
    pub family: String,
    pub version: String,
    pub runtime: String,
    /// The source's program, labelled lock or bytecode variant the image was asked with, if any.
    pub variant: Option<String>,
    pub state: ImageState,
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
    /// How the run measures against noise: its order, its repeats and its A/A controls.
    pub noise: NoisePlan,
    /// The backing services every cell starts beside its server, and where they run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub services: Option<String>,
}

/// The cost of a run's noise model: every cell `repeats` times, plus the control cells.
#[derive(Debug, Clone, Serialize)]
pub struct NoisePlan {
    /// `random` or `as-written`.
    pub order: String,
    pub repeats: u32,
    /// The A/A control servers, and the cells measured for them (at start, middle and end).
    pub control_servers: Vec<String>,
    pub control_cells: usize,
    /// The estimated seconds of one pass over the cells (no repeats, no controls): what the
    /// noise model costs on top.
    pub single_pass_seconds: f64,
}

/// The builds' time: each image's own, and a missing base once per runtime, however many of
/// its images wait for it (they share it: counting it per image made 55 Python images of a
/// fresh machine 1 h 45 min where they took 25, beside the TS images' builds).
fn plan_build_seconds(images: &[(PlannedImage, RuntimeKind)]) -> f64 {
    let mut bases: Vec<(&str, RuntimeKind)> = Vec::new();
    let mut total = 0.0;
    for (i, kind) in images {
        if i.state == ImageState::BuildWithBase {
            total += build_seconds(ImageState::Build, *kind);
            if !bases.iter().any(|(r, _)| *r == i.runtime) {
                bases.push((&i.runtime, *kind));
            }
        } else {
            total += build_seconds(i.state, *kind);
        }
    }
    total
        + bases
            .iter()
            .map(|(_, k)| build_seconds(ImageState::BuildWithBase, *k) - build_seconds(ImageState::Build, *k))
            .sum::<f64>()
}

impl PlanView {
    pub fn new(
        scenario: &crate::scenario::Scenario,
        cells: &[PlannedCell],
        images: Vec<(PlannedImage, RuntimeKind)>,
        learned: &Learned,
        parallel_slots: usize,
    ) -> PlanView {
        let mut workloads = BTreeMap::new();
        let mut servers: Vec<&str> = Vec::new();
        let mut cell_seconds = 0.0;
        let mut single_pass = 0.0;
        let mut from = 0;
        let control = |c: &PlannedCell| c.schedule.as_ref().is_some_and(|s| s.control.is_some());
        for c in cells {
            if !control(c) && c.repeat.is_none_or(|r| r.index == 0) {
                single_pass += estimate(c, learned).seconds;
            }
            *workloads.entry(c.workload.kind().to_string()).or_insert(0) += 1;
            if !servers.contains(&c.server_id.as_str()) {
                servers.push(&c.server_id);
            }
            let e = estimate(c, learned);
            cell_seconds += e.seconds;
            from += usize::from(e.from_records);
        }
        let build_seconds = plan_build_seconds(&images);
        let slots = parallel_slots.max(1) as f64;
        let mut control_servers: Vec<String> = Vec::new();
        for c in cells.iter().filter(|c| control(c)) {
            if !control_servers.contains(&c.server_id) {
                control_servers.push(c.server_id.clone());
            }
        }
        control_servers.sort();
        let noise = NoisePlan {
            order: scenario.order.as_str().to_string(),
            repeats: scenario.repeats,
            control_servers,
            control_cells: cells.iter().filter(|c| control(c)).count(),
            single_pass_seconds: single_pass / slots,
        };
        let services = services_line(cells);
        PlanView {
            services,
            noise,
            scenario: scenario.name.clone(),
            cells: cells.len(),
            servers: servers.len(),
            workloads,
            images: images.into_iter().map(|(i, _)| i).collect(),
            cell_seconds: cell_seconds / slots,
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
            .set_header(vec!["engine", "family", "version", "runtime", "variant", "image"]);
        for i in &self.images {
            t.add_row(vec![
                i.engine.clone(),
                i.family.clone(),
                i.version.clone(),
                i.runtime.clone(),
                i.variant.clone().unwrap_or_else(|| "—".into()),
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
        if let Some(s) = &self.services {
            out.push_str(&format!("services: {s}\n"));
        }
        let n = &self.noise;
        let controls = match n.control_cells {
            0 => "no A/A controls".to_string(),
            k => format!(
                "{k} A/A control cell(s) ({} again at the start, middle and end)",
                n.control_servers.join(", ")
            ),
        };
        out.push_str(&format!(
            "noise: {} order, {} run(s) of every cell, {controls}; one pass alone would take {}\n",
            n.order,
            n.repeats,
            eta_text(n.single_pass_seconds)
        ));
        out.push_str(&format!(
            "estimated time: builds {} + cells {}{} = {} ({} of {} cell estimates from earlier records in results/, the rest rough per-runtime figures)\n",
            eta_text(self.build_seconds),
            eta_text(self.cell_seconds),
            if self.parallel_slots > 1 { format!(" ({} cells at a time)", self.parallel_slots) } else { String::new() },
            eta_text(self.build_seconds + self.cell_seconds),
            self.estimated_from_records,
            self.cells,
        ));
        out
    }
}

/// A duration for a person: "45 s", "12 min", "2 h 05 min".
pub fn eta_text(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..=89 => format!("{s} s"),
        90..=5399 => format!("{} min", (s + 30) / 60),
        _ => format!("{} h {:02} min", s / 3600, (s % 3600 + 30) / 60),
    }
}

/// The plan's `services:` line: the services of the cells that have any, their seed and CPUs,
/// and how many cells get them when not all do (a recipe's declared services come with its
/// servers only).
fn services_line(cells: &[PlannedCell]) -> Option<String> {
    let with: Vec<&PlannedCell> = cells.iter().filter(|c| !c.services.is_empty()).collect();
    let c = with.first()?;
    let mut names: Vec<String> = Vec::new();
    for (s, _) in with.iter().flat_map(|c| &c.services) {
        let name = match (s.name == s.kind.as_str(), &s.declared_by) {
            (true, None) => s.name.clone(),
            (false, None) => format!("{} ({})", s.name, s.kind.as_str()),
            (_, Some(by)) => format!("{} (declared by {by})", s.name),
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let p = &c.placement;
    Some(format!(
        "{}, seed {}, started fresh and seeded for {}, on CPU {}{}",
        names.join(", "),
        c.services[0].0.seed,
        match with.len() == cells.len() {
            true => "every cell".to_string(),
            false => format!("{} of {} cells", with.len(), cells.len()),
        },
        p.services_cpus.as_deref().unwrap_or("?"),
        if p.services_share_driver { " (the driver's: this host has no CPU left for them)" } else { "" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(version: &str, runtime: &str, state: ImageState) -> (PlannedImage, RuntimeKind) {
        let i = PlannedImage {
            engine: "docker".into(),
            family: "python-mcp".into(),
            version: version.into(),
            runtime: runtime.into(),
            variant: None,
            state,
        };
        (i, RuntimeKind::Cpython)
    }

    #[test]
    fn a_missing_base_is_built_once_per_runtime_not_once_per_image() {
        let one = build_seconds(ImageState::Build, RuntimeKind::Cpython);
        let base = build_seconds(ImageState::BuildWithBase, RuntimeKind::Cpython) - one;
        let images = [
            image("1.0.0", "cpython-bookworm", ImageState::BuildWithBase),
            image("1.1.0", "cpython-bookworm", ImageState::BuildWithBase),
            image("1.2.0", "cpython-bookworm", ImageState::BuildWithBase),
            image("1.2.0", "cpython-trixie", ImageState::BuildWithBase),
            image("1.3.0", "cpython-bookworm", ImageState::Cached),
        ];
        assert_eq!(plan_build_seconds(&images), 4.0 * one + 2.0 * base);
    }
}
