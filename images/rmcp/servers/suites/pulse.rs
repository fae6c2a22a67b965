//! The `pulse` suite (TOOLS.md, seed 000) on rmcp: `calculate_tax` (a text result, `Err` as an
//! `isError` result) and `checksum` (a `Json<T>` structured result with its output schema).
//! rmcp checks arguments by deserialising them, not against the schema, so the schema's bounds
//! are checked here too. Served by `serve.rs`.

mod serve;

use rmcp::{
    Json, ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    tool, tool_handler, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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

#[derive(Serialize, JsonSchema)]
struct Checksum {
    count: usize,
    sum: i64,
    sha256: String,
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

    #[tool(description = "Calculate the tax on an amount at a given rate, rounded to 2 decimals.")]
    async fn calculate_tax(
        &self,
        Parameters(TaxArgs { amount, rate }): Parameters<TaxArgs>,
    ) -> Result<String, String> {
        if !(amount > 0.0) {
            return Err("amount must be greater than 0".into());
        }
        let tax = (amount * rate * 100.0).round() / 100.0;
        serde_json::to_string(&tax).map_err(|e| e.to_string()) // 8.0, as Python prints it
    }

    #[tool(description = "Count, sum and SHA-256 of the comma-joined decimal values of 1 to 100 integers.")]
    async fn checksum(
        &self,
        Parameters(ChecksumArgs { values }): Parameters<ChecksumArgs>,
    ) -> Result<Json<Checksum>, String> {
        if values.is_empty() || values.len() > 100 {
            return Err("values needs 1 to 100 items".into());
        }
        let joined = values.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        let sha256 = Sha256::digest(joined.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        Ok(Json(Checksum { count: values.len(), sum: values.iter().sum(), sha256 }))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Pulse {
    fn get_info(&self) -> serve::Info {
        serve::info("pulse")
    }
}

fn main() {
    serve::main(Pulse::new, None);
}
