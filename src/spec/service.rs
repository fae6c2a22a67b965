//! Backing services beside a cell's server (`[[service]]`: Redis, the lab's API, PostgreSQL, a
//! mock HTTP service): what a scenario asks for, what a backend starts, what the driver readies
//! and seeds, and what a record keeps of each (its image and version, the seed's or the
//! expectations' hash, its CPU and memory over the cell). Pure serde types, no I/O.

use serde::{Deserialize, Serialize};

/// The services the lab can start. A closed set: each has its image, port and readiness probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceKind {
    /// Debian's `redis-server`: a key-value store on 127.0.0.1:6379, no persistence.
    Redis,
    /// The lab's own HTTP API (`benchlab service-api`): a product catalogue from a seed.
    Api,
    /// Debian's PostgreSQL 15: a cluster made at start in the container's scratch (trust on
    /// loopback), the catalogue loaded into tables `products` and `stock`.
    Postgres,
    /// The lab's own mock HTTP service (`benchlab service-mock`): canned answers from a file of
    /// MockServer-style expectations (`services::mock`), on port 1080 unless the scenario names
    /// one.
    Mock,
    /// A program of the scenario's own: its command on the lab's Debian base with the packages it
    /// names, its port, readiness probe and seed command (`ServiceProgram`).
    Program,
}

/// Redis's port on the cell's loopback.
pub const REDIS_PORT: u16 = 6379;
/// The API service's port on the cell's loopback.
pub const API_PORT: u16 = 8901;
/// PostgreSQL's port on the cell's loopback.
pub const POSTGRES_PORT: u16 = 5432;
/// The mock HTTP service's port on the cell's loopback unless the scenario names one
/// (MockServer's).
pub const MOCK_PORT: u16 = 1080;
/// The variables that tell a server under test where the services are.
pub const ENV_REDIS_URL: &str = "BENCHLAB_REDIS_URL";
pub const ENV_API_URL: &str = "BENCHLAB_API_URL";
pub const ENV_POSTGRES_URL: &str = "BENCHLAB_POSTGRES_URL";
pub const ENV_MOCK_URL: &str = "BENCHLAB_MOCK_URL";
/// A program service's address reaches the server as `BENCHLAB_SERVICE_<NAME>` (upper case, `-`
/// as `_`): `127.0.0.1:<port>`. A server written for a compose file finds it by its name too.
pub const ENV_SERVICE_PREFIX: &str = "BENCHLAB_SERVICE_";
/// The variable that carries a mock's expectations (the file's text) into its container.
pub const ENV_MOCK_EXPECTATIONS: &str = "BENCHLAB_MOCK_EXPECTATIONS";
/// The largest expectations file: its text travels in one environment variable, and Linux takes
/// at most 128 KiB in one (`MAX_ARG_STRLEN`); half leaves room to spare.
pub const MOCK_EXPECTATIONS_MAX_BYTES: usize = 64 << 10;

impl ServiceKind {
    pub const ALL: &'static [ServiceKind] = &[
        ServiceKind::Redis,
        ServiceKind::Api,
        ServiceKind::Postgres,
        ServiceKind::Mock,
        ServiceKind::Program,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ServiceKind::Redis => "redis",
            ServiceKind::Api => "api",
            ServiceKind::Postgres => "postgres",
            ServiceKind::Mock => "mock",
            ServiceKind::Program => "program",
        }
    }

    pub fn from_name(name: &str) -> Option<ServiceKind> {
        ServiceKind::ALL.iter().copied().find(|k| k.as_str() == name)
    }

    pub fn port(self) -> u16 {
        match self {
            ServiceKind::Redis => REDIS_PORT,
            ServiceKind::Api => API_PORT,
            ServiceKind::Postgres => POSTGRES_PORT,
            ServiceKind::Mock => MOCK_PORT,
            // A program's port is its scenario's (required there).
            ServiceKind::Program => 0,
        }
    }

    /// The Debian packages its image adds to a bare base (the API and the mock run the lab's own
    /// binary).
    pub fn packages(self) -> &'static [&'static str] {
        match self {
            ServiceKind::Redis => &["redis-server"],
            ServiceKind::Api | ServiceKind::Mock | ServiceKind::Program => &[],
            ServiceKind::Postgres => &["postgresql-15"],
        }
    }

    /// The package whose installed version is the service's version (None: the lab's binary).
    pub fn version_package(self) -> Option<&'static str> {
        match self {
            ServiceKind::Redis => Some("redis-server"),
            ServiceKind::Api | ServiceKind::Mock | ServiceKind::Program => None,
            ServiceKind::Postgres => Some("postgresql-15"),
        }
    }

    /// The environment variable that tells the server where the service is, and its value, at
    /// its kind's port.
    pub fn server_env(self) -> (String, String) {
        self.server_env_at(self.port())
    }

    fn server_env_at(self, port: u16) -> (String, String) {
        match self {
            ServiceKind::Redis => (ENV_REDIS_URL.into(), format!("redis://127.0.0.1:{port}/0")),
            ServiceKind::Api => (ENV_API_URL.into(), format!("http://127.0.0.1:{port}")),
            ServiceKind::Postgres => {
                (ENV_POSTGRES_URL.into(), format!("postgres://bench@127.0.0.1:{port}/postgres"))
            }
            ServiceKind::Mock => (ENV_MOCK_URL.into(), format!("http://127.0.0.1:{port}")),
            ServiceKind::Program => (ENV_SERVICE_PREFIX.into(), format!("127.0.0.1:{port}")),
        }
    }

    /// Whether it holds the data set of a seed (`mcp::shop`): a mock serves its expectations and
    /// a program is seeded by its own command.
    pub fn holds_seeded_data(self) -> bool {
        !matches!(self, ServiceKind::Mock | ServiceKind::Program)
    }

    /// The in-memory scratch (`/tmp`) its container needs: PostgreSQL keeps its cluster there.
    pub fn scratch_bytes(self) -> u64 {
        match self {
            ServiceKind::Postgres => 512 << 20,
            _ => 64 << 20,
        }
    }
}

