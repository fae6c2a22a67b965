//! `benchlab lock`: lock folders regenerated with a real locker, with progress. Locking lives in
//! `lock::lock`; this checks the family, version or range and runtime first, so a typo
//! is bad input (exit 2) even when no engine answers.

use std::path::PathBuf;

use super::exit::{error_chain, Exit, OK};
use super::progress::Progress;
use super::{run_options, tokio_runtime, Checkout};
use crate::backend::containers::docker::DockerEngine;
use crate::orchestrate::Event;
use crate::recipe::releases::Range;
use crate::recipe::RecipeBook;

#[derive(Debug, clap::Args)]
pub struct LockArgs {
    /// A recipe family (images/<family>/).
    family: String,
    /// One of the family's versions, or a release range of its recipe's [[range]]:
    /// `1.1.2..1.x` (every release from 1.1.2 to the latest 1.x), `1.1.2..1.30.0`, `1.1.2..`.
    /// A range lists the package index into lockfiles/<family>/releases.toml and locks every
    /// release that has no fresh lock yet, one container per runtime.
    version: String,
    /// Only this runtime (default: every runtime the version lists).
    #[arg(long)]
    runtime: Option<String>,
    /// A labelled lock of the version: the folder `<version>-<runtime>+<LABEL>` (e.g. `era`),
    /// whose requirements.in or package.json you write, with an `exclude-newer` file holding the
    /// time it is locked as of (e.g. the end of the release's publication day). A server entry
    /// runs it with `lock = "<LABEL>"`.
    #[arg(long = "lock", value_name = "LABEL")]
    label: Option<String>,
    /// With a range: `all` releases, or the `latest-patch` of each minor.
    #[arg(long, default_value = "all", value_parser = crate::recipe::releases::Pick::parse)]
    pick: crate::recipe::releases::Pick,
    #[command(flatten)]
    checkout: Checkout,
}

pub(super) fn run(args: LockArgs) -> Result<i32, Exit> {
    let LockArgs { family, version, runtime, label, pick, checkout } = args;
    let recipes = checkout.recipes()?;
    check_input(&recipes, &family, &version, runtime.as_deref(), label.as_deref())?;
    let opts = run_options(PathBuf::from("results"), None, checkout.ca_bundle)?;
    tokio_runtime().block_on(async {
        let engine = DockerEngine::connect().await.map_err(|e| Exit::environment(error_chain(&e)))?;
        let mut ui = Progress::new();
        let r = crate::lock::lock(
            &engine,
            &recipes,
            &family,
            &version,
            pick,
            runtime.as_deref(),
            label.as_deref(),
            &opts.backend_config(),
            &mut |e| ui.event(Event::Prepare(e)),
        )
        .await;
        ui.finish();
        for dir in r.map_err(Exit::from)? {
            println!("locked {}", dir.display());
        }
        Ok(OK)
    })
}

/// What `lock::lock` checks before it lists or locks anything (a release range that
/// parses, a family with a `[[range]]`, a version and runtime its recipe has), asked of the same
/// recipe functions up front, so bad input exits 2 before an engine is even asked for
/// (`lock::lock` reports the same as `LockError::Input`, also exit 2).
fn check_input(
    recipes: &RecipeBook,
    family: &str,
    version: &str,
    runtime: Option<&str>,
    label: Option<&str>,
) -> Result<(), Exit> {
    let bad = |m: String| Exit::input(format!("plan the lock: {m}"));
    if version.contains("..") {
        if label.is_some() {
            return Err(bad("a labelled lock (`--lock`) is of one version, not of a range".into()));
        }
        Range::parse(version).map_err(bad)?;
        recipes.range_locking(family, runtime).map_err(bad)?;
    } else {
        recipes.lock_jobs(family, version, runtime, label).map_err(bad)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::exit::BAD_INPUT;

    #[test]
    fn typos_in_what_to_lock_are_bad_input_before_any_engine() {
        let recipes =
            RecipeBook::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).expect("recipes load");
        let refused = |family: &str, version: &str, runtime: Option<&str>| {
            let e = check_input(&recipes, family, version, runtime, None).expect_err("refused");
            assert_eq!(e.code, BAD_INPUT, "{}", e.message);
            assert!(e.message.starts_with("plan the lock: "), "{}", e.message);
            e.message
        };
        assert!(refused("python-mcp", "x..y", None).contains("release range \"x..y\""));
        assert!(refused("nosuchfamily", "1.0", None).contains("nosuchfamily"));
        assert!(refused("python-mcp", "0.0.1", None).contains("0.0.1"));
        assert!(refused("python-mcp", "2.3.0", Some("nope")).contains("nope"));
        assert!(check_input(&recipes, "python-mcp", "2.3.0", None, None).is_ok());
        let e = check_input(&recipes, "python-mcp", "2.3.0", Some("cpython-trixie"), Some("nolabel"))
            .expect_err("a label without its folder is refused");
        assert!(e.message.contains("2.3.0-cpython-trixie+nolabel"), "{}", e.message);
        assert!(check_input(&recipes, "python-mcp", "1.1.2..1.x", None, Some("era")).is_err());
    }
}
