//! A load's warm-up by rule: a task beside the workers that judges each window of their correct
//! answers by its p50 (`spec::Settling`: the rule itself) and, once the rule or the cap ends
//! warm-up, starts the measured window there. Not the workers' loops, which only read the window.

use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::driver::load::worker::Shared;
use crate::spec::{p50_ms, Settling, StableRule, WarmupReport};

/// Judges the warm-up that started at `t_start` window by window (`rule.window` ms of answers
/// completed, every worker together; the last one cut short at `rule.max`). When it ends, the
/// measured window becomes [now, now + `duration`), `moved` is notified, and what the record says
/// of the warm-up is returned.
pub(super) async fn settle(
    sh: Rc<Shared>,
    rule: StableRule,
    t_start: Instant,
    duration: Duration,
    moved: Rc<Notify>,
) -> WarmupReport {
    let mut settling = Settling::new(rule);
    // A window of 0 (only a hand-made spec has one) would never reach the cap.
    let (window, cap) = (Duration::from_millis(rule.window.max(1)), Duration::from_millis(rule.max));
    let (mut edge, mut calls) = (Duration::ZERO, 0u64);
    loop {
        edge = (edge + window).min(cap);
        tokio::time::sleep_until((t_start + edge).into()).await;
        let mut answers = sh.take_warming(t_start + edge);
        calls += answers.len() as u64;
        let stable = settling.window(p50_ms(&mut answers));
        if stable || edge >= cap {
            // The window starts now, not at the edge judged: whatever completed in between was
            // warm-up to the workers, so it must not be missing from the window.
            let now = Instant::now();
            sh.set_window(now, now + duration);
            sh.keep_warming(false);
            moved.notify_one();
            return settling.report(stable, calls, now.duration_since(t_start).as_secs_f64() * 1e3);
        }
    }
}
