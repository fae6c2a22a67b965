//! `benchlab source fetch`: every server source of a scenario fetched into the content-addressed
//! cache and hashed, printed as a table or JSON; a problem is reported at the scenario key it
//! belongs to. Fetching and hashing live in `crate::source`.

use std::path::PathBuf;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

use super::exit::{Exit, OK};
use super::Checkout;
use crate::source;
use crate::source::dockerfile::{From, Mapped};
use crate::spec::SourceOrigin;

#[derive(Debug, clap::Args)]
pub struct SourceArgs {
    #[command(subcommand)]
    command: SourceCommand,
}

#[derive(Debug, clap::Subcommand)]
enum SourceCommand {
    /// Fetch every server's `source` of a scenario into the cache (<work>/sources/trees/<sha256>)
    /// and print its tree hash: a git commit (through --source-mirror where the host has no
    /// network), a folder, or a tarball checked against its sha256. A commit or tarball already
    /// fetched is read from the cache.
    ///
    /// The tree hash is the sha256 of the tree's listing (one line per file: kind, mode, the
    /// file's sha256, its path), kept beside the tree: the same files give the same hash whatever
    /// their origin.
    ///
    /// Example: benchlab source fetch scenarios/repro-armantik.toml --source-mirror
    /// https://github.com/armantik/benchmark-mcp-servers=/srv/mirrors/benchmark-mcp-servers
    Fetch(FetchArgs),
}

#[derive(Debug, clap::Args)]
struct FetchArgs {
    /// The scenario whose servers' sources to fetch.
    scenario: PathBuf,
    /// `table` (default) or `json` (one object per source: server, source, tree_sha256, files,
    /// bytes, tree, cached).
    #[arg(long, short = 'f', default_value = "table", value_parser = ["table", "json"])]
    format: String,
    #[command(flatten)]
    checkout: Checkout,
}

pub(super) fn run(args: SourceArgs) -> Result<i32, Exit> {
    let SourceCommand::Fetch(args) = args.command;
    let scenario = args.checkout.scenario(&args.scenario)?;
    if scenario.fetched.is_empty() {
        return Err(Exit::input(format!(
            "{}: no server has a `source` (write `source = {{ git = URL, commit = HASH, path = \"dir\" }}` on a [[server]])",
            args.scenario.display()
        )));
    }
    // In the scenario's order of servers.
    let fetched: Vec<(String, source::Fetched)> = scenario
        .servers
        .iter()
        .filter_map(|s| scenario.fetched.get(s.id.get_ref()).map(|f| (s.id.get_ref().clone(), f.clone())))
        .collect();
    let plans: Vec<_> = fetched.iter().map(|(_, f)| source::from_plan(f, &scenario.stated.base)).collect();
    if args.format == "json" {
        let list: Vec<serde_json::Value> = fetched
            .iter()
            .zip(&plans)
            .map(|((server, f), plan)| {
                serde_json::json!({
                    "server": server,
                    "source": f.record.source,
                    "tree_sha256": f.record.tree_sha256,
                    "files": f.record.files,
                    "bytes": f.record.bytes,
                    "tree": f.tree_dir,
                    "cached": f.cached,
                    "from": plan.as_ref().map(|p| p.iter().map(|(f, m)| from_json(f, m)).collect::<Vec<_>>()),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list).expect("JSON"));
        return Ok(OK);
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header([
        "server",
        "origin",
        "at",
        "path",
        "tree sha256",
        "files",
        "",
        "Dockerfile FROM → here",
    ]);
    let mut unmapped = std::collections::BTreeSet::new();
    for ((server, f), plan) in fetched.iter().zip(&plans) {
        let s = &f.record.source;
        let (origin, at) = match &s.origin {
            SourceOrigin::Git { url, commit } => (url.clone(), commit[..12].to_string()),
            SourceOrigin::Dir { dir } => (dir.clone(), "folder".to_string()),
            SourceOrigin::Tarball { file, sha256 } => (file.clone(), format!("sha256 {}", &sha256[..12])),
        };
        let froms = match plan {
            None => "no Dockerfile at the path's top".to_string(),
            Some(p) => p
                .iter()
                .map(|(from, m)| {
                    if *m == Mapped::Unmapped {
                        unmapped.insert(from.image.clone());
                    }
                    format!("{} → {}", from.image, mapped_text(m))
                })
                .collect::<Vec<_>>()
                .join("\n"),
        };
        t.add_row([
            server.clone(),
            origin,
            at,
            if s.path.is_empty() { "/".into() } else { s.path.clone() },
            f.record.tree_sha256[..16].to_string(),
            format!("{} ({} B)", f.record.files, f.record.bytes),
            if f.cached { "cached".into() } else { "fetched".into() },
            froms,
        ]);
    }
    println!("{t}");
    eprintln!(
        "trees in {}/trees (each beside its listing, <sha256>.listing)",
        source::cache_root(&super::work_dir()).display()
    );
    for image in &unmapped {
        eprintln!(
            "note: no [source.base] rule for {image:?}: no registry is reached here, so a build from it needs one, \
             e.g. [source.base] \"{image}\" = {{ suite = \"bookworm\", packages = [\"…\"] }}, or \
             {{ unavailable = \"why\" }} (building from a source is not implemented yet)"
        );
    }
    Ok(OK)
}

fn mapped_text(m: &Mapped) -> String {
    match m {
        Mapped::Stage(s) => format!("its stage {s}"),
        Mapped::Base { suite, packages } => format!("Debian {} + {}", suite.as_str(), packages.join(", ")),
        Mapped::Unavailable(why) => format!("unavailable: {why}"),
        Mapped::Unmapped => "no rule".into(),
    }
}

fn from_json(f: &From, m: &Mapped) -> serde_json::Value {
    let here = match m {
        Mapped::Stage(s) => serde_json::json!({ "stage": s }),
        Mapped::Base { suite, packages } => serde_json::json!({ "suite": suite, "packages": packages }),
        Mapped::Unavailable(why) => serde_json::json!({ "unavailable": why }),
        Mapped::Unmapped => serde_json::Value::Null,
    };
    serde_json::json!({ "line": f.line, "image": f.image, "stage": f.stage, "here": here })
}

/// The scenario's `[source] results` read at its repository's commit (through `mirrors`), or None
/// when it names none; a bad commit or path is reported at its place in the scenario (exit 2),
/// the host's problems with exit 3.
pub(super) fn fetch_published(
    scenario: &crate::scenario::Scenario,
    mirrors: &source::Mirrors,
) -> Result<Option<source::results::Published>, Exit> {
    let base = scenario.path.parent().map(PathBuf::from).unwrap_or_default();
    let cache = source::cache_root(&super::work_dir());
    source::results::fetch_results(&scenario.stated, &base, mirrors, &cache).map_err(|e| {
        let stated = &scenario.stated;
        let repo = stated.repository.as_ref().expect("results are fetched from a repository");
        let needle = match (e.entry, e.error.field()) {
            (Some(i), _) => format!("{:?}", stated.results[i]),
            (None, Some(source::SourceField::Commit)) => format!("{:?}", repo.commit),
            (None, Some(_)) => format!("{:?}", repo.git),
            (None, None) => return Exit::environment(format!("[source] results: {e}")),
        };
        let message = format!("[source] results: {e}");
        Exit::input(match scenario.source.find(&needle) {
            Some(at) => scenario.error_at(at..at, message).to_string(),
            None => format!("{}: {message}", scenario.path.display()),
        })
    })
}
