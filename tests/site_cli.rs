//! `benchlab site` at the command line, without a browser: a run is read whole or the command
//! stops with the file and line (exit 2); a folder that is not an earlier site is never
//! overwritten; an earlier site is replaced whole; no run at all is bad input. The pages themselves
//! are tests/site_browser.rs's and the site's unit tests'.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");

fn site(results: &Path, out: &Path) -> (i32, String, String) {
    let o = Command::new(BIN).arg("site").arg(results).arg("--out").arg(out).output().unwrap();
    (
        o.status.code().unwrap(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A results folder holding one committed quickstart run (linked, not copied).
fn one_run(d: &Path) -> std::path::PathBuf {
    let results = d.join("results");
    let to = results.join("quickstart");
    std::fs::create_dir_all(&to).unwrap();
    let run = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("results/quickstart"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("records.jsonl").is_file())
        .expect("a committed quickstart run");
    std::os::unix::fs::symlink(&run, to.join(run.file_name().unwrap())).unwrap();
    results
}

#[test]
fn a_site_is_written_then_replaced_whole_and_other_folders_are_left_alone() {
    let d = tempfile::tempdir().unwrap();
    let results = one_run(d.path());
    let out = d.path().join("site");
    let (code, stdout, stderr) = site(&results, &out);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("1 runs of 1 scenarios"), "{stdout}");
    assert!(out.join("index.html").is_file() && out.join("site.json").is_file());
    // An earlier site is replaced whole: a stray file in it is gone afterwards.
    std::fs::write(out.join("stray.html"), "old").unwrap();
    let (code, _, stderr) = site(&results, &out);
    assert_eq!(code, 0, "{stderr}");
    assert!(!out.join("stray.html").exists(), "the earlier site was not replaced whole");
    // A folder with other things in it is refused and left as it was.
    let other = d.path().join("notes");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("mine.txt"), "keep").unwrap();
    let (code, _, stderr) = site(&results, &other);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("holds files but no site.json"), "{stderr}");
    assert_eq!(std::fs::read_to_string(other.join("mine.txt")).unwrap(), "keep");
}

#[test]
fn an_unreadable_record_stops_the_site_with_its_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("results/broken/20261206T000000Z-broken-0001");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("records.jsonl"), "{\"format_version\": 3,\n").unwrap();
    let (code, _, stderr) = site(&d.path().join("results"), &d.path().join("site"));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("records.jsonl") && stderr.contains(":1:"), "{stderr}");
    assert!(!d.path().join("site").exists(), "nothing is written from a partial read");
}

#[test]
fn no_run_is_bad_input_that_says_what_makes_one() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("results/empty")).unwrap();
    let (code, _, stderr) = site(&d.path().join("results"), &d.path().join("site"));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no run folder with records") && stderr.contains("benchlab run"), "{stderr}");
}
