//! The reference tool suites of TOOLS.md: which tools a suite has, their gate inputs and expected
//! values, and the argument/answer pairs the serial-call workload sends. Pure data and arithmetic.

use serde_json::{json, Value};

/// A named suite of tools every server under test implements with the same semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// Seed 001's suite: add_numbers, echo, word_count.
    Weekly,
}

impl Suite {
    pub const ALL: &'static [Suite] = &[Suite::Weekly];

    pub fn from_name(name: &str) -> Option<Suite> {
        match name {
            "weekly" => Some(Suite::Weekly),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Suite::Weekly => "weekly",
        }
    }

    /// The tool names `tools/list` must list, exactly.
    pub fn tools(self) -> &'static [&'static str] {
        match self {
            Suite::Weekly => &["add_numbers", "echo", "word_count"],
        }
    }

    /// The correctness gate: (tool, arguments, expected value) for every tool of the suite.
    pub fn gate(self) -> Vec<(&'static str, Value, Value)> {
        match self {
            Suite::Weekly => vec![
                ("add_numbers", json!({"a": 17, "b": 25}), json!(42)),
                ("echo", json!({"message": "hello"}), json!("hello")),
                (
                    "word_count",
                    json!({"text": "the quick brown fox"}),
                    json!(4),
                ),
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
            _ => Err(format!("unknown tool: {tool}")),
        }
    }

    /// JSON Schemas of the suite's tools, as `tools/list` shows them.
    pub fn tool_schemas(self) -> Vec<Value> {
        match self {
            Suite::Weekly => vec![
                tool_schema(
                    "add_numbers",
                    "Add two integers.",
                    json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
                ),
                tool_schema(
                    "echo",
                    "Echo a message back.",
                    json!({"message": {"type": "string"}}),
                ),
                tool_schema(
                    "word_count",
                    "Count whitespace-separated words.",
                    json!({"text": {"type": "string"}}),
                ),
            ],
        }
    }
}

fn tool_schema(name: &str, description: &str, properties: Value) -> Value {
    let required: Vec<&String> = properties
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
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
                assert_eq!(suite.evaluate(tool, &args), Ok(expected));
            }
        }
    }

    #[test]
    fn schemas_cover_exactly_the_suite() {
        let s = Suite::Weekly;
        let names: Vec<_> = s
            .tool_schemas()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, s.tools());
    }
}
