//! The JSON Schema subset a data suite's `schema` check understands: which keywords it accepts
//! (refusing every other one when the suite is read, so no keyword is silently ignored) and
//! validating a value against a schema written with them. Not a general JSON Schema validator:
//! no `$ref`, no combinators, no formats.

use serde_json::{Map, Value};

/// The keywords a schema check understands. `title` and `description` are annotations: accepted
/// and not checked, as JSON Schema defines them.
pub const KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "const",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "additionalProperties",
    "title",
    "description",
];

const TYPES: &[&str] = &["null", "boolean", "object", "array", "number", "integer", "string"];

/// Whether a schema uses only the subset, each keyword with a value of the right shape; the
/// error names the JSON Pointer of the offending keyword in the schema and the subset.
pub fn refuse_unsupported(schema: &Value) -> Result<(), String> {
    walk(schema, "").map_err(|(at, m)| format!("schema {}: {m}", if at.is_empty() { "(top)" } else { &at }))
}

fn walk(schema: &Value, at: &str) -> Result<(), (String, String)> {
    let o = schema.as_object().ok_or_else(|| (at.to_string(), "a schema is a table".to_string()))?;
    for (k, v) in o {
        let here = format!("{at}/{k}");
        let bad = |m: &str| Err((here.clone(), m.to_string()));
        match k.as_str() {
            "type" => {
                let names: Vec<&Value> = match v {
                    Value::Array(a) => a.iter().collect(),
                    v => vec![v],
                };
                if names.is_empty() || !names.iter().all(|n| n.as_str().is_some_and(|n| TYPES.contains(&n))) {
                    return bad(&format!("`type` is one of {} or a list of them", TYPES.join(", ")));
                }
            }
            "properties" => {
                let props = v.as_object().ok_or_else(|| (here.clone(), "`properties` is a table".into()))?;
                for (name, s) in props {
                    walk(s, &format!("{here}/{name}"))?;
                }
            }
            "items" => walk(v, &here)?,
            "required" if !v.as_array().is_some_and(|a| a.iter().all(Value::is_string)) => {
                return bad("`required` is a list of property names")
            }
            "enum" if !v.is_array() => return bad("`enum` is a list of values"),
            "minimum" | "maximum" if !v.is_number() => return bad(&format!("`{k}` is a number")),
            "minLength" | "maxLength" if !v.is_u64() => return bad(&format!("`{k}` is a whole number")),
            "pattern" => {
                let p = v.as_str().ok_or_else(|| (here.clone(), "`pattern` is a string".into()))?;
                regex::Regex::new(p).map_err(|e| (here.clone(), format!("pattern {p:?}: {e}")))?;
            }
            "additionalProperties" if v != &Value::Bool(false) => {
                return bad("only `additionalProperties = false` is understood")
            }
            "title" | "description" if !v.is_string() => return bad(&format!("`{k}` is a string")),
            k if KEYWORDS.contains(&k) => {}
            k => {
                return bad(&format!(
                    "keyword `{k}` is not understood; a schema check understands {}",
                    KEYWORDS.join(", ")
                ))
            }
        }
    }
    Ok(())
}

/// Whether `value` is valid under `schema` (already accepted by [`refuse_unsupported`]); the
/// error names the JSON Pointer into the value where it is not.
pub fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    check(schema, value, "").map_err(|(at, m)| match at.is_empty() {
        true => m,
        false => format!("at {at}: {m}"),
    })
}

fn type_of(v: &Value, name: &str) -> bool {
    match name {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "number" => v.is_number(),
        // JSON Schema: a number with a zero fractional part is an integer (1.0 is).
        "integer" => v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "string" => v.is_string(),
        _ => false,
    }
}

