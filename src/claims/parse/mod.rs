//! The `[[claim]]` tables of a scenario file: their schema, parsing with file:line:column errors,
//! unknown keys refused, and validation against the scenario's own cells. It reads text and
//! nothing else; measuring and judging live in `measure` and `mod`. The typed claims are in
//! `types`, the tables as written in `raw`, and each kind's checks and conversion in `kinds`;
//! this file reads the file and checks what spans claims (unique ids, `relative_to`).
//!
//! # Schema
//!
//! A claim is a `[[claim]]` table at the end of a scenario file. Every claim has:
//!
//! ```toml
//! [[claim]]
//! id = "s000-stdio-p50-node"          # unique in the file; other claims refer to it
//! source = { file = "000_6fe3b4b3acef3dc1.txt", section = "The Executive Decision Matrix",
//!            row = "Stdio Round-Trip Latency (p50)",
//!            hardware = { cpu_model = "AMD EPYC 9654", cpus = 8 } }   # row, hardware optional
//! statement = "0.82 ms (Node.js)"     # the source's own words
//! kind = "absolute"                   # absolute | ratio | ordering | soak_slope | outcome | finding | consistency
//! ```
//!
//! and, by kind:
//!
//! - `absolute`: `measure` (a selector), `value`, `unit`, optional `tolerance` (relative, default
//!   0.15: reproduced when the measured interval lies within [value/(1+t), value·(1+t)]) and
//!   optional `relative_to = "<claim id>"`: another absolute claim of the same unit. When the lab's
//!   hardware does not match `source.hardware`, the figure is judged by the ratio it implies to
//!   that claim (value / other value against the measured ratio of the two selectors).
//! - `ratio`: `numerator` and `denominator` selectors, `value` (e.g. 1.42 from 643/461), optional
//!   `tolerance`. Units cancel, so hardware does not matter.
//! - `ordering`: `items`, a list of selectors from the smallest to the largest; every adjacent pair
//!   is judged by the interval of their ratio (above 1: holds; below 1/(1+t): reversed, with
//!   `tolerance` t defaulting to 0).
//! - `soak_slope`: `measure` (metric `rss_slope`), `value` (the slope claimed, e.g. 0) and `unit`
//!   (`MiB/h`), `duration` (e.g. "24h"). No workload of the lab runs that long: not measured.
//! - `outcome`: `cell` and `expect = "failure" | "success"`, optional `reason` (a record failure
//!   reason such as `crash`) and `detail` (a regular expression the failure's message must
//!   match, e.g. the error class the source printed): whether the cell did what the source says.
//! - `finding`: an inconsistency inside the source. `figures` (a list of `{ label, value }` as the
//!   source prints them), `check` and `explanation`. `check = "differ"`: figures that should agree
//!   and do not; `"identical"`: figures of different things that are identical; `"arithmetic"`:
//!   `figures[0]` should equal `expected` (what the source's other figures give) and does not.
//!
//! - `consistency`: the source's own figures related to each other, judged from its files alone:
//!   `figures` (each `{ label, results, path }` read from a result file, or `{ label, value, from }`
//!   written as a literal with where it comes from), `check = "equal"` (every figure the same) or
//!   `"quotient"` (figures[0] / figures[1] = figures[2]), optional relative `tolerance` (default
//!   0.01). Consistent: reproduced; inconsistent: contradicted.
//!
//! A claim's `source` may cite one of the scenario's `[source] results` files instead of a seed
//! file: `source = { results = "<file>", path = "<JSON Pointer>" }` (absolute: `value` is read
//! from the file; a `value` written beside it must equal it), `paths = [..]` (a ratio's numerator
//! and denominator; an ordering's items, smallest first, which the file must show), or `results`
//! alone (finding, consistency: each figure cites its own). The figures are read when the claims
//! are (`parse_claims_citing`, from the files a run folder keeps); a pointer that resolves to no
//! number is an error at `path`. Error rates (`error_rate`) are judged in percentage points:
//! `tolerance` is in points (default 0.1), the band [v − t, v + t], so a published 0 is a value.
//!
//! Any kind may add `unmet_condition = "<why>"`: the source's figure depends on a condition this
//! lab did not reproduce (e.g. a first run that compiles bytecode, where the image precompiles
//! it); the claim is then not_measured with that reason, never contradicted or reproduced.
//!   The check is made here, when the file is read: a finding its figures do not show is an error.
//!
//! A selector is `{ cell = "<server>/<workload>", metric = "...", stat = "...", aggregate = "..." }`,
//! and for `latency` optionally `step = "<step>"`: one step of the load (`LoadMetrics::steps`: a
//! tool's name, `initialize`, `tools/list`, `session`, `delete`, `http`).
//! `cell` may use `*` wildcards and `,` between alternatives, and must match at least one cell of the scenario; with several
//! matches, `aggregate` (`mean`, `median`, `min`, `max`) says how they combine (required). Metrics
//! and their statistics (the first is the default):
//!
//! | metric | stats | unit |
//! |---|---|---|
//! | `cold_start`, `tools_list` | p50, mean, min, max, p95, p99, first, rest_p50 | ms |
//! | `calls` | p50, p90, p95, p99, max, mean, total | ms (total: s) |
//! | `rss_after_initialize` | value | bytes |
//! | `loc` | value | lines |
//! | `throughput` | value | req/s |
//! | `latency` (HTTP load; `step` for one step) | p50, p90, p95, p99, max, mean, min | ms |
//! | `http_rps` (every HTTP request of the load) | value | req/s |
//! | `error_rate` | value | fraction (`%` or `fraction` in claims; judged in percentage points) |
//! | `server_cpu` | value | cores (`%` in claims: 100% = one core) |
//! | `rss_idle`, `rss_peak`, `cgroup_peak` | value | bytes |
//! | `rss_after` (the level at the end of the post-load idle phase) | value | bytes |
//! | `rss_released` ((peak − after) / (peak − idle): the load's growth given back) | value | fraction (`%`) |
//! | `rss_slope` | value | MiB/h (soak_slope only) |
//!
//! Units a claim may give: `ms`, `s`, `MB` (10^6 bytes), `MiB`, `req/s`, `%`, `fraction`, `lines`, `cores`,
//! `MiB/h`; the unit must fit the metric.

