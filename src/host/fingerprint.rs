//! The host speed fingerprint: a short, fixed calibration (CPU-bound loop, memory bandwidth,
//! pipe ping-pong between two CPUs, process spawn), each probe repeated with its median and 95 %
//! interval, and the comparison of two fingerprints (same speed within noise, or which probes
//! differ and by how much). It measures and judges; where a fingerprint is stored (a record's
//! `host_check`, a Slurm node's cache file) is its callers' business.
//!
//! **What is measured** ([`measure`], about 1 s, blocking): [`REPETITIONS`] rounds, after one
//! unrecorded warm-up round, each round running the four probes once, in turn, so a burst of
//! noise lands in one sample of every probe rather than in every sample of one:
//!
//! - `cpu_loop` (ns per iteration): a serial xorshift loop of [`CPU_LOOP_ITERATIONS`]
//!   iterations on `cpu_a` — the core's integer speed and clock.
//! - `memory_bandwidth` (GB/s, bytes copied per second): a copy of [`MEMORY_BYTES`] between
//!   two buffers larger than the last-level cache, on `cpu_a`.
//! - `pipe_pingpong` (µs per round trip): [`PIPE_ROUND_TRIPS`] one-byte round trips over a
//!   pair of pipes between a thread on `cpu_a` and one on `cpu_b` (both on one CPU when they
//!   are equal) — wake-ups, scheduler and cross-CPU latency.
//! - `spawn` (ms per process): [`SPAWNS`] fork+exec+wait of `/bin/true` from `cpu_a`.
//!
//! The CPU loop, the copy and the spawns are timed by CPU time (the measuring thread's, and
//! for spawns the children's), not the wall clock: a round in which another process took the
//! CPU for a while would otherwise measure that process — the quiet check's business — and
//! did: on a loaded host the wall-clock CPU loop read 2.2× slower, now within 4 %. The pipe
//! ping-pong waits by design and is timed by the wall clock.
//!
//! Each probe's `value` is the median of its rounds and `lower`/`upper` the distribution-free
//! order-statistic interval of the median (the ranks whose binomial coverage is at least 95 %:
//! x(4)..x(12) of 15 rounds, 96.5 %). A bootstrap interval is too narrow with 15 samples.
//! The figures are those of an optimised build (the lab's release binary): a debug build's CPU
//! loop is several times slower.
//!
//! **How two fingerprints compare** ([`compare`]): per probe, the ratio of b's speed to a's
//! (>1: b is faster; times are inverted). A probe differs beyond noise when its two intervals
//! are disjoint *and* the ratio is beyond the probe's threshold ([`threshold`]), both ways:
//! 15 % for the CPU loop, 75 % for spawn, 150 % (2.5×) for memory bandwidth. `differs` is true
//! when any counted probe differs beyond noise. The pipe ping-pong is reported but never
//! counted. The intervals alone would not do: they hold one fingerprint's rounds, and the
//! drift between fingerprints of one host is larger than that for every probe but the loop.
//!
//! The thresholds come from 48 fingerprints of the lab's 2-vCPU VM (AMD EPYC, shared, with
//! other builds running through most of them; spawn from the last 24), max/min of the medians:
//! CPU loop 1.06 (1.65–1.75 ns/iter), spawn 1.41 (0.65–0.92 ms), memory bandwidth 2.16
//! (5.7–12.4 GB/s: the VM's memory drifts with its neighbours), pipe round trip 4.8
//! (31–148 µs: wake-ups on a VM), so the pipe cannot tell hosts apart and memory only grossly.
//! Preemption (and steal, where the kernel accounts it) stays out of the CPU-timed probes: the
//! quiet check reports those.
//! `cargo bench --bench fingerprint_aa` prints these figures for another host (an A/A run:
//! fingerprints of one host in a row and the pairs `compare` calls different). It is a bench,
//! not a test: on a shared host a burst of load fails any threshold now and then.

