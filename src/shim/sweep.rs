//! What a server leaves in its container, seen from the shim: processes outside every live
//! server's tree (a double-forked child, a pre-warmed survivor), found by the server's user or, in
//! a container of its own, as every process but the shim; killed and counted. And the container's
//! cgroup memory beside the tree's, for memory held where the tree does not reach. Readers take a
//! root path (`/proc`, `/sys/fs/cgroup`), so tests point them at fixture folders.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::spec::{CgroupMemory, Leftovers};

/// Which processes belong to the server side of the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every process whose real uid is this (the server runs as a user of its own).
    Uid(u32),
    /// Every process but the shim (the shim is PID 1 of the server's container).
    Container { shim: u32 },
    /// Every process of a cgroup of the server side's own but the shim (a native cell's lab
    /// cgroup): the pids its `cgroup.procs` lists.
    Cgroup { procs: std::path::PathBuf, shim: u32 },
    /// Neither: only the server's process group can be reached (a shim on the host).
    GroupOnly,
}

/// A process's real uid, from `/proc/<pid>/status`.
fn real_uid(status: &str) -> Option<u32> {
    status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().next()?.parse().ok()
}

/// The live processes of `scope` that are in none of the trees of `keep` (the servers still
/// running), with their RSS in bytes.
pub fn strays(proc_root: &Path, scope: &Scope, keep: &[u32]) -> std::io::Result<Vec<(u32, u64)>> {
    if *scope == Scope::GroupOnly {
        return Ok(Vec::new());
    }
    let members: Vec<u32> = match scope {
        Scope::Cgroup { procs, .. } => {
            std::fs::read_to_string(procs)?.lines().filter_map(|l| l.trim().parse().ok()).collect()
        }
        _ => Vec::new(),
    };
    let mut kept = Vec::new();
    for root in keep {
        kept.extend(super::tree_pids(proc_root, *root)?);
    }
    let mut found = Vec::new();
    for entry in std::fs::read_dir(proc_root)? {
        let entry = entry?;
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue; // gone while we looked
        };
        if super::is_dead(&status) || kept.contains(&pid) {
            continue;
        }
        let ours = match scope {
            Scope::Uid(uid) => real_uid(&status) == Some(*uid),
            Scope::Container { shim } => pid != *shim,
            Scope::Cgroup { shim, .. } => pid != *shim && members.contains(&pid),
            Scope::GroupOnly => false,
        };
        if ours {
            found.push((pid, super::status_kib(&status, "VmRSS:") * 1024));
        }
    }
    Ok(found)
}

