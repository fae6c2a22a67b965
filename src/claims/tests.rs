//! Every claim kind producing each verdict it can have, on records built in memory: absolute,
//! ratio and ordering reproduced, contradicted, inconclusive and not measured; outcomes
//! reproduced, contradicted, inconclusive (the lab failed, not the server) and not measured;
//! soak slopes reproduced, contradicted, inconclusive and not measured (a cell that is no soak);
//! findings. Then the rules an auditor relies on: no verdict from one reading or one run's
//! histogram, noise that widens both ways, the self-test naming a claim that cannot fail, mirrored
//! claims counted as one measurement, and a condition not reproduced making a claim not_measured.

use std::path::Path;

use super::selftest::Status as SelfTestStatus;
use super::*;
use crate::record::tests::sample_record;
use crate::spec::{Failure, FailureReason, Repeat};

const SCENARIO: &str = r#"name = "t"
[[server]]
id = "a"
family = "benchlab-null"
[[server]]
id = "b"
family = "benchlab-null"
[[server]]
id = "a2"
family = "benchlab-null"
[[server]]
id = "z"
family = "benchlab-null"
[[workload]]
kind = "cold_start"
spawns = 5
"#;

const SRC: &str =
    r#"source = { file = "seed.txt", section = "S", hardware = { cpu_model = "cpu", cpus = 2 } }"#;

/// Three repeats of cell `<id>/cold_start` whose samples sit at these levels.
fn repeats(id: &str, levels: &[f64]) -> Vec<Record> {
    levels
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut r = sample_record(id);
            r.cell.server.id = id.into();
            r.environment.host.logical_cpus = 2;
            r.metrics.cold_start.as_mut().unwrap().samples_ms =
                vec![*c, c * 1.01, c * 0.99, c * 1.005, c * 0.995];
            r.cell.repeat = Some(Repeat { index: i as u32, of: levels.len() as u32, fresh_container: true });
            r
        })
        .collect()
}

fn run(claims: &[(&str, &str)], records: &[Record]) -> Audit {
    run_in(SCENARIO, SRC, claims, records)
}

/// `run` on another scenario text, the claims' source line `src`.
fn run_in(scenario: &str, src: &str, claims: &[(&str, &str)], records: &[Record]) -> Audit {
    let mut text = scenario.to_string();
    for (id, body) in claims {
        text.push_str(&format!("\n[[claim]]\nid = \"{id}\"\n{src}\nstatement = \"{id}\"\n{body}\n"));
    }
    let scenario = Scenario::parse(Path::new("t.toml"), text.clone()).unwrap();
    let ids: Vec<String> = scenario.cells().iter().map(|c| c.id()).collect();
    let parsed = parse_claims(Path::new("t.toml"), &text, &ids).unwrap();
    verify(&scenario, &parsed, records, Some("run".into()))
}

fn base_records() -> Vec<Record> {
    let mut v = repeats("a", &[100.0, 101.0, 99.0]);
    v.extend(repeats("b", &[200.0, 210.0, 195.0]));
    v.extend(repeats("a2", &[100.5, 99.5, 100.0]));
    v
}

fn verdict(a: &Audit, id: &str) -> Verdict {
    a.results.iter().find(|r| r.id == id).unwrap().verdict
}

fn abs(cell: &str, value: f64) -> String {
    format!("kind = \"absolute\"\nmeasure = {{ cell = \"{cell}/cold_start\", metric = \"cold_start\" }}\nvalue = {value}\nunit = \"ms\"")
}

fn ratio(num: &str, den: &str, value: f64) -> String {
    format!("kind = \"ratio\"\nnumerator = {{ cell = \"{num}/cold_start\", metric = \"cold_start\" }}\ndenominator = {{ cell = \"{den}/cold_start\", metric = \"cold_start\" }}\nvalue = {value}")
}

fn order(cells: &[&str]) -> String {
    let items: Vec<String> =
        cells.iter().map(|c| format!("{{ cell = \"{c}/cold_start\", metric = \"cold_start\" }}")).collect();
    format!("kind = \"ordering\"\nitems = [{}]", items.join(", "))
}

fn outcome(cell: &str, expect: &str) -> String {
    format!("kind = \"outcome\"\ncell = \"{cell}/cold_start\"\nexpect = \"{expect}\"")
}

