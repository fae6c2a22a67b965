//! Before the server starts: each backing service of the spec is waited for (its own probe, up
//! to the start-up limit), emptied and seeded with the data set of its seed, so every server
//! meets the same pristine data. A service that is not ready or refuses its seed fails the cell
//! as `service`, naming it.

use std::time::{Duration, Instant};

use crate::mcp::shop;
use crate::spec::{DriverSpec, Failure, FailureReason, ServiceKind, ServiceReady};

/// Readies and seeds every service, in the spec's order.
pub fn ready_all(spec: &DriverSpec) -> Result<Vec<ServiceReady>, Failure> {
    let mut out = Vec::new();
    for s in &spec.services {
        let fail = |what: &str, e: String| {
            Failure::new(
                FailureReason::Service,
                format!("service {:?} ({}) {what}: {e}", s.name, s.kind.as_str()),
            )
        };
        let data = shop::dataset(s.seed);
        let started = Instant::now();
        let deadline = started + spec.timeouts.startup();
        let items = match s.kind {
            ServiceKind::Redis => {
                crate::services::resp::redis_ready(s.kind.port(), deadline)
                    .map_err(|e| fail("was not ready", e))?;
                let ready_ms = started.elapsed().as_secs_f64() * 1e3;
                let keys = crate::services::resp::seed_redis(s.kind.port(), &data, Duration::from_secs(10))
                    .map_err(|e| fail("could not be seeded", e))?;
                (ready_ms, keys as u64)
            }
            ServiceKind::Postgres => {
                crate::services::pg::postgres_ready(s.kind.port(), deadline)
                    .map_err(|e| fail("was not ready", e))?;
                let ready_ms = started.elapsed().as_secs_f64() * 1e3;
                let rows = crate::services::pg::seed_postgres(s.kind.port(), &data, Duration::from_secs(10))
                    .map_err(|e| fail("could not be seeded", e))?;
                (ready_ms, rows as u64)
            }
            ServiceKind::Api => {
                let health = crate::services::http1::api_ready(s.kind.port(), deadline)
                    .map_err(|e| fail("was not ready", e))?;
                let ready_ms = started.elapsed().as_secs_f64() * 1e3;
                // The API serves its data from its seed; it must be the data set the gate expects.
                let served = health.get("seed_sha256").and_then(|v| v.as_str()).unwrap_or_default();
                if served != shop::seed_sha256(&data) {
                    return Err(fail(
                        "serves another data set",
                        format!(
                            "its /health names {served:?}, seed {} is {}",
                            s.seed,
                            shop::seed_sha256(&data)
                        ),
                    ));
                }
                (ready_ms, data.products.len() as u64)
            }
        };
        out.push(ServiceReady {
            name: s.name.clone(),
            ready_ms: items.0,
            seed_sha256: shop::seed_sha256(&data),
            items: items.1,
        });
    }
    Ok(out)
}
