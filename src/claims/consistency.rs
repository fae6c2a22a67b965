//! `consistency` claims: the source's own figures related to each other — every figure equal
//! (`equal`), or figures[0] / figures[1] = figures[2] (`quotient`) — within a relative tolerance,
//! judged from its files (and the literal figures the claim writes with where they come from)
//! alone: consistent is reproduced, inconsistent contradicted, each figure cited.

use super::judge::not_measured;
use super::parse::{ConsistencyCheck, Figure};
use super::selftest::Perturb;
use super::{num, ClaimResult, Verdict};

/// A figure as the source writes it: a count whole, anything else to three digits.
fn figure(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        num(v)
    }
}

/// Where a figure comes from, as the audit cites it.
fn cite(f: &Figure) -> String {
    match (&f.cited, &f.from) {
        (Some(c), _) => format!("{} = {} ({})", f.label, figure(f.value), c.text()),
        (None, Some(from)) => format!("{} = {} (from {from})", f.label, figure(f.value)),
        (None, None) => format!("{} = {}", f.label, figure(f.value)),
    }
}

/// Whether `a` is within the relative tolerance of `b` (the same band as a figure's, log scale).
fn agrees(a: f64, b: f64, tol: f64) -> bool {
    if b == 0.0 || a == 0.0 {
        return a == b;
    }
    a / b >= 1.0 / (1.0 + tol) && a / b <= 1.0 + tol && (a > 0.0) == (b > 0.0)
}

pub(super) fn judge(
    mut r: ClaimResult,
    figures: &[Figure],
    check: ConsistencyCheck,
    tol: f64,
    perturb: Perturb,
) -> ClaimResult {
    // The self-test's counterpart of a scaled figure: the first figure scaled.
    let mut values: Vec<f64> = figures.iter().map(|f| f.value).collect();
    if let Perturb::Scale(s) = perturb {
        values[0] *= s;
    }
    r.judged_as = format!(
        "consistency ({})",
        match check {
            ConsistencyCheck::Equal => "equal",
            ConsistencyCheck::Quotient => "quotient",
        }
    );
    r.tolerance = Some(tol);
    r.evidence = Some(format!(
        "the source's own figures: {}",
        figures.iter().map(|f| f.label.as_str()).collect::<Vec<_>>().join(" ; ")
    ));
    let cited: Vec<String> = figures.iter().map(cite).collect();
    let (ok, what) = match check {
        ConsistencyCheck::Equal => {
            let off: Vec<String> = figures
                .iter()
                .zip(&values)
                .skip(1)
                .filter(|(_, v)| !agrees(**v, values[0], tol))
                .map(|(f, v)| {
                    format!(
                        "{} is {} where {} is {}",
                        f.label,
                        figure(*v),
                        figures[0].label,
                        figure(values[0])
                    )
                })
                .collect();
            r.claimed = Some(values[0]);
            r.measured = values.get(1).copied();
            (off.is_empty(), if off.is_empty() { "every figure agrees".to_string() } else { off.join("; ") })
        }
        ConsistencyCheck::Quotient => {
            if values[1] == 0.0 {
                return not_measured(r, format!("{} is 0", figures[1].label));
            }
            let q = values[0] / values[1];
            r.claimed = Some(values[2]);
            r.measured = Some(q);
            // A quotient of the source's own figures is in whatever unit they make (seconds,
            // requests per call): shown as a plain number.
            r.unit = String::new();
            let ok = agrees(q, values[2], tol);
            let what = format!(
                "{} / {} = {} against {} {} ({}{}%)",
                figures[0].label,
                figures[1].label,
                num(q),
                figures[2].label,
                figure(values[2]),
                if q >= values[2] { "+" } else { "" },
                num((q / values[2] - 1.0) * 100.0)
            );
            (ok, what)
        }
    };
    r.verdict = if ok { Verdict::Reproduced } else { Verdict::Contradicted };
    r.explanation = format!(
        "The source's own figures: {}. {} within {}%: {}.",
        cited.join("; "),
        if ok { "Consistent" } else { "INCONSISTENT" },
        figure(tol * 100.0),
        what
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::parse::Cited;

    fn fig(label: &str, value: f64, cited: bool) -> Figure {
        let cited = cited.then(|| Cited {
            git: "https://example.invalid/b".into(),
            commit: "a".repeat(40),
            file: "r/summary.json".into(),
            sha256: "f".repeat(64),
            pointer: format!("/{label}"),
            value,
        });
        let from = (cited.is_none()).then(|| "the load script".to_string());
        Figure { label: label.into(), value, cited, from }
    }

    fn result() -> ClaimResult {
        ClaimResult {
            id: "c".into(),
            kind: crate::claims::Kind::Consistency,
            source: crate::claims::SourceRef {
                file: "r/summary.json".into(),
                section: "figures".into(),
                row: None,
                hardware: None,
                cited: Vec::new(),
            },
            statement: "s".into(),
            verdict: Verdict::NotMeasured,
            judged_as: String::new(),
            claimed: None,
            measured: None,
            interval: None,
            unit: String::new(),
            tolerance: None,
            n: None,
            repeats: None,
            cv: None,
            noisy: false,
            explanation: String::new(),
            environment: Vec::new(),
            cells: Vec::new(),
            evidence: None,
            self_test: None,
            margin: None,
            normalised: None,
            stand_in: Vec::new(),
            disagreeing_runs: Vec::new(),
        }
    }

    #[test]
    fn a_quotient_is_consistent_within_its_tolerance_and_names_every_cited_figure() {
        let figs = [fig("total", 81_555.0, true), fig("rps", 254.855, true), fig("duration", 320.0, false)];
        let r = judge(result(), &figs, ConsistencyCheck::Quotient, 0.01, Perturb::None);
        assert_eq!(r.verdict, Verdict::Reproduced, "{}", r.explanation);
        assert!(r.explanation.contains("r/summary.json#/total = 81555"), "{}", r.explanation);
        assert!(r.explanation.contains("from the load script"), "{}", r.explanation);
        // Halved, 160 s is not 320 s: the check can fail.
        let h = judge(result(), &figs, ConsistencyCheck::Quotient, 0.01, Perturb::Scale(0.5));
        assert_eq!(h.verdict, Verdict::Contradicted);
        // 350 s against 320 s is outside 1 %.
        let figs = [fig("total", 3905.0, true), fig("rps", 11.157, true), fig("duration", 320.0, false)];
        let r = judge(result(), &figs, ConsistencyCheck::Quotient, 0.01, Perturb::None);
        assert_eq!(r.verdict, Verdict::Contradicted);
        assert!(r.explanation.contains("INCONSISTENT") && r.explanation.contains("350"), "{}", r.explanation);
    }

    #[test]
    fn equal_figures_that_differ_are_named_with_both_numbers() {
        let figs = [fig("vus", 10.0, true), fig("script vus", 50.0, false)];
        let r = judge(result(), &figs, ConsistencyCheck::Equal, 0.0, Perturb::None);
        assert_eq!(r.verdict, Verdict::Contradicted);
        assert!(r.explanation.contains("script vus is 50 where vus is 10"), "{}", r.explanation);
        let figs = [fig("vus", 50.0, true), fig("script vus", 50.0, false)];
        assert_eq!(
            judge(result(), &figs, ConsistencyCheck::Equal, 0.0, Perturb::None).verdict,
            Verdict::Reproduced
        );
    }
}
