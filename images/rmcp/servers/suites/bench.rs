//! The `bench` suite (TOOLS.md, seed 003) on rmcp: five tools with `Json<T>` structured results
//! and output schemas, and seed 003's plain HTTP API beside MCP (`POST /api/<tool>`, the tool's
//! arguments as the body). CPU work (fibonacci) runs on the calling tokio worker, as the
//! reference servers run it on their event loop. Served by `serve.rs`.

mod serve;

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rmcp::{
    Json, ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    tool, tool_handler, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

#[derive(Deserialize, JsonSchema)]
struct MessageArgs {
    message: String,
}

#[derive(Deserialize, JsonSchema)]
struct FibArgs {
    /// Position in the Fibonacci sequence, clamped to 0-35
    n: i64,
}

#[derive(Deserialize, JsonSchema)]
struct TransformArgs {
    /// A JSON object to transform
    data: Map<String, Value>,
}

#[derive(Deserialize, JsonSchema)]
struct SleepArgs {
    /// Sleep duration in milliseconds, clamped to 0-5000
    duration_ms: i64,
}

#[derive(Deserialize, JsonSchema)]
struct PayloadArgs {
    payload: String,
}

#[derive(Serialize, JsonSchema)]
struct Echo {
    message: String,
    timestamp_ns: u64,
}

#[derive(Serialize, JsonSchema)]
struct Fibonacci {
    n: i64,
    result: u64,
    compute_time_ns: u64,
}

#[derive(Serialize, JsonSchema)]
struct TransformStats {
    strings_transformed: u64,
    numbers_found: u64,
    number_sum: f64,
    json_size_bytes: usize,
    processing_time_ns: u64,
}

#[derive(Serialize, JsonSchema)]
struct Transformed {
    transformed: Map<String, Value>,
    stats: TransformStats,
}

#[derive(Serialize, JsonSchema)]
struct Slept {
    requested_ms: i64,
    actual_ms: f64,
    overhead_ms: f64,
}

#[derive(Serialize, JsonSchema)]
struct PayloadEcho {
    payload: String,
    size_bytes: usize,
    timestamp_ns: u64,
}

fn echo(message: String) -> Echo {
    Echo { message, timestamp_ns: now_ns() }
}

fn fib(n: u64) -> u64 {
    if n <= 1 { n } else { fib(n - 1) + fib(n - 2) }
}

/// Naive recursion on purpose (CPU-bound).
fn fibonacci(n: i64) -> Fibonacci {
    let n = n.clamp(0, 35);
    let t = Instant::now();
    let result = fib(std::hint::black_box(n as u64));
    Fibonacci { n, result, compute_time_ns: t.elapsed().as_nanos() as u64 }
}

fn json_transform(data: &Map<String, Value>) -> Transformed {
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
    let t = Instant::now();
    let mut st = (0, 0, 0.0);
    let transformed: Map<String, Value> = data.iter().map(|(k, x)| (k.clone(), walk(x, &mut st))).collect();
    let processing_time_ns = t.elapsed().as_nanos() as u64;
    let json_size_bytes = py_dumps(&Value::Object(transformed.clone())).len();
    let (strings_transformed, numbers_found, number_sum) = st;
    Transformed {
        transformed,
        stats: TransformStats { strings_transformed, numbers_found, number_sum, json_size_bytes, processing_time_ns },
    }
}

/// Python's `json.dumps` with its defaults: the byte count the reference servers report.
fn py_dumps(v: &Value) -> String {
    match v {
        Value::Object(o) => {
            let items: Vec<String> =
                o.iter().map(|(k, x)| format!("{}: {}", py_dumps(&Value::String(k.clone())), py_dumps(x))).collect();
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
            if f.fract() == 0.0 && f.abs() < 1e16 { format!("{f:.1}") } else { format!("{f}") }
        }
        other => other.to_string(),
    }
}

async fn async_sleep(duration_ms: i64) -> Slept {
    let ms = duration_ms.clamp(0, 5000);
    let t = Instant::now();
    tokio::time::sleep(std::time::Duration::from_millis(ms as u64)).await;
    let actual = t.elapsed().as_secs_f64() * 1e3;
    let round3 = |x: f64| (x * 1000.0).round() / 1000.0;
    Slept { requested_ms: ms, actual_ms: round3(actual), overhead_ms: round3(actual - ms as f64) }
}

fn payload_echo(payload: String) -> PayloadEcho {
    let size_bytes = payload.len();
    PayloadEcho { payload, size_bytes, timestamp_ns: now_ns() }
}

#[derive(Clone)]
struct Bench {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Bench {
    fn new() -> Self {
        Self { tool_router: Self::tool_router() }
    }

    #[tool(description = "Echo a message back. Measures raw framework overhead.")]
    async fn echo(&self, Parameters(MessageArgs { message }): Parameters<MessageArgs>) -> Json<Echo> {
        Json(echo(message))
    }

    #[tool(description = "Calculate the nth Fibonacci number recursively. CPU-bound workload.")]
    async fn fibonacci(&self, Parameters(FibArgs { n }): Parameters<FibArgs>) -> Json<Fibonacci> {
        Json(fibonacci(n))
    }

    #[tool(description = "Transform JSON data: upper-case every string value and sum every number.")]
    async fn json_transform(&self, Parameters(TransformArgs { data }): Parameters<TransformArgs>) -> Json<Transformed> {
        Json(json_transform(&data))
    }

    #[tool(description = "Simulate an async I/O operation with a non-blocking sleep.")]
    async fn async_sleep(&self, Parameters(SleepArgs { duration_ms }): Parameters<SleepArgs>) -> Json<Slept> {
        Json(async_sleep(duration_ms).await)
    }

    #[tool(description = "Echo a large payload back with its size in bytes.")]
    async fn payload_echo(&self, Parameters(PayloadArgs { payload }): Parameters<PayloadArgs>) -> Json<PayloadEcho> {
        Json(payload_echo(payload))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Bench {
    fn get_info(&self) -> serve::Info {
        serve::info("bench")
    }
}

/// Seed 003's plain HTTP API: 200 and the tool's value, 404 for an unknown tool, 400 for
/// arguments that do not fit.
async fn rest_api(
    axum::extract::Path(tool): axum::extract::Path<String>,
    axum::Json(args): axum::Json<Value>,
) -> (axum::http::StatusCode, axum::Json<Value>) {
    use axum::http::StatusCode;
    fn arg<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, (StatusCode, String)> {
        serde_json::from_value(args).map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))
    }
    let value = async {
        let v = match tool.as_str() {
            "echo" => serde_json::to_value(echo(arg::<MessageArgs>(args)?.message)),
            "fibonacci" => serde_json::to_value(fibonacci(arg::<FibArgs>(args)?.n)),
            "json_transform" => serde_json::to_value(json_transform(&arg::<TransformArgs>(args)?.data)),
            "async_sleep" => serde_json::to_value(async_sleep(arg::<SleepArgs>(args)?.duration_ms).await),
            "payload_echo" => serde_json::to_value(payload_echo(arg::<PayloadArgs>(args)?.payload)),
            _ => return Err((StatusCode::NOT_FOUND, format!("unknown tool {tool:?}"))),
        };
        v.map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
    }
    .await;
    match value {
        Ok(v) => (StatusCode::OK, axum::Json(v)),
        Err((code, e)) => (code, axum::Json(serde_json::json!({ "error": e }))),
    }
}

fn main() {
    serve::main(Bench::new, Some(axum::Router::new().route("/api/{tool}", axum::routing::post(rest_api))));
}
