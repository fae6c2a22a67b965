//! A line's JSON as written (order and spelling kept), re-encoded the way the writer encodes it,
//! to find where a line's bytes depart from the writer's encoding. What counts as a problem is
//! `line`'s call.

use std::fmt;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// JSON kept in the order and form it was written, to compare a line against the writer's
/// encoding without depending on the order of fields in the code.
pub(super) enum Written {
    Null,
    Bool(bool),
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Str(String),
    Array(Vec<Written>),
    Object(Vec<(String, Written)>),
}

impl<'de> Deserialize<'de> for Written {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Written;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E>(self) -> Result<Written, E> {
                Ok(Written::Null)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Written, E> {
                Ok(Written::Bool(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Written, E> {
                Ok(Written::Unsigned(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Written, E> {
                Ok(Written::Signed(v))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Written, E> {
                Ok(Written::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Written, E> {
                Ok(Written::Str(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Written, E> {
                Ok(Written::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Written, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element()? {
                    out.push(item);
                }
                Ok(Written::Array(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Written, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    out.push((key, map.next_value()?));
                }
                Ok(Written::Object(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl Written {
    pub(super) fn to_value(&self) -> Value {
        match self {
            Written::Null => Value::Null,
            Written::Bool(b) => Value::Bool(*b),
            Written::Unsigned(u) => Value::from(*u),
            Written::Signed(i) => Value::from(*i),
            Written::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Written::Str(s) => Value::String(s.clone()),
            Written::Array(items) => Value::Array(items.iter().map(Written::to_value).collect()),
            // Like serde_json's own Value: of duplicate keys the last wins (the schema check
            // refuses duplicates).
            Written::Object(entries) => {
                Value::Object(entries.iter().map(|(k, v)| (k.clone(), v.to_value())).collect())
            }
        }
    }

    /// The writer's (serde_json's compact) encoding, keys in the order they came.
    fn encode(&self, out: &mut String) {
        match self {
            Written::Null => out.push_str("null"),
            Written::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Written::Unsigned(u) => out.push_str(&u.to_string()),
            Written::Signed(i) => out.push_str(&i.to_string()),
            Written::Float(f) => out.push_str(&serde_json::to_string(f).expect("a parsed float is finite")),
            Written::Str(s) => out.push_str(&serde_json::to_string(s).expect("strings serialise")),
            Written::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.encode(out);
                }
                out.push(']');
            }
            Written::Object(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(k).expect("strings serialise"));
                    out.push(':');
                    v.encode(out);
                }
                out.push('}');
            }
        }
    }
}

/// Where a line's bytes first depart from the writer's encoding of what they parse to:
/// (1-based column, expected excerpt, found excerpt). None when the line is exactly that encoding.
pub(super) fn encoding_difference(written: &Written, text: &str) -> Option<(usize, String, String)> {
    let mut again = String::with_capacity(text.len());
    written.encode(&mut again);
    if again == text {
        return None;
    }
    let at = again.bytes().zip(text.bytes()).take_while(|(a, b)| a == b).count();
    Some((at + 1, excerpt(&again, at), excerpt(text, at)))
}

/// About 24 bytes either side of `at`, on character boundaries, with "…" where cut.
fn excerpt(s: &str, at: usize) -> String {
    let mut start = at.saturating_sub(24);
    while !s.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (at + 24).min(s.len());
    while !s.is_char_boundary(end) {
        end += 1;
    }
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.push_str(&s[start..end]);
    if end < s.len() {
        out.push('…');
    }
    if at >= s.len() {
        out.push_str(" (end of line)");
    }
    out
}
