//! The reference tool suites of TOOLS.md by name (`Suite`) and a suite a cell runs (`AnySuite`:
//! built-in or data), with what a correct server computes for each tool (the null server's
//! answers) and the tool schemas it lists. The built-in suites' tools, calls, checks and gates
//! are not here: they are suite files (`mcp::builtin`), except the shop's (`mcp::shop`).

use std::sync::Arc;

use serde_json::{json, Value};

use super::data::{Check, ListRule, SuiteData};
use super::shop;

/// A named suite of tools every server under test implements with the same semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// Seed 001's suite: add_numbers, echo, word_count.
    Weekly,
    /// Seed 000's stdio suite: calculate_tax, checksum (tools that validate their arguments).
    Pulse,
    /// Seed 003's suite: echo, fibonacci, json_transform, async_sleep, payload_echo, called
    /// with the seed's own parameters; timing fields in their answers are volatile.
    Bench,
    /// Seed 000's own listings: `calculate_tax` alone, as its three published programs define
    /// it. They disagree on arguments out of range (only the TypeScript one refuses a negative
    /// amount), so the gate checks a valid call only.
    Tax,
    /// Issue 20's suite (docs/TOOLS-shop.md): checkout, get_cart, get_stock, search_products,
    /// doing real I/O against the cell's Redis and the lab's API service, both seeded from `seed`.
    Shop { seed: u64 },
}

/// An expected value that matches whatever the server put there (timestamps, measured times):
/// the key must be present, its value is not compared.
pub const VOLATILE: &str = "\u{1}volatile";

/// What a correct server answers to a gate input.
#[derive(Debug, Clone, PartialEq)]
pub enum Expected {
    /// This value (compared by `mcp::values_match`).
    Value(Value),
    /// An error: an `isError` result or a JSON-RPC error, whichever the SDK gives.
    Error,
    /// A value that passes a data suite's check (`mcp::data::Check`; never `Error`, which is
    /// the variant above).
    Check(Check),
}

impl Expected {
    /// Whether a tool's value is a correct answer; the error says what was expected.
    pub fn verdict(&self, value: &Value) -> Result<(), String> {
        match self {
            Expected::Value(v) if super::values_match(v, value) => Ok(()),
            Expected::Value(v) => Err(format!("expected {v}, got {value}")),
            Expected::Error => Check::Error.verdict(value),
            Expected::Check(c) => c.verdict(value),
        }
    }
}

/// A suite a cell runs: one of the built-in suites, or one written as data (`[[suite]]`).
#[derive(Debug, Clone, PartialEq)]
pub enum AnySuite {
    Builtin(Suite),
    Data(Arc<SuiteData>),
}

impl AnySuite {
    pub fn name(&self) -> &str {
        match self {
            AnySuite::Builtin(s) => s.name(),
            AnySuite::Data(d) => &d.name,
        }
    }

    /// The tools `tools/list` must list (exactly, or at least: `list_rule`).
    pub fn tools(&self) -> Vec<&str> {
        match self {
            AnySuite::Builtin(s) => s.tools(),
            AnySuite::Data(d) => d.tools.iter().map(|t| t.name.as_str()).collect(),
        }
    }

    pub fn list_rule(&self) -> ListRule {
        match self {
            AnySuite::Builtin(s) => s.data().map_or(ListRule::Exact, |d| d.list),
            AnySuite::Data(d) => d.list,
        }
    }

    pub fn needs_services(&self) -> bool {
        matches!(self, AnySuite::Builtin(s) if s.needs_services())
    }

    /// What identifies the suite's content (`SuiteData::sha256`); None for the shop, which is
    /// Rust and its seed, not data.
    pub fn sha256(&self) -> Option<String> {
        match self {
            AnySuite::Builtin(s) => s.data().map(SuiteData::sha256),
            AnySuite::Data(d) => Some(d.sha256()),
        }
    }

    /// The correctness gate: (tool, arguments, expected answer). A data suite's: its `[[gate]]`,
    /// else every tool once with its first call.
    pub fn gate(&self) -> Vec<(String, Value, Expected)> {
        match self {
            AnySuite::Builtin(s) => s.gate(),
            AnySuite::Data(d) => data_gate(d),
        }
    }

    /// The i-th call on `tool`: its arguments and what a correct answer is.
    pub fn call(&self, tool: &str, i: u64) -> Option<(Value, Expected)> {
        match self {
            AnySuite::Builtin(s) => s.call(tool, i),
            AnySuite::Data(d) => data_call(d, tool, i),
        }
    }
}

