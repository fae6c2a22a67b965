//! Hashing in one place: canonical JSON (sorted keys, no insignificant whitespace) and sha256 of
//! bytes, files and serialisable values. Records, recipes, bases and the native cache all hash here.

use std::cell::Cell;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical JSON: object keys sorted by their UTF-8 bytes, no insignificant whitespace, numbers
/// as serde_json prints them. Independent of serde_json's map ordering features.
pub fn canonical_json(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(v, &mut out);
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// sha256 of a value's canonical JSON.
pub fn canonical_sha256(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(v, &mut out);
    sha256_hex(&out)
}

/// Appends canonical JSON to `out`. Strings and numbers are written by serde_json itself, so they
/// are spelled exactly as `to_string` spells them, without an allocation per value.
fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            // A no-op for serde_json's default (sorted) map; needed were preserve_order on.
            keys.sort_unstable();
            out.push(b'{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, k.as_str()).expect("writing to memory");
                out.push(b':');
                write_canonical(&map[*k], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        other => serde_json::to_writer(&mut *out, other).expect("writing to memory"),
    }
}

/// The canonical JSON of a *compact* JSON text (serde_json's own encoding: no whitespace), made
/// from the text itself: members sorted, every string and number copied as written. Equal to
/// [`canonical_json`] of the value the text parses to whenever the text is serde_json's encoding
/// of that value, which is the case this exists for: checking many records without building a
/// `Value` of each. `drop` names a top-level member left out; the second sha256 is of the
/// top-level member `member`. None where the shortcut cannot be sure (an escape in a key, a key
/// twice, anything but compact JSON): use [`canonical_sha256`].
///
/// `known`: an object already canonicalised — its compact text, its canonical JSON and that
/// JSON's sha256. Where `member`'s value is exactly that text, its canonical JSON is hashed in
/// its place and its hash returned, without scanning, copying or hashing it on its own again (a
/// run's records share a few environments).
pub fn canonical_sha256_of_compact(
    text: &[u8],
    drop: &str,
    member: &str,
    known: Option<Known>,
) -> Option<(String, Option<String>)> {
    thread_local! {
        /// The output and scratch buffers, reused from text to text.
        static BUFFERS: Cell<(Vec<u8>, compact::Scratch)> = Cell::default();
    }
    let (mut out, mut scratch) = BUFFERS.take();
    out.clear();
    scratch.clear();
    let hashes = canonical_sha256_into(text, drop, member, known, &mut out, &mut scratch);
    // A few MB at most are kept for the next text.
    if out.capacity() <= 4 << 20 {
        BUFFERS.set((out, scratch));
    }
    hashes
}

fn canonical_sha256_into(
    text: &[u8],
    drop: &str,
    member: &str,
    known: Option<Known>,
    out: &mut Vec<u8>,
    scratch: &mut compact::Scratch,
) -> Option<(String, Option<String>)> {
    let mut at = compact::Noted { span: None, spliced: false, order: None };
    let known_object = known.filter(|k| k.text.starts_with(b"{"));
    let top =
        compact::Top { drop: drop.as_bytes(), note: member.as_bytes(), known: known_object, at: &mut at };
    let end = compact::canonical(text, 0, out, scratch, Some(top))?;
    if end != text.len() {
        return None;
    }
    let member_hash = match (&at.span, known_object) {
        (_, Some(k)) if at.spliced => Some(k.hash.to_string()),
        (span, _) => span.clone().map(|m| sha256_hex(&out[m])),
    };
    // A top-level object is hashed member by member in key order, from where each was written
    // (the spliced one from the known canonical JSON), without being put together first.
    let hash = match &at.order {
        None => sha256_hex(out),
        Some(order) => {
            let mut h = Sha256::new();
            h.update(b"{");
            for (i, (m, spliced)) in order.iter().enumerate() {
                if i > 0 {
                    h.update(b",");
                }
                h.update(&out[m.clone()]);
                if let (true, Some(k)) = (*spliced, known_object) {
                    h.update(k.canonical);
                }
            }
            h.update(b"}");
            hex::encode(h.finalize())
        }
    };
    Some((hash, member_hash))
}

/// A JSON object already canonicalised: its compact text, its canonical JSON, that JSON's sha256.
#[derive(Clone, Copy)]
pub struct Known<'a> {
    pub text: &'a [u8],
    pub canonical: &'a [u8],
    pub hash: &'a str,
}

/// The scanner behind [`canonical_sha256_of_compact`]: one pass over the text, each member
/// written as `"key":value` as it comes; a nested object whose keys came in order stays where it
/// was written, any other is put in order through one shared scratch buffer. The top-level
/// object's members are only noted in key order, for the hasher to take from where they are.
mod compact {
    use std::ops::Range;