/// One `[[service]]` of a scenario, as every cell of it gets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceSpec {
    /// The scenario's name for it (its kind unless named).
    pub name: String,
    pub kind: ServiceKind,
    /// The data set's seed: the same seed gives the same catalogue, keys and answers. A mock has
    /// no data set of a seed; it carries its cell's, so a cell's services name one seed.
    pub seed: u64,
    /// A fault on purpose, for the lab's own tests (the API's `exit@<requests>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// None for the scenario's own `[[service]]`; else what declared the need (`the recipe of
    /// fastmcp, [api.fastmcp-shop]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_by: Option<String>,
    /// The port it listens on, when the scenario names one (a mock's; its kind's otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// A mock's expectations: the sha256 of its file's bytes (the text travels in
    /// `ServiceJob::expectations`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectations_sha256: Option<String>,
    /// A mock's expectations file in the source's repository (`expectations = "source:<path>"`),
    /// the path at `[source] repository`'s commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectations_from: Option<String>,
    /// A program service's image, command, readiness, seed and limits (None for the lab's own
    /// kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<ServiceProgram>,
}

/// A program service as its scenario writes it: the Debian packages its image adds to the lab's
/// bookworm base (or its own source, built by its Dockerfile), the command it runs, its environment, how the lab knows it is ready, the
/// command that seeds it before each server, and its own limits. Its container is new for every
/// cell (reset = "cell"), so each server meets it freshly seeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceProgram {
    /// Built from its own source's Dockerfile instead (as a server can be; `[source.base]` maps
    /// its bases): no packages then, and its command defaults to the Dockerfile's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::spec::ServerSource>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
    pub ready: Readiness,
    /// Run in its container once it is ready, before the server starts; it must exit 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_command: Option<Vec<String>>,
    /// A CPU quota on its container (on top of the services' cpuset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<crate::spec::CpuQuota>,
    /// Its memory limit, instead of the cell's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

/// How the lab knows a program service is ready: its port takes a TCP connection, a path on it
/// answers HTTP 2xx, or a command run in its container exits 0. Tried until the start-up limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "probe", rename_all = "snake_case")]
pub enum Readiness {
    Tcp,
    Http { path: String },
    Command { argv: Vec<String> },
}