use std::io::{PipeReader, PipeWriter, Read, Write};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// The probes' names, as stored. A string rather than an enum in the stored type: [`compare`]
/// matches probes by name and skips one that only one side has, so fingerprints of lab
/// versions with different probe sets still compare.
pub const CPU_LOOP: &str = "cpu_loop";
pub const MEMORY_BANDWIDTH: &str = "memory_bandwidth";
pub const PIPE_PINGPONG: &str = "pipe_pingpong";
pub const SPAWN: &str = "spawn";

/// Rounds of every probe (after one unrecorded warm-up round).
pub const REPETITIONS: u32 = 15;
/// Iterations of the CPU loop per round (about 3 ms optimised).
pub const CPU_LOOP_ITERATIONS: u64 = 2_000_000;
/// Bytes copied per round of the memory probe, and the size of each of its two buffers: past
/// the last-level cache a core sees on today's servers.
pub const MEMORY_BYTES: usize = 64 << 20;
/// Round trips per round of the pipe ping-pong.
pub const PIPE_ROUND_TRIPS: u32 = 400;
/// Processes spawned per round of the spawn probe.
pub const SPAWNS: u32 = 4;
/// The program the spawn probe runs.
const TRUE_PROGRAM: &str = "/bin/true";

/// One probe's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    /// `cpu_loop`, `memory_bandwidth`, `pipe_pingpong`, `spawn`.
    pub name: String,
    /// The unit of `value`: `ns/iter`, `GB/s`, `us` (per round trip), `ms` (per process).
    pub unit: String,
    /// Whether a higher value means a faster host (bandwidth) or a slower one (times).
    pub higher_is_faster: bool,
    /// Median of the repetitions.
    pub value: f64,
    /// The 95 % interval of the median: order statistics of the repetitions (see the module).
    pub lower: f64,
    pub upper: f64,
    pub repetitions: u32,
}

/// A host's speed, measured on `cpus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fingerprint {
    /// When the measuring started: UTC, RFC 3339.
    pub measured_at: String,
    /// The CPUs measured, `<a>,<b>`: the single-CPU probes ran on `a`, the ping-pong between
    /// `a` and `b`. `unpinned` when a thread could not be pinned (a CPU outside the process's
    /// affinity): the figures then come from wherever the scheduler put the threads.
    pub cpus: String,
    pub probes: Vec<Probe>,
}

impl Fingerprint {
    /// The probe of that name.
    pub fn probe(&self, name: &str) -> Option<&Probe> {
        self.probes.iter().find(|p| p.name == name)
    }
}

/// One probe of two fingerprints side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeComparison {
    pub name: String,
    /// b's speed over a's: >1 when b is faster (for times, a's value over b's).
    pub ratio: f64,
    /// The two intervals are disjoint and the ratio is beyond the probe's threshold.
    pub beyond_noise: bool,
    /// Whether the probe counts towards [`Comparison::differs`] (the pipe ping-pong does not).
    pub counted: bool,
}

/// Two fingerprints compared, probe by probe (the probes both have, in a's order).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub probes: Vec<ProbeComparison>,
    /// Some counted probe differs beyond noise: the hosts' speeds differ.
    pub differs: bool,
}

/// How far a probe's speed ratio must be from 1 (both ways: `1 + t` or `1 / (1 + t)`) to count
/// as a different speed; `None` for a probe too noisy to count (the pipe ping-pong) or unknown.
pub fn threshold(name: &str) -> Option<f64> {
    match name {
        CPU_LOOP => Some(0.15),
        MEMORY_BANDWIDTH => Some(1.5),
        SPAWN => Some(0.75),
        _ => None,
    }
}

/// Compares two fingerprints: see the module for the rule.
pub fn compare(a: &Fingerprint, b: &Fingerprint) -> Comparison {
    let probes: Vec<ProbeComparison> =
        a.probes.iter().filter_map(|pa| b.probe(&pa.name).map(|pb| compare_probe(pa, pb))).collect();
    let differs = probes.iter().any(|p| p.counted && p.beyond_noise);
    Comparison { probes, differs }
}

