//! How a cell reaches its server: stdio, streamable HTTP or legacy HTTP+SSE, with the reply and
//! session modes of streamable HTTP and the style of a plain REST route. Names only; the
//! protocol work lives in the driver.

use serde::{Deserialize, Serialize};

/// The MCP transport of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    #[default]
    Stdio,
    /// Streamable HTTP (2025-03-26+): one POST endpoint, JSON or SSE replies.
    StreamableHttp,
    /// The legacy HTTP+SSE transport (2024-11-05): a GET stream whose `endpoint` event names
    /// where to POST.
    Sse,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::StreamableHttp => "streamable-http",
            Transport::Sse => "sse",
        }
    }
    pub fn is_http(self) -> bool {
        self != Transport::Stdio
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a streamable HTTP server answers a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplyMode {
    /// `application/json` bodies.
    Json,
    /// An SSE stream that ends with the response.
    Sse,
}

impl ReplyMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReplyMode::Json => "json",
            ReplyMode::Sse => "sse",
        }
    }
}

/// Whether a streamable HTTP server keeps sessions (`Mcp-Session-Id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionMode {
    Stateful,
    Stateless,
}

impl SessionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionMode::Stateful => "stateful",
            SessionMode::Stateless => "stateless",
        }
    }
}

/// The shape of a server's plain (non-MCP) HTTP route for a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ApiStyle {
    /// `POST <route>` with the arguments object as the JSON body; the 200 body is the value.
    #[default]
    Plain,
    /// Gradio's call API: `POST <route>` with `{"data": [args...]}` answers `{"event_id"}`, then
    /// `GET <route>/<event_id>` streams SSE ending in `event: complete` with `data: [value]`.
    Gradio,
}

/// Everything the driver needs to reach an HTTP server, and what the cell records about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpTarget {
    pub transport: Transport,
    /// Loopback port the server listens on (inside the server container's network namespace).
    pub port: u16,
    /// Streamable HTTP: the POST endpoint. Legacy SSE: the GET stream's path.
    pub path: String,
    pub reply: Option<ReplyMode>,
    pub session: Option<SessionMode>,
    /// The plain REST route template (`{tool}` is replaced), when the server has one.
    pub api_route: Option<String>,
    pub api_style: Option<ApiStyle>,
    /// The server's address when it is not the loopback (`benchlab measure --url` on an address
    /// the user names); cells always have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<std::net::IpAddr>,
}

impl HttpTarget {
    /// Where the driver connects: the loopback, or the host the user named.
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::new(self.host.unwrap_or(std::net::Ipv4Addr::LOCALHOST.into()), self.port)
    }

    /// The environment the lab gives an HTTP server process (see the recipes' contract).
    pub fn server_env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("BENCHLAB_TRANSPORT".to_string(), self.transport.as_str().to_string()),
            ("BENCHLAB_HOST".to_string(), "127.0.0.1".to_string()),
            ("BENCHLAB_PORT".to_string(), self.port.to_string()),
        ];
        if let Some(r) = self.reply {
            env.push(("BENCHLAB_REPLY".into(), r.as_str().into()));
        }
        if let Some(s) = self.session {
            env.push(("BENCHLAB_SESSION".into(), s.as_str().into()));
        }
        env
    }
}
