//! Lock folders (`lockfiles/<family>/<version>-<runtime>/`): the jobs `benchlab lock` runs (which
//! locker, in which base), the lock inputs of a range's releases, and whether a lock still pins
//! its input. Running the lockers is the orchestrator's; nothing here starts a process.

use std::path::{Path, PathBuf};

use super::base::BaseSource;
use super::kinds::{Locker, RuntimeKind};
use super::{base_of, releases, RecipeBook};

/// What `benchlab lock` needs to regenerate one lock folder.
#[derive(Debug, Clone, PartialEq)]
pub struct LockJob {
    pub family: String,
    pub version: String,
    pub runtime: String,
    /// `uv` (Python: requirements.in → requirements.txt), `npm` (package.json →
    /// package-lock.json) or `cargo` (Cargo.toml → Cargo.lock).
    pub locker: Locker,
    /// The interpreter uv resolves for (`python3`, `pypy3`: its version and tags decide the
    /// wheels); empty for the other lockers.
    pub interpreter: &'static str,
    /// The base the locker runs in: the target's own, so platform tags and versions match.
    pub base: BaseSource,
    pub dir: PathBuf,
}

impl RecipeBook {
    /// The lock jobs for a family's version (every runtime it is locked for, or one).
    pub fn lock_jobs(
        &self,
        family: &str,
        version: &str,
        runtime: Option<&str>,
        label: Option<&str>,
    ) -> Result<Vec<LockJob>, String> {
        let (recipe, v) = self.recipe_version(family, Some(version)).map_err(|e| e.message)?;
        let mut out = Vec::new();
        for name in &v.runtimes {
            if runtime.is_some_and(|r| r != name) {
                continue;
            }
            let rt = &recipe.runtimes[name];
            let (locker, base) = match rt.kind {
                RuntimeKind::Cpython | RuntimeKind::Pypy => (Locker::Uv, base_of(rt)?),
                // The toolchain's own base (the build stage's), so cargo is the one that builds.
                RuntimeKind::Rust => (
                    Locker::Cargo,
                    super::resolve::fetch_base_of(rt)
                        .ok_or("cargo locking needs the build stage's base (fetch_packages with cargo)")?,
                ),
                RuntimeKind::Node | RuntimeKind::Bun | RuntimeKind::Native | RuntimeKind::Shell => {
                    let suite = rt.suite.clone().ok_or("npm locking needs a bootstrapped base (suite)")?;
                    let mut all: Vec<&str> = rt.base_packages.iter().map(String::as_str).collect();
                    all.extend(rt.fetch_packages.iter().map(String::as_str));
                    (Locker::Npm, BaseSource::bootstrap(&suite, &all))
                }
            };
            out.push(LockJob {
                family: family.into(),
                version: version.into(),
                runtime: name.clone(),
                locker,
                interpreter: match rt.kind {
                    RuntimeKind::Cpython => "python3",
                    RuntimeKind::Pypy => "pypy3",
                    _ => "",
                },
                base,
                dir: self.lockfiles_dir.join(family).join(super::resolve::lock_folder(version, name, label)),
            });
        }
        if out.is_empty() {
            return Err(format!(
                "{family} {version} has no runtime {:?} in its recipe's `runtimes`",
                runtime.unwrap_or("")
            ));
        }
        if label.is_some() {
            if let Some(missing) = out.iter().find(|j| !j.dir.is_dir()) {
                return Err(format!(
                    "no labelled lock folder {}: write its requirements.in or package.json (and an `exclude-newer` file with the day it is locked as of) first",
                    missing.dir.display()
                ));
            }
        }
        Ok(out)
    }

    /// A family's ranged package and a lock job of the runtime to list the index from (the one
    /// asked for, or the ranges' first).
    pub fn range_locking(&self, family: &str, runtime: Option<&str>) -> Result<(String, LockJob), String> {
        let recipe = self.recipes.get(family).ok_or_else(|| format!("unknown family {family:?}"))?;
        let range = recipe.ranges.first().ok_or_else(|| {
            format!(
                "{family}'s recipe declares no [[range]]: lock one of its versions ({})",
                recipe.version_list()
            )
        })?;
        let rt = runtime.unwrap_or(&range.runtimes[0]);
        let job = self.lock_jobs(family, &range.template, Some(rt), None)?.remove(0);
        Ok((range.package.clone(), job))
    }

    /// The releases of `range` a scenario may run, from the committed release list, as `pick`
    /// says. Errors say which `benchlab lock` makes the list.
    pub fn expand_range(
        &self,
        family: &str,
        range: &str,
        pick: releases::Pick,
    ) -> Result<Vec<String>, String> {
        let r = releases::Range::parse(range)?;
        let recipe = self.recipes.get(family).ok_or_else(|| format!("unknown family {family:?}"))?;
        if !r.text.contains("..") {
            return Ok(vec![r.text.clone()]);
        }
        if recipe.ranges.is_empty() {
            return Err(format!("{family}'s recipe declares no [[range]] of releases"));
        }
        let dir = self.lockfiles_dir.join(family);
        let listed = releases::Releases::load(&dir)?.ok_or_else(|| {
            format!(
                "{} does not exist yet: list and lock the releases with `benchlab lock {family} {range}`",
                dir.join(releases::RELEASES_FILE).display()
            )
        })?;
        let chosen = r.select(&listed.versions, pick);
        if chosen.is_empty() {
            return Err(format!(
                "no release of {} listed on {} falls in {range}",
                listed.package, listed.listed
            ));
        }
        Ok(chosen)
    }

