//! A suite written as data (`[[suite]]` in a scenario, or a suite file): the tools a server must
//! list, each tool's arguments (literal, or a list the calls cycle through) and how each answer
//! is checked (not an error; equality or a regex at a JSON Pointer into the tool's value; an
//! error expected). Parsed from TOML with file:line:column errors; checked answers are pure.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toml::Spanned;

/// A suite as data. It travels to the driver inside the cell's spec, so it is plain serde.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteData {
    pub name: String,
    /// `exact` (the default): tools/list lists these tools and no other; `includes`: at least
    /// these.
    #[serde(default)]
    pub list: ListRule,
    pub tools: Vec<ToolData>,
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
    /// The arguments of its calls: call `i` takes `args[i % len]` (one entry: every call the same).
    pub args: Vec<Value>,
    pub check: Check,
}

/// How one answer is checked. The value checked is the tool's value as the lab reads every
/// SDK's answer (`mcp::tool_value`: structured content, else the first text content parsed as
/// JSON, else the text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    /// Any answer that is not an error.
    NotError,
    /// An error (an `isError` result or a JSON-RPC error, as SDKs differ).
    Error,
    /// The value at `path` (a JSON Pointer, `""` for the whole value) equals `value` (numbers by
    /// value: `55` equals `55.0`).
    Equals { path: String, value: Value },
    /// The value at `path` matches the regular expression (a string as it is; anything else as
    /// its JSON text).
    Regex { path: String, pattern: String },
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
            Check::Equals { path, value: want } => {
                let got = at(path)?;
                match super::values_match(want, got) {
                    true => Ok(()),
                    false => Err(format!("expected {want} at {path:?}, got {}", clip(got))),
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
        }
    }
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
}

/// A data suite's problem, at a byte range of its text.
pub type DataError = (Range<usize>, String);

/// A tool as written: `args` (a table) or `args_list` (tables the calls cycle through), and
/// `check`: `"not_error"` (the default), `"error"`, or `{ path, equals }` / `{ path, regex }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTool {
    pub name: Spanned<String>,
    pub args: Option<Spanned<toml::Table>>,
    pub args_list: Option<Spanned<Vec<toml::Table>>>,
    pub check: Option<Spanned<RawCheck>>,
}

/// A check as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum RawCheck {
    Word(String),
    At(RawAt),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAt {
    pub path: String,
    pub equals: Option<toml::Value>,
    pub regex: Option<String>,
}

/// A suite as written: its name, the list rule, its tools.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSuite {
    pub name: Spanned<String>,
    pub list: Option<Spanned<ListRule>>,
    #[serde(rename = "tool", default)]
    pub tools: Vec<RawTool>,
}

fn json(v: toml::Value) -> Value {
    serde_json::to_value(v).expect("TOML values are JSON values")
}

impl RawSuite {
    /// The suite, checked: a name, at least one tool, each named once, with one form of
    /// arguments and a check that can be read.
    pub fn check(self, span: Range<usize>) -> Result<SuiteData, DataError> {
        let name = self.name.get_ref().clone();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_".contains(c)) {
            return Err((
                self.name.span(),
                format!("suite name {name:?} must be letters, digits, '-' or '_'"),
            ));
        }
        if super::suite::Suite::builtin(&name).is_some() {
            return Err((
                self.name.span(),
                format!("{name:?} is a built-in suite's name: give this one another"),
            ));
        }
        if self.tools.is_empty() {
            return Err((span, format!("suite {name:?} has no [[suite.tool]]: nothing to call")));
        }
        let mut tools: Vec<ToolData> = Vec::new();
        for t in self.tools {
            let tname = t.name.get_ref().clone();
            if tools.iter().any(|o| o.name == tname) {
                return Err((t.name.span(), format!("tool {tname:?} is listed twice in suite {name:?}")));
            }
            let args = match (t.args, t.args_list) {
                (Some(a), None) => vec![json(toml::Value::Table(a.into_inner()))],
                (None, Some(l)) if !l.get_ref().is_empty() => {
                    l.into_inner().into_iter().map(|a| json(toml::Value::Table(a))).collect()
                }
                (None, Some(l)) => return Err((l.span(), "`args_list` is empty".into())),
                (None, None) => vec![Value::Object(Default::default())],
                (Some(a), Some(_)) => {
                    return Err((a.span(), format!("tool {tname:?}: `args` or `args_list`, not both")))
                }
            };
            let check = match t.check {
                None => Check::NotError,
                Some(c) => {
                    let span = c.span();
                    match c.into_inner() {
                        RawCheck::Word(w) if w == "not_error" => Check::NotError,
                        RawCheck::Word(w) if w == "error" => Check::Error,
                        RawCheck::Word(w) => {
                            return Err((span, format!("check {w:?}: expected \"not_error\", \"error\", {{ path, equals }} or {{ path, regex }}")))
                        }
                        RawCheck::At(at) => {
                            if !(at.path.is_empty() || at.path.starts_with('/')) {
                                return Err((span, format!("path {:?} is a JSON Pointer: \"\" or starting with '/'", at.path)));
                            }
                            match (at.equals, at.regex) {
                                (Some(v), None) => Check::Equals { path: at.path, value: json(v) },
                                (None, Some(r)) => {
                                    regex::Regex::new(&r).map_err(|e| (span.clone(), format!("regex {r:?}: {e}")))?;
                                    Check::Regex { path: at.path, pattern: r }
                                }
                                _ => return Err((span, "a check at a path has `equals` or `regex`, one of them".into())),
                            }
                        }
                    }
                }
            };
            tools.push(ToolData { name: tname, args, check });
        }
        Ok(SuiteData { name, list: self.list.map(|l| *l.get_ref()).unwrap_or_default(), tools })
    }
}

