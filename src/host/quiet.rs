//! The quiet-host check: how loud the host was around one cell — CPU time of processes outside
//! the cell on the cell's CPUs, steal time, CPU frequency and governor, SMT siblings of the cell's
//! cores, memory pressure — sampled before the cell starts and over the cell, and the verdict
//! (`noisy`, with its reasons) against stated thresholds. It reads `/proc` and `/sys` under a
//! root path and runs nothing; which processes are the cell's the backend says ([`Own`]).
//!
//! Two windows: `before` (a short probe, [`BEFORE_WINDOW`], when nothing of the cell exists yet:
//! whatever kept the cell's CPUs busy, less this process's own time, is other load) and `during`
//! (a snapshot when the cell has started, one when its driver has ended: the CPU time of processes
//! outside the cell that may run on its CPUs). With `--require-quiet` the before probe repeats
//! about once a second until it is quiet or the allowed wait has passed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::placement::{format_cpu_list, parse_cpu_list};

/// How long the before probe samples. /proc counts CPU time in clock ticks (10 ms): over 500 ms
/// the other-load threshold (0.10 CPU) is 5 ticks, well above the ±2 ticks that rounding two
/// snapshots of two counters can make; over 200 ms it would be the rounding itself.
pub const BEFORE_WINDOW: Duration = Duration::from_millis(500);
/// The pause between two before probes while `--require-quiet` waits: one probe a second.
pub const WAIT_PAUSE: Duration = Duration::from_millis(500);
/// Other load on the cell's CPUs, in CPUs, above which a window is loud: a tenth of a CPU taken
/// from a one-CPU server is the size of the 2-25 % disagreements a loud host makes.
pub const MAX_OTHER_CPU: f64 = 0.10;
/// Steal (time the hypervisor gave a cell CPU to another guest), as a fraction of that CPU's
/// time: above 2 % the cell ran on a CPU it did not have for a measurable part of its time.
pub const MAX_STEAL: f64 = 0.02;
/// Busy fraction of an SMT sibling (a hardware thread sharing a core with a cell CPU, outside the
/// cell) above which the cell shared its cores' pipelines and caches with other work.
pub const MAX_SMT_SIBLING_BUSY: f64 = 0.10;
/// Memory pressure (PSI `some avg10`, percent of the time some task stalled on memory): above
/// 5 % the kernel was reclaiming hard enough to stall tasks, the cell's among them.
pub const MAX_MEMORY_PRESSURE: f64 = 5.0;
/// MemAvailable / MemTotal below which the host is short of memory; judged only where PSI is
/// absent (PSI measures the stalls themselves, a low MemAvailable only makes them likely).
pub const MIN_MEMORY_AVAILABLE: f64 = 0.05;
// Neither the governor nor the frequency range is a reason: a governor other than `performance`
// is the host's configuration, the same for every cell, not noise that comes and goes (flagging
// it would flag every cell of a laptop, and no wait would make it quiet); and two readings of
// `scaling_cur_freq` per window say too little to judge (an idle CPU clocks down before the cell
// starts). Both are recorded, so a comparison across hosts can see them.

/// The container engine's own processes (by `comm` prefix): during a cell they serve its
/// containers (their output, their start and stop), so their CPU is counted apart from other
/// processes' and judged against its own, higher threshold.
pub const ENGINE_PROCESSES: &[&str] = &["dockerd", "containerd", "runc", "docker-proxy"];
/// The engine's CPU during a cell above which it was doing more than serving one cell (another
/// tenant's containers, a build): a whole CPU. Serving a cell costs it about 0.1–0.7 CPU on this
/// host, the most over the shortest cells (a null server's half-second cold starts), where the
/// tail of starting the containers falls inside the window.
pub const MAX_ENGINE_CPU: f64 = 1.0;

/// How many of the other processes a window names.
const TOP_OFFENDERS: usize = 5;

