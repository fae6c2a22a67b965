//! `benchlab verify` end to end on fixture runs built in a tempdir: each verdict kind
//! (reproduced, contradicted, inconclusive, not_measured, finding), repeats pooled, noise that
//! widens, no verdict from one reading, the self-test, the exit codes (0; 1 for a claim that cannot
//! fail, or what `--fail-on` names; 2 with file:line:column, or a store that does not audit clean)
//! and the Markdown report; several runs judged together; and that every committed
//! `results/<scenario>/AUDIT.md` is what `verify` writes today.

use std::path::{Path, PathBuf};
use std::process::Command;

use benchlab::record::store::read_records;
use benchlab::record::Record;
use benchlab::spec::Repeat;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const SEED_RUN: &str = "results/seed-001-python-servers/20261130T095003Z-seed-001-python-servers-6622";

/// A committed cold-start record to build fixtures from.
fn template() -> Record {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let recs = read_records(&root.join(SEED_RUN).join("records.jsonl")).unwrap();
    recs.into_iter().find(|r| r.cell.id == "mcp-2.3.0/cold_start").unwrap()
}

/// A cold-start record of server `id` with these samples (ms) and RSS (MiB).
fn cold(id: &str, samples: &[f64], rss_mib: u64, repeat: Option<(u32, u32)>) -> Record {
    let mut r = template();
    r.cell.id = format!("{id}/cold_start");
    r.cell.server.id = id.into();
    r.metrics.cold_start.as_mut().unwrap().samples_ms = samples.to_vec();
    r.metrics.memory.after_initialize.as_mut().unwrap().rss_bytes = rss_mib << 20;
    r.cell.repeat = repeat.map(|(index, of)| Repeat { index, of, fresh_container: true });
    r
}

const SCENARIO_HEAD: &str = r#"name = "fixture"
[[server]]
id = "fast"
family = "benchlab-null"
[[server]]
id = "slow"
family = "benchlab-null"
[[server]]
id = "wobbly"
family = "benchlab-null"
[[server]]
id = "absent"
family = "benchlab-null"
[[workload]]
kind = "cold_start"
spawns = 5
"#;

const SRC: &str = r#"source = { file = "seed.txt", section = "Results", hardware = { cpu_model = "Imaginary CPU", cpus = 64 } }"#;

fn claim(id: &str, body: &str) -> String {
    format!("\n[[claim]]\nid = \"{id}\"\n{SRC}\nstatement = \"{id}\"\n{body}\n")
}

struct Fixture {
    _dir: tempfile::TempDir,
    scenario: PathBuf,
    run: PathBuf,
}

fn fixture(claims: &str, records: &[Record]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("fixture.toml");
    std::fs::write(&scenario, format!("{SCENARIO_HEAD}{claims}")).unwrap();
    let run = dir.path().join("results/fixture/20990101T000000Z-fixture-1");
    store(&run, records);
    Fixture { _dir: dir, scenario, run }
}

/// A run folder whose store holds these records, chained and hashed as the lab writes them.
fn store(run: &Path, records: &[Record]) {
    let mut store = benchlab::record::store::Store::open(run).unwrap();
    for r in records {
        store.append(r.clone()).unwrap();
    }
}

fn verify(f: &Fixture, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .arg("verify")
        .arg(&f.scenario)
        .arg("--run")
        .arg(&f.run)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn verdicts(json: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap().to_string(), r["verdict"].as_str().unwrap().to_string()))
        .collect()
}

fn records() -> Vec<Record> {
    let steady = |c: f64| vec![c, c * 1.01, c * 0.99, c * 1.005, c * 0.995];
    let mut v = vec![cold("fast", &steady(100.0), 40, None), cold("slow", &steady(200.0), 80, None)];
    // Three repeats of a noisy server whose median sits far from any claim.
    for (i, c) in [300.0, 600.0, 420.0].iter().enumerate() {
        v.push(cold("wobbly", &steady(*c), 50, Some((i as u32, 3))));
    }
    v
}

