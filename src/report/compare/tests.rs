//! Tests of the comparison: verdicts, MOVER intervals, formats, failed and unmatched cells.

use super::render::show_short;
use super::*;
use crate::record::tests::sample_record;
use crate::record::Status;
use crate::stats;

fn iv(lower: f64, upper: f64) -> Interval {
    Interval { estimate: (lower + upper) / 2.0, lower, upper, confidence: 0.95 }
}

#[test]
fn verdicts_need_the_whole_interval_beyond_the_threshold() {
    assert_eq!(Verdict::judge(&iv(1.06, 1.2), 5.0), Verdict::Slower);
    assert_eq!(Verdict::judge(&iv(1.04, 1.2), 5.0), Verdict::Inconclusive);
    assert_eq!(Verdict::judge(&iv(0.97, 1.04), 5.0), Verdict::Unchanged);
    assert_eq!(Verdict::judge(&iv(0.8, 0.95), 5.0), Verdict::Faster);
    assert_eq!(Verdict::judge(&iv(0.8, 0.96), 5.0), Verdict::Inconclusive);
    assert_eq!(Verdict::judge(&iv(0.5, 2.0), 5.0), Verdict::Inconclusive);
    assert_eq!(Verdict::judge(&iv(f64::NAN, 1.0), 5.0), Verdict::Inconclusive);
    assert_eq!(Verdict::Slower.label(Unit::Bytes), "larger");
    // Swapping the runs inverts the interval and swaps the verdict.
    let i = iv(1.051, 1.3);
    let inv =
        Interval { estimate: 1.0 / i.estimate, lower: 1.0 / i.upper, upper: 1.0 / i.lower, confidence: 0.95 };
    assert_eq!((Verdict::judge(&i, 5.0), Verdict::judge(&inv, 5.0)), (Verdict::Slower, Verdict::Faster));
}

#[test]
fn mover_combines_independent_intervals_on_the_log_scale() {
    let a = Interval { estimate: 1.0, lower: 0.9, upper: 1.1, confidence: 0.95 };
    let b = Interval { estimate: 2.0, lower: 1.8, upper: 2.2, confidence: 0.95 };
    let r = stats::mover_ratio(&a, &b);
    assert_eq!(r.estimate, 2.0);
    // Narrower than dividing the bounds, wider than either alone.
    assert!(r.lower > 1.8 / 1.1 && r.upper < 2.2 / 0.9, "{r:?}");
    assert!(r.lower < 2.0 * 0.9 / 1.0 * 1.0 && r.upper > 2.0 * 1.1, "{r:?}");
    let flat = Interval { estimate: 3.0, lower: 3.0, upper: 3.0, confidence: 0.95 };
    assert_eq!(
        stats::mover_ratio(&flat, &flat),
        Interval { estimate: 1.0, lower: 1.0, upper: 1.0, confidence: 0.95 }
    );
}

#[test]
fn hashes_are_shortened_for_people() {
    let h = serde_json::json!("0123456789abcdef".repeat(4));
    assert_eq!(show_short(Some(&h)), "0123456789ab…");
    let id = serde_json::json!(format!("sha256:{}", "ab".repeat(32)));
    assert_eq!(show_short(Some(&id)), "sha256:abababababab…");
    assert_eq!(show_short(Some(&serde_json::json!("1"))), "1");
}

#[test]
fn formats_parse_from_their_names() {
    for f in CompareFormat::ALL {
        assert_eq!(f.as_str().parse::<CompareFormat>(), Ok(f));
    }
    assert!("csv".parse::<CompareFormat>().unwrap_err().to_string().contains("markdown"));
}

#[test]
fn failed_and_unmatched_cells_are_listed_not_compared() {
    let a = vec![sample_record("x"), sample_record("gone")];
    let mut failed = sample_record("x");
    failed.status = Status::Failed;
    failed.failure = Some(crate::spec::Failure::new(crate::spec::FailureReason::Crash, "boom"));
    let b = vec![failed, sample_record("new")];
    let c = compare(&a, &b, 5.0);
    assert!(c.cells.is_empty());
    assert_eq!(
        c.failed,
        [FailedCell { cell: "x/cold_start".into(), status_a: "ok".into(), status_b: "failed: crash".into() }]
    );
    assert_eq!(
        (c.only_in_a.as_slice(), c.only_in_b.as_slice()),
        (&["gone/cold_start".to_string()][..], &["new/cold_start".to_string()][..])
    );
    assert!(gate(&c, 0.0));
    let text = compare_text(&c);
    assert!(
        text.contains("only in a: gone/cold_start") && text.contains("a: ok, b: failed: crash"),
        "{text}"
    );
}

#[test]
fn runs_are_the_unit_with_two_or_more_runs_a_side() {
    // Each run's cold starts agree within 1 ms, but runs differ by ±8 %: the within-run interval
    // calls b slower, the between-run one cannot tell.
    let runs = |levels: &[f64], run: &str| -> Vec<crate::record::Record> {
        levels
            .iter()
            .enumerate()
            .map(|(i, &ms)| {
                let mut r = sample_record("s");
                r.run_id = run.into();
                r.cell.repeat = Some(crate::spec::Repeat { index: i as u32, of: 3, fresh_container: true });
                r.metrics.cold_start.as_mut().unwrap().samples_ms =
                    (0..10).map(|k| ms + f64::from(k) * 0.1).collect();
                r
            })
            .collect()
    };
    let a = runs(&[100.0, 92.0, 108.0], "a");
    let b = runs(&[110.0, 101.0, 118.0], "b");
    let c = compare(&a, &b, 5.0);
    let m = c.metrics().find(|m| m.metric == CompareMetric::ColdStart).unwrap();
    assert_eq!((m.method, m.runs, m.n_a), (Method::BetweenRuns, Some((3, 3)), 3));
    assert_eq!(m.verdict, Verdict::Inconclusive, "{m:?}");
    let within = m.within.unwrap();
    assert!(within.lower > 1.05, "the latest runs alone look slower: {within:?}");
    assert!(m.ratio.lower < 1.0 && m.ratio.upper > 1.1, "{:?}", m.ratio);
    assert!(compare_text(&c).contains("between runs (within "));
    // One run a side: the within-run judgement stands.
    let one = compare(&a[..1], &b[..1], 5.0);
    assert_ne!(
        one.metrics().find(|m| m.metric == CompareMetric::ColdStart).unwrap().method,
        Method::BetweenRuns
    );
}
