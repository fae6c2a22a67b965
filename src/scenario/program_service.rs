//! A `[[service]]` of `kind = "program"`: a service of the scenario's own (a benchmark's Redis,
//! database or fixture program), checked where it is written: its command, the Debian packages
//! its image adds to the lab's bookworm base, its port, environment, readiness probe (`"tcp"`,
//! `{ http = "/path" }` or `{ command = [...] }`), seed command, reset policy (`"cell"`: a new
//! container for every cell) and its own CPU quota and memory limit. The lab's own kinds refuse
//! these keys, and a program refuses theirs.

use std::ops::Range;

use toml::Spanned;

use super::raw::RawService;
use super::{Scenario, ScenarioError};
use crate::spec::{CpuQuota, Readiness, ServiceKind, ServiceProgram};

impl Scenario {
    /// The program of a `kind = "program"` service (None for the lab's own kinds, which refuse
    /// a program's keys at the key).
    pub(super) fn program_fields(
        &mut self,
        r: &RawService,
        kind: ServiceKind,
    ) -> Result<Option<ServiceProgram>, ScenarioError> {
        let keys: [(&str, Option<Range<usize>>); 9] = [
            ("source", r.source.as_ref().map(Spanned::span)),
            ("packages", r.packages.as_ref().map(Spanned::span)),
            ("command", r.command.as_ref().map(Spanned::span)),
            ("env", r.env.as_ref().map(Spanned::span)),
            ("ready", r.ready.as_ref().map(Spanned::span)),
            ("seed_command", r.seed_command.as_ref().map(Spanned::span)),
            ("reset", r.reset.as_ref().map(Spanned::span)),
            ("cpus", r.cpus.as_ref().map(Spanned::span)),
            ("memory", r.memory.as_ref().map(Spanned::span)),
        ];
        if kind != ServiceKind::Program {
            if let Some((key, Some(span))) = keys.into_iter().find(|(_, s)| s.is_some()) {
                return Err(self.error_at(
                    span,
                    format!("`{key}` is a program service's (kind = \"program\"); the {} service is the lab's own", kind.as_str()),
                ));
            }
            return Ok(None);
        }
        if let Some(seed) = &r.seed {
            return Err(self.error_at(
                seed.span(),
                "a program service has no data seed of the lab's: its `seed_command` seeds it",
            ));
        }
        let name = r.name.as_ref().map_or("program", |n| n.get_ref().as_str());
        let source = match &r.source {
            Some(raw) => Some(self.service_source(name, raw)?),
            None => None,
        };
        if let (Some(_), Some(p)) = (&source, &r.packages) {
            return Err(self.error_at(
                p.span(),
                "a service built from its `source` gets its programs from its own Dockerfile: no `packages`",
            ));
        }
        let command = match r.command.as_ref().filter(|c| !c.get_ref().is_empty()) {
            Some(c) => c.get_ref().clone(),
            // Its Dockerfile's CMD/ENTRYPOINT, filled in when it is planned.
            None if source.is_some() && r.command.is_none() => Vec::new(),
            None => {
                let span = r.command.as_ref().map_or_else(|| r.kind.span(), Spanned::span);
                return Err(self.error_at(span, "a program service needs `command` (or a `source` whose Dockerfile has one): the program and its arguments, e.g. [\"/usr/bin/redis-server\", \"--port\", \"6390\"]"));
            }
        };
        if r.port.is_none() {
            return Err(self.error_at(r.kind.span(), "a program service needs `port`: where it listens on the cell's loopback (its readiness probe and the server's address)"));
        }
        let ready = match &r.ready {
            None => Readiness::Tcp,
            Some(v) => parse_ready(v.get_ref()).map_err(|m| self.error_at(v.span(), m))?,
        };
        let argv = |v: &Option<Spanned<Vec<String>>>,
                    key: &str|
         -> Result<Option<Vec<String>>, ScenarioError> {
            match v {
                Some(c) if c.get_ref().is_empty() || c.get_ref()[0].is_empty() => {
                    Err(self.error_at(c.span(), format!("`{key}` is a program and its arguments: not empty")))
                }
                other => Ok(other.as_ref().map(|c| c.get_ref().clone())),
            }
        };
        if let Some(reset) = &r.reset {
            if reset.get_ref() != "cell" {
                return Err(self.error_at(
                    reset.span(),
                    format!("reset {:?}: the one policy is \"cell\" (a new container, seeded again, for every cell); a service kept across cells is not built", reset.get_ref()),
                ));
            }
        }
        let cpus = match &r.cpus {
            Some(c) => Some(CpuQuota::from_cpus(*c.get_ref()).ok_or_else(|| {
                self.error_at(
                    c.span(),
                    format!("`cpus` is a CPU quota from 0.001 to 1024, not {}", c.get_ref()),
                )
            })?),
            None => None,
        };
        let memory_bytes = match &r.memory {
            Some(m) => Some(crate::text::parse_memory(m.get_ref()).map_err(|e| self.error_at(m.span(), e))?),
            None => None,
        };
        let packages = r.packages.as_ref().map(|p| p.get_ref().clone()).unwrap_or_default();
        if let Some(p) = &r.packages {
            if let Some(bad) = p.get_ref().iter().find(|n| !is_debian_package_name(n)) {
                return Err(self.error_at(p.span(), format!("{bad:?} is not a Debian package name")));
            }
        }
        Ok(Some(ServiceProgram {
            source,
            packages,
            command,
            env: r.env.as_ref().map(|e| e.get_ref().clone()).unwrap_or_default(),
            ready,
            seed_command: argv(&r.seed_command, "seed_command")?,
            cpus,
            memory_bytes,
        }))
    }
}

