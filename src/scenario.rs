//! Scenario files (`scenarios/*.toml`): the schema, parsing with file:line:column errors, unknown
//! keys refused, validation, and expansion into cells (servers × workloads). It reads the file and
//! nothing else: recipes are resolved by the orchestrator, before anything is built.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::driver::Timeouts;
use crate::mcp::suite::Suite;

/// What a cell does to the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Workload {
    /// `spawns` fresh server processes, each timed from the spawn request to the initialize
    /// result, then the first tools/list.
    ColdStart { spawns: u32 },
    /// One session: `warmup` unrecorded calls, then `calls` sequential tools/call of `tool`, each
    /// answer checked.
    SerialCalls { tool: String, warmup: u32, calls: u32 },
}

impl Workload {
    pub fn kind(&self) -> &'static str {
        match self {
            Workload::ColdStart { .. } => "cold_start",
            Workload::SerialCalls { .. } => "serial_calls",
        }
    }
}

/// How server and driver share the host's CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum PlacementMode {
    /// Disjoint CPU sets: the server on one, the driver on another (the default).
    #[default]
    Split,
    /// Server and driver on the same CPU set.
    Shared,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementSpec {
    #[serde(default)]
    pub mode: PlacementMode,
    /// Explicit cpusets (`"1"`, `"2-3"`); chosen from the host's CPUs when absent.
    pub server_cpus: Option<String>,
    pub driver_cpus: Option<String>,
    /// The server container's memory limit: bytes, or a string such as `"1GiB"`, `"512MiB"`.
    #[serde(default = "default_memory")]
    pub memory: Memory,
}

impl Default for PlacementSpec {
    fn default() -> Self {
        PlacementSpec {
            mode: PlacementMode::Split,
            server_cpus: None,
            driver_cpus: None,
            memory: default_memory(),
        }
    }
}

fn default_memory() -> Memory {
    Memory(1 << 30)
}

/// A memory size in bytes, written as an integer or with a binary unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory(pub u64);

impl<'de> Deserialize<'de> for Memory {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bytes(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bytes(b) => Ok(Memory(b)),
            Raw::Text(s) => parse_memory(&s).map(Memory).map_err(serde::de::Error::custom),
        }
    }
}

/// Parses `"512MiB"`, `"1GiB"`, `"64KiB"` or a plain number of bytes.
pub fn parse_memory(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("memory {s:?}: expected a number with KiB, MiB or GiB"))?;
    let mult = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => return Err(format!("memory {s:?}: unknown unit {other:?} (use KiB, MiB or GiB)")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("memory {s:?} is too large"))
}

/// One server under test.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerEntry {
    /// The scenario's name for the server, unique within it.
    pub id: Spanned<String>,
    /// A recipe family in `images/` (`python-mcp`, ...), or `benchlab-null` for the floor.
    pub family: Spanned<String>,
    /// The SDK version; required for recipe families.
    pub version: Option<Spanned<String>>,
    /// The runtime (`cpython-bookworm`, ...); the recipe's default when absent.
    pub runtime: Option<Spanned<String>>,
    /// Overrides the scenario's suite for this server.
    pub suite: Option<String>,
    /// Runs the server source of another API generation than the version's own; only with
    /// `expect = "failure"` (to show that it fails, as a published claim may say).
    pub api: Option<Spanned<String>>,
    /// Extra environment for the server process (recorded in the cell).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `success` (the default) or `failure`: a cell expected to fail is a result when it fails.
    #[serde(default)]
    pub expect: Expect,
    /// The runtime version the source being reproduced used (e.g. "3.12.3"); when the cell runs
    /// another, the record's environment lists the deviation.
    pub source_runtime: Option<String>,
}

/// What a cell is expected to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    #[default]
    Success,
    Failure,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default = "default_suite")]
    suite: Spanned<String>,
    #[serde(default)]
    placement: PlacementSpec,
    #[serde(default)]
    timeouts: TimeoutsSpec,
    #[serde(rename = "server", default)]
    servers: Vec<ServerEntry>,
    #[serde(rename = "workload", default)]
    workloads: Vec<Spanned<RawWorkload>>,
}

