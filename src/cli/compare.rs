//! `benchlab compare`: two runs cell by cell, and the CI gate on slowdowns. The comparison and
//! its rendering live in `report`.

use std::path::{Path, PathBuf};

use super::exit::{Exit, FAILED, OK};
use super::load_run;
use crate::report;

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    run_a: PathBuf,
    run_b: PathBuf,
    /// Percent beyond which a ratio's whole interval counts as slower or faster.
    #[arg(long, default_value_t = report::DEFAULT_THRESHOLD_PCT)]
    threshold: f64,
    /// For CI gates: exit 1 when any metric is slower by more than PCT at its lower bound.
    #[arg(long, value_name = "PCT")]
    fail_if_slower: Option<f64>,
    /// Gate even when the two runs' hosts differ in speed (their fingerprints): by default
    /// `--fail-if-slower` refuses, as a ratio across machines of different speed gates the
    /// machine, not the change.
    #[arg(long)]
    cross_host: bool,
    /// table, markdown or json.
    #[arg(long, default_value = "table", value_parser = clap::value_parser!(report::CompareFormat))]
    format: report::CompareFormat,
}

pub(super) fn run(args: CompareArgs) -> Result<i32, Exit> {
    compare_cmd(&args.run_a, &args.run_b, args.threshold, args.fail_if_slower, args.cross_host, args.format)
}

fn compare_cmd(
    a: &Path,
    b: &Path,
    threshold: f64,
    fail_if_slower: Option<f64>,
    cross_host: bool,
    format: report::CompareFormat,
) -> Result<i32, Exit> {
    if threshold.is_nan() || threshold < 0.0 || fail_if_slower.is_some_and(|p| p.is_nan() || p < 0.0) {
        return Err(Exit::input("--threshold and --fail-if-slower take a percentage >= 0"));
    }
    let c = report::compare(&load_run(a)?, &load_run(b)?, threshold);
    print!("{}", report::render_compare(format, &c));
    if let Some(pct) = fail_if_slower {
        if let Some(h) = c.hosts.as_ref().filter(|h| h.differs && !cross_host) {
            return Err(Exit::input(format!(
                "--fail-if-slower: the two runs' hosts differ in speed ({}), so a slowdown could be the machine's; \
                 measure both on one host, or pass --cross-host to gate anyway",
                h.line
            )));
        }
        let bad = report::gate_failures(&c, pct);
        for m in &bad {
            eprintln!(
                "gate: {} {} is {:.3}x (lower bound {:.3} > {:.3})",
                m.cell,
                m.metric.label(),
                m.ratio.estimate,
                m.ratio.lower,
                1.0 + pct / 100.0
            );
        }
        if !bad.is_empty() {
            return Ok(FAILED);
        }
    }
    Ok(OK)
}
