//! Tests of the audit against stores written by `Store` and then damaged by hand.

use std::path::PathBuf;

use serde_json::Value;

use super::*;
use crate::hash::canonical_json;
use crate::record::files::RECORDS_FILE;
use crate::record::store::Store;
use crate::record::tests::sample_record;
use crate::record::Record;

fn store_with(n: usize) -> (tempfile::TempDir, PathBuf, Vec<Record>) {
    let d = tempfile::tempdir().unwrap();
    let mut store = Store::open(d.path()).unwrap();
    let records = (0..n).map(|i| store.append(sample_record(&format!("s{i}"))).unwrap()).collect();
    drop(store);
    let path = d.path().join(RECORDS_FILE);
    (d, path, records)
}

fn rewrite(path: &Path, f: impl FnOnce(&mut Vec<String>)) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    f(&mut lines);
    std::fs::write(path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
}

#[test]
fn an_intact_store_audits_clean_and_the_raw_hash_is_the_record_hash() {
    let (_d, path, records) = store_with(3);
    let r = audit(&path);
    assert!(r.is_clean(), "{:#?}", r.problems);
    assert_eq!((r.lines, r.records, r.last_seq), (3, 3, Some(2)));
    assert_eq!(r.last_hash.as_deref(), Some(records[2].hash.as_str()));
    assert_eq!(r.run_id.as_deref(), Some("run"));
    assert_eq!(r.head, Some(Head { records: 3, hash: Some(records[2].hash.clone()) }));
    // The hash over the raw line (used for lines that are not records) is compute_hash().
    let line = std::fs::read_to_string(&path).unwrap().lines().next().unwrap().to_string();
    let mut v: Value = serde_json::from_str(&line).unwrap();
    v.as_object_mut().unwrap().remove("hash");
    assert_eq!(sha256_hex(canonical_json(&v).as_bytes()), records[0].compute_hash());
}

#[test]
fn a_numerically_equal_respelling_is_an_encoding_problem() {
    let (_d, path, _) = store_with(2);
    rewrite(&path, |l| l[1] = l[1].replace("1.5e-7", "1.5E-7"));
    let r = audit(&path);
    let p = r.first_problem().unwrap();
    assert_eq!((p.check, p.line, p.seq), (Check::Encoding, Some(2), Some(1)));
    assert!(p.found.contains("1.5E-7") && p.expected.contains("1.5e-7"), "{p}");
    assert_eq!(r.problems.len(), 1, "the hash is over the value, so only the encoding differs");
}

#[test]
fn an_absent_optional_field_is_a_round_trip_problem() {
    let (_d, path, _) = store_with(2);
    rewrite(&path, |l| l[0] = l[0].replace("\"failure\":null,", ""));
    let r = audit(&path);
    assert_eq!(r.problems.len(), 1, "{:#?}", r.problems);
    let p = &r.problems[0];
    assert_eq!((p.check, p.line), (Check::RoundTrip, Some(1)));
    assert_eq!((p.expected.as_str(), p.found.as_str()), ("/failure = null", "/failure = (absent)"));
}

#[test]
fn a_deleted_line_is_pinpointed_at_the_record_after_it() {
    let (_d, path, records) = store_with(4);
    rewrite(&path, |l| {
        l.remove(1);
    });
    let r = audit(&path);
    let checks: Vec<_> = r.problems.iter().map(|p| (p.line, p.check)).collect();
    assert_eq!(
        checks,
        vec![(Some(2), Check::Seq), (Some(2), Check::PrevHash), (None, Check::Head)],
        "{:#?}",
        r.problems
    );
    assert_eq!(r.problems[1].expected, records[0].hash);
    assert_eq!(r.problems[1].found, records[1].hash);
    assert_eq!(r.problems[0].cell_id.as_deref(), Some("s2/cold_start"));
}

#[test]
fn the_last_line_cut_at_a_boundary_is_caught_by_the_head() {
    let (_d, path, records) = store_with(3);
    rewrite(&path, |l| {
        l.pop();
    });
    let r = audit(&path);
    assert_eq!(r.problems.len(), 1);
    let p = &r.problems[0];
    assert_eq!(p.check, Check::Head);
    assert_eq!(p.expected, format!("3 record(s) ending in {}", records[2].hash));
    assert_eq!(p.found, format!("2 record(s) ending in {}", records[1].hash));
}

#[test]
fn a_head_one_behind_is_a_note_not_a_problem() {
    let (d, path, records) = store_with(3);
    let head = Head { records: 2, hash: Some(records[1].hash.clone()) };
    std::fs::write(d.path().join(HEAD_FILE), serde_json::to_string(&head).unwrap()).unwrap();
    let r = audit(&path);
    assert!(r.is_clean(), "{:#?}", r.problems);
    assert!(r.notes.iter().any(|n| n.contains("one record behind")), "{:?}", r.notes);
}

