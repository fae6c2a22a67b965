//! End to end on the real Docker engine, for every recipe, with nothing timed: every family ×
//! version × runtime builds (Gradio included), a server written for another API generation fails
//! the way a scenario that expects it says, and `lock` regenerates a lock folder. The builds run
//! as three benchlab processes at once, as users sharing one host would (and to keep a cold suite
//! short). scripts/test.sh runs this binary first, with no timed test beside it: the gates that
//! measure (tests/e2e_gates.rs) run after it, on a host no build is using. Fails (never skips)
//! when no engine answers.

mod common;

use common::engine_must_answer;
use common::{first_run_records as records, lab_ok as lab};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn every_recipe_builds() {
    engine_must_answer();
    // Three benchlab builds at once, as users sharing one host would: rmcp's compile keeps both
    // CPUs busy for minutes while the other families' builds mostly wait on package downloads.
    // A base two of them need is bootstrapped once (the others wait on its lock); the families
    // are split between the lanes, so no image is built twice.
    let mut families: Vec<String> = std::fs::read_dir(format!("{ROOT}/images"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("recipe.toml").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|f| f != "rmcp")
        .collect();
    families.sort();
    let mut lanes = vec![vec!["rmcp".to_string()], Vec::new(), Vec::new()];
    for (i, family) in families.into_iter().enumerate() {
        lanes[1 + i % 2].push(family);
    }
    std::thread::scope(|s| {
        for lane in &lanes {
            s.spawn(move || {
                for family in lane {
                    lab(&["build", "--family", family], &format!("benchlab build --family {family}"));
                }
            });
        }
    });
    // Then every recipe at once: all of it was built above, so all of it is a cache hit.
    let out = lab(&["build"], "benchlab build");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(" 0 built, "), "the two builds above left something to build:\n{stderr}");
    let built: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    for family in ["python-mcp", "fastmcp", "ts-sdk", "gradio", "rmcp"] {
        assert!(
            built.iter().any(|r| r.starts_with(&format!("benchlab/{family}:"))),
            "no {family} image in {built:?}"
        );
    }
}

