//! The verdict on an `outcome` claim: whether a cell failed or succeeded as the source says, by
//! the failure's category (a record's failure reason) and, when the claim states one, its
//! message (`detail`, a regular expression). A failure of the lab (engine, node) says nothing of
//! the server; runs that disagree give no verdict.

use super::judge::{not_measured, Ctx};
use super::{ClaimResult, Verdict};
use crate::record::{Record, Status};
use crate::spec::FailureReason;

impl Ctx<'_> {
    pub(super) fn outcome(
        &self,
        mut r: ClaimResult,
        cell: &str,
        expect_failure: bool,
        (reason, pattern): (Option<&str>, Option<&str>),
    ) -> ClaimResult {
        let runs = super::measure::repeats_of(self.records, cell);
        if runs.is_empty() {
            return not_measured(r, format!("no record of cell {cell} in the run"));
        }
        r.cells = vec![cell.to_string()];
        r.evidence = Some(format!("outcome of {cell}"));
        r.judged_as = "outcome".into();
        r.repeats = Some(runs.len() as u32);
        // A failure of the lab (engine, node) says nothing of the server.
        let lab_failed = |x: &&Record| {
            x.failure
                .as_ref()
                .is_some_and(|f| matches!(f.reason, FailureReason::EngineError | FailureReason::NodeFail))
        };
        let (lab, server): (Vec<&Record>, Vec<&Record>) = runs.iter().copied().partition(lab_failed);
        // The self-test's counterpart of a scaled figure: the opposite outcome.
        let flip = self.perturb.flips();
        let failed: Vec<bool> = server.iter().map(|x| (x.status == Status::Failed) != flip).collect();
        let ended = |x: &Record, failed: bool| {
            let got = if failed {
                x.failure.as_ref().map_or("failed".into(), |f| f.reason.as_str().to_string())
            } else {
                "ok".into()
            };
            let detail = x
                .failure
                .as_ref()
                .map(|f| f.detail.lines().last().unwrap_or("").to_string())
                .unwrap_or_default();
            (got, detail)
        };
        let want = if expect_failure {
            let detail = pattern.map_or(String::new(), |p| format!(", its message matching `{p}`"));
            format!("a failure{}{detail}", reason.map_or(String::new(), |w| format!(" ({w})")))
        } else {
            "success".into()
        };
        if server.is_empty() || failed.iter().any(|f| *f != failed[0]) {
            r.verdict = Verdict::Inconclusive;
            let why = if server.is_empty() {
                let (got, detail) = ended(lab[0], true);
                format!("every run of the cell failed by the lab's fault ({got}: {detail}), which says nothing of the server")
            } else {
                format!(
                    "its {} runs disagree ({} failed)",
                    failed.len(),
                    failed.iter().filter(|f| **f).count()
                )
            };
            r.explanation =
                format!("The source reports {want}; the lab's cell {cell} gives no verdict: {why}.");
            return r;
        }
        let last = server[server.len() - 1];
        let (got, detail) = ended(last, failed[0]);
        let reasons_match = server.iter().all(|x| ended(x, failed[0]).0 == got);
        let failed = failed[0];
        // The failure's message, when the claim names one: every run's must match, not only
        // its category (a crash of another error is another finding).
        let details_match = match pattern.map(regex::Regex::new) {
            Some(Ok(re)) => server.iter().all(|x| x.failure.as_ref().is_some_and(|f| re.is_match(&f.detail))),
            Some(Err(_)) => false,
            None => true,
        };
        let category = !failed || reason.is_none_or(|w| w == got && reasons_match);
        r.verdict = if failed == expect_failure && category && (!failed || details_match || flip) {
            Verdict::Reproduced
        } else {
            Verdict::Contradicted
        };
        let unlike = match (failed && expect_failure && category && !details_match, pattern) {
            (true, Some(p)) => {
                format!(" The category matches, but the message does not match `{p}`: another failure.")
            }
            _ => String::new(),
        };
        r.explanation = format!(
            "The source reports {want}; the lab's cell {cell} ended {}{} ({} run(s) alike).{unlike}",
            if failed { format!("failed ({got})") } else { "ok".into() },
            if detail.is_empty() { String::new() } else { format!(": {detail}") },
            server.len()
        );
        r
    }
}