/// The check of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quiet {
    /// True when some reading passed its threshold: the cell's figures are flagged, never
    /// silently averaged in.
    pub noisy: bool,
    /// One line per threshold passed, naming the window ("before the cell", "during the cell").
    pub reasons: Vec<String>,
    /// The CPUs checked: the cell's server and driver CPUs together, as a CPU list.
    pub cpus: String,
    /// The before probe (with `--require-quiet`, the last one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Window>,
    /// From when the cell had started to when its driver ended; absent when the cell did not
    /// get that far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub during: Option<Window>,
    /// The wait `--require-quiet` made; absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<Wait>,
}

/// What one window read. CPU loads are in CPUs (CPU-seconds per second of wall time), fractions
/// in 0..1, all rounded to 4 decimals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// Wall time between the two snapshots (from /proc/uptime), ms.
    pub wall_ms: u64,
    /// Each cell CPU's busy (user, nice, system, irq, softirq) and steal fractions, /proc/stat.
    pub per_cpu: Vec<CpuLoad>,
    /// CPU time of the cell's own processes (and this lab process) that may run on its CPUs,
    /// counted for processes still alive when the window closes: during a cell, mostly this
    /// process, as the driver and server have usually exited by then (their time is then their
    /// reaper's, which is not always own). Before the cell, it is what is subtracted.
    pub own_cpu: f64,
    /// Load of other work on the cell's CPUs. Before the cell: the CPUs' busy time less
    /// `own_cpu` (exact per CPU; it sees short-lived processes and the kernel too). During: the
    /// utime+stime of processes outside the cell whose `Cpus_allowed_list` meets the cell's CPUs
    /// (an upper bound for a process also allowed elsewhere; blind to the time of a process that
    /// ended before the window closed).
    pub other_cpu: f64,
    /// During the cell: the container engine's processes ([`ENGINE_PROCESSES`]), not counted in
    /// `other_cpu`. Absent before the cell (where they count as other load) and natively.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_cpu: Option<f64>,
    /// The other processes that used the most CPU, by `comm`, biggest first (at most 5).
    pub offenders: Vec<Offender>,
    /// The lowest and highest `scaling_cur_freq` of the cell's CPUs at the two snapshots, kHz;
    /// absent where cpufreq is not exposed (virtual machines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_min_khz: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_max_khz: Option<u64>,
    /// The `scaling_governor`s seen on the cell's CPUs; absent where not exposed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub governors: Option<Vec<String>>,
    /// Hardware threads sharing a core with a cell CPU that are not cell CPUs (a CPU list), and
    /// the highest busy fraction among them; absent when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smt_siblings: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smt_busy: Option<f64>,
    /// The highest PSI `some avg10` of /proc/pressure/memory at the two snapshots, percent;
    /// absent on kernels without PSI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_pressure: Option<f64>,
    /// The lowest MemAvailable / MemTotal at the two snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_available: Option<f64>,
}

/// One CPU over a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuLoad {
    pub cpu: u32,
    pub busy: f64,
    pub steal: f64,
}

/// Other processes of one `comm` over a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Offender {
    pub comm: String,
    /// Their CPU time, in CPUs.
    pub cpu: f64,
    /// How many processes of that name used CPU.
    pub processes: u32,
}

/// The wait of `--require-quiet`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wait {
    /// The longest wait allowed, s.
    pub limit_s: u64,
    /// From the first probe's start to the end of the last, ms.
    pub waited_ms: u64,
    /// Before probes taken.
    pub probes: u32,
    /// Whether the last probe was quiet; if not, the cell did not run (`noisy_host`).
    pub quiet: bool,
}

/// A predicate over a process's `/proc/<pid>/cgroup` text and pid.
type OwnTest = dyn Fn(&str, u32) -> bool + Send + Sync;

