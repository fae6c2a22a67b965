//! What a server says about itself (`serverInfo` of its initialize result), bounded before it is
//! stored: the server under test writes it, so it is kept as the server's claim, cut to a size
//! the lab chose, and never read as a fact about what ran (the recipe, the image and the
//! records' environment say that).

use serde_json::Value;

/// The most bytes of a server's `serverInfo` (as compact JSON) a record keeps as written.
pub const SERVER_INFO_MAX_BYTES: usize = 4096;
/// What a cut `serverInfo` keeps of its `name` and `version`, in characters each.
pub const CLAIM_FIELD_MAX_CHARS: usize = 256;

/// A server's `serverInfo` as a record keeps it, and its size in bytes when it was cut: at most
/// `SERVER_INFO_MAX_BYTES` is kept as written; a larger one keeps only its string `name` and
/// `version`, each cut to `CLAIM_FIELD_MAX_CHARS` characters.
pub fn bound_server_info(info: Option<Value>) -> (Option<Value>, Option<u64>) {
    let Some(info) = info else { return (None, None) };
    let bytes = serde_json::to_string(&info).map_or(usize::MAX, |s| s.len());
    if bytes <= SERVER_INFO_MAX_BYTES {
        return (Some(info), None);
    }
    let mut kept = serde_json::Map::new();
    for key in ["name", "version"] {
        if let Some(Value::String(s)) = info.get(key) {
            kept.insert(key.into(), Value::String(s.chars().take(CLAIM_FIELD_MAX_CHARS).collect()));
        }
    }
    (Some(Value::Object(kept)), Some(bytes as u64))
}

/// A server's claim as a short text, `name version` (cut to `CLAIM_FIELD_MAX_CHARS` each, control
/// characters dropped), or None when it names neither.
pub fn claim_text(info: &Value) -> Option<String> {
    let field = |k: &str| {
        info.get(k)
            .and_then(Value::as_str)
            .map(|s| s.chars().filter(|c| !c.is_control()).take(CLAIM_FIELD_MAX_CHARS).collect::<String>())
    };
    let text = [field("name"), field("version")].into_iter().flatten().collect::<Vec<_>>().join(" ");
    let text = text.trim().to_string();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_small_claim_is_kept_as_written_and_a_large_one_cut() {
        let small = json!({"name": "pulse", "version": "1.0.0", "extra": [1, 2]});
        assert_eq!(bound_server_info(Some(small.clone())), (Some(small), None));
        assert_eq!(bound_server_info(None), (None, None));
        let big = json!({"name": "n".repeat(1000), "version": "2", "blob": "x".repeat(10_000)});
        let (kept, cut) = bound_server_info(Some(big));
        let kept = kept.unwrap();
        assert!(cut.unwrap() > 10_000);
        assert_eq!(kept.as_object().unwrap().len(), 2, "{kept}");
        assert_eq!(kept["name"].as_str().unwrap().len(), CLAIM_FIELD_MAX_CHARS);
        assert_eq!(kept["version"], "2");
        // Not an object, and large: nothing of it is kept.
        let (kept, cut) = bound_server_info(Some(json!("y".repeat(5000))));
        assert_eq!((kept, cut.is_some()), (Some(json!({})), true));
    }

    #[test]
    fn the_claim_text_is_short_and_plain() {
        assert_eq!(claim_text(&json!({"name": "pulse", "version": "1.0.0"})).as_deref(), Some("pulse 1.0.0"));
        assert_eq!(claim_text(&json!({"name": "a\nb|c"})).as_deref(), Some("ab|c"));
        assert_eq!(claim_text(&json!({"version": 3})), None);
    }
}