fn compare_probe(a: &Probe, b: &Probe) -> ProbeComparison {
    let ratio = if a.higher_is_faster { b.value / a.value } else { a.value / b.value };
    let disjoint = a.upper < b.lower || b.upper < a.lower;
    let t = threshold(&a.name);
    let beyond = |t: f64| ratio > 1.0 + t || ratio < 1.0 / (1.0 + t);
    ProbeComparison {
        name: a.name.clone(),
        ratio,
        beyond_noise: ratio.is_finite() && disjoint && beyond(t.unwrap_or(0.0)),
        counted: t.is_some() && a.higher_is_faster == b.higher_is_faster,
    }
}

/// How a probe reads for people.
fn label(name: &str) -> &str {
    match name {
        CPU_LOOP => "cpu loop",
        MEMORY_BANDWIDTH => "memory bandwidth",
        PIPE_PINGPONG => "pipe round trip",
        SPAWN => "spawn",
        other => other,
    }
}

/// A unit for people (`us` is stored in ASCII).
fn shown_unit(unit: &str) -> &str {
    if unit == "us" {
        "µs"
    } else {
        unit
    }
}

pub use crate::text::three_digits;

/// The half-width of a probe's interval as a percentage of its value (the wider side).
pub fn spread_pct(p: &Probe) -> f64 {
    (p.upper - p.value).max(p.value - p.lower) / p.value.abs() * 100.0
}

/// A probe's value, unit and spread: `1.23 ns/iter ±1 %`.
pub fn probe_text(p: &Probe) -> String {
    let pct = spread_pct(p);
    let pct = if pct < 10.0 { format!("{pct:.1}") } else { format!("{pct:.0}") };
    format!("{} {} ±{pct} %", three_digits(p.value), shown_unit(&p.unit))
}

/// One line for people: `cpu loop 1.23 ns/iter ±1.0 %, memory bandwidth 9.8 GB/s ±2.1 %, pipe
/// round trip 52 µs ±8.0 % (cpus 1,0), spawn 0.91 ms ±3.0 %`.
pub fn summary(f: &Fingerprint) -> String {
    let parts: Vec<String> = f
        .probes
        .iter()
        .map(|p| {
            let cpus = if p.name == PIPE_PINGPONG { format!(" (cpus {})", f.cpus) } else { String::new() };
            format!("{} {}{cpus}", label(&p.name), probe_text(p))
        })
        .collect();
    if parts.is_empty() {
        "no probe measured".into()
    } else {
        parts.join(", ")
    }
}

/// One line for people: `same speed within noise` or `differs: memory bandwidth 0.41×, cpu loop
/// 0.38×`; a probe beyond noise that is not counted is named in parentheses.
pub fn comparison_line(c: &Comparison) -> String {
    if c.probes.is_empty() {
        return "not comparable: no probe in common".into();
    }
    let named = |counted: bool| -> Vec<String> {
        c.probes
            .iter()
            .filter(|p| p.beyond_noise && p.counted == counted)
            .map(|p| format!("{} {}×", label(&p.name), ratio_text(p.ratio)))
            .collect()
    };
    let (counted, other) = (named(true), named(false));
    let mut line =
        if c.differs { format!("differs: {}", counted.join(", ")) } else { "same speed within noise".into() };
    if !other.is_empty() {
        line.push_str(&format!(" (not counted: {})", other.join(", ")));
    }
    line
}

fn ratio_text(r: f64) -> String {
    if (0.1..10.0).contains(&r) {
        format!("{r:.2}")
    } else {
        three_digits(r)
    }
}

// ---------------------------------------------------------------------------------------------
// Measuring.

