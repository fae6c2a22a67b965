//! CPU placement: reading the CPUs this process may use and choosing disjoint cpusets for the
//! server and sidecar containers (or one shared set when a scenario asks). It starts nothing.

use crate::spec::Placement;
use crate::spec::{PlacementMode, PlacementSpec};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlacementError {
    #[error("a split placement needs at least 2 CPUs, and this host offers {available}: use `mode = \"shared\"` in [placement], or run on a bigger host")]
    NotEnoughCpus { available: String },
    #[error("cpuset {set:?} asks for CPUs this host does not offer (available: {available})")]
    Unavailable { set: String, available: String },
    #[error("server_cpus {server:?} and driver_cpus {driver:?} overlap, but the placement mode is split: make them disjoint or use mode = \"shared\"")]
    Overlap { server: String, driver: String },
    #[error("{0}")]
    Syntax(String),
}

/// Parses a Linux CPU list (`0-3,6,8-9`).
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let a: u32 = a.trim().parse().map_err(|_| format!("bad CPU list {s:?}"))?;
        let b: u32 = b.trim().parse().map_err(|_| format!("bad CPU list {s:?}"))?;
        if b < a {
            return Err(format!("bad CPU range {part:?} in {s:?}"));
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        return Err(format!("empty CPU list {s:?}"));
    }
    Ok(out)
}

/// CPUs as an affinity mask (for `sched_setaffinity`; this module sets nothing itself).
pub fn cpu_mask(cpus: &[u32]) -> Result<nix::sched::CpuSet, String> {
    let mut set = nix::sched::CpuSet::new();
    for c in cpus {
        set.set(*c as usize).map_err(|e| format!("CPU {c}: {e}"))?;
    }
    Ok(set)
}

/// Formats CPUs as a compact list (`0-3,6`).
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { v[i].to_string() } else { format!("{}-{}", v[i], v[j]) });
        i = j + 1;
    }
    parts.join(",")
}

/// The CPUs this process may run on (its affinity mask), which the containers inherit as the
/// universe to choose from.
pub fn available_cpus() -> Vec<u32> {
    match nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        Ok(set) => (0..nix::sched::CpuSet::count() as u32)
            .filter(|&c| set.is_set(c as usize).unwrap_or(false))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1)).collect(),
    }
}

/// Chooses the cpusets for one cell.
pub fn choose(spec: &PlacementSpec, available: &[u32]) -> Result<Placement, PlacementError> {
    let avail = format_cpu_list(available);
    let check = |set: &str| -> Result<Vec<u32>, PlacementError> {
        let cpus = parse_cpu_list(set).map_err(PlacementError::Syntax)?;
        if cpus.iter().any(|c| !available.contains(c)) {
            return Err(PlacementError::Unavailable { set: set.into(), available: avail.clone() });
        }
        Ok(cpus)
    };
    let last = *available.last().ok_or(PlacementError::NotEnoughCpus { available: avail.clone() })?;
    let (server, driver) = match spec.mode {
        PlacementMode::Split => {
            let server = match &spec.server_cpus {
                Some(s) => check(s)?,
                None => vec![last],
            };
            let driver = match &spec.driver_cpus {
                Some(s) => check(s)?,
                None => {
                    // The highest CPU not given to the server.
                    let free: Vec<u32> = available.iter().copied().filter(|c| !server.contains(c)).collect();
                    vec![*free.last().ok_or(PlacementError::NotEnoughCpus { available: avail.clone() })?]
                }
            };
            if server.iter().any(|c| driver.contains(c)) {
                return Err(PlacementError::Overlap {
                    server: format_cpu_list(&server),
                    driver: format_cpu_list(&driver),
                });
            }
            (server, driver)
        }
        PlacementMode::Shared => {
            let server = match &spec.server_cpus {
                Some(s) => check(s)?,
                None => vec![last],
            };
            let driver = match &spec.driver_cpus {
                Some(s) => check(s)?,
                None => server.clone(),
            };
            (server, driver)
        }
    };
    Ok(Placement {
        server_cpus: format_cpu_list(&server),
        driver_cpus: format_cpu_list(&driver),
        shared: spec.mode == PlacementMode::Shared,
        memory_limit_bytes: spec.memory.0,
        parallel: None,
        services_cpus: None,
        services_share_driver: false,
        cpu_quota: spec.cpus,
    })
}

/// The CPUs a cell's load driver runs one thread on each: its cpuset's, when that has two or
/// more (a bigger split driver set, or a shared set sized to a multi-worker server). Empty: one
/// thread, where the driver process is.
pub fn driver_thread_cpus(p: &Placement) -> Vec<u32> {
    threads_on(parse_cpu_list(&p.driver_cpus).unwrap_or_default())
}

