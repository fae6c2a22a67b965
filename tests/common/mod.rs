//! Shared by the Docker end-to-end tests: the engine must answer, or the test fails (never skips);
//! a throwaway checkout whose one recipe serves misbehaving servers.

#![allow(dead_code)] // each test binary uses its part

use std::path::Path;
use std::process::Command;

pub fn engine_must_answer() {
    let ok = Command::new("docker").arg("info").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(
        ok,
        "no Docker engine answers: run the tests with scripts/test.sh, which installs and starts one"
    );
}

/// A checkout with one recipe, `faulty`: the base image and tests/fixtures/faulty/server.sh as
/// its `weekly` server; the fault is chosen per scenario server by $FAULT.
pub fn faulty_checkout(root: &Path) {
    let family = root.join("images/faulty");
    std::fs::create_dir_all(family.join("servers")).unwrap();
    std::fs::write(
        family.join("recipe.toml"),
        r#"family = "faulty"
description = "Servers that misbehave on purpose (tests/e2e_faults.rs, tests/e2e_slurm.rs)"
default_runtime = "bookworm"

[runtime.bookworm]
kind = "shell"
dockerfile = "Dockerfile"
suite = "bookworm"
launcher = ["/bin/bash"]

[api.script]
argv = ["/srv/{suite}.sh"]
[api.script.sources]
weekly = "servers/weekly.sh"

[[version]]
version = "1"
api = "script"
runtimes = ["bookworm"]
"#,
    )
    .unwrap();
    std::fs::write(family.join("Dockerfile"), "FROM {{BASE}}\nCOPY srv/ /srv/\n").unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/faulty/server.sh"),
        family.join("servers/weekly.sh"),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("images/common")).unwrap();
    std::fs::write(root.join("images/common/image-manifest.mjs"), "").unwrap();
    let lock = root.join("lockfiles/faulty/1-bookworm");
    std::fs::create_dir_all(&lock).unwrap();
    std::fs::write(lock.join("README"), "nothing to lock\n").unwrap();
}
