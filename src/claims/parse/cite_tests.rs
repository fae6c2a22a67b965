//! Tests of claims that cite the source's own result files: figures read by JSON Pointer from
//! invented result files, and every bad citation refused at the key that causes it.

use super::*;
use crate::source::results::{Published, ResultFile};

/// An invented result file with two servers' figures.
const SUMMARY: &str = r#"{
  "config": { "vus": 8, "duration": "2m" },
  "servers": {
    "slow": { "http": { "total_requests": 24000, "rps": 200.0 }, "mcp": { "total_mcp_requests": 16000, "error_rate": 0 },
              "tools": { "echo": { "avg": 12.5, "p95": 30.25 } } },
    "fast": { "http": { "total_requests": 48000, "rps": 400.0 }, "mcp": { "total_mcp_requests": 24000, "error_rate": 0.01 },
              "tools": { "echo": { "avg": 2.5, "p95": 6.0 } } }
  }
}"#;

fn published() -> Published {
    let content = SUMMARY.as_bytes().to_vec();
    Published {
        format_version: 1,
        git: "https://example.invalid/bench".into(),
        commit: "0123456789abcdef0123456789abcdef01234567".into(),
        files: vec![ResultFile {
            path: "results/r1/summary.json".into(),
            sha256: crate::hash::sha256_hex(&content),
            bytes: content.len() as u64,
            content,
        }],
    }
}

fn cells() -> Vec<String> {
    ["slow/load", "fast/load"].iter().map(|s| s.to_string()).collect()
}

const HEAD: &str = "name = \"x\"\n[[server]]\nid = \"slow\"\n";

fn parse(claims: &str) -> Result<Vec<Claim>, ClaimsError> {
    let p = published();
    parse_claims_citing(Path::new("x.toml"), &format!("{HEAD}{claims}"), &cells(), Some(&p))
}

fn err(claims: &str) -> String {
    parse(claims).unwrap_err().to_string()
}

const FILE: &str = r#"results = "results/r1/summary.json""#;

