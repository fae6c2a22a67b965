//! A record's environment, shared between the records that ran in it. A run's records ran in a
//! few environments (one per image and placement, mostly), so a reader of many records — the
//! audit's short way (`report`, `site`) and `store::read_records` (`verify`) — keeps one copy of
//! each, with the text it was read from (exactly its encoding), its canonical JSON and its hash,
//! instead of parsing, re-encoding and hashing the same 5 kB again for every record; where a
//! record's text holds an environment its thread read lately, the 5 kB are compared, not scanned
//! ([`read_record`]). Everywhere else a record's environment reads, writes and serialises as the
//! plain [`Environment`] it derefs to. Smaller parts that many records hold the same — a run's
//! speed fingerprint, the server's info — are kept one copy per text the same way
//! ([`crate::reading::part`]).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use super::manifest::Environment;

/// A record's environment; derefs to the [`Environment`]. Clones share it.
#[derive(Clone)]
pub struct SharedEnvironment(Arc<Entry>);

#[derive(Clone)]
struct Entry {
    env: Environment,
    /// How it was read, when it was read in [`reading_shared`] mode; None once changed.
    read: Option<Read>,
}

/// An environment as read from a record's text, which is exactly its serde_json encoding.
#[derive(Clone)]
pub struct Read {
    /// The text, byte for byte its encoding.
    pub text: Box<RawValue>,
    /// Its canonical JSON.
    pub canonical: Vec<u8>,
    /// sha256 hex of that: the environment's hash.
    pub hash: String,
}

impl SharedEnvironment {
    /// How it was read, when it was read in [`reading_shared`] mode and not changed since.
    pub fn read(&self) -> Option<&Read> {
        self.0.read.as_ref()
    }

    /// The environment itself (a copy when it is shared).
    pub fn into_inner(self) -> Environment {
        Arc::try_unwrap(self.0).map_or_else(|shared| shared.env.clone(), |entry| entry.env)
    }

    /// Whether two records' environments are one shared copy (not merely equal).
    pub fn same_copy(&self, other: &SharedEnvironment) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl From<Environment> for SharedEnvironment {
    fn from(env: Environment) -> Self {
        SharedEnvironment(Arc::new(Entry { env, read: None }))
    }
}

impl Deref for SharedEnvironment {
    type Target = Environment;
    fn deref(&self) -> &Environment {
        &self.0.env
    }
}

impl DerefMut for SharedEnvironment {
    /// A copy of its own, no longer as read.
    fn deref_mut(&mut self) -> &mut Environment {
        let entry = Arc::make_mut(&mut self.0);
        entry.read = None;
        &mut entry.env
    }
}

impl PartialEq for SharedEnvironment {
    fn eq(&self, other: &Self) -> bool {
        self.same_copy(other) || self.0.env == other.0.env
    }
}

impl std::fmt::Debug for SharedEnvironment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.env.fmt(f)
    }
}