fn check(schema: &Value, v: &Value, at: &str) -> Result<(), (String, String)> {
    let empty = Map::new();
    let s = schema.as_object().unwrap_or(&empty);
    let fail = |m: String| Err((at.to_string(), m));
    if let Some(t) = s.get("type") {
        let names: Vec<&str> = match t {
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            t => t.as_str().into_iter().collect(),
        };
        if !names.iter().any(|n| type_of(v, n)) {
            return fail(format!("{} is not of type {}", clip(v), names.join(" or ")));
        }
    }
    if let Some(c) = s.get("const") {
        if !super::super::values_match(c, v) {
            return fail(format!("{} is not the constant {c}", clip(v)));
        }
    }
    if let Some(Value::Array(e)) = s.get("enum") {
        if !e.iter().any(|c| super::super::values_match(c, v)) {
            return fail(format!("{} is not one of {}", clip(v), Value::Array(e.clone())));
        }
    }
    if let Some(x) = v.as_f64() {
        if let Some(min) = s.get("minimum").and_then(Value::as_f64).filter(|m| x < *m) {
            return fail(format!("{x} is below the minimum {min}"));
        }
        if let Some(max) = s.get("maximum").and_then(Value::as_f64).filter(|m| x > *m) {
            return fail(format!("{x} is above the maximum {max}"));
        }
    }
    if let Some(text) = v.as_str() {
        // JSON Schema counts characters (code points), not bytes.
        let n = text.chars().count() as u64;
        if let Some(min) = s.get("minLength").and_then(Value::as_u64).filter(|m| n < *m) {
            return fail(format!("{n} characters, fewer than minLength {min}"));
        }
        if let Some(max) = s.get("maxLength").and_then(Value::as_u64).filter(|m| n > *m) {
            return fail(format!("{n} characters, more than maxLength {max}"));
        }
        if let Some(p) = s.get("pattern").and_then(Value::as_str) {
            let re = regex::Regex::new(p).map_err(|e| (at.to_string(), format!("pattern {p:?}: {e}")))?;
            if !re.is_match(text) {
                return fail(format!("{} does not match the pattern {p:?}", clip(v)));
            }
        }
    }
    if let Some(o) = v.as_object() {
        if let Some(Value::Array(req)) = s.get("required") {
            if let Some(missing) = req.iter().filter_map(Value::as_str).find(|k| !o.contains_key(*k)) {
                return fail(format!("the required property {missing:?} is missing"));
            }
        }
        let props = s.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        for (k, x) in o {
            match props.get(k) {
                Some(p) => check(p, x, &format!("{at}/{k}"))?,
                None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return fail(format!("the property {k:?} is not allowed (additionalProperties = false)"))
                }
                None => {}
            }
        }
    }
    if let (Some(a), Some(items)) = (v.as_array(), s.get("items")) {
        for (i, x) in a.iter().enumerate() {
            check(items, x, &format!("{at}/{i}"))?;
        }
    }
    Ok(())
}

