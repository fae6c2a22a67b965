//! The command line without an engine: bad scenarios are refused with file:line:column and exit
//! code 2 before anything is built; --help teaches.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");

fn run_scenario(text: &str) -> (i32, String) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("bad.toml");
    std::fs::write(&p, text).unwrap();
    let out = Command::new(BIN)
        .args(["run"])
        .arg(&p)
        .args(["--root", env!("CARGO_MANIFEST_DIR"), "--results"])
        .arg(d.path().join("results"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).replace(&p.display().to_string(), "bad.toml");
    (out.status.code().unwrap(), stderr)
}

const BASE: &str = "name = \"t\"\n[[server]]\nid = \"null\"\nfamily = \"benchlab-null\"\n[[workload]]\nkind = \"cold_start\"\nspawns = 2\n";

#[test]
fn unknown_key_is_refused_with_its_position() {
    let (code, err) = run_scenario(&BASE.replace("spawns = 2", "spawns = 2\nspwans = 3"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad.toml:8:1: unknown field `spwans`"), "{err}");
}

#[test]
fn wrong_type_is_refused_with_its_position() {
    let (code, err) = run_scenario(&BASE.replace("spawns = 2", "spawns = \"two\""));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad.toml:7:10: invalid type: string \"two\""), "{err}");
}

#[test]
fn unknown_version_is_refused_at_the_version() {
    let text = BASE.replace("family = \"benchlab-null\"", "family = \"python-mcp\"\nversion = \"0.0.1\"");
    let (code, err) = run_scenario(&text);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad.toml:5:11: python-mcp has no recipe for version \"0.0.1\""), "{err}");
}

#[test]
fn help_lists_commands_and_exit_codes() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for word in ["run", "report", "base", "null-server", "Exit codes"] {
        assert!(text.contains(word), "--help lacks {word}: {text}");
    }
    assert!(!text.contains("shim"), "hidden roles stay hidden");
}

#[test]
fn no_engine_is_an_environment_error_that_says_what_to_do() {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["run", "scenarios/quickstart.toml", "--engine", "docker", "--results"])
        .arg(d.path())
        .env("DOCKER_HOST", format!("unix://{}/no-engine.sock", d.path().display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("no container engine answers") && err.contains("scripts/engine.sh"), "{err}");
}

#[test]
fn a_report_from_a_damaged_store_says_so() {
    let run = std::fs::read_dir(format!("{}/results/seed-000-stdio", env!("CARGO_MANIFEST_DIR")))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    let d = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(run.join("records.jsonl")).unwrap();
    std::fs::write(d.path().join("records.jsonl"), text.replacen("\"spawns\":10", "\"spawns\":11", 1))
        .unwrap();
    let out = Command::new(BIN).arg("report").arg(d.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not audit clean") && err.contains("hash"), "{err}");
    let clean = Command::new(BIN).arg("report").arg(&run).output().unwrap();
    assert!(!String::from_utf8_lossy(&clean.stderr).contains("does not audit clean"));
}

#[test]
fn slurm_options_without_the_slurm_backend_are_refused() {
    for (cmd, flag) in
        [("run", "--partition=lab"), ("plan", "--slurm-opt=--qos=x"), ("run", "--registry=h:1")]
    {
        let out = Command::new(BIN)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([cmd, "scenarios/quickstart.toml", flag])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd} {flag}: {err}");
        assert!(err.contains("needs --backend slurm"), "{err}");
    }
}

#[test]
fn plan_counts_the_cells_only_picks_and_refuses_a_pattern_that_picks_none() {
    let plan = |only: &[&str]| {
        Command::new(BIN)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["plan", "scenarios/gate-http.toml", "--json"])
            .args(only.iter().flat_map(|p| ["--only", p]))
            .output()
            .unwrap()
    };
    let cells = |out: &std::process::Output| {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["cells"].as_u64().unwrap()
    };
    // gate-http's twelve Bun 1.1.38 servers, each in its suite's workload alone (no REST route).
    assert_eq!(cells(&plan(&["*-bun-1.1.38-*"])), 12);
    assert_eq!(cells(&plan(&["*-bun-1.1.38-*", "*-bun-1.1.38-*-pulse-*"])), 12, "patterns are a union");
    assert!(cells(&plan(&[])) > 12);
    let none = plan(&["no-such-cell*"]);
    assert_eq!(none.status.code(), Some(2));
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(err.contains("--only [\"no-such-cell*\"] matches no cell of scenarios/gate-http.toml"), "{err}");
}
