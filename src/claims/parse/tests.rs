//! Tests of the claims parser: every kind parsed, errors at the key that causes them.

use super::*;

fn cells() -> Vec<String> {
    ["a/cold_start", "b/cold_start", "a/serial_calls", "g1/api-echo-w10", "g2/api-echo-w10"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn parse(s: &str) -> Result<Vec<Claim>, ClaimsError> {
    parse_claims(Path::new("x.toml"), s, &cells())
}

const HEAD: &str = "name = \"x\"\n[[server]]\nid = \"a\"\n";

#[test]
fn parses_every_kind() {
    let text = format!(
        "{HEAD}{}",
        r#"
[[claim]]
id = "abs"
source = { file = "000.txt", section = "Round 1", row = "p50", hardware = { cpu_model = "EPYC", cpus = 8 } }
statement = "0.82 ms"
kind = "absolute"
measure = { cell = "a/serial_calls", metric = "calls" }
value = 0.82
unit = "ms"
relative_to = "abs2"

[[claim]]
id = "abs2"
source = { file = "000.txt", section = "Round 1" }
statement = "38 MB"
kind = "absolute"
measure = { cell = "a/serial_calls", metric = "calls", stat = "p99" }
value = 1.42
unit = "ms"
tolerance = 0.3

[[claim]]
id = "mem"
source = { file = "000.txt", section = "Round 4" }
statement = "38 MB"
kind = "absolute"
measure = { cell = "a/cold_start", metric = "rss_after_initialize" }
value = 38
unit = "MB"

[[claim]]
id = "r"
source = { file = "001.txt", section = "What we found" }
statement = "643 vs 461"
kind = "ratio"
numerator = { cell = "a/cold_start", metric = "cold_start", stat = "rest_p50" }
denominator = { cell = "b/cold_start", metric = "cold_start", stat = "rest_p50" }
value = 1.42

[[claim]]
id = "o"
source = { file = "000.txt", section = "Round 4" }
statement = "a < b"
kind = "ordering"
items = [{ cell = "a/cold_start", metric = "cold_start" }, { cell = "b/cold_start", metric = "cold_start" }]

[[claim]]
id = "agg"
source = { file = "003.txt", section = "Throughput" }
statement = "gradio 48"
kind = "absolute"
measure = { cell = "g*/api-echo-w10", metric = "throughput", aggregate = "mean" }
value = 48.22
unit = "req/s"

[[claim]]
id = "soak"
source = { file = "000.txt", section = "Round 4" }
statement = "zero leaks over 24 h"
kind = "soak_slope"
measure = { cell = "a/cold_start", metric = "rss_slope" }
value = 0
unit = "MiB/h"
duration = "24h"

[[claim]]
id = "out"
source = { file = "001.txt", section = "What we found" }
statement = "fails"
kind = "outcome"
cell = "b/cold_start"
expect = "failure"
reason = "crash"

[[claim]]
id = "f"
source = { file = "000.txt", section = "Round 3" }
statement = "18 lines vs 24 lines"
kind = "finding"
figures = [{ label = "table", value = 18 }, { label = "text", value = 24 }]
check = "differ"
explanation = "the table and its own text disagree"
"#
    );
    let claims = parse(&text).unwrap();
    assert_eq!(claims.len(), 9);
    assert_eq!(claims[0].source.hardware, Some(("EPYC".into(), 8)));
    assert_eq!(claims[0].line, 5);
    let kinds: Vec<&str> = claims.iter().map(|c| c.kind().as_str()).collect();
    assert_eq!(
        kinds,
        [
            "absolute",
            "absolute",
            "absolute",
            "ratio",
            "ordering",
            "absolute",
            "soak_slope",
            "outcome",
            "finding"
        ]
    );
    match &claims[0].body {
        Body::Absolute { measure, value, tolerance, .. } => {
            assert_eq!((measure.stat.as_str(), *value, *tolerance), ("p50", 0.82, DEFAULT_TOLERANCE));
        }
        b => panic!("{b:?}"),
    }
    match &claims[2].body {
        Body::Absolute { value, .. } => assert_eq!(*value, 38e6),
        b => panic!("{b:?}"),
    }
}

fn err(s: &str) -> String {
    parse(&format!("{HEAD}{s}")).unwrap_err().to_string()
}

const BASE: &str = "[[claim]]\nid = \"c\"\nsource = { file = \"f\", section = \"s\" }\nstatement = \"x\"\n";

#[test]
fn errors_point_at_the_key() {
    let e = err(&format!("{BASE}kind = \"absolute\"\nmesure = 1\n"));
    assert!(e.starts_with("x.toml:9:1:") && e.contains("unknown field `mesure`"), "{e}");
    let e = err(&format!(
        "{BASE}kind = \"absolute\"\nmeasure = {{ cell = \"zz/cold_start\", metric = \"cold_start\" }}\nvalue = 1\nunit = \"ms\"\n"
    ));
    assert!(e.starts_with("x.toml:9:") && e.contains("matches no cell"), "{e}");
    let e = err(&format!(
        "{BASE}kind = \"absolute\"\nmeasure = {{ cell = \"a/cold_start\", metric = \"cold_start\", stat = \"p42\" }}\nvalue = 1\nunit = \"ms\"\n"
    ));
    assert!(e.contains("has no stat \"p42\""), "{e}");
    let e = err(&format!(
        "{BASE}kind = \"absolute\"\nmeasure = {{ cell = \"a/cold_start\", metric = \"cold_start\" }}\nvalue = 1\nunit = \"MB\"\n"
    ));
    assert!(e.starts_with("x.toml:11:8:") && e.contains("does not fit"), "{e}");
    let e = err(&format!("{BASE}kind = \"ratio\"\nitems = []\n"));
    assert!(e.contains("`items` does not belong in a ratio claim"), "{e}");
    let e = err(&format!(
        "{BASE}kind = \"absolute\"\nmeasure = {{ cell = \"g*/api-echo-w10\", metric = \"throughput\" }}\nvalue = 1\nunit = \"req/s\"\n"
    ));
    assert!(e.contains("aggregate"), "{e}");
    let e = err(&format!(
        "{BASE}kind = \"finding\"\nfigures = [{{ label = \"a\", value = 6 }}, {{ label = \"b\", value = 6 }}]\ncheck = \"differ\"\nexplanation = \"e\"\n"
    ));
    assert!(e.contains("do not show the finding"), "{e}");
    let e = err(&format!(
        "{BASE}kind = \"absolute\"\nmeasure = {{ cell = \"a/cold_start\", metric = \"cold_start\" }}\nvalue = 1\nunit = \"ms\"\nrelative_to = \"nope\"\n"
    ));
    assert!(e.contains("names no claim"), "{e}");
    let e = err(&format!("{BASE}kind = \"outcome\"\ncell = \"a/cold_start\"\nexpect = \"maybe\"\n"));
    assert!(e.contains("`expect` is"), "{e}");
    let twice = format!("{BASE}kind = \"outcome\"\ncell = \"a/cold_start\"\nexpect = \"success\"\n");
    let e = err(&format!("{twice}{twice}"));
    assert!(e.contains("used twice"), "{e}");
}
