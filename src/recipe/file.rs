//! The schema of `images/<family>/recipe.toml` as written: runtimes, API generations and their
//! HTTP serving, versions and ranges of releases. Serde types only; `RecipeBook::load` checks
//! that they refer to each other.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::kinds::RuntimeKind;
use crate::mcp::transport::{ApiStyle, ReplyMode, SessionMode, Transport};
use crate::spec::ServiceKind;

/// A `recipe.toml` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RecipeFile {
    pub(super) family: String,
    pub(super) description: String,
    pub(super) default_runtime: String,
    pub(super) runtime: BTreeMap<String, RuntimeSpec>,
    pub(super) api: BTreeMap<String, ApiSpec>,
    #[serde(rename = "version")]
    pub(super) versions: Vec<VersionSpec>,
    /// Releases declared by range (`benchlab lock <family> <range>` locks them).
    #[serde(rename = "range", default)]
    pub(super) ranges: Vec<RangeSpec>,
}

/// A runtime a family can be built on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeSpec {
    /// `cpython`, `node`, `bun`, `rust`.
    pub kind: RuntimeKind,
    /// The Dockerfile template, relative to the recipe folder.
    pub dockerfile: String,
    /// Debian suite of the bootstrapped base, with the Debian packages the runtime needs.
    pub suite: Option<String>,
    #[serde(default)]
    pub base_packages: Vec<String>,
    /// Extra Debian packages for the download stage only (e.g. npm); the runtime image never
    /// holds them.
    #[serde(default)]
    pub fetch_packages: Vec<String>,
    /// The download (and, for compiled servers, build) stage's Debian suite when it is not the
    /// runtime's: a Rust toolchain new enough may live in a newer suite than the one the static
    /// binary ships on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch_suite: Option<String>,
    /// A registry base pinned by digest, instead of a bootstrapped one.
    pub base_image: Option<String>,
    /// The interpreter the server's argv is appended to.
    pub launcher: Vec<String>,
}

/// The server sources of one API generation of the SDK, one self-contained file per suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiSpec {
    /// Appended to the runtime's launcher; `{suite}` becomes the suite's name.
    pub argv: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Suite name → source file, relative to the recipe folder.
    pub sources: BTreeMap<String, String>,
    /// Files every suite's source uses (a compiled server's shared serving module), copied as
    /// `srv/<file name>` beside them; a cell's recorded source (and its lines of code) stays its
    /// suite's own file, as an HTTP wrapper's import of its stdio module does elsewhere.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub support: Vec<String>,
    /// Whether the stdio sources serve stdio (Gradio has no stdio transport).
    #[serde(default = "yes")]
    pub stdio: bool,
    /// The HTTP transports of this API generation, when it has any.
    pub http: Option<HttpSpec>,
    /// Programs a reproduced source published for this API generation, by name (`seed-000`).
    /// A cell that names one runs that file over stdio, in an image of its own that holds it
    /// alone (the suite sources stay out, so the images of every other cell are unchanged).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub programs: BTreeMap<String, ProgramSpec>,
    /// Backing services its servers need (`services = ["redis", "api"]`): every cell that runs
    /// this API generation gets them, whether or not the scenario lists them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceKind>,
}

/// A source's own server program: the suite whose tools it serves (for the correctness gate and
/// the workloads' calls) and its file, relative to the recipe folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramSpec {
    pub suite: String,
    pub file: String,
}

fn yes() -> bool {
    true
}

/// How an API generation's servers are served over HTTP (see the recipes' contract in
/// `images/README` comments): which transports, where, and in which modes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSpec {
    pub transports: Vec<Transport>,
    /// Appended to the runtime's launcher; `{suite}` becomes the suite's name.
    pub argv: Vec<String>,
    /// Transport → path: the streamable POST endpoint, or the legacy SSE GET stream.
    pub paths: BTreeMap<Transport, String>,
    /// Streamable HTTP reply modes the server can be asked for; the first is the default.
    #[serde(default)]
    pub replies: Vec<ReplyMode>,
    /// Streamable HTTP session modes; the first is the default.
    #[serde(default)]
    pub sessions: Vec<SessionMode>,
    /// The session modes in which JSON replies are served, when not all of them (rmcp answers
    /// with SSE in stateful mode whatever it is asked): a cell asking for JSON replies in another
    /// is refused at its entry rather than measured as something it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_sessions: Option<Vec<SessionMode>>,
    /// A plain REST route template beside MCP (`{tool}` is replaced).
    pub http_api: Option<String>,
    pub http_api_style: Option<ApiStyle>,
    /// Suite → HTTP server source (copied as `srv/<suite>_http.<ext>`); when empty, the stdio
    /// sources serve HTTP too.
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    /// The HTTP server runs `$BENCHLAB_SERVER_WORKERS` workers in its runtime's own model (a
    /// server entry's `workers`); without it, a server entry asking for more than one is refused.
    #[serde(default)]
    pub workers: bool,
}

impl HttpSpec {
    /// Whether the server answers this reply mode in this session mode: JSON replies only in
    /// the session modes `json_sessions` names, when it names any.
    pub fn serves(&self, reply: Option<ReplyMode>, session: Option<SessionMode>) -> bool {
        match (reply, session, &self.json_sessions) {
            (Some(ReplyMode::Json), Some(s), Some(json)) => json.contains(&s),
            _ => true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionSpec {
    pub version: String,
    /// The API generation this version's server sources use.
    pub api: String,
    /// Runtimes this version is locked for: `lockfiles/<family>/<version>-<runtime>/`.
    pub runtimes: Vec<String>,
    /// Other API generations this version also serves (a sweep keeps one server source across
    /// releases, so that its line shows the SDK and not the source). Not part of the image's
    /// inputs: the sources of the API a cell runs are.
    #[serde(default, skip_serializing)]
    pub also: Vec<String>,
}

/// Every release of a range (`1.2.0..1.x`) with one API generation: what a version sweep uses.
/// A release of the range is locked like a listed version, from the lock input of `template`
/// (same runtime) with `package` pinned to the release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeSpec {
    /// The releases, as `FROM..TO` (see [`super::releases::Range`]).
    pub releases: String,
    pub api: String,
    #[serde(default)]
    pub also: Vec<String>,
    pub runtimes: Vec<String>,
    /// The SDK's package on its index (`mcp`, `@modelcontextprotocol/sdk`).
    pub package: String,
    /// A listed version whose lock input is the pattern for the range's releases.
    pub template: String,
    /// Crates released in step with `package` (its proc-macro crate: `rmcp-macros`), pinned to
    /// the release's own version in a cargo lock input. A release's caret requirement on them
    /// picked the one published with it on its day; a lock resolved later (see
    /// `lock-deviation`) would pick a later release of them instead.
    #[serde(default)]
    pub companions: Vec<String>,
}
