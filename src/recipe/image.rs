//! What a cell's server image is made of (`ImagePlan`): its bases, launch, sources and build
//! inputs; the image input hash (the build cache key), the image's reference, and the build
//! context handed to the engine. It never talks to the engine.

use std::collections::BTreeMap;

use super::base::BaseSource;
use super::kinds::RuntimeKind;
use super::resolve::{ResolveError, ServerWant, WantField, HTTP_PORT};
use super::{LAB_BINARY, NULL_FAMILY};
use crate::mcp::transport::{ApiStyle, HttpTarget, ReplyMode, SessionMode, Transport};
use crate::spec::{ServerLaunch, SourceInfo};

/// What a cell's server image is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct ImagePlan {
    pub family: String,
    pub version: String,
    pub api: String,
    pub runtime_name: String,
    pub runtime_kind: RuntimeKind,
    pub base: BaseSource,
    /// The download stage's base, when it needs more than the runtime's (npm for Node images).
    pub fetch_base: Option<BaseSource>,
    pub launch: ServerLaunch,
    /// How the driver reaches the server over HTTP; None for stdio cells.
    pub http: Option<HttpTarget>,
    pub source: Option<SourceInfo>,
    /// A server built from its own source (`[[server]] source`): where it came from, by content.
    pub fetched: Option<crate::spec::FetchedSource>,
    /// None for the null server, which runs the lab's binary on the bare base.
    pub build: Option<BuildInputs>,
}

impl ImagePlan {
    /// What sets this image apart from its version's plain one, in words (`program seed-000,
    /// lock era, no bytecode`), or None: the cell-chosen parts of its recipe entry.
    pub fn variant(&self) -> Option<String> {
        let entry = &self.build.as_ref()?.recipe_entry;
        let parts: Vec<String> = [("program", "program "), ("lock", "lock "), ("bytecode", "bytecode ")]
            .iter()
            .filter_map(|(k, label)| entry.get(*k).and_then(|v| v.as_str()).map(|v| format!("{label}{v}")))
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// What the image's lock folder says it departs from (its `lock-deviation` note), in one
    /// line, for the record's deviations.
    pub fn lock_deviation(&self) -> Option<String> {
        let name = format!("lock/{}", super::LOCK_DEVIATION_FILE);
        let (_, text) = self.build.as_ref()?.files.iter().find(|(n, _)| *n == name)?;
        let text = String::from_utf8_lossy(text);
        let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
        (!line.is_empty()).then(|| format!("lock of {} {}: {line}", self.family, self.version))
    }

    /// Whether two cells can share one image (the launch and source may differ by suite).
    pub fn same_image(&self, other: &ImagePlan) -> bool {
        self.family == other.family
            && self.version == other.version
            && self.runtime_name == other.runtime_name
            && self.base == other.base
            && self.fetch_base == other.fetch_base
            && self.build == other.build
    }
}

/// The inputs of a recipe build. The CA bundle is not among them: it reaches the fetch stage of
/// the build context only and changes neither the image's runtime layers nor its input hash.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildInputs {
    pub dockerfile_template: String,
    /// The runtime's launcher, as the Dockerfile's {{LAUNCHER}}.
    pub launcher: String,
    /// (name in the build context, content)
    pub files: Vec<(String, Vec<u8>)>,
    /// Names among `files` that are executable (mode 755 in the context; 644 otherwise), and
    /// symbolic links `(name, target)`: a source tree's own modes and links.
    pub executables: Vec<String>,
    pub links: Vec<(String, String)>,
    pub recipe_entry: serde_json::Value,
}

/// The build context's name for the fetch-stage CA bundle.
pub const CA_FILE: &str = crate::source::build::CA_IN_CONTEXT;