const RATIO_OK: &str = r#"kind = "ratio"
numerator = { cell = "slow/cold_start", metric = "cold_start" }
denominator = { cell = "fast/cold_start", metric = "cold_start" }
value = 2.0"#;

#[test]
fn every_verdict_kind_and_exit_zero_without_contradictions() {
    let claims = [
        claim("ratio-ok", RATIO_OK),
        // An absolute from other hardware, judged by the ratio it implies to `abs-slow`.
        claim(
            "abs-fast",
            "kind = \"absolute\"\nmeasure = { cell = \"fast/cold_start\", metric = \"cold_start\" }\nvalue = 50\nunit = \"ms\"\nrelative_to = \"abs-slow\"",
        ),
        claim(
            "abs-slow",
            "kind = \"absolute\"\nmeasure = { cell = \"slow/cold_start\", metric = \"cold_start\" }\nvalue = 100\nunit = \"ms\"",
        ),
        // Noisy repeats (CV ~ 33%) near the claim: the widened interval straddles the band.
        claim(
            "noisy",
            "kind = \"ratio\"\nnumerator = { cell = \"wobbly/cold_start\", metric = \"cold_start\" }\ndenominator = { cell = \"fast/cold_start\", metric = \"cold_start\" }\nvalue = 4.2",
        ),
        // One reading (RSS after initialize, no repeats): no verdict, whatever it says.
        claim(
            "one-reading",
            "kind = \"ordering\"\nitems = [{ cell = \"slow/cold_start\", metric = \"rss_after_initialize\" }, { cell = \"fast/cold_start\", metric = \"rss_after_initialize\" }]",
        ),
        claim(
            "missing",
            "kind = \"absolute\"\nmeasure = { cell = \"absent/cold_start\", metric = \"cold_start\" }\nvalue = 1\nunit = \"ms\"\nrelative_to = \"abs-slow\"",
        ),
        claim(
            "soak",
            "kind = \"soak_slope\"\nmeasure = { cell = \"fast/cold_start\", metric = \"rss_slope\" }\nvalue = 0\nunit = \"MiB/h\"\nduration = \"24h\"",
        ),
        claim(
            "order",
            "kind = \"ordering\"\nitems = [{ cell = \"fast/cold_start\", metric = \"cold_start\" }, { cell = \"slow/cold_start\", metric = \"cold_start\" }]",
        ),
        claim(
            "inconsistent",
            "kind = \"finding\"\nfigures = [{ label = \"table\", value = 18 }, { label = \"text\", value = 24 }]\ncheck = \"differ\"\nexplanation = \"the table and the text disagree\"",
        ),
    ]
    .concat();
    let f = fixture(&claims, &records());
    let md = f.run.parent().unwrap().join("AUDIT.md");
    let (code, out, err) = verify(&f, &["--json", "--markdown", md.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let v = verdicts(&out);
    let get = |id: &str| v.iter().find(|(i, _)| i == id).unwrap().1.clone();
    assert_eq!(get("ratio-ok"), "reproduced");
    assert_eq!(get("abs-fast"), "reproduced", "50/100 claimed, 100/200 measured");
    assert_eq!(get("abs-slow"), "inconclusive", "other hardware and no reference");
    assert_eq!(get("noisy"), "inconclusive");
    assert_eq!(get("missing"), "not_measured");
    assert_eq!(get("soak"), "not_measured");
    assert_eq!(get("order"), "reproduced");
    assert_eq!(get("one-reading"), "inconclusive");
    assert_eq!(get("inconsistent"), "finding");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let noisy = json["results"].as_array().unwrap().iter().find(|r| r["id"] == "noisy").unwrap();
    assert_eq!(noisy["noisy"], true);
    assert_eq!(noisy["repeats"], 3);
    assert!(noisy["explanation"].as_str().unwrap().contains("widened"), "{noisy}");
    let one = json["results"].as_array().unwrap().iter().find(|r| r["id"] == "one-reading").unwrap();
    assert!(one["explanation"].as_str().unwrap().contains("one reading"), "{one}");
    assert_eq!(one["self_test"]["status"], "never_decides");
    let abs = json["results"].as_array().unwrap().iter().find(|r| r["id"] == "abs-fast").unwrap();
    assert!(abs["judged_as"].as_str().unwrap().contains("ratio to abs-slow (other hardware)"));
    assert!(abs["environment"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e.as_str().unwrap().starts_with("CPU: lab")));
    let report = std::fs::read_to_string(&md).unwrap();
    assert!(report.starts_with("# Claims audit: fixture"));
    assert!(report.contains("### soak") && report.contains("- **Why:** Not measured"));
    assert!(
        report.contains("## Summary")
            && report.contains("**Evidence:**")
            && report.contains("**Self-test:**")
    );
}

#[test]
fn a_contradiction_is_a_finding_and_exits_one_only_when_the_gate_says_so() {
    let claims = [
        claim("ratio-ok", RATIO_OK),
        claim(
            "wrong",
            "kind = \"ratio\"\nnumerator = { cell = \"slow/cold_start\", metric = \"cold_start\" }\ndenominator = { cell = \"fast/cold_start\", metric = \"cold_start\" }\nvalue = 5.0",
        ),
        claim(
            "reversed",
            "kind = \"ordering\"\nitems = [{ cell = \"slow/cold_start\", metric = \"cold_start\" }, { cell = \"fast/cold_start\", metric = \"cold_start\" }]",
        ),
    ]
    .concat();
    let f = fixture(&claims, &records());
    let (code, out, _) = verify(&f, &[]);
    assert_eq!(code, 0, "by default only a method defect fails: {out}");
    assert!(out.contains("contradicted") && out.contains("1 reproduced, 2 contradicted"), "{out}");
    assert!(out.contains("exit gate: --fail-on cannot-fail (0 caught) → exit 0"), "{out}");
    let (code, out, _) = verify(&f, &["--fail-on", "cannot-fail,contradicted"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("--fail-on cannot-fail (0 caught), contradicted (2 caught) → exit 1"), "{out}");
    let (code, _, _) = verify(&f, &["--fail-on", "inconclusive", "--fail-on", "cannot-fail"]);
    assert_eq!(code, 0);
    let (code, _, err) = verify(&f, &["--fail-on", "findings"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown gate `findings`"), "{err}");
}

#[test]
fn a_store_that_does_not_audit_clean_is_refused_unless_allowed_and_said() {
    let f = fixture(&claim("ratio-ok", RATIO_OK), &records());
    // One record edited and not hashed again: what `benchlab audit` calls DAMAGED.
    let path = f.run.join("records.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replacen("\"samples_ms\":[200.0", "\"samples_ms\":[20.0", 1);
    assert_ne!(text, edited, "the fixture has slow's first sample");
    std::fs::write(&path, edited).unwrap();
    let md = f.run.parent().unwrap().join("AUDIT.md");
    let (code, out, err) = verify(&f, &["--markdown", md.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
    assert!(
        err.contains("records.jsonl") && err.contains("line 2") && err.contains("--allow-damaged"),
        "{err}"
    );
    assert!(!md.exists(), "nothing judged, nothing written");
    let (code, _, err) = verify(&f, &["--allow-damaged", "--markdown", md.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let report = std::fs::read_to_string(&md).unwrap();
    let top: Vec<&str> = report.lines().take(3).collect();
    assert!(
        top[2].starts_with("> **DAMAGED STORE, judged anyway (--allow-damaged)") && top[2].contains("line 2"),
        "{top:?}"
    );
}

#[test]
fn runs_named_together_are_judged_together_and_those_that_disagree_named() {
    let steady = |c: f64| vec![c, c * 1.01, c * 0.99, c * 1.005, c * 0.995];
    // Three repeats each of fast and slow at these levels (ms), in run `run_id`.
    let run = |slow: f64, run_id: &str| -> Vec<Record> {
        let mut v = Vec::new();
        for i in 0..3u32 {
            let k = 1.0 + f64::from(i) * 0.01;
            v.push(cold("fast", &steady(100.0 * k), 40, Some((i, 3))));
            v.push(cold("slow", &steady(slow * k), 80, Some((i, 3))));
        }
        for r in &mut v {
            r.run_id = run_id.into();
        }
        v
    };
    // slow is twice as slow as fast in the first run, as fast in the second.
    let f = fixture(&claim("ratio-ok", RATIO_OK), &run(200.0, "20990101T000000Z-fixture-1"));
    let second = f.run.parent().unwrap().join("20990102T000000Z-fixture-2");
    store(&second, &run(100.0, "20990102T000000Z-fixture-2"));
    let (code, out, err) = verify(&f, &["--run", second.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["runs"].as_array().unwrap().len(), 2, "{json}");
    let r = &json["results"][0];
    assert_eq!((r["verdict"].as_str(), r["repeats"].as_u64()), (Some("inconclusive"), Some(6)), "{r}");
    let disagree: Vec<(&str, &str)> = r["disagreeing_runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["run_id"].as_str().unwrap(), d["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(
        disagree,
        [("20990101T000000Z-fixture-1", "reproduced"), ("20990102T000000Z-fixture-2", "contradicted")],
        "{r}"
    );
    assert!(r["margin"]["flips_at"].is_number(), "{r}");
    // Without --run: the newest run under results/ and the older one, whose cells ran the same
    // image on a host of the same CPU.
    let results = f.run.parent().unwrap().parent().unwrap();
    let out = Command::new(BIN)
        .arg("verify")
        .arg(&f.scenario)
        .args(["--results", results.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> =
        json["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["20990101T000000Z-fixture-1", "20990102T000000Z-fixture-2"], "{json}");
    assert_eq!(json["gate"], serde_json::json!(["cannot-fail"]));
}

#[test]
fn a_claim_that_cannot_fail_exits_one_and_is_named() {
    let claims = claim("lax", &format!("{RATIO_OK}\ntolerance = 9.0"));
    let f = fixture(&claims, &records());
    let (code, out, err) = verify(&f, &[]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("1 reproduced") && out.contains("cannot fail"), "{out}");
    assert!(err.contains("1 claim(s) cannot fail") && err.contains("lax"), "{err}");
}

#[test]
fn bad_claims_exit_two_with_a_location() {
    let f = fixture(&claim("typo", "kind = \"ratio\"\nnumerater = 1"), &records());
    let (code, _, err) = verify(&f, &[]);
    assert_eq!(code, 2);
    assert!(err.contains("fixture.toml:") && err.contains("unknown field `numerater`"), "{err}");
    let f = fixture(
        &claim(
            "cell",
            "kind = \"absolute\"\nmeasure = { cell = \"fsat/cold_start\", metric = \"cold_start\" }\nvalue = 1\nunit = \"ms\"",
        ),
        &records(),
    );
    let (code, _, err) = verify(&f, &[]);
    assert_eq!(code, 2);
    let line = SCENARIO_HEAD.lines().count() + 7;
    assert!(err.contains(&format!("fixture.toml:{line}:")) && err.contains("matches no cell"), "{err}");
}

#[test]
fn a_scenario_never_run_is_not_measured_and_exits_zero() {
    let f = fixture(&claim("ratio-ok", RATIO_OK), &[]);
    let out = Command::new(BIN)
        .current_dir(f.scenario.parent().unwrap())
        .args(["verify", "fixture.toml", "--results", "nowhere"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("not_measured") && text.contains("no run"), "{text}");
}

/// Each committed AUDIT.md is `benchlab verify scenarios/<scenario>.toml --markdown` of today's
/// build (a report written by an older build said what this one no longer says).
#[test]
fn committed_audits_are_what_verify_writes_now() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(root.join("results")).unwrap().flatten() {
        let committed = entry.path().join("AUDIT.md");
        if !committed.exists() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let fresh = tmp.path().join(format!("{name}.md"));
        let out = Command::new(BIN)
            .current_dir(root)
            .args(["verify", &format!("scenarios/{name}.toml"), "--markdown"])
            .arg(&fresh)
            .output()
            .unwrap();
        assert!(matches!(out.status.code(), Some(0 | 1)), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let (want, got) =
            (std::fs::read_to_string(&committed).unwrap(), std::fs::read_to_string(&fresh).unwrap());
        assert!(
            want == got,
            "results/{name}/AUDIT.md is stale: rewrite it with `benchlab verify scenarios/{name}.toml --markdown results/{name}/AUDIT.md`"
        );
        checked += 1;
    }
    assert!(checked >= 4, "only {checked} AUDIT.md files found");
}

/// A repository made here with one invented result file; its commit.
fn results_repo(dir: &Path) -> String {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .current_dir(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    std::fs::create_dir_all(dir.join("res/r1")).unwrap();
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(
        dir.join("res/r1/summary.json"),
        r#"{"config":{"vus":5},"servers":{"fast":{"http":{"total_requests":6300,"rps":50.0}}}}"#,
    )
    .unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "results"]);
    git(&["rev-parse", "HEAD"])
}

/// `verify` on claims that cite a result file read through `--source-mirror`, with no run: the
/// source's own figures are judged (an inconsistency exits 1 and AUDIT.md cites both numbers);
/// a missing file or pointer exits 2 at its place.
#[test]
fn claims_on_the_sources_result_files_are_judged_from_its_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    let commit = results_repo(&dir.path().join("repo"));
    let url = "https://example.invalid/lab/bench";
    let file = "res/r1/summary.json";
    let scenario = |results: &str, pointer: &str| {
        format!(
            r#"{SCENARIO_HEAD}
[source]
repository = {{ git = "{url}", commit = "{commit}" }}
results = ["{results}"]

[[claim]]
id = "duration"
source = {{ results = "{file}" }}
statement = "two minutes"
kind = "consistency"
check = "quotient"
figures = [
  {{ label = "requests", results = "{file}", path = "/servers/fast/http/total_requests" }},
  {{ label = "rps", results = "{file}", path = "{pointer}" }},
  {{ label = "stages", value = 120, from = "the load script" }},
]

[[claim]]
id = "vus"
source = {{ results = "{file}" }}
statement = "5 users"
kind = "consistency"
check = "equal"
figures = [{{ label = "config.vus", results = "{file}", path = "/config/vus" }}, {{ label = "script", value = 5, from = "the load script" }}]
"#
        )
    };
    let path = dir.path().join("fixture.toml");
    let md = dir.path().join("AUDIT.md");
    let mirror = format!("{url}={}", dir.path().join("repo").display());
    let verify = |text: &str| {
        std::fs::write(&path, text).unwrap();
        let out = Command::new(BIN)
            .arg("verify")
            .arg(&path)
            .args(["--results", dir.path().join("none").to_str().unwrap(), "--source-mirror", &mirror])
            .args(["--markdown", md.to_str().unwrap()])
            .env("TMPDIR", dir.path())
            .output()
            .unwrap();
        (out.status.code().unwrap(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = verify(&scenario(file, "/servers/fast/http/rps"));
    assert_eq!(code, 0, "6300 / 50 = 126 s is not 120 s, a finding, not a defect: {err}");
    let audit = std::fs::read_to_string(&md).unwrap();
    assert!(audit.contains("INCONSISTENT within 1%: requests / rps = 126 against stages 120"), "{audit}");
    assert!(
        audit.contains(&format!(
            "- **Published figure:** `/servers/fast/http/rps` at `{file}` = 50 in {url} at commit {commit}"
        )),
        "{audit}"
    );
    assert!(audit.contains("### vus") && audit.contains("**reproduced** (consistency (equal))"), "{audit}");
    // A pointer that resolves to nothing, and a file the commit lacks, stop at their place.
    let (code, err) = verify(&scenario(file, "/servers/slow/http/rps"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("fixture.toml:30:") && err.contains("resolves to nothing"), "{err}");
    let (code, err) = verify(&scenario("res/r2/summary.json", "/servers/fast/http/rps"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("fixture.toml:20:12") && err.contains("no \"res/r2/summary.json\""), "{err}");
}
