//! The built-in suites weekly, pulse, bench and tax as the lab carries them: the suite files of
//! images/suites/, embedded in the binary and read once by the data parser, so a built-in suite
//! is called and checked by the same code as any suite file. Not the shop (`mcp::shop`: its
//! calls and answers come from data seeded into its services), nor what a correct server
//! answers (`suite::Suite::evaluate`, the null server's).

use std::path::Path;
use std::sync::OnceLock;

use super::data::{parse_embedded, SuiteData};

#[cfg(test)]
mod reference;

macro_rules! embed {
    ($p:literal) => {
        ($p, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/images/suites/", $p)))
    };
}

/// Every file of images/suites/, by its path there.
pub const FILES: &[(&str, &str)] = &[
    embed!("weekly.toml"),
    embed!("weekly/add_numbers.jsonl"),
    embed!("weekly/echo.jsonl"),
    embed!("weekly/word_count.jsonl"),
    embed!("pulse.toml"),
    embed!("pulse/calculate_tax.jsonl"),
    embed!("pulse/checksum.jsonl"),
    embed!("tax.toml"),
    embed!("bench.toml"),
    embed!("bench/payload_echo.jsonl"),
];

/// The built-in suites written as files.
pub const NAMES: &[&str] = &["weekly", "pulse", "bench", "tax"];

/// Where the files are in the source tree (for messages).
pub const DIR: &str = "images/suites";

fn read(rel: &str) -> Result<String, String> {
    FILES
        .iter()
        .find(|(p, _)| *p == rel)
        .map(|(_, t)| t.to_string())
        .ok_or_else(|| format!("{DIR}/{rel} is not among the embedded suite files"))
}

/// A built-in suite read from its embedded file.
pub fn load(name: &str) -> Result<SuiteData, String> {
    let file = format!("{name}.toml");
    let text = read(&file)?;
    parse_embedded(&Path::new(DIR).join(&file), &text, &read)
}

/// A built-in suite, read on first use. Panics if its file does not read: the files are part of
/// the binary, and `every_builtin_file_reads` proves they do.
pub fn suite(name: &str) -> &'static SuiteData {
    static SUITES: OnceLock<Vec<SuiteData>> = OnceLock::new();
    let all = SUITES.get_or_init(|| {
        NAMES
            .iter()
            .map(|n| load(n).unwrap_or_else(|e| panic!("a built-in suite file does not read: {e}")))
            .collect()
    });
    all.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no built-in suite file is named {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::data::{Calls, Check};
    use crate::mcp::suite::{Expected, Suite, VOLATILE};
    use serde_json::{json, Value};

    /// How many calls a suite file holds of a tool whose Rust generator varied with `i`
    /// without end (word_count's period is 12: all of them).
    const CALLS: u64 = 1000;

    fn file_suites() -> [Suite; 4] {
        [Suite::Weekly, Suite::Pulse, Suite::Bench, Suite::Tax]
    }

    fn tools_of(s: Suite) -> &'static [&'static str] {
        match s {
            Suite::Weekly => &["add_numbers", "echo", "word_count"],
            Suite::Pulse => &["calculate_tax", "checksum"],
            Suite::Bench => reference::BENCH_TOOLS,
            Suite::Tax => &["calculate_tax"],
            Suite::Shop { .. } => &[],
        }
    }

    /// The check a suite file writes for a Rust expected value: `equals` on the whole value,
    /// its volatile keys (the VOLATILE marker) listed as `volatile` and left out of `equals`.
    fn check_json(expected: &Value) -> Value {
        fn strip(v: &Value, at: &str, out: &mut Vec<String>) -> Value {
            match v {
                Value::Object(o) => Value::Object(
                    o.iter()
                        .filter_map(|(k, x)| {
                            let here = format!("{at}/{k}");
                            match x.as_str() == Some(VOLATILE) {
                                true => {
                                    out.push(here);
                                    None
                                }
                                false => Some((k.clone(), strip(x, &here, out))),
                            }
                        })
                        .collect(),
                ),
                Value::Array(a) => Value::Array(
                    a.iter().enumerate().map(|(i, x)| strip(x, &format!("{at}/{i}"), out)).collect(),
                ),
                other => other.clone(),
            }
        }
        let mut volatile = Vec::new();
        let equals = strip(expected, "", &mut volatile);
        match volatile.is_empty() {
            true => json!({ "equals": equals }),
            false => json!({ "equals": equals, "volatile": volatile }),
        }
    }

    /// The calls files, as the Rust suites generate them: (path under images/suites, text).
    fn calls_files() -> Vec<(String, String)> {
        let lines = |s: Suite, tool: &str, n: u64| {
            (0..n)
                .map(|i| {
                    let (args, expected) = reference::call(s, tool, i).unwrap();
                    format!("{}\n", json!({"args": args, "check": check_json(&expected)}))
                })
                .collect::<String>()
        };
        vec![
            ("weekly/add_numbers.jsonl".into(), lines(Suite::Weekly, "add_numbers", CALLS)),
            ("weekly/echo.jsonl".into(), lines(Suite::Weekly, "echo", CALLS)),
            ("weekly/word_count.jsonl".into(), lines(Suite::Weekly, "word_count", 12)),
            ("pulse/calculate_tax.jsonl".into(), lines(Suite::Pulse, "calculate_tax", CALLS)),
            ("pulse/checksum.jsonl".into(), lines(Suite::Pulse, "checksum", CALLS)),
            ("bench/payload_echo.jsonl".into(), lines(Suite::Bench, "payload_echo", 1)),
        ]
    }

    #[test]
    fn every_builtin_file_reads_and_the_calls_files_are_the_generators() {
        for name in NAMES {
            let s = load(name).unwrap();
            assert_eq!(&s.name, name);
            assert!(std::ptr::eq(suite(name), suite(name)), "read once");
        }
        // After changing the generator: `BENCHLAB_WRITE_SUITES=1 cargo test --lib mcp::builtin`
        // writes the files (and the build that embeds them is then the next one).
        let write = std::env::var_os("BENCHLAB_WRITE_SUITES").is_some();
        for (rel, text) in calls_files() {
            if write {
                let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR).join(&rel);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, &text).unwrap();
                continue;
            }
            let file = read(&rel).unwrap();
            let differs = file.lines().zip(text.lines()).position(|(a, b)| a != b);
            assert!(
                file == text,
                "{rel} is not what the generator writes (first differing line: {differs:?}, {} lines for {}): regenerate with BENCHLAB_WRITE_SUITES=1",
                file.lines().count(),
                text.lines().count()
            );
        }
        // Each embedded file is the one in the tree, and each is used.
        let used: std::collections::BTreeSet<&String> =
            NAMES.iter().flat_map(|n| suite(n).files.keys()).collect();
        for (rel, text) in FILES {
            let on_disk =
                std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR).join(rel)).unwrap();
            assert_eq!(&on_disk, text);
            assert!(rel.ends_with(".toml") || used.contains(&rel.to_string()), "{rel} is read by no suite");
        }
    }

    /// Answers around a correct one: itself, and each way of being wrong by one leaf, one key
    /// missing or one key too many, or another type.
    fn candidates(correct: &Value) -> Vec<Value> {
        fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
            match v {
                Value::Object(o) => o.iter().for_each(|(k, x)| leaves(x, format!("{at}/{k}"), out)),
                Value::Array(a) => {
                    a.iter().enumerate().for_each(|(i, x)| leaves(x, format!("{at}/{i}"), out))
                }
                _ => out.push(at),
            }
        }
        let mut ptrs = Vec::new();
        leaves(correct, String::new(), &mut ptrs);
        let mut out = vec![correct.clone(), json!(correct.to_string()), Value::Null];
        for p in &ptrs {
            let mut c = correct.clone();
            let leaf = c.pointer_mut(p).unwrap();
            *leaf = match leaf {
                Value::Number(n) => json!(n.as_f64().unwrap() + 1.0),
                Value::String(s) => json!(format!("{s}x")),
                Value::Bool(b) => json!(!*b),
                _ => json!(0),
            };
            out.push(c);
            if let Some((parent, key)) = p.rsplit_once('/') {
                let mut c = correct.clone();
                if let Some(Value::Object(o)) = c.pointer_mut(parent) {
                    o.remove(key);
                    out.push(c.clone());
                    if let Some(Value::Object(o)) = c.pointer_mut(parent) {
                        o.insert(key.into(), json!(1));
                        o.insert("extra".into(), json!(1));
                    }
                    out.push(c);
                }
            }
        }
        out
    }

    /// A Rust expected value made a correct answer: its volatile values filled in.
    fn filled(v: &Value) -> Value {
        match v {
            Value::String(s) if s == VOLATILE => json!(12345),
            Value::Object(o) => Value::Object(o.iter().map(|(k, x)| (k.clone(), filled(x))).collect()),
            Value::Array(a) => Value::Array(a.iter().map(filled).collect()),
            other => other.clone(),
        }
    }

    /// Whether the file's expectation judges every candidate answer as the Rust one did.
    fn same_judgement(s: Suite, tool: &str, args: &Value, rust: &Expected, file: &Expected) {
        let mut answers = match rust {
            Expected::Value(v) => candidates(&filled(v)),
            _ => vec![json!(1), json!({"error": "x"})],
        };
        if let Ok(v) = s.evaluate(tool, args) {
            answers.extend(candidates(&v));
        }
        for a in answers {
            assert_eq!(
                rust.verdict(&a).is_ok(),
                file.verdict(&a).is_ok(),
                "{} {tool} {args}: {a} judged otherwise ({file:?})",
                s.name()
            );
        }
    }

    #[test]
    fn the_files_judge_every_answer_as_the_rust_suites_did() {
        for s in file_suites() {
            assert_eq!(s.tools(), tools_of(s), "{}", s.name());
            let (rust, file) = (reference::gate(s), s.gate());
            assert_eq!(rust.len(), file.len(), "{}", s.name());
            for ((rt, ra, re), (ft, fa, fe)) in rust.iter().zip(&file) {
                assert_eq!((*rt, ra), (ft.as_str(), fa));
                same_judgement(s, rt, ra, re, fe);
                assert_eq!(re == &Expected::Error, fe == &Expected::Error);
            }
            for tool in s.tools() {
                let n = match &s.data().unwrap().tool(tool).unwrap().calls {
                    Calls::Cycle { args, .. } => args.len() as u64,
                    Calls::Paired(calls) => calls.len() as u64,
                    Calls::Generated { .. } => {
                        panic!("{} {tool}: the Rust suites generated no arguments", s.name())
                    }
                };
                for i in (0..n).chain([n, n + 1, 10 * n + 3]) {
                    let (fa, fe) = s.call(tool, i).unwrap();
                    // Past the file's calls they cycle: call i is call i % n.
                    let (ra, rv) = reference::call(s, tool, i % n).unwrap();
                    assert_eq!(fa, ra, "{} {tool} {i}", s.name());
                    same_judgement(s, tool, &ra, &Expected::Value(rv), &fe);
                }
            }
        }
    }

    #[test]
    fn the_bench_file_writes_the_timings_as_volatile() {
        let bench = suite("bench");
        let (_, check) = bench.call("fibonacci", 0).unwrap();
        assert_eq!(
            check,
            &Check::Equals {
                path: String::new(),
                value: json!({"n": 25, "result": 75025}),
                volatile: vec!["/compute_time_ns".into()]
            }
        );
        assert_eq!(bench.files.len(), 1, "{:?}", bench.files);
        assert!(
            crate::mcp::suite::AnySuite::Builtin(Suite::Weekly).list_rule()
                == crate::mcp::data::ListRule::Exact
        );
    }
}