#[test]
fn absolute_ratio_and_ordering_reach_every_verdict() {
    let (a1, a2, a3, a4) = (abs("a", 100.0), abs("a", 300.0), abs("a", 115.0), abs("z", 100.0));
    let (r1, r2, r3, r4) =
        (ratio("b", "a", 2.0), ratio("b", "a", 1.0), ratio("b", "a", 2.3), ratio("z", "a", 1.0));
    let (o1, o2, o3, o4) = (order(&["a", "b"]), order(&["b", "a"]), order(&["a", "a2"]), order(&["a", "z"]));
    let claims = [
        ("abs-rep", a1.as_str()),
        ("abs-con", &a2),
        ("abs-inc", &a3),
        ("abs-nm", &a4),
        ("ratio-rep", &r1),
        ("ratio-con", &r2),
        ("ratio-inc", &r3),
        ("ratio-nm", &r4),
        ("order-rep", &o1),
        ("order-con", &o2),
        ("order-inc", &o3),
        ("order-nm", &o4),
    ];
    let a = run(&claims, &base_records());
    for (id, want) in [
        ("abs-rep", Verdict::Reproduced),
        ("abs-con", Verdict::Contradicted),
        ("abs-inc", Verdict::Inconclusive),
        ("abs-nm", Verdict::NotMeasured),
        ("ratio-rep", Verdict::Reproduced),
        ("ratio-con", Verdict::Contradicted),
        ("ratio-inc", Verdict::Inconclusive),
        ("ratio-nm", Verdict::NotMeasured),
        ("order-rep", Verdict::Reproduced),
        ("order-con", Verdict::Contradicted),
        ("order-inc", Verdict::Inconclusive),
        ("order-nm", Verdict::NotMeasured),
    ] {
        assert_eq!(verdict(&a, id), want, "{id}: {:#?}", a.results.iter().find(|r| r.id == id));
    }
    // Every decided claim can fail: halving or doubling its figure changes the verdict.
    assert!(a.cannot_fail().is_empty());
    let st = a.results.iter().find(|r| r.id == "order-rep").unwrap().self_test.clone().unwrap();
    assert_eq!((st.halved, st.status), (Verdict::Contradicted, SelfTestStatus::CanFail));
}

#[test]
fn outcomes_soak_slopes_and_findings() {
    let mut records = base_records();
    // Every repeat of b fails by the server's fault, every one of a2 by the lab's.
    for r in records.iter_mut().filter(|r| r.cell.server.id != "a") {
        let (reason, why) = if r.cell.server.id == "b" {
            (FailureReason::Crash, "exit 1")
        } else {
            (FailureReason::EngineError, "engine went away")
        };
        r.status = crate::record::Status::Failed;
        r.failure = Some(Failure::new(reason, why));
    }
    let soak = "kind = \"soak_slope\"\nmeasure = { cell = \"a/cold_start\", metric = \"rss_slope\" }\nvalue = 0\nunit = \"MiB/h\"\nduration = \"24h\"";
    let finding = "kind = \"finding\"\nfigures = [{ label = \"x\", value = 1 }, { label = \"y\", value = 2 }]\ncheck = \"differ\"\nexplanation = \"e\"";
    let (o1, o2, o3, o4, o5) = (
        outcome("a", "success"),
        outcome("a", "failure"),
        outcome("a2", "failure"),
        outcome("z", "success"),
        outcome("b", "failure"),
    );
    let claims = [
        ("out-rep", o1.as_str()),
        ("out-con", &o2),
        ("out-inc", &o3),
        ("out-nm", &o4),
        ("out-fail-rep", &o5),
        ("soak", soak),
        ("finding", finding),
    ];
    let a = run(&claims, &records);
    assert_eq!(verdict(&a, "out-rep"), Verdict::Reproduced);
    assert_eq!(verdict(&a, "out-con"), Verdict::Contradicted);
    assert_eq!(verdict(&a, "out-inc"), Verdict::Inconclusive, "the lab failed, not the server");
    assert_eq!(verdict(&a, "out-nm"), Verdict::NotMeasured);
    assert_eq!(verdict(&a, "out-fail-rep"), Verdict::Reproduced);
    assert_eq!(verdict(&a, "soak"), Verdict::NotMeasured);
    assert_eq!(verdict(&a, "finding"), Verdict::Finding);
    // An outcome's self-test flips it: a reproduced outcome can fail.
    let st = a.results.iter().find(|r| r.id == "out-rep").unwrap().self_test.clone().unwrap();
    assert_eq!((st.halved, st.status), (Verdict::Contradicted, SelfTestStatus::CanFail));
}

