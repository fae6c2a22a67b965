//! The driver link every backend shares: the driver's output lines become progress events and one
//! outcome, and whatever else it wrote is kept as a bounded tail for the error that says why a
//! cell ended without an outcome. It reads lines; how they arrive (a container's log stream, a
//! child's pipes, a file on a shared folder) is the backend's business.

use std::collections::VecDeque;

use crate::spec::{DriverEvent, DriverOutcome};

/// How many lines of the driver's other output are kept.
const TAIL_LINES: usize = 40;

/// Reads one driver's output. See the module documentation.
pub struct DriverLink<'a> {
    on_event: &'a mut (dyn FnMut(DriverEvent) + Send),
    outcome: Option<DriverOutcome>,
    tail: VecDeque<String>,
}

impl<'a> DriverLink<'a> {
    pub fn new(on_event: &'a mut (dyn FnMut(DriverEvent) + Send)) -> DriverLink<'a> {
        DriverLink { on_event, outcome: None, tail: VecDeque::new() }
    }

    /// A line of the driver's standard output: an event, the outcome, or anything else (kept).
    pub fn stdout(&mut self, text: String) {
        match serde_json::from_str::<DriverEvent>(&text) {
            Ok(DriverEvent::Outcome { outcome }) => self.outcome = Some(*outcome),
            Ok(event) => (self.on_event)(event),
            Err(_) => self.keep(text),
        }
    }

    /// A line of the driver's standard error.
    pub fn stderr(&mut self, text: String) {
        self.keep(text);
    }

    fn keep(&mut self, text: String) {
        self.tail.push_back(text);
        if self.tail.len() > TAIL_LINES {
            self.tail.pop_front();
        }
    }

    /// The outcome, or the tail of everything else the driver wrote.
    pub fn finish(self) -> Result<DriverOutcome, String> {
        match self.outcome {
            Some(o) => Ok(o),
            None => Err(self.tail.into_iter().collect::<Vec<_>>().join("\n")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_go_out_the_outcome_is_kept_and_the_rest_is_a_bounded_tail() {
        let mut seen = Vec::new();
        let mut on_event = |e: DriverEvent| seen.push(e);
        let mut link = DriverLink::new(&mut on_event);
        link.stdout(r#"{"type":"progress","phase":"calls","done":1,"total":2}"#.into());
        for i in 0..50 {
            link.stderr(format!("noise {i}"));
        }
        let tail = DriverLink::finish(link).unwrap_err();
        assert_eq!(tail.lines().count(), TAIL_LINES);
        assert!(tail.starts_with("noise 10") && tail.ends_with("noise 49"), "{tail}");
        assert!(matches!(seen.as_slice(), [DriverEvent::Progress { done: 1, total: 2, .. }]));
        let mut none = |_: DriverEvent| {};
        let mut link = DriverLink::new(&mut none);
        let outcome =
            DriverEvent::Outcome { outcome: Box::new(DriverOutcome { calls_ok: 7, ..Default::default() }) };
        link.stdout(serde_json::to_string(&outcome).unwrap());
        assert_eq!(link.finish().unwrap().calls_ok, 7);
    }
}
