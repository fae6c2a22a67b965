//! Base images: a Debian suite bootstrapped here with debootstrap (minbase plus the packages a
//! runtime needs) and handed to the engine as a rootfs tar, or a registry image pinned by digest.
//! Records the rootfs tar's sha256 and writes the installed package list into the rootfs.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::hash::sha256_file;
use serde::{Deserialize, Serialize};

/// Where a base image comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BaseSource {
    /// debootstrap `suite` (variant minbase) with `packages`, then import.
    Bootstrap { suite: String, packages: Vec<String> },
    /// A registry image pinned by digest (`name@sha256:<64 hex>`), for hosts that reach one.
    Registry { reference: String },
}

/// How bases are made: 2 = debootstrap minbase, then the packages with apt-get in the new root.
pub const BOOTSTRAP_METHOD: u32 = 2;

/// Suites the lab knows how to bootstrap.
pub const SUITES: &[&str] = &["bookworm", "trixie"];

/// Where bootstrapped bases record their package list inside the image.
pub const DPKG_LIST_PATH: &str = "/usr/share/benchlab/dpkg.tsv";

/// Image labels carried by a bootstrapped base.
pub const LABEL_ROOTFS_SHA256: &str = "org.benchlab.rootfs.sha256";
pub const LABEL_SUITE: &str = "org.benchlab.suite";
pub const LABEL_BASE_SPEC: &str = "org.benchlab.base.spec";

impl BaseSource {
    pub fn bootstrap(suite: &str, packages: &[&str]) -> Self {
        let mut p: Vec<String> = packages.iter().map(|s| s.to_string()).collect();
        p.sort();
        p.dedup();
        BaseSource::Bootstrap { suite: suite.into(), packages: p }
    }

    /// The image reference the base is known by in the engine.
    pub fn reference(&self) -> String {
        match self {
            BaseSource::Bootstrap { suite, packages } if packages.is_empty() => {
                format!("benchlab/base:{suite}")
            }
            BaseSource::Bootstrap { suite, .. } => {
                format!("benchlab/base:{suite}-{}", &self.spec_hash()[..12])
            }
            BaseSource::Registry { reference } => reference.clone(),
        }
    }

    /// sha256 of the spec's canonical JSON and the bootstrap method: a bootstrapped base is
    /// reused only for the same spec made the same way.
    pub fn spec_hash(&self) -> String {
        crate::hash::canonical_hash(&serde_json::json!({"spec": self, "method": BOOTSTRAP_METHOD}))
    }

    pub fn suite(&self) -> Option<&str> {
        match self {
            BaseSource::Bootstrap { suite, .. } => Some(suite),
            BaseSource::Registry { .. } => None,
        }
    }

    /// Checks the spec before anything runs.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            BaseSource::Bootstrap { suite, packages } => {
                if !SUITES.contains(&suite.as_str()) {
                    return Err(format!("unknown Debian suite {suite:?} (known: {})", SUITES.join(", ")));
                }
                if let Some(p) = packages.iter().find(|p| {
                    p.is_empty() || !p.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                }) {
                    return Err(format!("{p:?} is not a Debian package name"));
                }
                Ok(())
            }
            BaseSource::Registry { reference } => {
                let digest = reference.split_once("@sha256:").map(|(_, d)| d);
                match digest {
                    Some(d) if d.len() == 64 && d.chars().all(|c| c.is_ascii_hexdigit()) => Ok(()),
                    _ => Err(format!(
                        "registry base {reference:?} must be pinned by digest: name@sha256:<64 hex digits>"
                    )),
                }
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("debootstrap is not installed: install it with `apt-get install debootstrap` (the README's commands do)")]
    NoDebootstrap,
    #[error("bootstrapping a base needs root (debootstrap chroots and creates device nodes)")]
    NotRoot,
    #[error("debootstrap {suite} failed ({status}); last lines of its log {log}:\n{tail}")]
    Failed { suite: String, status: String, log: PathBuf, tail: String },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