/// A workload as written: flat, so that an unknown or misplaced key is reported at the key itself
/// (serde's tagged enums can only point at the whole table).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    kind: Spanned<String>,
    /// Names the workload in cell ids (`<server>/<name>`); needed when a kind appears twice.
    name: Option<Spanned<String>>,
    spawns: Option<Spanned<u32>>,
    tool: Option<Spanned<String>>,
    warmup: Option<Spanned<u32>>,
    calls: Option<Spanned<u32>>,
}

impl RawWorkload {
    /// The typed workload, or the span and message of what is wrong.
    fn typed(&self) -> Result<Workload, (std::ops::Range<usize>, String)> {
        let stray = |name: &str, span: Option<std::ops::Range<usize>>| match span {
            Some(sp) => Err((sp, format!("`{name}` does not belong to a {} workload", self.kind.get_ref()))),
            None => Ok(()),
        };
        let need = |name: &str, v: &Option<Spanned<u32>>| {
            v.as_ref().map(|x| *x.get_ref()).ok_or_else(|| {
                (self.kind.span(), format!("a {} workload needs `{name}`", self.kind.get_ref()))
            })
        };
        match self.kind.get_ref().as_str() {
            "cold_start" => {
                stray("tool", self.tool.as_ref().map(|t| t.span()))?;
                stray("warmup", self.warmup.as_ref().map(|t| t.span()))?;
                stray("calls", self.calls.as_ref().map(|t| t.span()))?;
                Ok(Workload::ColdStart { spawns: need("spawns", &self.spawns)? })
            }
            "serial_calls" => {
                stray("spawns", self.spawns.as_ref().map(|t| t.span()))?;
                let tool = self
                    .tool
                    .as_ref()
                    .ok_or_else(|| (self.kind.span(), "a serial_calls workload needs `tool`".to_string()))?;
                Ok(Workload::SerialCalls {
                    tool: tool.get_ref().clone(),
                    warmup: self.warmup.as_ref().map_or(0, |w| *w.get_ref()),
                    calls: need("calls", &self.calls)?,
                })
            }
            other => Err((
                self.kind.span(),
                format!("unknown workload kind {other:?} (known: cold_start, serial_calls)"),
            )),
        }
    }
}

fn default_suite() -> Spanned<String> {
    Spanned::new(0..0, "weekly".to_string())
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TimeoutsSpec {
    startup_ms: Option<u64>,
    call_ms: Option<u64>,
    stop_grace_ms: Option<u64>,
    term_ms: Option<u64>,
}

/// A parsed, validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub path: PathBuf,
    pub source: String,
    pub name: String,
    pub description: String,
    pub suite: String,
    pub placement: PlacementSpec,
    pub timeouts: Timeouts,
    pub servers: Vec<ServerEntry>,
    pub workloads: Vec<Workload>,
    /// The name of each workload in cell ids (its kind unless the scenario names it).
    pub workload_names: Vec<String>,
}

/// A scenario problem, located in its file.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}:{column}: {message}")]
    At { path: PathBuf, line: usize, column: usize, message: String },
    #[error("{path}: {message}")]
    Whole { path: PathBuf, message: String },
}

/// 1-based line and column of a byte offset.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(before.chars().count(), |nl| before[nl + 1..].chars().count()) + 1;
    (line, column)
}

/// One cell of the plan before recipes are resolved.
#[derive(Debug, Clone)]
pub struct CellSpec {
    pub server: ServerEntry,
    pub suite: String,
    pub workload: Workload,
    /// The workload's name in the cell id.
    pub name: String,
}

