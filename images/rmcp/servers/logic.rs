//! The suites' computations, SDK-free: every rmcp API generation's server (`v0/`, `v3/`) includes
//! this one file. Values follow TOOLS.md and the lab's reference (`src/mcp/suite.rs`).

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

// ---- pulse ----

pub fn calculate_tax(amount: f64, rate: f64) -> Result<f64, String> {
    if !(amount > 0.0) {
        return Err("amount must be greater than 0".into());
    }
    Ok(round2(amount * rate))
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct Checksum {
    pub count: usize,
    pub sum: i64,
    pub sha256: String,
}

pub fn checksum(values: &[i64]) -> Result<Checksum, String> {
    if values.is_empty() || values.len() > 100 {
        return Err("values needs 1 to 100 items".into());
    }
    let joined = values.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    let digest = Sha256::digest(joined.as_bytes());
    let sha256 = digest.iter().map(|b| format!("{b:02x}")).collect();
    Ok(Checksum { count: values.len(), sum: values.iter().sum(), sha256 })
}

// ---- bench ----

#[derive(Serialize, schemars::JsonSchema)]
pub struct Echo {
    pub message: String,
    /// volatile
    pub timestamp_ns: u64,
}

pub fn echo(message: String) -> Echo {
    Echo { message, timestamp_ns: now_ns() }
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct Fibonacci {
    pub n: i64,
    pub result: u64,
    /// volatile
    pub compute_time_ns: u64,
}

fn fib(n: u64) -> u64 {
    if n <= 1 { n } else { fib(n - 1) + fib(n - 2) }
}

/// Naive recursion on purpose (CPU-bound), on the calling worker thread.
pub fn fibonacci(n: i64) -> Fibonacci {
    let n = n.clamp(0, 35);
    let t = Instant::now();
    let result = fib(std::hint::black_box(n as u64));
    Fibonacci { n, result, compute_time_ns: t.elapsed().as_nanos() as u64 }
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct TransformStats {
    pub strings_transformed: u64,
    pub numbers_found: u64,
    pub number_sum: f64,
    pub json_size_bytes: usize,
    /// volatile
    pub processing_time_ns: u64,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct Transformed {
    pub transformed: Map<String, Value>,
    pub stats: TransformStats,
}

pub fn json_transform(data: &Map<String, Value>) -> Transformed {
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
    let transformed: Map<String, Value> =
        data.iter().map(|(k, x)| (k.clone(), walk(x, &mut st))).collect();
    let elapsed = t.elapsed().as_nanos() as u64;
    let size = py_dumps(&Value::Object(transformed.clone())).len();
    Transformed {
        transformed,
        stats: TransformStats {
            strings_transformed: st.0,
            numbers_found: st.1,
            number_sum: st.2,
            json_size_bytes: size,
            processing_time_ns: elapsed,
        },
    }
}

/// Python's `json.dumps` with its defaults, for the byte count the reference tools report.
fn py_dumps(v: &Value) -> String {
    match v {
        Value::Object(o) => {
            let items: Vec<String> = o
                .iter()
                .map(|(k, x)| format!("{}: {}", py_dumps(&Value::String(k.clone())), py_dumps(x)))
                .collect();
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

#[derive(Serialize, schemars::JsonSchema)]
pub struct Slept {
    pub requested_ms: i64,
    /// volatile
    pub actual_ms: f64,
    /// volatile
    pub overhead_ms: f64,
}

/// A non-blocking sleep on the runtime's timer.
pub async fn async_sleep(duration_ms: i64) -> Slept {
    let ms = duration_ms.clamp(0, 5000);
    let t = Instant::now();
    tokio::time::sleep(std::time::Duration::from_millis(ms as u64)).await;
    let actual = t.elapsed().as_secs_f64() * 1e3;
    Slept { requested_ms: ms, actual_ms: round3(actual), overhead_ms: round3(actual - ms as f64) }
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct PayloadEcho {
    pub payload: String,
    pub size_bytes: usize,
    /// volatile
    pub timestamp_ns: u64,
}

pub fn payload_echo(payload: String) -> PayloadEcho {
    let size_bytes = payload.len();
    PayloadEcho { payload, size_bytes, timestamp_ns: now_ns() }
}

// ---- the process's settings, read the way the lab's other servers read them ----

pub struct Settings {
    pub suite: String,
    /// `stdio` (default) or `streamable-http`.
    pub transport: String,
    pub host: String,
    pub port: u16,
    /// `BENCHLAB_REPLY=json`: plain JSON replies; otherwise SSE.
    pub json_reply: bool,
    /// `BENCHLAB_SESSION=stateless`; otherwise stateful.
    pub stateless: bool,
    /// `BENCHLAB_SERVER_WORKERS`: tokio worker threads (default 1).
    pub workers: usize,
}

impl Settings {
    pub fn from_env() -> Result<Self, String> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let suite = std::env::args().nth(1).or_else(|| env("BENCHLAB_SUITE")).unwrap_or_default();
        if !matches!(suite.as_str(), "weekly" | "pulse" | "bench") {
            return Err(format!(
                "usage: rmcp-bench <weekly|pulse|bench> (or BENCHLAB_SUITE); got {suite:?}"
            ));
        }
        let transport = env("BENCHLAB_TRANSPORT").unwrap_or_else(|| "stdio".into());
        if !matches!(transport.as_str(), "stdio" | "streamable-http") {
            return Err(format!(
                "BENCHLAB_TRANSPORT={transport:?}: rmcp serves stdio and streamable-http (no legacy SSE server)"
            ));
        }
        let port = match env("BENCHLAB_PORT") {
            Some(p) => p.parse().map_err(|_| format!("BENCHLAB_PORT={p:?} is not a port"))?,
            None => 8000,
        };
        let workers = match env("BENCHLAB_SERVER_WORKERS") {
            Some(w) => w.parse::<usize>().ok().filter(|&n| n >= 1).ok_or(format!("BENCHLAB_SERVER_WORKERS={w:?}"))?,
            None => 1,
        };
        Ok(Settings {
            suite,
            transport,
            host: env("BENCHLAB_HOST").unwrap_or_else(|| "127.0.0.1".into()),
            port,
            json_reply: env("BENCHLAB_REPLY").as_deref() == Some("json"),
            stateless: env("BENCHLAB_SESSION").as_deref() == Some("stateless"),
            workers,
        })
    }
}