/// A bootstrapped root filesystem, packed as a tar.
pub struct Rootfs {
    pub tar: PathBuf,
    pub sha256: String,
    pub packages: usize,
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BootstrapError {
    let what = what.into();
    move |source| BootstrapError::Io { what, source }
}

/// Runs debootstrap into `work/rootfs`, writes the dpkg list into it, strips caches and packs
/// `work/rootfs.tar`. `work` must be an empty folder with room for ~300 MB.
pub fn bootstrap(suite: &str, packages: &[String], work: &Path) -> Result<Rootfs, BootstrapError> {
    if which("debootstrap").is_none() {
        return Err(BootstrapError::NoDebootstrap);
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(BootstrapError::NotRoot);
    }
    let root = work.join("rootfs");
    let log = work.join("debootstrap.log");
    std::fs::create_dir_all(work).map_err(io_err(format!("create {}", work.display())))?;
    let log_file = std::fs::File::create(&log).map_err(io_err(format!("create {}", log.display())))?;
    let run_logged = |cmd: &mut Command, what: &str| -> Result<(), BootstrapError> {
        let out = log_file.try_clone().map_err(io_err("log"))?;
        let err = log_file.try_clone().map_err(io_err("log"))?;
        let status = cmd.stdout(out).stderr(err).status().map_err(io_err(format!("run {what}")))?;
        if status.success() {
            return Ok(());
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        Err(BootstrapError::Failed {
            suite: format!("{suite} ({what})"),
            status: status.to_string(),
            log: log.clone(),
            tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        })
    };
    // minbase from debootstrap's default mirror; the packages a runtime needs then come from apt
    // inside the new root, which (unlike debootstrap's own resolver) understands virtual
    // packages and alternatives (Debian's npm needs both).
    run_logged(Command::new("debootstrap").arg("--variant=minbase").arg(suite).arg(&root), "debootstrap")?;
    if !packages.is_empty() {
        let resolv = root.join("etc/resolv.conf");
        let saved = std::fs::read(&resolv).ok();
        let _ = std::fs::remove_file(&resolv);
        std::fs::copy("/etc/resolv.conf", &resolv).map_err(io_err("copy resolv.conf into the new root"))?;
        let apt = |args: &[&str]| {
            let mut c = Command::new("chroot");
            c.arg(&root).arg("env").arg("DEBIAN_FRONTEND=noninteractive").arg("apt-get").args(args);
            c
        };
        let result = run_logged(&mut apt(&["update", "-q"]), "apt-get update").and_then(|_| {
            let mut install = vec!["install", "-y", "-q", "--no-install-recommends"];
            install.extend(packages.iter().map(String::as_str));
            run_logged(&mut apt(&install), "apt-get install")
        });
        let _ = std::fs::remove_file(&resolv);
        if let Some(bytes) = saved {
            let _ = std::fs::write(&resolv, bytes);
        }
        result?;
    }
    // Caches and logs are not part of what runs; drop them so the tar holds the system only.
    for dir in ["var/cache/apt/archives", "var/lib/apt/lists", "var/log"] {
        clear_dir(&root.join(dir));
    }
    let status_file =
        std::fs::read_to_string(root.join("var/lib/dpkg/status")).map_err(io_err("read dpkg status"))?;
    let list = dpkg_installed(&status_file);
    let share = root.join(DPKG_LIST_PATH.trim_start_matches('/'));
    std::fs::create_dir_all(share.parent().expect("has a parent"))
        .map_err(io_err("create /usr/share/benchlab"))?;
    let text: String = list.iter().map(|(n, v)| format!("{n}\t{v}\n")).collect();
    std::fs::write(&share, text).map_err(io_err("write dpkg list"))?;
    let tar = work.join("rootfs.tar");
    let status = Command::new("tar")
        .args(["--numeric-owner", "--sort=name", "--xattrs", "-C"])
        .arg(&root)
        .args(["-cf"])
        .arg(&tar)
        .arg(".")
        .status()
        .map_err(io_err("run tar"))?;
    if !status.success() {
        return Err(BootstrapError::Io {
            what: "pack the rootfs".into(),
            source: std::io::Error::other(status.to_string()),
        });
    }
    let sha256 = sha256_file(&tar).map_err(io_err(format!("hash {}", tar.display())))?;
    Ok(Rootfs { tar, sha256, packages: list.len() })
}

fn clear_dir(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                let _ = std::fs::remove_dir_all(&p);
            } else {
                let _ = std::fs::remove_file(&p);
            }
        }
    }
}

/// Installed packages (name, version) from a dpkg status file, sorted by name.
pub fn dpkg_installed(status: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for para in status.split("\n\n") {
        let field = |k: &str| para.lines().find_map(|l| l.strip_prefix(k)).map(|v| v.trim().to_string());
        if let (Some(name), Some(version), Some(st)) =
            (field("Package:"), field("Version:"), field("Status:"))
        {
            if st.ends_with("installed") && !st.contains("not-installed") && !st.contains("config-files") {
                out.push((name, version));
            }
        }
    }
    out.sort();
    out
}

pub fn which(prog: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(prog)).find(|p| p.is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_depend_on_the_spec() {
        assert_eq!(BaseSource::bootstrap("bookworm", &[]).reference(), "benchlab/base:bookworm");
        let a = BaseSource::bootstrap("bookworm", &["python3-venv", "python3"]);
        let b = BaseSource::bootstrap("bookworm", &["python3", "python3-venv"]);
        assert_eq!(a, b);
        assert!(a.reference().starts_with("benchlab/base:bookworm-"));
        assert_ne!(a.reference(), BaseSource::bootstrap("trixie", &["python3", "python3-venv"]).reference());
    }

    #[test]
    fn validates_suites_and_digests() {
        assert!(BaseSource::bootstrap("sid", &[]).validate().is_err());
        assert!(BaseSource::Registry { reference: "debian:bookworm".into() }.validate().is_err());
        let pinned = format!("debian@sha256:{}", "a".repeat(64));
        assert!(BaseSource::Registry { reference: pinned }.validate().is_ok());
    }

    #[test]
    fn reads_installed_packages_from_dpkg_status() {
        let s = "Package: b\nStatus: install ok installed\nVersion: 2\n\nPackage: a\nStatus: install ok installed\nVersion: 1.0\n\nPackage: gone\nStatus: deinstall ok config-files\nVersion: 3\n";
        assert_eq!(dpkg_installed(s), vec![("a".into(), "1.0".into()), ("b".into(), "2".into())]);
    }
}