#[test]
fn one_reading_or_one_run_gives_no_verdict() {
    // No repeats: RSS after initialize is one reading, whatever its value.
    let mut one = sample_record("a");
    one.environment.host.logical_cpus = 2;
    let rss = one.metrics.memory.after_initialize.as_ref().unwrap().rss_bytes as f64 / 1e6;
    let body = format!(
        "kind = \"absolute\"\nmeasure = {{ cell = \"a/cold_start\", metric = \"rss_after_initialize\" }}\nvalue = {rss}\nunit = \"MB\""
    );
    let far = format!(
        "kind = \"absolute\"\nmeasure = {{ cell = \"a/cold_start\", metric = \"rss_after_initialize\" }}\nvalue = {}\nunit = \"MB\"",
        rss * 10.0
    );
    let a = run(&[("same", body.as_str()), ("far", &far)], &[one]);
    for id in ["same", "far"] {
        let r = a.results.iter().find(|r| r.id == id).unwrap();
        assert_eq!(r.verdict, Verdict::Inconclusive, "{r:#?}");
        assert!(
            r.explanation.contains("no verdict") && r.explanation.contains("one reading"),
            "{}",
            r.explanation
        );
        assert_eq!(r.self_test.as_ref().unwrap().status, SelfTestStatus::NeverDecides);
    }
}

#[test]
fn noise_widens_both_ways() {
    // A noisy cell (CV ~ 33% across repeats) far from the claim is contradicted; near it, the
    // widened interval straddles the band.
    let mut records = base_records();
    records.extend(repeats("a2", &[300.0, 600.0, 420.0]).into_iter().map(|mut r| {
        r.cell.id = "a2/cold_start".into();
        r
    }));
    records.retain(|r| {
        r.cell.server.id != "a2" || r.metrics.cold_start.as_ref().unwrap().samples_ms[0] >= 300.0
    });
    let (far, near) = (ratio("a2", "a", 20.0), ratio("a2", "a", 4.2));
    let a = run(&[("far", far.as_str()), ("near", &near)], &records);
    let far = a.results.iter().find(|r| r.id == "far").unwrap();
    assert!(far.noisy);
    assert_eq!(far.verdict, Verdict::Contradicted, "{}", far.explanation);
    assert!(far.explanation.contains("widened"), "{}", far.explanation);
    assert_eq!(verdict(&a, "near"), Verdict::Inconclusive);
}

#[test]
fn a_band_too_wide_to_miss_cannot_fail() {
    let wide = format!("{}\ntolerance = 5.0", ratio("b", "a", 2.0));
    let a = run(&[("wide", wide.as_str())], &base_records());
    let r = &a.results[0];
    assert_eq!(r.verdict, Verdict::Reproduced);
    assert_eq!(r.self_test.as_ref().unwrap().status, SelfTestStatus::CannotFail);
    assert_eq!(a.exit_code(), 1, "a claim that cannot fail fails verify");
    assert!(render::markdown(&a).contains("**Cannot fail**"));
}

#[test]
fn mirrored_and_repeated_claims_are_one_measurement() {
    let (ab, ba, ab2) = (ratio("b", "a", 2.0), ratio("a", "b", 0.5), ratio("b", "a", 2.05));
    let a =
        run(&[("ab", ab.as_str()), ("ba", &ba), ("ab2", &ab2), ("other", &abs("a", 100.0))], &base_records());
    assert_eq!(a.evidence.len(), 2, "{:#?}", a.evidence);
    assert_eq!(a.evidence[0].claims, ["ab", "ba", "ab2"]);
    assert_eq!(a.evidence[0].verdict, Some(Verdict::Reproduced));
    let (per, mixed) = evidence::counts(&a.evidence);
    assert_eq!((per[0], mixed), ((Verdict::Reproduced, 2), 0));
}

#[test]
fn a_condition_not_reproduced_is_not_measured() {
    let body = format!("{}\nunmet_condition = \"the image precompiles bytecode\"", abs("a", 300.0));
    let a = run(&[("cond", body.as_str())], &base_records());
    let r = &a.results[0];
    assert_eq!(r.verdict, Verdict::NotMeasured);
    assert!(r.explanation.contains("precompiles bytecode") && r.explanation.contains("contradicted"));
    assert!(r.self_test.is_none());
}

