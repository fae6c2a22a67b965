//! A closed loop's virtual users as data: an iteration's flow of sessions and steps, resolved
//! against the prepared calls (`Flow`), and a virtual user's turns under a staged load (`Turn`:
//! when it may start its next iteration or call, k6's ramping-vus as `spec::vus_at` has it).
//! Running the steps is `closed`'s; the schedule itself is `spec`'s.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::driver::load::worker::{Shared, PREPARED};
use crate::driver::load::LoadPlan;
use crate::spec::{flow_tools, next_wanted, vus_at, Lifecycle, SessionScope, LIST_STEP};

/// One step of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// tools/list.
    List,
    /// A call of one tool: its `PREPARED` slots start at `first`.
    Tool { first: u64 },
    /// The mix's next slot (`lifecycle = "iteration"` without a flow).
    Mix,
}

/// What an iteration does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Flow {
    /// The sessions of an iteration, each its steps in order.
    pub(super) sessions: Vec<Vec<Step>>,
    /// One session per virtual user, kept across its iterations.
    pub(super) per_vu: bool,
    /// A fresh connection for every session (iterations without a flow, as they always ran);
    /// otherwise a virtual user keeps its connection, as k6's do.
    pub(super) fresh: bool,
}

impl Flow {
    /// The plan's iterations: its flow, or one session of tools/list and `session_calls` calls
    /// of the mix. None outside `lifecycle = "iteration"`.
    pub(super) fn of(plan: &LoadPlan) -> Option<Flow> {
        if plan.lifecycle != Lifecycle::Iteration || plan.rest {
            return None;
        }
        if plan.flow.is_empty() {
            let mut steps = vec![Step::List];
            steps.extend(std::iter::repeat_n(Step::Mix, plan.session_calls.max(1) as usize));
            return Some(Flow { sessions: vec![steps], per_vu: false, fresh: true });
        }
        let tools = flow_tools(&plan.flow);
        let step = |s: &String| match s.as_str() {
            LIST_STEP => Step::List,
            t => Step::Tool { first: tools.iter().position(|x| *x == t).expect("listed") as u64 * PREPARED },
        };
        Some(Flow {
            sessions: plan.flow.iter().map(|s| s.iter().map(step).collect()).collect(),
            per_vu: plan.session == SessionScope::PerVu,
            fresh: false,
        })
    }
}

/// A virtual user's turns. Without stages it always runs; with them it runs while the schedule
/// wants more users than its number, and once it is not wanted it finishes what it does and
/// waits until it is wanted again. Running users are counted in the window (the peak is kept).
pub(super) struct Turn<'a> {
    sh: &'a Shared,
    vu: u32,
    /// The stages' clock starts here (the load's start).
    origin: Instant,
    running: bool,
}

impl<'a> Turn<'a> {
    pub(super) fn new(sh: &'a Shared, vu: u64, origin: Instant) -> Turn<'a> {
        Turn { sh, vu: vu as u32, origin, running: false }
    }

    /// Whether the user must stop now (the stages want no more than its number); counts it as
    /// running or not.
    pub(super) fn must_stop(&mut self) -> bool {
        let stop = self.sh.staging.as_ref().is_some_and(|(start, stages)| {
            let t = Instant::now().saturating_duration_since(self.origin).as_millis() as u64;
            vus_at(*start, stages, t) <= self.vu
        });
        self.set_running(!stop);
        stop
    }

    /// Waits until the stages want the user again; false when they never do before the
    /// window's end.
    pub(super) async fn wait(&mut self) -> bool {
        let Some((start, stages)) = self.sh.staging.as_ref() else {
            return true;
        };
        let t = Instant::now().saturating_duration_since(self.origin).as_millis() as u64;
        match next_wanted(*start, stages, self.vu, t) {
            Some(at) if self.origin + Duration::from_millis(at) < self.sh.end() => {
                tokio::time::sleep_until((self.origin + Duration::from_millis(at)).into()).await;
                true
            }
            _ => false,
        }
    }

    fn set_running(&mut self, running: bool) {
        if running == self.running {
            return;
        }
        self.running = running;
        let w = &self.sh.window;
        if running {
            let now = w.active.fetch_add(1, Ordering::Relaxed) + 1;
            w.peak.fetch_max(now, Ordering::Relaxed);
        } else {
            w.active.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.set_running(false);
    }
}