    /// What the top level does differently: the member to drop, the member whose output span to
    /// note (its value spliced from `known` when it is exactly that text), and where to note it.
    pub(super) struct Top<'a, 'b> {
        pub(super) drop: &'a [u8],
        pub(super) note: &'a [u8],
        pub(super) known: Option<super::Known<'a>>,
        pub(super) at: &'b mut Noted,
    }

    /// Where the noted member's canonical value was written, and whether it was spliced (then
    /// nothing of its value was written). For a top-level object, its members (but the dropped
    /// one) in key order: where each `"key":value` was written, and whether its value is the
    /// known object's canonical JSON, to follow `"key":`; the object itself is not put in order
    /// in the output.
    pub(super) struct Noted {
        pub(super) span: Option<Range<usize>>,
        pub(super) spliced: bool,
        pub(super) order: Option<Vec<(Range<usize>, bool)>>,
    }

    /// Buffers every object of one text shares: the members of the objects open now (a stack),
    /// and the bytes of the one being put in order.
    #[derive(Default)]
    pub(super) struct Scratch {
        members: Vec<Member>,
        bytes: Vec<u8>,
    }

    impl Scratch {
        pub(super) fn clear(&mut self) {
            self.members.clear();
            self.bytes.clear();
        }
    }

    /// A member as written: where its `"key":value` is in the output, and where its value starts
    /// there.
    struct Member {
        at: Range<usize>,
        value_at: usize,
    }

