//! Hashing in one place: canonical JSON (sorted keys, no insignificant whitespace) and sha256 of
//! bytes, files and serialisable values. Records, recipes, bases and the native cache all hash here.

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

/// sha256 of an object's canonical JSON, and of the canonical JSON of its member `key` (written
/// once: the member's canonical JSON is a part of the object's).
pub fn canonical_sha256_and_member(v: &Value, key: &str) -> (String, Option<String>) {
    let mut out = Vec::new();
    let Value::Object(map) = v else {
        write_canonical(v, &mut out);
        return (sha256_hex(&out), None);
    };
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort_unstable();
    let mut member = None;
    out.push(b'{');
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, k.as_str()).expect("writing to memory");
        out.push(b':');
        let start = out.len();
        write_canonical(&map[*k], &mut out);
        if k.as_str() == key {
            member = Some(start..out.len());
        }
    }
    out.push(b'}');
    (sha256_hex(&out), member.map(|m| sha256_hex(&out[m])))
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