/// Measures this host's fingerprint on `cpu_a` (the single-CPU probes, one end of the
/// ping-pong) and `cpu_b` (the other end): about 1 s, blocking. The calling thread is not
/// pinned; the probes run on threads of their own. Pass CPUs of the process's affinity mask
/// (`crate::placement::available_cpus`); otherwise `cpus` says `unpinned`.
pub fn measure(cpu_a: u32, cpu_b: u32) -> Fingerprint {
    let measured_at = crate::text::now_rfc3339();
    let pipes = std::io::pipe().and_then(|there| Ok((there, std::io::pipe()?)));
    let (samples, pinned) = std::thread::scope(|s| match pipes {
        Ok(((there_r, there_w), (back_r, back_w))) => {
            let echo = s.spawn(move || {
                let pinned = pin(cpu_b);
                echo(there_r, back_w);
                pinned
            });
            let probes = s.spawn(move || {
                let pinned = pin(cpu_a);
                (rounds(Some((there_w, back_r))), pinned)
            });
            let (samples, pinned_a) = probes.join().expect("the probe thread does not panic");
            (samples, pinned_a && echo.join().unwrap_or(false))
        }
        Err(_) => s
            .spawn(move || {
                let pinned = pin(cpu_a);
                (rounds(None), pinned)
            })
            .join()
            .expect("the probe thread does not panic"),
    });
    let cpus = if pinned { format!("{cpu_a},{cpu_b}") } else { "unpinned".into() };
    Fingerprint { measured_at, cpus, probes: samples.probes() }
}

/// Pins the calling thread to one CPU; false when it cannot be.
fn pin(cpu: u32) -> bool {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu as usize).is_ok()
        && nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).is_ok()
}

/// The far end of the ping-pong: every byte read is written back, until the near end closes.
fn echo(mut from: PipeReader, mut to: PipeWriter) {
    let mut byte = [0u8; 1];
    while from.read_exact(&mut byte).is_ok() && to.write_all(&byte).is_ok() {}
}

/// Every probe's samples; a probe that failed (no pipe, no `/bin/true`) has none.
#[derive(Debug, Default)]
struct Samples {
    cpu_loop: Vec<f64>,
    memory: Vec<f64>,
    pipe: Vec<f64>,
    spawn: Vec<f64>,
}

impl Samples {
    fn probes(self) -> Vec<Probe> {
        [
            (CPU_LOOP, "ns/iter", false, self.cpu_loop),
            (MEMORY_BANDWIDTH, "GB/s", true, self.memory),
            (PIPE_PINGPONG, "us", false, self.pipe),
            (SPAWN, "ms", false, self.spawn),
        ]
        .into_iter()
        .filter(|(_, _, _, s)| !s.is_empty())
        .map(|(name, unit, higher_is_faster, s)| {
            let (value, lower, upper) = median_interval(&s);
            Probe {
                name: name.into(),
                unit: unit.into(),
                higher_is_faster,
                value,
                lower,
                upper,
                repetitions: s.len() as u32,
            }
        })
        .collect()
    }
}

/// The warm-up round and [`REPETITIONS`] recorded ones, each probe once per round; `ping` is
/// the near end of the ping-pong's pipes (to the echo thread, and back).
fn rounds(mut ping: Option<(PipeWriter, PipeReader)>) -> Samples {
    let mut out = Samples::default();
    let src = vec![0x5au8; MEMORY_BYTES];
    let mut dst = vec![0xa5u8; MEMORY_BYTES];
    let mut spawn_ok = true;
    for round in 0..=REPETITIONS {
        let keep = round > 0;
        let cpu = cpu_loop_ns();
        let mem = copy_gbps(&src, &mut dst);
        let pipe = ping.as_mut().and_then(|(w, r)| round_trip_us(w, r));
        if pipe.is_none() {
            // A broken pipe ends the probe; dropping the ends lets the echo thread finish.
            ping = None;
        }
        let spawn = if spawn_ok { spawn_ms() } else { None };
        spawn_ok = spawn.is_some();
        if keep {
            out.cpu_loop.push(cpu);
            out.memory.push(mem);
            out.pipe.extend(pipe);
            out.spawn.extend(spawn);
        }
    }
    // A probe that failed midway is dropped whole: a partial set would hide the failure.
    let full = REPETITIONS as usize;
    for s in [&mut out.pipe, &mut out.spawn] {
        if s.len() < full {
            s.clear();
        }
    }
    out
}