    /// Writes a range release's lock input (requirements.in or package.json) from its range's
    /// template of the same runtime, with the SDK package pinned to the release; an existing
    /// input is left alone.
    ///
    /// `before` (the end of the release's publication day) goes into the folder's
    /// `exclude-newer` file: the locker resolves no dependency published after it, so an old
    /// release gets the dependencies it shipped with, not today's (which may no longer work
    /// with it).
    pub fn write_lock_input(
        &self,
        family: &str,
        version: &str,
        runtime: &str,
        before: Option<&str>,
    ) -> Result<PathBuf, String> {
        let recipe = self.recipes.get(family).ok_or_else(|| format!("unknown family {family:?}"))?;
        let dir = self.lockfiles_dir.join(family).join(format!("{version}-{runtime}"));
        if LOCK_INPUTS.iter().any(|f| dir.join(f).is_file()) {
            return Ok(dir);
        }
        if let Some(b) = before {
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            std::fs::write(dir.join(releases::EXCLUDE_NEWER_FILE), format!("{b}\n"))
                .map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let range = recipe
            .ranges
            .iter()
            .find(|r| releases::Range::parse(&r.releases).is_ok_and(|x| x.contains(version)))
            .ok_or_else(|| format!("{family} {version} is in no [[range]] of the recipe"))?;
        let template = self.lockfiles_dir.join(family).join(format!("{}-{runtime}", range.template));
        let pkg = &range.package;
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // Companions are pinned in a Cargo.toml only: on another locker they would do nothing.
        if !range.companions.is_empty() && !template.join("Cargo.toml").is_file() {
            return Err(format!(
                "{family}'s range {} names companions {:?}, which only a cargo lock input (Cargo.toml) pins; {} has none",
                range.releases,
                range.companions,
                template.display()
            ));
        }
        if let Ok(text) = std::fs::read_to_string(template.join("requirements.in")) {
            let mut found = false;
            let lines: Vec<String> = text
                .lines()
                .map(|l| {
                    let name = l.split("==").next().unwrap_or("").trim();
                    if name.eq_ignore_ascii_case(pkg) {
                        found = true;
                        format!("{pkg}=={version}")
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            if !found {
                return Err(format!("{}/requirements.in does not pin {pkg}", template.display()));
            }
            std::fs::write(dir.join("requirements.in"), lines.join("\n") + "\n")
                .map_err(|e| format!("{}: {e}", dir.display()))?;
        } else if let Ok(text) = std::fs::read_to_string(template.join("package.json")) {
            let mut json: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| format!("{}/package.json: {e}", template.display()))?;
            let deps = json
                .get_mut("dependencies")
                .and_then(|d| d.as_object_mut())
                .filter(|d| d.contains_key(pkg.as_str()))
                .ok_or_else(|| format!("{}/package.json does not depend on {pkg}", template.display()))?;
            deps.insert(pkg.clone(), serde_json::Value::String(version.into()));
            json["description"] = serde_json::Value::String(format!("{pkg} {version} on {runtime}"));
            let out = serde_json::to_string_pretty(&json).expect("JSON serialises") + "\n";
            std::fs::write(dir.join("package.json"), out).map_err(|e| format!("{}: {e}", dir.display()))?;
        } else if let Ok(text) = std::fs::read_to_string(template.join("Cargo.toml")) {
            let out = pin_cargo_dependency(&text, pkg, version, &range.companions)
                .map_err(|m| format!("{}/Cargo.toml: {m}", template.display()))?;
            std::fs::write(dir.join("Cargo.toml"), out).map_err(|e| format!("{}: {e}", dir.display()))?;
        } else {
            return Err(format!("the template lock folder {} has no lock input", template.display()));
        }
        Ok(dir)
    }
}

/// The lock inputs a lock folder may hold, one per locker.
const LOCK_INPUTS: [&str; 3] = ["requirements.in", "package.json", "Cargo.toml"];

/// Whether a lock folder holds a lock that still pins its input.
pub fn is_locked(dir: &Path) -> bool {
    ["requirements.txt", "package-lock.json", "Cargo.lock"].iter().any(|f| dir.join(f).is_file())
        && check_lock(dir).is_ok()
}

/// A `Cargo.toml` with the dependency `pkg` pinned to exactly `version` (`= "=X"` or the
/// table's `version = "=X"`), and each companion crate pinned to the same version (added when
/// the template does not name it), its other lines as they were: a range release's lock input.
pub(super) fn pin_cargo_dependency(
    text: &str,
    pkg: &str,
    version: &str,
    companions: &[String],
) -> Result<String, String> {
    let mut doc: toml::Table = toml::from_str(text).map_err(|e| e.message().to_string())?;
    let deps = doc
        .get_mut("dependencies")
        .and_then(|d| d.as_table_mut())
        .filter(|d| d.contains_key(pkg))
        .ok_or_else(|| format!("no [dependencies] entry for {pkg}"))?;
    let exact = toml::Value::String(format!("={version}"));
    for name in std::iter::once(pkg).chain(companions.iter().map(String::as_str)) {
        match deps.get_mut(name) {
            Some(toml::Value::Table(t)) => {
                t.insert("version".into(), exact.clone());
            }
            Some(v) => *v = exact.clone(),
            None => {
                deps.insert(name.into(), exact.clone());
            }
        }
    }
    if let Some(p) = doc.get_mut("package").and_then(|p| p.as_table_mut()) {
        p.insert("description".into(), toml::Value::String(format!("{pkg} {version}")));
    }
    toml::to_string(&doc).map_err(|e| e.to_string())
}

/// The exact pins (`"=X"`) of a `Cargo.toml`'s `[dependencies]`: (name, version).
fn cargo_exact_pins(manifest: &str) -> Result<Vec<(String, String)>, String> {
    let doc: toml::Table = toml::from_str(manifest).map_err(|e| format!("Cargo.toml: {}", e.message()))?;
    let Some(deps) = doc.get("dependencies").and_then(|d| d.as_table()) else { return Ok(Vec::new()) };
    Ok(deps
        .iter()
        .filter_map(|(name, v)| {
            let req = match v {
                toml::Value::String(s) => s.as_str(),
                toml::Value::Table(t) => t.get("version")?.as_str()?,
                _ => return None,
            };
            let exact = req.strip_prefix('=')?.trim();
            Some((name.clone(), exact.to_string()))
        })
        .collect())
}

/// `(name, version)` of every `[[package]]` of a `Cargo.lock`.
fn cargo_lock_packages(lock: &str) -> Result<Vec<(String, String)>, String> {
    let doc: toml::Table = toml::from_str(lock).map_err(|e| format!("Cargo.lock: {}", e.message()))?;
    let packages = doc.get("package").and_then(|p| p.as_array()).cloned().unwrap_or_default();
    Ok(packages
        .iter()
        .filter_map(|p| Some((p.get("name")?.as_str()?.to_string(), p.get("version")?.as_str()?.to_string())))
        .collect())
}

/// Checks that a lock folder's lock still pins what its input asks for: every `name==version` of
/// `requirements.in` in `requirements.txt`, or `package.json`'s dependencies as the root of
/// `package-lock.json`, or every exact pin (`"=X"`) of `Cargo.toml` in `Cargo.lock` (cargo's
/// `--locked` checks the rest). Builds never resolve, so a stale lock must stop the build, not be
/// ignored.
pub fn check_lock(dir: &Path) -> Result<(), String> {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    if let Some(manifest) = read("Cargo.toml") {
        let lock = read("Cargo.lock").ok_or("Cargo.lock is missing")?;
        let locked = cargo_lock_packages(&lock)?;
        for (name, version) in cargo_exact_pins(&manifest)? {
            if !locked.iter().any(|(n, v)| *n == name && *v == version) {
                return Err(format!("Cargo.toml asks for {name} ={version}, Cargo.lock does not pin it"));
            }
        }
    }
    if let Some(input) = read("requirements.in") {
        let lock = read("requirements.txt").ok_or("requirements.txt is missing")?;
        let norm = |s: &str| s.trim().to_ascii_lowercase().replace('_', "-");
        let pinned: Vec<String> = lock
            .lines()
            .filter(|l| !l.starts_with([' ', '#']))
            .filter_map(|l| l.split_whitespace().next())
            .map(norm)
            .collect();
        for line in input.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty())
        {
            let Some((name, version)) = line.split_once("==") else { continue };
            let name = name.split('[').next().unwrap_or(name);
            let want = format!("{}=={}", norm(name), norm(version));
            if !pinned.contains(&want) {
                return Err(format!("requirements.in asks for {line}, requirements.txt does not pin it"));
            }
        }
    }
    if let Some(manifest) = read("package.json") {
        let lock = read("package-lock.json").ok_or("package-lock.json is missing")?;
        let deps = |v: &serde_json::Value| v.get("dependencies").cloned().unwrap_or_default();
        let manifest: serde_json::Value =
            serde_json::from_str(&manifest).map_err(|e| format!("package.json: {e}"))?;
        let lock: serde_json::Value =
            serde_json::from_str(&lock).map_err(|e| format!("package-lock.json: {e}"))?;
        let root = lock.pointer("/packages/").cloned().unwrap_or_default();
        if deps(&manifest) != deps(&root) {
            return Err(format!(
                "package.json asks for {}, package-lock.json's root has {}",
                deps(&manifest),
                deps(&root)
            ));
        }
    }
    Ok(())
}
