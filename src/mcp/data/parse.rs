//! Reading a data suite: the TOML as written (`RawSuite`, also a scenario's `[[suite]]`), the
//! files it names (JSON lines of arguments or calls, JSON Schemas; relative to the suite file,
//! each recorded with its sha256) and the checks that turn it into a `SuiteData`, every problem
//! at a file:line:column. Not the answers' checking (`data`), nor the generator (`gen`).

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use super::gen::Gen;
use super::{schema, Call, Calls, Check, ListRule, SuiteData, ToolData};

/// A data suite's problem, at a byte range of its text.
pub type DataError = (Range<usize>, String);

/// A tool as written: its arguments, one of `args` (a table), `args_list` (tables the calls
/// cycle through), `args_file` (a JSON-lines file of argument objects, cycled through),
/// `args_gen` (generators drawing from the suite's `seed`) or `calls_file` (a JSON-lines file of
/// `{"args": {...}, "check": ...}`, cycled through); and `check` (not with `calls_file`, whose
/// calls bring their own): `"not_error"` (the default), `"error"`, or a table (see `RawAt`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTool {
    pub name: Spanned<String>,
    pub args: Option<Spanned<toml::Table>>,
    pub args_list: Option<Spanned<Vec<toml::Table>>>,
    pub args_file: Option<Spanned<String>>,
    pub args_gen: Option<Spanned<BTreeMap<String, Gen>>>,
    pub calls_file: Option<Spanned<String>>,
    pub check: Option<Spanned<RawCheck>>,
}

/// A check as written (in TOML, or as JSON in a calls file's line): a word or a table.
#[derive(Debug, Clone, PartialEq)]
pub enum RawCheck {
    Word(String),
    At(RawAt),
}

impl<'de> Deserialize<'de> for RawCheck {
    // Not `untagged`: its one message ("did not match any variant") would hide which key of the
    // table is wrong.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match Value::deserialize(d)? {
            Value::String(w) => Ok(RawCheck::Word(w)),
            v @ Value::Object(_) => serde_json::from_value(v).map(RawCheck::At).map_err(D::Error::custom),
            other => Err(D::Error::custom(format!("check {other}: expected {CHECK_FORMS}"))),
        }
    }
}

/// A check at a JSON Pointer (`path`, the whole value when left out) with one of: `equals` (and
/// `volatile`, pointers whose keys must be present and are not compared), `regex`,
/// `present = true`, `schema` (a table of the JSON Schema subset) or `schema_file` (a JSON file
/// of one).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAt {
    #[serde(default)]
    pub path: String,
    pub equals: Option<Value>,
    pub volatile: Option<Vec<String>>,
    pub regex: Option<String>,
    pub present: Option<bool>,
    pub schema: Option<Value>,
    pub schema_file: Option<String>,
}

/// A gate call as written (`[[gate]]`): a tool of the suite, its arguments, its check.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGate {
    pub tool: Spanned<String>,
    pub args: Option<toml::Table>,
    pub check: Option<Spanned<RawCheck>>,
}

/// A suite as written: its name, the list rule, the seed of its generated arguments, its tools
/// and its gate.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSuite {
    pub name: Spanned<String>,
    pub list: Option<Spanned<ListRule>>,
    pub seed: Option<Spanned<u64>>,
    #[serde(rename = "tool", default)]
    pub tools: Vec<RawTool>,
    #[serde(default)]
    pub gate: Vec<RawGate>,
}

/// The files a suite reads, by the path as written; each read is recorded with its sha256.
struct Files<'a> {
    read: &'a dyn Fn(&str) -> Result<String, String>,
    seen: BTreeMap<String, String>,
}

impl Files<'_> {
    fn read(&mut self, rel: &str) -> Result<String, String> {
        let text = (self.read)(rel).map_err(|e| format!("cannot read {rel:?}: {e}"))?;
        self.seen.insert(rel.to_string(), crate::hash::sha256_hex(text.as_bytes()));
        Ok(text)
    }
}

fn json(v: toml::Value) -> Value {
    serde_json::to_value(v).expect("TOML values are JSON values")
}

const CHECK_FORMS: &str =
    "\"not_error\", \"error\", or a table with one of `equals`, `regex`, `present`, `schema`, `schema_file`";