#[test]
fn deviations_from_the_source_statement_are_derived_for_records_that_lack_them() {
    let text = format!(
        "{SCENARIO}\n[source]\nhardware = {{ cpu_model = \"AMD EPYC\", cpus = 8 }}\npackages = {{ mcp = \"1.1.2\" }}\n\n[[claim]]\nid = \"c\"\n{SRC}\nstatement = \"c\"\n{}\n",
        abs("a", 100.0)
    );
    let scenario = Scenario::parse(Path::new("t.toml"), text.clone()).unwrap();
    let ids: Vec<String> = scenario.cells().iter().map(|c| c.id()).collect();
    let parsed = parse_claims(Path::new("t.toml"), &text, &ids).unwrap();
    let mut records = base_records();
    for r in &mut records {
        r.environment.deviations.clear();
        r.environment.image.packages =
            vec![crate::record::manifest::Package { name: "mcp".into(), version: "1.30.0".into() }];
    }
    let a = verify(&scenario, &parsed, &records, Some("run".into()));
    let notes = &a.results[0].environment;
    assert!(
        notes.contains(&"deviation: this cell ran mcp 1.30.0 where the source states mcp 1.1.2".to_string()),
        "{notes:#?}"
    );
    assert!(
        notes.iter().any(|n| n.starts_with("deviation: the source measured on AMD EPYC × 8 CPUs")),
        "{notes:#?}"
    );
    // Recorded once and derived again: stated once.
    records[0].environment.deviations =
        vec!["this cell ran mcp 1.30.0 where the source states mcp 1.1.2".into()];
    let a = verify(&scenario, &parsed, &records, Some("run".into()));
    let n = a.results[0].environment.iter().filter(|n| n.contains("mcp 1.30.0")).count();
    assert_eq!(n, 1);
}

#[test]
fn a_soak_slope_is_judged_against_the_larger_of_the_claim_and_the_floor() {
    use crate::spec::{LoadMetrics, SoakFigures, Workload};
    use crate::stats::Slope;
    const MIB: f64 = 1_048_576.0;
    // One soak run of a, b and z with these RSS slopes (MiB/h); a floor of 1 MiB/h.
    let soak_run = |id: &str, lower: f64, upper: f64| {
        let mut r = sample_record(id);
        r.cell.server.id = id.into();
        r.cell.workload = Workload::Soak {
            tool: "echo".into(),
            workers: 4,
            rate: None,
            lifecycle: Default::default(),
            idle_before_ms: 60_000,
            ramp_ms: 60_000,
            steady_ms: 1_800_000,
            idle_after_ms: 300_000,
            interval_ms: 1_000,
            leak_floor_bytes_per_hour: 1 << 20,
            cycles: 0,
            cycle_load_ms: 0,
            cycle_idle_ms: 0,
        };
        let slope = Slope {
            estimate: (lower + upper) / 2.0 * MIB,
            lower: lower * MIB,
            upper: upper * MIB,
            n: 1_800,
            n_effective: 90.0,
        };
        r.metrics.load = Some(Box::new(LoadMetrics {
            soak: Some(SoakFigures {
                rss_bytes_per_hour: Some(slope),
                leak_floor_bytes_per_hour: 1 << 20,
                leak: lower * MIB > MIB,
                ..Default::default()
            }),
            ..Default::default()
        }));
        r
    };
    let once = [soak_run("a", -0.2, 0.4), soak_run("b", 3.0, 5.0), soak_run("z", 0.5, 2.0)];
    // Each soaked twice: a second run of the same cells.
    let mut records = once.to_vec();
    records.extend(once.iter().cloned().map(|mut r| {
        r.run_id = "run2".into();
        r
    }));
    let claim = |cell: &str| {
        format!("kind = \"soak_slope\"\nmeasure = {{ cell = \"{cell}/cold_start\", metric = \"rss_slope\" }}\nvalue = 0\nunit = \"MiB/h\"\nduration = \"24h\"")
    };
    let (ca, cb, cz) = (claim("a"), claim("b"), claim("z"));
    // One run of a soak is one reading: no verdict, whatever it shows.
    let single = run(&[("none", ca.as_str()), ("leak", &cb)], &once);
    assert_eq!(
        (verdict(&single, "none"), verdict(&single, "leak")),
        (Verdict::Inconclusive, Verdict::Inconclusive)
    );
    let why = &single.results[0].explanation;
    assert!(why.contains("one run's slope is one reading") && why.contains("in this run alone"), "{why}");
    let a = run(&[("none", ca.as_str()), ("leak", &cb), ("open", &cz)], &records);
    assert_eq!(verdict(&a, "none"), Verdict::Reproduced);
    assert_eq!(verdict(&a, "leak"), Verdict::Contradicted);
    assert_eq!(verdict(&a, "open"), Verdict::Inconclusive, "the interval straddles the floor");
    let none = a.results.iter().find(|r| r.id == "none").unwrap();
    assert!(none.explanation.contains("over 30 min of steady load"), "{}", none.explanation);
    assert!(none.explanation.contains("The claim is over 24h"), "{}", none.explanation);
    assert_eq!(none.interval.map(|i| (i.lower, i.upper)), Some((-0.2, 0.4)));
    // The self-test adds a leak at the threshold: a "no leak" verdict can fail.
    let st = none.self_test.clone().unwrap();
    assert_eq!((st.doubled, st.status), (Verdict::Contradicted, SelfTestStatus::CanFail));
    assert!(a.cannot_fail().is_empty());
}

