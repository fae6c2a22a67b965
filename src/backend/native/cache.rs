//! The native engine's install cache: one folder per content hash of a server's build inputs (lock,
//! sources, manifest script) and the host tool that installs them, holding what an image would
//! hold at /opt/venv and /srv, built in a temporary folder and renamed into place (a finished
//! entry is a hit with no work). It also rewrites a plan's container paths to the entry's. It does
//! not run servers.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::backend::EngineError;
use crate::recipe::{ImagePlan, RuntimeKind};
use crate::record::manifest::Package;
use crate::spec::ServerLaunch;

/// The environment variable that moves the cache.
pub const CACHE_ENV: &str = "BENCHLAB_NATIVE_CACHE";
/// The environment variable that names the Python interpreter that makes venvs.
pub const PYTHON_ENV: &str = "BENCHLAB_PYTHON";

/// The entry's own record of what it holds, written last before the rename.
const ENTRY_FILE: &str = "native.json";

/// A server installed on the host, ready to launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NativeEnv {
    /// The cache entry (empty for the null server, which needs nothing).
    pub dir: PathBuf,
    /// sha256 over the runtime kind, the installing tool and every build input.
    pub input_hash: String,
    /// The plan's launch with container paths rewritten to the entry's.
    pub launch: ServerLaunch,
    pub runtime_version: String,
    /// The interpreter that runs the server: the host Python the venv was made from, or the
    /// node/bun binary the lock installed (`benchlab` itself for the null server).
    pub interpreter: String,
    /// Every package installed for the server, as the image manifest script lists them.
    pub packages: Vec<Package>,
    /// True when the entry existed already and nothing was installed.
    pub cached: bool,
}

/// What an entry records about itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct EntryFacts {
    runtime_version: String,
    interpreter: String,
    packages: Vec<Package>,
}

/// The cache folder: `$BENCHLAB_NATIVE_CACHE`, else `$XDG_CACHE_HOME/benchlab/native`, else
/// `~/.cache/benchlab/native`.
pub fn cache_root() -> PathBuf {
    if let Some(p) = std::env::var_os(CACHE_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME").filter(|p| !p.is_empty()) {
        return PathBuf::from(p).join("benchlab").join("native");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache").join("benchlab").join("native")
}

/// The host Python that makes venvs: `$BENCHLAB_PYTHON`, else /usr/bin/python3, else python3 on
/// PATH.
pub fn host_python() -> Result<PathBuf, EngineError> {
    if let Some(p) = std::env::var_os(PYTHON_ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let debian = Path::new("/usr/bin/python3");
    if debian.is_file() {
        return Ok(debian.to_path_buf());
    }
    on_path("python3").ok_or_else(|| {
        EngineError::op(
            "find",
            "python3",
            "no python3 on this host: install python3 and python3-venv (apt-get install python3 python3-venv), or name one with BENCHLAB_PYTHON",
        )
    })
}

/// An executable `name` on PATH.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
    })
}

/// Runs `program args` and returns its trimmed stdout (for version probes).
async fn output_of(program: &Path, args: &[&str]) -> Result<String, EngineError> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| EngineError::op("run", program.display().to_string(), e))?;
    if !out.status.success() {
        return Err(EngineError::op(
            "run",
            format!("{} {}", program.display(), args.join(" ")),
            format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
        ));
    }
    let mut text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if text.is_empty() {
        text = String::from_utf8_lossy(&out.stderr).trim().to_string();
    }
    Ok(text)
}

