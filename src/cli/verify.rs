//! `benchlab verify`: a scenario's `[[claim]]` tables judged against its runs' records. Parsing
//! and judging claims live in `claims`; this finds the runs (those sharing the newest's
//! environment, or the ones named), refuses a store that does not audit clean, prints and writes
//! the audit, and maps the `--fail-on` gate to the exit code.

use std::path::{Path, PathBuf};

use super::exit::{Exit, FAILED, OK};
use crate::claims::runs::RunRead;
use crate::claims::Gate;
use crate::record::store::RECORDS_FILE;
use crate::record::Record;
use crate::scenario::Scenario;

#[derive(Debug, clap::Args)]
#[command(after_help = VERIFY_EXIT_HELP)]
pub struct VerifyArgs {
    /// The scenario file whose `[[claim]]` tables are checked.
    scenario: PathBuf,
    /// A run folder (or records.jsonl) to judge; repeat it to judge several runs together
    /// (default: the newest run folder under <results>/<scenario name>/ with records, and every
    /// other run there that shares its environment: the same host CPU and the same image per
    /// cell; none: every claim not_measured).
    #[arg(long)]
    run: Vec<PathBuf>,
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
    /// What exits 1: `cannot-fail` (a claim its self-test shows cannot fail: a method defect),
    /// `contradicted`, `inconclusive`; repeat it or give a comma list. Default: cannot-fail.
    #[arg(long, value_name = "GATE", value_delimiter = ',', value_parser = parse_gate)]
    fail_on: Vec<Gate>,
    /// Judge a run whose store does not audit clean (refused otherwise, exit 2); AUDIT.md then
    /// says so at its top.
    #[arg(long)]
    allow_damaged: bool,
}

const VERIFY_EXIT_HELP: &str = "\
Exit codes:
  0  judged, and no claim is caught by the --fail-on gate
  1  a claim is caught by the gate (by default: a claim that cannot fail, a method defect)
  2  bad input: a scenario or claim that cannot be used (file:line:column), or a run whose store
     does not audit clean (the first bad line named; --allow-damaged judges it anyway)
  3  the environment: a file that cannot be written";

fn parse_gate(s: &str) -> Result<Gate, String> {
    s.parse()
}

pub(super) fn run(args: VerifyArgs) -> Result<i32, Exit> {
    let mirrors = crate::source::Mirrors::parse(&args.source_mirror).map_err(Exit::input)?;
    let mut gate = if args.fail_on.is_empty() { vec![Gate::CannotFail] } else { args.fail_on };
    gate.sort();
    gate.dedup();
    let out = Output { json: args.json, markdown: args.markdown.as_deref() };
    let read = Reading { runs: &args.run, results: &args.results, gate, allow_damaged: args.allow_damaged };
    verify_cmd(&args.scenario, read, &mirrors, out)
}

/// What is read and how it is judged.
struct Reading<'a> {
    runs: &'a [PathBuf],
    results: &'a Path,
    gate: Vec<Gate>,
    allow_damaged: bool,
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

/// The run folders under `<results>/<name>/` whose records.jsonl holds something, oldest first.
fn runs_of(results: &Path, name: &str) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(results.join(name)) else { return Vec::new() };
    let mut runs: Vec<PathBuf> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(RECORDS_FILE).metadata().is_ok_and(|m| m.len() > 0))
        .collect();
    // Run ids start with a UTC timestamp, so the name orders them.
    runs.sort();
    runs
}

/// One run folder's records and, when its store does not audit clean, the first problem.
fn read_run(dir: &Path) -> Result<(Vec<Record>, Option<String>), Exit> {
    let path = super::records_path(dir);
    let (records, report) =
        crate::record::store::read_audited(&path).map_err(|e| Exit::input(e.to_string()))?;
    let damage = report
        .first_problem()
        .map(|p| format!("{}: {} problem(s); the first is {p}", path.display(), report.problems.len()));
    Ok((records, damage))
}

