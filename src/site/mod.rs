//! The results site (`benchlab site`): one static site over every run in `results/`, the way
//! `asv publish` shows benchmarks across commits. Pure: the CLI reads the run folders and judges
//! the claims; this turns them into files (paths and text). The parts: `model` (series per host
//! class, the records behind each point, release pairs compared), `front` (the front page),
//! `history` (a page per family × runtime × transport), `pages` (audits, run compares, run
//! reports, the layout every page shares), and the page script and style in `assets/`. No page
//! fetches anything: data rides in the page, so it works from `file://` and any static host.

mod front;
mod history;
mod model;
mod pages;

use serde::Serialize;

use crate::claims::Audit;
use crate::record::Record;

pub use model::{host_class, pair_interval, slug, PageKey};

/// One run folder as the site shows it.
pub struct RunInput {
    /// The scenario's folder under `results/` and the run's folder (its run id).
    pub scenario: String,
    pub id: String,
    pub records: Vec<Record>,
    /// The store's audit, when it is not clean: the first problem (the page says so).
    pub damaged: Option<String>,
}

/// What was built: every file (path inside the site, text), and the counts the CLI prints.
pub struct Site {
    pub files: Vec<(String, String)>,
    pub summary: Summary,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub runs: usize,
    pub records: usize,
    pub scenarios: usize,
    pub history_pages: usize,
    pub series: usize,
    pub audits: usize,
    pub compares: usize,
    pub files: usize,
    pub bytes: usize,
    /// The front page with its style and script: what a first visit loads.
    pub front_page_bytes: usize,
}

#[derive(Serialize)]
struct ManifestPage {
    path: String,
    kind: &'static str,
}

#[derive(Serialize)]
struct ManifestHistory {
    path: String,
    family: String,
    runtime: String,
    transport: String,
    versions: usize,
}

#[derive(Serialize)]
struct ManifestCompare {
    path: String,
    scenario: String,
    runs: usize,
}

/// `site.json`: every page and what it is, so tools (and the browser test) can walk the site.
#[derive(Serialize)]
struct Manifest {
    pages: Vec<ManifestPage>,
    histories: Vec<ManifestHistory>,
    compares: Vec<ManifestCompare>,
}

pub const STYLE: &str = include_str!("assets/site.css");
pub const SCRIPT: &str = include_str!("assets/site.js");

pub use crate::par::par_map;

/// The whole site from the runs (sorted by scenario, then run id) and the claims audits of the
/// scenarios that have them.
pub fn build(runs: &[RunInput], audits: &[Audit]) -> Site {
    let series = model::series(runs);
    let mut files: Vec<(String, String)> = Vec::new();
    let mut manifest = Manifest { pages: Vec::new(), histories: Vec::new(), compares: Vec::new() };
    let mut page = |files: &mut Vec<(String, String)>, path: String, kind: &'static str, text: String| {
        manifest.pages.push(ManifestPage { path: path.clone(), kind });
        files.push((path, text));
    };
    let pages_of = model::pages(&series);
    page(&mut files, "index.html".into(), "front", front::front_page(runs, &series, &pages_of, audits));
    for (key, ss) in &pages_of {
        manifest.histories.push(ManifestHistory {
            path: key.path(),
            family: key.family.clone(),
            runtime: key.runtime.clone(),
            transport: key.transport.clone(),
            versions: ss.iter().map(|s| s.history.versions.len()).max().unwrap_or(0),
        });
        page(&mut files, key.path(), "history", history::history_page(key, ss));
    }
    for a in audits {
        page(&mut files, pages::audit_path(&a.scenario), "audit", pages::audit_page(a, runs));
    }
    let mut scenarios: Vec<&str> = runs.iter().map(|r| r.scenario.as_str()).collect();
    scenarios.dedup();
    let compared: Vec<(&str, Vec<&RunInput>)> = scenarios
        .iter()
        .map(|sc| (*sc, runs.iter().filter(|r| r.scenario == *sc).collect::<Vec<_>>()))
        .filter(|(_, of)| of.len() >= 2)
        .collect();
    for ((sc, of), text) in compared.iter().zip(par_map(&compared, |(sc, of)| pages::compare_page(sc, of))) {
        manifest.compares.push(ManifestCompare {
            path: pages::compare_path(sc),
            scenario: sc.to_string(),
            runs: of.len(),
        });
        page(&mut files, pages::compare_path(sc), "compare", text);
    }
    for (r, text) in runs.iter().zip(par_map(runs, pages::run_page)) {
        page(&mut files, pages::run_path(&r.scenario, &r.id), "run", text);
    }
    let front_page_bytes = files[0].1.len() + STYLE.len() + SCRIPT.len();
    files.push(("site.css".into(), STYLE.into()));
    files.push(("site.js".into(), SCRIPT.into()));
    files.push((
        "site.json".into(),
        serde_json::to_string_pretty(&manifest).expect("manifests serialise") + "\n",
    ));
    let summary = Summary {
        runs: runs.len(),
        records: runs.iter().map(|r| r.records.len()).sum(),
        scenarios: scenarios.len(),
        history_pages: pages_of.len(),
        series: series.len(),
        audits: audits.len(),
        compares: manifest.compares.len(),
        files: files.len(),
        bytes: files.iter().map(|(_, t)| t.len()).sum(),
        front_page_bytes,
    };
    Site { files, summary }
}

#[cfg(test)]
mod tests;
