//! The built-in suites as Rust defined them before they became files (test-only): the gate
//! inputs and the call generator of weekly, pulse, bench and tax, kept to write the suite files'
//! calls (`BENCHLAB_WRITE_SUITES=1` with `mcp::builtin`'s tests) and to prove the files judge
//! every answer as these did.

use serde_json::{json, Value};

use crate::mcp::suite::{checksum_value, json_transform_value, round2, Expected, Suite, VOLATILE};

/// Bench's tools, in the order tools/list lists them.
pub const BENCH_TOOLS: &[&str] = &["echo", "fibonacci", "json_transform", "async_sleep", "payload_echo"];

fn volatile() -> Value {
    Value::String(VOLATILE.into())
}

/// Seed 003's json_transform input: five users.
pub fn bench_users() -> Value {
    let users: Vec<Value> = [
        ("alice", 30, "new york"),
        ("bob", 25, "san francisco"),
        ("charlie", 35, "london"),
        ("diana", 28, "tokyo"),
        ("eve", 32, "paris"),
    ]
    .iter()
    .map(|(n, a, c)| json!({"name": n, "age": a, "city": c}))
    .collect();
    json!({ "users": users })
}

/// The correctness gate: (tool, arguments, expected answer), error cases included.
pub fn gate(s: Suite) -> Vec<(&'static str, Value, Expected)> {
    use Expected::{Error, Value as V};
    match s {
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
        Suite::Tax => vec![("calculate_tax", json!({"amount": 100}), V(json!(8.0)))],
        Suite::Shop { .. } => unreachable!("the shop is not a suite file"),
        Suite::Bench => BENCH_TOOLS
            .iter()
            .map(|t| {
                let (args, expected) = call(s, t, 0).expect("every bench tool has its call");
                (*t, args, V(expected))
            })
            .collect(),
    }
}

/// The i-th call of a serial-call run on `tool`: arguments that vary with `i` (so no layer can
/// answer from a cache) and the value a correct server returns.
pub fn call(s: Suite, tool: &str, i: u64) -> Option<(Value, Value)> {
    match (s, tool) {
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
        (Suite::Pulse | Suite::Tax, "calculate_tax") => {
            // Whole cents times a whole percent: the product rounds the same way everywhere.
            let amount = (100 + i % 9_900) as f64;
            Some((json!({"amount": amount, "rate": 0.07}), json!(round2(amount * 0.07))))
        }
        (Suite::Pulse, "checksum") => {
            let values: Vec<i64> = (0..(i % 10 + 1) as i64).map(|k| k * 7 + i as i64).collect();
            Some((json!({"values": values}), checksum_value(&values)))
        }
        // Seed 003 calls every tool with the same parameters; so does the lab.
        (Suite::Bench, "echo") => Some((
            json!({"message": "hello benchmark"}),
            json!({"message": "hello benchmark", "timestamp_ns": volatile()}),
        )),
        (Suite::Bench, "fibonacci") => {
            Some((json!({"n": 25}), json!({"n": 25, "result": 75025, "compute_time_ns": volatile()})))
        }
        (Suite::Bench, "json_transform") => {
            let data = bench_users();
            let mut v = json_transform_value(&data);
            v["stats"]["processing_time_ns"] = volatile();
            Some((json!({ "data": data }), v))
        }
        (Suite::Bench, "async_sleep") => Some((
            json!({"duration_ms": 50}),
            json!({"requested_ms": 50, "actual_ms": volatile(), "overhead_ms": volatile()}),
        )),
        (Suite::Bench, "payload_echo") => {
            let payload = "x".repeat(10_000);
            Some((
                json!({ "payload": payload }),
                json!({"payload": payload, "size_bytes": 10_000, "timestamp_ns": volatile()}),
            ))
        }
        _ => None,
    }
}
