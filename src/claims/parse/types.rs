//! The typed claims of a scenario file: the claim, its kinds and bodies, selectors, the metrics a
//! selector may name and their units, and the error type of the parser. Types only: reading the
//! TOML and checking it live in `raw` and `kinds`.

use std::path::PathBuf;

use serde::Deserialize;

use crate::text::glob_match;

/// A claims problem, located in its file.
#[derive(Debug, thiserror::Error)]
pub enum ClaimsError {
    #[error("{path}:{line}:{column}: {message}")]
    At { path: PathBuf, line: usize, column: usize, message: String },
    #[error("{path}: {message}")]
    Whole { path: PathBuf, message: String },
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    /// A substring of the CPU model (`AMD EPYC 9654`), matched case-insensitively.
    pub cpu_model: String,
    /// Logical CPUs the source ran on.
    pub cpus: u32,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The seed file name.
    pub file: Option<String>,
    pub section: Option<String>,
    pub row: Option<String>,
    pub hardware: Option<Hardware>,
    /// Instead of a seed file: one of the scenario's `[source] results` files, and the JSON
    /// Pointer (`path`, or `paths` for a ratio's two figures and an ordering's items) of the
    /// published figure in it.
    pub results: Option<toml::Spanned<String>>,
    pub path: Option<toml::Spanned<String>>,
    pub paths: Option<toml::Spanned<Vec<String>>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Absolute,
    Ratio,
    Ordering,
    SoakSlope,
    Outcome,
    Finding,
    Consistency,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Absolute => "absolute",
            Kind::Ratio => "ratio",
            Kind::Ordering => "ordering",
            Kind::SoakSlope => "soak_slope",
            Kind::Outcome => "outcome",
            Kind::Finding => "finding",
            Kind::Consistency => "consistency",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregate {
    Mean,
    Median,
    Min,
    Max,
}

/// What a metric is measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dim {
    Ms,
    Seconds,
    Bytes,
    Rps,
    Fraction,
    Cores,
    Lines,
    MibPerHour,
}

impl Dim {
    pub fn as_str(self) -> &'static str {
        match self {
            Dim::Ms => "ms",
            Dim::Seconds => "s",
            Dim::Bytes => "bytes",
            Dim::Rps => "req/s",
            Dim::Fraction => "fraction",
            Dim::Cores => "cores",
            Dim::Lines => "lines",
            Dim::MibPerHour => "MiB/h",
        }
    }
}

/// The metrics a selector may name, their statistics (the first is the default) and unit.
pub const METRICS: &[(&str, &[&str], Dim)] = &[
    ("cold_start", &["p50", "mean", "min", "max", "p95", "p99", "first", "rest_p50"], Dim::Ms),
    ("tools_list", &["p50", "mean", "min", "max", "p95", "p99", "first", "rest_p50"], Dim::Ms),
    ("calls", &["p50", "p90", "p95", "p99", "max", "mean", "total"], Dim::Ms),
    ("rss_after_initialize", &["value"], Dim::Bytes),
    ("loc", &["value"], Dim::Lines),
    ("throughput", &["value"], Dim::Rps),
    ("latency", &["p50", "p90", "p95", "p99", "max", "mean", "min"], Dim::Ms),
    ("http_rps", &["value"], Dim::Rps),
    ("error_rate", &["value"], Dim::Fraction),
    ("server_cpu", &["value"], Dim::Cores),
    ("rss_idle", &["value"], Dim::Bytes),
    ("rss_peak", &["value"], Dim::Bytes),
    ("rss_after", &["value"], Dim::Bytes),
    ("rss_released", &["value"], Dim::Fraction),
    ("cgroup_peak", &["value"], Dim::Bytes),
    ("rss_slope", &["value"], Dim::MibPerHour),
];

/// The unit of a metric's statistic (`calls` `total` is in seconds).
pub fn dim_of(metric: &str, stat: &str) -> Option<Dim> {
    let (_, _, dim) = METRICS.iter().find(|(m, _, _)| *m == metric)?;
    Some(if metric == "calls" && stat == "total" { Dim::Seconds } else { *dim })
}

/// Which measured value a claim is about.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Selector {
    /// A cell id, possibly with `*` wildcards.
    pub cell: String,
    pub metric: String,
    pub stat: String,
    pub aggregate: Option<Aggregate>,
    /// `latency` of one step of a load (`LoadMetrics::steps`: a tool, `initialize`,
    /// `tools/list`, `session`, `delete`, `http`) instead of every call.
    pub step: Option<String>,
}

impl Selector {
    pub fn dim(&self) -> Dim {
        dim_of(&self.metric, &self.stat).expect("validated when parsed")
    }