/// One round of the CPU loop, ns of the thread's CPU time per iteration.
fn cpu_loop_ns() -> f64 {
    let t = thread_cpu_ns();
    std::hint::black_box(xorshift_loop(std::hint::black_box(CPU_LOOP_ITERATIONS)));
    (thread_cpu_ns() - t).max(1) as f64 / CPU_LOOP_ITERATIONS as f64
}

/// The calling thread's CPU time, ns: it stops while the thread waits for its CPU, so another
/// process on that CPU (what the quiet check reports) slows no CPU-bound probe.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call, and
    // CLOCK_THREAD_CPUTIME_ID is supported by every Linux the lab runs on.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    debug_assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A serial chain of xorshift steps (Marsaglia 2003) with a multiply-add beside it: integer
/// work no compiler can vectorise or skip, whose time is the core's speed.
#[inline(never)]
fn xorshift_loop(iterations: u64) -> u64 {
    let (mut x, mut acc) = (0x9E37_79B9_7F4A_7C15u64, 0u64);
    for _ in 0..iterations {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc = acc.wrapping_mul(0x2545_F491_4F6C_DD1D).wrapping_add(x);
    }
    acc
}

/// One copy of `src` into `dst`, GB/s (10^9 bytes copied per second of the thread's CPU time).
fn copy_gbps(src: &[u8], dst: &mut [u8]) -> f64 {
    let t = thread_cpu_ns();
    dst.copy_from_slice(std::hint::black_box(src));
    std::hint::black_box(&dst);
    src.len() as f64 / (thread_cpu_ns() - t).max(1) as f64
}

/// [`PIPE_ROUND_TRIPS`] one-byte round trips, µs each; `None` when the pipe broke.
fn round_trip_us(to: &mut PipeWriter, back: &mut PipeReader) -> Option<f64> {
    let mut byte = [1u8; 1];
    let t = Instant::now();
    for _ in 0..PIPE_ROUND_TRIPS {
        to.write_all(&byte).ok()?;
        back.read_exact(&mut byte).ok()?;
    }
    Some(t.elapsed().as_secs_f64() * 1e6 / f64::from(PIPE_ROUND_TRIPS))
}

/// [`SPAWNS`] runs of `/bin/true`, ms of CPU time each (this thread's, spawning and reaping,
/// and the children's); `None` when one could not be run.
fn spawn_ms() -> Option<f64> {
    use std::process::{Command, Stdio};
    let (own, children) = (thread_cpu_ns(), children_cpu_ns());
    for _ in 0..SPAWNS {
        let status = Command::new(TRUE_PROGRAM)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        if !status.success() {
            return None;
        }
    }
    let ns = (thread_cpu_ns() - own) + (children_cpu_ns() - children);
    Some(ns.max(1) as f64 / 1e6 / f64::from(SPAWNS))
}

/// The CPU time (user and system) of this process's children that have been waited for, ns.
fn children_cpu_ns() -> u64 {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for the duration of the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    debug_assert_eq!(rc, 0, "getrusage(RUSAGE_CHILDREN)");
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(usage.ru_utime) + us(usage.ru_stime)) * 1_000
}