/// Which processes are the cell's: the backend's predicate over a process's
/// `/proc/<pid>/cgroup` text and pid. This lab process (its pid, so all its threads) is always
/// its own, and so is every descendant of an own process.
#[derive(Clone)]
pub struct Own {
    this: u32,
    test: Arc<OwnTest>,
}

impl std::fmt::Debug for Own {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Own {{ this: {}, .. }}", self.this)
    }
}

impl Own {
    /// Only this lab process (and its children): nothing of the cell exists.
    pub fn nothing() -> Own {
        Own::by(|_, _| false)
    }

    /// The processes the predicate (cgroup text, pid) accepts.
    pub fn by(test: impl Fn(&str, u32) -> bool + Send + Sync + 'static) -> Own {
        Own { this: std::process::id(), test: Arc::new(test) }
    }

    /// The processes whose cgroup paths contain one of `marks` (container ids; a cgroup path).
    pub fn cgroups_containing(marks: Vec<String>) -> Own {
        let marks: Vec<String> = marks.into_iter().filter(|m| !m.is_empty()).collect();
        Own::by(move |cgroup, _| marks.iter().any(|m| cgroup.contains(m.as_str())))
    }

    /// The same predicate with another process standing for this lab process (fixtures).
    pub fn with_this(mut self, pid: u32) -> Own {
        self.this = pid;
        self
    }
}

/// The cell's CPUs from its CPU lists (server, driver); a list that does not parse adds none.
pub fn cell_cpus(lists: &[&str]) -> Vec<u32> {
    let mut cpus: Vec<u32> = lists.iter().flat_map(|l| parse_cpu_list(l).unwrap_or_default()).collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// One CPU's counters (/proc/stat), in clock ticks.
#[derive(Debug, Clone, Copy, Default)]
struct CpuTicks {
    busy: u64,
    steal: u64,
    total: u64,
}

/// One process's /proc/<pid>/stat.
#[derive(Debug, Clone)]
struct ProcStat {
    comm: String,
    ppid: u32,
    /// utime + stime, clock ticks.
    ticks: u64,
    /// starttime: tells a reused pid from the process seen before.
    start: u64,
}

/// What the host said at one instant.
#[derive(Debug, Clone, Default)]
struct Snapshot {
    uptime_s: f64,
    cpus: BTreeMap<u32, CpuTicks>,
    procs: BTreeMap<u32, ProcStat>,
    freq_khz: Vec<u64>,
    governors: BTreeSet<String>,
    memory_pressure: Option<f64>,
    memory_available: Option<f64>,
}

fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel)).ok()
}

/// Reads everything a window needs at one instant; `cell` are the CPUs whose frequency is read.
fn take(root: &Path, cell: &[u32]) -> Snapshot {
    let mut s = Snapshot {
        uptime_s: read(root, "proc/uptime")
            .and_then(|t| t.split_whitespace().next().and_then(|v| v.parse().ok()))
            .unwrap_or(0.0),
        cpus: read(root, "proc/stat").map(|t| parse_stat_cpus(&t)).unwrap_or_default(),
        procs: read_procs(root),
        memory_pressure: read(root, "proc/pressure/memory").and_then(|t| parse_psi_some_avg10(&t)),
        memory_available: read(root, "proc/meminfo").and_then(|t| parse_available(&t)),
        ..Snapshot::default()
    };
    for cpu in cell {
        let dir = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
        if let Some(khz) = read(root, &format!("{dir}/scaling_cur_freq")).and_then(|t| t.trim().parse().ok())
        {
            s.freq_khz.push(khz);
        }
        if let Some(g) = read(root, &format!("{dir}/scaling_governor")) {
            s.governors.insert(g.trim().to_string());
        }
    }
    s
}

