//! `benchlab attest` and `verify-attestation` through the real binary on a copy of a committed run
//! folder: a key generated, the run attested and verified, then one byte of the records changed
//! and the attestation refused, naming the records. The same envelope is checked by an
//! independent implementation (`tests/attest_check.py`: securesystemslib's DSSE and keys, the
//! in-toto attestation framework's Statement model). Fails, never skips, when the venv that
//! `scripts/test.sh` creates is missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
/// The Python that `scripts/test.sh` sets up, with securesystemslib, in-toto and
/// in-toto-attestation.
const PYTHON: &str = "/tmp/benchlab-work/attest-venv/bin/python3";
/// A committed run with claims and a head: 136 records, two images on one base.
const RUN: &str = "results/seed-003-gradio-vs-fastmcp/20261130T115618Z-seed-003-gradio-vs-fastmcp-3917";
/// A smaller one, for what does not need many records.
const SMALL_RUN: &str = "results/seed-000-sse/20261130T122735Z-seed-000-sse-5513";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A committed run's files (not its lock) in `dir/run`.
fn run_copy(committed: &str, dir: &Path) -> PathBuf {
    let run = dir.join("run");
    std::fs::create_dir(&run).unwrap();
    for f in ["records.jsonl", "records.head", "scenario.toml"] {
        std::fs::copy(root().join(committed).join(f), run.join(f)).unwrap();
    }
    run
}

/// The binary, run from the checkout (its lockfiles/ expand the scenario's matrices).
fn benchlab(args: &[&str]) -> Output {
    let out = Command::new(BIN).args(args).current_dir(root()).output().unwrap();
    eprintln!(
        "$ benchlab {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn python() -> &'static str {
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is missing: run `bash scripts/test.sh`, which creates the venv and installs \
         securesystemslib, in-toto and in-toto-attestation"
    );
    let probe = Command::new(PYTHON)
        .args([
            "-c",
            "import securesystemslib.dsse, securesystemslib.signer, in_toto_attestation.v1.statement",
        ])
        .output()
        .unwrap();
    assert!(
        probe.status.success(),
        "{PYTHON} lacks the attestation packages ({}): run `bash scripts/test.sh`",
        String::from_utf8_lossy(&probe.stderr).trim()
    );
    PYTHON
}

/// `tests/attest_check.py` on an envelope: its exit status and JSON answer.
fn independent_check(envelope: &Path, public: &Path, run: &Path) -> (bool, serde_json::Value) {
    let script = root().join("tests/attest_check.py");
    let out = Command::new(python()).arg(script).args([envelope, public, run]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("attest_check.py: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    let value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("attest_check.py printed no JSON ({e}): {stdout}"));
    (out.status.success(), value)
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn an_attested_run_verifies_until_one_byte_of_its_records_changes() {
    python();
    let dir = tempfile::tempdir().unwrap();
    let run = run_copy(RUN, dir.path());
    let key = dir.path().join("lab.key");
    let public = dir.path().join("lab.key.pub");
    let envelope = run.join("attestation.dsse.json");
    let (run_s, key_s, pub_s) = (run.to_str().unwrap(), key.to_str().unwrap(), public.to_str().unwrap());

    let out = benchlab(&["attest", "--generate-key", key_s]);
    assert!(out.status.success(), "{}", text(&out));
    // A key others can read is refused, with the fix.
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let out = benchlab(&["attest", run_s, "--key", key_s]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("chmod 600"), "{}", text(&out));
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();

    let out = benchlab(&["attest", run_s, "--key", key_s]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("records.jsonl"), "{}", text(&out));
    assert!(envelope.exists());

    let out = benchlab(&["verify-attestation", run_s, "--pub", pub_s]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("ok  verdicts: a fresh verify"), "{}", text(&out));

    let (ok, answer) = independent_check(&envelope, &public, &run);
    assert!(ok, "the independent check refused benchlab's attestation: {answer}");
    let records = std::fs::read(run.join("records.jsonl")).unwrap();
    assert_eq!(answer["files"]["records.jsonl"], benchlab::hash::sha256_hex(&records));
    assert!(answer["images"].as_u64().unwrap() >= 3, "{answer}");

    // One byte of the records changed (a digit of a measurement, so the line still parses).
    let mut tampered = records.clone();
    let at = tampered.windows(7).position(|w| w == b"\"p50_ms").expect("a p50") + 9;
    tampered[at] = if tampered[at] == b'1' { b'2' } else { b'1' };
    std::fs::write(run.join("records.jsonl"), &tampered).unwrap();

    let out = benchlab(&["verify-attestation", run_s, "--pub", pub_s]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("records.jsonl"), "the failure names the records: {}", text(&out));
    let out = benchlab(&["verify-attestation", run_s, "--pub", pub_s, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&answer["verified"], &answer["class"]), (&false.into(), &"mismatch".into()), "{answer}");
    let (ok, answer) = independent_check(&envelope, &public, &run);
    assert!(!ok, "the independent check accepted tampered records: {answer}");
    assert!(answer["error"].as_str().unwrap().contains("records.jsonl"), "{answer}");
}

#[test]
fn an_envelope_verifies_with_its_key_only() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_copy(SMALL_RUN, dir.path());
    let (run_s, a, b) = (
        run.to_str().unwrap().to_string(),
        dir.path().join("a.key").display().to_string(),
        dir.path().join("b.key").display().to_string(),
    );
    for k in [&a, &b] {
        assert!(benchlab(&["attest", "--generate-key", k]).status.success());
    }
    let out_file = dir.path().join("elsewhere.json").display().to_string();
    assert!(benchlab(&["attest", &run_s, "--key", &a, "--out", &out_file]).status.success());
    let out = benchlab(&[
        "verify-attestation",
        &run_s,
        "--pub",
        &format!("{a}.pub"),
        "--envelope",
        &out_file,
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["verified"], true, "{answer}");
    assert_eq!(answer["statement"]["predicate"]["scenario"], "seed-000-sse", "{answer}");
    let out =
        benchlab(&["verify-attestation", &run_s, "--pub", &format!("{b}.pub"), "--envelope", &out_file]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("no signature"), "{}", text(&out));
    // No envelope at all is bad input.
    let out = benchlab(&["verify-attestation", &run_s, "--pub", &format!("{a}.pub")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

/// Every committed run that carries an attestation (`attestation.dsse.json` beside
/// `attestation.pub`) verifies with the lab's `verify-attestation` and with the independent
/// implementation, on the committed files themselves.
#[test]
fn every_committed_attestation_verifies_with_both_implementations() {
    python();
    let mut checked = Vec::new();
    for scenario in std::fs::read_dir(root().join("results")).unwrap().flatten() {
        for run in std::fs::read_dir(scenario.path()).into_iter().flatten().flatten() {
            let (envelope, public) =
                (run.path().join("attestation.dsse.json"), run.path().join("attestation.pub"));
            if !envelope.exists() {
                continue;
            }
            assert!(public.exists(), "{} has an envelope but no attestation.pub", run.path().display());
            let out = benchlab(&[
                "verify-attestation",
                run.path().to_str().unwrap(),
                "--pub",
                public.to_str().unwrap(),
            ]);
            assert!(out.status.success(), "{}: {}", run.path().display(), text(&out));
            let (ok, answer) = independent_check(&envelope, &public, &run.path());
            assert!(ok, "{}: the independent check refused it: {answer}", run.path().display());
            checked.push(run.path());
        }
    }
    // The four reproductions' current runs at least.
    assert!(checked.len() >= 4, "expected the reproductions' attested runs, found {checked:?}");
}
