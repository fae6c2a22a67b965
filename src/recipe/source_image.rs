//! The image of a server built from its own source (`[[server]] source`): the fetched tree as the
//! build context, its Dockerfile rewritten for the lab's bases (`source::build`), and the launch
//! the scenario declares (transport, port, path, command) or the Dockerfile's own. No recipe and
//! no lock: what the source pins is what is built, and what it leaves open is a deviation.

use std::collections::BTreeMap;

use super::base::BaseSource;
use super::image::{BuildInputs, ImagePlan};
use super::kinds::RuntimeKind;
use crate::mcp::transport::{HttpTarget, Transport};
use crate::source::build::{prepare, MappedBase, Refusal};
use crate::source::tree::{Entry, Tree};
use crate::source::Fetched;
use crate::spec::{BaseRule, ServerLaunch};

/// The family name records give a server built from its own source.
pub const SOURCE_FAMILY: &str = "source";

/// What a scenario declares of a server built from its source.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceServer {
    pub transport: Transport,
    /// The port the server listens on; the Dockerfile's one `EXPOSE` when absent.
    pub port: Option<u16>,
    /// The streamable HTTP endpoint.
    pub path: String,
    /// Replaces the Dockerfile's `ENTRYPOINT`/`CMD`.
    pub command: Option<Vec<String>>,
    pub env: BTreeMap<String, String>,
}

/// A server built from its source, planned, or the field of the scenario at fault.
#[derive(Debug)]
pub enum SourcePlanError {
    /// The Dockerfile cannot be built here (its `[source.base]` rule says why): not measured.
    Unavailable(String),
    /// The message, and the server's key it belongs to.
    Input { message: String, at: SourceKey },
}

/// The key of a `[[server]]` built from its source that an input error belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKey {
    Source,
    Port,
    Transport,
}

fn base(b: &MappedBase) -> BaseSource {
    let p: Vec<&str> = b.packages.iter().map(String::as_str).collect();
    BaseSource::bootstrap(b.suite.as_str(), &p)
}

impl ImagePlan {
    /// The image plan of a server built from `fetched` (its tree and its Dockerfile at the top
    /// of it), with the scenario's `[source.base]` rules, and the deviations that building it
    /// here brings.
    pub fn from_source(
        fetched: &Fetched,
        rules: &BTreeMap<String, BaseRule>,
        server: &SourceServer,
    ) -> Result<(ImagePlan, Vec<String>), SourcePlanError> {
        let input = |message: String| SourcePlanError::Input { message, at: SourceKey::Source };
        let where_ = fetched.record.source.path.as_str();
        let where_ =
            if where_.is_empty() { "the top of the source".to_string() } else { format!("{where_}/") };
        let text = std::fs::read_to_string(fetched.tree_dir.join("Dockerfile")).map_err(|_| {
            input(format!(
                "the source has no Dockerfile at {where_}: the lab builds a source by its own Dockerfile"
            ))
        })?;
        let build = prepare(&text, rules).map_err(|r| match r {
            Refusal::Unavailable { .. } => SourcePlanError::Unavailable(r.to_string()),
            Refusal::Input(m) => input(m),
        })?;
        let argv = match (&server.command, &build.command) {
            (Some(c), _) => c.clone(),
            (None, Some(c)) => c.clone(),
            (None, None) => {
                return Err(SourcePlanError::Input {
                    message: "the Dockerfile's final stage has no CMD or ENTRYPOINT: write `command = [\"program\", \"arg\"]` on the server".into(),
                    at: SourceKey::Source,
                })
            }
        };
        let http = match server.transport {
            Transport::Stdio => None,
            Transport::Sse => {
                return Err(SourcePlanError::Input {
                    message:
                        "a server built from its source speaks stdio or streamable-http here, not legacy sse"
                            .into(),
                    at: SourceKey::Transport,
                })
            }
            Transport::StreamableHttp => {
                let port = match (server.port, build.exposed.as_slice()) {
                    (Some(p), _) => p,
                    (None, [p]) => *p,
                    (None, ports) => {
                        return Err(SourcePlanError::Input {
                            message: format!(
                                "the Dockerfile EXPOSEs {} port(s) ({}): write `port = N`, the port the server listens on",
                                ports.len(),
                                ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
                            ),
                            at: SourceKey::Port,
                        })
                    }
                };
                Some(HttpTarget {
                    transport: Transport::StreamableHttp,
                    port,
                    path: server.path.clone(),
                    reply: None,
                    session: None,
                    api_route: None,
                    api_style: None,
                    host: None,
                })
            }
        };
        let tree =
            Tree::from_dir(&fetched.tree_dir).map_err(|e| input(format!("read the fetched tree: {e}")))?;
        let (mut files, mut executables, mut links) = (Vec::new(), Vec::new(), Vec::new());
        for (name, entry) in tree.entries {
            // The rewritten Dockerfile takes the place of the source's own (whose bytes the tree
            // hash, and so the image's input hash, still cover).
            if name == "Dockerfile" || name == super::CA_FILE {
                continue;
            }
            match entry {
                Entry::File { executable, data } => {
                    if executable {
                        executables.push(name.clone());
                    }
                    files.push((name, data));
                }
                Entry::Link { target } => links.push((name, target)),
            }
        }
        for (name, text) in &build.extra_files {
            files.push((name.clone(), text.clone().into_bytes()));
        }
        let record = fetched.record.clone();
        // The rules this Dockerfile uses, and only those, go into the input hash.
        let used: BTreeMap<&String, &BaseRule> = crate::source::dockerfile::froms(&text)
            .iter()
            .filter_map(|f| rules.get_key_value(&f.image))
            .collect();
        let plan = ImagePlan {
            family: SOURCE_FAMILY.into(),
            version: record.tree_sha256[..12].to_string(),
            api: "own".into(),
            runtime_name: build.base.suite.as_str().into(),
            runtime_kind: RuntimeKind::Shell,
            base: base(&build.base),
            fetch_base: build.other_base.as_ref().map(base),
            launch: ServerLaunch {
                argv,
                env: server.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                cwd: None,
            },
            http,
            source: None,
            build: Some(BuildInputs {
                dockerfile_template: build.template,
                launcher: String::new(),
                files,
                executables,
                links,
                recipe_entry: serde_json::json!({ "source": record, "rules": used }),
            }),
            fetched: Some(record),
        };
        Ok((plan, build.deviations))
    }
}
