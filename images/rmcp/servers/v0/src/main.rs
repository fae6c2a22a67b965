//! benchlab prototype: the `weekly`, `pulse` and `bench` suites (TOOLS.md) on rmcp 0.17,
//! with `#[tool_router]` / `#[tool]` / `#[tool_handler]`, `Parameters<T>` arguments (schemars
//! schemas) and `Json<T>` structured results.
//!
//! `rmcp-bench <weekly|pulse|bench>` (or `$BENCHLAB_SUITE`). `$BENCHLAB_TRANSPORT`: `stdio`
//! (default) or `streamable-http` on `$BENCHLAB_HOST:$BENCHLAB_PORT` at `/mcp`;
//! `$BENCHLAB_REPLY=json` for JSON replies, `$BENCHLAB_SESSION=stateless` for stateless mode
//! (rmcp 0.17: `stateful_mode: false`; JSON replies only apply when stateless), and
//! `$BENCHLAB_SERVER_WORKERS` tokio worker threads (default 1). The `bench` suite also serves
//! `POST /api/<tool>` (seed 003's plain HTTP API, no MCP).

#[path = "../../logic.rs"]
mod logic;

use rmcp::{
    Json, ServerHandler, ServiceExt,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{Implementation, ServerCapabilities, ServerInfo},
    tool, tool_handler, tool_router,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

/// rmcp 0.x: `ServerInfo` is a plain struct (no builder, no `ServerConfig` alias); the protocol
/// version defaults to `ProtocolVersion::LATEST` (2025-06-18 from 0.17.0).
fn config(name: &str) -> ServerInfo {
    ServerInfo {
        capabilities: ServerCapabilities::builder().enable_tools().build(),
        server_info: Implementation {
            name: name.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            ..Implementation::from_build_env()
        },
        ..Default::default()
    }
}

// ---------------------------------------------------------------- weekly (seed 001)

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

#[derive(Deserialize, JsonSchema)]
struct MessageArgs {
    message: String,
}

#[derive(Deserialize, JsonSchema)]
struct TextArgs {
    text: String,
}

#[derive(Clone)]
struct Weekly {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Weekly {
    fn new() -> Self {
        Self { tool_router: Self::tool_router() }
    }

    #[tool(description = "Add two integers.")]
    async fn add_numbers(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        a.wrapping_add(b).to_string()
    }

    #[tool(description = "Echo a message back.")]
    async fn echo(&self, Parameters(MessageArgs { message }): Parameters<MessageArgs>) -> String {
        message
    }

    #[tool(description = "Count the whitespace-separated words of a text.")]
    async fn word_count(&self, Parameters(TextArgs { text }): Parameters<TextArgs>) -> String {
        text.split_whitespace().count().to_string()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Weekly {
    fn get_info(&self) -> ServerInfo {
        config("weekly")
    }
}

// ---------------------------------------------------------------- pulse (seed 000)

fn default_rate() -> f64 {
    0.08
}

#[derive(Deserialize, JsonSchema)]
struct TaxArgs {
    /// Base transaction amount (> 0)
    #[schemars(extend("exclusiveMinimum" = 0))]
    amount: f64,
    /// Tax rate fraction
    #[serde(default = "default_rate")]
    rate: f64,
}

#[derive(Deserialize, JsonSchema)]
struct ChecksumArgs {
    #[schemars(length(min = 1, max = 100))]
    values: Vec<i64>,
}

#[derive(Clone)]
struct Pulse {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Pulse {
    fn new() -> Self {
        Self { tool_router: Self::tool_router() }
    }

    /// An `Err` is a tool result with `isError: true`.
    #[tool(description = "Calculate the tax on an amount at a given rate, rounded to 2 decimals.")]
    async fn calculate_tax(
        &self,
        Parameters(TaxArgs { amount, rate }): Parameters<TaxArgs>,
    ) -> Result<String, String> {
        let tax = logic::calculate_tax(amount, rate)?;
        serde_json::to_string(&tax).map_err(|e| e.to_string()) // 8.0, as Python prints it
    }

    #[tool(description = "Count, sum and SHA-256 of the comma-joined decimal values of 1 to 100 integers.")]
    async fn checksum(
        &self,
        Parameters(ChecksumArgs { values }): Parameters<ChecksumArgs>,
    ) -> Result<Json<logic::Checksum>, String> {
        logic::checksum(&values).map(Json)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Pulse {
    fn get_info(&self) -> ServerInfo {
        config("pulse")
    }
}

// ---------------------------------------------------------------- bench (seed 003)

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
    async fn echo(&self, Parameters(MessageArgs { message }): Parameters<MessageArgs>) -> Json<logic::Echo> {
        Json(logic::echo(message))
    }

    #[tool(description = "Calculate the nth Fibonacci number recursively. CPU-bound workload.")]
    async fn fibonacci(&self, Parameters(FibArgs { n }): Parameters<FibArgs>) -> Json<logic::Fibonacci> {
        Json(logic::fibonacci(n))
    }

    #[tool(description = "Transform JSON data: upper-case every string value and sum every number.")]
    async fn json_transform(
        &self,
        Parameters(TransformArgs { data }): Parameters<TransformArgs>,
    ) -> Json<logic::Transformed> {
        Json(logic::json_transform(&data))
    }

    #[tool(description = "Simulate an async I/O operation with a non-blocking sleep.")]
    async fn async_sleep(&self, Parameters(SleepArgs { duration_ms }): Parameters<SleepArgs>) -> Json<logic::Slept> {
        Json(logic::async_sleep(duration_ms).await)
    }

    #[tool(description = "Echo a large payload back with its size in bytes.")]
    async fn payload_echo(&self, Parameters(PayloadArgs { payload }): Parameters<PayloadArgs>) -> Json<logic::PayloadEcho> {
        Json(logic::payload_echo(payload))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Bench {
    fn get_info(&self) -> ServerInfo {
        config("bench")
    }
}

/// Seed 003's plain HTTP API: `POST /api/<tool>` with the tool's arguments as the JSON body.
async fn rest_api(
    axum::extract::Path(tool): axum::extract::Path<String>,
    axum::Json(args): axum::Json<Value>,
) -> (axum::http::StatusCode, axum::Json<Value>) {
    use axum::http::StatusCode;
    fn arg<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, String> {
        serde_json::from_value(args).map_err(|e| e.to_string())
    }
    let value: Result<Value, String> = async {
        Ok(match tool.as_str() {
            "echo" => serde_json::to_value(logic::echo(arg::<MessageArgs>(args)?.message)),
            "fibonacci" => serde_json::to_value(logic::fibonacci(arg::<FibArgs>(args)?.n)),
            "json_transform" => serde_json::to_value(logic::json_transform(&arg::<TransformArgs>(args)?.data)),
            "async_sleep" => serde_json::to_value(logic::async_sleep(arg::<SleepArgs>(args)?.duration_ms).await),
            "payload_echo" => serde_json::to_value(logic::payload_echo(arg::<PayloadArgs>(args)?.payload)),
            _ => return Err(String::from("unknown tool")),
        }
        .map_err(|e| e.to_string())?)
    }
    .await;
    match value {
        Ok(v) => (StatusCode::OK, axum::Json(v)),
        Err(e) if e == "unknown tool" => (StatusCode::NOT_FOUND, axum::Json(serde_json::json!({"error": e}))),
        Err(e) => (StatusCode::BAD_REQUEST, axum::Json(serde_json::json!({"error": e}))),
    }
}

// ---------------------------------------------------------------- serving

async fn serve<S>(make: fn() -> S, s: &logic::Settings) -> Result<(), Box<dyn std::error::Error>>
where
    S: ServerHandler + Send + Sync + 'static,
{
    if s.transport == "stdio" {
        let running = make().serve(rmcp::transport::stdio()).await?;
        running.waiting().await?;
        return Ok(());
    }
    if s.json_reply && !s.stateless {
        eprintln!("rmcp-bench: rmcp 0.17 ignores json_response in stateful mode: replies stay SSE");
    }
    // rmcp 0.17 has no Host allow-list (added in 1.4.0) and no builder methods.
    let config = StreamableHttpServerConfig {
        stateful_mode: !s.stateless,
        json_response: s.json_reply,
        ..Default::default()
    };
    let mcp = StreamableHttpService::new(move || Ok(make()), LocalSessionManager::default().into(), config);
    let mut app = axum::Router::new().nest_service("/mcp", mcp);
    if s.suite == "bench" {
        app = app.route("/api/{tool}", axum::routing::post(rest_api));
    }
    let listener = tokio::net::TcpListener::bind((s.host.as_str(), s.port)).await?;
    eprintln!(
        "rmcp-bench {} on http://{}:{}/mcp ({}, {} replies, {} workers)",
        s.suite,
        s.host,
        s.port,
        if s.stateless { "stateless" } else { "stateful" },
        if s.json_reply { "json" } else { "sse" },
        s.workers
    );
    axum::serve(listener, app).await?;
    Ok(())
}

fn main() {
    let settings = match logic::Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.workers)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(async {
        match settings.suite.as_str() {
            "weekly" => serve(Weekly::new, &settings).await,
            "pulse" => serve(Pulse::new, &settings).await,
            _ => serve(Bench::new, &settings).await,
        }
    });
    if let Err(e) = result {
        eprintln!("rmcp-bench: {e}");
        std::process::exit(1);
    }
}
