//! Every run counts: which of a scenario's records are judged together (an older run's cells
//! that ran the newest run's image of the cell on a host of the same CPU), what each run read was (its records, whether its store audits clean), and
//! the runs whose own records, judged alone, disagree with the verdict on all of them. Reading
//! folders and auditing stores is the CLI's; this is pure.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Serialize;

use super::judge::{Ctx, Figures};
use super::parse::Claim;
use super::selftest::Perturb;
use super::{ClaimResult, Verdict};
use crate::record::Record;
use crate::scenario::Scenario;

/// One run read by `verify`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRead {
    /// The run folder (or records file) as given or found.
    pub dir: String,
    /// The run id its records carry.
    pub run_id: String,
    pub records: usize,
    /// The records its store holds (more than `records` when only some of its cells share the
    /// environment of the newest run's).
    pub stored: usize,
    /// The first problem `benchlab audit` finds in its store, when it is not clean (judged
    /// anyway only with `--allow-damaged`).
    pub damage: Option<String>,
    /// Where its records sit in the records judged.
    #[serde(skip)]
    pub range: Range<usize>,
}

impl RunRead {
    /// The runs of records read from one place, by their run ids (consecutive records of one
    /// id are one run).
    pub fn split(dir: &str, records: &[Record]) -> Vec<RunRead> {
        let mut out: Vec<RunRead> = Vec::new();
        for (i, r) in records.iter().enumerate() {
            match out.last_mut() {
                Some(last) if last.run_id == r.run_id => {
                    last.range.end = i + 1;
                    last.records += 1;
                    last.stored += 1;
                }
                _ => out.push(RunRead {
                    dir: dir.to_string(),
                    run_id: r.run_id.clone(),
                    records: 1,
                    stored: 1,
                    damage: None,
                    range: i..i + 1,
                }),
            }
        }
        out
    }
}

/// A run whose own records give another verdict than all the runs together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunVerdict {
    pub run_id: String,
    pub verdict: Verdict,
    /// Its figure as measured in that run alone, in the claim's unit, when it has one.
    pub measured: Option<f64>,
}

/// The environment of each cell of a run, for judging runs together: the lab host (CPU model
/// and logical CPUs) and the image the cell ran. An older run's record shares it when its cell
/// ran the same image on a host of the same CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvKey {
    cells: BTreeMap<String, (String, u32, String)>,
}

fn cell_env(r: &Record) -> (String, u32, String) {
    let e = &r.environment;
    (e.host.cpu_model.trim().to_string(), e.host.logical_cpus, e.image.image_id.clone())
}

impl EnvKey {
    pub fn of(records: &[Record]) -> EnvKey {
        EnvKey { cells: records.iter().map(|r| (r.cell.id.clone(), cell_env(r))).collect() }
    }

    /// Whether a record of another run shares its cell's environment here.
    pub fn shares(&self, r: &Record) -> bool {
        self.cells.get(&r.cell.id).is_some_and(|env| *env == cell_env(r))
    }
}

/// With more than one run, each claim judged on each run alone: the runs that decide it
/// otherwise than all of them together are named on the result (a run that alone decides
/// nothing, or does not measure the claim, is not a disagreement).
pub(super) fn disagreements(
    scenario: &Scenario,
    claims: &[Claim],
    records: &[Record],
    runs: &[RunRead],
    results: &mut [ClaimResult],
) {
    if runs.len() < 2 {
        return;
    }
    for run in runs {
        let measured = Figures::default();
        let ctx = Ctx {
            scenario,
            claims,
            records: &records[run.range.clone()],
            perturb: Perturb::None,
            measured: &measured,
        };
        let alone: Vec<ClaimResult> = crate::par::par_map(claims, |c| ctx.judge(c));
        for (r, a) in results.iter_mut().zip(alone) {
            // A run that did not measure a claim's cells has nothing to disagree with, and one
            // that alone decides nothing (a single soak, say) is what pooling is for.
            let measured =
                !matches!(a.verdict, Verdict::NotMeasured | Verdict::Finding | Verdict::Inconclusive);
            if measured && a.verdict != r.verdict {
                r.disagreeing_runs.push(RunVerdict {
                    run_id: run.run_id.clone(),
                    verdict: a.verdict,
                    measured: a.measured,
                });
            }
        }
    }
}