impl CellSpec {
    pub fn id(&self) -> String {
        format!("{}/{}", self.server.id.get_ref(), self.name)
    }
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let source = std::fs::read_to_string(path)
            .map_err(|source| ScenarioError::Read { path: path.into(), source })?;
        Scenario::parse(path, source)
    }

    pub fn parse(path: &Path, source: String) -> Result<Scenario, ScenarioError> {
        let raw: RawScenario = toml::from_str(&source).map_err(|e| match e.span() {
            Some(span) => {
                let (line, column) = line_col(&source, span.start);
                ScenarioError::At { path: path.into(), line, column, message: e.message().to_string() }
            }
            None => ScenarioError::Whole { path: path.into(), message: e.message().to_string() },
        })?;
        let s = Scenario {
            path: path.into(),
            name: raw.name,
            description: raw.description,
            suite: raw.suite.get_ref().clone(),
            placement: raw.placement,
            timeouts: {
                let d = Timeouts::default();
                Timeouts {
                    startup_ms: raw.timeouts.startup_ms.unwrap_or(d.startup_ms),
                    call_ms: raw.timeouts.call_ms.unwrap_or(d.call_ms),
                    stop_grace_ms: raw.timeouts.stop_grace_ms.unwrap_or(d.stop_grace_ms),
                    term_ms: raw.timeouts.term_ms.unwrap_or(d.term_ms),
                }
            },
            servers: raw.servers,
            workloads: Vec::new(),
            workload_names: Vec::new(),
            source,
        };
        let mut s = s;
        let at = |span: std::ops::Range<usize>, message: String, s: &Scenario| {
            let (line, column) = line_col(&s.source, span.start);
            ScenarioError::At { path: path.into(), line, column, message }
        };
        if Suite::from_name(&s.suite).is_none() {
            let names: Vec<_> = Suite::ALL.iter().map(|x| x.name()).collect();
            return Err(at(
                raw.suite.span(),
                format!("unknown suite {:?} (known: {})", s.suite, names.join(", ")),
                &s,
            ));
        }
        if s.servers.is_empty() {
            return Err(ScenarioError::Whole {
                path: path.into(),
                message: "no [[server]] entries: nothing to measure".into(),
            });
        }
        if raw.workloads.is_empty() {
            return Err(ScenarioError::Whole {
                path: path.into(),
                message: "no [[workload]] entries: nothing to run".into(),
            });
        }
        for (i, srv) in s.servers.iter().enumerate() {
            let id = srv.id.get_ref();
            if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
                return Err(at(
                    srv.id.span(),
                    format!("server id {id:?} must be non-empty letters, digits, '-', '_' or '.'"),
                    &s,
                ));
            }
            if s.servers[..i].iter().any(|o| o.id.get_ref() == id) {
                return Err(at(srv.id.span(), format!("server id {id:?} is used twice"), &s));
            }
            if let Some(suite) = &srv.suite {
                if Suite::from_name(suite).is_none() {
                    return Err(at(srv.id.span(), format!("server {id:?}: unknown suite {suite:?}"), &s));
                }
            }
        }
        for raw_w in &raw.workloads {
            let suite = Suite::from_name(&s.suite).expect("checked above");
            let w = Spanned::new(raw_w.span(), raw_w.get_ref().typed().map_err(|(span, m)| at(span, m, &s))?);
            match w.get_ref() {
                Workload::ColdStart { spawns } if *spawns == 0 => {
                    return Err(at(w.span(), "cold_start needs spawns >= 1".into(), &s))
                }
                Workload::SerialCalls { calls, .. } if *calls == 0 => {
                    return Err(at(w.span(), "serial_calls needs calls >= 1".into(), &s))
                }
                Workload::SerialCalls { tool, .. } if suite.call(tool, 0).is_none() => {
                    return Err(at(
                        w.span(),
                        format!(
                            "serial_calls: suite {} has no tool {tool:?} (it has {})",
                            suite.name(),
                            suite.tools().join(", ")
                        ),
                        &s,
                    ))
                }
                _ => {}
            }
            if s.workloads.contains(w.get_ref()) {
                return Err(at(w.span(), "this workload is listed twice".into(), &s));
            }
            let name = match &raw_w.get_ref().name {
                Some(n) => {
                    let v = n.get_ref();
                    if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
                        return Err(at(
                            n.span(),
                            format!("workload name {v:?} must be letters, digits, '-', '_' or '.'"),
                            &s,
                        ));
                    }
                    v.clone()
                }
                None => w.get_ref().kind().to_string(),
            };
            if s.workload_names.contains(&name) {
                return Err(at(
                    w.span(),
                    format!("a second workload named {name:?}: give each workload of the same kind its own `name`"),
                    &s,
                ));
            }
            s.workloads.push(w.get_ref().clone());
            s.workload_names.push(name);
        }
        Ok(s)
    }

    /// Locates a span of this scenario's file, for errors found after parsing (unknown recipe,
    /// impossible version).
    pub fn error_at(&self, span: std::ops::Range<usize>, message: impl Into<String>) -> ScenarioError {
        let (line, column) = line_col(&self.source, span.start);
        ScenarioError::At { path: self.path.clone(), line, column, message: message.into() }
    }

    /// Expands the scenario into cells, server by server, workload by workload.
    pub fn cells(&self) -> Vec<CellSpec> {
        let mut out = Vec::new();
        for server in &self.servers {
            for (workload, name) in self.workloads.iter().zip(&self.workload_names) {
                out.push(CellSpec {
                    server: server.clone(),
                    suite: server.suite.clone().unwrap_or_else(|| self.suite.clone()),
                    workload: workload.clone(),
                    name: name.clone(),
                });
            }
        }
        out
    }

    pub fn sha256(&self) -> String {
        crate::record::sha256_hex(self.source.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
suite = "weekly"
[placement]
mode = "split"
memory = "512MiB"

[[server]]
id = "null"
family = "benchlab-null"

[[server]]
id = "mcp"
family = "python-mcp"
version = "2.3.0"

[[workload]]
kind = "cold_start"
spawns = 3

[[workload]]
kind = "serial_calls"
tool = "add_numbers"
warmup = 10
calls = 100
"#;

    fn parse(s: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(Path::new("scenarios/t.toml"), s.to_string())
    }

    #[test]
    fn expands_servers_times_workloads() {
        let s = parse(GOOD).unwrap();
        assert_eq!(s.placement.memory, Memory(512 << 20));
        let ids: Vec<_> = s.cells().iter().map(CellSpec::id).collect();
        assert_eq!(ids, ["null/cold_start", "null/serial_calls", "mcp/cold_start", "mcp/serial_calls"]);
    }

    #[test]
    fn unknown_keys_are_refused_with_line_and_column() {
        let bad = GOOD.replace("spawns = 3", "spawns = 3\nspwans = 4");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.starts_with("scenarios/t.toml:20:1: "), "{e}");
        assert!(e.contains("spwans"), "{e}");
        let bad = GOOD.replace("spawns = 3", "spawns = 3\ncalls = 4");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.starts_with("scenarios/t.toml:20:9: ") && e.contains("does not belong"), "{e}");
        let bad = GOOD.replace("mode = \"split\"", "mode = \"split\"\ncpus = 2");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.starts_with("scenarios/t.toml:6:1: ") && e.contains("cpus"), "{e}");
    }

    #[test]
    fn wrong_types_are_refused_with_line_and_column() {
        let bad = GOOD.replace("spawns = 3", "spawns = \"three\"");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.starts_with("scenarios/t.toml:19:10: "), "{e}");
        let bad = GOOD.replace("memory = \"512MiB\"", "memory = \"512MB\"");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.starts_with("scenarios/t.toml:6:10: ") && e.contains("unknown unit"), "{e}");
    }

    #[test]
    fn semantic_errors_point_at_the_entry() {
        let bad = GOOD.replace("tool = \"add_numbers\"", "tool = \"fibonacci\"");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("scenarios/t.toml:") && e.contains("no tool \"fibonacci\""), "{e}");
        let bad = GOOD.replace("id = \"mcp\"", "id = \"null\"");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.starts_with("scenarios/t.toml:13:6: ") && e.contains("used twice"), "{e}");
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1GiB"), Ok(1 << 30));
        assert_eq!(parse_memory("4096"), Ok(4096));
        assert!(parse_memory("1GB").is_err());
    }

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