mod cite;
mod kinds;
mod raw;
mod types;

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::Path;

use crate::text::line_col;

use kinds::body;
use raw::RawFile;

pub use kinds::{DEFAULT_POINTS, STEPS};
pub use types::{
    cell_matches, dim_of, Aggregate, Body, Cited, Claim, ClaimsError, ConsistencyCheck, Dim, Figure,
    Hardware, Kind, Selector, Source, SourceRef, DEFAULT_TOLERANCE, METRICS,
};

/// Parses the claims of a scenario file. `cell_ids` are the scenario's cells: every selector
/// must match one of them.
pub fn parse_claims(path: &Path, source: &str, cell_ids: &[String]) -> Result<Vec<Claim>, ClaimsError> {
    parse_claims_citing(path, source, cell_ids, None)
}

/// Parses the claims of a scenario file whose claims may cite the source's result files
/// (`files`: the scenario's `[source] results` as read at its commit, or as a run folder keeps
/// them); a cited figure is read when the claim is.
pub fn parse_claims_citing(
    path: &Path,
    source: &str,
    cell_ids: &[String],
    files: Option<&crate::source::results::Published>,
) -> Result<Vec<Claim>, ClaimsError> {
    // Repeats share a cell id: a selector matches the cell once.
    let mut distinct: Vec<String> = Vec::new();
    for id in cell_ids {
        if !distinct.contains(id) {
            distinct.push(id.clone());
        }
    }
    let cell_ids = distinct.as_slice();
    let at = |span: Range<usize>, message: String| {
        let (line, column) = line_col(source, span.start);
        ClaimsError::At { path: path.into(), line, column, message }
    };
    let raw: RawFile = toml::from_str(source).map_err(|e| match e.span() {
        Some(span) => at(span, e.message().to_string()),
        None => ClaimsError::Whole { path: path.into(), message: e.message().to_string() },
    })?;
    let mut claims = Vec::new();
    let mut ids = BTreeSet::new();
    for c in &raw.claims {
        let span = c.span();
        let c = c.get_ref();
        if !ids.insert(c.id.get_ref().clone()) {
            return Err(at(c.id.span(), format!("claim id {:?} is used twice", c.id.get_ref())));
        }
        let (body, cited) = body(c, cell_ids, files).map_err(|(s, m)| at(s, m))?;
        let (line, _) = line_col(source, span.start);
        let s = &c.source;
        let pointers = match (&s.path, &s.paths) {
            (Some(p), _) => p.get_ref().clone(),
            (None, Some(ps)) => ps.get_ref().join(", "),
            (None, None) => "figures".into(),
        };
        let (file, section) = match (&s.file, &s.section, &s.results) {
            (Some(f), Some(sec), _) => (f.clone(), sec.clone()),
            (_, _, Some(r)) => (r.get_ref().clone(), pointers),
            _ => unreachable!("checked by kinds"),
        };
        claims.push(Claim {
            id: c.id.get_ref().clone(),
            source: SourceRef {
                file,
                section,
                row: c.source.row.clone(),
                hardware: c.source.hardware.as_ref().map(|h| (h.cpu_model.clone(), h.cpus)),
                cited,
            },
            statement: c.statement.clone(),
            body,
            unmet: c.unmet_condition.clone(),
            line,
        });
    }
    // relative_to must name an absolute claim of the same unit.
    for (c, raw) in claims.iter().zip(&raw.claims) {
        if let Body::Absolute { measure, relative_to: Some(other), .. } = &c.body {
            let span = raw.get_ref().relative_to.as_ref().map(|r| r.span()).unwrap_or(raw.span());
            match claims.iter().find(|o| &o.id == other).map(|o| &o.body) {
                Some(Body::Absolute { measure: om, .. }) if om.dim() == measure.dim() && other != &c.id => {}
                Some(_) => {
                    return Err(at(
                        span,
                        format!("`relative_to` {other:?} is not another absolute claim in the same unit"),
                    ))
                }
                None => return Err(at(span, format!("`relative_to` names no claim: {other:?}"))),
            }
        }
    }
    Ok(claims)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod cite_tests;