fn data_expected(c: &Check) -> Expected {
    match c {
        Check::Error => Expected::Error,
        c => Expected::Check(c.clone()),
    }
}

fn data_gate(d: &SuiteData) -> Vec<(String, Value, Expected)> {
    d.gate().into_iter().map(|(t, a, c)| (t, a, data_expected(&c))).collect()
}

fn data_call(d: &SuiteData, tool: &str, i: u64) -> Option<(Value, Expected)> {
    d.call(tool, i).map(|(a, c)| (a, data_expected(c)))
}

impl Suite {
    /// Every suite (Shop with its default seed).
    pub const ALL: &'static [Suite] =
        &[Suite::Weekly, Suite::Pulse, Suite::Bench, Suite::Tax, Suite::Shop { seed: shop::DEFAULT_SEED }];

    /// A built-in suite by its name (`from_name`'s other name, where data suites are also in play).
    pub fn builtin(name: &str) -> Option<Suite> {
        Suite::from_name(name)
    }

    pub fn from_name(name: &str) -> Option<Suite> {
        match name {
            "weekly" => Some(Suite::Weekly),
            "pulse" => Some(Suite::Pulse),
            "bench" => Some(Suite::Bench),
            "tax" => Some(Suite::Tax),
            shop::SUITE => Some(Suite::Shop { seed: shop::DEFAULT_SEED }),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Suite::Weekly => "weekly",
            Suite::Pulse => "pulse",
            Suite::Bench => "bench",
            Suite::Tax => "tax",
            Suite::Shop { .. } => shop::SUITE,
        }
    }

