//! Tests of the noise model: runs as the unit (between-run intervals), A/A controls and their
//! drift, and A/A sweeps — one release measured many times under different labels — that must
//! name no step, whatever the host does during the run.

use super::tests::{jitter, record};
use super::*;
use crate::spec::{ControlAt, Order, Repeat, Schedule};
use crate::stats;

/// Cold-start records of `labels` releases × `repeats` runs, plus A/A controls of the first
/// and last label, in a run order (`shuffle`: random, else as written), each run's level set by
/// `host(position, of)` (a drift of the host across the run) times a per-run jitter of ±`spread`.
fn aa_run(
    labels: usize,
    repeats: u32,
    shuffle: bool,
    spread: f64,
    host: impl Fn(usize, usize) -> f64,
) -> Vec<Record> {
    let name = |k: usize| format!("1.{k}.0");
    let mut cells: Vec<(usize, u32)> = Vec::new();
    for r in 0..repeats {
        let mut round: Vec<(usize, u32)> = (0..labels).map(|k| (k, r)).collect();
        if shuffle {
            stats::seeded_shuffle(&mut round, 77 + u64::from(r));
        }
        cells.extend(round);
    }
    let controls = [0, labels - 1];
    let half = cells.len() / 2;
    let mut order: Vec<(usize, Option<u32>, Option<ControlAt>)> =
        controls.iter().map(|&k| (k, None, Some(ControlAt::Start))).collect();
    order.extend(cells[..half].iter().map(|&(k, r)| (k, Some(r), None)));
    order.extend(controls.iter().map(|&k| (k, None, Some(ControlAt::Middle))));
    order.extend(cells[half..].iter().map(|&(k, r)| (k, Some(r), None)));
    order.extend(controls.iter().map(|&k| (k, None, Some(ControlAt::End))));
    let of = order.len();
    order
        .into_iter()
        .enumerate()
        .map(|(pos, (k, repeat, control))| {
            let level = 300.0 * host(pos, of) * (1.0 + spread * jitter(pos * 31 + k));
            let mut r = record(&format!("mcp-{}", name(k)), &name(k), "cold_start", level);
            r.cell.repeat = repeat.map(|index| Repeat { index, of: repeats, fresh_container: true });
            r.schedule = Some(Schedule {
                order: if shuffle { Order::Random } else { Order::AsWritten },
                seed: shuffle.then_some(77),
                position: pos as u32,
                of: of as u32,
                control,
            });
            r
        })
        .collect()
}

/// Makes every release from `1.<first>.0` on `factor` times slower to start.
fn slower_from(rs: &mut [Record], first: usize, factor: f64) {
    for r in rs {
        let k: usize = r.cell.server.sdk_version.split('.').nth(1).unwrap().parse().unwrap();
        if k >= first {
            for s in &mut r.metrics.cold_start.as_mut().unwrap().samples_ms {
                *s *= factor;
            }
        }
    }
}

fn cold_steps(rs: &[Record]) -> Vec<Step> {
    let hs = histories(rs);
    assert_eq!(hs.len(), 1);
    hs[0].steps.iter().filter(|s| s.metric == HistoryMetric::ColdStart).cloned().collect()
}

#[test]
fn runs_are_the_unit_when_a_version_ran_more_than_once() {
    let rs = aa_run(5, 3, true, 0.10, |_, _| 1.0);
    let h = &histories(&rs)[0];
    let m = &h.metrics[0];
    assert_eq!(m.metric, HistoryMetric::ColdStart);
    for p in m.points.iter().flatten() {
        assert!(p.between && p.runs == 3 && p.n == 24, "{p:?}");
        let (ci, within) = (p.ci.unwrap(), p.within.unwrap());
        // Each run's samples are within 7 ms of each other: the pooled samples' interval is
        // narrower than the runs' spread of ±10 %, which the between-run interval sees.
        assert!(within.width() < ci.width() / 2.0, "{p:?}");
        assert!(ci.contains(p.value));
    }
    // The controls are not points: every version has its three runs, and the drift is shown.
    assert_eq!(m.controls.iter().map(|c| c.version.as_str()).collect::<Vec<_>>(), ["1.0.0", "1.4.0"]);
    assert!(m.controls.iter().all(|c| c.values.len() == 3 && c.values[0].0 == ControlAt::Start));
    assert!(m.control_drift.unwrap() > 0.0);
    assert!(point_text(m.unit, m.points[0].as_ref().unwrap()).contains(", 3 runs; within "));
}

#[test]
fn an_aa_sweep_names_no_step_however_the_host_drifts() {
    // A quiet host: 30 labels of one release, 3 runs each, runs ±8 % apart.
    assert_eq!(cold_steps(&aa_run(30, 3, true, 0.08, |_, _| 1.0)), []);
    // The host gets 30 % slower two thirds through the run (another tenant arrives). In random
    // order the change spreads over every label: no step.
    let tenant = |pos: usize, of: usize| if pos * 3 > of * 2 { 1.3 } else { 1.0 };
    assert_eq!(cold_steps(&aa_run(30, 3, true, 0.05, tenant)), []);
    // A slow drift of +40 % from start to end: none either.
    let warming = |pos: usize, of: usize| 1.0 + 0.4 * pos as f64 / of as f64;
    assert_eq!(cold_steps(&aa_run(30, 3, true, 0.05, warming)), []);
}

#[test]
fn controls_keep_a_host_change_in_version_order_from_being_named() {
    // As written, once each, the tenant's arrival lines up with label 20: without the controls
    // that is named a step; with them, the controls moved as much, so it is not.
    let tenant = |pos: usize, of: usize| if pos * 3 > of * 2 { 1.3 } else { 1.0 };
    let rs = aa_run(30, 1, false, 0.02, tenant);
    let without: Vec<Record> =
        rs.iter().filter(|r| r.schedule.as_ref().unwrap().control.is_none()).cloned().collect();
    assert_eq!(cold_steps(&without).len(), 1, "the host's change looks like a release's");
    let m = &histories(&rs)[0].metrics[0];
    assert!(m.control_drift.unwrap() > 0.25, "{:?}", m.controls);
    assert_eq!(cold_steps(&rs), [], "the controls drifted as much as the step");
}

#[test]
fn a_real_step_beyond_the_controls_drift_is_still_named() {
    // Releases from 1.20.0 on are 60 % slower; the host drifts 10 % over the run.
    let mut rs = aa_run(30, 3, true, 0.04, |pos, of| 1.0 + 0.1 * pos as f64 / of as f64);
    slower_from(&mut rs, 20, 1.6);
    let steps = cold_steps(&rs);
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(steps[0].to_version, "1.20.0");
}

#[test]
fn a_step_on_a_noisy_host_is_named_by_its_neighbours_runs() {
    // Runs ±25 % apart (a host the hypervisor steals from), and releases from 1.10.0 on twice as
    // slow. Each neighbour's own between-run interval (t = 4.30 for three runs) is wide; Welch's
    // t on the two neighbours' six runs still tells them apart.
    let mut rs = aa_run(30, 3, true, 0.25, |_, _| 1.0);
    slower_from(&mut rs, 10, 2.0);
    let steps = cold_steps(&rs);
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!((steps[0].from_version.as_str(), steps[0].to_version.as_str()), ("1.9.0", "1.10.0"));
    // The same host without the step names none.
    assert_eq!(cold_steps(&aa_run(30, 3, true, 0.25, |_, _| 1.0)), []);
}
