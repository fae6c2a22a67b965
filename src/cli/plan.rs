//! `benchlab plan`: what a scenario would do, printed as text or JSON — its cells, the images
//! they need and which the engine holds, and a time estimate. The plan's figures and its text
//! live in `orchestrate` (`view`, `estimate`); this gathers the images' states and earlier records and prints.

use std::path::PathBuf;

use super::exit::{Exit, OK};
use super::run::{BackendChoice, EngineChoice};
use super::{run_options, tokio_runtime, Checkout};
use crate::backend::{AnyBackend, Backend, BackendKind, ImageState};
use crate::orchestrate::estimate::{estimate, learned_from, Learned};
use crate::orchestrate::view::{PlanView, PlannedImage};
use crate::orchestrate::{self, PlannedCell};
use crate::recipe::{RecipeBook, RuntimeKind};

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    scenario: PathBuf,
    /// The plan as JSON, with every cell.
    #[arg(long)]
    json: bool,
    /// Plan for `benchlab run --parallel` (cells on disjoint CPU sets at once).
    #[arg(long)]
    parallel: bool,
    /// Plan only the cells whose id matches this pattern, as `run --only` would run them (`*`
    /// matches anything). May be given several times.
    #[arg(long, value_name = "PATTERN")]
    only: Vec<String>,
    /// Where earlier runs are (their records refine the time estimate).
    #[arg(long, default_value = "results")]
    results: PathBuf,
    #[command(flatten)]
    checkout: Checkout,
    #[command(flatten)]
    noise: super::run::NoiseArgs,
    #[command(flatten)]
    cluster: super::run::ClusterArgs,
}

pub(super) fn run(args: PlanArgs) -> Result<i32, Exit> {
    let PlanArgs { scenario, json, parallel, only, results, checkout, noise, cluster } = args;
    cluster.check()?;
    let recipes = checkout.recipes()?;
    let sc = super::run::load_scenario(&checkout, &scenario, &mut |s| {
        noise.adjust(s);
        if !only.is_empty() {
            s.only = only.clone();
        }
    })?;
    let cpus = crate::placement::available_cpus();
    let cells = orchestrate::plan(&sc, &recipes, &cpus).map_err(Exit::from)?;
    // The order as a run would have it (its seed is the run's; the count and cost do not depend on it).
    let seed = noise.order_seed.unwrap_or_else(orchestrate::order::fresh_seed);
    let mut cells = orchestrate::order::arrange(cells, &sc.controls, sc.order, seed);
    let mut slots = if parallel { crate::placement::slots(&sc.placement, &cpus).len().max(1) } else { 1 };
    let opts = run_options(results.clone(), None, checkout.ca_bundle.clone())?;
    let states = tokio_runtime().block_on(async {
        let backends = match cluster.backend {
            BackendChoice::Local => {
                super::run::backends(EngineChoice::Auto, &opts, false).await.unwrap_or_default()
            }
            BackendChoice::Slurm => {
                let b = super::run::slurm_backend(EngineChoice::Auto, &cluster, &opts, !json).await?;
                if let (AnyBackend::Slurm(s), Some(c)) = (&b, cells.first()) {
                    slots = s.concurrent_cells(c.placement.shared, c.workload.is_load());
                }
                vec![b]
            }
        };
        image_states(&backends, &mut cells, &recipes).await
    })?;
    let learned = learned_from(&results);
    let view = PlanView::new(&sc, &cells, states, &learned, slots);
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

/// Each distinct image with whether it is ready, asked of the backends a run would have (so
/// `plan` and `run` put every cell on the same backend); with no backend at all, unknown.
async fn image_states(
    backends: &[AnyBackend],
    cells: &mut [PlannedCell],
    recipes: &RecipeBook,
) -> Result<Vec<(PlannedImage, RuntimeKind)>, Exit> {
    if !backends.is_empty() {
        orchestrate::admit(backends, recipes, cells).await?;
    }
    let mut out = Vec::new();
    for (b, p) in orchestrate::distinct_images(cells) {
        let (kind, state) = match backends.get(b) {
            Some(backend) => (backend.kind(), backend.state(&p).await),
            None => (BackendKind::Containers, ImageState::Unknown),
        };
        out.push((
            PlannedImage {
                engine: kind.as_str().into(),
                family: p.family.clone(),
                version: p.version.clone(),
                runtime: p.runtime_name.clone(),
                variant: p.variant(),
                state,
            },
            p.runtime_kind,
        ));
    }
    Ok(out)
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
                "repeat": c.repeat,
                "schedule": c.schedule,
                "placement": c.placement,
                "estimate_s": estimate(c, learned).seconds,
            })
        })
        .collect();
    let mut v = serde_json::to_value(view).expect("plans serialise");
    v["cell_list"] = serde_json::Value::Array(cells_json);
    v
}