/// Runs a command, feeding every output line to `log`; on failure the error carries the last 40.
async fn run_logged(
    mut cmd: tokio::process::Command,
    what: &str,
    log: &mut (dyn FnMut(&str) + Send),
) -> Result<(), EngineError> {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| EngineError::op("start", what, e))?;
    let mut out = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut err = BufReader::new(child.stderr.take().expect("piped")).lines();
    let mut tail: Vec<String> = Vec::new();
    let (mut out_done, mut err_done) = (false, false);
    while !(out_done && err_done) {
        let line = tokio::select! {
            l = out.next_line(), if !out_done => l,
            l = err.next_line(), if !err_done => match l {
                Ok(None) => { err_done = true; continue; }
                other => other,
            },
        };
        match line {
            Ok(Some(l)) => {
                log(&l);
                tail.push(l);
                if tail.len() > 40 {
                    tail.remove(0);
                }
            }
            Ok(None) => out_done = true,
            Err(_) => {
                out_done = true;
                err_done = true;
            }
        }
    }
    let status = child.wait().await.map_err(|e| EngineError::op("wait for", what, e))?;
    if !status.success() {
        return Err(EngineError::op(
            "run",
            what,
            format!("it ended with {status}; its last output:\n{}", tail.join("\n")),
        ));
    }
    Ok(())
}

/// Installs (or finds) the plan's server in the cache and returns how to launch it.
pub async fn prepare(
    plan: &ImagePlan,
    ca_bundle: &Path,
    log: &mut (dyn FnMut(&str) + Send),
) -> Result<NativeEnv, EngineError> {
    prepare_in(&cache_root(), plan, ca_bundle, log).await
}

/// [`prepare`] with the cache folder named.
pub async fn prepare_in(
    root: &Path,
    plan: &ImagePlan,
    ca_bundle: &Path,
    log: &mut (dyn FnMut(&str) + Send),
) -> Result<NativeEnv, EngineError> {
    if plan.http.is_some() {
        return Err(EngineError::op(
            "prepare",
            format!("{} {}", plan.family, plan.version),
            "the native engine runs stdio servers only; use --engine docker for HTTP cells",
        ));
    }
    let kind = plan.runtime_kind;
    let build = match (&plan.build, kind) {
        (None, _) => {
            return Ok(NativeEnv {
                dir: PathBuf::new(),
                input_hash: crate::hash::sha256_hex(b"native"),
                launch: plan.launch.clone(),
                runtime_version: env!("CARGO_PKG_VERSION").to_string(),
                interpreter: "benchlab".into(),
                packages: Vec::new(),
                cached: true,
            })
        }
        (Some(b), _) => b,
    };
    // The tool that installs decides what lands in the entry, so it is part of the hash.
    let tool = match kind {
        RuntimeKind::Cpython => host_python()?,
        RuntimeKind::Node | RuntimeKind::Bun => on_path("npm").ok_or_else(|| {
            EngineError::op("find", "npm", "no npm on this host: install it (apt-get install npm)")
        })?,
        RuntimeKind::Native | RuntimeKind::Shell | RuntimeKind::Rust | RuntimeKind::Pypy => {
            return Err(EngineError::op(
                "prepare",
                format!("{} {}", plan.family, plan.version),
                format!(
                    "the native engine cannot install a {:?} runtime (cpython, node and bun only)",
                    kind.as_str()
                ),
            ))
        }
    };
    let tool_version = output_of(&tool, &["--version"]).await?;
    let files: std::collections::BTreeMap<&str, String> =
        build.files.iter().map(|(n, c)| (n.as_str(), crate::hash::sha256_hex(c))).collect();
    let input_hash = crate::hash::canonical_hash(&serde_json::json!({
        "runtime_kind": kind.as_str(),
        "tool": tool.display().to_string(),
        "tool_version": tool_version,
        "files": files,
    }));
    let entry = root.join(&input_hash);
    let facts_path = entry.join(ENTRY_FILE);
    let (facts, cached) = match std::fs::read(&facts_path) {
        Ok(bytes) => {
            let facts: EntryFacts = serde_json::from_slice(&bytes).map_err(|e| {
                EngineError::op(
                    "read",
                    facts_path.display().to_string(),
                    format!("{e}; delete the folder {} and run again", entry.display()),
                )
            })?;
            log(&format!("native cache hit: {} (nothing to install)", entry.display()));
            (facts, true)
        }
        Err(_) => {
            let facts = install(root, &entry, kind, &tool, build, ca_bundle, log).await?;
            (facts, false)
        }
    };
    let launch = rewrite_launch(&plan.launch, &entry);
    let interpreter = match kind {
        RuntimeKind::Cpython => facts.interpreter.clone(),
        _ => launch.argv.first().cloned().unwrap_or_default(),
    };
    Ok(NativeEnv {
        dir: entry,
        input_hash,
        launch,
        runtime_version: facts.runtime_version,
        interpreter,
        packages: facts.packages,
        cached,
    })
}

