//! The environment manifest: everything that could change a number — image and its installed
//! packages, runtime, host, engine, placement, the lab's own binary, the scenario file — and the
//! readers that collect the host's part from /proc and /sys (root paths, for fixture tests).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::spec::Placement;

/// A package and the version actually installed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Package {
    pub name: String,
    pub version: String,
}

/// The base image a cell's image was built on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseManifest {
    /// Image reference (`benchlab/base:bookworm-…`, or `name@sha256:…` from a registry).
    pub reference: String,
    /// The engine's image id (content digest of its config).
    pub image_id: String,
    /// The Debian suite it was bootstrapped from, when it was.
    pub suite: Option<String>,
    /// sha256 of the rootfs tar that was imported, when bootstrapped here.
    pub rootfs_sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageManifest {
    pub reference: String,
    pub image_id: String,
    /// sha256 over recipe files, lockfile, base id and build args: the build cache key.
    pub input_hash: String,
    pub base: BaseManifest,
    /// Language packages installed in the image (pip, npm), as installed.
    pub packages: Vec<Package>,
    /// Debian packages of the image (dpkg), as installed.
    pub system_packages: Vec<Package>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeManifest {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostManifest {
    pub kernel: String,
    pub cpu_model: String,
    pub cpus_online: String,
    pub logical_cpus: u32,
    pub memory_bytes: u64,
    /// 1 or 2.
    pub cgroup_version: u8,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineManifest {
    pub kind: String,
    pub version: String,
    pub api_version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchlabManifest {
    pub version: String,
    /// sha256 of the executable that ran as orchestrator, shim and driver.
    pub binary_sha256: String,
}

/// How the server container was confined (the lab's hardened defaults unless a scenario says).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxManifest {
    /// `uid:gid` the server ran as; null for the image's own user.
    pub user: Option<String>,
    pub drop_all_capabilities: bool,
    pub no_new_privileges: bool,
    pub read_only_root: bool,
    /// In-memory scratch folders, as `path:bytes`.
    pub scratch: Vec<String>,
    pub pids_limit: Option<u32>,
    /// `none`: loopback only.
    pub network: String,
    /// `uid:gid` the shim (root in that group, keeping only SETUID, SETGID and KILL) and the
    /// driver ran as, apart from the server: the shim non-dumpable, /lab closed to the server,
    /// the server under a seccomp filter that refuses ptrace and process_vm_readv/writev. Absent
    /// when they shared the server's user (every record written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab_user: Option<String>,
}

/// The environment of one cell. `env_hash` is the sha256 of its canonical JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    pub image: ImageManifest,
    pub runtime: RuntimeManifest,
    pub host: HostManifest,
    pub engine: EngineManifest,
    pub placement: Placement,
    pub benchlab: BenchlabManifest,
    pub scenario_sha256: String,
    /// Where the cell departs from what its source asked for (e.g. a runtime version that could
    /// not be had), in words.
    pub deviations: Vec<String>,
    /// The server container's confinement. Absent in records written before it was recorded
    /// (those containers ran with the engine's defaults plus `--network none`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxManifest>,
    /// The backing services' images and versions (absent for cells without services, so
    /// earlier records keep their hash).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceManifest>,
}

/// A backing service as it ran: what image, which version of its program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceManifest {
    pub name: String,
    pub kind: crate::spec::ServiceKind,
    /// The engine's image id.
    pub image_id: String,
    /// Its program's installed version (`redis-server`'s Debian version; the lab's own for the
    /// API service).
    pub version: String,
}

impl Environment {
    pub fn hash(&self) -> String {
        crate::hash::canonical_hash(self)
    }
}

/// Reads the host's part of the manifest. `root` is `/` in production, a fixture folder in tests.
pub fn read_host(root: &Path) -> HostManifest {
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_default();
    let kernel = read("proc/sys/kernel/osrelease").trim().to_string();
    let cpuinfo = read("proc/cpuinfo");
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let cpus_online = read("sys/devices/system/cpu/online").trim().to_string();
    let logical_cpus = crate::placement::parse_cpu_list(&cpus_online).map(|c| c.len() as u32).unwrap_or(0);
    let memory_bytes = read("proc/meminfo")
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .unwrap_or(0);
    // A pure v2 host mounts cgroup2 at /sys/fs/cgroup and has cgroup.controllers there.
    let cgroup_version = if root.join("sys/fs/cgroup/cgroup.controllers").exists() { 2 } else { 1 };
    HostManifest { kernel, cpu_model, cpus_online, logical_cpus, memory_bytes, cgroup_version }
}

/// Parses `dpkg-query -W -f '${Package}\t${Version}\n'` output.
pub fn parse_dpkg_list(text: &str) -> Vec<Package> {
    let mut v: Vec<Package> = text
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(n, ver)| Package { name: n.trim().into(), version: ver.trim().into() })
        .filter(|p| !p.name.is_empty())
        .collect();
    v.sort();
    v
}

/// Parses `pip list --format=json` output.
pub fn parse_pip_list(text: &str) -> Result<Vec<Package>, serde_json::Error> {
    let mut v: Vec<Package> = serde_json::from_str(text)?;
    v.sort();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_host_from_a_fixture_root() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        for (p, c) in [
            ("proc/sys/kernel/osrelease", "6.1.0-test\n"),
            ("proc/cpuinfo", "processor\t: 0\nmodel name\t: Test CPU @ 2GHz\n\nprocessor\t: 1\nmodel name\t: Test CPU @ 2GHz\n"),
            ("sys/devices/system/cpu/online", "0-3\n"),
            ("proc/meminfo", "MemTotal:       1024 kB\nMemFree: 1 kB\n"),
        ] {
            std::fs::create_dir_all(r.join(p).parent().unwrap()).unwrap();
            std::fs::write(r.join(p), c).unwrap();
        }
        let h = read_host(r);
        assert_eq!(h.kernel, "6.1.0-test");
        assert_eq!(h.cpu_model, "Test CPU @ 2GHz");
        assert_eq!(h.logical_cpus, 4);
        assert_eq!(h.memory_bytes, 1024 * 1024);
        assert_eq!(h.cgroup_version, 1);
    }

    #[test]
    fn parses_package_lists() {
        let d = parse_dpkg_list("python3\t3.11.2-1+b1\nlibc6\t2.36-9+deb12u10\n");
        assert_eq!(d[0].name, "libc6");
        let p = parse_pip_list(r#"[{"name":"mcp","version":"2.3.0"},{"name":"anyio","version":"4.16.0"}]"#)
            .unwrap();
        assert_eq!(p[0], Package { name: "anyio".into(), version: "4.16.0".into() });
    }
}