impl Scenario {
    /// A program service's `source`, checked as a server's is, and kept (as `service:<name>`) for
    /// `fetch_sources`.
    fn service_source(
        &mut self,
        name: &str,
        raw: &Spanned<super::raw::RawServerSource>,
    ) -> Result<crate::spec::ServerSource, ScenarioError> {
        let key = format!("{}{name}", super::sources::SERVICE_KEY);
        let r = self
            .source_ref(&key, raw.get_ref(), raw.span())
            .map_err(|(span, m)| self.error_at(span, format!("service {name:?}: {m}")))?;
        let source = r.source.clone();
        self.service_sources.push(r);
        Ok(source)
    }
}

/// `ready`: "tcp", { http = "/path" } or { command = ["prog", ...] }.
fn parse_ready(v: &toml::Value) -> Result<Readiness, String> {
    const FORMS: &str = "`ready` is \"tcp\", { http = \"/path\" } or { command = [\"program\", ...] }";
    match v {
        toml::Value::String(s) if s == "tcp" => Ok(Readiness::Tcp),
        toml::Value::Table(t) if t.len() == 1 => match t.iter().next().expect("one") {
            (k, toml::Value::String(path)) if k == "http" && path.starts_with('/') => {
                Ok(Readiness::Http { path: path.clone() })
            }
            (k, _) if k == "http" => Err(format!("{FORMS}: an http probe's path starts with '/'")),
            (k, toml::Value::Array(a)) if k == "command" => {
                let argv: Option<Vec<String>> = a.iter().map(|x| x.as_str().map(String::from)).collect();
                match argv {
                    Some(argv) if !argv.is_empty() && !argv[0].is_empty() => Ok(Readiness::Command { argv }),
                    _ => Err(format!("{FORMS}: a probe command is a non-empty array of strings")),
                }
            }
            _ => Err(FORMS.into()),
        },
        _ => Err(FORMS.into()),
    }
}

