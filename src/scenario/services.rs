//! `[[service]]` entries: backing services every cell of the scenario gets beside its server.
//! Each is checked where it is written (known kind, a unique name, a fault only where one exists;
//! a mock's expectations file read and parsed, its port free) and against the workloads (the
//! `shop` suite's gate writes, so no REST pass); what a server's recipe needs beyond them the
//! plan adds (`orchestrate::plan`).

use std::ops::Range;
use std::sync::Arc;

use toml::Spanned;

use super::raw::RawService;
use super::{Scenario, ScenarioError};
use crate::spec::{ServiceKind, ServiceSpec, MOCK_EXPECTATIONS_MAX_BYTES};

/// The seed of a service that names none.
pub const DEFAULT_SEED: u64 = 1;

impl Scenario {
    /// Checks and adds the scenario's services; `suite_span` is where the scenario's suite is
    /// written (for a suite that needs services the scenario lacks).
    pub(super) fn add_services(
        &mut self,
        raw: &[Spanned<RawService>],
        suite_span: Range<usize>,
    ) -> Result<(), ScenarioError> {
        for entry in raw {
            let r = entry.get_ref();
            let kind = ServiceKind::from_name(r.kind.get_ref()).ok_or_else(|| {
                let known: Vec<_> = ServiceKind::ALL.iter().map(|k| k.as_str()).collect();
                self.error_at(
                    r.kind.span(),
                    format!("unknown service kind {:?} (known: {})", r.kind.get_ref(), known.join(", ")),
                )
            })?;
            let name = r.name.as_ref().map_or_else(|| kind.as_str().to_string(), |n| n.get_ref().clone());
            let name_span = r.name.as_ref().map_or_else(|| r.kind.span(), |n| n.span());
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_".contains(c)) {
                return Err(self.error_at(
                    name_span,
                    format!("service name {name:?} must be letters, digits, '-' or '_'"),
                ));
            }
            if self.services.iter().any(|s| s.name == name) {
                return Err(self.error_at(
                    name_span,
                    format!("a second service named {name:?}: give one of them another `name`"),
                ));
            }
            if kind != ServiceKind::Program && self.services.iter().any(|s| s.kind == kind) {
                return Err(self.error_at(
                    r.kind.span(),
                    format!("a second {} service: a cell has one of each kind (they share its loopback and port {})", kind.as_str(), kind.port()),
                ));
            }
            if let Some(f) = &r.fault {
                check_fault(kind, f.get_ref()).map_err(|m| self.error_at(f.span(), m))?;
            }
            let program = self.program_fields(r, kind)?;
            let (port, expectations) = self.mock_fields(r, kind)?;
            let listens = port.unwrap_or(kind.port());
            if let Some(other) = self.services.iter().find(|s| s.port() == listens) {
                let span = r.port.as_ref().map_or_else(|| r.kind.span(), |p| p.span());
                return Err(self.error_at(
                    span,
                    format!(
                        "port {listens} is service {:?}'s too: the services of a cell share its loopback",
                        other.name
                    ),
                ));
            }
            let seed = r.seed.as_ref().map_or(DEFAULT_SEED, |s| *s.get_ref());
            // A mock or a program has no data set of a seed: it takes its cell's below.
            let mismatch = match kind.holds_seeded_data() {
                false => None,
                true => self.services.iter().filter(|s| s.kind.holds_seeded_data()).find(|s| s.seed != seed),
            };
            if let Some(other) = mismatch {
                let span = r.seed.as_ref().map_or_else(|| r.kind.span(), |s| s.span());
                return Err(self.error_at(
                    span,
                    format!("seed {seed} differs from service {:?}'s seed {}: the services of a cell hold one data set", other.name, other.seed),
                ));
            }
            let expectations_sha256 = expectations.as_ref().map(|e| crate::hash::sha256_hex(e.as_bytes()));
            if let Some(text) = expectations {
                self.expectations.insert(name.clone(), text);
            }
            self.services.push(ServiceSpec {
                name,
                kind,
                seed,
                fault: r.fault.as_ref().map(|f| f.get_ref().clone()),
                declared_by: None,
                port,
                expectations_sha256,
                expectations_from: r
                    .expectations
                    .as_ref()
                    .and_then(|e| e.get_ref().strip_prefix(SOURCE_PREFIX).map(String::from)),
                program,
            });
        }
        let cell_seed =
            self.services.iter().find(|s| s.kind.holds_seeded_data()).map_or(DEFAULT_SEED, |s| s.seed);
        for s in self.services.iter_mut().filter(|s| !s.kind.holds_seeded_data()) {
            s.seed = cell_seed;
        }
        let shop_servers: Vec<&str> = self
            .servers
            .iter()
            .filter(|s| s.suite.as_deref().unwrap_or(&self.suite) == "shop")
            .map(|s| s.id.get_ref().as_str())
            .collect();
        let rest = self.workloads.iter().any(|w| matches!(w, crate::spec::Workload::HttpApi { .. }));
        if rest && !shop_servers.is_empty() {
            return Err(self.error_at(
                suite_span,
                "the shop suite's gate writes (a checkout), so an http_api workload's second gate pass over the REST route would meet its writes: measure shop over MCP".to_string(),
            ));
        }
        Ok(())
    }
}

