//! Image recipes (`images/<family>/recipe.toml`) and their lockfiles (`lockfiles/`): which SDK
//! versions a family builds, with which runtime and API generation; the image input hash (the
//! build cache key); and the build context handed to the engine. It never talks to the engine.

pub mod base;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::driver::ServerLaunch;
use base::BaseSource;

/// The family name of the built-in floor server.
pub const NULL_FAMILY: &str = "benchlab-null";

/// Where the lab's own binary is mounted in every container.
pub const LAB_BINARY: &str = "/benchlab/benchlab";

/// Where images built by recipes describe themselves (runtime and installed packages).
pub const IMAGE_MANIFEST_PATH: &str = "/usr/share/benchlab/image.json";

/// Labels on images the lab builds.
pub const LABEL_INPUT_HASH: &str = "org.benchlab.input-hash";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecipeFile {
    family: String,
    description: String,
    default_runtime: String,
    runtime: BTreeMap<String, RuntimeSpec>,
    api: BTreeMap<String, ApiSpec>,
    #[serde(rename = "version")]
    versions: Vec<VersionSpec>,
}

/// A runtime a family can be built on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeSpec {
    /// `cpython`, `node`, `bun`.
    pub kind: String,
    /// The Dockerfile template (in the recipe folder) for this runtime.
    pub dockerfile: String,
    /// Debian suite of the bootstrapped base, with the Debian packages the runtime needs.
    pub suite: Option<String>,
    #[serde(default)]
    pub base_packages: Vec<String>,
    /// A registry base pinned by digest, instead of a bootstrapped one.
    pub base_image: Option<String>,
}

/// A server source for one API generation of the SDK.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiSpec {
    /// The server source, relative to the recipe folder.
    pub source: String,
    /// The command that starts the server in the image.
    pub argv: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionSpec {
    pub version: String,
    /// The API generation this version's server source uses.
    pub api: String,
    /// Lockfile per runtime name, relative to `lockfiles/`.
    pub lock: BTreeMap<String, String>,
}

/// A loaded recipe.
#[derive(Debug, Clone)]
pub struct Recipe {
    pub dir: PathBuf,
    pub family: String,
    pub description: String,
    default_runtime: String,
    runtimes: BTreeMap<String, RuntimeSpec>,
    apis: BTreeMap<String, ApiSpec>,
    versions: Vec<VersionSpec>,
}

/// All recipes of a checkout.
#[derive(Debug, Clone)]
pub struct RecipeBook {
    pub images_dir: PathBuf,
    pub lockfiles_dir: PathBuf,
    recipes: BTreeMap<String, Recipe>,
}

#[derive(Debug, thiserror::Error)]
pub enum RecipeError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{0}")]
    Resolve(String),
}

fn read(path: &Path) -> Result<Vec<u8>, RecipeError> {
    std::fs::read(path).map_err(|source| RecipeError::Read {
        path: path.into(),
        source,
    })
}