/// Debian's rule for package names: lower-case letters, digits, `+ - .`, two or more, starting
/// with a letter or digit.
fn is_debian_package_name(n: &str) -> bool {
    n.len() >= 2
        && n.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const HEAD: &str = "name = \"s\"\n[[server]]\nid = \"null\"\nfamily = \"benchlab-null\"\n[[workload]]\nkind = \"serial_calls\"\ntool = \"echo\"\ncalls = 5\n";

    fn parse(tail: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(Path::new("scenarios/s.toml"), format!("{HEAD}{tail}"))
    }

    fn error(tail: &str) -> String {
        parse(tail).expect_err("refused").to_string()
    }

    const CACHE: &str = "[[service]]\nkind = \"program\"\nname = \"cache\"\npackages = [\"redis-server\"]\ncommand = [\"/usr/bin/redis-server\", \"--port\", \"6390\"]\nport = 6390\n";

    #[test]
    fn a_program_service_reads_with_its_defaults_and_its_own_keys() {
        let s = parse(&format!("{CACHE}env = {{ A = \"1\" }}\nready = {{ command = [\"redis-cli\", \"-p\", \"6390\", \"ping\"] }}\nseed_command = [\"redis-cli\", \"-p\", \"6390\", \"set\", \"k\", \"v\"]\nreset = \"cell\"\ncpus = 0.5\nmemory = \"256MiB\"\n")).unwrap();
        let spec = &s.services[0];
        assert_eq!((spec.kind, spec.name.as_str(), spec.port()), (ServiceKind::Program, "cache", 6390));
        let p = spec.program.as_ref().unwrap();
        assert_eq!(p.packages, ["redis-server"]);
        assert_eq!(p.command[0], "/usr/bin/redis-server");
        assert_eq!(
            p.ready,
            Readiness::Command { argv: vec!["redis-cli".into(), "-p".into(), "6390".into(), "ping".into()] }
        );
        assert_eq!(p.seed_command.as_ref().unwrap()[3], "set");
        assert_eq!((p.cpus, p.memory_bytes), (CpuQuota::from_cpus(0.5), Some(256 << 20)));
        assert_eq!(spec.server_env(), ("BENCHLAB_SERVICE_CACHE".to_string(), "127.0.0.1:6390".to_string()));
        // Without `ready`, a TCP connection to its port; two programs in one scenario.
        let two = parse(&format!(
            "{CACHE}[[service]]\nkind = \"program\"\nname = \"db\"\ncommand = [\"x\"]\nport = 7000\n"
        ))
        .unwrap();
        assert_eq!(two.services[1].program.as_ref().unwrap().ready, Readiness::Tcp);
    }

    #[test]
    fn a_bad_program_service_is_refused_at_its_key() {
        let e = error("[[service]]\nkind = \"program\"\nport = 7000\n");
        assert!(e.contains("s.toml:10:8: a program service needs `command`"), "{e}");
        let e = error("[[service]]\nkind = \"program\"\ncommand = [\"x\"]\n");
        assert!(e.contains("s.toml:10:8: a program service needs `port`"), "{e}");
        let e = error(&format!("{CACHE}ready = \"http\"\n"));
        assert!(e.contains("s.toml:15:9: `ready` is \"tcp\""), "{e}");
        let e = error(&format!("{CACHE}reset = \"never\"\n"));
        assert!(e.contains("s.toml:15:9: reset \"never\": the one policy is \"cell\""), "{e}");
        let e = error(&format!("{CACHE}seed_command = []\n"));
        assert!(e.contains("s.toml:15:16: `seed_command` is a program"), "{e}");
        let e = error(&format!("{CACHE}seed = 3\n"));
        assert!(e.contains("s.toml:15:8: a program service has no data seed"), "{e}");
        let e = error(&format!("{CACHE}memory = \"lots\"\n"));
        assert!(e.contains("s.toml:15:10:"), "{e}");
        let e = error("[[service]]\nkind = \"redis\"\ncommand = [\"x\"]\n");
        assert!(e.contains("s.toml:11:11: `command` is a program service's (kind = \"program\"); the redis service is the lab's own"), "{e}");
        let e = error(&format!(
            "{CACHE}[[service]]\nkind = \"program\"\nname = \"db\"\ncommand = [\"x\"]\nport = 6390\n"
        ));
        assert!(e.contains("s.toml:19:8: port 6390 is service \"cache\"'s too"), "{e}");
        let e = error(
            "[[service]]\nkind = \"program\"\npackages = [\"Redis\"]\ncommand = [\"x\"]\nport = 7000\n",
        );
        assert!(e.contains("\"Redis\" is not a Debian package name"), "{e}");
    }

    #[test]
    fn ready_takes_its_three_forms_and_says_them_otherwise() {
        let v = |s: &str| toml::from_str::<toml::Table>(&format!("r = {s}")).unwrap()["r"].clone();
        assert_eq!(parse_ready(&v("\"tcp\"")), Ok(Readiness::Tcp));
        assert_eq!(parse_ready(&v("{ http = \"/health\" }")), Ok(Readiness::Http { path: "/health".into() }));
        assert_eq!(
            parse_ready(&v("{ command = [\"redis-cli\", \"ping\"] }")),
            Ok(Readiness::Command { argv: vec!["redis-cli".into(), "ping".into()] })
        );
        for bad in ["\"http\"", "{ http = \"health\" }", "{ command = [] }", "{ tcp = 1, http = \"/\" }", "3"]
        {
            assert!(parse_ready(&v(bad)).unwrap_err().starts_with("`ready` is"), "{bad}");
        }
        assert!(is_debian_package_name("redis-server") && is_debian_package_name("g++"));
        assert!(
            !is_debian_package_name("Redis")
                && !is_debian_package_name("a")
                && !is_debian_package_name("x;y")
        );
    }
}
