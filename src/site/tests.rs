//! Tests of the site's pure parts: series split by host class, the pages and the manifest, the
//! inline data kept inert.

use super::*;
use crate::record::tests::sample_record;

fn run(scenario: &str, id: &str, cpu: &str, versions: &[(&str, f64)]) -> RunInput {
    let records = versions
        .iter()
        .enumerate()
        .map(|(seq, (v, ms))| {
            let mut r = sample_record(&format!("mcp-{v}"));
            r.run_id = id.into();
            r.seq = seq as u64;
            r.cell.server.family = "python-mcp".into();
            r.cell.server.sdk_version = v.to_string();
            r.cell.id = format!("mcp-{v}/cold_start");
            r.environment.host.cpu_model = cpu.into();
            r.metrics.cold_start.as_mut().unwrap().samples_ms = (0..8).map(|i| ms + f64::from(i)).collect();
            r
        })
        .collect();
    RunInput { scenario: scenario.into(), id: id.into(), records, damaged: None }
}

fn file<'a>(site: &'a Site, path: &str) -> &'a str {
    &site.files.iter().find(|(p, _)| p == path).unwrap_or_else(|| panic!("no {path}")).1
}

#[test]
fn runs_on_different_host_classes_are_never_one_series() {
    let versions = [("1.0.0", 100.0), ("1.1.0", 101.0), ("1.2.0", 300.0), ("1.3.0", 301.0)];
    let runs = vec![
        run("sweep", "20261201T000000Z-sweep-1", "AMD EPYC", &versions),
        run("sweep", "20261202T000000Z-sweep-2", "Intel(R) Xeon(R) Processor", &versions),
    ];
    let series = model::series(&runs);
    let hosts: Vec<&str> = series.iter().map(|s| s.host.as_str()).collect();
    assert_eq!(series.len(), 2, "{hosts:?}");
    assert!(hosts[0].starts_with("AMD EPYC × 2 CPUs") && hosts[1].starts_with("Intel"), "{hosts:?}");
    for s in &series {
        assert_eq!(s.history.versions, ["1.0.0", "1.1.0", "1.2.0", "1.3.0"]);
        assert_eq!(s.refs.iter().map(Vec::len).collect::<Vec<_>>(), [1, 1, 1, 1], "one record per version");
    }
    // Merged, the same cells would have made one series of two runs per version.
    let mut one = runs[0].records.clone();
    one.extend(runs[1].records.iter().cloned().map(|mut r| {
        r.environment.host.cpu_model = "AMD EPYC".into();
        r
    }));
    let merged =
        model::series(&[RunInput { scenario: "sweep".into(), id: "x".into(), records: one, damaged: None }]);
    assert_eq!(merged.len(), 1);
}

#[test]
fn the_site_has_every_page_in_its_manifest_and_the_data_stays_inert() {
    let mut a = run("sweep", "20261201T000000Z-sweep-1", "AMD EPYC", &[("1.0.0", 100.0), ("1.1.0", 101.0)]);
    a.records[0].cell.server.env.insert("NOTE".into(), "</script><script>alert(1)</script>".into());
    let b = run("sweep", "20261202T000000Z-sweep-2", "AMD EPYC", &[("1.0.0", 100.0), ("1.1.0", 150.0)]);
    let site = build(&[a, b], &[]);
    let manifest: serde_json::Value = serde_json::from_str(file(&site, "site.json")).unwrap();
    let pages = manifest["pages"].as_array().unwrap();
    for p in pages {
        let (path, kind) = (p["path"].as_str().unwrap(), p["kind"].as_str().unwrap());
        let text = file(&site, path);
        assert!(text.contains(&format!("<body data-page=\"{kind}\">")), "{path} is not a {kind} page");
    }
    let kinds: Vec<&str> = pages.iter().map(|p| p["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "run").count(), 2);
    assert_eq!(kinds.iter().filter(|k| **k == "compare").count(), 1);
    assert_eq!(manifest["compares"][0]["runs"], 2);
    let history = file(&site, manifest["histories"][0]["path"].as_str().unwrap());
    assert!(!history.contains("</script><script>alert"), "record text must not close the data script");
    let data = history.split("id=\"data\">").nth(1).unwrap().split("</script>").next().unwrap();
    let data: serde_json::Value = serde_json::from_str(data).unwrap();
    let series = data["series"].as_array().unwrap();
    let env = series.iter().find(|s| s["label"].as_str().unwrap().contains("NOTE=")).expect("the env series");
    assert!(env["label"].as_str().unwrap().contains("</script>"), "the text survives as data");
    // Every pair of releases with points has its interval.
    let plain = series.iter().find(|s| !s["label"].as_str().unwrap().contains("NOTE=")).unwrap();
    let cold = plain["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == "cold_start").unwrap();
    assert_eq!(cold["cmp"].as_array().unwrap().len(), 1);
    let front = file(&site, "index.html");
    assert_eq!(front.matches("<tr data-family=\"python-mcp\"").count(), series.len());
    assert_eq!(site.summary.runs, 2);
    assert!(site.summary.front_page_bytes > front.len());
}
