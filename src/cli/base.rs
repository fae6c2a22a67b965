//! `benchlab base`: bootstraps one base image from a Debian suite, with progress. Making the base
//! lives in `backend::containers::images::ensure_base` and `recipe::base`.

use super::exit::{error_chain, Exit, OK};
use super::progress::Progress;
use super::tokio_runtime;
use crate::backend::containers::docker::DockerEngine;
use crate::orchestrate::Event;
use crate::recipe::base::BaseSource;

#[derive(Debug, clap::Args)]
pub struct BaseArgs {
    /// Debian suite: bookworm or trixie.
    #[arg(long, default_value = "bookworm")]
    suite: String,
    /// Extra Debian packages in the base (repeat the flag).
    #[arg(long = "package")]
    packages: Vec<String>,
}

pub(super) fn run(args: BaseArgs) -> Result<i32, Exit> {
    let BaseArgs { suite, packages } = args;
    let pk: Vec<&str> = packages.iter().map(String::as_str).collect();
    let source = BaseSource::bootstrap(&suite, &pk);
    source.validate().map_err(Exit::input)?;
    tokio_runtime().block_on(async {
        let engine = DockerEngine::connect().await.map_err(|e| Exit::environment(error_chain(&e)))?;
        let mut ui = Progress::new();
        let work = super::work_dir();
        let base = crate::backend::containers::images::ensure_base(&engine, &source, &work, &mut |e| {
            ui.event(Event::Prepare(e))
        })
        .await?;
        ui.finish();
        println!("{}  {}", base.reference, base.image_id);
        if let Some(sha) = base.rootfs_sha256 {
            println!("rootfs sha256 {sha}");
        }
        Ok(OK)
    })
}