#[test]
fn a_figure_is_read_from_the_file_and_cited_with_its_commit_and_sha256() {
    let c = parse(&format!(
        r#"
[[claim]]
id = "rps"
source = {{ {FILE}, path = "/servers/slow/http/rps" }}
statement = "slow serves 200 req/s"
kind = "absolute"
measure = {{ cell = "slow/load", metric = "http_rps" }}
unit = "req/s"

[[claim]]
id = "p95"
source = {{ {FILE}, path = "/servers/fast/tools/echo/p95" }}
statement = "echo p95 6 ms"
kind = "absolute"
measure = {{ cell = "fast/load", metric = "latency", stat = "p95", step = "echo" }}
value = 6
unit = "ms"

[[claim]]
id = "errors"
source = {{ {FILE}, path = "/servers/slow/mcp/error_rate" }}
statement = "0 errors"
kind = "absolute"
measure = {{ cell = "slow/load", metric = "error_rate" }}
unit = "fraction"
tolerance = 0.5
"#
    ))
    .unwrap();
    match &c[0].body {
        Body::Absolute { value, points: false, .. } => assert_eq!(*value, 200.0),
        other => panic!("{other:?}"),
    }
    let cited = &c[0].source.cited[0];
    assert_eq!((cited.pointer.as_str(), cited.value), ("/servers/slow/http/rps", 200.0));
    assert_eq!(cited.sha256, crate::hash::sha256_hex(SUMMARY.as_bytes()));
    assert_eq!(cited.commit.len(), 40);
    assert_eq!(c[0].source.file, "results/r1/summary.json");
    match &c[1].body {
        Body::Absolute { measure, value, .. } => {
            assert_eq!((measure.step.as_deref(), *value), (Some("echo"), 6.0));
        }
        other => panic!("{other:?}"),
    }
    // A published 0 % error rate is a figure, judged in percentage points (0.5 pp → 0.005).
    match &c[2].body {
        Body::Absolute { value, tolerance, points: true, .. } => {
            assert_eq!((*value, *tolerance), (0.0, 0.005))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_ratio_and_an_ordering_take_their_figures_from_the_file() {
    let c = parse(&format!(
        r#"
[[claim]]
id = "r"
source = {{ {FILE}, paths = ["/servers/fast/http/rps", "/servers/slow/http/rps"] }}
statement = "fast serves twice as many"
kind = "ratio"
numerator = {{ cell = "fast/load", metric = "http_rps" }}
denominator = {{ cell = "slow/load", metric = "http_rps" }}

[[claim]]
id = "o"
source = {{ {FILE}, paths = ["/servers/fast/tools/echo/avg", "/servers/slow/tools/echo/avg"] }}
statement = "fast answers echo sooner"
kind = "ordering"
items = [{{ cell = "fast/load", metric = "latency", stat = "mean", step = "echo" }}, {{ cell = "slow/load", metric = "latency", stat = "mean", step = "echo" }}]
"#
    ))
    .unwrap();
    match &c[0].body {
        Body::Ratio { value, .. } => assert_eq!(*value, 2.0),
        other => panic!("{other:?}"),
    }
    assert_eq!(c[1].source.cited.len(), 2);
    // The same items the other way round: the file does not show that order.
    let e = err(&format!(
        r#"
[[claim]]
id = "o"
source = {{ {FILE}, paths = ["/servers/slow/tools/echo/avg", "/servers/fast/tools/echo/avg"] }}
statement = "slow answers echo sooner"
kind = "ordering"
items = [{{ cell = "slow/load", metric = "latency", stat = "mean", step = "echo" }}, {{ cell = "fast/load", metric = "latency", stat = "mean", step = "echo" }}]
"#
    ));
    assert!(e.starts_with("x.toml:7:") && e.contains("not in the order claimed"), "{e}");
}

#[test]
fn a_consistency_claim_relates_cited_and_literal_figures() {
    let c = parse(&format!(
        r#"
[[claim]]
id = "duration"
source = {{ {FILE} }}
statement = "the load ran 2 minutes"
kind = "consistency"
check = "quotient"
figures = [
  {{ label = "requests", {FILE}, path = "/servers/slow/http/total_requests" }},
  {{ label = "rps", {FILE}, path = "/servers/slow/http/rps" }},
  {{ label = "duration", value = 120, from = "the load script's stages" }},
]
"#
    ))
    .unwrap();
    match &c[0].body {
        Body::Consistency { figures, check: ConsistencyCheck::Quotient, tolerance } => {
            assert_eq!(figures.iter().map(|f| f.value).collect::<Vec<_>>(), [24000.0, 200.0, 120.0]);
            assert_eq!(*tolerance, 0.01);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c[0].source.cited.len(), 2);
    let e = err(&format!(
        r#"
[[claim]]
id = "vus"
source = {{ {FILE} }}
statement = "8 users"
kind = "consistency"
check = "equal"
figures = [{{ label = "vus", {FILE}, path = "/config/vus" }}, {{ label = "script", value = 8 }}]
"#
    ));
    assert!(e.starts_with("x.toml:11:") && e.contains("say where it comes from with `from`"), "{e}");
}

#[test]
fn bad_citations_are_refused_at_their_key() {
    let claim = |source: &str, extra: &str| {
        format!(
            "\n[[claim]]\nid = \"c\"\nsource = {source}\nstatement = \"s\"\nkind = \"absolute\"\nmeasure = {{ cell = \"slow/load\", metric = \"http_rps\" }}\nunit = \"req/s\"\n{extra}"
        )
    };
    for (source, extra, at, says) in [
        // A pointer that resolves to nothing, at `path`.
        (
            r#"{ results = "results/r1/summary.json", path = "/servers/rust/http/rps" }"#,
            "",
            "x.toml:7:",
            "resolves to nothing",
        ),
        // Not a number.
        (
            r#"{ results = "results/r1/summary.json", path = "/config/duration" }"#,
            "",
            "x.toml:7:",
            "not a number",
        ),
        // Not a pointer.
        (
            r#"{ results = "results/r1/summary.json", path = "servers" }"#,
            "",
            "x.toml:7:",
            "not a JSON Pointer",
        ),
        // A file the scenario does not list, at `results`.
        (
            r#"{ results = "results/r2/summary.json", path = "/config/vus" }"#,
            "",
            "x.toml:7:22",
            "not one of [source] results",
        ),
        // A value written beside the cited one that disagrees: both numbers named, at `value`.
        (
            r#"{ results = "results/r1/summary.json", path = "/servers/slow/http/rps" }"#,
            "value = 250",
            "x.toml:12:9",
            "`value` 250 disagrees with the 200",
        ),
        // A seed file and a result file at once.
        (
            r#"{ file = "f.txt", section = "s", results = "results/r1/summary.json", path = "/config/vus" }"#,
            "",
            "x.toml:7:",
            "not both",
        ),
    ] {
        let e = err(&claim(source, extra));
        assert!(e.starts_with(at) && e.contains(says), "{source} {extra}: {e}");
    }
    // Without the files read, a citing claim says what to give.
    let text =
        format!("{HEAD}{}", claim(r#"{ results = "results/r1/summary.json", path = "/config/vus" }"#, ""));
    let e = parse_claims(Path::new("x.toml"), &text, &cells()).unwrap_err().to_string();
    assert!(e.starts_with("x.toml:7:") && e.contains("no result files were read"), "{e}");
}

#[test]
fn claims_cite_the_files_a_run_folder_keeps() {
    let run = tempfile::tempdir().unwrap();
    crate::source::results::keep(run.path(), &published()).unwrap();
    let kept = crate::source::results::read_kept(run.path()).unwrap();
    let text = format!(
        "{HEAD}\n[[claim]]\nid = \"c\"\nsource = {{ {FILE}, path = \"/servers/fast/http/rps\" }}\nstatement = \"s\"\nkind = \"absolute\"\nmeasure = {{ cell = \"fast/load\", metric = \"http_rps\" }}\nunit = \"req/s\"\n"
    );
    let c = parse_claims_citing(Path::new("x.toml"), &text, &cells(), kept.as_ref()).unwrap();
    assert_eq!(c[0].source.cited[0].value, 400.0);
    assert_eq!(c[0].source.cited[0].sha256, crate::hash::sha256_hex(SUMMARY.as_bytes()));
}