/// A suite file (a `[[suite]]` table's keys at its top level), with file:line:column errors.
pub fn parse_file(path: &std::path::Path, text: &str) -> Result<SuiteData, String> {
    let at = |offset: usize, m: &str| {
        let (line, column) = crate::text::line_col(text, offset);
        format!("{}:{line}:{column}: {m}", path.display())
    };
    let raw: RawSuite = toml::from_str(text).map_err(|e| at(e.span().map_or(0, |s| s.start), e.message()))?;
    raw.check(0..0).map_err(|(span, m)| at(span.start, &m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    #[test]
    fn a_suite_file_reads_with_its_arguments_and_checks() {
        let s = parse_file(std::path::Path::new("s.toml"), FILE).unwrap();
        assert_eq!(s.list, ListRule::Includes);
        assert_eq!(s.tools[0].args, vec![json!({"n": 10})]);
        assert_eq!(s.tools[1].args.len(), 2);
        assert_eq!(s.tools[2].check, Check::NotError);
        let fib = &s.tools[0].check;
        assert_eq!(fib.verdict(&json!({"result": 55.0, "n": 10})), Ok(()));
        assert!(fib
            .verdict(&json!({"result": 54}))
            .unwrap_err()
            .contains("expected 55 at \"/result\", got 54"));
        assert!(fib.verdict(&json!(55)).unwrap_err().contains("no \"/result\""));
        let up = &s.tools[1].check;
        assert_eq!(up.verdict(&json!({"transformed_data": {"name": "BENCHMARK"}})), Ok(()));
        assert!(up.verdict(&json!({"transformed_data": {"name": "Benchmark"}})).is_err());
        assert!(Check::Error.verdict(&json!(1)).is_err());
        let whole = Check::Regex { path: String::new(), pattern: "^\\{".into() };
        assert_eq!(whole.verdict(&json!({"a": 1})), Ok(()), "a non-string is matched as its JSON text");
    }

    #[test]
    fn a_data_suite_gates_each_tool_once_and_its_calls_cycle_through_the_arguments() {
        use crate::mcp::suite::{AnySuite, Expected};
        let mut data = parse_file(std::path::Path::new("s.toml"), FILE).unwrap();
        data.tools[2].check = Check::Error;
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
    fn bad_suites_are_refused_at_their_key() {
        for (text, at, says) in [
            ("name = \"weekly\"\n[[tool]]\nname = \"a\"\n", "s.toml:1:8", "built-in suite's name"),
            ("name = \"x\"\n", "s.toml:1:1", "no [[suite.tool]]"),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\n[[tool]]\nname = \"a\"\n", "s.toml:5:8", "listed twice"),
            (
                "name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = \"ok\"\n",
                "s.toml:4:9",
                "expected \"not_error\"",
            ),
            (
                "name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = { path = \"r\", equals = 1 }\n",
                "s.toml:4:9",
                "JSON Pointer",
            ),
            (
                "name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = { path = \"/r\", regex = \"(\" }\n",
                "s.toml:4:9",
                "regex \"(\"",
            ),
            (
                "name = \"x\"\n[[tool]]\nname = \"a\"\ncheck = { path = \"/r\" }\n",
                "s.toml:4:9",
                "`equals` or `regex`",
            ),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\nargs = {}\nargs_list = [{}]\n", "s.toml:4:8", "not both"),
            ("name = \"x\"\n[[tool]]\nname = \"a\"\nargz = {}\n", "s.toml:4:1", "unknown field `argz`"),
        ] {
            let e = parse_file(std::path::Path::new("s.toml"), text).unwrap_err();
            assert!(e.starts_with(at) && e.contains(says), "{text}: {e}");
        }
    }
}