/// A check, its files read; the error is for the check's position.
fn to_check(raw: RawCheck, files: &mut Files) -> Result<Check, String> {
    let at = match raw {
        RawCheck::Word(w) if w == "not_error" => return Ok(Check::NotError),
        RawCheck::Word(w) if w == "error" => return Ok(Check::Error),
        RawCheck::Word(w) => return Err(format!("check {w:?}: expected {CHECK_FORMS}")),
        RawCheck::At(at) => at,
    };
    let pointer = |p: &str| p.is_empty() || p.starts_with('/');
    if !pointer(&at.path) {
        return Err(format!("path {:?} is a JSON Pointer: \"\" or starting with '/'", at.path));
    }
    let path = at.path;
    if at.volatile.is_some() && at.equals.is_none() {
        return Err("`volatile` goes with `equals`".into());
    }
    match (at.equals, at.regex, at.present, at.schema, at.schema_file) {
        (Some(value), None, None, None, None) => {
            let volatile = at.volatile.unwrap_or_default();
            if let Some(v) = volatile.iter().find(|v| !v.starts_with('/')) {
                return Err(format!("volatile {v:?} is a JSON Pointer starting with '/'"));
            }
            Ok(Check::Equals { path, value, volatile })
        }
        (None, Some(r), None, None, None) => {
            regex::Regex::new(&r).map_err(|e| format!("regex {r:?}: {e}"))?;
            Ok(Check::Regex { path, pattern: r })
        }
        (None, None, Some(true), None, None) => Ok(Check::Present { path }),
        (None, None, Some(false), None, None) => {
            Err("`present = false` is not a check: leave the key out of `equals` instead".into())
        }
        (None, None, None, Some(s), None) => {
            schema::refuse_unsupported(&s)?;
            Ok(Check::Schema { path, schema: s })
        }
        (None, None, None, None, Some(file)) => {
            let text = files.read(&file)?;
            let s: Value = serde_json::from_str(&text)
                .map_err(|e| format!("{file}:{}:{}: {e}", e.line(), e.column()))?;
            schema::refuse_unsupported(&s).map_err(|e| format!("{file}: {e}"))?;
            Ok(Check::Schema { path, schema: s })
        }
        _ => Err(format!("a check has one of {CHECK_FORMS}")),
    }
}

fn spanned_check(c: Option<Spanned<RawCheck>>, files: &mut Files) -> Result<Check, DataError> {
    match c {
        None => Ok(Check::NotError),
        Some(c) => {
            let span = c.span();
            to_check(c.into_inner(), files).map_err(|m| (span, m))
        }
    }
}

/// The non-empty lines of a JSON-lines file, each parsed; errors at `file:line:column`.
fn json_lines<T: serde::de::DeserializeOwned>(rel: &str, text: &str) -> Result<Vec<(usize, T)>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v = serde_json::from_str(line).map_err(|e| format!("{rel}:{}:{}: {e}", n + 1, e.column()))?;
        out.push((n + 1, v));
    }
    match out.is_empty() {
        true => Err(format!("{rel} has no line: nothing to call")),
        false => Ok(out),
    }
}

/// A calls file's line.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLine {
    args: serde_json::Map<String, Value>,
    check: Option<RawCheck>,
}

impl RawTool {
    fn calls(self, seed: Option<u64>, files: &mut Files) -> Result<Calls, DataError> {
        let tname = self.name.get_ref().clone();
        let forms = [
            self.args.as_ref().map(|a| a.span()),
            self.args_list.as_ref().map(|a| a.span()),
            self.args_file.as_ref().map(|a| a.span()),
            self.args_gen.as_ref().map(|a| a.span()),
            self.calls_file.as_ref().map(|a| a.span()),
        ];
        if let Some(second) = forms.iter().flatten().nth(1) {
            return Err((
                second.clone(),
                format!("tool {tname:?}: one of `args`, `args_list`, `args_file`, `args_gen`, `calls_file`, not two"),
            ));
        }
        if let Some(f) = self.calls_file {
            if let Some(c) = self.check {
                return Err((c.span(), format!("tool {tname:?}: a `calls_file`'s lines bring their checks")));
            }
            let span = f.span();
            let rel = f.into_inner();
            let at = |m: String| (span.clone(), format!("calls_file {rel:?}: {m}"));
            let text = files.read(&rel).map_err(at)?;
            let mut calls = Vec::new();
            for (n, line) in json_lines::<RawLine>(&rel, &text).map_err(at)? {
                let check = match line.check {
                    None => Check::NotError,
                    Some(c) => to_check(c, files).map_err(|m| at(format!("{rel}:{n}: {m}")))?,
                };
                calls.push(Call { tool: String::new(), args: Value::Object(line.args), check });
            }
            return Ok(Calls::Paired(calls));
        }
        let check = spanned_check(self.check, files)?;
        if let Some(g) = self.args_gen {
            let span = g.span();
            if seed.is_none() {
                return Err((
                    span,
                    format!("tool {tname:?}: `args_gen` draws from the suite's `seed`, which is not set"),
                ));
            }
            let gens = g.into_inner();
            for (k, gen) in &gens {
                gen.validate().map_err(|m| (span.clone(), format!("args_gen {k:?}: {m}")))?;
            }
            return Ok(Calls::Generated { args: gens, check });
        }
        let args = match (self.args, self.args_list, self.args_file) {
            (Some(a), _, _) => vec![json(toml::Value::Table(a.into_inner()))],
            (_, Some(l), _) if l.get_ref().is_empty() => {
                return Err((l.span(), "`args_list` is empty".into()))
            }
            (_, Some(l), _) => l.into_inner().into_iter().map(|a| json(toml::Value::Table(a))).collect(),
            (_, _, Some(f)) => {
                let span = f.span();
                let rel = f.into_inner();
                let at = |m: String| (span.clone(), format!("args_file {rel:?}: {m}"));
                let text = files.read(&rel).map_err(at)?;
                json_lines::<serde_json::Map<String, Value>>(&rel, &text)
                    .map_err(at)?
                    .into_iter()
                    .map(|(_, a)| Value::Object(a))
                    .collect()
            }
            (None, None, None) => vec![Value::Object(Default::default())],
        };
        Ok(Calls::Cycle { args, check })
    }
}

