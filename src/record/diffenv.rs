//! Field-by-field differences of environment manifests, for `benchlab diff-env` and for the
//! comparison of two runs: what changed between two cells, or two runs, that could move a number.
//! Pure: manifests and records in, differences out. Rendering lives in `report::compare`.
//!
//! Manifests are walked as their canonical JSON (the bytes `env_hash` is taken over), so every
//! field is covered without listing them here and a new field shows up by itself. Objects give
//! dotted paths (`runtime.version`, `placement.server_cpus`); lists of packages (objects of
//! exactly `name` and `version`) are matched by name (`image.packages[mcp]`) rather than by index,
//! so one package inserted at the top does not read as every package after it changing; other
//! lists (`deviations`) are compared whole.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::record::{Environment, Record};

/// What kind of difference a path shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffKind {
    /// Present in both with different values.
    Changed,
    /// Present only in b (a package installed in b and not in a).
    Added,
    /// Present only in a.
    Removed,
}

/// One difference between two manifests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvDiff {
    /// Dotted path into the manifest's JSON; a package as `image.packages[name]`.
    pub path: String,
    pub kind: DiffKind,
    /// The value in a (`None` when added).
    pub a: Option<Value>,
    /// The value in b (`None` when removed).
    pub b: Option<Value>,
}

impl EnvDiff {
    /// A value as people read it: strings without quotes, `—` for absent.
    pub fn show(v: Option<&Value>) -> String {
        match v {
            None => "—".into(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        }
    }
}

/// The differences of two manifests, sorted by path (the canonical JSON's key order).
pub fn diff_env(a: &Environment, b: &Environment) -> Vec<EnvDiff> {
    let va = serde_json::to_value(a).expect("manifests serialise");
    let vb = serde_json::to_value(b).expect("manifests serialise");
    diff_values(&va, &vb)
}

/// The differences of two JSON values, walked as canonical JSON (see the module docs). Exposed
/// for manifests read as raw JSON (e.g. of an older format).
pub fn diff_values(a: &Value, b: &Value) -> Vec<EnvDiff> {
    let mut out = Vec::new();
    walk("", a, b, &mut out);
    out
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn walk(path: &str, a: &Value, b: &Value, out: &mut Vec<EnvDiff>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(ma), Value::Object(mb)) => {
            // Canonical order: keys sorted by their bytes, whatever the map's own order.
            let mut keys: Vec<&String> = ma.keys().chain(mb.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = join(path, k);
                match (ma.get(k), mb.get(k)) {
                    (Some(x), Some(y)) => walk(&p, x, y, out),
                    (Some(x), None) => {
                        out.push(EnvDiff { path: p, kind: DiffKind::Removed, a: Some(x.clone()), b: None })
                    }
                    (None, Some(y)) => {
                        out.push(EnvDiff { path: p, kind: DiffKind::Added, a: None, b: Some(y.clone()) })
                    }
                    (None, None) => unreachable!("the key came from one of the maps"),
                }
            }
        }
        (Value::Array(xa), Value::Array(xb)) => match (packages(xa), packages(xb)) {
            (Some(pa), Some(pb)) => diff_packages(path, &pa, &pb, out),
            _ => out.push(changed(path, a, b)),
        },
        _ => out.push(changed(path, a, b)),
    }
}

fn changed(path: &str, a: &Value, b: &Value) -> EnvDiff {
    EnvDiff { path: path.to_string(), kind: DiffKind::Changed, a: Some(a.clone()), b: Some(b.clone()) }
}

/// A list of `{name, version}` objects as name → version; `None` for any other list. A name
/// listed twice (multi-arch dpkg entries) keeps its versions joined with `, `.
fn packages(items: &[Value]) -> Option<BTreeMap<String, String>> {
    let mut map: BTreeMap<String, String> = BTreeMap::new();
    for item in items {
        let obj = item.as_object()?;
        if obj.len() != 2 {
            return None;
        }
        let name = obj.get("name")?.as_str()?;
        let version = obj.get("version")?.as_str()?;
        map.entry(name.to_string())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(version);
            })
            .or_insert_with(|| version.to_string());
    }
    Some(map)
}

