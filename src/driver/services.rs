//! Before the server starts: each of the lab's own backing services is waited for (its own
//! probe, up to the start-up limit), emptied and seeded with the data set of its seed, so every
//! server meets the same pristine data; a mock must say it serves the scenario's expectations.
//! This runs inside the service's own container (`benchlab service-ready`, executed there by the
//! backend, as a program service's probe and seed command are), before the driver starts. A
//! service that is not ready or refuses its seed fails the cell as `service`, naming it.

use std::time::{Duration, Instant};

use crate::mcp::shop;
use crate::services::{http1, pg, resp};
use serde_json::Value;

use crate::spec::{Failure, FailureReason, ServiceKind, ServiceReady, ServiceSpec};

/// Readies and seeds one of the lab's own services (`benchlab service-ready`, run by the backend
/// in the service's container): its own probe up to `startup`, then its data set or, for a mock,
/// the check that it serves the scenario's expectations. A program service is readied by its own
/// probe and seed command instead (`backend::containers::services::prepare`).
pub fn ready_one(s: &ServiceSpec, startup: Duration) -> Result<ServiceReady, Failure> {
    let fail = |what: &str, e: String| {
        Failure::new(
            FailureReason::Service,
            format!("service {:?} ({}) {what}: {e}", s.name, s.kind.as_str()),
        )
    };
    let port = s.port();
    let started = Instant::now();
    let deadline = started + startup;
    // Readiness: the service's own probe (the API's health answer names its data set, the
    // mock's status its expectations).
    let health = match s.kind {
        ServiceKind::Redis => resp::redis_ready(port, deadline).map(|()| None),
        ServiceKind::Postgres => pg::postgres_ready(port, deadline).map(|()| None),
        ServiceKind::Api => http1::api_ready(port, deadline).map(Some),
        ServiceKind::Mock => http1::mock_ready(port, deadline).map(Some),
        ServiceKind::Program => {
            return Err(fail("is not the lab's own", "its own probe and seed command ready it".into()))
        }
    }
    .map_err(|e| fail("was not ready", e))?;
    let ready_ms = started.elapsed().as_secs_f64() * 1e3;
    let (seed_sha256, items) = seed(s, port, health.as_ref()).map_err(|(what, e)| fail(what, e))?;
    Ok(ServiceReady { name: s.name.clone(), ready_ms, seed_sha256, items })
}

/// Seeds a ready service with the data set of its seed (a mock is checked instead); the hash of
/// what it holds and how many items, or what went wrong.
fn seed(s: &ServiceSpec, port: u16, health: Option<&Value>) -> Result<(String, u64), (&'static str, String)> {
    let data = match s.kind {
        ServiceKind::Mock => return expectations_served(s, health),
        _ => shop::dataset(s.seed),
    };
    let hash = shop::seed_sha256(&data);
    let seeding = Duration::from_secs(10);
    let items = match s.kind {
        ServiceKind::Redis => resp::seed_redis(port, &data, seeding).map(|n| n as u64),
        ServiceKind::Postgres => pg::seed_postgres(port, &data, seeding).map(|n| n as u64),
        // The API serves the data set of its own seed: it must be the one the gate expects.
        ServiceKind::Api => {
            let served = health.and_then(|h| h.get("seed_sha256")).and_then(Value::as_str);
            if served != Some(hash.as_str()) {
                return Err((
                    "serves another data set",
                    format!("its /health names {served:?}, seed {} is {hash}", s.seed),
                ));
            }
            Ok(data.products.len() as u64)
        }
        ServiceKind::Mock | ServiceKind::Program => {
            unreachable!("a mock returned above; a program is not seeded here")
        }
    }
    .map_err(|e| ("could not be seeded", e))?;
    Ok((hash, items))
}

/// A mock holds no data set: its status must name the expectations the scenario's file holds.
/// Their hash and how many there are.
fn expectations_served(
    s: &ServiceSpec,
    status: Option<&Value>,
) -> Result<(String, u64), (&'static str, String)> {
    let served = status.and_then(|h| h.get("expectations_sha256")).and_then(Value::as_str);
    match (served, s.expectations_sha256.as_deref()) {
        (Some(served), Some(expected)) if served == expected => {
            let count = status.and_then(|h| h.get("expectations")).and_then(Value::as_u64).unwrap_or(0);
            Ok((served.to_string(), count))
        }
        (served, expected) => Err((
            "serves other expectations",
            format!("its status names {served:?}, the scenario's file is {expected:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_mock_must_serve_the_scenarios_expectations() {
        let sha = "ab".repeat(32);
        let spec = crate::spec::test_mock(None, &sha);
        let status = json!({"ports": [1080], "expectations": 3, "expectations_sha256": sha});
        assert_eq!(seed(&spec, 1080, Some(&status)), Ok((sha.clone(), 3)));
        let other = json!({"ports": [1080], "expectations": 3, "expectations_sha256": "cd".repeat(32)});
        let (what, why) = seed(&spec, 1080, Some(&other)).unwrap_err();
        assert_eq!(what, "serves other expectations");
        assert!(why.contains(&"cd".repeat(32)) && why.contains(&sha), "{why}");
        assert!(seed(&spec, 1080, Some(&json!({"ports": [1080]}))).is_err(), "a status that names none");
        let unhashed = ServiceSpec { expectations_sha256: None, ..spec };
        assert!(seed(&unhashed, 1080, Some(&status)).is_err(), "a spec without a hash matches nothing");
    }
}
