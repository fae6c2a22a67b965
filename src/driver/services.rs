//! Before the server starts: each backing service of the spec is waited for (its own probe, up
//! to the start-up limit), emptied and seeded with the data set of its seed, so every server
//! meets the same pristine data. A service that is not ready or refuses its seed fails the cell
//! as `service`, naming it.

use std::time::{Duration, Instant};

use crate::mcp::shop;
use crate::services::{http1, pg, resp};
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
        let hash = shop::seed_sha256(&data);
        let port = s.kind.port();
        let started = Instant::now();
        let deadline = started + spec.timeouts.startup();
        // Readiness: the service's own probe (the API's health answer names its data set).
        let health = match s.kind {
            ServiceKind::Redis => resp::redis_ready(port, deadline).map(|()| None),
            ServiceKind::Postgres => pg::postgres_ready(port, deadline).map(|()| None),
            ServiceKind::Api => http1::api_ready(port, deadline).map(Some),
        }
        .map_err(|e| fail("was not ready", e))?;
        let ready_ms = started.elapsed().as_secs_f64() * 1e3;
        let seeding = Duration::from_secs(10);
        let items = match (s.kind, health) {
            (ServiceKind::Redis, _) => resp::seed_redis(port, &data, seeding).map(|n| n as u64),
            (ServiceKind::Postgres, _) => pg::seed_postgres(port, &data, seeding).map(|n| n as u64),
            // The API serves the data set of its own seed: it must be the one the gate expects.
            (ServiceKind::Api, health) => {
                let served = health.as_ref().and_then(|h| h.get("seed_sha256")).and_then(|v| v.as_str());
                if served != Some(hash.as_str()) {
                    return Err(fail(
                        "serves another data set",
                        format!("its /health names {served:?}, seed {} is {hash}", s.seed),
                    ));
                }
                Ok(data.products.len() as u64)
            }
        }
        .map_err(|e| fail("could not be seeded", e))?;
        out.push(ServiceReady { name: s.name.clone(), ready_ms, seed_sha256: hash, items });
    }
    Ok(out)
}
