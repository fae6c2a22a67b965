//! What a reproduced source states about how it measured (a scenario's `[source]`): the
//! statement the lab derives a cell's deviations from (`record::deviations`). Serde types only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the reproduced source states about how it measured (`[source]`): the lab derives every
/// difference between this and what a cell ran into the cell's `environment.deviations`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceStatement {
    /// The source, as `../shared/seeds/<file>` names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The machine it measured on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<StatedHardware>,
    /// The kernel release it ran (`6.8.0-45-generic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// The client that drove the servers, in the source's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// Package versions the source states (`mcp = "1.1.2"`): a cell whose image holds one of
    /// them at another version ran something the source did not state.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub packages: BTreeMap<String, String>,
    /// The name of the source's own server programs in the recipes (`seed-000`): a cell that
    /// runs the lab's suite server instead ran another program than the source's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// `[source.base]`: what each image a server source's Dockerfile starts `FROM` becomes here,
    /// where no container registry is reached (keyed by the image as written, tag included).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub base: BTreeMap<String, BaseRule>,
    /// The source's own repository at the commit it published (`repository = { git, commit }`):
    /// where its committed result files are read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<StatedRepository>,
    /// Its committed raw result files (paths in `repository` at its commit), which claims cite
    /// with `source = { results = "<one of these>", path = "<JSON Pointer>" }`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<String>,
}

/// A source's repository at a commit (`[source] repository`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatedRepository {
    /// Its URL (read through `--source-mirror` where the host has no network).
    pub git: String,
    /// A full or abbreviated commit hash.
    pub commit: String,
}

/// A `[source.base]` rule: a lab base bootstrapped from a Debian suite with these packages, or
/// the reason the image cannot be had on this host (its servers are then not measured).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<DebianSuite>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Build arguments every stage built on this base gets (`PIP_BREAK_SYSTEM_PACKAGES = "1"`
    /// where Debian's pip guards the system's packages and the image's did not): recorded with
    /// the mapping as a deviation.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub build_env: BTreeMap<String, String>,
    /// pip constraints (`"mcp<2"`) every stage built on this base installs under (a file the
    /// lab writes, named by `PIP_CONSTRAINT`): for a source whose requirements are unpinned and
    /// resolve today to releases that postdate it. Recorded with the mapping as a deviation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pip_constraints: Vec<String>,
}

/// The Debian suites the lab bootstraps bases from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DebianSuite {
    Bookworm,
    Trixie,
}

impl DebianSuite {
    pub fn as_str(self) -> &'static str {
        match self {
            DebianSuite::Bookworm => "bookworm",
            DebianSuite::Trixie => "trixie",
        }
    }
}

/// A machine as a source describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatedHardware {
    /// A part of the CPU model name (`AMD EPYC 9654`, `Intel Xeon`).
    pub cpu_model: String,
    /// Logical CPUs.
    pub cpus: u32,
}

/// Where a server's own code comes from (`[[server]] source = { … }`), pinned by content: a git
/// repository at a commit, a local folder, or a tarball with its sha256; `path` is the folder
/// inside it that holds the server (its Dockerfile), empty for the whole tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSource {
    pub origin: SourceOrigin,
    /// A relative folder inside the origin's tree, `/`-separated, without `.` or `..` parts.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
}

/// The three kinds of origin a server's code can have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SourceOrigin {
    /// A git repository (its URL, fetched through a mirror where one is given) at a commit: the
    /// scenario's (a full or abbreviated hash) until it is fetched, the full hash after.
    Git { url: String, commit: String },
    /// A local folder, as the scenario names it (relative to the scenario's folder).
    Dir { dir: String },
    /// A tarball (`.tar`, `.tar.gz`, `.tgz`) on this host, relative to the scenario's folder,
    /// with the sha256 of its bytes.
    Tarball { file: String, sha256: String },
}

impl SourceOrigin {
    pub fn kind(&self) -> &'static str {
        match self {
            SourceOrigin::Git { .. } => "git",
            SourceOrigin::Dir { .. } => "dir",
            SourceOrigin::Tarball { .. } => "tarball",
        }
    }
}

/// A server's source as fetched: its origin with the full commit, and the tree's content hash
/// (`source::tree`'s listing, format 1), which is what pins it: two fetches with the same
/// `tree_sha256` hold the same files, byte for byte, with the same modes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FetchedSource {
    pub source: ServerSource,
    pub tree_sha256: String,
    /// Regular files and symbolic links in the tree.
    pub files: u64,
    /// Their bytes (a link counts its target's length).
    pub bytes: u64,
}
