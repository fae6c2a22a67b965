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
    assert!(text(&out).contains("which the keyring does not hold"), "{}", text(&out));
    // No envelope at all is bad input.
    let out = benchlab(&["verify-attestation", &run_s, "--pub", &format!("{a}.pub")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

/// The keys that signed the committed attestations, pinned here by keyid (sha256 of the raw
/// public key) rather than trusted from the files: `results/keyring/` must hold exactly these.
const LAB_KEYIDS: [&str; 6] = [
    "2763fd4d85f76deae8ac934a6e0e4b45282e814d09e73b60a25af29ba296096a",
    "3419bf2ee3d2541528972a315a892a9ec576423f2465570506afb4f76deac1e0",
    "48a43bda99a004b254cd81d4b6d694c21c3f17ebcc4c1d0d12043d028dae1556",
    "53eea1eb8d788ebc150a5f5bcbd7f2d01763689a68a70ac8ce3188765b09019d",
    "e85fc0f0d1ca7077a359c252a62360fd200d472388edc7e99ededb4d380846bd",
    "eb21bde58ac81d013a43bdc8906787da35ebcc18c1857392509ae83201717e82",
];

/// Every committed run that carries an attestation verifies with the lab's `verify-attestation`
/// against the committed keyring (`results/keyring/`, whose keyids are pinned above; a file named
/// by a keyid must hold that key, or the keyring is refused) and the
/// attestation log, and with the independent implementation, on the committed files themselves.
/// The `attestation.pub` kept beside a run is never what is trusted.
#[test]
fn every_committed_attestation_verifies_with_both_implementations() {
    python();
    let keyring = root().join("results/keyring");
    let mut held: Vec<String> = std::fs::read_dir(&keyring)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().trim_end_matches(".pub").to_string())
        .collect();
    held.sort();
    assert_eq!(held, LAB_KEYIDS, "results/keyring/ holds other keys than the pinned ones");
    let mut checked = Vec::new();
    for scenario in std::fs::read_dir(root().join("results")).unwrap().flatten() {
        for run in std::fs::read_dir(scenario.path()).into_iter().flatten().flatten() {
            let envelope = run.path().join("attestation.dsse.json");
            if !envelope.exists() {
                continue;
            }
            let out = benchlab(&[
                "verify-attestation",
                run.path().to_str().unwrap(),
                "--keyring",
                keyring.to_str().unwrap(),
            ]);
            assert!(out.status.success(), "{}: {}", run.path().display(), text(&out));
            assert!(text(&out).contains("ok  log: "), "{}: {}", run.path().display(), text(&out));
            let signed: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&envelope).unwrap()).unwrap();
            let keyid = signed["signatures"][0]["keyid"].as_str().unwrap();
            let public = keyring.join(format!("{keyid}.pub"));
            let (ok, answer) = independent_check(&envelope, &public, &run.path());
            assert!(ok, "{}: the independent check refused it: {answer}", run.path().display());
            checked.push(run.path());
        }
    }
    // The four reproductions' current runs at least.
    assert!(checked.len() >= 4, "expected the reproductions' attested runs, found {checked:?}");
}

/// A copy of a committed run in `dir/results/<scenario>/run`, beside an empty attestation log.
fn run_in_results(committed: &str, dir: &Path) -> PathBuf {
    let scenario = dir.join("results/scn");
    std::fs::create_dir_all(&scenario).unwrap();
    std::fs::write(dir.join("results/ATTESTATIONS.log"), "").unwrap();
    let copy = run_copy(committed, dir);
    let run = scenario.join("run");
    std::fs::rename(copy, &run).unwrap();
    run
}

/// Rewrites the run's records through the lab's own store with one p50 halved: a forgery that
/// audits clean (every hash, the chain and the head recomputed).
fn forge_records(run: &Path) {
    let records = benchlab::record::store::read_records(&run.join("records.jsonl")).unwrap();
    std::fs::remove_file(run.join("records.jsonl")).unwrap();
    std::fs::remove_file(run.join("records.head")).unwrap();
    let mut store = benchlab::record::store::Store::open(run).unwrap();
    let mut forged = false;
    for r in records {
        let mut value = serde_json::to_value(&r).unwrap();
        forged |= halve_first_p50(&mut value);
        store.append(serde_json::from_value(value).unwrap()).unwrap();
    }
    assert!(forged, "no p50 to forge");
}