/// Kills every stray of `scope` outside the trees of `keep`, again until none is left (one may
/// fork while the others die), reaps those that were the shim's to reap, and says how many there
/// were and their RSS when first seen. Gives up after `limit`, saying what is still alive.
pub fn sweep(proc_root: &Path, scope: &Scope, keep: &[u32], limit: Duration) -> Result<Leftovers, String> {
    let deadline = Instant::now() + limit;
    let mut seen: Vec<u32> = Vec::new();
    let mut found = Leftovers::default();
    loop {
        let now = strays(proc_root, scope, keep).map_err(|e| format!("list processes in /proc: {e}"))?;
        for (pid, rss) in &now {
            if !seen.contains(pid) {
                seen.push(*pid);
                found = found.plus(Leftovers { processes: 1, rss_bytes: *rss });
            }
            // SAFETY: kill(2) with a pid and a signal number; no memory is passed.
            unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
        }
        reap(&seen);
        if now.is_empty() {
            return Ok(found);
        }
        if Instant::now() >= deadline {
            let pids: Vec<u32> = now.iter().map(|(p, _)| *p).collect();
            return Err(format!(
                "processes {pids:?} left by the server survived SIGKILL for {limit:?}; the container must be removed"
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Reaps those of `pids` that became the shim's children (it is PID 1, or the child subreaper).
fn reap(pids: &[u32]) {
    use nix::sys::wait::{waitpid, WaitPidFlag};
    for pid in pids {
        let _ = waitpid(nix::unistd::Pid::from_raw(*pid as i32), Some(WaitPidFlag::WNOHANG));
    }
}

/// One `key value` line of a cgroup `memory.stat`.
fn stat_value(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The memory cgroup folder of a shim that was given none: PID 1 of a container reads its
/// container's own (v1 `memory/` under `cgroup_root`, what this lab's hosts mount; else the v2
/// root, untested); a shim on the host reads none, since its cgroup is not the server's alone.
pub fn default_memory_cgroup(cgroup_root: &Path, pid_one: bool) -> Option<std::path::PathBuf> {
    if !pid_one {
        return None;
    }
    let v1 = cgroup_root.join("memory");
    Some(if v1.join("memory.usage_in_bytes").exists() { v1 } else { cgroup_root.to_path_buf() })
}

/// The server's cgroup memory from its memory cgroup folder `dir` (v1 `memory.usage_in_bytes`,
/// `memory.max_usage_in_bytes`, `memory.stat` `total_rss`; else v2 `memory.current`,
/// `memory.peak`, `anon`, untested), with `tree_anon` and `shim_anon` (bytes of RssAnon) taken off
/// its anonymous memory for `outside_tree_bytes`. None, and what was tried, when no usage file
/// could be read.
pub fn cgroup_memory(dir: &Path, tree_anon: u64, shim_anon: u64) -> (Option<CgroupMemory>, String) {
    let (usage, peak, anon_key) = match read_number(&dir.join("memory.usage_in_bytes")) {
        Some(usage) => (usage, read_number(&dir.join("memory.max_usage_in_bytes")), "total_rss"),
        None => match read_number(&dir.join("memory.current")) {
            Some(usage) => (usage, read_number(&dir.join("memory.peak")), "anon"),
            None => {
                let tried =
                    format!("no memory.usage_in_bytes or memory.current readable in {}", dir.display());
                return (None, tried);
            }
        },
    };
    let stat = std::fs::read_to_string(dir.join("memory.stat")).ok();
    let anon = stat.as_deref().and_then(|s| stat_value(s, anon_key));
    let outside = anon.map(|a| a.saturating_sub(tree_anon + shim_anon));
    let memory =
        CgroupMemory { usage_bytes: usage, peak_bytes: peak, anon_bytes: anon, outside_tree_bytes: outside };
    (Some(memory), dir.display().to_string())
}

/// The summed RssAnon of `pids` (bytes).
pub fn anon_of(proc_root: &Path, pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(proc_root.join(p.to_string()).join("status")).ok())
        .filter(|s| !super::is_dead(s))
        .map(|s| super::status_kib(&s, "RssAnon:") * 1024)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc_entry(root: &Path, pid: u32, ppid: u32, uid: u32, rss_kib: u64, state: &str) {
        let d = root.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("stat"), format!("{pid} (p) S {ppid} {pid} {pid} 0")).unwrap();
        std::fs::write(
            d.join("status"),
            format!(
                "Name:\tp\nState:\t{state}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nVmRSS:\t {rss_kib} kB\nRssAnon:\t {} kB\n",
                rss_kib / 2
            ),
        )
        .unwrap();
    }

    #[test]
    fn strays_are_the_servers_user_outside_every_live_tree() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        proc_entry(r, 1, 0, 0, 3000, "S (sleeping)"); // the shim
        proc_entry(r, 10, 1, 65534, 20_000, "S (sleeping)"); // a live server
        proc_entry(r, 11, 10, 65534, 1000, "S (sleeping)"); // its child
        proc_entry(r, 30, 1, 65534, 300_000, "S (sleeping)"); // a detached leftover
        proc_entry(r, 31, 1, 65534, 500, "Z (zombie)"); // dead already
        proc_entry(r, 40, 1, 1000, 700, "S (sleeping)"); // someone else's
        let uid = strays(r, &Scope::Uid(65534), &[10]).unwrap();
        assert_eq!(uid, vec![(30, 300_000 * 1024)]);
        let mut all = strays(r, &Scope::Container { shim: 1 }, &[10]).unwrap();
        all.sort();
        assert_eq!(all, vec![(30, 300_000 * 1024), (40, 700 * 1024)]);
        // With no server left, its own tree is a stray too.
        assert_eq!(strays(r, &Scope::Uid(65534), &[]).unwrap().len(), 3);
        assert!(strays(r, &Scope::GroupOnly, &[]).unwrap().is_empty());
        // A native lab cgroup: its members but the shim, outside the live trees.
        let procs = r.join("cgroup.procs");
        std::fs::write(&procs, "1\n10\n11\n30\n").unwrap();
        let cgroup = Scope::Cgroup { procs, shim: 1 };
        assert_eq!(strays(r, &cgroup, &[10]).unwrap(), vec![(30, 300_000 * 1024)]);
        assert_eq!(anon_of(r, &[10, 11, 31]), (10_000 + 500) * 1024);
    }

    #[test]
    fn cgroup_memory_reads_v1_and_takes_the_tree_off_its_anonymous_memory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(default_memory_cgroup(root, false), None);
        assert_eq!(default_memory_cgroup(root, true).as_deref(), Some(root));
        let r = &root.join("memory");
        assert_eq!(cgroup_memory(r, 0, 0).0, None);
        std::fs::create_dir_all(r).unwrap();
        std::fs::write(r.join("memory.usage_in_bytes"), "400000000\n").unwrap();
        std::fs::write(r.join("memory.max_usage_in_bytes"), "450000000\n").unwrap();
        std::fs::write(r.join("memory.stat"), "cache 10\nrss 5\ntotal_cache 60000000\ntotal_rss 340000000\n")
            .unwrap();
        assert_eq!(default_memory_cgroup(root, true).as_deref(), Some(r.as_path()));
        let (m, source) = cgroup_memory(r, 20_000_000, 1_000_000);
        assert!(source.ends_with("memory"), "{source}");
        assert_eq!(
            m,
            Some(CgroupMemory {
                usage_bytes: 400_000_000,
                peak_bytes: Some(450_000_000),
                anon_bytes: Some(340_000_000),
                outside_tree_bytes: Some(319_000_000),
            })
        );
        // More in the tree than the cgroup counts (per-CPU charge batches): nothing outside.
        assert_eq!(cgroup_memory(r, 400_000_000, 0).0.unwrap().outside_tree_bytes, Some(0));
    }
}