fn clip(v: &Value) -> String {
    super::clip(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_subset_is_accepted_and_every_other_keyword_refused() {
        let ok = json!({
            "type": "object", "required": ["result"], "additionalProperties": false,
            "title": "answer",
            "properties": {
                "result": {"type": "integer", "minimum": 0, "maximum": 100},
                "name": {"type": ["string", "null"], "minLength": 1, "maxLength": 8, "pattern": "^[a-z]+$"},
                "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
                "v": {"const": 2},
            },
        });
        assert_eq!(refuse_unsupported(&ok), Ok(()));
        for (schema, says) in [
            (
                json!({"oneOf": []}),
                "schema /oneOf: keyword `oneOf` is not understood; a schema check understands type,",
            ),
            (json!({"properties": {"a": {"$ref": "#"}}}), "schema /properties/a/$ref: keyword `$ref`"),
            (json!({"items": {"format": "email"}}), "schema /items/format: keyword `format`"),
            (json!({"type": "int"}), "`type` is one of"),
            (json!({"additionalProperties": {"type": "string"}}), "only `additionalProperties = false`"),
            (json!({"additionalProperties": true}), "only `additionalProperties = false`"),
            (json!({"pattern": "("}), "pattern \"(\""),
            (json!({"minLength": -1}), "whole number"),
            (json!({"required": "a"}), "list of property names"),
            (json!(3), "schema (top): a schema is a table"),
        ] {
            let e = refuse_unsupported(&schema).unwrap_err();
            assert!(e.contains(says), "{schema}: {e}");
        }
    }

    #[test]
    fn values_are_validated_keyword_by_keyword() {
        let s = json!({
            "type": "object", "required": ["result"], "additionalProperties": false,
            "properties": {
                "result": {"type": "integer", "minimum": 0, "maximum": 100},
                "name": {"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[a-zé]+$"},
                "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
                "v": {"const": 2},
            },
        });
        for good in [
            json!({"result": 5}),
            json!({"result": 5.0, "name": "éé", "tags": ["a", "b", "a"], "v": 2.0}),
            json!({"result": 0, "name": "abc", "tags": []}),
        ] {
            assert_eq!(validate(&s, &good), Ok(()), "{good}");
        }
        for (bad, says) in [
            (json!([]), "[] is not of type object"),
            (json!({}), "the required property \"result\" is missing"),
            (json!({"result": 1.5}), "at /result: 1.5 is not of type integer"),
            (json!({"result": "1"}), "not of type integer"),
            (json!({"result": -1}), "at /result: -1 is below the minimum 0"),
            (json!({"result": 101}), "above the maximum 100"),
            (json!({"result": 1, "name": "a"}), "at /name: 1 characters, fewer than minLength 2"),
            (json!({"result": 1, "name": "abcd"}), "more than maxLength 3"),
            (json!({"result": 1, "name": "AB"}), "does not match the pattern"),
            (json!({"result": 1, "tags": ["a", "c"]}), "at /tags/1: \"c\" is not one of [\"a\",\"b\"]"),
            (json!({"result": 1, "v": 3}), "at /v: 3 is not the constant 2"),
            (json!({"result": 1, "extra": true}), "\"extra\" is not allowed"),
        ] {
            let e = validate(&s, &bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        // Without additionalProperties = false, other properties are allowed; `type` lists.
        assert_eq!(validate(&json!({"properties": {}}), &json!({"x": 1})), Ok(()));
        assert_eq!(validate(&json!({"type": ["string", "null"]}), &Value::Null), Ok(()));
        assert!(validate(&json!({"type": ["string", "null"]}), &json!(1)).is_err());
    }

    #[test]
    fn the_subset_agrees_with_a_full_validator() {
        // jsonschema (a dev-dependency, a full draft 2020-12 validator) as the reference.
        let schemas = [
            json!({"type": "object", "required": ["result"], "properties": {"result": {"type": "integer"}}}),
            json!({"type": "object", "additionalProperties": false, "properties": {"a": {"type": ["string", "null"], "minLength": 2, "maxLength": 3, "pattern": "^a"}}}),
            json!({"type": "array", "items": {"type": "number", "minimum": -1.5, "maximum": 2}}),
            json!({"enum": [1, "x", null, [1, 2], {"k": true}]}),
            json!({"const": {"n": 25}}),
            json!({"properties": {"n": {"const": 1}}}),
            json!({"type": "boolean"}),
        ];
        let values = [
            json!(null),
            json!(true),
            json!(0),
            json!(1),
            json!(1.0),
            json!(1.5),
            json!(2),
            json!(-2),
            json!("x"),
            json!(""),
            json!("ab"),
            json!("abcd"),
            json!("ba"),
            json!([]),
            json!([1, 2]),
            json!([1, 3]),
            json!([-1.5, 2.0]),
            json!({}),
            json!({"result": 1}),
            json!({"result": 1.0}),
            json!({"result": "1"}),
            json!({"a": "ab"}),
            json!({"a": null}),
            json!({"a": "b"}),
            json!({"a": "ab", "b": 1}),
            json!({"k": true}),
            json!({"n": 25}),
            json!({"n": 25.0}),
            json!({"n": 1}),
            json!({"n": 2}),
        ];
        for s in &schemas {
            assert_eq!(refuse_unsupported(s), Ok(()), "{s}");
            let full = jsonschema::validator_for(s).unwrap();
            for v in &values {
                assert_eq!(validate(s, v).is_ok(), full.is_valid(v), "{s} on {v}: {:?}", validate(s, v));
            }
        }
    }
}