fn diff_packages(
    path: &str,
    a: &BTreeMap<String, String>,
    b: &BTreeMap<String, String>,
    out: &mut Vec<EnvDiff>,
) {
    let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let p = format!("{path}[{name}]");
        let (va, vb) = (a.get(name), b.get(name));
        let kind = match (va, vb) {
            (Some(x), Some(y)) if x == y => continue,
            (Some(_), Some(_)) => DiffKind::Changed,
            (Some(_), None) => DiffKind::Removed,
            (None, Some(_)) => DiffKind::Added,
            (None, None) => unreachable!("the name came from one of the maps"),
        };
        out.push(EnvDiff {
            path: p,
            kind,
            a: va.map(|v| Value::String(v.clone())),
            b: vb.map(|v| Value::String(v.clone())),
        });
    }
}

/// The environment differences of one cell found in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellEnvDiff {
    pub cell: String,
    pub env_hash_a: String,
    pub env_hash_b: String,
    /// Every difference of this cell's manifests.
    pub diffs: Vec<EnvDiff>,
    /// The part of `diffs` not in [`RunEnvDiff::common`]: what sets this cell apart.
    pub specific: Vec<EnvDiff>,
}

/// The environment differences of two runs, cell by cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunEnvDiff {
    /// The run ids of a and of b (normally one each), in order of first appearance.
    pub runs_a: Vec<String>,
    pub runs_b: Vec<String>,
    /// Cell ids recorded only in a, or only in b, in record order.
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
    /// Differences every matched cell shows alike (same path, same values): typically the
    /// host, the engine, the lab binary, the placement mode. Empty when no cell matched.
    pub common: Vec<EnvDiff>,
    /// One entry per cell id in both runs, in a's record order.
    pub cells: Vec<CellEnvDiff>,
}

impl RunEnvDiff {
    /// True when the matched cells ran in identical environments and no cell is unmatched.
    pub fn is_identical(&self) -> bool {
        self.only_in_a.is_empty()
            && self.only_in_b.is_empty()
            && self.cells.iter().all(|c| c.diffs.is_empty())
    }
}

/// The last record of each cell id, in order of the id's first appearance. A resumed run may
/// hold a cell twice; its latest record is the one that stands.
pub fn latest_by_cell(records: &[Record]) -> Vec<&Record> {
    let mut order: Vec<&str> = Vec::new();
    let mut latest: BTreeMap<&str, &Record> = BTreeMap::new();
    for r in records {
        if latest.insert(&r.cell.id, r).is_none() {
            order.push(&r.cell.id);
        }
    }
    order.into_iter().map(|id| latest[id]).collect()
}

pub(crate) fn run_ids(records: &[Record]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for r in records {
        if !ids.contains(&r.run_id) {
            ids.push(r.run_id.clone());
        }
    }
    ids
}

/// Matches two runs' cells by cell id and diffs the environments of each pair; differences
/// shared by every matched cell are collapsed into [`RunEnvDiff::common`].
/// Where a record's cell ran: a cluster's node, or the orchestrator's own host.
pub fn ran_on(r: &Record) -> String {
    match &r.dispatch {
        Some(d) => format!("{} node {}", d.scheduler, d.node),
        None => "this host".into(),
    }
}

/// Two records' environment differences, and the node each ran on when that differs (a node's
/// name is not part of the environment: its CPU, kernel and engine are).
pub fn diff_records(a: &Record, b: &Record) -> Vec<EnvDiff> {
    let mut out = diff_env(&a.environment, &b.environment);
    let (na, nb) = (ran_on(a), ran_on(b));
    if na != nb {
        out.insert(
            0,
            EnvDiff { path: "node".into(), kind: DiffKind::Changed, a: Some(na.into()), b: Some(nb.into()) },
        );
    }
    out
}