/// A driver given `cpus` runs one thread on each when they are two or more; empty (one thread,
/// where the driver process is) otherwise. `measure --url` and cells share this rule.
pub fn threads_on(cpus: Vec<u32>) -> Vec<u32> {
    if cpus.len() > 1 {
        cpus
    } else {
        Vec::new()
    }
}

/// Gives a cell's backing services their CPUs: the highest CPU given to neither the server nor
/// the driver, else the driver's own (on a small host they share them, and the placement says
/// so). A service is I/O for the server, so sharing the driver's CPUs keeps the server's alone.
pub fn with_services(p: Placement, available: &[u32]) -> Placement {
    let taken: Vec<u32> =
        [&p.server_cpus, &p.driver_cpus].iter().flat_map(|l| parse_cpu_list(l).unwrap_or_default()).collect();
    match available.iter().rev().find(|c| !taken.contains(c)) {
        Some(c) => Placement { services_cpus: Some(c.to_string()), services_share_driver: false, ..p },
        None => Placement { services_cpus: Some(p.driver_cpus.clone()), services_share_driver: true, ..p },
    }
}

/// Sizes a cell's server cpuset to its `workers` (one CPU each) when the host has them: the
/// highest CPUs, the driver on the highest one left (split), or beside them (shared). A host
/// too small keeps the server's CPUs as chosen and says so: the returned line goes into the
/// record's deviations. A scenario that names its cpusets keeps them.
pub fn for_workers(
    p: Placement,
    workers: u32,
    available: &[u32],
    named: bool,
) -> (Placement, Option<String>) {
    let have = parse_cpu_list(&p.server_cpus).map(|v| v.len()).unwrap_or(1) as u32;
    if workers <= have {
        return (p, None);
    }
    let room = if p.shared { available.len() } else { available.len().saturating_sub(1) } as u32;
    if named || room < workers {
        let why = if named {
            "the scenario names the server's cpuset"
        } else {
            "this host has no more CPUs to give"
        };
        return (
            p.clone(),
            Some(format!("{workers} server workers on {have} CPU(s) ({}): {why}", p.server_cpus)),
        );
    }
    let server: Vec<u32> = available.iter().rev().take(workers as usize).rev().copied().collect();
    let driver = match p.shared {
        true => server.clone(),
        false => vec![*available.iter().rev().find(|c| !server.contains(c)).expect("room checked")],
    };
    let p = Placement { server_cpus: format_cpu_list(&server), driver_cpus: format_cpu_list(&driver), ..p };
    (p, None)
}

/// The physical core of each logical CPU (`topology/core_id` within its package); CPUs whose
/// topology cannot be read count as cores of their own.
pub fn core_of(cpu: u32) -> (u32, u32) {
    let read = |f: &str| {
        std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/{f}"))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
    };
    match (read("physical_package_id"), read("core_id")) {
        (Some(p), Some(c)) => (p, c),
        _ => (u32::MAX, cpu),
    }
}

/// The slots `--parallel` runs cells in: disjoint placements that never share a physical core,
/// as many as the host's cores allow for the scenario's mode (a split cell takes two cores, a
/// shared one a single core). A scenario with explicit cpusets gets one slot: its own.
pub fn slots(spec: &PlacementSpec, available: &[u32]) -> Vec<Placement> {
    slots_with(spec, available, core_of)
}