/// The `cpuN` lines of /proc/stat: user nice system idle iowait irq softirq steal (guest time
/// is already in user).
fn parse_stat_cpus(text: &str) -> BTreeMap<u32, CpuTicks> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let Some(cpu) = f.next().and_then(|n| n.strip_prefix("cpu")).and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let v: Vec<u64> = f.take(8).map(|x| x.parse().unwrap_or(0)).collect();
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        let busy = at(0) + at(1) + at(2) + at(5) + at(6);
        out.insert(cpu, CpuTicks { busy, steal: at(7), total: busy + at(3) + at(4) + at(7) });
    }
    out
}

/// `some avg10=…` of a PSI file.
fn parse_psi_some_avg10(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace().find_map(|f| f.strip_prefix("avg10=")).and_then(|v| v.parse().ok())
}

/// MemAvailable / MemTotal of /proc/meminfo.
fn parse_available(text: &str) -> Option<f64> {
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
    };
    let total = field("MemTotal:")?;
    (total > 0.0).then_some(field("MemAvailable:")? / total)
}

/// Every process's stat; a process that went away while we looked is skipped.
fn read_procs(root: &Path) -> BTreeMap<u32, ProcStat> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(root.join("proc")) else { return out };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if let Some(stat) =
            std::fs::read_to_string(entry.path().join("stat")).ok().and_then(|t| parse_proc_stat(&t))
        {
            out.insert(pid, stat);
        }
    }
    out
}

/// /proc/<pid>/stat: the name between the first '(' and the last ')' (it may hold either), then
/// state, ppid, …, utime (14), stime (15), …, starttime (22).
fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    let (open, close) = (text.find('(')?, text.rfind(')')?);
    let comm = text.get(open + 1..close)?.to_string();
    let f: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(ProcStat { comm, ppid: num(1)? as u32, ticks: num(11)? + num(12)?, start: num(19)? })
}

/// The hardware threads sharing a core with a cell CPU that are not cell CPUs.
fn smt_siblings(root: &Path, cell: &[u32]) -> Vec<u32> {
    let mut out = BTreeSet::new();
    for cpu in cell {
        let rel = format!("sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list");
        let siblings = read(root, &rel).and_then(|t| parse_cpu_list(&t).ok()).unwrap_or_default();
        out.extend(siblings.into_iter().filter(|s| !cell.contains(s)));
    }
    out.into_iter().collect()
}

/// A process that used CPU between two snapshots and may run on the cell's CPUs.
#[derive(Debug, Clone)]
struct Ran {
    comm: String,
    ticks: u64,
    own: bool,
}

/// The processes alive at `b` that used CPU since `a` (all of it, for a process born since) and
/// whose affinity meets `cell`, each own or not.
fn ran_between(root: &Path, a: &Snapshot, b: &Snapshot, cell: &[u32], own: &Own) -> Vec<Ran> {
    let mut memo: BTreeMap<u32, bool> = BTreeMap::new();
    let mut out = Vec::new();
    for (pid, now) in &b.procs {
        let then = a.procs.get(pid).filter(|p| p.start == now.start).map_or(0, |p| p.ticks);
        let ticks = now.ticks.saturating_sub(then);
        if ticks == 0 {
            continue;
        }
        let status = read(root, &format!("proc/{pid}/status")).unwrap_or_default();
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .and_then(|v| parse_cpu_list(v).ok())
            .unwrap_or_default();
        if !allowed.iter().any(|c| cell.contains(c)) {
            continue;
        }
        let own = is_own(root, b, *pid, own, &mut memo);
        out.push(Ran { comm: now.comm.clone(), ticks, own });
    }
    out
}

