//! `benchlab verify`: a scenario's `[[claim]]` tables judged against a run's records. Parsing
//! and judging claims live in `claims`; this finds the run, prints and writes the audit.

use std::path::{Path, PathBuf};

use super::exit::{Exit, FAILED, OK};
use super::load_run;
use crate::record::store::RECORDS_FILE;
use crate::scenario::Scenario;

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The scenario file whose `[[claim]]` tables are checked.
    scenario: PathBuf,
    /// The run folder (or records.jsonl) to check against (default: the newest run folder
    /// under <results>/<scenario name>/ that has records; none: every claim not_measured).
    #[arg(long)]
    run: Option<PathBuf>,
    /// Where run folders are looked for when --run is not given.
    #[arg(long, default_value = "results")]
    results: PathBuf,
    /// Print the audit as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the Markdown audit report to FILE (AUDIT.md): the summary an auditor reads —
    /// what reproduced, what did not and on what evidence — then every verdict, the verdicts
    /// per distinct measurement, the differences from the source and every claim explained.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// A local clone to read the source's repository from, as URL=PATH, when the run folder
    /// keeps no copy of the `[source] results` files its claims cite. May be given several times.
    #[arg(long, value_name = "URL=PATH")]
    source_mirror: Vec<String>,
}

pub(super) fn run(args: VerifyArgs) -> Result<i32, Exit> {
    let mirrors = crate::source::Mirrors::parse(&args.source_mirror).map_err(Exit::input)?;
    let out = Output { json: args.json, markdown: args.markdown.as_deref() };
    verify_cmd(&args.scenario, args.run.as_deref(), &args.results, &mirrors, out)
}

/// Where the audit goes: a table or JSON on stdout, and AUDIT.md.
struct Output<'a> {
    json: bool,
    markdown: Option<&'a Path>,
}

/// The result files the claims may cite: the run folder's kept copy when it holds every file the
/// scenario names at its repository and commit (an audit recomputes offline from it), else read
/// at the commit through `mirrors`.
fn published(
    scenario: &Scenario,
    run: Option<&Path>,
    mirrors: &crate::source::Mirrors,
) -> Result<Option<crate::source::results::Published>, Exit> {
    let Some(repo) = &scenario.stated.repository else { return Ok(None) };
    let dir = run.map(|r| if r.is_file() { r.parent().unwrap_or(r) } else { r });
    let kept = match dir {
        Some(d) => crate::source::results::read_kept(d).map_err(Exit::input)?,
        None => None,
    };
    let covers = |p: &crate::source::results::Published| {
        p.git == repo.git
            && p.commit.starts_with(&repo.commit.to_ascii_lowercase())
            && scenario.stated.results.iter().all(|f| p.file(f).is_some())
    };
    match kept {
        Some(p) if covers(&p) => Ok(Some(p)),
        _ => super::source::fetch_published(scenario, mirrors),
    }
}

/// The newest run folder under `<results>/<name>/` whose records.jsonl holds something.
fn newest_run(results: &Path, name: &str) -> Option<PathBuf> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(results.join(name))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(RECORDS_FILE).metadata().is_ok_and(|m| m.len() > 0))
        .collect();
    // Run ids start with a UTC timestamp, so the name orders them.
    runs.sort();
    runs.pop()
}

fn verify_cmd(
    scenario: &Path,
    run: Option<&Path>,
    results: &Path,
    mirrors: &crate::source::Mirrors,
    out: Output,
) -> Result<i32, Exit> {
    let Output { json, markdown } = out;
    let scenario = Scenario::load(scenario).map_err(|e| Exit::input(e.to_string()))?;
    let run = match run {
        Some(r) => Some(r.to_path_buf()),
        None => newest_run(results, &scenario.name),
    };
    let published = published(&scenario, run.as_deref(), mirrors)?;
    let claims = crate::claims::scenario_claims(&scenario, published.as_ref())
        .map_err(|e| Exit::input(e.to_string()))?;
    let records = match &run {
        Some(r) => load_run(r)?,
        None => Vec::new(),
    };
    let audit = crate::claims::verify(&scenario, &claims, &records, run.map(|r| r.display().to_string()));
    if json {
        print!("{}", crate::claims::render::json(&audit));
    } else {
        print!("{}", crate::claims::render::table(&audit));
    }
    if let Some(p) = markdown {
        std::fs::write(p, crate::claims::render::markdown(&audit))
            .map_err(|e| Exit::environment(format!("write {}: {e}", p.display())))?;
    }
    crate::par::drop_aside(records);
    // Not measured and inconclusive do not fail; a contradicted claim, or one whose self-test
    // shows it cannot fail, does.
    let cannot_fail = audit.cannot_fail();
    if !cannot_fail.is_empty() {
        let ids: Vec<&str> = cannot_fail.iter().map(|r| r.id.as_str()).collect();
        eprintln!(
            "benchlab verify: {} claim(s) cannot fail (reproduced with the measured figure halved and doubled): {}",
            ids.len(),
            ids.join(", ")
        );
    }
    Ok(if audit.exit_code() != 0 { FAILED } else { OK })
}
