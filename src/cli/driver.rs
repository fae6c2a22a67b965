//! `benchlab driver` (hidden): the sidecar's role, started by the orchestrator with one cell's
//! `DriverSpec`. The workload lives in `crate::driver`; this parses the spec and maps the outcome
//! to an exit code.

use super::exit::{Exit, FAILED, OK};

#[derive(Debug, clap::Args)]
pub struct DriverArgs {
    /// The cell's DriverSpec as JSON.
    #[arg(long)]
    spec: String,
}

pub(super) fn run(args: DriverArgs) -> Result<i32, Exit> {
    let spec: crate::spec::DriverSpec =
        serde_json::from_str(&args.spec).map_err(|e| Exit::input(format!("driver: bad spec: {e}")))?;
    let outcome = crate::driver::run(&spec);
    Ok(if outcome.failure.is_some() { FAILED } else { OK })
}