/// Whether `pid` is own: this lab process, accepted by the predicate, or a descendant of either.
fn is_own(root: &Path, s: &Snapshot, pid: u32, own: &Own, memo: &mut BTreeMap<u32, bool>) -> bool {
    // The chain up to an ancestor already decided (or the top), then decided top down.
    let mut chain = Vec::new();
    let mut p = pid;
    let mut inherited = false;
    while p != 0 && chain.len() < 256 {
        if let Some(known) = memo.get(&p) {
            inherited = *known;
            break;
        }
        chain.push(p);
        match s.procs.get(&p) {
            Some(stat) if stat.ppid != p => p = stat.ppid,
            _ => break,
        }
    }
    for p in chain.into_iter().rev() {
        if !inherited {
            let cgroup = read(root, &format!("proc/{p}/cgroup")).unwrap_or_default();
            inherited = p == own.this || (own.test)(&cgroup, p);
        }
        memo.insert(p, inherited);
    }
    memo.get(&pid).copied().unwrap_or(false)
}

/// Which window a pair of snapshots makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Before,
    During,
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// Clock ticks per second of /proc's CPU times.
fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// One CPU's busy and steal fractions between two snapshots.
fn cpu_load(a: &Snapshot, b: &Snapshot, cpu: u32) -> Option<CpuLoad> {
    let (x, y) = (a.cpus.get(&cpu)?, b.cpus.get(&cpu)?);
    let total = y.total.saturating_sub(x.total) as f64;
    let frac = |d: u64| if total > 0.0 { round4(d as f64 / total) } else { 0.0 };
    Some(CpuLoad {
        cpu,
        busy: frac(y.busy.saturating_sub(x.busy)),
        steal: frac(y.steal.saturating_sub(x.steal)),
    })
}

/// The window between two snapshots of the same root.
fn window(root: &Path, a: &Snapshot, b: &Snapshot, cell: &[u32], own: &Own, kind: Kind) -> Window {
    let wall = (b.uptime_s - a.uptime_s).max(0.0);
    let hz = clock_ticks();
    let cpus = |ticks: u64| if wall > 0.0 { ticks as f64 / hz / wall } else { 0.0 };
    let per_cpu: Vec<CpuLoad> = cell.iter().filter_map(|c| cpu_load(a, b, *c)).collect();
    let ran = ran_between(root, a, b, cell, own);
    let own_cpu = cpus(ran.iter().filter(|r| r.own).map(|r| r.ticks).sum());
    let engine = |r: &&Ran| kind == Kind::During && ENGINE_PROCESSES.iter().any(|p| r.comm.starts_with(p));
    let engine_ticks: u64 = ran.iter().filter(|r| !r.own).filter(engine).map(|r| r.ticks).sum();
    let other_cpu = match kind {
        Kind::Before => (per_cpu.iter().map(|c| c.busy).sum::<f64>() - own_cpu).max(0.0),
        Kind::During => cpus(ran.iter().filter(|r| !r.own).filter(|r| !engine(r)).map(|r| r.ticks).sum()),
    };
    let mut by_comm: BTreeMap<&str, (u64, u32)> = BTreeMap::new();
    for r in ran.iter().filter(|r| !r.own && !engine(r)) {
        let e = by_comm.entry(r.comm.as_str()).or_default();
        e.0 += r.ticks;
        e.1 += 1;
    }
    let mut offenders: Vec<Offender> = by_comm
        .into_iter()
        .map(|(comm, (ticks, n))| Offender { comm: comm.to_string(), cpu: round4(cpus(ticks)), processes: n })
        .collect();
    offenders.sort_by(|x, y| y.cpu.total_cmp(&x.cpu).then_with(|| x.comm.cmp(&y.comm)));
    offenders.truncate(TOP_OFFENDERS);
    let siblings = smt_siblings(root, cell);
    let smt_busy = siblings.iter().filter_map(|c| cpu_load(a, b, *c)).map(|l| l.busy).reduce(f64::max);
    let freqs = || a.freq_khz.iter().chain(&b.freq_khz).copied();
    let governors: BTreeSet<String> = a.governors.union(&b.governors).cloned().collect();
    let pick = |x: Option<f64>, y: Option<f64>, f: fn(f64, f64) -> f64| match (x, y) {
        (Some(x), Some(y)) => Some(round4(f(x, y))),
        (x, y) => x.or(y).map(round4),
    };
    Window {
        wall_ms: (wall * 1000.0).round() as u64,
        per_cpu,
        own_cpu: round4(own_cpu),
        other_cpu: round4(other_cpu),
        engine_cpu: (engine_ticks > 0).then(|| round4(cpus(engine_ticks))),
        offenders,
        freq_min_khz: freqs().min(),
        freq_max_khz: freqs().max(),
        governors: (!governors.is_empty()).then(|| governors.into_iter().collect()),
        smt_siblings: (!siblings.is_empty()).then(|| format_cpu_list(&siblings)),
        smt_busy,
        memory_pressure: pick(a.memory_pressure, b.memory_pressure, f64::max),
        memory_available: pick(a.memory_available, b.memory_available, f64::min),
    }
}