impl Scenario {
    /// A mock's `port` and its `expectations` file's text (read beside the scenario, parsed);
    /// refused on every other kind, as a seed is on a mock.
    fn mock_fields(
        &self,
        r: &RawService,
        kind: ServiceKind,
    ) -> Result<(Option<u16>, Option<Arc<str>>), ScenarioError> {
        let mock = kind == ServiceKind::Mock;
        let takes_port = mock || kind == ServiceKind::Program;
        let other = |span: Range<usize>, key: &str| {
            self.error_at(
                span,
                format!("`{key}` is a mock service's; the {} service has none", kind.as_str()),
            )
        };
        match (&r.expectations, &r.port, &r.seed) {
            (Some(e), _, _) if !mock => return Err(other(e.span(), "expectations")),
            (_, Some(p), _) if !takes_port => {
                return Err(self.error_at(
                    p.span(),
                    format!(
                        "`port` is a mock service's; the {} service listens on {}",
                        kind.as_str(),
                        kind.port()
                    ),
                ))
            }
            (None, _, _) if mock => return Err(self.error_at(
                r.kind.span(),
                "a mock service needs `expectations`: the file of its canned answers (MockServer-style JSON)",
            )),
            (_, _, Some(seed)) if mock => {
                return Err(
                    self.error_at(seed.span(), "a mock service has no seed: it serves its expectations")
                )
            }
            _ => {}
        }
        let port = match &r.port {
            Some(p) => Some(check_mock_port(*p.get_ref()).map_err(|m| self.error_at(p.span(), m))?),
            None => None,
        };
        let text = match &r.expectations {
            Some(e) => self.read_expectations(e.get_ref()).map_err(|m| self.error_at(e.span(), m))?,
            None => None,
        };
        Ok((port, text))
    }

    /// A mock's expectations file (relative to the scenario's folder unless absolute), read and
    /// parsed as the service will parse it.
    /// `source:<path>` names a file of the scenario's `[source] repository` at its commit: read
    /// when the scenario's sources are fetched (`fetch_sources`), so none until then.
    fn read_expectations(&self, written: &str) -> Result<Option<Arc<str>>, String> {
        if let Some(rel) = written.strip_prefix(SOURCE_PREFIX) {
            if self.stated.repository.is_none() {
                return Err(format!(
                    "{written:?} is a file of the source's repository: add `repository = {{ git = URL, commit = HASH }}` under [source]"
                ));
            }
            if rel.is_empty() || rel.starts_with('/') || rel.split('/').any(|p| p == "..") {
                return Err(format!("{written:?}: the path after `source:` is a file inside the repository (relative, without `..`)"));
            }
            return Ok(None);
        }
        let path = self.path.parent().unwrap_or(std::path::Path::new("")).join(written);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read expectations file {}: {e}", path.display()))?;
        checked_expectations(&path.display().to_string(), text).map(Some)
    }