#[test]
fn memory_released_over_a_soaks_cycles_has_an_interval_and_one_disconnection_has_none() {
    use crate::spec::{LoadMemory, LoadMetrics, MemoryLevel, SoakCycle, SoakFigures, TreeMemory};
    const MIB: u64 = 1 << 20;
    let level = |mib: u64| MemoryLevel {
        estimate: mib * MIB,
        lower: mib * MIB,
        upper: mib * MIB,
        n: 20,
        from_ms: 0,
        to_ms: 5_000,
    };
    // Idle at 50 MiB; the load peaks at 80 MiB, then each disconnection leaves `afters[k]` MiB
    // (the load's first, then the cycles', each cycle peaking at `peak` MiB).
    let soak_run = |id: &str, afters: &[u64], peak: u64| {
        let mut r = sample_record(id);
        r.cell.server.id = id.into();
        r.metrics.memory.under_load = Some(LoadMemory {
            peak_during: Some(TreeMemory { rss_bytes: 80 * MIB, hwm_bytes: 80 * MIB, processes: 1 }),
            after_level: Some(level(afters[0])),
            ..Default::default()
        });
        let cycles = afters[1..]
            .iter()
            .map(|a| SoakCycle {
                ok: 100,
                failed: 0,
                peak_rss_bytes: Some(peak * MIB),
                after: Some(level(*a)),
            })
            .collect();
        r.metrics.load = Some(Box::new(LoadMetrics {
            soak: Some(SoakFigures { idle_before: Some(level(50)), cycles, ..Default::default() }),
            ..Default::default()
        }));
        r
    };
    let records = [
        // Back to 50-52 MiB every time: 93-100 % released.
        soak_run("a", &[50, 51, 50, 52, 50], 80),
        // Never given back: 0 % each time, and the cycles' peaks sit on what the load kept.
        soak_run("b", &[80, 82, 81, 82, 80], 82),
        // The load's share alone.
        soak_run("z", &[50], 80),
    ];
    let claim = |cell: &str| {
        format!("kind = \"absolute\"\nmeasure = {{ cell = \"{cell}/cold_start\", metric = \"rss_released\" }}\nvalue = 100\nunit = \"%\"")
    };
    let (ca, cb, cz) = (claim("a"), claim("b"), claim("z"));
    // One run: the disconnections are one server process's, so no verdict either way.
    let a = run(&[("clean", ca.as_str()), ("kept", &cb), ("once", &cz)], &records);
    assert_eq!(verdict(&a, "clean"), Verdict::Inconclusive);
    assert_eq!(verdict(&a, "kept"), Verdict::Inconclusive);
    assert_eq!(verdict(&a, "once"), Verdict::Inconclusive, "one disconnection is one reading");
    // Two runs of each: judged between them.
    let mut twice = records.to_vec();
    twice.extend(records.iter().cloned().map(|mut r| {
        r.run_id = "run2".into();
        r
    }));
    let two = run(&[("clean", ca.as_str()), ("kept", &cb)], &twice);
    assert_eq!((verdict(&two, "clean"), verdict(&two, "kept")), (Verdict::Reproduced, Verdict::Contradicted));
    let clean = a.results.iter().find(|r| r.id == "clean").unwrap();
    assert_eq!(clean.n, Some(5));
    let i = clean.interval.unwrap();
    // Shares 1, 29/30, 1, 28/30, 1: mean 0.98, sd 0.0298, t(4) = 2.776.
    assert!((i.estimate - 0.98).abs() < 1e-9, "{i:?}");
    assert!((i.upper - i.estimate - 2.776 * 0.029_814 / 5f64.sqrt()).abs() < 1e-4, "{i:?}");
    assert!(a.cannot_fail().is_empty(), "{:?}", a.cannot_fail());
    // The bounds read in the estimate's unit: a share in %.
    let md = render::markdown(&a);
    assert!(md.contains("98.0% [94.3–102]"), "{md}");
    let kept = a.results.iter().find(|r| r.id == "kept").unwrap();
    assert!(
        kept.explanation.contains("ran once: its 5 disconnections are of one server process"),
        "{}",
        kept.explanation
    );
    // A cycle whose load grew nothing (peak at the idle level) is left out, not counted as 0.
    let flat = soak_run("a", &[50, 51, 50, 52, 50, 50], 80);
    let mut flat = flat;
    if let Some(s) = flat.metrics.load.as_mut().and_then(|l| l.soak.as_mut()) {
        s.cycles[4].peak_rss_bytes = Some(51 * MIB);
    }
    let a = run(&[("clean", ca.as_str())], &[flat, records[1].clone(), records[2].clone()]);
    let clean = a.results.iter().find(|r| r.id == "clean").unwrap();
    assert_eq!((clean.verdict, clean.n), (Verdict::Inconclusive, Some(5)));
}