#[test]
fn a_store_without_a_head_is_clean_with_a_warning() {
    let (d, path, _) = store_with(3);
    assert!(audit(&path).warnings.is_empty(), "a store with its head has nothing to warn of");
    std::fs::remove_file(d.path().join(HEAD_FILE)).unwrap();
    let r = audit(&path);
    assert!(r.is_clean(), "a missing head is not damage: {:#?}", r.problems);
    assert_eq!(
        r.warnings,
        vec!["no records.head: a cut at the end of records.jsonl cannot be detected (the run predates head files)"]
    );
    assert!(r.notes.iter().all(|n| !n.contains(HEAD_FILE)), "said once, as a warning: {:?}", r.notes);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["warnings"][0], r.warnings[0].as_str(), "--json shows it too");

    // The cut it cannot see: the last line gone, and still clean.
    rewrite(&path, |l| {
        l.pop();
    });
    let r = audit(&path);
    assert!(r.is_clean() && r.warnings.len() == 1, "{:#?}", r);
}

#[test]
fn a_torn_line_is_reported_with_the_length_to_keep() {
    let (_d, path, _) = store_with(2);
    let good = std::fs::read(&path).unwrap();
    let mut bytes = good.clone();
    bytes.extend_from_slice(br#"{"format_version":2,"ru"#);
    std::fs::write(&path, &bytes).unwrap();
    let r = audit(&path);
    let p = r.first_problem().unwrap();
    assert_eq!((p.check, p.line), (Check::Torn, Some(3)));
    assert!(p.found.contains(&format!("truncating the file to {} bytes", good.len())), "{p}");
    assert_eq!(r.problems.len(), 1, "the head still names line 2: {:#?}", r.problems);
}

#[test]
fn scenario_and_run_id_are_checked_on_every_record() {
    let (d, path, _) = store_with(2);
    std::fs::write(d.path().join(SCENARIO_FILE), "name = \"other\"\n").unwrap();
    let r = audit(&path);
    let checks: Vec<_> = r.problems.iter().map(|p| (p.line, p.check)).collect();
    assert_eq!(checks, vec![(Some(1), Check::Scenario), (Some(2), Check::Scenario)]);
    match Store::open(d.path()) {
        Ok(_) => panic!("a store whose scenario does not match was continued"),
        Err(e) => assert!(e.to_string().contains(": scenario: expected "), "{e}"),
    }

    // A record of another run, correctly hashed and chained, is still caught.
    std::fs::write(d.path().join(SCENARIO_FILE), "x").unwrap();
    rewrite(&path, |l| l.clear());
    std::fs::remove_file(d.path().join(HEAD_FILE)).unwrap();
    let mut prev: Option<Record> = None;
    let mut text = String::new();
    for (i, run) in ["run", "run", "other"].into_iter().enumerate() {
        let mut r = sample_record("x");
        r.run_id = run.into();
        r.seq = i as u64;
        r.environment.scenario_sha256 = sha256_hex(b"x");
        r.env_hash = r.environment.hash();
        r.prev_hash = prev.as_ref().map(|p| p.hash.clone());
        r.hash = r.compute_hash();
        text.push_str(&serde_json::to_string(&r).unwrap());
        text.push('\n');
        prev = Some(r);
    }
    std::fs::write(&path, text).unwrap();
    let r = audit(&path);
    let checks: Vec<_> = r.problems.iter().map(|p| (p.line, p.check)).collect();
    assert_eq!(checks, vec![(Some(3), Check::RunId)], "{:#?}", r.problems);
    assert_eq!(r.problems[0].found, "other");
}

#[test]
fn garbage_lines_do_not_hide_the_rest() {
    let (_d, path, _) = store_with(3);
    rewrite(&path, |l| {
        l[0] = "not json".into();
        l.insert(2, String::new());
    });
    let r = audit(&path);
    let checks: Vec<_> = r.problems.iter().map(|p| (p.line, p.check)).collect();
    // Line 2 cannot be chained to line 1 (unreadable); the blank line 3 keeps line 4 chained
    // to line 2, which holds.
    assert_eq!(checks, vec![(Some(1), Check::Json), (Some(3), Check::Blank)], "{:#?}", r.problems);
    assert_eq!(r.problems[0].column, Some(2), "serde_json: `o` is where \"not\" stops being JSON");
}

#[test]
fn problems_display_with_their_place() {
    let p = Problem {
        line: Some(3),
        column: None,
        seq: Some(2),
        cell_id: Some("a/cold_start".into()),
        check: Check::Hash,
        expected: "aa".into(),
        found: "bb".into(),
    };
    assert_eq!(p.to_string(), "line 3 (seq 2, cell a/cold_start): hash: expected aa, found bb");
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["check"], "hash");
}

