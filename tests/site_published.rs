//! The published site (`docs/site/`, `benchlab site results --out docs/site`) against the
//! committed `results/`: every run folder with records has its page there and the site names no
//! run that is gone, so a committed run cannot be missing from the published site. (Whether the
//! pages render is tests/site_browser.rs's part; regenerating the whole site here would take
//! minutes in a debug build.)

use std::collections::BTreeSet;
use std::path::Path;

fn runs_in_results(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for scenario in std::fs::read_dir(root.join("results")).unwrap().flatten() {
        if !scenario.path().is_dir() {
            continue;
        }
        for run in std::fs::read_dir(scenario.path()).unwrap().flatten() {
            let records = run.path().join("records.jsonl");
            if records.metadata().is_ok_and(|m| m.len() > 0) {
                out.insert(format!(
                    "runs/{}/{}.html",
                    scenario.file_name().to_string_lossy(),
                    run.file_name().to_string_lossy()
                ));
            }
        }
    }
    out
}

#[test]
fn the_published_site_has_a_page_for_every_committed_run_and_no_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = root.join("docs/site/site.json");
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| {
        panic!("{}: {e}; publish it with `benchlab site results --out docs/site`", manifest.display())
    });
    let site: serde_json::Value = serde_json::from_str(&text).unwrap();
    let published: BTreeSet<String> = site["pages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "run")
        .map(|p| p["path"].as_str().unwrap().to_string())
        .collect();
    let committed = runs_in_results(root);
    let missing: Vec<_> = committed.difference(&published).collect();
    let gone: Vec<_> = published.difference(&committed).collect();
    assert!(
        missing.is_empty() && gone.is_empty(),
        "docs/site is stale: runs without a page {missing:?}, pages of runs no longer in results/ {gone:?}; \
         regenerate with `benchlab site results --out docs/site`"
    );
    for p in site["pages"].as_array().unwrap() {
        let path = root.join("docs/site").join(p["path"].as_str().unwrap());
        assert!(path.is_file(), "{} is listed in site.json but missing", path.display());
    }
}