    /// Reads every mock's `source:` expectations from the scenario's repository at its commit
    /// (through `mirrors`), as `fetch_sources` does for the servers.
    pub(super) fn fetch_expectations(
        &mut self,
        mirrors: &crate::source::Mirrors,
        cache: &std::path::Path,
    ) -> Result<(), String> {
        let base = self.path.parent().map(std::path::PathBuf::from).unwrap_or_default();
        for i in 0..self.services.len() {
            let Some(rel) = self.services[i].expectations_from.clone() else { continue };
            let repo = self.stated.repository.clone().expect("checked when parsed");
            let (dir, file) = rel.rsplit_once('/').unwrap_or(("", rel.as_str()));
            let source = crate::spec::ServerSource {
                origin: crate::spec::SourceOrigin::Git { url: repo.git.clone(), commit: repo.commit.clone() },
                path: dir.to_string(),
            };
            let name = self.services[i].name.clone();
            let at = |e: String| format!("service {name:?}: expectations {SOURCE_PREFIX}{rel}: {e}");
            let fetched =
                crate::source::fetch(&source, &base, mirrors, cache).map_err(|e| at(e.to_string()))?;
            let path = fetched.tree_dir.join(file);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| at(format!("no such file at {}: {e}", &fetched.record.tree_sha256[..12])))?;
            let text = checked_expectations(&format!("{SOURCE_PREFIX}{rel}"), text).map_err(at)?;
            self.services[i].expectations_sha256 = Some(crate::hash::sha256_hex(text.as_bytes()));
            self.expectations.insert(name, text);
        }
        Ok(())
    }
}

/// The prefix of a mock's `expectations` that names a file of the source's repository.
const SOURCE_PREFIX: &str = "source:";

/// Expectations text as the service will parse it, or why not (named by `what`).
fn checked_expectations(what: &str, text: String) -> Result<Arc<str>, String> {
    let path = what;
    {
        if text.len() > MOCK_EXPECTATIONS_MAX_BYTES {
            return Err(format!(
                "expectations file {} is {} bytes, at most {MOCK_EXPECTATIONS_MAX_BYTES}: its text reaches the service in one environment variable",
                path,
                text.len()
            ));
        }
        crate::services::mock::parse(&text).map_err(|e| format!("expectations file {path}: {e}"))?;
        Ok(text.into())
    }
}

/// A mock's port: on the loopback it shares with the server (HTTP servers listen on 8000) and
/// the other services, whose ports are fixed.
fn check_mock_port(port: i64) -> Result<u16, String> {
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("port {port} is out of range (1 to 65535)"))?;
    if port == crate::recipe::HTTP_PORT {
        return Err(format!("port {port} is the server's own (HTTP servers listen on it)"));
    }
    match ServiceKind::ALL.iter().find(|k| **k != ServiceKind::Mock && k.port() == port) {
        Some(k) => Err(format!("port {port} is the {} service's", k.as_str())),
        None => Ok(port),
    }
}