impl ImagePlan {
    pub fn null_server(want: &ServerWant) -> Result<ImagePlan, ResolveError> {
        let suite = &want.suite;
        let http = match want.transport {
            Transport::Stdio => None,
            Transport::StreamableHttp => {
                if want.reply == Some(ReplyMode::Sse) {
                    return Err(WantField::Transport.error(
                        "the built-in null server answers streamable-http with JSON replies only".into(),
                    ));
                }
                Some(HttpTarget {
                    transport: Transport::StreamableHttp,
                    port: HTTP_PORT,
                    path: "/mcp".into(),
                    reply: Some(ReplyMode::Json),
                    session: Some(want.session.unwrap_or(SessionMode::Stateless)),
                    api_route: Some("/api/{tool}".into()),
                    api_style: Some(ApiStyle::Plain),
                    host: None,
                })
            }
            Transport::Sse => {
                return Err(WantField::Transport.error(
                    "the built-in null server speaks stdio and streamable-http, not legacy sse".into(),
                ))
            }
        };
        let mut env = vec![("BENCHLAB_SUITE".to_string(), suite.clone())];
        if let Some(h) = &http {
            env.extend(h.server_env());
        }
        // The scenario's own environment for the server, as a recipe's server gets it.
        env.extend(want.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        Ok(ImagePlan {
            family: NULL_FAMILY.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            api: "builtin".into(),
            runtime_name: "native".into(),
            runtime_kind: RuntimeKind::Native,
            base: BaseSource::bootstrap("bookworm", &[]),
            fetch_base: None,
            launch: ServerLaunch { argv: vec![LAB_BINARY.into(), "null-server".into()], env, cwd: None },
            http,
            source: None,
            fetched: None,
            build: None,
        })
    }

    /// A backing service's image: a bare Debian bookworm base with the service's packages (the
    /// API service runs the lab's own binary, so it needs none), made like any base.
    pub fn service(spec: &crate::spec::ServiceSpec) -> ImagePlan {
        let kind = spec.kind;
        ImagePlan {
            family: format!("service-{}", kind.as_str()),
            version: "bookworm".into(),
            api: "service".into(),
            runtime_name: "debian-bookworm".into(),
            runtime_kind: RuntimeKind::Native,
            base: match &spec.program {
                Some(p) => BaseSource::bootstrap(
                    "bookworm",
                    &p.packages.iter().map(String::as_str).collect::<Vec<_>>(),
                ),
                None => BaseSource::bootstrap("bookworm", kind.packages()),
            },
            fetch_base: None,
            launch: ServerLaunch { argv: spec.argv(LAB_BINARY), env: Vec::new(), cwd: None },
            http: None,
            source: None,
            fetched: None,
            build: None,
        }
    }

    /// The Dockerfile with its bases and launcher filled in.
    pub fn dockerfile(&self, base_ref: &str, fetch_base_ref: &str) -> Option<String> {
        self.build.as_ref().map(|b| {
            b.dockerfile_template
                .replace("{{BASE}}", base_ref)
                .replace("{{FETCH_BASE}}", fetch_base_ref)
                .replace("{{LAUNCHER}}", &b.launcher)
        })
    }

    /// sha256 over the recipe entry, the Dockerfile template, every context file and the bases'
    /// image ids: equal hashes mean an equal image, so an existing one is reused without a build.
    pub fn input_hash(&self, base_image_id: &str, fetch_base_image_id: &str) -> String {
        let files: BTreeMap<&str, String> = self
            .build
            .iter()
            .flat_map(|b| b.files.iter())
            .map(|(n, c)| (n.as_str(), crate::hash::sha256_hex(c)))
            .collect();
        let mut value = serde_json::json!({
            "family": self.family,
            "version": self.version,
            "runtime": self.runtime_name,
            "recipe": self.build.as_ref().map(|b| &b.recipe_entry),
            "dockerfile": self.build.as_ref().map(|b| crate::hash::sha256_hex(b.dockerfile_template.as_bytes())),
            "launcher": self.build.as_ref().map(|b| &b.launcher),
            "files": files,
            "base_image_id": base_image_id,
            "fetch_base_image_id": fetch_base_image_id,
        });
        // A source tree's modes and links, only where it has them: recipe images keep the hash
        // they always had.
        if let Some(b) = self.build.as_ref().filter(|b| !b.executables.is_empty() || !b.links.is_empty()) {
            value["executables"] = serde_json::json!(b.executables);
            value["links"] = serde_json::json!(b.links);
        }
        crate::hash::canonical_hash(&value)
    }

    /// The engine reference of the built image for an input hash.
    pub fn reference(&self, input_hash: &str) -> String {
        format!("benchlab/{}:{}-{}-{}", self.family, self.version, self.runtime_name, &input_hash[..12])
    }

    /// The build context as a tar: Dockerfile, context files and the fetch-stage CA bundle.
    pub fn context_tar(
        &self,
        base_ref: &str,
        fetch_base_ref: &str,
        ca_bundle: &[u8],
    ) -> std::io::Result<Vec<u8>> {
        let build = self
            .build
            .as_ref()
            .ok_or_else(|| std::io::Error::other("the null server has nothing to build"))?;
        let mut tar = tar::Builder::new(Vec::new());
        let mut add = |name: &str, data: &[u8], mode: u32| -> std::io::Result<()> {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(mode);
            h.set_mtime(0);
            h.set_cksum();
            tar.append_data(&mut h, name, data)
        };
        add("Dockerfile", self.dockerfile(base_ref, fetch_base_ref).unwrap_or_default().as_bytes(), 0o644)?;
        for (name, data) in &build.files {
            let mode = if build.executables.contains(name) { 0o755 } else { 0o644 };
            add(name, data, mode)?;
        }
        add(CA_FILE, ca_bundle, 0o644)?;
        for (name, target) in &build.links {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_size(0);
            h.set_mode(0o777);
            h.set_mtime(0);
            tar.append_link(&mut h, name, target)?;
        }
        tar.into_inner()
    }
}
