//! `benchlab plan`: what a scenario would do, printed as text or JSON — its cells, the images
//! they need and which the engine holds, and a time estimate. The plan's figures and its text
//! live in `crate::plan`; this gathers the images' states and earlier records and prints.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::exit::{Exit, OK};
use super::{tokio_runtime, Checkout};
use crate::engine::docker::DockerEngine;
use crate::orchestrate::{self, PlannedCell};
use crate::plan::{ImageState, PlanView, PlannedImage};
use crate::recipe::ImagePlan;

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    scenario: PathBuf,
    /// The plan as JSON, with every cell.
    #[arg(long)]
    json: bool,
    /// Plan for `benchlab run --parallel` (cells on disjoint CPU sets at once).
    #[arg(long)]
    parallel: bool,
    /// Where earlier runs are (their records refine the time estimate).
    #[arg(long, default_value = "results")]
    results: PathBuf,
    #[command(flatten)]
    checkout: Checkout,
}

/// Estimates learned from earlier records: (family, runtime) → figures (see `plan::learned`).
type Learned = BTreeMap<(String, String), (f64, f64)>;

pub(super) fn run(args: PlanArgs) -> Result<i32, Exit> {
    let PlanArgs { scenario, json, parallel, results, checkout } = args;
    let recipes = checkout.recipes()?;
    let sc = checkout.scenario(&scenario)?;
    let cpus = crate::placement::available_cpus();
    let cells = orchestrate::plan(&sc, &recipes, &cpus).map_err(Exit::from)?;
    let slots = if parallel { crate::placement::slots(&sc.placement, &cpus).len().max(1) } else { 1 };
    let states = image_states(&distinct_images(&cells));
    let learned = crate::plan::learned(&earlier_ok_records(&results));
    let view = PlanView::new(&sc.name, &cells, states, &learned, slots);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&plan_json(&view, &cells, &learned)).expect("JSON prints")
        );
    } else {
        print!("{}", view.text());
    }
    Ok(OK)
}

/// The distinct images of the cells, each with whether it is a native install.
fn distinct_images(cells: &[PlannedCell]) -> Vec<(bool, ImagePlan)> {
    let mut images: Vec<(bool, ImagePlan)> = Vec::new();
    for c in cells {
        let native = c.engine == Some(crate::scenario::EngineKind::Native);
        if !images.iter().any(|(n, p)| *n == native && p.same_image(&c.image)) {
            images.push((native, c.image.clone()));
        }
    }
    images
}

/// Whether each image is built already, asked of the Docker engine when one answers (unknown
/// otherwise), with its runtime kind.
fn image_states(images: &[(bool, ImagePlan)]) -> Vec<(PlannedImage, String)> {
    tokio_runtime().block_on(async {
        let mut out = Vec::new();
        let engine = DockerEngine::connect().await.ok();
        for (native, p) in images {
            let state = match (&engine, native) {
                (_, true) => ImageState::Native,
                (Some(e), false) => orchestrate::image_state(e, p).await.unwrap_or(ImageState::Unknown),
                (None, false) => ImageState::Unknown,
            };
            out.push((
                PlannedImage {
                    engine: if *native { "native" } else { "docker" }.into(),
                    family: p.family.clone(),
                    version: p.version.clone(),
                    runtime: p.runtime_name.clone(),
                    state,
                },
                p.runtime_kind.clone(),
            ));
        }
        out
    })
}

/// The ok records of every run under the results folder (unreadable stores are skipped).
fn earlier_ok_records(results: &Path) -> Vec<crate::record::Record> {
    let mut earlier = Vec::new();
    for run in glob_runs(results) {
        if let Ok(r) = crate::record::store::read_records(&run) {
            earlier.extend(r.into_iter().filter(|r| r.status == crate::record::Status::Ok));
        }
    }
    earlier
}

/// The plan as JSON, with every cell and its estimate.
fn plan_json(view: &PlanView, cells: &[PlannedCell], learned: &Learned) -> serde_json::Value {
    let cells_json: Vec<serde_json::Value> = cells
        .iter()
        .map(|c| {
            serde_json::json!({
                "id": c.id,
                "family": c.image.family,
                "version": c.image.version,
                "runtime": c.image.runtime_name,
                "api": c.image.api,
                "workload": c.workload.kind(),
                "placement": c.placement,
                "estimate_s": crate::plan::estimate(c, learned).seconds,
            })
        })
        .collect();
    let mut v = serde_json::to_value(view).expect("plans serialise");
    v["cell_list"] = serde_json::Value::Array(cells_json);
    v
}

/// Every records file under a results folder (`<results>/<scenario>/<run>/records.jsonl`).
fn glob_runs(results: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for scenario in std::fs::read_dir(results).into_iter().flatten().flatten() {
        for run in std::fs::read_dir(scenario.path()).into_iter().flatten().flatten() {
            let p = run.path().join("records.jsonl");
            if p.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