/// The faults a service can be told to have: the API's `exit@<requests>` only.
fn check_fault(kind: ServiceKind, fault: &str) -> Result<(), String> {
    match kind {
        ServiceKind::Api => match fault.strip_prefix("exit@").map(str::parse::<u64>) {
            Some(Ok(n)) if n > 0 => Ok(()),
            _ => Err(format!(
                "fault {fault:?}: the API service's one fault is \"exit@<requests>\" (e.g. \"exit@500\")"
            )),
        },
        ServiceKind::Redis | ServiceKind::Postgres | ServiceKind::Mock | ServiceKind::Program => {
            Err(format!(
                "fault {fault:?}: the {} service has no faults (the API service has \"exit@<requests>\")",
                kind.as_str()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::scenario::{Scenario, ScenarioError};
    use crate::spec::ServiceKind;

    const HEAD: &str = "name = \"s\"\nsuite = \"shop\"\n[[server]]\nid = \"null\"\nfamily = \"benchlab-null\"\ntransport = \"streamable-http\"\n[[workload]]\nkind = \"concurrency\"\ntool = \"get_cart\"\nworkers = 2\nduration = \"1s\"\n";

    fn parse(tail: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(Path::new("scenarios/s.toml"), format!("{HEAD}{tail}"))
    }

    fn error(tail: &str) -> String {
        parse(tail).expect_err("refused").to_string()
    }

    #[test]
    fn services_parse_with_defaults_and_every_cell_gets_them() {
        let s = parse("[[service]]\nkind = \"redis\"\n[[service]]\nkind = \"api\"\nseed = 1\n").unwrap();
        assert_eq!(s.services.len(), 2);
        assert_eq!(
            (s.services[0].kind, s.services[0].name.as_str(), s.services[0].seed),
            (ServiceKind::Redis, "redis", 1)
        );
        assert_eq!(s.services[1].fault, None);
    }

    #[test]
    fn bad_services_are_refused_at_their_key() {
        let both = "[[service]]\nkind = \"redis\"\n[[service]]\nkind = \"api\"\n";
        let e = error("[[service]]\nkind = \"mongo\"\n");
        assert!(
            e.contains(
                "s.toml:13:8: unknown service kind \"mongo\" (known: redis, api, postgres, mock, program)"
            ),
            "{e}"
        );
        assert!(error(&format!("{both}[[service]]\nkind = \"redis\"\nname = \"kv2\"\n"))
            .contains("a second redis service"));
        assert!(error(&format!("{both}prot = 1\n")).contains("unknown field `prot`"));
        assert!(error("[[service]]\nkind = \"redis\"\nseed = 2\n[[service]]\nkind = \"api\"\n")
            .contains("seed 1 differs from service \"redis\"'s seed 2"));
        assert!(error("[[service]]\nkind = \"redis\"\nfault = \"exit@3\"\n[[service]]\nkind = \"api\"\n")
            .contains("the redis service has no faults"));
        assert!(error("[[service]]\nkind = \"redis\"\n[[service]]\nkind = \"api\"\nfault = \"exit@0\"\n")
            .contains("\"exit@<requests>\""));
        // The shop suite's needs are the plan's to add (the recipes declare them), not refused.
        assert!(parse("[[service]]\nkind = \"redis\"\n").is_ok());
    }

    const EXPECTATIONS: &str =
        r#"[{"httpRequest": {"method": "GET", "path": "/api"}, "httpResponse": {"body": "ok"}}]"#;

    /// A scenario in a folder of its own, beside the files `files` names.
    fn in_folder(tail: &str, files: &[(&str, &str)]) -> (tempfile::TempDir, Result<Scenario, ScenarioError>) {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let s = Scenario::parse(&dir.path().join("s.toml"), format!("{HEAD}{tail}"));
        (dir, s)
    }

    fn mock_error(tail: &str, files: &[(&str, &str)]) -> String {
        let (dir, s) = in_folder(tail, files);
        s.expect_err("refused").to_string().replace(&dir.path().display().to_string(), "DIR")
    }

    #[test]
    fn a_mock_reads_its_expectations_beside_the_scenario_and_takes_the_cells_seed() {
        let tail = "[[service]]\nkind = \"mock\"\nname = \"mock-api\"\nexpectations = \"mock-api/mockserver.json\"\n[[service]]\nkind = \"redis\"\nseed = 7\n";
        let (_dir, s) = in_folder(tail, &[("mock-api/mockserver.json", EXPECTATIONS)]);
        let s = s.unwrap();
        let mock = &s.services[0];
        assert_eq!(
            (mock.kind, mock.name.as_str(), mock.port, mock.port()),
            (ServiceKind::Mock, "mock-api", None, 1080)
        );
        assert_eq!(
            mock.expectations_sha256.as_deref(),
            Some(crate::hash::sha256_hex(EXPECTATIONS.as_bytes()).as_str())
        );
        assert_eq!(s.expectations["mock-api"].as_ref(), EXPECTATIONS);
        assert_eq!((mock.seed, s.services[1].seed), (7, 7), "a mock carries its cell's seed");
        assert_eq!(s.services[1].expectations_sha256, None);
        // An absolute path, and a port of its own.
        let other = tempfile::tempdir().unwrap();
        let file = other.path().join("e.json");
        std::fs::write(&file, EXPECTATIONS).unwrap();
        let tail = format!(
            "[[service]]\nkind = \"mock\"\nexpectations = {:?}\nport = 1081\n",
            file.display().to_string()
        );
        let (_dir, s) = in_folder(&tail, &[]);
        let s = s.unwrap();
        assert_eq!((s.services[0].port(), s.services[0].seed), (1081, 1));
        assert_eq!(
            s.services[0].server_env(),
            ("BENCHLAB_MOCK_URL".to_string(), "http://127.0.0.1:1081".to_string())
        );
    }

    #[test]
    fn bad_mocks_are_refused_at_their_key() {
        let mock = |more: &str| format!("[[service]]\nkind = \"mock\"\nexpectations = \"e.json\"\n{more}");
        let ok = [("e.json", EXPECTATIONS)];
        let e = mock_error(&mock(""), &[]);
        assert!(e.starts_with("DIR/s.toml:14:16: cannot read expectations file DIR/e.json: "), "{e}");
        let e = mock_error(
            &mock(""),
            &[("e.json", r#"[{"httpRequest": {"path": "/"}, "httpResponse": {"statusCode": "200"}}]"#)],
        );
        assert_eq!(e, "DIR/s.toml:14:16: expectations file DIR/e.json: expectations[0].httpResponse.statusCode: expected a number, found a string");
        let e = mock_error(&mock(""), &[("e.json", "[")]);
        assert!(e.starts_with("DIR/s.toml:14:16: expectations file DIR/e.json: not JSON: "), "{e}");
        let big =
            format!("[{}]", vec![r#"{"httpRequest": {"path": "/"}, "httpResponse": {}}"#; 2000].join(","));
        let e = mock_error(&mock(""), &[("e.json", &big)]);
        assert!(
            e.contains("bytes, at most 65536: its text reaches the service in one environment variable"),
            "{e}"
        );
        let refused = [
            ("[[service]]\nkind = \"mock\"\n".to_string(), "13:8: a mock service needs `expectations`: the file of its canned answers (MockServer-style JSON)"),
            ("[[service]]\nkind = \"redis\"\nexpectations = \"e.json\"\n".into(), "14:16: `expectations` is a mock service's; the redis service has none"),
            ("[[service]]\nkind = \"api\"\nport = 1080\n".into(), "14:8: `port` is a mock service's; the api service listens on 8901"),
            (mock("port = 70000\n"), "15:8: port 70000 is out of range (1 to 65535)"),
            (mock("port = 0\n"), "15:8: port 0 is out of range (1 to 65535)"),
            (mock("port = 6379\n"), "15:8: port 6379 is the redis service's"),
            (mock("port = 8000\n"), "15:8: port 8000 is the server's own (HTTP servers listen on it)"),
            (mock("seed = 3\n"), "15:8: a mock service has no seed: it serves its expectations"),
        ];
        for (tail, expected) in refused {
            assert_eq!(mock_error(&tail, &ok), format!("DIR/s.toml:{expected}"));
        }
        assert!(mock_error(&mock("fault = \"exit@3\"\n"), &ok).contains("the mock service has no faults"));
        assert!(mock_error(&mock("expectaions = \"x\"\n"), &ok).contains("unknown field `expectaions`"));
    }
}
