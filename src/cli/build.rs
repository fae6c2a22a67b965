//! `benchlab build`: the images of a scenario's cells, or of the recipes the filters pick, built
//! with progress (unchanged inputs are cache hits). Building lives in `orchestrate::build_plans`.

use std::path::PathBuf;

use super::exit::{error_chain, Exit, OK};
use super::progress::Progress;
use super::{run_options, tokio_runtime, Checkout};
use crate::backend::containers::docker::DockerEngine;
use crate::backend::containers::ContainersBackend;
use crate::orchestrate;
use crate::recipe::{ImagePlan, RecipeBook};

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// Build every image this scenario's cells need (after expanding its matrices), instead
    /// of filtering the recipes.
    #[arg(long, conflicts_with_all = ["family", "version", "runtime"])]
    scenario: Option<PathBuf>,
    #[arg(long)]
    family: Option<String>,
    #[arg(long)]
    version: Option<String>,
    #[arg(long)]
    runtime: Option<String>,
    #[command(flatten)]
    checkout: Checkout,
}

pub(super) fn run(args: BuildArgs) -> Result<i32, Exit> {
    let recipes = args.checkout.recipes()?;
    let plans = image_plans(&args, &recipes)?;
    let opts = run_options(PathBuf::from("results"), None, args.checkout.ca_bundle)?;
    tokio_runtime().block_on(async {
        let engine = DockerEngine::connect().await.map_err(|e| Exit::environment(error_chain(&e)))?;
        let backend = ContainersBackend::new(engine, opts.backend_config()).await?;
        let mut ui = Progress::new();
        let r = orchestrate::build_plans(&backend, &plans, &mut |e| ui.event(e)).await;
        ui.finish();
        let images = r.map_err(Exit::from)?;
        let built = images.iter().filter(|(_, b)| *b).count();
        for (reference, _) in &images {
            println!("{reference}");
        }
        eprintln!("{} image(s): {built} built, {} cache hit(s)", images.len(), images.len() - built);
        Ok(OK)
    })
}

/// The images to build: those a scenario's cells need, or every recipe version × runtime the
/// filters pick.
fn image_plans(args: &BuildArgs, recipes: &RecipeBook) -> Result<Vec<ImagePlan>, Exit> {
    match &args.scenario {
        Some(path) => {
            let scenario = args.checkout.scenario(path)?;
            let cells = orchestrate::plan(&scenario, recipes, &crate::placement::available_cpus())
                .map_err(Exit::from)?;
            // The cells are not admitted here, so every image counts as a container image: the
            // distinct images by the one rule `run` and `plan` use.
            Ok(orchestrate::distinct_images(&cells).into_iter().map(|(_, p)| p).collect())
        }
        None => {
            let wants =
                recipes.all_wants(args.family.as_deref(), args.version.as_deref(), args.runtime.as_deref());
            if wants.is_empty() {
                return Err(Exit::input("no recipe version and runtime match those filters"));
            }
            let mut plans = Vec::new();
            for w in &wants {
                plans.push(recipes.resolve(w).map_err(|e| Exit::input(e.message))?);
            }
            Ok(plans)
        }
    }
}
