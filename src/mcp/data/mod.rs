//! A suite written as data (a suite file, `[[suite]]` in a scenario, and the built-in suites'
//! files under images/suites/): the tools a server must list, the calls on each (literal
//! arguments, a list or a JSON-lines file they cycle through, calls paired with their own checks,
//! or arguments generated from the suite's seed) and how each answer is checked. This file holds
//! the types and the pure parts (checking an answer, the i-th call, the suite's hash); `parse`
//! reads the TOML, `gen` generates arguments, `schema` is the JSON Schema subset.

pub mod gen;
mod parse;
pub mod schema;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use parse::{parse_embedded, parse_file, DataError, RawCheck, RawGate, RawSuite, RawTool};

/// A suite as data. It travels to the driver inside the cell's spec, so it is plain serde; every
/// file it was read from is already inside it (its lines, its schema) and named with its sha256.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteData {
    pub name: String,
    /// `exact` (the default): tools/list lists these tools and no other; `includes`: at least
    /// these.
    #[serde(default)]
    pub list: ListRule,
    /// The seed of generated arguments (`args_gen`): the same seed gives the same calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    pub tools: Vec<ToolData>,
    /// The correctness gate as written (`[[gate]]`); when empty, every tool once with its first
    /// call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gate: Vec<Call>,
    /// The sha256 of every file the suite read (`args_file`, `calls_file`, `schema_file`), by
    /// the path as written in the suite.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
}

/// How a suite checks tools/list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListRule {
    #[default]
    Exact,
    Includes,
}

/// One tool of a data suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolData {
    pub name: String,
    pub calls: Calls,
}

/// The calls on one tool; call `i` takes entry `i % len` of a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Calls {
    /// Arguments the calls cycle through (`args`, `args_list`, `args_file`), one check for all.
    Cycle { args: Vec<Value>, check: Check },
    /// Calls with their own checks (`calls_file`), cycled through.
    Paired(Vec<Call>),
    /// Arguments generated from the suite's seed (`args_gen`), one check for all.
    Generated { args: BTreeMap<String, gen::Gen>, check: Check },
}

/// One call: a tool (in a gate; empty in a tool's `Paired` list), its arguments and its check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tool: String,
    pub args: Value,
    pub check: Check,
}

/// How one answer is checked. The value checked is the tool's value as the lab reads every
/// SDK's answer (`mcp::tool_value`: structured content, else the first text content parsed as
/// JSON, else the text). Every path is a JSON Pointer, `""` for the whole value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    /// Any answer that is not an error.
    NotError,
    /// An error (an `isError` result or a JSON-RPC error, as SDKs differ).
    Error,
    /// The value at `path` equals `value` (numbers by value: `55` equals `55.0`; objects have
    /// the same keys), except at the `volatile` pointers (relative to `path`: timings, times),
    /// where a value must be present and is not compared (and is not in `value`).
    Equals {
        path: String,
        value: Value,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        volatile: Vec<String>,
    },
    /// The value at `path` matches the regular expression (a string as it is; anything else as
    /// its JSON text).
    Regex { path: String, pattern: String },
    /// Something is at `path`, whatever it is.
    Present { path: String },
    /// The value at `path` is valid under a JSON Schema of the `schema` module's subset.
    Schema { path: String, schema: Value },
}

