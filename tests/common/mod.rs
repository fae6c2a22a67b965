//! Shared by the test binaries: a child process killed when dropped; for the Docker end-to-end
//! tests, the engine must answer, or the test fails (never skips), and a throwaway checkout whose
//! one recipe serves misbehaving servers.

#![allow(dead_code)] // each test binary uses its part

use std::path::Path;
use std::process::{Child, Command};

/// A child process of the test, killed and reaped when dropped: a test that fails leaves nothing
/// running.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The records of a run folder so far (none when it has no records file yet).
pub fn records_in(run_dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run_dir.join("records.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The records of the one run folder under `dir` (`<results>/<scenario>`).
pub fn first_run_records(dir: &Path) -> Vec<serde_json::Value> {
    records_in(&std::fs::read_dir(dir).unwrap().next().unwrap().unwrap().path())
}

/// Runs benchlab in the checkout and asserts it succeeded (`what` names it in the failure).
pub fn lab_ok(args: &[&str], what: &str) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_benchlab"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{what} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Reads a child's output lines until `until` accepts one (which it sees in order, so it may keep
/// state); returns every line read. Fails, with what was read, when the output ends first or the
/// wait passes `limit` (checked as each line arrives).
pub fn read_until(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    what: &str,
    limit: std::time::Duration,
    mut until: impl FnMut(&str) -> bool,
) -> Vec<String> {
    let started = std::time::Instant::now();
    let mut seen = Vec::new();
    loop {
        let line = match lines.next() {
            Some(l) => l.unwrap(),
            None => panic!("the run ended before {what}: {seen:#?}"),
        };
        seen.push(line);
        if until(seen.last().expect("just pushed")) {
            return seen;
        }
        assert!(started.elapsed() < limit, "no {what} within {limit:?}: {seen:#?}");
    }
}

pub fn engine_must_answer() {
    let ok = Command::new("docker").arg("info").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(
        ok,
        "no Docker engine answers: run the tests with scripts/test.sh, which installs and starts one"
    );
}

/// A checkout with one recipe, `family`: the base image with `script` as its `weekly` server
/// (run by bash), nothing to lock. The lab builds it, runs it and records it like any other.
pub fn script_checkout(root: &Path, family_name: &str, description: &str, script: &Path) {
    let family = root.join("images").join(family_name);
    std::fs::create_dir_all(family.join("servers")).unwrap();
    let recipe = format!(
        r#"family = "{family_name}"
description = "{description}"
default_runtime = "bookworm"

[runtime.bookworm]
kind = "shell"
dockerfile = "Dockerfile"
suite = "bookworm"
launcher = ["/bin/bash"]

[api.script]
argv = ["/srv/{{suite}}.sh"]
[api.script.sources]
weekly = "servers/weekly.sh"

[[version]]
version = "1"
api = "script"
runtimes = ["bookworm"]
"#
    );
    std::fs::write(family.join("recipe.toml"), recipe).unwrap();
    std::fs::write(family.join("Dockerfile"), "FROM {{BASE}}\nCOPY srv/ /srv/\n").unwrap();
    std::fs::copy(script, family.join("servers/weekly.sh")).unwrap();
    // Read for every non-CPython runtime; these images have no manifest to write.
    std::fs::create_dir_all(root.join("images/common")).unwrap();
    std::fs::write(root.join("images/common/image-manifest.mjs"), "").unwrap();
    let lock = root.join("lockfiles").join(family_name).join("1-bookworm");
    std::fs::create_dir_all(&lock).unwrap();
    std::fs::write(lock.join("README"), "nothing to lock\n").unwrap();
}

/// The `faulty` checkout: tests/fixtures/faulty/server.sh, the fault chosen per scenario server
/// by $FAULT.
pub fn faulty_checkout(root: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/faulty/server.sh");
    script_checkout(
        root,
        "faulty",
        "Servers that misbehave on purpose (tests/e2e_faults.rs, tests/e2e_slurm.rs)",
        &script,
    );
}
