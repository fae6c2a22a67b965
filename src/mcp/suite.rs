//! The reference tool suites of TOOLS.md: which tools a suite has, their gate inputs and expected
//! values, and the argument/answer pairs the serial-call workload sends. Pure data and arithmetic.

use serde_json::{json, Value};

/// A named suite of tools every server under test implements with the same semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// Seed 001's suite: add_numbers, echo, word_count.
    Weekly,
    /// Seed 000's stdio suite: calculate_tax, checksum (tools that validate their arguments).
    Pulse,
}

/// What a correct server answers to a gate input.
#[derive(Debug, Clone, PartialEq)]
pub enum Expected {
    /// This value (compared by `mcp::values_match`).
    Value(Value),
    /// An error: an `isError` result or a JSON-RPC error, whichever the SDK gives.
    Error,
}

impl Suite {
    pub const ALL: &'static [Suite] = &[Suite::Weekly, Suite::Pulse];

    pub fn from_name(name: &str) -> Option<Suite> {
        match name {
            "weekly" => Some(Suite::Weekly),
            "pulse" => Some(Suite::Pulse),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Suite::Weekly => "weekly",
            Suite::Pulse => "pulse",
        }
    }

    /// The tool names `tools/list` must list, exactly.
    pub fn tools(self) -> &'static [&'static str] {
        match self {
            Suite::Weekly => &["add_numbers", "echo", "word_count"],
            Suite::Pulse => &["calculate_tax", "checksum"],
        }
    }

    /// The correctness gate: (tool, arguments, expected answer), error cases included.
    pub fn gate(self) -> Vec<(&'static str, Value, Expected)> {
        use Expected::{Error, Value as V};
        match self {
            Suite::Weekly => vec![
                ("add_numbers", json!({"a": 17, "b": 25}), V(json!(42))),
                ("echo", json!({"message": "hello"}), V(json!("hello"))),
                ("word_count", json!({"text": "the quick brown fox"}), V(json!(4))),
            ],
            Suite::Pulse => vec![
                ("calculate_tax", json!({"amount": 100}), V(json!(8.0))),
                ("calculate_tax", json!({"amount": -1}), Error),
                ("checksum", json!({"values": [1, 2, 3]}), V(checksum_value(&[1, 2, 3]))),
                ("checksum", json!({"values": []}), Error),
            ],
        }
    }

    /// The i-th call of a serial-call run on `tool`: arguments that vary with `i` (so no layer can
    /// answer from a cache) and the value a correct server returns.
    pub fn call(self, tool: &str, i: u64) -> Option<(Value, Value)> {
        match (self, tool) {
            (Suite::Weekly, "add_numbers") => {
                let a = i as i64;
                let b = 1_000 - (i as i64 % 997);
                Some((json!({"a": a, "b": b}), json!(a + b)))
            }
            (Suite::Weekly, "echo") => {
                let m = format!("hello {i}");
                Some((json!({"message": m}), json!(m)))
            }
            (Suite::Weekly, "word_count") => {
                let words = (i % 12 + 1) as usize;
                let text = vec!["word"; words].join(" ");
                Some((json!({"text": text}), json!(words)))
            }
            (Suite::Pulse, "calculate_tax") => {
                // Whole cents times a whole percent: the product rounds the same way everywhere.
                let amount = (100 + i % 9_900) as f64;
                Some((json!({"amount": amount, "rate": 0.07}), json!(round2(amount * 0.07))))
            }
            (Suite::Pulse, "checksum") => {
                let values: Vec<i64> = (0..(i % 10 + 1) as i64).map(|k| k * 7 + i as i64).collect();
                Some((json!({"values": values}), checksum_value(&values)))
            }
            _ => None,
        }
    }

    /// What a correct server computes for `tool` on `args`: used by the built-in null server, so
    /// the floor does the same work a real server must (parse, compute, answer).
    pub fn evaluate(self, tool: &str, args: &Value) -> Result<Value, String> {
        match (self, tool) {
            (Suite::Weekly, "add_numbers") => {
                let a = args.get("a").and_then(Value::as_i64);
                let b = args.get("b").and_then(Value::as_i64);
                match (a, b) {
                    (Some(a), Some(b)) => Ok(json!(a.wrapping_add(b))),
                    _ => Err("add_numbers needs integer arguments a and b".into()),
                }
            }
            (Suite::Weekly, "echo") => args
                .get("message")
                .and_then(Value::as_str)
                .map(|m| json!(m))
                .ok_or_else(|| "echo needs a string argument message".into()),
            (Suite::Weekly, "word_count") => args
                .get("text")
                .and_then(Value::as_str)
                .map(|t| json!(t.split_whitespace().count()))
                .ok_or_else(|| "word_count needs a string argument text".into()),
            (Suite::Pulse, "calculate_tax") => {
                let amount = args
                    .get("amount")
                    .and_then(Value::as_f64)
                    .ok_or("calculate_tax needs a number amount")?;
                let rate = match args.get("rate") {
                    None | Some(Value::Null) => 0.08,
                    Some(r) => r.as_f64().ok_or("rate must be a number")?,
                };
                if amount <= 0.0 {
                    return Err("amount must be greater than 0".into());
                }
                Ok(json!(round2(amount * rate)))
            }
            (Suite::Pulse, "checksum") => {
                let values: Vec<i64> = args
                    .get("values")
                    .and_then(Value::as_array)
                    .ok_or("checksum needs an integer array values")?
                    .iter()
                    .map(|v| v.as_i64().ok_or("values must be integers"))
                    .collect::<Result<_, _>>()?;
                if values.is_empty() || values.len() > 100 {
                    return Err("values needs 1 to 100 items".into());
                }
                Ok(checksum_value(&values))
            }
            _ => Err(format!("unknown tool: {tool}")),
        }
    }

    /// JSON Schemas of the suite's tools, as `tools/list` shows them.
    pub fn tool_schemas(self) -> Vec<Value> {
        match self {
            Suite::Pulse => vec![
                tool_schema(
                    "calculate_tax",
                    "Tax on an amount at a rate.",
                    json!({"amount": {"type": "number", "exclusiveMinimum": 0}, "rate": {"type": "number", "default": 0.08}}),
                    &["amount"],
                ),
                tool_schema(
                    "checksum",
                    "Count, sum and sha256 of integers.",
                    json!({"values": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 100}}),
                    &["values"],
                ),
            ],
            Suite::Weekly => vec![
                tool_schema(
                    "add_numbers",
                    "Add two integers.",
                    json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
                    &["a", "b"],
                ),
                tool_schema(
                    "echo",
                    "Echo a message back.",
                    json!({"message": {"type": "string"}}),
                    &["message"],
                ),
                tool_schema(
                    "word_count",
                    "Count whitespace-separated words.",
                    json!({"text": {"type": "string"}}),
                    &["text"],
                ),
            ],
        }
    }
}

