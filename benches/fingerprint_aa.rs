//! An A/A run of the host speed fingerprint: N fingerprints of this host in a row, each probe's
//! min/median/max over them, and every pair that `compare` calls different. One host must never
//! be called different from itself; the thresholds in `host::fingerprint::threshold` came from
//! 48 such fingerprints. A bench, not a test: on a shared host a burst of load now and then
//! moves any probe past any threshold, and a test must not fail for that.
//!
//! Run: `cargo bench --bench fingerprint_aa` (two CPUs). BENCH_FINGERPRINTS sets N (default 12).
//! Exit status 1 when some pair was called different, so a calibration script can act on it.

use std::time::Instant;

use benchlab::host::fingerprint::{
    compare, comparison_line, measure, median_interval, spread_pct, summary, three_digits, Fingerprint,
    CPU_LOOP, MEMORY_BANDWIDTH, PIPE_PINGPONG, SPAWN,
};

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this binary without it (a
    // debug build, beside other tests): an A/A timing run means nothing there.
    if !std::env::args().any(|a| a == "--bench") {
        println!("benches/fingerprint_aa: a benchmark; run it with `cargo bench --bench fingerprint_aa`");
        return;
    }
    let n: usize = std::env::var("BENCH_FINGERPRINTS").ok().and_then(|v| v.parse().ok()).unwrap_or(12).max(2);
    let cpus = benchlab::placement::available_cpus();
    let (a, b) = (*cpus.last().expect("a CPU"), cpus[0]);
    let started = Instant::now();
    let fs: Vec<Fingerprint> = (0..n).map(|_| measure(a, b)).collect();
    println!("{} fingerprints on cpus {a},{b} in {:.1} s", fs.len(), started.elapsed().as_secs_f64());
    for f in &fs {
        println!("  {}", summary(f));
    }
    for name in [CPU_LOOP, MEMORY_BANDWIDTH, PIPE_PINGPONG, SPAWN] {
        let mut v: Vec<f64> = fs.iter().filter_map(|f| f.probe(name)).map(|p| p.value).collect();
        v.sort_unstable_by(f64::total_cmp);
        let (min, max) = (v[0], v[v.len() - 1]);
        let half: Vec<f64> = fs.iter().filter_map(|f| f.probe(name)).map(spread_pct).collect();
        println!(
            "{name}: min {} median {} max {} (max/min {:.2}); interval half-width median {:.1} %",
            three_digits(min),
            three_digits(median_interval(&v).0),
            three_digits(max),
            max / min,
            median_interval(&half).0
        );
    }
    let mut flagged = Vec::new();
    for (i, x) in fs.iter().enumerate() {
        for y in &fs[i + 1..] {
            let c = compare(x, y);
            if c.differs {
                flagged.push(comparison_line(&c));
            }
        }
    }
    let pairs = fs.len() * (fs.len() - 1) / 2;
    println!("pairs called different: {} of {pairs}", flagged.len());
    for line in &flagged {
        println!("  {line}");
    }
    if !flagged.is_empty() {
        std::process::exit(1);
    }
}