pub fn slots_with(
    spec: &PlacementSpec,
    available: &[u32],
    core: impl Fn(u32) -> (u32, u32),
) -> Vec<Placement> {
    if spec.server_cpus.is_some() || spec.driver_cpus.is_some() {
        return choose(spec, available).into_iter().collect();
    }
    // Logical CPUs grouped by core, highest CPUs first (as `choose` prefers them).
    let mut cores: Vec<((u32, u32), Vec<u32>)> = Vec::new();
    for &c in available.iter().rev() {
        let k = core(c);
        match cores.iter_mut().find(|(key, _)| *key == k) {
            Some((_, list)) => list.push(c),
            None => cores.push((k, vec![c])),
        }
    }
    let per_cell = match spec.mode {
        PlacementMode::Split => 2,
        PlacementMode::Shared => 1,
    };
    cores
        .chunks_exact(per_cell)
        .map(|group| {
            let server = {
                let mut v = group[0].1.clone();
                v.sort();
                v
            };
            let driver = match spec.mode {
                PlacementMode::Split => {
                    let mut v = group[1].1.clone();
                    v.sort();
                    v
                }
                PlacementMode::Shared => server.clone(),
            };
            Placement {
                server_cpus: format_cpu_list(&server[..1]),
                driver_cpus: format_cpu_list(&driver[..1]),
                shared: spec.mode == PlacementMode::Shared,
                memory_limit_bytes: spec.memory.0,
                parallel: None,
                services_cpus: None,
                services_share_driver: false,
                cpu_quota: spec.cpus,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {

    #[test]
    fn workers_get_a_cpu_each_where_the_host_has_them() {
        let split = choose(&PlacementSpec::default(), &[0, 1, 2, 3]).unwrap();
        let (p, note) = for_workers(split.clone(), 2, &[0, 1, 2, 3], false);
        assert_eq!((p.server_cpus.as_str(), p.driver_cpus.as_str(), note), ("2-3", "1", None));
        // Two CPUs, split: no room for a second server CPU; the record says so.
        let small = choose(&PlacementSpec::default(), &[0, 1]).unwrap();
        let (p, note) = for_workers(small.clone(), 2, &[0, 1], false);
        assert_eq!(p, small);
        assert_eq!(note.unwrap(), "2 server workers on 1 CPU(s) (1): this host has no more CPUs to give");
        let (p, _) = for_workers(small.clone(), 1, &[0, 1], false);
        assert_eq!(p, small);
        let shared = Placement { shared: true, driver_cpus: "1".into(), ..small.clone() };
        let (p, note) = for_workers(shared, 2, &[0, 1], false);
        assert_eq!((p.server_cpus.as_str(), p.driver_cpus.as_str(), note), ("0-1", "0-1", None));
        // That shared set gives the driver a thread per CPU; a one-CPU driver set keeps one.
        assert_eq!(driver_thread_cpus(&p), vec![0, 1]);
        assert_eq!(driver_thread_cpus(&small), Vec::<u32>::new());
        let wide = Placement { driver_cpus: "0,2-3".into(), ..small };
        assert_eq!(driver_thread_cpus(&wide), vec![0, 2, 3]);
    }

    use super::*;
    use crate::spec::Memory;

    fn spec(mode: PlacementMode, s: Option<&str>, d: Option<&str>) -> PlacementSpec {
        PlacementSpec {
            mode,
            server_cpus: s.map(String::from),
            driver_cpus: d.map(String::from),
            memory: Memory(1 << 30),
            cpus: None,
        }
    }

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(parse_cpu_list("0-3,6,8-9").unwrap(), vec![0, 1, 2, 3, 6, 8, 9]);
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("").is_err());
    }

    #[test]
    fn split_gives_disjoint_sets_on_two_cores() {
        let p = choose(&spec(PlacementMode::Split, None, None), &[0, 1]).unwrap();
        assert_eq!((p.server_cpus.as_str(), p.driver_cpus.as_str(), p.shared), ("1", "0", false));
        let p = choose(&spec(PlacementMode::Shared, None, None), &[0, 1]).unwrap();
        assert_eq!((p.server_cpus.as_str(), p.driver_cpus.as_str(), p.shared), ("1", "1", true));
    }

    #[test]
    fn refuses_what_the_host_cannot_do() {
        assert!(matches!(
            choose(&spec(PlacementMode::Split, None, None), &[0]),
            Err(PlacementError::NotEnoughCpus { .. })
        ));
        assert!(matches!(
            choose(&spec(PlacementMode::Split, Some("0"), Some("0")), &[0, 1]),
            Err(PlacementError::Overlap { .. })
        ));
        assert!(matches!(
            choose(&spec(PlacementMode::Split, Some("5"), None), &[0, 1]),
            Err(PlacementError::Unavailable { .. })
        ));
    }

    #[test]
    fn parallel_slots_never_share_a_core() {
        // 8 logical CPUs = 4 cores x 2 threads (siblings n and n+4).
        let core = |c: u32| (0, c % 4);
        let all: Vec<u32> = (0..8).collect();
        let split = slots_with(&spec(PlacementMode::Split, None, None), &all, core);
        assert_eq!(split.len(), 2);
        let mut used: Vec<(u32, u32)> = Vec::new();
        for p in &split {
            for set in [&p.server_cpus, &p.driver_cpus] {
                for c in parse_cpu_list(set).unwrap() {
                    assert!(!used.contains(&core(c)), "core of CPU {c} used twice: {split:?}");
                    used.push(core(c));
                }
            }
        }
        assert_eq!(slots_with(&spec(PlacementMode::Shared, None, None), &all, core).len(), 4);
        // Two CPUs: one split slot, two shared ones; explicit cpusets: exactly one.
        let two = [0, 1];
        let own = |c: u32| (0, c);
        assert_eq!(slots_with(&spec(PlacementMode::Split, None, None), &two, own).len(), 1);
        assert_eq!(slots_with(&spec(PlacementMode::Shared, None, None), &two, own).len(), 2);
        assert_eq!(slots_with(&spec(PlacementMode::Split, Some("1"), Some("0")), &two, own).len(), 1);
    }
}