/// Builds an entry in a temporary folder beside it, then renames it into place.
async fn install(
    root: &Path,
    entry: &Path,
    kind: RuntimeKind,
    tool: &Path,
    build: &crate::recipe::BuildInputs,
    ca_bundle: &Path,
    log: &mut (dyn FnMut(&str) + Send),
) -> Result<EntryFacts, EngineError> {
    let io = |what: String| move |e: std::io::Error| EngineError::op("write", what, e);
    std::fs::create_dir_all(root).map_err(io(root.display().to_string()))?;
    let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("entry");
    let tmp = root.join(format!(".tmp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let guard = RemoveOnDrop(tmp.clone());
    let srv = tmp.join("srv");
    std::fs::create_dir_all(&srv).map_err(io(srv.display().to_string()))?;
    log(&format!("native install into {}", entry.display()));
    let started = std::time::Instant::now();
    let write = |rel: &str, data: &[u8]| -> Result<(), EngineError> {
        let path = tmp.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent.display().to_string()))?;
        }
        std::fs::write(&path, data).map_err(io(path.display().to_string()))
    };
    for (name, data) in &build.files {
        write(name, data)?;
    }
    let manifest_out = match kind {
        RuntimeKind::Cpython => {
            let venv = tmp.join("venv");
            let mut cmd = tokio::process::Command::new(tool);
            cmd.arg("-m").arg("venv").arg(&venv);
            run_logged(cmd, &format!("{} -m venv", tool.display()), log).await.map_err(|e| {
                EngineError::op(
                    "make a venv with",
                    tool.display().to_string(),
                    format!("{e}\n  install python3-venv (apt-get install python3-venv), or name another Python with BENCHLAB_PYTHON"),
                )
            })?;
            let mut cmd = tokio::process::Command::new(venv.join("bin").join("python"));
            cmd.args(["-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check", "--no-input"])
                .args(["--require-hashes", "--no-deps", "--only-binary=:all:", "-r"])
                .arg(tmp.join("lock").join("requirements.txt"))
                .env("PIP_CERT", ca_bundle)
                .env("SSL_CERT_FILE", ca_bundle);
            run_logged(cmd, "pip install of the locked set", log).await?;
            let mut cmd = tokio::process::Command::new(venv.join("bin").join("python"));
            cmd.arg(tmp.join("image-manifest.py"));
            cmd
        }
        _ => {
            // As in the image: the lock (package.json, package-lock.json) sits in /srv, npm ci
            // installs it there (the runtime binary included), the sources go beside it.
            for (name, data) in &build.files {
                if let Some(rest) = name.strip_prefix("lock/") {
                    write(&format!("srv/{rest}"), data)?;
                }
            }
            let mut cmd = tokio::process::Command::new(tool);
            cmd.args(["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev", "--loglevel=warn"])
                .current_dir(&srv)
                .env("npm_config_cafile", ca_bundle);
            run_logged(cmd, "npm ci of the locked set", log).await?;
            for (name, data) in &build.files {
                if let Some(rest) = name.strip_prefix("srv/") {
                    write(&format!("srv/{rest}"), data)?;
                }
            }
            // The script reads the image's /srv; point it at this folder.
            let script = tmp.join("image-manifest.mjs");
            let text = std::fs::read_to_string(&script).map_err(io(script.display().to_string()))?;
            std::fs::write(&script, text.replace("\"/srv/", &format!("\"{}/", srv.display())))
                .map_err(io(script.display().to_string()))?;
            let launcher = build.launcher.split_whitespace().next().unwrap_or_default();
            let mut cmd = tokio::process::Command::new(rewrite_path(launcher, &tmp));
            cmd.arg(&script);
            cmd
        }
    };
    let (runtime_version, packages) = image_manifest(manifest_out).await?;
    let interpreter = match kind {
        RuntimeKind::Cpython => tool.display().to_string(),
        _ => rewrite_path(build.launcher.split_whitespace().next().unwrap_or_default(), entry),
    };
    let facts = EntryFacts { runtime_version, interpreter, packages };
    let facts_json = serde_json::to_vec_pretty(&facts).expect("facts serialise");
    std::fs::write(tmp.join(ENTRY_FILE), facts_json)
        .map_err(io(tmp.join(ENTRY_FILE).display().to_string()))?;
    match std::fs::rename(&tmp, entry) {
        Ok(()) => {}
        // Another lab finished the same entry first: theirs is as good as ours.
        Err(_) if entry.join(ENTRY_FILE).is_file() => {}
        Err(e) => return Err(EngineError::op("place", entry.display().to_string(), e)),
    }
    drop(guard);
    log(&format!("native install done in {:.1} s", started.elapsed().as_secs_f64()));
    Ok(facts)
}

