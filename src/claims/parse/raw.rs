//! The `[[claim]]` tables as written: the flat serde form of a claim, every key of every kind
//! optional, unknown keys refused, spans kept for errors. Which keys a kind needs or refuses, and
//! what they mean, is `kinds`' business.

use serde::Deserialize;
use toml::Spanned;

use super::types::{Aggregate, Kind, Source};

/// A selector as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSelector {
    pub cell: Spanned<String>,
    pub metric: Spanned<String>,
    pub stat: Option<Spanned<String>>,
    pub aggregate: Option<Aggregate>,
    pub step: Option<Spanned<String>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFigure {
    pub label: String,
    /// A literal figure (with `from`, in a consistency claim), or one read from a result file
    /// (`results` and `path`).
    pub value: Option<Spanned<f64>>,
    pub from: Option<String>,
    pub results: Option<Spanned<String>>,
    pub path: Option<Spanned<String>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClaim {
    pub id: Spanned<String>,
    pub source: Source,
    pub statement: String,
    pub kind: Spanned<Kind>,
    pub measure: Option<Spanned<RawSelector>>,
    pub numerator: Option<Spanned<RawSelector>>,
    pub denominator: Option<Spanned<RawSelector>>,
    pub items: Option<Spanned<Vec<Spanned<RawSelector>>>>,
    pub value: Option<Spanned<f64>>,
    pub unit: Option<Spanned<String>>,
    pub tolerance: Option<Spanned<f64>>,
    pub relative_to: Option<Spanned<String>>,
    pub duration: Option<String>,
    pub cell: Option<Spanned<String>>,
    pub expect: Option<Spanned<String>>,
    pub reason: Option<String>,
    /// Outcome: a regular expression the failure's detail (its message) must match.
    pub detail: Option<Spanned<String>>,
    pub figures: Option<Spanned<Vec<RawFigure>>>,
    pub check: Option<Spanned<String>>,
    pub expected: Option<f64>,
    pub explanation: Option<String>,
    /// Any kind: the source's condition the lab did not reproduce (the claim is not_measured).
    pub unmet_condition: Option<String>,
}

/// The scenario file seen by the claims parser: its `[[claim]]` tables and nothing else (the
/// scenario parser owns and checks the rest).
#[derive(Debug, Deserialize)]
pub(super) struct RawFile {
    #[serde(rename = "claim", default)]
    pub claims: Vec<Spanned<RawClaim>>,
}
