//! The `weekly` suite (TOOLS.md, seed 001) on rmcp: `#[tool_router]` tools with `Parameters<T>`
//! arguments (schemars schemas) and text results, served by `serve.rs` (the API generation's own
//! file: stdio or streamable HTTP, as the lab's environment says).

mod serve;

use rmcp::{
    ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    tool, tool_handler, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;

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
    fn get_info(&self) -> serve::Info {
        serve::info("weekly")
    }
}

fn main() {
    serve::main(Weekly::new, None);
}
