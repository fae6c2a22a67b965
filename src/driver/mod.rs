//! Inside the sidecar: `benchlab driver` receives one cell's spec, runs its workload against the
//! server through the shim, and prints JSON lines on stdout — progress events, then one outcome.
//! It decides nothing about what to run; the orchestrator hands it everything.
use crate::spec::{DriverEvent, DriverOutcome, DriverSpec};

pub mod httpclient;
pub mod load;
pub mod services;
pub mod stdio;
pub mod workload;

use std::io::Write;

/// Prints one event line and flushes it, so the orchestrator sees progress as it happens.
pub fn emit(event: &DriverEvent) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, event);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

/// Runs the driver role: the spec comes as JSON (an argument or the environment).
pub fn run(spec: &DriverSpec) -> DriverOutcome {
    let outcome = workload::run(spec, &mut |phase, done, total| {
        emit(&DriverEvent::Progress { phase: phase.to_string(), done, total })
    });
    emit(&DriverEvent::Outcome { outcome: Box::new(outcome.clone()) });
    outcome
}