/// Three repeats of cell `<id>/cold_start` with a load: this error rate, HTTP request rate, and
/// an `echo` step whose calls take `echo_ms` (±2 %).
fn loads(id: &str, error_rate: f64, http_rps: f64, echo_ms: f64) -> Vec<Record> {
    (0..3u32)
        .map(|i| {
            let mut r = sample_record(id);
            r.cell.server.id = id.into();
            r.cell.repeat = Some(Repeat { index: i, of: 3, fresh_container: true });
            let mut h = crate::stats::latency_histogram();
            for k in 0..200u64 {
                let ms = echo_ms * (0.98 + 0.0002 * k as f64) * (1.0 + 0.01 * f64::from(i));
                crate::stats::record(&mut h, std::time::Duration::from_secs_f64(ms / 1000.0));
            }
            let step = crate::spec::HistogramMetric {
                summary: crate::stats::summarize(&h).unwrap(),
                histogram: crate::stats::encode_histogram(&h),
                warmup: None,
            };
            r.metrics.load = Some(Box::new(crate::spec::LoadMetrics {
                error_rate,
                http_rps: Some(http_rps * (1.0 + 0.01 * f64::from(i))),
                steps: [("echo".to_string(), step)].into_iter().collect(),
                ..Default::default()
            }));
            r
        })
        .collect()
}

#[test]
fn a_published_zero_error_rate_is_judged_in_percentage_points_and_can_fail() {
    let claim = |cell: &str| {
        format!("kind = \"absolute\"\nmeasure = {{ cell = \"{cell}/cold_start\", metric = \"error_rate\" }}\nvalue = 0\nunit = \"%\"")
    };
    let mut records = loads("a", 0.0, 500.0, 2.0);
    records.extend(loads("b", 0.02, 500.0, 2.0));
    let (ca, cb) = (claim("a"), claim("b"));
    let a = run(&[("none", ca.as_str()), ("some", cb.as_str())], &records);
    let none = a.results.iter().find(|r| r.id == "none").unwrap();
    assert_eq!(none.verdict, Verdict::Reproduced, "{}", none.explanation);
    assert!(none.explanation.contains("percentage points"), "{}", none.explanation);
    // 0 halved and doubled is still 0: the self-test moves it by twice the tolerance instead.
    assert_eq!(none.self_test.as_ref().unwrap().status, SelfTestStatus::CanFail);
    assert_eq!(verdict(&a, "some"), Verdict::Contradicted);
    assert!(render::table(&a).contains("±0.1 pp"), "{}", render::table(&a));
}