#[test]
fn a_server_for_another_api_generation_fails_as_expected() {
    engine_must_answer();
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("negative.toml");
    std::fs::write(
        &scenario,
        r#"name = "negative"
[[server]]
id = "mcp-2.3.0-with-1.x-import"
family = "python-mcp"
version = "2.3.0"
api = "fastmcp1"
expect = "failure"
[[workload]]
kind = "cold_start"
spawns = 1
"#,
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["run"])
        .arg(&scenario)
        .args(["--root", ROOT, "--results"])
        .arg(dir.path().join("results"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "an expected failure is a result (exit 0):\n{stderr}");
    assert!(stderr.contains("failed as the scenario expects (crash)"), "{stderr}");
    let recs = records(&dir.path().join("results").join("negative"));
    assert_eq!(recs[0]["status"], "failed");
    assert_eq!(recs[0]["cell"]["expect"], "failure");
    assert_eq!(recs[0]["failure"]["reason"], "crash");
    let detail = recs[0]["failure"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("No module named 'mcp.server.fastmcp'"),
        "the server's own error is kept: {detail}"
    );
}

#[test]
fn lock_regenerates_a_lock_folder_inside_the_target_base() {
    engine_must_answer();
    // A scratch checkout with one family, so the real lock folders stay as committed.
    let root = tempfile::tempdir().unwrap();
    let copy = |rel: &str| {
        let status = Command::new("cp")
            .args(["-r", &format!("{ROOT}/{rel}")])
            .arg(root.path().join(rel))
            .status()
            .unwrap();
        assert!(status.success());
    };
    std::fs::create_dir_all(root.path().join("images")).unwrap();
    std::fs::create_dir_all(root.path().join("lockfiles/python-mcp/1.1.2-cpython-bookworm")).unwrap();
    copy("images/common");
    copy("images/python-mcp");
    let dir = root.path().join("lockfiles/python-mcp/1.1.2-cpython-bookworm");
    std::fs::copy(
        format!("{ROOT}/lockfiles/python-mcp/1.1.2-cpython-bookworm/requirements.in"),
        dir.join("requirements.in"),
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["lock", "python-mcp", "1.1.2", "--runtime", "cpython-bookworm", "--root"])
        .arg(root.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lock = std::fs::read_to_string(dir.join("requirements.txt")).unwrap();
    assert!(lock.contains("benchlab lock python-mcp 1.1.2 --runtime cpython-bookworm"), "{lock}");
    assert!(lock.lines().any(|l| l.starts_with("mcp==1.1.2")), "{lock}");
    // Every pinned package carries hashes, and no index URL is written into the file.
    let pins: Vec<&str> = lock.lines().filter(|l| l.contains("==")).collect();
    assert!(pins.len() > 5);
    assert!(lock.matches("--hash=sha256:").count() >= pins.len());
    assert!(!lock.contains("index-url") && !lock.contains("://"), "{lock}");
}

/// A Rust release range locked with cargo: the index listed into releases.toml, the release's
/// lock input written from its range's template with rmcp *and its companion rmcp-macros* pinned
/// to the release, and (rmcp 1.2.0's dependencies having had releases yanked since its day) a
/// lock resolved as of the first later day that resolves, which `lock-deviation` names.
#[test]
fn a_rust_range_release_locks_with_its_macros_as_of_the_first_day_that_resolves() {
    engine_must_answer();
    let root = tempfile::tempdir().unwrap();
    let cp = |rel: &str| {
        let to = root.path().join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        assert!(Command::new("cp")
            .args(["-r", &format!("{ROOT}/{rel}")])
            .arg(&to)
            .status()
            .unwrap()
            .success());
    };
    cp("images/common");
    cp("images/rmcp");
    // The ranges' templates: their lock inputs only.
    for template in ["0.17.0-rustc-web-trixie", "3.11.0-rustc-web-trixie"] {
        let dir = root.path().join("lockfiles/rmcp").join(template);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(format!("{ROOT}/lockfiles/rmcp/{template}/Cargo.toml"), dir.join("Cargo.toml"))
            .unwrap();
    }
    let out =
        Command::new(BIN).args(["lock", "rmcp", "1.2.0..1.2.x", "--root"]).arg(root.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The index listing is read back, not echoed (a JSON line per release, thousands of bytes).
    assert!(!stderr.contains("\"vers\""), "{stderr}");
    let family = root.path().join("lockfiles/rmcp");
    let releases = std::fs::read_to_string(family.join("releases.toml")).unwrap();
    assert!(releases.contains("\"1.2.0\"") && releases.contains("\"3.11.0\""), "{releases}");
    let dir = family.join("1.2.0-rustc-web-trixie");
    assert_eq!(std::fs::read_to_string(dir.join("exclude-newer")).unwrap().trim(), "2026-03-11T23:59:59Z");
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(dir.join("Cargo.toml")).unwrap()).unwrap();
    assert_eq!(manifest["dependencies"]["rmcp"]["version"].as_str(), Some("=1.2.0"));
    assert_eq!(manifest["dependencies"]["rmcp-macros"].as_str(), Some("=1.2.0"));
    let lock = std::fs::read_to_string(dir.join("Cargo.lock")).unwrap();
    for pkg in ["rmcp", "rmcp-macros"] {
        assert!(lock.contains(&format!("name = \"{pkg}\"\nversion = \"1.2.0\"")), "{pkg} 1.2.0 not locked");
    }
    let deviation = std::fs::read_to_string(dir.join("lock-deviation")).unwrap();
    let day = deviation.strip_prefix("resolved as of ").and_then(|d| d.get(..20)).unwrap_or("");
    assert!(
        deviation.contains("(the first day cargo could resolve it), not 2026-03-11T23:59:59Z")
            && day.ends_with("T23:59:59Z")
            && day > "2026-03-11T23:59:59Z",
        "{deviation}"
    );
}