/// Runs the image manifest script (as the image build does) and reads the runtime version and
/// every installed package from its output.
async fn image_manifest(mut cmd: tokio::process::Command) -> Result<(String, Vec<Package>), EngineError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| EngineError::op("run", "the image manifest script", e))?;
    if !out.status.success() {
        return Err(EngineError::op(
            "run",
            "the image manifest script",
            format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
        ));
    }
    #[derive(Deserialize)]
    struct ImageJson {
        runtime: crate::record::manifest::RuntimeManifest,
        packages: Vec<Package>,
    }
    let parsed: ImageJson = serde_json::from_slice(&out.stdout)
        .map_err(|e| EngineError::op("parse", "the image manifest script's output", e))?;
    let mut packages = parsed.packages;
    packages.sort();
    Ok((parsed.runtime.version, packages))
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Rewrites the container paths `/opt/venv` and `/srv` at the start of `s`, or after `=` or `:`
/// (PATH-like values), to the entry's `venv` and `srv`.
pub fn rewrite_path(s: &str, entry: &Path) -> String {
    let entry = entry.display().to_string();
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut at_start = true;
    'outer: while !rest.is_empty() {
        if at_start {
            for (from, to) in [("/opt/venv", "venv"), ("/srv", "srv")] {
                if let Some(after) = rest.strip_prefix(from) {
                    if after.is_empty() || after.starts_with('/') || after.starts_with(':') {
                        out.push_str(&entry);
                        out.push('/');
                        out.push_str(to);
                        rest = after;
                        at_start = false;
                        continue 'outer;
                    }
                }
            }
        }
        let c = rest.chars().next().expect("not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
        at_start = c == ':' || c == '=';
    }
    out
}

/// The plan's launch with its argv, environment values and working folder rewritten.
pub fn rewrite_launch(launch: &ServerLaunch, entry: &Path) -> ServerLaunch {
    ServerLaunch {
        argv: launch.argv.iter().map(|a| rewrite_path(a, entry)).collect(),
        env: launch.env.iter().map(|(k, v)| (k.clone(), rewrite_path(v, entry))).collect(),
        cwd: launch.cwd.as_ref().map(|c| rewrite_path(c, entry)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_container_paths_only_where_they_start() {
        let e = Path::new("/c/abc");
        assert_eq!(rewrite_path("/opt/venv/bin/python", e), "/c/abc/venv/bin/python");
        assert_eq!(rewrite_path("/srv", e), "/c/abc/srv");
        assert_eq!(rewrite_path("/srv/weekly.py", e), "/c/abc/srv/weekly.py");
        assert_eq!(rewrite_path("/srv:/opt/venv/lib", e), "/c/abc/srv:/c/abc/venv/lib");
        assert_eq!(rewrite_path("--root=/srv/x", e), "--root=/c/abc/srv/x");
        assert_eq!(rewrite_path("/srvx/a", e), "/srvx/a");
        assert_eq!(rewrite_path("/data/srv/a", e), "/data/srv/a");
        assert_eq!(rewrite_path("weekly", e), "weekly");
    }
}