fn no_files(rel: &str) -> Result<String, String> {
    Err(format!("{rel}: files are read beside a suite file, and this suite has none"))
}

impl RawSuite {
    /// The suite, checked: a name that is not a built-in suite's, at least one tool, each
    /// named once, with one form of arguments and a check that can be read. It names no file
    /// (it has no folder to read them from: see `check_in`).
    pub fn check(self, span: Range<usize>) -> Result<SuiteData, DataError> {
        self.refuse_builtin_name()?;
        self.build(span, &no_files)
    }

    /// As `check`, reading the files it names relative to `dir`.
    pub fn check_in(self, span: Range<usize>, dir: &Path) -> Result<SuiteData, DataError> {
        self.refuse_builtin_name()?;
        let read = |rel: &str| std::fs::read_to_string(dir.join(rel)).map_err(|e| e.to_string());
        self.build(span, &read)
    }

    fn refuse_builtin_name(&self) -> Result<(), DataError> {
        let name = self.name.get_ref();
        match crate::mcp::suite::Suite::builtin(name) {
            Some(_) => {
                Err((self.name.span(), format!("{name:?} is a built-in suite's name: give this one another")))
            }
            None => Ok(()),
        }
    }

    fn build(
        self,
        span: Range<usize>,
        read: &dyn Fn(&str) -> Result<String, String>,
    ) -> Result<SuiteData, DataError> {
        let name = self.name.get_ref().clone();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_".contains(c)) {
            return Err((
                self.name.span(),
                format!("suite name {name:?} must be letters, digits, '-' or '_'"),
            ));
        }
        if self.tools.is_empty() {
            return Err((span, format!("suite {name:?} has no [[suite.tool]]: nothing to call")));
        }
        let seed = self.seed.map(Spanned::into_inner);
        let mut files = Files { read, seen: BTreeMap::new() };
        let mut tools: Vec<ToolData> = Vec::new();
        for t in self.tools {
            let tname = t.name.get_ref().clone();
            if tools.iter().any(|o| o.name == tname) {
                return Err((t.name.span(), format!("tool {tname:?} is listed twice in suite {name:?}")));
            }
            let calls = t.calls(seed, &mut files)?;
            tools.push(ToolData { name: tname, calls });
        }
        let mut gate = Vec::new();
        for g in self.gate {
            let tool = g.tool.get_ref().clone();
            if !tools.iter().any(|t| t.name == tool) {
                return Err((g.tool.span(), format!("gate: suite {name:?} has no tool {tool:?}")));
            }
            let args = json(toml::Value::Table(g.args.unwrap_or_default()));
            let check = spanned_check(g.check, &mut files)?;
            gate.push(Call { tool, args, check });
        }
        Ok(SuiteData {
            name,
            list: self.list.map(|l| *l.get_ref()).unwrap_or_default(),
            seed,
            tools,
            gate,
            files: files.seen,
        })
    }
}

/// Turns a parse of `text` into `path:line:column: message`.
fn located<T>(path: &Path, text: &str, r: Result<T, DataError>) -> Result<T, String> {
    r.map_err(|(span, m)| {
        let (line, column) = crate::text::line_col(text, span.start);
        format!("{}:{line}:{column}: {m}", path.display())
    })
}

fn raw(text: &str) -> Result<RawSuite, DataError> {
    toml::from_str(text).map_err(|e| (e.span().unwrap_or(0..0), e.message().to_string()))
}

/// A suite file (a `[[suite]]` table's keys at its top level), the files it names read beside
/// it, with file:line:column errors.
pub fn parse_file(path: &Path, text: &str) -> Result<SuiteData, String> {
    let dir = path.parent().unwrap_or(Path::new(""));
    located(path, text, raw(text).and_then(|r| r.check_in(0..0, dir)))
}

/// A suite file the lab carries (a built-in suite's, which may have a built-in name), the files
/// it names read by `read`.
pub fn parse_embedded(
    path: &Path,
    text: &str,
    read: &dyn Fn(&str) -> Result<String, String>,
) -> Result<SuiteData, String> {
    located(path, text, raw(text).and_then(|r| r.build(0..0, read)))
}