/// A blocking read off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.expect("the quiet check's readers do not panic")
}

/// A window under way: the snapshot at its start.
#[derive(Debug)]
pub struct During {
    root: PathBuf,
    cpus: Vec<u32>,
    own: Own,
    start: Snapshot,
}

impl During {
    /// Takes the snapshot that opens the window.
    pub async fn start(root: &Path, cpus: &[u32], own: Own) -> During {
        let (root, cpus) = (root.to_path_buf(), cpus.to_vec());
        let (r, c) = (root.clone(), cpus.clone());
        let start = blocking(move || take(&r, &c)).await;
        During { root, cpus, own, start }
    }

    /// Takes the snapshot that closes the window: what happened over the cell.
    pub async fn end(self) -> Window {
        self.close(Kind::During).await
    }

    async fn close(self, kind: Kind) -> Window {
        blocking(move || {
            let now = take(&self.root, &self.cpus);
            window(&self.root, &self.start, &now, &self.cpus, &self.own, kind)
        })
        .await
    }
}

/// One before probe: [`BEFORE_WINDOW`] of the cell's CPUs while nothing of the cell exists.
pub async fn probe(root: &Path, cpus: &[u32]) -> Window {
    let open = During::start(root, cpus, Own::nothing()).await;
    tokio::time::sleep(BEFORE_WINDOW).await;
    open.close(Kind::Before).await
}

/// The reasons one window is loud, each naming `when` ("before the cell").
fn window_reasons(w: &Window, cpus: &str, when: &str) -> Vec<String> {
    let mut out = Vec::new();
    if w.other_cpu > MAX_OTHER_CPU {
        let named: Vec<String> = w.offenders.iter().map(|o| format!("{} {:.2}", o.comm, o.cpu)).collect();
        let named = if named.is_empty() {
            "no process seen: short-lived ones or the kernel".to_string()
        } else {
            named.join(", ")
        };
        out.push(format!("other processes used {:.2} CPU of cpus {cpus} {when} ({named})", w.other_cpu));
    }
    if let Some(e) = w.engine_cpu.filter(|e| *e > MAX_ENGINE_CPU) {
        out.push(format!("the container engine used {e:.2} CPU {when}, more than serving one cell takes"));
    }
    for c in w.per_cpu.iter().filter(|c| c.steal > MAX_STEAL) {
        out.push(format!("the hypervisor stole {:.1} % of cpu {} {when}", c.steal * 100.0, c.cpu));
    }
    if let (Some(siblings), Some(busy)) = (&w.smt_siblings, w.smt_busy) {
        if busy > MAX_SMT_SIBLING_BUSY {
            out.push(format!(
                "SMT sibling cpus {siblings} of the cell's cores were up to {:.0} % busy {when}",
                busy * 100.0
            ));
        }
    }
    match (w.memory_pressure, w.memory_available) {
        (Some(p), _) if p > MAX_MEMORY_PRESSURE => {
            out.push(format!("memory pressure (PSI some avg10) reached {p:.1} % {when}"))
        }
        (None, Some(a)) if a < MIN_MEMORY_AVAILABLE => {
            out.push(format!("only {:.1} % of memory was available {when}", a * 100.0))
        }
        _ => {}
    }
    out
}

