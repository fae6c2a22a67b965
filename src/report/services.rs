//! The backing services of each cell that had them, beside its server: one line per cell with
//! the server's CPU (cores over the load's window) and cgroup memory peak, then each service's
//! version, seed, CPU and memory over the driver's window, and where the services ran. Pure.

use crate::record::Record;

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}

/// One line per record with services: `Services first/concurrency: server 0.92 CPU, peak 14.0 MiB;
/// redis 5:7.0.15-1~deb12u10: 0.21 CPU, peak 9.8 MiB; ... (seed 7, data 3a1b2c3d4e5f; CPU 0, the driver's)`.
pub(super) fn service_lines(records: &[Record]) -> Vec<String> {
    records.iter().filter(|r| !r.metrics.services.is_empty()).map(line).collect()
}

fn line(r: &Record) -> String {
    let load = r.metrics.load.as_ref();
    let mut parts = Vec::new();
    let server_cpu = load.and_then(|l| l.server_cpu_cores).map(|c| format!("{c:.2} CPU"));
    let server_peak = r
        .metrics
        .memory
        .under_load
        .as_ref()
        .and_then(|m| m.cgroup_peak_bytes)
        .map(|b| format!("peak {}", mib(b)));
    let server: Vec<String> = [server_cpu, server_peak].into_iter().flatten().collect();
    if !server.is_empty() {
        parts.push(format!("server {}", server.join(", ")));
    }
    for s in &r.metrics.services {
        let version = r
            .environment
            .services
            .iter()
            .find(|e| e.name == s.name)
            .map(|e| format!(" {}", e.version))
            .unwrap_or_default();
        let cpu = s.cpu_s.zip(s.window_s).filter(|(_, w)| *w > 0.0).map(|(c, w)| format!("{:.2} CPU", c / w));
        let peak = s.memory_peak_bytes.map(|b| format!("peak {}", mib(b)));
        let exited = s.exited.map(|c| format!("exited with code {c}"));
        let figures: Vec<String> = [cpu, peak, exited].into_iter().flatten().collect();
        let figures = if figures.is_empty() { "not measured".to_string() } else { figures.join(", ") };
        parts.push(format!("{}{version}: {figures}", s.name));
    }
    let seed = r.cell.services.first().map(|s| s.seed);
    let data =
        r.metrics.services.iter().find_map(|s| s.seed_sha256.as_deref()).map(|h| &h[..12.min(h.len())]);
    let p = &r.cell.placement;
    let cpus = p.services_cpus.as_deref().map(|c| {
        let shared = if p.services_share_driver { ", the driver's" } else { "" };
        format!("CPU {c}{shared}")
    });
    let tail: Vec<String> = [seed.map(|s| format!("seed {s}")), data.map(|d| format!("data {d}")), cpus]
        .into_iter()
        .flatten()
        .collect();
    let run = r.cell.repeat.map(|p| format!(" (run {})", p.index + 1)).unwrap_or_default();
    format!("Services {}{run}: {} ({})", r.cell.id, parts.join("; "), tail.join("; "))
}