impl Check {
    /// Whether a tool's value passes; the error says what was found.
    pub fn verdict(&self, value: &Value) -> Result<(), String> {
        let at = |path: &str| {
            value.pointer(path).ok_or_else(|| format!("no {path:?} in the answer {}", clip(value)))
        };
        match self {
            Check::NotError => Ok(()),
            Check::Error => Err(format!("expected an error, got the value {}", clip(value))),
            Check::Equals { path, value: want, volatile } => {
                let got = at(path)?;
                volatile_present(got, volatile)?;
                let matched = equal_but_volatile(want, got, "", volatile);
                match matched {
                    true => Ok(()),
                    // The whole value (`""`) needs no place: "expected 42, got 43".
                    false if path.is_empty() => Err(format!("expected {}, got {}", clip(want), clip(got))),
                    false => Err(format!("expected {} at {path:?}, got {}", clip(want), clip(got))),
                }
            }
            Check::Regex { path, pattern } => {
                let got = at(path)?;
                let text = got.as_str().map_or_else(|| got.to_string(), String::from);
                let re = regex::Regex::new(pattern).map_err(|e| format!("regex {pattern:?}: {e}"))?;
                match re.is_match(&text) {
                    true => Ok(()),
                    false => Err(format!("{path:?} is {}, which does not match {pattern:?}", clip(got))),
                }
            }
            Check::Present { path } => at(path).map(|_| ()),
            Check::Schema { path, schema: s } => {
                schema::validate(s, at(path)?).map_err(|e| format!("{path:?} fails its schema: {e}"))
            }
        }
    }
}

/// Whether `got` has each `volatile` pointer as an object member; the error names the first
/// missing.
fn volatile_present(got: &Value, volatile: &[String]) -> Result<(), String> {
    for p in volatile {
        let (parent, key) = p.rsplit_once('/').unwrap_or(("", p));
        let key = key.replace("~1", "/").replace("~0", "~");
        // Volatile keys name object members (answers' timings); an array keeps its items.
        if !got.pointer(parent).and_then(Value::as_object).is_some_and(|o| o.contains_key(&key)) {
            return Err(format!("no volatile {p:?} in the answer {}", clip(got)));
        }
    }
    Ok(())
}

/// Whether `got` (at pointer `at`) equals `want` but for the members at the `volatile` pointers,
/// which `got` has (`volatile_present`) and `want` leaves out. Compares in place, without a
/// copy of the answer: the driver checks every answer of a load.
fn equal_but_volatile(want: &Value, got: &Value, at: &str, volatile: &[String]) -> bool {
    let below = |p: &&String| p.len() > at.len() && p.starts_with(at) && p.as_bytes()[at.len()] == b'/';
    if !volatile.iter().any(|p| below(&p)) {
        return super::values_match(want, got);
    }
    let (Value::Object(w), Value::Object(g)) = (want, got) else { return false };
    let member = |k: &str| format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
    let here: Vec<&String> =
        volatile.iter().filter(below).filter(|p| !p[at.len() + 1..].contains('/')).collect();
    if w.keys().any(|k| here.contains(&&member(k))) {
        return false; // a volatile member is not compared, so `want` cannot hold one
    }
    g.len() == w.len() + here.len()
        && w.iter().all(|(k, x)| g.get(k).is_some_and(|y| equal_but_volatile(x, y, &member(k), volatile)))
}

/// A value for a message: its JSON text, cut at 200 characters.
fn clip(v: &Value) -> String {
    let t = v.to_string();
    match t.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &t[..at]),
        None => t,
    }
}

impl SuiteData {
    pub fn tool(&self, name: &str) -> Option<&ToolData> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The i-th call on `tool`: its arguments and its check.
    pub fn call(&self, tool: &str, i: u64) -> Option<(Value, &Check)> {
        let t = self.tool(tool)?;
        Some(match &t.calls {
            Calls::Cycle { args, check } => (args[(i % args.len() as u64) as usize].clone(), check),
            Calls::Paired(calls) => {
                let c = &calls[(i % calls.len() as u64) as usize];
                (c.args.clone(), &c.check)
            }
            Calls::Generated { args, check } => {
                (gen::arguments(args, self.seed.unwrap_or(0), tool, i), check)
            }
        })
    }