    /// The suite file the lab carries for it (images/suites/<name>.toml), read by the data
    /// parser: its tools, calls, checks and gate. None for the shop, whose calls and answers
    /// come from data seeded into its services (`mcp::shop`).
    pub fn data(self) -> Option<&'static SuiteData> {
        match self {
            Suite::Shop { .. } => None,
            s => Some(super::builtin::suite(s.name())),
        }
    }

    fn file(self) -> &'static SuiteData {
        self.data().expect("every built-in suite but the shop has its suite file")
    }

    /// The suite with its data seeded from `seed` (the shop's); other suites have no data.
    pub fn with_seed(self, seed: u64) -> Suite {
        match self {
            Suite::Shop { .. } => Suite::Shop { seed },
            other => other,
        }
    }

    /// Whether the suite's tools need the cell's backing services (Redis, the lab's API): its
    /// answers are then not `evaluate`'s, and its gate writes to them.
    pub fn needs_services(self) -> bool {
        matches!(self, Suite::Shop { .. })
    }

    /// The tool names `tools/list` must list, exactly.
    pub fn tools(self) -> Vec<&'static str> {
        match self.data() {
            Some(d) => d.tools.iter().map(|t| t.name.as_str()).collect(),
            None => shop::TOOLS.to_vec(),
        }
    }

    /// The correctness gate: (tool, arguments, expected answer), error cases included.
    pub fn gate(self) -> Vec<(String, Value, Expected)> {
        match self {
            Suite::Shop { seed } => {
                shop::gate(seed).into_iter().map(|(t, a, e)| (t.to_string(), a, e)).collect()
            }
            s => data_gate(s.file()),
        }
    }

    /// The i-th call of a serial-call run on `tool`: arguments that vary with `i` (so no layer
    /// can answer from a cache; a suite file's list of calls, cycled) and what a correct server
    /// answers.
    pub fn call(self, tool: &str, i: u64) -> Option<(Value, Expected)> {
        match self {
            Suite::Shop { seed } => shop::call(seed, tool, i).map(|(a, v)| (a, Expected::Value(v))),
            s => data_call(s.file(), tool, i),
        }
    }

    /// What a correct server computes for `tool` on `args`: used by the built-in null server, so
    /// the floor does the same work a real server must (parse, compute, answer).
    pub fn evaluate(self, tool: &str, args: &Value) -> Result<Value, String> {
        match (self, tool) {
            (Suite::Shop { .. }, _) => Err("the shop suite's tools need its services".into()),
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
            (Suite::Pulse | Suite::Tax, "calculate_tax") => {
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
            (Suite::Bench, "echo") => {
                let m = args.get("message").and_then(Value::as_str).ok_or("echo needs a string message")?;
                Ok(json!({"message": m, "timestamp_ns": now_ns()}))
            }
            (Suite::Bench, "fibonacci") => {
                let n =
                    args.get("n").and_then(Value::as_i64).ok_or("fibonacci needs an integer n")?.clamp(0, 35);
                let t = std::time::Instant::now();
                let r = fib(n as u64);
                Ok(json!({"n": n, "result": r, "compute_time_ns": t.elapsed().as_nanos() as u64}))
            }
            (Suite::Bench, "json_transform") => {
                let data = args
                    .get("data")
                    .filter(|d| d.is_object())
                    .ok_or("json_transform needs an object data")?;
                let t = std::time::Instant::now();
                let mut v = json_transform_value(data);
                v["stats"]["processing_time_ns"] = json!(t.elapsed().as_nanos() as u64);
                Ok(v)
            }
            (Suite::Bench, "async_sleep") => {
                // The null server is single-threaded: its sleep blocks it (the floor has no
                // event loop to yield to). Real servers under test sleep without blocking.
                let ms = args
                    .get("duration_ms")
                    .and_then(Value::as_i64)
                    .ok_or("async_sleep needs duration_ms")?
                    .clamp(0, 5000);
                let t = std::time::Instant::now();
                std::thread::sleep(std::time::Duration::from_millis(ms as u64));
                let actual = t.elapsed().as_secs_f64() * 1e3;
                Ok(
                    json!({"requested_ms": ms, "actual_ms": round3(actual), "overhead_ms": round3(actual - ms as f64)}),
                )
            }
            (Suite::Bench, "payload_echo") => {
                let p = args
                    .get("payload")
                    .and_then(Value::as_str)
                    .ok_or("payload_echo needs a string payload")?;
                Ok(json!({"payload": p, "size_bytes": p.len(), "timestamp_ns": now_ns()}))
            }
            _ => Err(format!("unknown tool: {tool}")),
        }
    }

    /// JSON Schemas of the suite's tools, as `tools/list` shows them.
    pub fn tool_schemas(self) -> Vec<Value> {
        match self {
            Suite::Shop { .. } => shop::tool_schemas(),
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
            Suite::Tax => vec![tool_schema(
                "calculate_tax",
                "Tax on an amount at a rate.",
                json!({"amount": {"type": "number"}, "rate": {"type": "number", "default": 0.08}}),
                &["amount"],
            )],
            Suite::Bench => vec![
                tool_schema(
                    "echo",
                    "Echo a message back.",
                    json!({"message": {"type": "string"}}),
                    &["message"],
                ),
                tool_schema(
                    "fibonacci",
                    "The nth Fibonacci number, naively.",
                    json!({"n": {"type": "integer"}}),
                    &["n"],
                ),
                tool_schema(
                    "json_transform",
                    "Upper-case strings, sum numbers.",
                    json!({"data": {"type": "object"}}),
                    &["data"],
                ),
                tool_schema(
                    "async_sleep",
                    "Sleep without blocking.",
                    json!({"duration_ms": {"type": "integer"}}),
                    &["duration_ms"],
                ),
                tool_schema(
                    "payload_echo",
                    "Echo a payload with its size.",
                    json!({"payload": {"type": "string"}}),
                    &["payload"],
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

/// json_transform's answer (with processing_time_ns left 0): strings upper-cased, numbers summed
/// (as a float, as the Python reference does), json_size_bytes of Python's `json.dumps`.
pub(crate) fn json_transform_value(data: &Value) -> Value {
    fn walk(v: &Value, st: &mut (u64, u64, f64)) -> Value {
        match v {
            Value::Object(o) => Value::Object(o.iter().map(|(k, x)| (k.clone(), walk(x, st))).collect()),
            Value::Array(a) => Value::Array(a.iter().map(|x| walk(x, st)).collect()),
            Value::String(s) => {
                st.0 += 1;
                Value::String(s.to_uppercase())
            }
            Value::Number(n) => {
                st.1 += 1;
                st.2 += n.as_f64().unwrap_or(0.0);
                v.clone()
            }
            other => other.clone(),
        }
    }
    let mut st = (0, 0, 0.0);
    let transformed = walk(data, &mut st);
    let size = py_dumps(&transformed).len();
    json!({
        "transformed": transformed,
        "stats": {"strings_transformed": st.0, "numbers_found": st.1, "number_sum": st.2, "json_size_bytes": size, "processing_time_ns": 0},
    })
}

/// Python's `json.dumps` with its defaults (", " and ": " separators, ASCII escapes), for the
/// byte counts the Python reference tools report. Keys keep the order of `v` (the lab's maps
/// are sorted, as the reference inputs are written in sorted order).
pub fn py_dumps(v: &Value) -> String {
    match v {
        Value::Object(o) => {
            let items: Vec<String> =
                o.iter().map(|(k, x)| format!("{}: {}", py_dumps(&json!(k)), py_dumps(x))).collect();
            format!("{{{}}}", items.join(", "))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(py_dumps).collect::<Vec<_>>().join(", ")),
        Value::String(s) => {
            let mut out = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                        let mut buf = [0u16; 2];
                        for u in c.encode_utf16(&mut buf) {
                            out.push_str(&format!("\\u{u:04x}"));
                        }
                    }
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(0.0);
            if f.fract() == 0.0 && f.abs() < 1e16 {
                format!("{f:.1}")
            } else {
                format!("{f}")
            }
        }
        other => other.to_string(),
    }
}

fn fib(n: u64) -> u64 {
    if n <= 1 {
        n
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// round(x, 2) as Python and JavaScript servers compute it for the values the lab sends.
pub(crate) fn round2(x: f64) -> f64 {
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
    fn bench_values_match_the_reference_implementation() {
        // Computed with CPython 3.13 running images/gradio/servers/gr_api/bench.py's transform.
        let expected = json_transform_value(&builtin_args(Suite::Bench, "json_transform")["data"]);
        assert_eq!(expected["stats"]["json_size_bytes"], 256);
        assert_eq!(expected["stats"]["strings_transformed"], 10);
        assert_eq!(expected["stats"]["number_sum"], 150.0);
        assert_eq!(expected["transformed"]["users"][2]["city"], "LONDON");
        let (args, check) = Suite::Bench.call("json_transform", 0).unwrap();
        assert_eq!(check.verdict(&Suite::Bench.evaluate("json_transform", &args).unwrap()), Ok(()));
        let (a, e) = Suite::Bench.call("fibonacci", 0).unwrap();
        assert_eq!(e.verdict(&Suite::Bench.evaluate("fibonacci", &a).unwrap()), Ok(()));
        // A volatile field must be present, whatever its value.
        assert!(e.verdict(&json!({"n": 25, "result": 75025})).is_err());
        assert!(e.verdict(&json!({"n": 25, "result": 75026, "compute_time_ns": 1})).is_err());
        assert_eq!(e.verdict(&json!({"n": 25, "result": 75025, "compute_time_ns": "any"})), Ok(()));
    }

    fn builtin_args(s: Suite, tool: &str) -> Value {
        s.call(tool, 0).unwrap().0
    }

    #[test]
    fn generated_calls_agree_with_evaluation() {
        // The shop's answers come from its services (mcp::shop's tests check them on a model).
        for suite in Suite::ALL.iter().filter(|s| !s.needs_services()) {
            for tool in suite.tools() {
                for i in [0u64, 1, 2, 11, 12, 996, 997, 10_000] {
                    let (args, expected) = suite.call(tool, i).unwrap();
                    let got = suite.evaluate(tool, &args).unwrap();
                    assert_eq!(expected.verdict(&got), Ok(()), "{tool} {args}");
                }
            }
            for (tool, args, expected) in suite.gate() {
                match suite.evaluate(&tool, &args) {
                    Ok(got) => assert_eq!(expected.verdict(&got), Ok(()), "{tool} {args}"),
                    Err(_) => assert_eq!(expected, Expected::Error, "{tool} {args}"),
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
    fn the_shop_is_named_seeded_and_answered_by_its_services() {
        let shop = Suite::from_name("shop").unwrap();
        assert_eq!(shop, Suite::Shop { seed: shop::DEFAULT_SEED });
        assert_eq!(shop.name(), "shop");
        assert_eq!(shop.with_seed(9), Suite::Shop { seed: 9 });
        assert_eq!(Suite::Weekly.with_seed(9), Suite::Weekly);
        assert!(shop.needs_services() && !Suite::Weekly.needs_services());
        assert!(shop.evaluate("get_cart", &json!({"user": "u01"})).unwrap_err().contains("services"));
        let gate: Vec<_> = shop::gate(9).into_iter().map(|(t, a, e)| (t.to_string(), a, e)).collect();
        assert_eq!(shop.with_seed(9).gate(), gate);
        let call = shop::call(shop::DEFAULT_SEED, "get_cart", 3).map(|(a, v)| (a, Expected::Value(v)));
        assert_eq!(shop.call("get_cart", 3), call);
        assert!(shop.call("checkout", 0).is_none());
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
