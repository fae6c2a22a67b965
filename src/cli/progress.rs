//! The orchestrator's events rendered on stderr for `run`, `build`, `lock` and `base`: bars and
//! spinners on a terminal, plain lines elsewhere (CI logs). It renders; it decides nothing.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::backend::{CellEvent, PrepareEvent};
use crate::orchestrate::view::eta_text;
use crate::orchestrate::Event;

/// Renders orchestrator events: bars on a terminal, plain lines elsewhere (CI logs).
pub(super) struct Progress {
    bar: Option<ProgressBar>,
    tty: bool,
    /// Cells run at once: plain lines, not one bar.
    parallel: bool,
    /// A cluster's cells by state ("queued", "running"), and how many finished.
    dispatched: std::collections::BTreeMap<String, &'static str>,
    finished: usize,
    /// Without a terminal: the phase last printed and when, so a long cell (a soak) shows a line
    /// when its phase changes and once a minute, not nothing until it ends.
    last_plain: Option<(String, std::time::Instant)>,
}

impl Progress {
    pub(super) fn new() -> Self {
        Progress {
            bar: None,
            tty: std::io::stderr().is_terminal(),
            parallel: false,
            dispatched: Default::default(),
            finished: 0,
            last_plain: None,
        }
    }

    fn spinner(&mut self, msg: String) {
        self.finish_bar();
        if self.tty {
            let b = ProgressBar::new_spinner();
            b.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}").expect("valid template"),
            );
            b.enable_steady_tick(Duration::from_millis(120));
            b.set_message(msg);
            self.bar = Some(b);
        } else {
            eprintln!("{msg}");
        }
    }

    fn line(&mut self, msg: String) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("{msg}"),
        }
    }

    fn finish_bar(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }

    pub(super) fn finish(&mut self) {
        self.finish_bar();
    }

    pub(super) fn event(&mut self, e: Event) {
        match e {
            Event::Planned { run_id, run_dir, cells, images } => self.line(format!(
                "run {run_id}: {cells} cell(s), {images} image(s); records in {}",
                run_dir.display()
            )),
            Event::Prepare(PrepareEvent::BaseBootstrapping { reference, suite }) => self.spinner(format!(
                "bootstrapping base {reference} from Debian {suite} (debootstrap, about a minute)"
            )),
            Event::Prepare(PrepareEvent::Ready { what, reference, cached, seconds }) => {
                self.finish_bar();
                if cached {
                    self.line(format!("{what} {reference}: cache hit, no build"));
                } else {
                    self.line(format!("{what} {reference}: ready in {seconds:.0} s"));
                }
            }
            Event::Prepare(PrepareEvent::ImageBuilding { reference, progress }) => {
                let eta =
                    progress.eta_s.map(|s| format!(", at most {} left", eta_text(s))).unwrap_or_default();
                self.spinner(format!(
                    "building image {}/{} {reference}{eta}",
                    progress.index + 1,
                    progress.total
                ))
            }
            Event::Prepare(PrepareEvent::Locking { what }) => {
                self.spinner(format!("locking {what}, inside the target's base"))
            }
            Event::Prepare(PrepareEvent::BuildLog { line }) => match &self.bar {
                Some(b) => b.set_message(line.chars().take(100).collect::<String>()),
                None => eprintln!("  | {line}"),
            },
            Event::CellStarted { index, total, cell_id, eta_s } => {
                self.finish_bar();
                self.last_plain = None;
                let eta = eta_s.map(|s| format!(" (about {} left)", eta_text(s))).unwrap_or_default();
                let msg = format!("cell {}/{total} {cell_id}{eta}", index + 1);
                if self.tty && !self.parallel {
                    let b = ProgressBar::new(1);
                    b.set_style(
                        ProgressStyle::with_template(
                            "{prefix:40} {msg:7} [{bar:30}] {pos}/{len} {elapsed_precise}",
                        )
                        .expect("valid template")
                        .progress_chars("=> "),
                    );
                    b.set_prefix(msg);
                    self.bar = Some(b);
                } else {
                    eprintln!("{msg}");
                }
            }
            Event::CellProgress { cell_id, phase, done, total } => self.cell_progress(cell_id, phase, done, total),
            Event::Order { order, seed, control_cells } => {
                let how = match seed {
                    Some(s) => format!("{} order, seed {s} (`--order-seed {s}` gives it again)", order.as_str()),
                    None => format!("{} order", order.as_str()),
                };
                let controls = match control_cells {
                    0 => String::new(),
                    k => format!("; {k} A/A control cell(s) at the start, middle and end"),
                };
                self.line(format!("{how}{controls}"))
            }
            Event::Fingerprint { summary } => {
                if let Some(s) = summary {
                    self.line(format!("host speed: {s}"))
                }
            }
            Event::Parallel { slots, why } => {
                self.parallel = slots > 1;
                self.line(why)
            }
            Event::LeftoversRemoved { run_id, owner, removed } => self.line(format!(
                "removed {removed} container(s), volume(s) or job(s) left by benchlab {owner} (run {run_id}), \
                 which died without cleaning up"
            )),
            Event::CellDispatch { cell_id, event } => self.dispatch(cell_id, event),
            Event::CellFinished { record, eta_s } => {
                self.finish_bar();
                self.finished += 1;
                self.dispatched.remove(&record.cell.id);
                let status = match &record.failure {
                    None => "ok".to_string(),
                    Some(f) => {
                        format!("FAILED {}: {}", f.reason.as_str(), f.detail.lines().next().unwrap_or(""))
                    }
                };
                let where_ = record
                    .dispatch
                    .as_ref()
                    .map(|d| {
                        format!(" (on {} CPU {}, job {}{})", d.node, d.allocated_cpus, d.job_id, self.tally())
                    })
                    .unwrap_or_default();
                let eta = eta_s
                    .filter(|s| *s >= 1.0)
                    .map(|s| format!(", about {} left", eta_text(s)))
                    .unwrap_or_default();
                let noisy = match record.host_check.as_ref().and_then(|h| h.quiet.as_ref()) {
                    Some(q) if q.noisy => format!(" [noisy host: {}]", q.reasons.join("; ")),
                    _ => String::new(),
                };
                self.line(format!("  {} {status}{where_}{noisy}{eta}", record.cell.id));
            }
        }
    }

    /// A cell's progress: its bar on a terminal; elsewhere a line when the phase changes and once
    /// a minute.
    fn cell_progress(&mut self, cell_id: String, phase: String, done: u64, total: u64) {
        if let Some(b) = &self.bar {
            b.set_length(total);
            b.set_position(done);
            b.set_message(phase);
        } else if !self.tty {
            let due = match &self.last_plain {
                Some((p, at)) => *p != phase || at.elapsed() >= Duration::from_secs(60),
                None => true,
            };
            if due {
                eprintln!("  {cell_id}: {}", progress_text(&phase, done, total));
                self.last_plain = Some((phase, std::time::Instant::now()));
            }
        }
    }

    /// A cluster job's news, with the run's counts.
    fn dispatch(&mut self, cell_id: String, event: CellEvent) {
        let what = match event {
            CellEvent::Queued { job } => {
                self.dispatched.insert(cell_id.clone(), "queued");
                format!("queued as job {job}")
            }
            CellEvent::Running { node, cpus } => {
                self.dispatched.insert(cell_id.clone(), "running");
                format!("running on {node} (CPU {cpus})")
            }
            CellEvent::Requeued { node, reason } => {
                self.dispatched.insert(cell_id.clone(), "queued");
                format!("REQUEUED: {reason} (was on {node})")
            }
            CellEvent::Driver(_) => return,
        };
        let msg = format!("  {cell_id}: {what}{}", self.tally());
        self.line(msg);
    }

    /// ": 3 queued, 2 running, 4 done" for a cluster's run.
    fn tally(&self) -> String {
        let n = |s: &str| self.dispatched.values().filter(|v| **v == s).count();
        format!(" · {} queued, {} running, {} done", n("queued"), n("running"), self.finished)
    }
}