fn halve_first_p50(v: &mut serde_json::Value) -> bool {
    match v {
        serde_json::Value::Object(map) => {
            if let Some(p) = map.get("p50_ms").and_then(|p| p.as_f64()) {
                map.insert("p50_ms".into(), (p / 2.0).into());
                return true;
            }
            map.values_mut().any(halve_first_p50)
        }
        serde_json::Value::Array(items) => items.iter_mut().any(halve_first_p50),
        _ => false,
    }
}

/// Issue 47's forgery: a run's records edited and re-hashed, re-signed with a fresh key whose
/// public half replaces the one beside the run. The lab's key (from outside the run) refuses it,
/// naming both keyids; the key in the run folder is never taken; no keyring is refused with how
/// to pin one; and an attestation replaced by an older one is caught by the log.
#[test]
fn a_run_re_signed_with_a_fresh_key_fails() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_in_results(SMALL_RUN, dir.path());
    let run_s = run.to_str().unwrap().to_string();
    let (lab, mallory) = (dir.path().join("lab.key"), dir.path().join("mallory.key"));
    let keyid = |k: &Path| {
        let out = benchlab(&["attest", "--generate-key", k.to_str().unwrap(), "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["keyid"].as_str().unwrap().to_string()
    };
    let (lab_id, mallory_id) = (keyid(&lab), keyid(&mallory));
    let lab_pub = format!("{}.pub", lab.display());
    let out = benchlab(&["attest", &run_s, "--key", lab.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("logged in"), "{}", text(&out));
    let original = std::fs::read(run.join("attestation.dsse.json")).unwrap();
    std::fs::copy(&lab_pub, run.join("attestation.pub")).unwrap();
    let out = benchlab(&["verify-attestation", &run_s, "--keyring", &lab_pub]);
    assert!(out.status.success(), "{}", text(&out));

    // The forgery: records edited and re-hashed (they audit clean), signed by another key.
    forge_records(&run);
    assert!(benchlab(&["audit", &run_s]).status.success(), "the forged records audit clean");
    let out = benchlab(&["attest", &run_s, "--key", mallory.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    std::fs::copy(format!("{}.pub", mallory.display()), run.join("attestation.pub")).unwrap();

    let out = benchlab(&["verify-attestation", &run_s, "--keyring", &lab_pub]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains(&lab_id) && text(&out).contains(&mallory_id), "both keyids: {}", text(&out));
    // The key beside the run is never trusted, named directly or through a path.
    let inside = run.join("attestation.pub");
    for k in [inside.display().to_string(), format!("{}/../run/attestation.pub", run.display())] {
        let out = benchlab(&["verify-attestation", &run_s, "--pub", &k]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("inside the run folder"), "{}", text(&out));
    }
    // No keyring: refused, saying how to pin one.
    let out = benchlab(&["verify-attestation", &run_s]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--keyring") && text(&out).contains("sha256sum"), "{}", text(&out));

    // The lab's own signature put back: the records changed, so it fails on them.
    std::fs::write(run.join("attestation.dsse.json"), &original).unwrap();
    let out = benchlab(&["verify-attestation", &run_s, "--keyring", &lab_pub]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("records.jsonl"), "{}", text(&out));
}

/// The attestation log: an older envelope of the same run, by the same key, on unchanged records
/// verifies by its signature and subjects, but the log names a newer one, so it fails.
#[test]
fn an_attestation_replaced_by_an_older_one_is_caught_by_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_in_results(SMALL_RUN, dir.path());
    let run_s = run.to_str().unwrap().to_string();
    let key = dir.path().join("lab.key");
    assert!(benchlab(&["attest", "--generate-key", key.to_str().unwrap()]).status.success());
    let key_pub = format!("{}.pub", key.display());
    assert!(benchlab(&["attest", &run_s, "--key", key.to_str().unwrap()]).status.success());
    let first = std::fs::read(run.join("attestation.dsse.json")).unwrap();
    // A second attestation differs at least in made_at (seconds); write it by payload until it does.
    let mut second = first.clone();
    while second == first {
        assert!(benchlab(&["attest", &run_s, "--key", key.to_str().unwrap()]).status.success());
        second = std::fs::read(run.join("attestation.dsse.json")).unwrap();
    }
    let out = benchlab(&["verify-attestation", &run_s, "--keyring", &key_pub]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("earlier)"), "{}", text(&out));
    std::fs::write(run.join("attestation.dsse.json"), &first).unwrap();
    let out = benchlab(&["verify-attestation", &run_s, "--keyring", &key_pub]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("was replaced"), "{}", text(&out));
    let log = std::fs::read_to_string(dir.path().join("results/ATTESTATIONS.log")).unwrap();
    assert!(log.lines().count() >= 2 && log.lines().all(|l| l.starts_with("scn/run\t")), "{log}");
}
