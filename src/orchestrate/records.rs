//! A record from a cell's outcome: the measured figures summarised (percentiles of samples and
//! histograms), the failure that counts (the backend's over the driver's), and the environment
//! manifest; and, when a run is resumed, how a new record's environment differs from the run's
//! earlier ones. Pure: the store appends and hashes.

use super::plan::PlannedCell;
use crate::backend::{CellOutcome, Prepared};
use crate::recipe::RuntimeKind;
use crate::record::manifest::{
    BenchlabManifest, EngineManifest, Environment, HostManifest, ImageManifest, RuntimeManifest,
    ServiceManifest,
};
use crate::record::ServiceMetrics;
use crate::record::{Cell, MemoryMetrics, Metrics, Observed, Record, SampleMetric, ServerIdent, Status};
use crate::spec::{CellTransport, HistogramMetric, Sandbox, ServiceReady, ServiceUsage};
use crate::stats;

/// The parts of the environment shared by every cell of a run.
#[derive(Debug, Clone)]
pub struct RunContext {
    pub run_id: String,
    pub host: HostManifest,
    pub benchlab: BenchlabManifest,
    pub scenario_sha256: String,
    /// The host's speed fingerprint, measured once at the run's start (a cluster's node sends
    /// its own with each outcome).
    pub fingerprint: Option<crate::host::Fingerprint>,
}

/// Manifest fields every cell of a run shares: a difference there in any earlier record is a
/// change of the run's environment, not of one cell's.
const RUN_WIDE: &[&str] = &["host", "engine", "benchlab", "scenario_sha256", "sandbox"];

/// How a new record's environment differs from what the run recorded before: against the same
/// cell's latest earlier record (every field), else against the run's first record (run-wide
/// fields only). One line per differing field.
pub fn environment_changes(earlier: &[Record], new: &Record) -> Vec<String> {
    let same = earlier.iter().rev().find(|r| r.cell.id == new.cell.id && r.cell.repeat == new.cell.repeat);
    let (base, run_wide_only) = match same {
        Some(r) if r.env_hash == new.env_hash => return Vec::new(),
        Some(r) => (r, false),
        None => match earlier.first() {
            Some(r) => (r, true),
            None => return Vec::new(),
        },
    };
    crate::record::diffenv::diff_env(&base.environment, &new.environment)
        .into_iter()
        .filter(|d| {
            !run_wide_only || RUN_WIDE.iter().any(|p| d.path == *p || d.path.starts_with(&format!("{p}.")))
        })
        .map(|d| {
            use crate::record::diffenv::EnvDiff;
            format!(
                "{}: environment changed since record {} ({}): {} {} -> {}",
                new.cell.id,
                base.seq,
                base.recorded_at,
                d.path,
                EnvDiff::show(d.a.as_ref()),
                EnvDiff::show(d.b.as_ref())
            )
        })
        .collect()
}

/// The sandbox as the environment manifest records it.
fn sandbox_manifest(s: &Sandbox) -> crate::record::manifest::SandboxManifest {
    crate::record::manifest::SandboxManifest {
        user: s.user.map(|(u, g)| format!("{u}:{g}")),
        drop_all_capabilities: s.drop_all_capabilities,
        no_new_privileges: s.no_new_privileges,
        read_only_root: s.read_only_root,
        scratch: s.scratch.iter().map(|(p, b)| format!("{p}:{b}")).collect(),
        pids_limit: s.pids_limit,
        network: "none".into(),
        lab_user: s.lab_user.map(|(u, g)| format!("{u}:{g}")),
    }
}

/// What the reproduced source states, against what this cell ran (its image's packages, its
/// runtime, its host): derived, not remembered.
fn derived_deviations(cell: &PlannedCell, environment: &Environment) -> Vec<String> {
    crate::record::deviations::derive(
        &cell.stated,
        &crate::record::deviations::CellRan {
            env: environment,
            source_runtime: cell.source_runtime.as_deref(),
            stand_in: cell.stand_in.as_deref(),
            program: cell.want.program.as_deref(),
            suite: &cell.suite,
            null_server: cell.want.family == crate::recipe::NULL_FAMILY,
        },
    )
}

/// A sample metric of nanosecond samples, in ms with its summary.
fn samples(v: &[u64]) -> Option<SampleMetric> {
    stats::summarize_samples(v)
        .map(|summary| SampleMetric { samples_ms: v.iter().map(|&ns| ns as f64 / 1e6).collect(), summary })
}

/// The serial calls' histogram, summarised, with the warm-up's report when it ran by rule.
fn calls_metric(outcome: &crate::spec::DriverOutcome) -> Option<HistogramMetric> {
    let h = outcome.calls_histogram.as_ref()?;
    let hist = stats::decode_histogram(h).ok()?;
    Some(HistogramMetric {
        summary: stats::summarize(&hist)?,
        histogram: h.clone(),
        warmup: outcome.warmup.clone(),
    })
}