thread_local! {
    /// Whether this thread writes an environment as read by its text (see [`writing_as_read`]).
    static RAW_WRITES: Cell<bool> = const { Cell::new(false) };
    /// The environments this thread read shared last, the newest first (see [`read_record`]).
    static RECENT: RefCell<Vec<SharedEnvironment>> = const { RefCell::new(Vec::new()) };
    /// The environment cut out of the text [`read_record`] is parsing, for the deserializer that
    /// meets its placeholder to take.
    static CUT: RefCell<Option<SharedEnvironment>> = const { RefCell::new(None) };
    /// The text with the environment cut out, reused from record to record.
    static CUT_TEXT: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// How many environments each thread looks for in a record's text before parsing it.
const RECENT_KEPT: usize = 8;

/// What stands in a record's text for an environment cut out of it: a JSON string no
/// environment is (an environment is an object).
const PLACEHOLDER: &str = "\"\\u0000benchlab: a shared environment, cut out\"";

/// A record read shared (see [`reading_shared`]) from its text. Where the text's
/// `"environment":` is followed by the exact text of an environment this thread read shared
/// lately, that environment is cut out before parsing, a placeholder put in its place, and the
/// record takes the known copy where its deserializer meets the placeholder: the 5 kB are
/// compared, not scanned. The result is the record the whole text parses to, or the whole text
/// is parsed: when the placeholder was not met by the record's own environment (the key found
/// was another's), or the rest did not parse (so the error is the whole text's).
pub fn read_record(text: &[u8]) -> serde_json::Result<super::Record> {
    reading_shared(|| match read_with_known_cut_out(text) {
        Some(r) => Ok(r),
        None => serde_json::from_slice(text),
    })
}

fn read_with_known_cut_out(text: &[u8]) -> Option<super::Record> {
    const KEY: &[u8] = b"\"environment\":";
    let at = memchr::memmem::find(text, KEY)? + KEY.len();
    let rest = &text[at..];
    let known = |e: &&SharedEnvironment| e.read().is_some_and(|r| rest.starts_with(r.text.get().as_bytes()));
    let env = RECENT.with_borrow(|recent| recent.iter().find(known).cloned())?;
    let len = env.read()?.text.get().len();
    let mut cut = CUT_TEXT.take();
    cut.clear();
    cut.extend_from_slice(&text[..at]);
    cut.extend_from_slice(PLACEHOLDER.as_bytes());
    cut.extend_from_slice(&rest[len..]);
    CUT.set(Some(env));
    let read = serde_json::from_slice::<super::Record>(&cut);
    let unclaimed = CUT.take().is_some();
    CUT_TEXT.set(cut);
    #[cfg(test)]
    tests::CUTS.set(tests::CUTS.get() + usize::from(read.is_ok() && !unclaimed));
    read.ok().filter(|_| !unclaimed)
}

/// Notes an environment read shared as this thread's newest.
fn remember(env: &SharedEnvironment) {
    RECENT.with_borrow_mut(|recent| {
        if let Some(i) = recent.iter().position(|e| e.same_copy(env)) {
            recent[..=i].rotate_right(1);
        } else {
            recent.insert(0, env.clone());
            recent.truncate(RECENT_KEPT);
        }
    });
}

/// Runs `f` with this thread reading records' environments shared: each read as raw text first,
/// looked up among the environments read before, parsed, encoded and hashed only when new (and
/// kept only when its text is exactly its encoding). An environment that does not parse is an
/// error without the position inside it: a caller that reports positions reads again without.
pub fn reading_shared<T>(f: impl FnOnce() -> T) -> T {
    crate::reading::shared(f)
}

/// Runs `f` with this thread serialising an environment as read by its text, which is exactly
/// its serde_json encoding: the same bytes without encoding it again. Only serde_json's own
/// serialiser may run in `f` (another would see the raw-text wrapper).
pub fn writing_as_read<T>(f: impl FnOnce() -> T) -> T {
    crate::reading::with_flag(&RAW_WRITES, f)
}

impl Serialize for SharedEnvironment {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0.read {
            Some(read) if RAW_WRITES.get() => read.text.serialize(s),
            _ => self.0.env.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for SharedEnvironment {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if !crate::reading::is_shared() {
            return Environment::deserialize(d).map(SharedEnvironment::from);
        }
        let text = Box::<RawValue>::deserialize(d)?;
        if text.get() == PLACEHOLDER {
            if let Some(cut) = CUT.take() {
                return Ok(cut);
            }
        }
        if let Some(known) = lookup(text.get()) {
            remember(&known);
            return Ok(known);
        }
        let env: Environment = serde_json::from_str(text.get()).map_err(D::Error::custom)?;
        if serde_json::to_string(&env).map_err(D::Error::custom)? != text.get() {
            // Not its encoding: nothing to share by the text.
            return Ok(env.into());
        }
        let canonical = crate::hash::canonical_json(&serde_json::to_value(&env).map_err(D::Error::custom)?);
        let hash = crate::hash::sha256_hex(canonical.as_bytes());
        let read = Read { text, canonical: canonical.into_bytes(), hash };
        let shared = SharedEnvironment(Arc::new(Entry { env, read: Some(read) }));
        keep(&shared);
        remember(&shared);
        Ok(shared)
    }
}

/// The environments read shared so far, by a fingerprint of their text. Bounded: emptied when it
/// would pass [`KEPT`] (records already read keep their copies).
static KNOWN: Mutex<Option<HashMap<u64, Vec<SharedEnvironment>>>> = Mutex::new(None);
const KEPT: usize = 1024;

fn lookup(text: &str) -> Option<SharedEnvironment> {
    let known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    let same = known.as_ref()?.get(&fingerprint(text))?;
    same.iter().find(|e| e.read().is_some_and(|r| r.text.get() == text)).cloned()
}

fn keep(shared: &SharedEnvironment) {
    let Some(read) = shared.read() else { return };
    let mut known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    let map = known.get_or_insert_with(HashMap::new);
    if map.values().map(Vec::len).sum::<usize>() >= KEPT {
        map.clear();
    }
    let same = map.entry(fingerprint(read.text.get())).or_default();
    if !same.iter().any(|e| e.read().is_some_and(|r| r.text.get() == read.text.get())) {
        same.push(shared.clone());
    }
}

/// A cheap fingerprint of a text: its length and 64 of its bytes spread over it (FNV-1a). Equal
/// texts have equal fingerprints; a lookup then compares the whole text.
fn fingerprint(text: &str) -> u64 {
    let b = text.as_bytes();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ b.len() as u64;
    let step = (b.len() / 64).max(1);
    for &c in b.iter().step_by(step) {
        h = (h ^ u64::from(c)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;

    thread_local! {
        /// The records this thread read with their environment cut out.
        pub(super) static CUTS: Cell<usize> = const { Cell::new(0) };
    }

    fn record_text() -> String {
        serde_json::to_string(&crate::record::tests::sample_record("c")).unwrap()
    }

    #[test]
    fn records_read_shared_share_one_copy_and_write_the_same_bytes() {
        let text = record_text();
        let (a, b): (Record, Record) =
            reading_shared(|| (serde_json::from_str(&text).unwrap(), serde_json::from_str(&text).unwrap()));
        assert!(a.environment.same_copy(&b.environment));
        let read = a.environment.read().expect("read shared");
        assert_eq!(read.hash, a.environment.hash());
        assert_eq!(writing_as_read(|| serde_json::to_string(&a).unwrap()), text);
        assert_eq!(serde_json::to_string(&a).unwrap(), text);
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            serde_json::from_str::<serde_json::Value>(&text).unwrap()
        );
        // Read plainly: a copy of its own.
        let c: Record = serde_json::from_str(&text).unwrap();
        assert!(c.environment.read().is_none() && !c.environment.same_copy(&a.environment));
        assert_eq!(c, a);
    }

    #[test]
    fn a_changed_environment_is_no_longer_as_read() {
        let text = record_text();
        let (mut a, b): (Record, Record) =
            reading_shared(|| (serde_json::from_str(&text).unwrap(), serde_json::from_str(&text).unwrap()));
        a.environment.host.kernel = "6.99".into();
        assert!(a.environment.read().is_none());
        assert_eq!(
            b.environment.host.kernel,
            crate::record::tests::sample_record("c").environment.host.kernel
        );
        let again = writing_as_read(|| serde_json::to_string(&a).unwrap());
        assert!(again.contains("6.99"), "written from the value, not the text read");
    }

    #[test]
    fn an_environment_that_is_not_its_own_encoding_is_read_but_not_shared() {
        // The same environment with its members in another order: it parses, but its text is not
        // its encoding, so writing it as read would change the bytes.
        let r = crate::record::tests::sample_record("c");
        let mut v = serde_json::to_value(&r).unwrap();
        let env = v["environment"].take();
        let text = serde_json::to_string(&v).unwrap();
        let mut members: Vec<(String, serde_json::Value)> =
            env.as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        members.reverse();
        let reversed = format!(
            "{{{}}}",
            members.iter().map(|(k, v)| format!("{k:?}:{v}")).collect::<Vec<_>>().join(",")
        );
        let text = text.replace("\"environment\":null", &format!("\"environment\":{reversed}"));
        let read: Record = reading_shared(|| serde_json::from_str(&text).unwrap());
        assert!(read.environment.read().is_none());
        assert_eq!(read, r);
    }

    #[test]
    fn a_bad_environment_is_an_error_either_way() {
        let text = record_text().replacen("\"scenario_sha256\"", "\"scenario_sha\"", 1);
        assert!(reading_shared(|| serde_json::from_str::<Record>(&text)).is_err());
        assert!(serde_json::from_str::<Record>(&text).is_err());
    }

    #[test]
    fn a_record_read_with_its_known_environment_cut_out_is_the_record_its_text_is() {
        let text = record_text();
        let first = read_record(text.as_bytes()).unwrap();
        // The second reading finds the first's environment in its text, and takes that copy.
        let cuts = CUTS.get();
        let second = read_record(text.as_bytes()).unwrap();
        assert_eq!(CUTS.get(), cuts + 1, "read with the environment cut out");
        assert!(second.environment.same_copy(&first.environment));
        assert_eq!(second, serde_json::from_str::<Record>(&text).unwrap());
        assert_eq!(writing_as_read(|| serde_json::to_string(&second).unwrap()), text);
        // Another record in the same environment: its own fields, the shared copy.
        let mut other = crate::record::tests::sample_record("d");
        other.seq = 7;
        let other_text = serde_json::to_string(&other).unwrap();
        let read = read_record(other_text.as_bytes()).unwrap();
        assert_eq!(CUTS.get(), cuts + 2);
        assert!(read.environment.same_copy(&first.environment));
        assert_eq!(read, other);
    }

    #[test]
    fn a_known_environment_found_under_another_key_is_not_taken_for_the_records() {
        let text = record_text();
        let first = read_record(text.as_bytes()).unwrap();
        let env_text = first.environment.read().unwrap().text.get().to_string();
        // `"environment":` and the known text, first met inside the server's info (a free-form
        // value): the placeholder would land there, so the whole text is parsed instead.
        let mut r = crate::record::tests::sample_record("c");
        r.observed.server_info = Some(Arc::new(
            serde_json::json!({ "environment": serde_json::from_str::<serde_json::Value>(&env_text).unwrap() }),
        ));
        let tricky = serde_json::to_string(&r).unwrap();
        assert!(tricky.find("\"environment\":").unwrap() < tricky.rfind("\"environment\":").unwrap());
        let cuts = CUTS.get();
        let read = read_record(tricky.as_bytes()).unwrap();
        assert_eq!(CUTS.get(), cuts, "not read with the environment cut out");
        assert_eq!(read, r, "the server's info keeps the environment written there");
        assert!(read.environment.same_copy(&first.environment));
        // A record with a schema error elsewhere: the error of the whole text, with its column.
        let bad = text.replacen("\"seq\":", "\"sequence\":", 1);
        let (shared, plain) = (read_record(bad.as_bytes()), serde_json::from_str::<Record>(&bad));
        assert_eq!(shared.unwrap_err().to_string(), plain.unwrap_err().to_string());
    }

    #[test]
    fn parts_read_shared_are_one_copy_per_text() {
        use crate::host::fingerprint::{Fingerprint, Probe};
        let probe = |name: &str, value: f64| Probe {
            name: name.into(),
            unit: "ns/iter".into(),
            higher_is_faster: false,
            value,
            lower: value * 0.9,
            upper: value * 1.1,
            repetitions: 15,
        };
        let with = |seq: u64, loop_ns: f64| {
            let mut r = crate::record::tests::sample_record("c");
            r.seq = seq;
            r.host_check = Some(Box::new(crate::host::HostCheck {
                fingerprint: Some(Arc::new(Fingerprint {
                    measured_at: "2026-12-06T00:00:00Z".into(),
                    cpus: "1,0".into(),
                    probes: vec![probe("cpu_loop", loop_ns)],
                })),
                quiet: None,
            }));
            r
        };
        let fingerprint =
            |r: &Record| Arc::clone(r.host_check.as_ref().unwrap().fingerprint.as_ref().unwrap());
        let info = |r: &Record| Arc::clone(r.observed.server_info.as_ref().unwrap());
        let (a, b, c) = (with(0, 1.5), with(1, 1.5), with(2, 2.5));
        let texts = [&a, &b, &c].map(|r| serde_json::to_string(r).unwrap());
        let read = texts.clone().map(|t| read_record(t.as_bytes()).unwrap());
        assert_eq!([&read[0], &read[1], &read[2]], [&a, &b, &c]);
        // The same text: one copy; another: a copy of its own.
        assert!(Arc::ptr_eq(&fingerprint(&read[0]), &fingerprint(&read[1])));
        assert!(!Arc::ptr_eq(&fingerprint(&read[1]), &fingerprint(&read[2])));
        assert!(Arc::ptr_eq(&info(&read[0]), &info(&read[2])));
        for (r, t) in read.iter().zip(&texts) {
            assert_eq!(&serde_json::to_string(r).unwrap(), t);
        }
        // Read plainly: copies of their own.
        let plain: Record = serde_json::from_str(&texts[0]).unwrap();
        assert!(!Arc::ptr_eq(&fingerprint(&plain), &fingerprint(&read[0])));
        assert_eq!(plain, a);
        // A part that does not parse is an error read either way.
        let bad = texts[0].replacen("\"cpus\":\"1,0\"", "\"cpus\":1", 1);
        assert!(read_record(bad.as_bytes()).is_err());
        assert!(serde_json::from_str::<Record>(&bad).is_err());
    }

    #[test]
    fn the_fingerprint_is_of_the_text() {
        assert_eq!(fingerprint("abc"), fingerprint("abc"));
        assert_ne!(fingerprint("abc"), fingerprint("abd"));
        let long = "x".repeat(5000);
        assert_eq!(fingerprint(&long), fingerprint(&long.clone()));
    }
}