    /// The correctness gate: `[[gate]]` as written, else every tool once with its first call.
    pub fn gate(&self) -> Vec<(String, Value, Check)> {
        match self.gate.is_empty() {
            false => self.gate.iter().map(|c| (c.tool.clone(), c.args.clone(), c.check.clone())).collect(),
            true => self
                .tools
                .iter()
                .map(|t| {
                    let (args, check) = self.call(&t.name, 0).expect("a listed tool has calls");
                    (t.name.clone(), args, check.clone())
                })
                .collect(),
        }
    }

    /// What identifies the suite's content: the sha256 of its canonical JSON, which holds its
    /// seed, generators, every call and check, and the sha256 of each file it read.
    pub fn sha256(&self) -> String {
        crate::hash::canonical_hash(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    const FILE: &str = r#"name = "armantik"
list = "includes"

[[tool]]
name = "calculate_fibonacci"
args = { n = 10 }
check = { path = "/result", equals = 55 }

[[tool]]
name = "process_json_data"
args_list = [{ data = { name = "benchmark" } }, { data = { name = "x" } }]
check = { path = "/transformed_data/name", regex = "^[A-Z]+$" }

[[tool]]
name = "fetch_external_data"
args = { endpoint = "http://mock-api:1080/api" }
"#;

    fn args(s: &SuiteData, tool: &str) -> Vec<Value> {
        match &s.tool(tool).unwrap().calls {
            Calls::Cycle { args, .. } => args.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_suite_file_reads_with_its_arguments_and_checks() {
        let s = parse_file(Path::new("s.toml"), FILE).unwrap();
        assert_eq!(s.list, ListRule::Includes);
        assert_eq!(args(&s, "calculate_fibonacci"), vec![json!({"n": 10})]);
        assert_eq!(args(&s, "process_json_data").len(), 2);
        assert_eq!(s.call("fetch_external_data", 0).unwrap().1, &Check::NotError);
        let fib = s.call("calculate_fibonacci", 0).unwrap().1;
        assert_eq!(fib.verdict(&json!({"result": 55.0, "n": 10})), Ok(()));
        assert!(fib
            .verdict(&json!({"result": 54}))
            .unwrap_err()
            .contains("expected 55 at \"/result\", got 54"));
        assert!(fib.verdict(&json!(55)).unwrap_err().contains("no \"/result\""));
        let up = s.call("process_json_data", 0).unwrap().1;
        assert_eq!(up.verdict(&json!({"transformed_data": {"name": "BENCHMARK"}})), Ok(()));
        assert!(up.verdict(&json!({"transformed_data": {"name": "Benchmark"}})).is_err());
        assert!(Check::Error.verdict(&json!(1)).is_err());
        let whole = Check::Regex { path: String::new(), pattern: "^\\{".into() };
        assert_eq!(whole.verdict(&json!({"a": 1})), Ok(()), "a non-string is matched as its JSON text");
        assert!(s.files.is_empty() && s.seed.is_none());
    }

    #[test]
    fn a_data_suite_gates_each_tool_once_and_its_calls_cycle_through_the_arguments() {
        use crate::mcp::suite::{AnySuite, Expected};
        let mut data = parse_file(Path::new("s.toml"), FILE).unwrap();
        data.tools[2].calls = Calls::Cycle { args: vec![json!({})], check: Check::Error };
        let s = AnySuite::Data(std::sync::Arc::new(data));
        assert_eq!(s.tools(), ["calculate_fibonacci", "process_json_data", "fetch_external_data"]);
        let gate = s.gate();
        assert_eq!(gate.len(), 3);
        assert_eq!(gate[1].1, json!({"data": {"name": "benchmark"}}), "the first arguments");
        assert_eq!(gate[2].2, Expected::Error);
        let args = |i| s.call("process_json_data", i).unwrap().0;
        assert_eq!((args(0), args(1), args(2)), (args(2), json!({"data": {"name": "x"}}), args(0)));
        assert!(s.call("nope", 0).is_none());
        assert!(!s.needs_services());
    }

    #[test]
    fn present_and_volatile_keys_are_required_and_not_compared() {
        let present = Check::Present { path: "/t".into() };
        assert_eq!(present.verdict(&json!({"t": null})), Ok(()));
        assert!(present.verdict(&json!({"u": 1})).unwrap_err().contains("no \"/t\""));
        let eq = Check::Equals {
            path: String::new(),
            value: json!({"n": 25, "stats": {"k": 1}}),
            volatile: vec!["/t".into(), "/stats/ns".into()],
        };
        assert_eq!(eq.verdict(&json!({"n": 25, "t": 9, "stats": {"k": 1.0, "ns": "x"}})), Ok(()));
        assert!(eq
            .verdict(&json!({"n": 25, "stats": {"k": 1, "ns": 1}}))
            .unwrap_err()
            .contains("no volatile \"/t\""));
        assert!(eq
            .verdict(&json!({"n": 25, "t": 1, "stats": {"k": 1}}))
            .unwrap_err()
            .contains("\"/stats/ns\""));
        assert!(eq.verdict(&json!({"n": 26, "t": 9, "stats": {"k": 1, "ns": 1}})).is_err());
        assert!(
            eq.verdict(&json!({"n": 25, "t": 9, "x": 0, "stats": {"k": 1, "ns": 1}})).is_err(),
            "an extra key"
        );
        let escaped =
            Check::Equals { path: "/r".into(), value: json!({"n": 1}), volatile: vec!["/a~1b".into()] };
        assert_eq!(escaped.verdict(&json!({"r": {"n": 1, "a/b": 2}})), Ok(()));
        assert!(escaped.verdict(&json!({"r": {"n": 1, "a": 2}})).unwrap_err().contains("no volatile"));
        let holds =
            Check::Equals { path: String::new(), value: json!({"t": 1}), volatile: vec!["/t".into()] };
        assert!(holds.verdict(&json!({"t": 1})).is_err(), "a volatile key is left out of `equals`");
    }

    /// A folder of its own under the system's temporary one, removed on drop.
    struct Dir(std::path::PathBuf);
    impl Dir {
        fn new(tag: &str) -> Dir {
            let d = std::env::temp_dir().join(format!("benchlab-suite-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Dir(d)
        }
        fn write(&self, name: &str, text: &str) -> std::path::PathBuf {
            let p = self.0.join(name);
            std::fs::write(&p, text).unwrap();
            p
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn args_files_are_read_beside_the_suite_and_their_sha256_is_in_its_hash() {
        let d = Dir::new("args");
        let suite = "name = \"f\"\n[[tool]]\nname = \"t\"\nargs_file = \"calls.jsonl\"\ncheck = { path = \"/r\", present = true }\n";
        let path = d.write("s.toml", suite);
        d.write("calls.jsonl", "{\"n\": 1}\n\n{\"n\": 2}\n");
        let a = parse_file(&path, suite).unwrap();
        assert_eq!(args(&a, "t"), vec![json!({"n": 1}), json!({"n": 2})]);
        assert_eq!(a.call("t", 3).unwrap().0, json!({"n": 2}));
        assert_eq!(a.files["calls.jsonl"], crate::hash::sha256_hex(b"{\"n\": 1}\n\n{\"n\": 2}\n"));
        // Another line, or the same calls spelled otherwise: another file hash, another suite hash.
        d.write("calls.jsonl", "{\"n\": 1}\n{\"n\": 3}\n");
        let b = parse_file(&path, suite).unwrap();
        assert_ne!(a.sha256(), b.sha256());
        d.write("calls.jsonl", "{\"n\":1}\n{\"n\":2}\n");
        let c = parse_file(&path, suite).unwrap();
        assert_eq!(args(&a, "t"), args(&c, "t"));
        assert_ne!(a.sha256(), c.sha256(), "the file's bytes are recorded, not only its calls");
        assert_eq!(a.sha256(), a.clone().sha256());
        d.write("calls.jsonl", "{\"n\": 1}\n[1]\n");
        let e = parse_file(&path, suite).unwrap_err();
        assert!(
            e.starts_with(&format!("{}:4:13: args_file \"calls.jsonl\": calls.jsonl:2:", path.display())),
            "{e}"
        );
        std::fs::remove_file(d.0.join("calls.jsonl")).unwrap();
        assert!(parse_file(&path, suite).unwrap_err().contains("cannot read \"calls.jsonl\""));
        // A suite without a folder (a scenario's, checked with `check`) cannot name files.
        let raw: RawSuite = toml::from_str(suite).unwrap();
        assert!(raw.check(0..0).unwrap_err().1.contains("files are read beside a suite file"));
    }

    #[test]
    fn calls_files_pair_arguments_with_checks_and_schema_files_are_read() {
        let d = Dir::new("calls");
        let suite = "name = \"f\"\n[[tool]]\nname = \"t\"\ncalls_file = \"t.jsonl\"\n[[tool]]\nname = \"u\"\ncheck = { path = \"/a\", schema_file = \"a.schema.json\" }\n";
        let path = d.write("s.toml", suite);
        d.write("t.jsonl", "{\"args\": {\"a\": 1}, \"check\": {\"equals\": 2}}\n{\"args\": {\"a\": 2}, \"check\": \"error\"}\n");
        d.write("a.schema.json", "{\"type\": \"integer\", \"maximum\": 3}");
        let s = parse_file(&path, suite).unwrap();
        assert_eq!(
            s.call("t", 0),
            Some((
                json!({"a": 1}),
                &Check::Equals { path: String::new(), value: json!(2), volatile: vec![] }
            ))
        );
        assert_eq!(s.call("t", 3).unwrap().1, &Check::Error);
        let u = s.call("u", 0).unwrap().1;
        assert_eq!(u.verdict(&json!({"a": 3})), Ok(()));
        assert!(u
            .verdict(&json!({"a": 4}))
            .unwrap_err()
            .contains("\"/a\" fails its schema: 4 is above the maximum 3"));
        assert_eq!(s.files.keys().collect::<Vec<_>>(), ["a.schema.json", "t.jsonl"]);
        let before = s.sha256();
        d.write("a.schema.json", "{\"type\": \"integer\", \"maximum\": 4}");
        assert_ne!(parse_file(&path, suite).unwrap().sha256(), before);
        d.write("a.schema.json", "{\"type\": \"integer\", \"format\": \"int32\"}");
        let e = parse_file(&path, suite).unwrap_err();
        assert!(
            e.starts_with(&format!(
                "{}:7:9: a.schema.json: schema /format: keyword `format` is not understood",
                path.display()
            )),
            "{e}"
        );
        d.write("t.jsonl", "{\"args\": {}, \"check\": \"ok\"}\n");
        let e = parse_file(&path, suite).unwrap_err();
        assert!(e.contains("4:14: calls_file \"t.jsonl\": t.jsonl:1: check \"ok\""), "{e}");
    }

    #[test]
    fn generated_arguments_are_recorded_with_their_seed() {
        let text = |seed: u64, hi: i64| {
            format!("name = \"g\"\nseed = {seed}\n[[tool]]\nname = \"t\"\nargs_gen = {{ n = {{ int = [1, {hi}] }}, text = {{ choice = [\"a\", \"b\"] }}, s = {{ string = 16 }} }}\ncheck = {{ schema = {{ type = \"object\", required = [\"result\"], properties = {{ result = {{ type = \"integer\" }} }} }} }}\n")
        };
        let a = parse_file(Path::new("g.toml"), &text(7, 30)).unwrap();
        assert_eq!(a.seed, Some(7));
        let calls: Vec<Value> = (0..20).map(|i| a.call("t", i).unwrap().0).collect();
        assert_eq!(calls, (0..20).map(|i| a.call("t", i).unwrap().0).collect::<Vec<_>>());
        assert!(calls.iter().all(|c| c["s"].as_str().unwrap().len() == 16));
        let b = parse_file(Path::new("g.toml"), &text(8, 30)).unwrap();
        assert_ne!(calls[0..5], (0..5).map(|i| b.call("t", i).unwrap().0).collect::<Vec<_>>());
        assert_ne!(a.sha256(), b.sha256(), "the seed is in the hash");
        assert_ne!(
            a.sha256(),
            parse_file(Path::new("g.toml"), &text(7, 31)).unwrap().sha256(),
            "so is a generator"
        );
        // What a driver gets is the serialised suite: it generates the same calls.
        let moved: SuiteData = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(moved.call("t", 11).unwrap().0, calls[11]);
        let check = a.call("t", 0).unwrap().1;
        assert_eq!(check.verdict(&json!({"result": 3})), Ok(()));
        assert!(check.verdict(&json!({"result": "3"})).is_err());
    }

    #[test]
    fn bad_suites_are_refused_at_their_key() {
        let gen = "[[tool]]\nname = \"a\"\nargs_gen = { n = { int = [2, 1] } }\n";
        for (text, at, says) in [
            ("name = \"weekly\"\n[[tool]]\nname = \"a\"\n", "s.toml:1:8", "built-in suite's name"),
            ("name = \"x\"\n", "s.toml:1:1", "no [[suite.tool]]"),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\n[[tool]]\nname = \"a\"\n", "s.toml:5:8", "listed twice"),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = \"ok\"\n", "s.toml:4:9", "expected \"not_error\""),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = { path = \"r\", equals = 1 }\n", "s.toml:4:9", "JSON Pointer"),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = { path = \"/r\", regex = \"(\" }\n", "s.toml:4:9", "regex \"(\""),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = { path = \"/r\" }\n", "s.toml:4:9", "a check has one of"),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = { present = true, regex = \"a\" }\n", "s.toml:4:9", "a check has one of"),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = { path = \"/r\", present = false }\n", "s.toml:4:9", "`present = false`"),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = { regex = \"a\", volatile = [\"/t\"] }\n", "s.toml:4:9", "`volatile` goes with `equals`"),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = { equals = 1, volatile = [\"t\"] }\n", "s.toml:4:9", "volatile \"t\""),
            (
                "name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = { schema = { type = \"object\", anyOf = [] } }\n",
                "s.toml:4:9",
                "schema /anyOf: keyword `anyOf` is not understood; a schema check understands type, properties, required, items, enum, const, minimum, maximum, minLength, maxLength, pattern, additionalProperties",
            ),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\nargs = {}\nargs_list = [{}]\n", "s.toml:5:13", "not two"),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\nargs_file = \"a\"\nargs_gen = {}\n", "s.toml:5:12", "not two"),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\nargz = {}\n", "s.toml:4:1", "unknown field `argz`"),
            (
                "name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = { path = \"/a\", equal = 1 }\n",
                "s.toml:4:9",
                "unknown field `equal`, expected one of `path`, `equals`",
            ),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = 3\n", "s.toml:4:9", "check 3: expected \"not_error\""),
            (&format!("name = \"x\"\n{gen}"), "s.toml:4:12", "the suite's `seed`, which is not set"),
            (&format!("name = \"x\"\nseed = 1\n{gen}"), "s.toml:5:12", "args_gen \"n\": int = [2, 1]"),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\n[[gate]]\ntool = \"b\"\n", "s.toml:5:8", "has no tool \"b\""),
            ("name = \"x\"\nseed = -1\n[[tool]]\nname = \"a\"\n", "s.toml:2:8", ""),
        ] {
            let e = parse_file(Path::new("s.toml"), text).unwrap_err();
            assert!(e.starts_with(at) && e.contains(says), "{text}: {e}");
        }
    }
}