/// The median of samples and its distribution-free 95 % interval: order statistics x(k) and
/// x(n+1-k) with the largest k whose coverage, 1 − 2·P(Bin(n, ½) < k), is at least 95 %
/// (the whole range when even that falls short, below 6 samples).
pub fn median_interval(samples: &[f64]) -> (f64, f64, f64) {
    let mut s = samples.to_vec();
    s.sort_unstable_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let median = if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 };
    // P(Bin(n, ½) ≤ i), accumulated term by term.
    let mut term = 0.5f64.powi(n as i32);
    let mut below = 0.0;
    let mut k = 1;
    for i in 0..n / 2 {
        below += term;
        term *= (n - i) as f64 / (i + 1) as f64;
        if 2.0 * below <= 0.05 {
            k = i + 1;
        } else {
            break;
        }
    }
    (median, s[k - 1], s[n - k])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(name: &str, higher_is_faster: bool, value: f64, lower: f64, upper: f64) -> Probe {
        let unit = match name {
            CPU_LOOP => "ns/iter",
            MEMORY_BANDWIDTH => "GB/s",
            PIPE_PINGPONG => "us",
            _ => "ms",
        };
        Probe { name: name.into(), unit: unit.into(), higher_is_faster, value, lower, upper, repetitions: 15 }
    }

    /// A fingerprint whose probes are `speed` times as fast as a reference host's, each interval
    /// ±`spread` (a fraction) around its value.
    fn host(speed: f64, spread: f64) -> Fingerprint {
        let time = |name, v: f64| {
            probe(name, false, v / speed, v / speed * (1.0 - spread), v / speed * (1.0 + spread))
        };
        let bw = 10.0 * speed;
        Fingerprint {
            measured_at: "2026-01-01T00:00:00Z".into(),
            cpus: "1,0".into(),
            probes: vec![
                time(CPU_LOOP, 1.5),
                probe(MEMORY_BANDWIDTH, true, bw, bw * (1.0 - spread), bw * (1.0 + spread)),
                time(PIPE_PINGPONG, 20.0),
                time(SPAWN, 0.9),
            ],
        }
    }

    #[test]
    fn a_host_is_the_same_speed_as_itself() {
        let c = compare(&host(1.0, 0.02), &host(1.0, 0.02));
        assert!(!c.differs);
        assert_eq!(c.probes.len(), 4);
        assert!(c.probes.iter().all(|p| p.ratio == 1.0 && !p.beyond_noise));
        assert_eq!(comparison_line(&c), "same speed within noise");
        // Within the threshold, even with disjoint intervals: 5 % is noise between quiet runs.
        assert!(!compare(&host(1.0, 0.01), &host(1.05, 0.01)).differs);
    }

    #[test]
    fn a_faster_or_slower_host_differs_with_its_ratio() {
        let c = compare(&host(1.0, 0.02), &host(3.0, 0.02));
        assert!(c.differs);
        assert!(c.probes.iter().all(|p| (p.ratio - 3.0).abs() < 1e-9 && p.beyond_noise));
        assert_eq!(
            comparison_line(&c),
            "differs: cpu loop 3.00×, memory bandwidth 3.00×, spawn 3.00× (not counted: pipe round trip 3.00×)"
        );
        let c = compare(&host(1.0, 0.02), &host(0.38, 0.02));
        assert!(c.differs);
        assert!((c.probes[0].ratio - 0.38).abs() < 1e-9, "times are inverted: b slower is < 1");
        assert!(comparison_line(&c).starts_with("differs: cpu loop 0.38×, memory bandwidth 0.38×"));
    }

    #[test]
    fn each_probe_has_its_own_threshold() {
        // 1.2× apart with tight intervals: the CPU loop differs (beyond 15 %), spawn and memory
        // do not (75 %, 2.5×): between quiet runs of one VM they moved 1.4× and 2.2×.
        let c = compare(&host(1.0, 0.01), &host(1.2, 0.01));
        let beyond: Vec<&str> = c.probes.iter().filter(|p| p.beyond_noise).map(|p| p.name.as_str()).collect();
        assert_eq!(beyond, [CPU_LOOP, PIPE_PINGPONG]);
        assert_eq!(comparison_line(&c), "differs: cpu loop 1.20× (not counted: pipe round trip 1.20×)");
        let c = compare(&host(1.0, 0.01), &host(2.0, 0.01));
        let beyond: Vec<&str> =
            c.probes.iter().filter(|p| p.beyond_noise && p.counted).map(|p| p.name.as_str()).collect();
        assert_eq!(beyond, [CPU_LOOP, SPAWN]);
    }

    #[test]
    fn a_noisy_probe_does_not_differ() {
        // 30 % apart, but each interval ±25 %: they overlap, so it is noise.
        assert!(!compare(&host(1.0, 0.25), &host(1.3, 0.25)).differs);
        // Only the pipe ping-pong moved, by 3×: reported, not counted.
        let a = host(1.0, 0.02);
        let mut b = a.clone();
        let pipe = b.probes.iter_mut().find(|p| p.name == PIPE_PINGPONG).unwrap();
        (pipe.value, pipe.lower, pipe.upper) = (60.0, 58.0, 62.0);
        let c = compare(&a, &b);
        assert!(!c.differs);
        let p = c.probes.iter().find(|p| p.name == PIPE_PINGPONG).unwrap();
        assert!(p.beyond_noise && !p.counted);
        assert_eq!(comparison_line(&c), "same speed within noise (not counted: pipe round trip 0.33×)");
    }

    #[test]
    fn only_probes_both_have_are_compared() {
        let a = host(1.0, 0.02);
        let mut b = host(2.0, 0.02);
        b.probes.retain(|p| p.name == SPAWN);
        let c = compare(&a, &b);
        assert_eq!(c.probes.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), [SPAWN]);
        assert!(c.differs);
        b.probes.clear();
        assert_eq!(comparison_line(&compare(&a, &b)), "not comparable: no probe in common");
    }

    #[test]
    fn the_summary_is_one_line() {
        let f = host(1.0, 0.02);
        assert_eq!(
            summary(&f),
            "cpu loop 1.50 ns/iter ±2.0 %, memory bandwidth 10.0 GB/s ±2.0 %, pipe round trip 20.0 µs ±2.0 % \
             (cpus 1,0), spawn 0.900 ms ±2.0 %"
        );
        assert_eq!(summary(&Fingerprint { probes: vec![], ..f }), "no probe measured");
    }

    #[test]
    fn the_median_interval_is_of_order_statistics() {
        let s: Vec<f64> = (1..=15).rev().map(f64::from).collect();
        assert_eq!(median_interval(&s), (8.0, 4.0, 12.0));
        let s: Vec<f64> = (1..=9).map(f64::from).collect();
        assert_eq!(median_interval(&s), (5.0, 2.0, 8.0));
        assert_eq!(median_interval(&[3.0, 1.0, 2.0, 4.0]), (2.5, 1.0, 4.0));
        assert!(median_interval(&[]).0.is_nan());
    }

    #[test]
    fn a_fingerprint_round_trips_and_refuses_unknown_fields() {
        let f = host(1.0, 0.02);
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(serde_json::from_value::<Fingerprint>(json.clone()).unwrap(), f);
        let mut extra = json;
        extra["probes"][0]["noise"] = 1.into();
        assert!(serde_json::from_value::<Fingerprint>(extra).is_err());
    }

    #[test]
    fn a_fingerprint_matches_the_record_schema() {
        let schema: serde_json::Value = serde_json::from_str(crate::record::SCHEMA).unwrap();
        let fp_schema = serde_json::json!({"$defs": schema["$defs"], "$ref": "#/$defs/fingerprint"});
        let validator = jsonschema::validator_for(&fp_schema).unwrap();
        let f = host(1.0, 0.02);
        let json = serde_json::to_value(&f).unwrap();
        let errors: Vec<String> = validator.iter_errors(&json).map(|e| e.to_string()).collect();
        assert_eq!(errors, Vec::<String>::new(), "{json}");
        let mut extra = json;
        extra["probes"][1]["noise"] = 1.into();
        assert!(validator.iter_errors(&extra).next().is_some());
    }

    #[test]
    fn measuring_gives_four_probes_with_their_intervals() {
        let cpus = crate::placement::available_cpus();
        let (a, b) = (*cpus.last().unwrap(), cpus[0]);
        let f = measure(a, b);
        assert_eq!(f.cpus, format!("{a},{b}"));
        assert_eq!(f.measured_at.len(), 20, "{}", f.measured_at);
        let names: Vec<&str> = f.probes.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, [CPU_LOOP, MEMORY_BANDWIDTH, PIPE_PINGPONG, SPAWN]);
        for p in &f.probes {
            assert!(p.value.is_finite() && p.value > 0.0, "{p:?}");
            assert!(p.lower <= p.value && p.value <= p.upper, "{p:?}");
            assert_eq!(p.repetitions, REPETITIONS);
        }
        assert!(!compare(&f, &f).differs);
    }
}