#[test]
fn a_steps_latency_and_the_http_request_rate_are_selected_from_the_load() {
    let mut records = loads("a", 0.0, 500.0, 2.0);
    records.extend(loads("b", 0.0, 1000.0, 8.0));
    let step = |cell: &str, v: f64| {
        format!("kind = \"absolute\"\nmeasure = {{ cell = \"{cell}/cold_start\", metric = \"latency\", stat = \"p95\", step = \"echo\" }}\nvalue = {v}\nunit = \"ms\"")
    };
    let rps = "kind = \"ratio\"\nnumerator = { cell = \"b/cold_start\", metric = \"http_rps\" }\ndenominator = { cell = \"a/cold_start\", metric = \"http_rps\" }\nvalue = 2";
    let missing = "kind = \"absolute\"\nmeasure = { cell = \"a/cold_start\", metric = \"latency\", step = \"tools/list\" }\nvalue = 1\nunit = \"ms\"";
    let faster = "kind = \"ordering\"\nitems = [{ cell = \"a/cold_start\", metric = \"latency\", stat = \"mean\", step = \"echo\" }, { cell = \"b/cold_start\", metric = \"latency\", stat = \"mean\", step = \"echo\" }]";
    let (s_a, s_b) = (step("a", 2.0), step("b", 2.0));
    let a = run(
        &[
            ("echo-a", s_a.as_str()),
            ("echo-b", s_b.as_str()),
            ("rps", rps),
            ("missing", missing),
            ("faster", faster),
        ],
        &records,
    );
    let e = a.results.iter().find(|r| r.id == "echo-a").unwrap();
    assert!(e.measured.unwrap() > 1.9 && e.measured.unwrap() < 2.2, "{e:?}");
    assert_eq!(verdict(&a, "echo-b"), Verdict::Contradicted);
    let r = a.results.iter().find(|r| r.id == "rps").unwrap();
    assert!((r.measured.unwrap() - 2.0).abs() < 1e-9, "{r:?}");
    let m = a.results.iter().find(|r| r.id == "missing").unwrap();
    assert_eq!(m.verdict, Verdict::NotMeasured);
    assert!(m.explanation.contains("no step \"tools/list\" (its steps: echo)"), "{}", m.explanation);
    assert_eq!(verdict(&a, "faster"), Verdict::Reproduced);
}

#[test]
fn an_absolute_figure_from_other_hardware_is_judged_normalised_and_says_so() {
    let elsewhere =
        r#"source = { file = "seed.txt", section = "S", hardware = { cpu_model = "elsewhere", cpus = 64 } }"#;
    let fig = format!("{}\nrelative_to = \"ref\"", abs("b", 100.0));
    let (reference, fig) = (abs("a", 50.0), fig);
    let a = run_in(SCENARIO, elsewhere, &[("ref", reference.as_str()), ("fig", &fig)], &base_records());
    let r = a.results.iter().find(|r| r.id == "fig").unwrap();
    assert_eq!(r.verdict, Verdict::Reproduced, "{}", r.explanation);
    let n = r.normalised.as_ref().expect("judged through the reference");
    assert_eq!(n.reference, "ref");
    // b is about 200 ms, a about 100 ms: the ratio 2 times the source's 50 ms is 100 ms.
    assert!((n.raw_measured - 200.0).abs() < 10.0 && (n.reference_measured - 100.0).abs() < 5.0, "{n:?}");
    assert!((n.ratio_claimed - 2.0).abs() < 1e-12 && (n.normalised - 100.0).abs() < 5.0, "{n:?}");
    assert_eq!(r.verdict_text(), "reproduced (normalised)");
    let md = render::markdown(&a);
    assert!(md.contains("- **Normalised:** raw: lab 2"), "{md}");
    assert!(md.contains("normalised 1") && md.contains("against 100 ms (raw: lab 2"), "{md}");
    // A margin on every band verdict: where the tolerance would flip it.
    let m = r.margin.expect("a band verdict has a margin");
    assert!(m.flips_at.is_some_and(|f| f < 0.15) && m.edge_distance.is_some_and(|d| d > 0.0), "{m:?}");
}

#[test]
fn the_exit_gate_separates_findings_from_method_defects() {
    let con = ratio("b", "a", 1.0);
    let mut a = run(&[("ratio-con", con.as_str())], &base_records());
    assert_eq!(a.gate, vec![Gate::CannotFail]);
    assert_eq!(a.exit_code(), 0, "a contradicted claim is a finding, not a defect, by default");
    a.gate = vec![Gate::Contradicted];
    assert_eq!(a.exit_code(), 1);
    a.gate = vec![Gate::Inconclusive];
    assert_eq!(a.exit_code(), 0);
    assert!(render::markdown(&a).contains("**Exit gate:** --fail-on inconclusive (0 caught) → exit 0."));
    assert_eq!("contradicted".parse::<Gate>(), Ok(Gate::Contradicted));
    assert!("everything".parse::<Gate>().unwrap_err().contains("cannot-fail, contradicted, inconclusive"));
}