/// The services' part of the environment: each one the backend ran, with its image and version.
fn service_manifests(cell: &PlannedCell, ran: &[ServiceUsage]) -> Vec<ServiceManifest> {
    cell.services
        .iter()
        .filter_map(|(spec, _)| {
            let r = ran.iter().find(|u| u.name == spec.name)?;
            Some(ServiceManifest {
                name: spec.name.clone(),
                kind: spec.kind,
                image_id: r.image_id.clone(),
                version: r.version.clone(),
            })
        })
        .collect()
}

/// The server's runtime version: the lab's own for a native server, else what the image says of
/// itself, else (a server built from its source) what its base rule installed (the bare suite
/// when it installs nothing).
fn runtime_version(image: &crate::recipe::ImagePlan, facts: &crate::backend::ImageFacts) -> String {
    match image.runtime_kind {
        RuntimeKind::Native => env!("CARGO_PKG_VERSION").to_string(),
        _ => facts
            .runtime_version
            .clone()
            .or_else(|| source_runtime(image, &facts.system_packages))
            .unwrap_or_else(|| "unknown".into()),
    }
}

/// A server built from its own source has no image manifest of the lab's: its runtime is what
/// its final stage's `[source.base]` rule installed, each package with its Debian version as the
/// image holds it (`nodejs 20.19.2+dfsg-1, npm 9.2.0~ds1-3`).
fn source_runtime(
    image: &crate::recipe::ImagePlan,
    installed: &[crate::record::manifest::Package],
) -> Option<String> {
    image.fetched.as_ref()?;
    let crate::recipe::base::BaseSource::Bootstrap { packages, suite } = &image.base else { return None };
    let named: Vec<String> = packages
        .iter()
        .filter_map(|name| {
            installed.iter().find(|p| &p.name == name).map(|p| format!("{name} {}", p.version))
        })
        .collect();
    // A rule that installs nothing leaves the bare Debian suite as the runtime.
    Some(if named.is_empty() { format!("debian {suite}") } else { named.join(", ") })
}

/// Each service's figures: the driver's readying and seeding beside the backend's usage.
fn service_metrics(cell: &PlannedCell, ready: &[ServiceReady], ran: &[ServiceUsage]) -> Vec<ServiceMetrics> {
    cell.services
        .iter()
        .map(|(spec, _)| {
            let r = ready.iter().find(|r| r.name == spec.name);
            let u = ran.iter().find(|u| u.name == spec.name).cloned().unwrap_or_default();
            ServiceMetrics {
                name: spec.name.clone(),
                ready_ms: r.map(|r| r.ready_ms),
                seed_sha256: r.map(|r| r.seed_sha256.clone()),
                items: r.map(|r| r.items),
                cpu_s: u.cpu_s,
                window_s: u.window_s,
                memory_peak_bytes: u.memory_peak_bytes,
                memory_end_bytes: u.memory_end_bytes,
                exited: u.exited,
            }
        })
        .collect()
}

/// The record of one cell from its outcome: what was measured, and the environment it ran in
/// (run-wide facts, the backend's engine, the prepared image and what the cell reported of it).
/// Its hashes and sequence number are the store's to fill.
/// The memory figures of an outcome: the tree's, the cgroup's beside them, and the flag when
/// the cgroup held memory outside the tree.
fn memory_metrics(outcome: &mut crate::spec::DriverOutcome) -> MemoryMetrics {
    let (cgroup_after_initialize, cgroup_end) =
        (outcome.cgroup_after_initialize.take(), outcome.cgroup_end.take());
    MemoryMetrics {
        after_initialize: outcome.memory_after_initialize.take(),
        end: outcome.memory_end.take(),
        under_load: outcome.load_memory.take(),
        outside_tree: MemoryMetrics::outside_tree_of(cgroup_after_initialize.as_ref(), cgroup_end.as_ref()),
        cgroup_after_initialize,
        cgroup_end,
    }
}