/// The verdict over both windows: noisy when a reading of either passed its threshold.
pub fn judge(cpus: &str, before: Option<&Window>, during: Option<&Window>) -> (bool, Vec<String>) {
    let mut reasons = Vec::new();
    for (w, when) in [(before, "before the cell"), (during, "during the cell")] {
        if let Some(w) = w {
            reasons.extend(window_reasons(w, cpus, when));
        }
    }
    (!reasons.is_empty(), reasons)
}

/// One cell's check as a backend runs it: [`QuietCheck::before`] (which may refuse the cell),
/// the during window (`cell_started`/`cell_ended`, or one a lower layer made: `set_during`),
/// then [`QuietCheck::finish`] for the record.
#[derive(Debug)]
pub struct QuietCheck {
    root: PathBuf,
    cpus: Vec<u32>,
    before: Option<Window>,
    wait: Option<Wait>,
    open: Option<During>,
    during: Option<Window>,
}

impl QuietCheck {
    /// A check of the CPUs of `cpu_lists` (the cell's server and driver lists) under `root`.
    pub fn new(root: &Path, cpu_lists: &[&str]) -> QuietCheck {
        QuietCheck {
            root: root.to_path_buf(),
            cpus: cell_cpus(cpu_lists),
            before: None,
            wait: None,
            open: None,
            during: None,
        }
    }

    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// The before probe. With `require_quiet_s`, probes again about once a second until one is
    /// quiet or that many seconds have passed; still loud then, the error is the failure's detail.
    pub async fn before(&mut self, require_quiet_s: Option<u64>) -> Result<(), String> {
        let started = Instant::now();
        let list = format_cpu_list(&self.cpus);
        let mut probes = 0;
        loop {
            let w = probe(&self.root, &self.cpus).await;
            probes += 1;
            let loud = window_reasons(&w, &list, "before the cell");
            self.before = Some(w);
            let Some(limit_s) = require_quiet_s else { return Ok(()) };
            let waited = started.elapsed();
            let gave_up = waited >= Duration::from_secs(limit_s);
            if loud.is_empty() || gave_up {
                let waited_ms = waited.as_millis() as u64;
                self.wait = Some(Wait { limit_s, waited_ms, probes, quiet: loud.is_empty() });
                if loud.is_empty() {
                    return Ok(());
                }
                let (waited_s, probe_ms) = (waited.as_secs_f64(), BEFORE_WINDOW.as_millis());
                return Err(format!(
                    "the host stayed loud for {waited_s:.1} s ({probes} probes of {probe_ms} ms; \
                     --require-quiet allows {limit_s} s): {}",
                    loud.join("; ")
                ));
            }
            tokio::time::sleep(WAIT_PAUSE).await;
        }
    }

    /// Opens the during window once the cell runs; `own` tells its processes.
    pub async fn cell_started(&mut self, own: Own) {
        self.open = Some(During::start(&self.root, &self.cpus, own).await);
    }

    /// Closes the during window (once; later calls, or a call without a start, do nothing).
    pub async fn cell_ended(&mut self) {
        if let Some(open) = self.open.take() {
            self.during = Some(open.end().await);
        }
    }

    /// A during window taken where the cell's processes are known (the native engine's cell).
    pub fn set_during(&mut self, during: Option<Window>) {
        self.during = during;
    }

    /// What the record keeps.
    pub fn finish(self) -> Quiet {
        let cpus = format_cpu_list(&self.cpus);
        let (noisy, reasons) = judge(&cpus, self.before.as_ref(), self.during.as_ref());
        Quiet { noisy, reasons, cpus, before: self.before, during: self.during, wait: self.wait }
    }
}

#[cfg(test)]
#[path = "quiet_tests.rs"]
mod tests;