#[test]
fn every_run_counts_and_the_runs_that_disagree_are_named() {
    let claim = ratio("b", "a", 2.0);
    let first = base_records();
    // A second run in which b is as fast as a.
    let mut second = repeats("a", &[100.0, 101.0, 99.0]);
    second.extend(repeats("b", &[100.0, 102.0, 99.0]));
    for r in &mut second {
        r.run_id = "run2".into();
    }
    assert_eq!(verdict(&run(&[("c", claim.as_str())], &first), "c"), Verdict::Reproduced);
    assert_eq!(verdict(&run(&[("c", claim.as_str())], &second), "c"), Verdict::Contradicted);
    let all: Vec<Record> = first.iter().chain(&second).cloned().collect();
    let runs = runs::RunRead::split("dir", &all);
    assert_eq!(
        runs.iter().map(|r| (r.run_id.as_str(), r.records)).collect::<Vec<_>>(),
        [("run", 9), ("run2", 6)]
    );
    let text = format!("{SCENARIO}\n[[claim]]\nid = \"c\"\n{SRC}\nstatement = \"c\"\n{claim}\n");
    let scenario = Scenario::parse(Path::new("t.toml"), text.clone()).unwrap();
    let ids: Vec<String> = scenario.cells().iter().map(|c| c.id()).collect();
    let parsed = parse_claims(Path::new("t.toml"), &text, &ids).unwrap();
    let a = verify_runs(&scenario, &parsed, &all, runs, vec![Gate::CannotFail], Some("dir".into()));
    let r = &a.results[0];
    assert_eq!((r.verdict, r.repeats), (Verdict::Inconclusive, Some(6)), "{}", r.explanation);
    let named: Vec<(&str, Verdict)> =
        r.disagreeing_runs.iter().map(|d| (d.run_id.as_str(), d.verdict)).collect();
    assert_eq!(named, [("run", Verdict::Reproduced), ("run2", Verdict::Contradicted)]);
    let md = render::markdown(&a);
    assert!(md.contains("2 runs judged together") && md.contains("run2 alone: contradicted"), "{md}");
    // A run's records share a cell's environment only with the same image on the same CPU.
    let key = runs::EnvKey::of(&first);
    let mut moved = second[0].clone();
    assert!(key.shares(&moved));
    moved.environment.image.image_id = "sha256:other".into();
    assert!(!key.shares(&moved));
}

#[test]
fn an_outcome_compares_the_failures_message_and_a_stand_in_says_so() {
    let mut records = base_records();
    for r in records.iter_mut().filter(|r| r.cell.server.id == "b") {
        r.status = crate::record::Status::Failed;
        r.failure =
            Some(Failure::new(FailureReason::Crash, "Traceback\nModuleNotFoundError: No module named 'x'"));
    }
    let with =
        |detail: &str| format!("{}\nreason = \"crash\"\ndetail = \"{detail}\"", outcome("b", "failure"));
    let (same, other) = (with("ModuleNotFoundError: No module"), with("ExceptionGroup: unhandled errors"));
    let scenario =
        SCENARIO.replace("id = \"b\"\n", "id = \"b\"\nstand_in = \"the source's unpublished server\"\n");
    let a = run_in(&scenario, SRC, &[("same", same.as_str()), ("other", &other)], &records);
    assert_eq!(verdict(&a, "same"), Verdict::Reproduced);
    let r = a.results.iter().find(|r| r.id == "other").unwrap();
    assert_eq!(r.verdict, Verdict::Contradicted, "the category matches, the message does not");
    assert!(r.explanation.contains("another failure"), "{}", r.explanation);
    assert_eq!(
        r.stand_in,
        ["b: the lab's `weekly` suite server, standing in for the source's unpublished server"]
    );
    assert_eq!(r.verdict_text(), "contradicted (on a stand-in)");
    assert!(r.environment.iter().any(|e| e.contains("this cell ran a stand-in")), "{:?}", r.environment);
    // A message pattern is a failure's, and a regular expression.
    for (body, want) in [
        (format!("{}\ndetail = \"x\"", outcome("b", "success")), "only with expect = \"failure\""),
        (format!("{}\ndetail = \"(\"", outcome("b", "failure")), "not a regular expression"),
    ] {
        let text = format!("{SCENARIO}\n[[claim]]\nid = \"c\"\n{SRC}\nstatement = \"c\"\n{body}\n");
        let ids: Vec<String> = Scenario::parse(Path::new("t.toml"), text.clone())
            .unwrap()
            .cells()
            .iter()
            .map(|c| c.id())
            .collect();
        let e = parse_claims(Path::new("t.toml"), &text, &ids).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}