/// A cell's progress as a plain line: `load 12:00 of 30:00` for the phases counted in ms, `calls
/// 300 of 1000` for the others.
fn progress_text(phase: &str, done: u64, total: u64) -> String {
    // A soak's cycles prefix theirs: `cycle 2/5 load`, `cycle 2/5 idle`.
    let in_ms = matches!(phase.rsplit(' ').next(), Some("warmup" | "load" | "idle" | "before"));
    if !in_ms {
        return format!("{phase} {done} of {total}");
    }
    let clock = |ms: u64| {
        let s = ms / 1000;
        if s >= 3600 {
            format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
        } else {
            format!("{}:{:02}", s / 60, s % 60)
        }
    };
    format!("{phase} {} of {}", clock(done), clock(total))
}

#[cfg(test)]
mod tests {
    #[test]
    fn plain_progress_reads_as_a_clock_for_timed_phases() {
        assert_eq!(super::progress_text("load", 720_500, 1_800_000), "load 12:00 of 30:00");
        assert_eq!(super::progress_text("idle", 5_000, 86_400_000), "idle 0:05 of 24:00:00");
        assert_eq!(super::progress_text("cycle 2/5 idle", 61_000, 120_000), "cycle 2/5 idle 1:01 of 2:00");
        assert_eq!(super::progress_text("calls", 300, 1000), "calls 300 of 1000");
    }
}
