//! The exit codes `benchlab` documents, in one place: their names, the `--help` text that
//! explains them, the error that carries one, and the classification of library errors into
//! them. It does not decide what a command does; commands return these.

use crate::measure::{MeasureError, MeasureErrorKind};
use crate::orchestrate::RunError;
use crate::record::store::StoreError;

/// Every cell ran and passed its checks; every measurable claim reproduced.
pub const OK: i32 = 0;
/// Some cells did not do what the scenario expects, a claim was contradicted, a gate failed.
pub const FAILED: i32 = 1;
/// Bad input: a scenario, recipe, record or argument that cannot be used.
pub const BAD_INPUT: i32 = 2;
/// The environment: no container engine, a base or image that cannot be made, a full disk.
pub const ENVIRONMENT: i32 = 3;
/// Interrupted (SIGINT or SIGTERM).
pub const INTERRUPTED: i32 = 130;

pub(crate) const EXIT_HELP: &str = "\
Exit codes:
  0  every cell ran and passed its checks
  1  some cells did not do what the scenario expects (their records say why: crash, timeout,
     wrong_result, ...); a failure the scenario expects (expect = \"failure\") is a result
  2  bad input: a scenario, recipe or record that cannot be used (file:line:column in the message)
  3  the environment: no container engine, a base or image that cannot be made, a full disk
  130 interrupted (SIGINT or SIGTERM): the cells recorded so far stay; nothing is left running";

/// An error with its exit code and, where one exists, what to do.
pub struct Exit {
    pub code: i32,
    pub message: String,
}

impl Exit {
    pub(crate) fn new(code: i32, message: impl Into<String>) -> Self {
        Exit { code, message: message.into() }
    }

    /// Bad input (exit 2).
    pub(crate) fn input(message: impl Into<String>) -> Self {
        Exit::new(BAD_INPUT, message)
    }

    /// The environment (exit 3).
    pub(crate) fn environment(message: impl Into<String>) -> Self {
        Exit::new(ENVIRONMENT, message)
    }
}

impl From<RunError> for Exit {
    fn from(e: RunError) -> Self {
        Exit::new(run_error_code(&e), error_chain(&e))
    }
}

/// The exit class of an orchestrator error, by its type: bad input (a scenario, a run folder,
/// a cell a backend refuses) is 2, the environment 3.
fn run_error_code(e: &RunError) -> i32 {
    match e {
        RunError::Scenario(_) => BAD_INPUT,
        RunError::Store(StoreError::Io { .. } | StoreError::Head { .. } | StoreError::Poisoned { .. })
        | RunError::Io { .. } => ENVIRONMENT,
        RunError::Store(_) => BAD_INPUT,
        RunError::Placement(_) | RunError::Input { .. } => BAD_INPUT,
        RunError::Engine(crate::backend::EngineError::Refused { .. }) => BAD_INPUT,
        RunError::Engine(_) => ENVIRONMENT,
        RunError::Interrupted { .. } => INTERRUPTED,
    }
}

impl From<MeasureError> for Exit {
    fn from(e: MeasureError) -> Self {
        let code = match e.kind {
            MeasureErrorKind::BadInput => BAD_INPUT,
            MeasureErrorKind::Environment => ENVIRONMENT,
            MeasureErrorKind::Failed => FAILED,
            MeasureErrorKind::Interrupted => INTERRUPTED,
        };
        Exit::new(code, e.message)
    }
}

/// An error and its `source()` chain, each cause on its own line unless the message holds it.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(&format!("\n  caused by: {text}"));
        }
        src = inner.source();
    }
    s
}

impl From<crate::lock::LockError> for Exit {
    fn from(e: crate::lock::LockError) -> Self {
        let code = match e {
            crate::lock::LockError::Input(_) => BAD_INPUT,
            _ => ENVIRONMENT,
        };
        Exit::new(code, error_chain(&e))
    }
}

impl From<crate::backend::EngineError> for Exit {
    fn from(e: crate::backend::EngineError) -> Self {
        Exit::from(RunError::from(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_errors_map_to_their_documented_codes() {
        let io = RunError::Io { what: "write x".into(), source: std::io::Error::other("disk full") };
        assert_eq!(Exit::from(io).code, ENVIRONMENT);
        let interrupted = RunError::Interrupted {
            signal: "SIGINT",
            run_dir: "r".into(),
            done: 1,
            total: 2,
            cell: "c".into(),
            removed: 0,
        };
        assert_eq!(Exit::from(interrupted).code, INTERRUPTED);
        let locked = RunError::Store(StoreError::Locked { run_dir: "r".into(), holder: "pid 1".into() });
        assert_eq!(Exit::from(locked).code, BAD_INPUT);
        for (kind, code) in [
            (MeasureErrorKind::BadInput, BAD_INPUT),
            (MeasureErrorKind::Environment, ENVIRONMENT),
            (MeasureErrorKind::Failed, FAILED),
            (MeasureErrorKind::Interrupted, INTERRUPTED),
        ] {
            assert_eq!(Exit::from(MeasureError { kind, message: "m".into() }).code, code);
        }
    }

    #[test]
    fn the_help_text_names_every_code() {
        for code in [OK, FAILED, BAD_INPUT, ENVIRONMENT, INTERRUPTED] {
            assert!(EXIT_HELP.contains(&format!("\n  {code} ")), "{code}");
        }
    }
}
