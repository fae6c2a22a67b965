//! `benchlab service-mock` (hidden): the lab's mock HTTP service from flags. The service lives in
//! `crate::services::mock`; this reads its expectations (a file, or an environment variable in a
//! cell's service container), refuses a bad one (exit 2, naming the field) and says where it
//! listens.

use std::path::PathBuf;

use super::exit::{Exit, OK};
use crate::spec::MOCK_PORT;

#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("source").required(true))]
pub struct ServiceMockArgs {
    /// The expectations file (MockServer-style JSON; the format is `services::mock`'s).
    #[arg(long, value_name = "FILE", group = "source")]
    expectations: Option<PathBuf>,
    /// The environment variable holding the expectations' text instead of a file (how a cell's
    /// service container gets them).
    #[arg(long, value_name = "VAR", group = "source")]
    expectations_env: Option<String>,
    /// The port to listen on, on 127.0.0.1 (0: a free one, printed).
    #[arg(long, default_value_t = MOCK_PORT)]
    port: u16,
}

pub(super) fn run(args: ServiceMockArgs) -> Result<i32, Exit> {
    let (origin, text) = match (&args.expectations, &args.expectations_env) {
        (Some(path), _) => (
            path.display().to_string(),
            std::fs::read_to_string(path)
                .map_err(|e| Exit::input(format!("cannot read {}: {e}", path.display())))?,
        ),
        (None, Some(var)) => (
            format!("${var}"),
            std::env::var(var).map_err(|e| Exit::input(format!("the expectations in ${var}: {e}")))?,
        ),
        (None, None) => unreachable!("clap requires one of the two"),
    };
    let expectations =
        crate::services::mock::parse(&text).map_err(|e| Exit::input(format!("{origin}: {e}")))?;
    let (count, sha256) = (expectations.list.len(), expectations.sha256.clone());
    crate::services::mock::serve(expectations, args.port, |addr| {
        eprintln!(
            "benchlab service-mock: listening on {addr} ({count} expectations of {origin}, sha256 {sha256})"
        )
    })
    .map_err(|e| Exit::environment(format!("service-mock on 127.0.0.1:{}: {e}", args.port)))?;
    Ok(OK)
}