/// A damaged store whose records would be judged is refused (exit 2, naming the first problem)
/// unless `allow_damaged`, when the damage is carried into the audit.
fn refuse_damaged(dir: &Path, damage: Option<&String>, allow_damaged: bool) -> Result<(), Exit> {
    match (damage, allow_damaged) {
        (Some(d), false) => Err(Exit::input(format!(
            "{d}\nthe store does not audit clean (see `benchlab audit {}`): its records are not judged; --allow-damaged judges them anyway and says so in the audit",
            dir.display()
        ))),
        _ => Ok(()),
    }
}

/// The runs to judge: those named, else the newest under results/ and, of every older one, the
/// records whose cell ran the newest's image on a host of the same CPU. Their records one run
/// after another, and what each run was.
fn read_runs(
    named: &[PathBuf],
    results: &Path,
    scenario: &str,
    allow_damaged: bool,
) -> Result<(Vec<Record>, Vec<RunRead>), Exit> {
    // Each run: its folder, the records judged, how many it stores, its damage.
    let mut all: Vec<(PathBuf, Vec<Record>, usize, Option<String>)> = Vec::new();
    if named.is_empty() {
        let mut runs = runs_of(results, scenario);
        let Some(newest) = runs.pop() else { return Ok((Vec::new(), Vec::new())) };
        let (records, damage) = read_run(&newest)?;
        refuse_damaged(&newest, damage.as_ref(), allow_damaged)?;
        let key = crate::claims::runs::EnvKey::of(&records);
        for dir in runs {
            // An older run's records count where they share the environment, and then its
            // store must audit clean too.
            let (other, damage) = read_run(&dir)?;
            let stored = other.len();
            let shared: Vec<Record> = other.into_iter().filter(|r| key.shares(r)).collect();
            if !shared.is_empty() {
                refuse_damaged(&dir, damage.as_ref(), allow_damaged)?;
                all.push((dir, shared, stored, damage));
            }
        }
        let stored = records.len();
        all.push((newest, records, stored, damage));
    } else {
        for dir in named {
            let (records, damage) = read_run(dir)?;
            refuse_damaged(dir, damage.as_ref(), allow_damaged)?;
            let stored = records.len();
            all.push((dir.clone(), records, stored, damage));
        }
    }
    let mut records = Vec::new();
    let mut runs = Vec::new();
    for (dir, recs, stored, damage) in all {
        let offset = records.len();
        let split = RunRead::split(&dir.display().to_string(), &recs);
        let one = split.len() == 1;
        for mut r in split {
            r.range = r.range.start + offset..r.range.end + offset;
            r.damage.clone_from(&damage);
            if one {
                r.stored = stored;
            }
            runs.push(r);
        }
        records.extend(recs);
    }
    Ok((records, runs))
}

fn verify_cmd(
    scenario: &Path,
    read: Reading,
    mirrors: &crate::source::Mirrors,
    out: Output,
) -> Result<i32, Exit> {
    let Output { json, markdown } = out;
    let scenario = Scenario::load(scenario).map_err(|e| Exit::input(e.to_string()))?;
    let (records, runs) = read_runs(read.runs, read.results, &scenario.name, read.allow_damaged)?;
    // The result files the claims cite: kept beside the newest run read.
    let newest = runs.last().map(|r| PathBuf::from(&r.dir));
    let published = published(&scenario, newest.as_deref(), mirrors)?;
    let claims = crate::claims::scenario_claims(&scenario, published.as_ref())
        .map_err(|e| Exit::input(e.to_string()))?;
    let mut dirs: Vec<String> = Vec::new();
    for r in &runs {
        if !dirs.contains(&r.dir) {
            dirs.push(r.dir.clone());
        }
    }
    let run = (!dirs.is_empty()).then(|| dirs.join(", "));
    let audit = crate::claims::verify_runs(&scenario, &claims, &records, runs, read.gate, run);
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
    if audit.damaged() {
        eprintln!("benchlab verify: judged a store that does not audit clean (--allow-damaged)");
    }
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