    pub fn text(&self) -> String {
        let agg = self.aggregate.map_or(String::new(), |a| format!(" ({a:?} over matches)").to_lowercase());
        let step = self.step.as_ref().map_or(String::new(), |s| format!(" of step {s}"));
        format!("{} {}{step} {}{agg}", self.cell, self.metric, self.stat)
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Figure {
    pub label: String,
    pub value: f64,
    /// Where the figure comes from: a result file and its pointer (`Cited`), or, for a figure
    /// written as a literal, the `from` the claim gives (a script, a README line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cited: Option<Cited>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// A published figure read from one of the source's result files.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Cited {
    /// The repository's URL and the commit, in full.
    pub git: String,
    pub commit: String,
    /// The file's path in the repository, and the sha256 of its bytes.
    pub file: String,
    pub sha256: String,
    /// The JSON Pointer of the figure in the file, and the number there (as the file writes it).
    pub pointer: String,
    pub value: f64,
}

impl Cited {
    /// `file#pointer = value (repository@commit, sha256 …)`, as the audit cites it.
    pub fn text(&self) -> String {
        format!(
            "{}#{} = {} ({}@{}, sha256 {})",
            self.file,
            self.pointer,
            self.value,
            self.git,
            &self.commit[..self.commit.len().min(12)],
            &self.sha256[..self.sha256.len().min(16)]
        )
    }
}

/// What a claim says, typed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body {
    /// `value` is in the metric's own unit (converted from the claim's).
    Absolute {
        measure: Selector,
        value: f64,
        unit: String,
        tolerance: f64,
        relative_to: Option<String>,
        /// An error rate: `tolerance` is absolute (a fraction; written in percentage points) and
        /// the band is [value − t, value + t], so a published 0 can be judged.
        points: bool,
    },
    Ratio {
        numerator: Selector,
        denominator: Selector,
        value: f64,
        tolerance: f64,
    },
    /// Smallest first.
    Ordering {
        items: Vec<Selector>,
        tolerance: f64,
    },
    SoakSlope {
        measure: Selector,
        value: f64,
        unit: String,
        duration: String,
    },
    Outcome {
        cell: String,
        expect_failure: bool,
        reason: Option<String>,
        /// A regular expression the failure's detail must match (checked when parsed).
        detail: Option<String>,
    },
    Finding {
        figures: Vec<Figure>,
        check: String,
        expected: Option<f64>,
        explanation: String,
    },
    /// The source's own figures related to each other (`check`: `equal`, or `quotient`:
    /// figures[0] / figures[1] = figures[2]) within a relative `tolerance`: judged from its
    /// files alone, consistent (reproduced) or not (contradicted).
    Consistency {
        figures: Vec<Figure>,
        check: ConsistencyCheck,
        tolerance: f64,
    },
}

/// How a consistency claim relates its figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsistencyCheck {
    /// Every figure equals the first.
    Equal,
    /// figures[0] / figures[1] equals figures[2].
    Quotient,
}

/// One claim of a source.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Claim {
    pub id: String,
    pub source: SourceRef,
    pub statement: String,
    pub body: Body,
    /// The source's condition this lab did not reproduce (`unmet_condition`), which makes the
    /// claim not_measured with this reason.
    pub unmet: Option<String>,
    /// 1-based line of the claim in its file.
    pub line: usize,
}

/// `Source` in serialisable form.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SourceRef {
    /// The seed file and its section; for a claim on a result file, the file and the pointer.
    pub file: String,
    pub section: String,
    pub row: Option<String>,
    pub hardware: Option<(String, u32)>,
    /// The published figures read from the source's result files (one for `path`, one per
    /// pointer of `paths`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cited: Vec<Cited>,
}

impl Claim {
    pub fn kind(&self) -> Kind {
        match self.body {
            Body::Absolute { .. } => Kind::Absolute,
            Body::Ratio { .. } => Kind::Ratio,
            Body::Ordering { .. } => Kind::Ordering,
            Body::SoakSlope { .. } => Kind::SoakSlope,
            Body::Outcome { .. } => Kind::Outcome,
            Body::Finding { .. } => Kind::Finding,
            Body::Consistency { .. } => Kind::Consistency,
        }
    }
}

/// The default relative tolerance of absolute and ratio claims.
pub const DEFAULT_TOLERANCE: f64 = 0.15;

/// Whether a selector's cell pattern (`*` wildcards, alternatives separated by `,`) matches an id.
pub fn cell_matches(pattern: &str, id: &str) -> bool {
    pattern.split(',').any(|p| glob_match(p.trim(), id))
}