pub fn diff_runs(a: &[Record], b: &[Record]) -> RunEnvDiff {
    let la = latest_by_cell(a);
    let lb = latest_by_cell(b);
    let find = |set: &[&Record], id: &str| set.iter().any(|r| r.cell.id == id);
    let only_in_a = la.iter().filter(|r| !find(&lb, &r.cell.id)).map(|r| r.cell.id.clone()).collect();
    let only_in_b = lb.iter().filter(|r| !find(&la, &r.cell.id)).map(|r| r.cell.id.clone()).collect();
    let mut cells: Vec<CellEnvDiff> = la
        .iter()
        .filter_map(|ra| {
            let rb = lb.iter().find(|r| r.cell.id == ra.cell.id)?;
            Some(CellEnvDiff {
                cell: ra.cell.id.clone(),
                env_hash_a: ra.env_hash.clone(),
                env_hash_b: rb.env_hash.clone(),
                diffs: diff_records(ra, rb),
                specific: Vec::new(),
            })
        })
        .collect();
    let common: Vec<EnvDiff> = match cells.split_first() {
        Some((first, rest)) => {
            first.diffs.iter().filter(|d| rest.iter().all(|c| c.diffs.contains(d))).cloned().collect()
        }
        None => Vec::new(),
    };
    for c in &mut cells {
        c.specific = c.diffs.iter().filter(|d| !common.contains(d)).cloned().collect();
    }
    RunEnvDiff { runs_a: run_ids(a), runs_b: run_ids(b), only_in_a, only_in_b, common, cells }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::manifest::Package;
    use crate::record::tests::sample_record;

    fn paths(d: &[EnvDiff]) -> Vec<&str> {
        d.iter().map(|d| d.path.as_str()).collect()
    }

    #[test]
    fn identical_manifests_have_no_differences() {
        let r = sample_record("a");
        assert!(diff_env(&r.environment, &r.environment).is_empty());
    }

    #[test]
    fn fields_differ_by_dotted_path_in_canonical_order() {
        let a = sample_record("a").environment;
        let mut b = a.clone();
        b.runtime.version = "3.12.3".into();
        b.host.cpu_model = "AMD EPYC 9654".into();
        b.placement.shared = true;
        b.image.base.suite = None;
        b.deviations.push("CPython 3.13 for 3.12".into());
        let d = diff_env(&a, &b);
        assert_eq!(
            paths(&d),
            ["deviations", "host.cpu_model", "image.base.suite", "placement.shared", "runtime.version"]
        );
        let rt = &d[4];
        assert_eq!(
            (rt.kind, EnvDiff::show(rt.a.as_ref()), EnvDiff::show(rt.b.as_ref())),
            (DiffKind::Changed, "0".into(), "3.12.3".into())
        );
        assert_eq!(EnvDiff::show(d[2].b.as_ref()), "null");
        assert_eq!(d[3].b, Some(Value::Bool(true)));
    }

    #[test]
    fn packages_differ_by_name_not_index() {
        let a = sample_record("a").environment;
        let mut b = a.clone();
        let p = |n: &str, v: &str| Package { name: n.into(), version: v.into() };
        let mut a2 = a.clone();
        a2.image.packages = vec![p("anyio", "4.16.0"), p("mcp", "2.3.0"), p("old", "1")];
        b.image.packages = vec![p("aaa-new", "0.1"), p("anyio", "4.16.0"), p("mcp", "2.4.0")];
        let d = diff_env(&a2, &b);
        assert_eq!(paths(&d), ["image.packages[aaa-new]", "image.packages[mcp]", "image.packages[old]"]);
        assert_eq!(
            d.iter().map(|d| d.kind).collect::<Vec<_>>(),
            [DiffKind::Added, DiffKind::Changed, DiffKind::Removed]
        );
        assert_eq!(
            (EnvDiff::show(d[1].a.as_ref()), EnvDiff::show(d[1].b.as_ref())),
            ("2.3.0".into(), "2.4.0".into())
        );
        assert_eq!(EnvDiff::show(d[0].a.as_ref()), "—");
        // From nothing installed to something: still by name.
        let d = diff_env(&a, &b);
        assert_eq!(paths(&d), ["image.packages[aaa-new]", "image.packages[anyio]", "image.packages[mcp]"]);
    }

    #[test]
    fn runs_collapse_what_every_cell_shares() {
        let a = vec![sample_record("x"), sample_record("y"), sample_record("only-a")];
        let mut b = vec![sample_record("y"), sample_record("x"), sample_record("only-b")];
        for r in &mut b {
            r.run_id = "other".into();
            r.environment.host.kernel = "6.18".into();
        }
        b[1].environment.runtime.version = "9".into();
        let d = diff_runs(&a, &b);
        assert_eq!(d.runs_b, ["other"]);
        assert_eq!(
            (d.only_in_a.clone(), d.only_in_b.clone()),
            (vec!["only-a/cold_start".to_string()], vec!["only-b/cold_start".to_string()])
        );
        assert_eq!(paths(&d.common), ["host.kernel"]);
        assert_eq!(
            d.cells.iter().map(|c| c.cell.as_str()).collect::<Vec<_>>(),
            ["x/cold_start", "y/cold_start"]
        );
        assert_eq!(paths(&d.cells[0].diffs), ["host.kernel", "runtime.version"]);
        assert_eq!(paths(&d.cells[0].specific), ["runtime.version"]);
        assert!(d.cells[1].specific.is_empty());
        assert!(!d.is_identical());
        assert!(diff_runs(&a, &a).is_identical());
    }
}