    /// A member's key as written in the output (without its quotes).
    fn key<'o>(out: &'o [u8], m: &Member) -> &'o [u8] {
        &out[m.at.start + 1..m.value_at - 2]
    }

    /// Writes the canonical form of the value starting at `i`; returns where it ends.
    pub(super) fn canonical(
        b: &[u8],
        i: usize,
        out: &mut Vec<u8>,
        s: &mut Scratch,
        top: Option<Top>,
    ) -> Option<usize> {
        match *b.get(i)? {
            b'{' => object(b, i, out, s, top),
            b'[' => {
                out.push(b'[');
                let mut j = i + 1;
                if *b.get(j)? == b']' {
                    out.push(b']');
                    return Some(j + 1);
                }
                loop {
                    j = canonical(b, j, out, s, None)?;
                    match *b.get(j)? {
                        b',' => out.push(b','),
                        b']' => {
                            out.push(b']');
                            return Some(j + 1);
                        }
                        _ => return None,
                    }
                    j += 1;
                }
            }
            b'"' => {
                let end = string_end(b, i)?;
                out.extend_from_slice(&b[i..end]);
                Some(end)
            }
            c if c == b'-' || c.is_ascii_alphanumeric() => {
                let mut end = i;
                while b
                    .get(end)
                    .is_some_and(|c| matches!(c, b'-' | b'+' | b'.' | b'0'..=b'9' | b'a'..=b'z' | b'E'))
                {
                    end += 1;
                }
                out.extend_from_slice(&b[i..end]);
                Some(end)
            }
            _ => None,
        }
    }

    fn object(b: &[u8], i: usize, out: &mut Vec<u8>, s: &mut Scratch, mut top: Option<Top>) -> Option<usize> {
        let open = out.len() + 1;
        out.push(b'{');
        let base = s.members.len();
        let mut j = i + 1;
        let end = loop {
            if s.members.len() == base && *b.get(j)? == b'}' {
                break j + 1;
            }
            if *b.get(j)? != b'"' {
                return None;
            }
            let key_end = string_end(b, j)?;
            let key = &b[j + 1..key_end - 1];
            if key.contains(&b'\\') || *b.get(key_end)? != b':' {
                return None;
            }
            if s.members.len() > base {
                out.push(b',');
            }
            let start = out.len();
            out.extend_from_slice(&b[j..=key_end]);
            let value_at = out.len();
            j = match top.as_mut().and_then(|t| splice(t, key, &b[key_end + 1..])) {
                Some(len) => key_end + 1 + len,
                None => canonical(b, key_end + 1, out, s, None)?,
            };
            s.members.push(Member { at: start..out.len(), value_at });
            match *b.get(j)? {
                b',' => j += 1,
                b'}' => break j + 1,
                _ => return None,
            }
        };
        let Scratch { members, bytes } = s;
        let these = &mut members[base..];
        let written: &[u8] = out;
        let by_key = |x: &Member, y: &Member| key(written, x).cmp(key(written, y));
        if let Some(t) = top {
            // The top level: its members noted in key order, left where they were written.
            these.sort_unstable_by(by_key);
            if these.windows(2).any(|w| key(written, &w[0]) == key(written, &w[1])) {
                return None;
            }
            let spliced = t.at.spliced;
            let order = these.iter().filter(|m| key(written, m) != t.drop);
            t.at.order = Some(order.map(|m| (m.at.clone(), spliced && key(written, m) == t.note)).collect());
            t.at.span = these.iter().find(|m| key(written, m) == t.note).map(|m| m.value_at..m.at.end);
            members.truncate(base);
            return Some(end);
        }
        // Keys strictly in order (so none twice): already canonical.
        if !these.windows(2).all(|w| key(written, &w[0]) < key(written, &w[1])) {
            these.sort_unstable_by(by_key);
            if these.windows(2).any(|w| key(written, &w[0]) == key(written, &w[1])) {
                return None;
            }
            bytes.clear();
            bytes.extend_from_slice(&out[open..]);
            out.truncate(open);
            for m in these.iter() {
                if out.len() > open {
                    out.push(b',');
                }
                out.extend_from_slice(&bytes[m.at.start - open..m.at.end - open]);
            }
        }
        out.push(b'}');
        members.truncate(base);
        Some(end)
    }

    /// When `key` is the noted member and `rest` starts with the known object's text: noted as
    /// spliced (its canonical JSON is hashed from the known one, nothing is written), and the
    /// text's length (an object ends where its text does).
    fn splice(top: &mut Top, key: &[u8], rest: &[u8]) -> Option<usize> {
        let known = top.known.filter(|k| key == top.note && rest.starts_with(k.text))?;
        top.at.spliced = true;
        Some(known.text.len())
    }

    /// Where the string starting at `i` (its opening quote) ends, past its closing quote.
    fn string_end(b: &[u8], i: usize) -> Option<usize> {
        let mut j = i + 1;
        loop {
            j += memchr::memchr2(b'"', b'\\', b.get(j..)?)?;
            match b[j] {
                b'"' => return Some(j + 1),
                _ => j += 2,
            }
        }
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// sha256 of a serialisable value's canonical JSON.
pub fn canonical_hash<T: Serialize>(v: &T) -> String {
    canonical_sha256(&serde_json::to_value(v).expect("stored types serialise to JSON"))
}

pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn via_value(text: &str, drop: &str, member: &str) -> (String, Option<String>) {
        let mut v: Value = serde_json::from_str(text).unwrap();
        let m = v.get(member).map(canonical_sha256);
        v.as_object_mut().unwrap().remove(drop);
        (canonical_sha256(&v), m)
    }

    #[test]
    fn compact_text_canonicalises_as_its_value_does() {
        for v in [
            serde_json::json!({"b": 1, "a": {"z": [3, {"y": 1, "x": 2.5e-7}], "c": "é\n\"q\""}, "hash": "x"}),
            serde_json::json!({"a!": [], "a": {}, "a b": [[], [{}], null, true, false, -1.0], "env": {"k": "v,}]"}}),
            serde_json::json!({"n": [1e300, -0.0, 18446744073709551615u64, -9223372036854775808i64]}),
        ] {
            let text = serde_json::to_string(&v).unwrap();
            let got = canonical_sha256_of_compact(text.as_bytes(), "hash", "env", None).unwrap();
            assert_eq!(got, via_value(&text, "hash", "env"), "{text}");
        }
    }

    #[test]
    fn a_known_member_is_spliced_in_with_its_hash_and_changes_nothing() {
        let env = serde_json::json!({"z": [1, {"b": 2, "a": "x"}], "a": 0.1});
        let text = serde_json::to_string(&serde_json::json!({"seq": 1, "env": env, "hash": "h"})).unwrap();
        let plain = canonical_sha256_of_compact(text.as_bytes(), "hash", "env", None).unwrap();
        let env_text = serde_json::to_string(&env).unwrap();
        let canonical = canonical_json(&env);
        // A wrong hash shows whether it was spliced: it is returned only then.
        let known =
            |t: &'static str| Known { text: env_text.as_bytes(), canonical: canonical.as_bytes(), hash: t };
        let spliced =
            canonical_sha256_of_compact(text.as_bytes(), "hash", "env", Some(known("spliced"))).unwrap();
        assert_eq!(spliced, (plain.0.clone(), Some("spliced".to_string())));
        // Another member's text, or another value: scanned as usual.
        let other =
            canonical_sha256_of_compact(text.as_bytes(), "hash", "seq", Some(known("spliced"))).unwrap();
        assert_eq!(other.0, plain.0);
        assert_ne!(other.1.as_deref(), Some("spliced"));
        let changed = text.replace("0.1", "0.2");
        let got =
            canonical_sha256_of_compact(changed.as_bytes(), "hash", "env", Some(known("spliced"))).unwrap();
        assert_eq!(got, canonical_sha256_of_compact(changed.as_bytes(), "hash", "env", None).unwrap());
    }

    #[test]
    fn what_the_shortcut_cannot_be_sure_of_is_left_to_the_value() {
        for text in
            [r#"{"a\u0062":1}"#, r#"{"a":1,"a":2}"#, r#"{"a": 1}"#, r#"{"a":1}x"#, r#"{"a":1"#, r#"[1,2"#]
        {
            assert_eq!(canonical_sha256_of_compact(text.as_bytes(), "hash", "env", None), None, "{text}");
        }
    }
}