/// round(x, 2) as Python and JavaScript servers compute it for the values the lab sends.
fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// `{count, sum, sha256}` of the decimal values joined by ",".
pub fn checksum_value(values: &[i64]) -> Value {
    use sha2::{Digest, Sha256};
    let joined = values.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    json!({
        "count": values.len(),
        "sum": values.iter().sum::<i64>(),
        "sha256": hex::encode(Sha256::digest(joined.as_bytes())),
    })
}

fn tool_schema(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": required},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_calls_agree_with_evaluation() {
        for suite in Suite::ALL {
            for tool in suite.tools() {
                for i in [0u64, 1, 2, 11, 12, 996, 997, 10_000] {
                    let (args, expected) = suite.call(tool, i).unwrap();
                    assert_eq!(suite.evaluate(tool, &args), Ok(expected));
                }
            }
            for (tool, args, expected) in suite.gate() {
                match expected {
                    Expected::Value(v) => assert_eq!(suite.evaluate(tool, &args), Ok(v)),
                    Expected::Error => {
                        assert!(suite.evaluate(tool, &args).is_err(), "{tool} {args}")
                    }
                }
            }
        }
    }

    #[test]
    fn schemas_cover_exactly_the_suite() {
        for s in Suite::ALL {
            let names: Vec<_> =
                s.tool_schemas().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
            assert_eq!(names, s.tools());
        }
    }

    #[test]
    fn pulse_values_match_the_published_definitions() {
        assert_eq!(Suite::Pulse.evaluate("calculate_tax", &json!({"amount": 100})), Ok(json!(8.0)));
        // sha256("1,2,3"), computed independently with sha256sum.
        assert_eq!(
            checksum_value(&[1, 2, 3]),
            json!({"count": 3, "sum": 6, "sha256": "8a6ae15122001229edb8866f56e342af12ae8187203c3e3b33931743e7c0c48d"})
        );
        assert!(Suite::Pulse.evaluate("checksum", &json!({"values": []})).is_err());
        assert!(Suite::Pulse.evaluate("calculate_tax", &json!({"amount": 0})).is_err());
    }
}