#[test]
fn the_short_way_finds_what_the_long_way_finds_on_lines_the_writer_wrote() {
    let (_d, path, records) = store_with(2);
    let text = std::fs::read_to_string(&path).unwrap();
    let good = text.lines().nth(1).unwrap().to_string();
    let mut v: Value = serde_json::from_str(&good).unwrap();
    v["hash"] = Value::String("0".repeat(64));
    v["env_hash"] = Value::String("f".repeat(64));
    v["run_id"] = Value::String("another".into());
    let tampered = serde_json::to_string(&serde_json::from_value::<Record>(v).unwrap()).unwrap();
    for (line, found) in [(good, vec![]), (tampered, vec!["Hash", "EnvHash", "RunId"])] {
        let walk = |read: &dyn Fn(usize, &[u8]) -> line::Line| {
            let mut report = audit(&path);
            report.problems.clear();
            let mut chain = line::Chain::Known { seq: Some(0), hash: Some(records[0].hash.clone()) };
            let mut l = read(2, line.as_bytes());
            let record = l.take_record().map(|r| r.hash);
            let prev = line::follow(l, &mut chain, &mut report);
            (format!("{:?}", report.problems), report.records, record, prev)
        };
        let short = walk(&|n, content| line::read_line(n, content, true));
        assert_eq!(short, walk(&line::read_line_parsed), "{line}");
        assert!(short.2.is_some());
        for check in &found {
            assert!(short.0.contains(&format!("check: {check},")), "{check} in {}", short.0);
        }
        assert_eq!(short.0 == "[]", found.is_empty(), "{}", short.0);
    }
}

/// The audit takes a record's hashes from its line's text; on every committed record that is
/// exactly `compute_hash()` and `environment.hash()`.
#[test]
fn hashes_from_the_text_are_the_definitions_on_every_committed_record() {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let mut checked = 0;
    for scenario in std::fs::read_dir(&results).unwrap().flatten() {
        for run in std::fs::read_dir(scenario.path()).into_iter().flatten().flatten() {
            let Ok(text) = std::fs::read_to_string(run.path().join(RECORDS_FILE)) else { continue };
            for line in text.lines() {
                let r: Record = serde_json::from_str(line).unwrap();
                let (hash, env) =
                    crate::hash::canonical_sha256_of_compact(line.as_bytes(), "hash", "environment", None)
                        .unwrap();
                assert_eq!(
                    (hash, env.unwrap()),
                    (r.compute_hash(), r.environment.hash()),
                    "{}",
                    run.path().display()
                );
                // Read shared (as the audit's short way does), its environment spliced in.
                let shared: Record =
                    crate::record::shared::reading_shared(|| serde_json::from_str(line)).unwrap();
                let e = shared.environment.read().expect("committed environments are their own encoding");
                let known = crate::hash::Known {
                    text: e.text.get().as_bytes(),
                    canonical: &e.canonical,
                    hash: &e.hash,
                };
                let spliced = crate::hash::canonical_sha256_of_compact(
                    line.as_bytes(),
                    "hash",
                    "environment",
                    Some(known),
                );
                assert_eq!(
                    spliced,
                    Some((r.compute_hash(), Some(r.environment.hash()))),
                    "{}",
                    run.path().display()
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "{checked} records");
}

/// Records that share an environment are read with one copy of it; a record whose environment
/// was changed on its line (hashes left as they were) is caught on that line alone, and the
/// records around it, sharing the original, stay clean.
#[test]
fn a_changed_environment_among_shared_ones_is_caught_on_its_line() {
    let (_d, path, _) = store_with(5);
    rewrite(&path, |l| l[2] = l[2].replacen("\"kernel\":\"6\"", "\"kernel\":\"7\"", 1));
    let (r, records) = audit_and_read(&path);
    assert!(records.is_none(), "a store with problems returns no records");
    let checks: Vec<_> = r.problems.iter().map(|p| (p.line, p.check)).collect();
    assert_eq!(checks, vec![(Some(3), Check::Hash), (Some(3), Check::EnvHash)], "{:#?}", r.problems);

    let (_d, path, written) = store_with(5);
    let (r, records) = audit_and_read(&path);
    assert!(r.is_clean(), "{:#?}", r.problems);
    let records = records.unwrap();
    assert_eq!(records, written);
    assert!(records.windows(2).all(|w| w[0].environment.same_copy(&w[1].environment)));
}
