//! The backing services of each cell that had them, beside its server: one line per cell with
//! the server's CPU (cores over the load's window) and cgroup memory peak, then each service's
//! version, seed, CPU and memory over the driver's window, and where the services ran. Pure.

use crate::record::Record;

/// A service's CPU over the window, in cores.
fn cpu_share(s: &crate::record::ServiceMetrics) -> Option<f64> {
    s.cpu_s.zip(s.window_s).filter(|(_, w)| *w > 0.0).map(|(c, w)| c / w)
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}

/// One line per record with services: `Services first/concurrency: server 0.92 CPU, cgroup peak
/// 14.0 MiB; redis 5:7.0.15-1~deb12u10: 0.21 CPU, cgroup peak 9.8 MiB; ... (seed 7; data
/// 3a1b2c3d4e5f; CPU 0, the driver's)`.
pub(super) fn service_lines(records: &[Record]) -> Vec<String> {
    super::in_cell_order(records, |r| !r.metrics.services.is_empty()).into_iter().map(line).collect()
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
        let cpu = cpu_share(s).map(|c| format!("{c:.2} CPU"));
        let peak = s.memory_peak_bytes.map(|b| format!("cgroup peak {}", mib(b)));
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

/// The HTML section: one row per cell with services, the server's CPU and cgroup peak, then each
/// service's (in the order the first record names them), its version in the header.
pub(super) fn html_table(o: &mut String, records: &[Record]) {
    use std::fmt::Write;
    let with: Vec<&Record> = super::in_cell_order(records, |r| !r.metrics.services.is_empty());
    let Some(first) = with.first().copied() else { return };
    let esc = super::html::esc;
    let names: Vec<&str> = first.metrics.services.iter().map(|s| s.name.as_str()).collect();
    o.push_str(
        "<h2>Backing services</h2>\n<table>\n<tr><th>cell</th><th>server CPU</th><th>server cgroup peak</th>",
    );
    for n in &names {
        let version = first.environment.services.iter().find(|e| e.name == *n).map(|e| e.version.as_str());
        let _ = write!(
            o,
            "<th>{} {} CPU</th><th>{} cgroup peak</th>",
            esc(n),
            esc(version.unwrap_or("")),
            esc(n)
        );
    }
    o.push_str("<th>services' CPUs</th></tr>\n");
    let dash = || "—".to_string();
    for r in with {
        let load = r.metrics.load.as_ref();
        let cpu = load.and_then(|l| l.server_cpu_cores).map_or_else(dash, |c| format!("{c:.2}"));
        let peak =
            r.metrics.memory.under_load.as_ref().and_then(|m| m.cgroup_peak_bytes).map_or_else(dash, mib);
        let _ = write!(o, "<tr><td>{}</td><td>{cpu}</td><td>{peak}</td>", esc(&r.cell.id));
        for n in &names {
            let s = r.metrics.services.iter().find(|s| s.name == *n);
            let cpu = s.and_then(cpu_share).map_or_else(dash, |c| format!("{c:.2}"));
            let peak = match s.and_then(|s| s.exited) {
                Some(code) => format!("exited ({code})"),
                None => s.and_then(|s| s.memory_peak_bytes).map_or_else(dash, mib),
            };
            let _ = write!(o, "<td>{cpu}</td><td>{peak}</td>");
        }
        let p = &r.cell.placement;
        let shared = if p.services_share_driver { " (the driver's)" } else { "" };
        let _ = writeln!(o, "<td>{}{shared}</td></tr>", esc(p.services_cpus.as_deref().unwrap_or("")));
    }
    o.push_str("</table>\n");
    let seeds: Vec<String> =
        first.cell.services.first().map(|s| format!("seed {}", s.seed)).into_iter().collect();
    let _ = writeln!(
        o,
        "<p class=\"note\">CPU in cores over the driver's window (1.00 = one core busy); cgroup peaks are each container's memory high-water mark. Every cell's services were fresh and seeded ({}).</p>",
        esc(&seeds.join(", "))
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::manifest::ServiceManifest;
    use crate::record::ServiceMetrics;
    use crate::spec::{ServiceKind, ServiceSpec};

    fn with_services() -> Record {
        let mut r = crate::record::tests::sample_record("c");
        r.cell.services = vec![ServiceSpec {
            name: "redis".into(),
            kind: ServiceKind::Redis,
            seed: 7,
            fault: None,
            declared_by: None,
            port: None,
            expectations_sha256: None,
            expectations_from: None,
            program: None,
        }];
        r.cell.placement.services_cpus = Some("0".into());
        r.cell.placement.services_share_driver = true;
        r.metrics.services = vec![ServiceMetrics {
            name: "redis".into(),
            seed_sha256: Some("ab".repeat(32)),
            cpu_s: Some(1.0),
            window_s: Some(4.0),
            memory_peak_bytes: Some(3 << 20),
            exited: None,
            ..Default::default()
        }];
        r.environment.services = vec![ServiceManifest {
            name: "redis".into(),
            kind: ServiceKind::Redis,
            image_id: "sha256:x".into(),
            version: "5:7.0.15".into(),
        }];
        r
    }

    #[test]
    fn a_cell_with_services_gets_a_line_and_a_table_row_and_one_without_none() {
        let plain = crate::record::tests::sample_record("p");
        assert!(service_lines(std::slice::from_ref(&plain)).is_empty());
        let r = with_services();
        let lines = service_lines(&[plain.clone(), r.clone()]);
        assert_eq!(
            lines,
            [format!("Services {}: redis 5:7.0.15: 0.25 CPU, cgroup peak 3.0 MiB (seed 7; data abababababab; CPU 0, the driver's)", r.cell.id)]
        );
        let mut html = String::new();
        html_table(&mut html, &[plain, r]);
        assert!(
            html.contains("<th>redis 5:7.0.15 CPU</th>")
                && html.contains("<td>0.25</td><td>3.0 MiB</td><td>0 (the driver's)</td>"),
            "{html}"
        );
        let mut dead = with_services();
        dead.metrics.services[0].exited = Some(3);
        let mut html = String::new();
        html_table(&mut html, &[dead]);
        assert!(html.contains("exited (3)"), "{html}");
    }
}
