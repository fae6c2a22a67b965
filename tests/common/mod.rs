//! Shared by the Docker end-to-end tests: the engine must answer, or the test fails (never skips).

use std::process::Command;

pub fn engine_must_answer() {
    let ok = Command::new("docker").arg("info").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(
        ok,
        "no Docker engine answers: run the tests with scripts/test.sh, which installs and starts one"
    );
}