impl RecipeBook {
    /// Loads every `images/*/recipe.toml` under `root` (the checkout).
    pub fn load(root: &Path) -> Result<RecipeBook, RecipeError> {
        let images_dir = root.join("images");
        let lockfiles_dir = root.join("lockfiles");
        let mut recipes = BTreeMap::new();
        let entries = std::fs::read_dir(&images_dir).map_err(|source| RecipeError::Read {
            path: images_dir.clone(),
            source,
        })?;
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("recipe.toml").is_file())
            .collect();
        dirs.sort();
        for dir in dirs {
            let path = dir.join("recipe.toml");
            let text = String::from_utf8_lossy(&read(&path)?).into_owned();
            let file: RecipeFile = toml::from_str(&text).map_err(|e| {
                let (line, column) =
                    crate::scenario::line_col(&text, e.span().map_or(0, |s| s.start));
                RecipeError::Parse {
                    path: path.clone(),
                    line,
                    column,
                    message: e.message().to_string(),
                }
            })?;
            let invalid = |message: String| RecipeError::Invalid {
                path: path.clone(),
                message,
            };
            if file.family == NULL_FAMILY {
                return Err(invalid(format!(
                    "{NULL_FAMILY} is the built-in floor server's name"
                )));
            }
            if !file.runtime.contains_key(&file.default_runtime) {
                return Err(invalid(format!(
                    "default_runtime {:?} is not a [runtime.*] table",
                    file.default_runtime
                )));
            }
            for (name, rt) in &file.runtime {
                base_of(rt)
                    .and_then(|b| b.validate())
                    .map_err(|m| invalid(format!("runtime {name}: {m}")))?;
            }
            for v in &file.versions {
                if !file.api.contains_key(&v.api) {
                    return Err(invalid(format!(
                        "version {} uses api {:?}, which has no [api.{}] table",
                        v.version, v.api, v.api
                    )));
                }
                for rt in v.lock.keys() {
                    if !file.runtime.contains_key(rt) {
                        return Err(invalid(format!(
                            "version {} locks runtime {rt:?}, which has no [runtime.{rt}] table",
                            v.version
                        )));
                    }
                }
            }
            recipes.insert(
                file.family.clone(),
                Recipe {
                    dir,
                    family: file.family,
                    description: file.description,
                    default_runtime: file.default_runtime,
                    runtimes: file.runtime,
                    apis: file.api,
                    versions: file.versions,
                },
            );
        }
        Ok(RecipeBook {
            images_dir,
            lockfiles_dir,
            recipes,
        })
    }

    pub fn families(&self) -> impl Iterator<Item = &Recipe> {
        self.recipes.values()
    }

    /// Resolves a server of a scenario to what must be built and run. Errors are sentences that
    /// the scenario layer places at the entry's line and column.
    pub fn resolve(
        &self,
        family: &str,
        version: Option<&str>,
        runtime: Option<&str>,
        suite: &str,
    ) -> Result<ImagePlan, String> {
        if family == NULL_FAMILY {
            return Ok(ImagePlan::null_server(suite));
        }
        let recipe = self.recipes.get(family).ok_or_else(|| {
            let known: Vec<&str> = std::iter::once(NULL_FAMILY)
                .chain(self.recipes.keys().map(String::as_str))
                .collect();
            format!(
                "unknown server family {family:?} (known: {})",
                known.join(", ")
            )
        })?;
        let version = version.ok_or_else(|| {
            format!(
                "family {family} needs a version (one of: {})",
                recipe.version_list()
            )
        })?;
        let v = recipe
            .versions
            .iter()
            .find(|v| v.version == version)
            .ok_or_else(|| {
                format!(
                    "{family} has no recipe for version {version:?} (it has: {})",
                    recipe.version_list()
                )
            })?;
        let runtime_name = runtime.unwrap_or(&recipe.default_runtime);
        let rt = recipe.runtimes.get(runtime_name).ok_or_else(|| {
            format!(
                "{family} has no runtime {runtime_name:?} (it has: {})",
                recipe
                    .runtimes
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        let lock = v.lock.get(runtime_name).ok_or_else(|| {
            format!("{family} {version} is not locked for runtime {runtime_name} (locked: {}); run `benchlab lock`", v.lock.keys().cloned().collect::<Vec<_>>().join(", "))
        })?;
        let api = &recipe.apis[&v.api];
        let base = base_of(rt)?;
        let file = |rel: &Path| std::fs::read(rel).map_err(|e| format!("{}: {e}", rel.display()));
        let dockerfile = String::from_utf8(file(&recipe.dir.join(&rt.dockerfile))?)
            .map_err(|_| format!("{} is not UTF-8", rt.dockerfile))?;
        let mut env: Vec<(String, String)> = api
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        env.push(("BENCHLAB_SUITE".into(), suite.into()));
        Ok(ImagePlan {
            family: family.into(),
            version: version.into(),
            api: v.api.clone(),
            runtime_name: runtime_name.into(),
            runtime_kind: rt.kind.clone(),
            base,
            launch: ServerLaunch {
                argv: api.argv.clone(),
                env,
                cwd: api.cwd.clone(),
            },
            build: Some(BuildInputs {
                dockerfile_template: dockerfile,
                files: vec![
                    (
                        "requirements.lock".into(),
                        file(&self.lockfiles_dir.join(lock))?,
                    ),
                    ("server.src".into(), file(&recipe.dir.join(&api.source))?),
                ],
                recipe_entry: serde_json::json!({"version": v, "runtime": rt, "api": api}),
            }),
        })
    }
}

impl Recipe {
    fn version_list(&self) -> String {
        self.versions
            .iter()
            .map(|v| v.version.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn versions(&self) -> impl Iterator<Item = &VersionSpec> {
        self.versions.iter()
    }
}

fn base_of(rt: &RuntimeSpec) -> Result<BaseSource, String> {
    match (&rt.suite, &rt.base_image) {
        (Some(suite), None) => {
            let pk: Vec<&str> = rt.base_packages.iter().map(String::as_str).collect();
            let b = BaseSource::bootstrap(suite, &pk);
            b.validate()?;
            Ok(b)
        }
        (None, Some(reference)) => {
            let b = BaseSource::Registry { reference: reference.clone() };
            b.validate()?;
            Ok(b)
        }
        _ => Err("a runtime names exactly one of `suite` (bootstrapped base) and `base_image` (registry, pinned by digest)".into()),
    }
}

/// What a cell's server image is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct ImagePlan {
    pub family: String,
    pub version: String,
    pub api: String,
    pub runtime_name: String,
    pub runtime_kind: String,
    pub base: BaseSource,
    pub launch: ServerLaunch,
    /// None for the null server, which runs the lab's binary on the bare base.
    pub build: Option<BuildInputs>,
}

/// The inputs of a recipe build. The CA bundle is not among them: it reaches the fetch stage of
/// the build context only and changes neither the image's runtime layers nor its input hash.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildInputs {
    pub dockerfile_template: String,
    /// (name in the build context, content)
    pub files: Vec<(String, Vec<u8>)>,
    pub recipe_entry: serde_json::Value,
}

/// The build context's name for the fetch-stage CA bundle.
pub const CA_FILE: &str = "fetch-ca.pem";

impl ImagePlan {
    pub fn null_server(suite: &str) -> ImagePlan {
        ImagePlan {
            family: NULL_FAMILY.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            api: "builtin".into(),
            runtime_name: "native".into(),
            runtime_kind: "native".into(),
            base: BaseSource::bootstrap("bookworm", &[]),
            launch: ServerLaunch {
                argv: vec![LAB_BINARY.into(), "null-server".into()],
                env: vec![("BENCHLAB_SUITE".into(), suite.into())],
                cwd: None,
            },
            build: None,
        }
    }

    /// The Dockerfile with its base filled in.
    pub fn dockerfile(&self, base_ref: &str) -> Option<String> {
        self.build
            .as_ref()
            .map(|b| b.dockerfile_template.replace("{{BASE}}", base_ref))
    }

    /// sha256 over the recipe entry, the Dockerfile template, every context file and the base's
    /// image id: equal hashes mean an equal image, so an existing one is reused without a build.
    pub fn input_hash(&self, base_image_id: &str) -> String {
        let files: BTreeMap<&str, String> = self
            .build
            .iter()
            .flat_map(|b| b.files.iter())
            .map(|(n, c)| (n.as_str(), crate::record::sha256_hex(c)))
            .collect();
        crate::record::canonical_hash(&serde_json::json!({
            "family": self.family,
            "version": self.version,
            "runtime": self.runtime_name,
            "recipe": self.build.as_ref().map(|b| &b.recipe_entry),
            "dockerfile": self.build.as_ref().map(|b| crate::record::sha256_hex(b.dockerfile_template.as_bytes())),
            "files": files,
            "base_image_id": base_image_id,
        }))
    }

    /// The engine reference of the built image for an input hash.
    pub fn reference(&self, input_hash: &str) -> String {
        format!(
            "benchlab/{}:{}-{}-{}",
            self.family,
            self.version,
            self.runtime_name,
            &input_hash[..12]
        )
    }

    /// The build context as a tar: Dockerfile, context files and the fetch-stage CA bundle.
    pub fn context_tar(&self, base_ref: &str, ca_bundle: &[u8]) -> std::io::Result<Vec<u8>> {
        let build = self
            .build
            .as_ref()
            .ok_or_else(|| std::io::Error::other("the null server has nothing to build"))?;
        let mut tar = tar::Builder::new(Vec::new());
        let mut add = |name: &str, data: &[u8]| -> std::io::Result<()> {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_mtime(0);
            h.set_cksum();
            tar.append_data(&mut h, name, data)
        };
        add(
            "Dockerfile",
            self.dockerfile(base_ref).unwrap_or_default().as_bytes(),
        )?;
        for (name, data) in &build.files {
            add(name, data)?;
        }
        add(CA_FILE, ca_bundle)?;
        tar.into_inner()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkout() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn the_checkouts_recipes_load_and_resolve() {
        let book = RecipeBook::load(&checkout()).unwrap();
        let plan = book
            .resolve("python-mcp", Some("2.3.0"), None, "weekly")
            .unwrap();
        assert_eq!(plan.api, "mcpserver");
        assert!(plan
            .launch
            .env
            .contains(&("BENCHLAB_SUITE".into(), "weekly".into())));
        let e = book
            .resolve("python-mcp", Some("9.9.9"), None, "weekly")
            .unwrap_err();
        assert!(e.contains("no recipe for version \"9.9.9\""), "{e}");
        let e = book.resolve("nope", None, None, "weekly").unwrap_err();
        assert!(e.contains("unknown server family"), "{e}");
        assert_eq!(
            book.resolve(NULL_FAMILY, None, None, "weekly")
                .unwrap()
                .build,
            None
        );
    }

    #[test]
    fn input_hash_tracks_inputs_but_not_the_ca_bundle() {
        let book = RecipeBook::load(&checkout()).unwrap();
        let plan = book
            .resolve("python-mcp", Some("2.3.0"), None, "weekly")
            .unwrap();
        let h = plan.input_hash("sha256:base1");
        assert_eq!(h, plan.input_hash("sha256:base1"));
        assert_ne!(h, plan.input_hash("sha256:base2"));
        let mut changed = plan.clone();
        changed.build.as_mut().unwrap().files[0].1.push(b'\n');
        assert_ne!(h, changed.input_hash("sha256:base1"));
        // The CA bundle is in the context but not in the hash.
        let a = plan.context_tar("b", b"ca-one").unwrap();
        let b = plan.context_tar("b", b"ca-two").unwrap();
        assert_ne!(a, b);
        assert!(plan
            .reference(&h)
            .starts_with("benchlab/python-mcp:2.3.0-cpython-bookworm-"));
    }
}