impl ServiceSpec {
    /// The port it listens on, on the cell's loopback.
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(self.kind.port())
    }

    /// The environment variable that tells the server where it is, and its value.
    pub fn server_env(&self) -> (String, String) {
        let (name, value) = self.kind.server_env_at(self.port());
        match self.kind {
            ServiceKind::Program => {
                (format!("{name}{}", self.name.to_ascii_uppercase().replace('-', "_")), value)
            }
            _ => (name, value),
        }
    }

    /// The command its container runs (`lab_binary`: where the lab's binary is mounted).
    pub fn argv(&self, lab_binary: &str) -> Vec<String> {
        match self.kind {
            // No persistence, no protected mode (loopback of the cell only), one database is
            // enough; the server's own defaults otherwise.
            ServiceKind::Redis => [
                "/usr/bin/redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                &REDIS_PORT.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
                "--dir",
                "/tmp",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            // A fresh cluster in the scratch at every start (trust on loopback; the role `bench`),
            // then the server on loopback only, its socket in the scratch too.
            ServiceKind::Postgres => vec![
                "/bin/sh".into(),
                "-c".into(),
                format!(
                    "{bin}/initdb -D /tmp/pg -U bench -A trust --no-sync >/tmp/initdb.log 2>&1 || {{ cat /tmp/initdb.log; exit 1; }}; \
                     exec {bin}/postgres -D /tmp/pg -k /tmp -h 127.0.0.1 -p {POSTGRES_PORT}",
                    bin = "/usr/lib/postgresql/15/bin"
                ),
            ],
            ServiceKind::Api => {
                let mut v: Vec<String> = vec![
                    lab_binary.into(),
                    "service-api".into(),
                    "--port".into(),
                    API_PORT.to_string(),
                    "--seed".into(),
                    self.seed.to_string(),
                ];
                if let Some(f) = &self.fault {
                    v.extend(["--fault".into(), f.clone()]);
                }
                v
            }
            ServiceKind::Program => self.program.as_ref().map(|p| p.command.clone()).unwrap_or_default(),
            ServiceKind::Mock => vec![
                lab_binary.into(),
                "service-mock".into(),
                "--port".into(),
                self.port().to_string(),
                "--expectations-env".into(),
                ENV_MOCK_EXPECTATIONS.into(),
            ],
        }
    }
}

/// One service as a backend starts it for a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceJob {
    pub spec: ServiceSpec,
    /// The engine's image (id or reference), prepared like a server's.
    pub image: String,
    /// The CPUs it runs on.
    pub cpus: String,
    /// Its memory limit in bytes.
    pub memory_limit_bytes: u64,
    /// A mock's expectations, its file's text (`spec.expectations_sha256` is its hash); the
    /// backend hands it to the service (`ENV_MOCK_EXPECTATIONS`). Kept out of `ServiceSpec`, so
    /// records and the driver's spec carry the hash only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectations: Option<String>,
}

/// What the driver did to ready a service before the gate: waited for it, emptied it and seeded
/// it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceReady {
    pub name: String,
    /// From the driver's first probe to the service's first good answer, in milliseconds.
    pub ready_ms: f64,
    /// sha256 of the data set the service holds after seeding (`mcp::shop::seed_sha256`), or of
    /// the expectations a mock says it serves.
    pub seed_sha256: String,
    /// Keys in the store after seeding (Redis), products served (the API), or a mock's
    /// expectations.
    pub items: u64,
}

/// What the backend saw of a service over the cell: its CPU time and memory from its cgroup,
/// and whether it was still running at the end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceUsage {
    pub name: String,
    /// The engine's image id it ran from, and the version of its program as installed there
    /// (`redis-server`'s Debian version; the lab's own version for the API service).
    pub image_id: String,
    pub version: String,
    /// CPU seconds over the driver's window (start to end).
    pub cpu_s: Option<f64>,
    /// The window's length in seconds.
    pub window_s: Option<f64>,
    /// The cgroup's memory high-water mark, and its usage at the end, in bytes.
    pub memory_peak_bytes: Option<u64>,
    pub memory_end_bytes: Option<u64>,
    /// Its exit code when it had exited before the cell ended (a failure of the cell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exited: Option<i64>,
}

/// A mock's spec for the crate's unit tests.
#[cfg(test)]
pub(crate) fn test_mock(port: Option<u16>, expectations_sha256: &str) -> ServiceSpec {
    ServiceSpec {
        name: "mock-api".into(),
        kind: ServiceKind::Mock,
        seed: 1,
        fault: None,
        declared_by: None,
        port,
        expectations_sha256: Some(expectations_sha256.into()),
        expectations_from: None,
        program: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_argv_names_the_seed_and_fault() {
        for k in ServiceKind::ALL {
            assert_eq!(ServiceKind::from_name(k.as_str()), Some(*k));
        }
        let api = ServiceSpec {
            name: "api".into(),
            kind: ServiceKind::Api,
            seed: 7,
            fault: Some("exit@5".into()),
            declared_by: None,
            port: None,
            expectations_sha256: None,
            expectations_from: None,
            program: None,
        };
        let argv = api.argv("/benchlab/benchlab");
        assert_eq!(argv[1], "service-api");
        assert!(argv.windows(2).any(|w| w == ["--seed", "7"]));
        assert!(argv.windows(2).any(|w| w == ["--fault", "exit@5"]));
        let redis = ServiceSpec {
            name: "kv".into(),
            kind: ServiceKind::Redis,
            seed: 1,
            fault: None,
            declared_by: None,
            port: None,
            expectations_sha256: None,
            expectations_from: None,
            program: None,
        };
        assert!(redis.argv("/x").windows(2).any(|w| w == ["--port", "6379"]));
    }
}
