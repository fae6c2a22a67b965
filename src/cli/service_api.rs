//! `benchlab service-api`: the lab's API service, a backing service of `shop` cells, from flags.
//! The service lives in `crate::services::api`; this parses its flags and its one fault.

use super::exit::{Exit, OK};
use crate::mcp::shop::DEFAULT_SEED;
use crate::services::API_PORT;

#[derive(Debug, clap::Args)]
pub struct ServiceApiArgs {
    /// The port to listen on, on 127.0.0.1.
    #[arg(long, default_value_t = API_PORT)]
    port: u16,
    /// The seed of the shop's dataset (the same seed the cell's Redis is seeded from).
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// A fault on purpose, for the lab's own tests: `exit@<n>` answers n requests (health checks
    /// included), then the process exits with code 3.
    #[arg(long, value_name = "exit@<n>")]
    fault: Option<String>,
}

/// The requests `--fault exit@<n>` lets through.
fn parse_fault(s: &str) -> Result<u64, String> {
    s.strip_prefix("exit@").and_then(|n| n.parse::<u64>().ok()).ok_or_else(|| {
        format!(
            "--fault {s:?}: the only fault is exit@<n>, the requests answered before exiting (e.g. exit@50)"
        )
    })
}

pub(super) fn run(args: ServiceApiArgs) -> Result<i32, Exit> {
    let exit_after = args.fault.as_deref().map(parse_fault).transpose().map_err(Exit::input)?;
    crate::services::api::serve(args.port, args.seed, exit_after)
        .map_err(|e| Exit::environment(format!("service-api on 127.0.0.1:{}: {e}", args.port)))?;
    Ok(OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_only_fault_is_exit_after_n() {
        assert_eq!(parse_fault("exit@50"), Ok(50));
        assert_eq!(parse_fault("exit@0"), Ok(0));
        for bad in ["exit", "exit@", "exit@-1", "reset@3", "exit@x"] {
            assert!(parse_fault(bad).unwrap_err().contains("--fault"), "{bad}");
        }
    }
}
