//! Evidence, not claim counts: claims grouped by the measurement their verdict rests on (one
//! selector, a ratio of two in either direction, an order, an outcome), with one verdict per
//! distinct measurement — the claims' common verdict, or `mixed` when claims on the same
//! measurement disagree (they state different values). Findings rest on no measurement.

use serde::Serialize;

use super::{ClaimResult, Verdict};

/// One distinct measurement and the claims that rest on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    /// The measurement, e.g. `ratio of a/sse-w1 latency p50 and b/sse-w1 latency p50`.
    pub key: String,
    pub claims: Vec<String>,
    /// The claims' common verdict; None when they disagree (mixed).
    pub verdict: Option<Verdict>,
}

impl Evidence {
    pub fn verdict_text(&self) -> &'static str {
        self.verdict.map_or("mixed", Verdict::as_str)
    }
}

/// The distinct measurements of an audit, in the order their first claim appears.
pub fn group(results: &[ClaimResult]) -> Vec<Evidence> {
    let mut out: Vec<(Evidence, Vec<Verdict>)> = Vec::new();
    for r in results {
        let Some(key) = &r.evidence else { continue };
        match out.iter_mut().find(|(e, _)| &e.key == key) {
            Some((e, vs)) => {
                e.claims.push(r.id.clone());
                vs.push(r.verdict);
            }
            None => out.push((
                Evidence { key: key.clone(), claims: vec![r.id.clone()], verdict: None },
                vec![r.verdict],
            )),
        }
    }
    out.into_iter()
        .map(|(mut e, vs)| {
            e.verdict = vs.iter().all(|v| *v == vs[0]).then_some(vs[0]);
            e
        })
        .collect()
}

/// How many distinct measurements have each verdict, then how many are mixed.
pub fn counts(evidence: &[Evidence]) -> (Vec<(Verdict, usize)>, usize) {
    let per = [Verdict::Reproduced, Verdict::Contradicted, Verdict::Inconclusive, Verdict::NotMeasured]
        .into_iter()
        .map(|v| (v, evidence.iter().filter(|e| e.verdict == Some(v)).count()))
        .collect();
    (per, evidence.iter().filter(|e| e.verdict.is_none()).count())
}
