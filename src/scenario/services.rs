//! `[[service]]` entries: backing services every cell of the scenario gets beside its server.
//! Each is checked where it is written (known kind, a unique name, a fault only where one exists)
//! and against the workloads (the `shop` suite's gate writes, so no REST pass); what a server's
//! recipe needs beyond them the plan adds (`orchestrate::plan`).

use std::ops::Range;

use toml::Spanned;

use super::raw::RawService;
use super::{Scenario, ScenarioError};
use crate::spec::{ServiceKind, ServiceSpec};

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
            if self.services.iter().any(|s| s.kind == kind) {
                return Err(self.error_at(
                    r.kind.span(),
                    format!("a second {} service: a cell has one of each kind (they share its loopback and port {})", kind.as_str(), kind.port()),
                ));
            }
            if let Some(f) = &r.fault {
                check_fault(kind, f.get_ref()).map_err(|m| self.error_at(f.span(), m))?;
            }
            let seed = r.seed.as_ref().map_or(DEFAULT_SEED, |s| *s.get_ref());
            if let Some(other) = self.services.iter().find(|s| s.seed != seed) {
                let span = r.seed.as_ref().map_or_else(|| r.kind.span(), |s| s.span());
                return Err(self.error_at(
                    span,
                    format!("seed {seed} differs from service {:?}'s seed {}: the services of a cell hold one data set", other.name, other.seed),
                ));
            }
            self.services.push(ServiceSpec {
                name,
                kind,
                seed,
                fault: r.fault.as_ref().map(|f| f.get_ref().clone()),
                declared_by: None,
            });
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

/// The faults a service can be told to have: the API's `exit@<requests>` only.
fn check_fault(kind: ServiceKind, fault: &str) -> Result<(), String> {
    match kind {
        ServiceKind::Api => match fault.strip_prefix("exit@").map(str::parse::<u64>) {
            Some(Ok(n)) if n > 0 => Ok(()),
            _ => Err(format!(
                "fault {fault:?}: the API service's one fault is \"exit@<requests>\" (e.g. \"exit@500\")"
            )),
        },
        ServiceKind::Redis | ServiceKind::Postgres => Err(format!(
            "fault {fault:?}: the {} service has no faults (the API service has \"exit@<requests>\")",
            kind.as_str()
        )),
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
            e.contains("s.toml:13:8: unknown service kind \"mongo\" (known: redis, api, postgres)"),
            "{e}"
        );
        assert!(error(&format!("{both}[[service]]\nkind = \"redis\"\nname = \"kv2\"\n"))
            .contains("a second redis service"));
        assert!(error(&format!("{both}port = 1\n")).contains("unknown field `port`"));
        assert!(error("[[service]]\nkind = \"redis\"\nseed = 2\n[[service]]\nkind = \"api\"\n")
            .contains("seed 1 differs from service \"redis\"'s seed 2"));
        assert!(error("[[service]]\nkind = \"redis\"\nfault = \"exit@3\"\n[[service]]\nkind = \"api\"\n")
            .contains("the redis service has no faults"));
        assert!(error("[[service]]\nkind = \"redis\"\n[[service]]\nkind = \"api\"\nfault = \"exit@0\"\n")
            .contains("\"exit@<requests>\""));
        // The shop suite's needs are the plan's to add (the recipes declare them), not refused.
        assert!(parse("[[service]]\nkind = \"redis\"\n").is_ok());
    }
}