pub fn build_record(
    ctx: &RunContext,
    cell: &PlannedCell,
    image: &Prepared,
    engine: &EngineManifest,
    cell_outcome: CellOutcome,
) -> Record {
    let CellOutcome {
        driver: mut outcome,
        failure: failure_override,
        facts,
        sandbox,
        ran_on,
        quiet,
        fingerprint,
        services,
    } = cell_outcome;
    let fingerprint = fingerprint.or_else(|| ctx.fingerprint.clone());
    let host_check = (fingerprint.is_some() || quiet.is_some())
        .then_some(crate::host::HostCheck { fingerprint: fingerprint.map(std::sync::Arc::new), quiet });
    // A cluster's node reports its own host, engine and the CPUs it gave the cell.
    let (host, engine, placement, dispatch) = match ran_on {
        Some(crate::backend::RanOn { dispatch, node: Some(n) }) => {
            (n.host, n.engine, n.placement, Some(dispatch))
        }
        Some(r) => (ctx.host.clone(), engine.clone(), cell.placement.clone(), Some(r.dispatch)),
        None => (ctx.host.clone(), engine.clone(), cell.placement.clone(), None),
    };
    let sandbox = sandbox.unwrap_or_else(|| cell.sandbox.clone());
    let runtime_version = runtime_version(&cell.image, &facts);
    let mut environment = Environment {
        image: ImageManifest {
            reference: image.reference.clone(),
            image_id: image.id.clone(),
            input_hash: image.input_hash.clone(),
            base: image.base.clone(),
            packages: facts.packages.clone(),
            system_packages: facts.system_packages.clone(),
        },
        runtime: RuntimeManifest {
            name: cell.image.runtime_kind.as_str().into(),
            version: runtime_version.clone(),
        },
        host,
        engine,
        placement: placement.clone(),
        benchlab: ctx.benchlab.clone(),
        scenario_sha256: ctx.scenario_sha256.clone(),
        deviations: cell.deviations.clone(),
        sandbox: Some(sandbox_manifest(&sandbox)),
        services: service_manifests(cell, &services),
    };
    environment.deviations.extend(derived_deviations(cell, &environment));
    let failure = failure_override.or(outcome.failure.clone());
    let calls = calls_metric(&outcome);
    Record {
        format_version: crate::record::FORMAT_VERSION,
        run_id: ctx.run_id.clone(),
        seq: 0,
        recorded_at: crate::record::now_rfc3339(),
        status: if failure.is_some() { Status::Failed } else { Status::Ok },
        failure,
        cell: Cell {
            id: cell.id.clone(),
            server: ServerIdent {
                id: cell.server_id.clone(),
                family: cell.image.family.clone(),
                sdk_version: cell.image.version.clone(),
                api: cell.image.api.clone(),
                runtime: cell.image.runtime_name.clone(),
                runtime_version,
                source: cell.image.source.clone(),
                env: cell.env.clone(),
                workers: (cell.workers > 1).then_some(cell.workers),
                built_from: cell.image.fetched.clone(),
            },
            transport: match (&cell.image.http, &cell.workload) {
                (_, crate::spec::Workload::HttpApi { .. }) => CellTransport::HttpApi,
                (Some(h), _) => h.transport.into(),
                (None, _) => CellTransport::Stdio,
            },
            suite: cell.suite.clone(),
            suite_sha256: cell.suite_data.as_ref().map(|d| d.sha256()),
            workload: cell.workload.clone(),
            placement,
            timeouts: cell.timeouts,
            expect: cell.expect,
            http: cell.image.http.clone(),
            repeat: cell.repeat,
            services: cell.services.iter().map(|(s, _)| s.clone()).collect(),
        },
        metrics: Box::new(Metrics {
            cold_start: samples(&outcome.cold_start_ns),
            tools_list: samples(&outcome.tools_list_ns),
            calls,
            memory: memory_metrics(&mut outcome),
            load: outcome.load.map(Box::new),
            services: service_metrics(cell, &outcome.services, &services),
        }),
        observed: observed(outcome.protocol_version, outcome.server_info, outcome.exits),
        environment: environment.into(),
        env_hash: String::new(),
        prev_hash: None,
        dispatch: dispatch.map(Box::new),
        schedule: cell.schedule.clone(),
        host_check: host_check.map(Box::new),
        hash: String::new(),
    }
}

/// What the server said about itself, its `serverInfo` bounded (a claim, cut when too large).
fn observed(
    protocol_version: Option<String>,
    server_info: Option<serde_json::Value>,
    exits: Vec<crate::spec::ExitInfo>,
) -> Observed {
    let (info, truncated) = crate::record::claimed::bound_server_info(server_info);
    Observed {
        protocol_version,
        server_info: info.map(std::sync::Arc::new),
        server_info_truncated: truncated,
        left_behind: crate::record::LeftBehind::of(&exits),
        exits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_cell_in_another_environment_is_reported() {
        use crate::record::tests::sample_record;
        let hashed = |mut r: Record| {
            r.env_hash = r.environment.hash();
            r
        };
        let a = hashed(sample_record("a"));
        let b = hashed(sample_record("b"));
        // The same cell again, same environment: nothing to say.
        assert!(environment_changes(std::slice::from_ref(&a), &a).is_empty());
        // Another binary: reported against the cell's own earlier record.
        let mut a2 = a.clone();
        a2.environment.benchlab.binary_sha256 = "f00d".into();
        let a2 = hashed(a2);
        let lines = environment_changes(std::slice::from_ref(&a), &a2);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("benchlab.binary_sha256") && lines[0].contains("f00d"), "{lines:?}");
        // A cell never recorded before: only run-wide fields count, not its own image.
        let mut c = b.clone();
        c.cell.id = "c/cold_start".into();
        c.environment.image.image_id = "sha256:other".into();
        assert!(environment_changes(std::slice::from_ref(&a), &hashed(c.clone())).is_empty());
        c.environment.host.kernel = "6.99".into();
        let lines = environment_changes(std::slice::from_ref(&a), &hashed(c));
        assert!(lines.len() == 1 && lines[0].contains("host.kernel"), "{lines:?}");
    }
}
