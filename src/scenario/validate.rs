//! Checks across a scenario's entries, made once its servers are known: server ids and suites,
//! and each workload against the servers it runs on (their suites' tools, their transports),
//! with the names its cells take. Errors point at the entry at fault.

use std::ops::Range;

use toml::Spanned;

use super::raw::{RawWorkload, ServerEntry};
use super::{Scenario, ScenarioError};
use crate::mcp::suite::AnySuite;
use crate::spec::Workload;
use crate::text::glob_match;

/// The span of a time limit written as 0, which would fail every cell before it began.
pub(super) fn zero_limit(v: &Option<Spanned<u64>>) -> Option<Range<usize>> {
    v.as_ref().filter(|v| *v.get_ref() == 0).map(|v| v.span())
}

/// What a zero limit's error says about its key.
pub(super) fn limit_rule(key: &str) -> String {
    format!("`{key}` is a limit in milliseconds, at least 1")
}

impl Scenario {
    /// A server built from its `source` has no recipe keys, and only such a server has `port`,
    /// `http_path` or `command`.
    fn check_source_server(&self, srv: &ServerEntry) -> Result<(), ScenarioError> {
        let id = srv.id.get_ref();
        let from_source = srv.family.get_ref() == crate::recipe::SOURCE_FAMILY;
        let first = |spans: Vec<Option<Range<usize>>>| spans.into_iter().flatten().next();
        match (&srv.source, from_source) {
            (Some(_), false) => Err(self.error_at(
                srv.family.span(),
                format!("server {id:?}: a server with a `source` is built from it, not from a recipe: leave out `family`"),
            )),
            (None, true) => Err(self.error_at(
                srv.id.span(),
                format!(
                    "server {id:?}: no `family` and no `source`: name a recipe family, or the server's own code \
                     (`source = {{ git = URL, commit = HASH, path = \"dir\" }}`)"
                ),
            )),
            (Some(_), true) => match first(vec![
                srv.version.as_ref().map(|v| v.span()),
                srv.runtime.as_ref().map(|v| v.span()),
                srv.api.as_ref().map(|v| v.span()),
                srv.program.as_ref().map(|v| v.span()),
                srv.lock.as_ref().map(|v| v.span()),
                srv.bytecode.as_ref().map(|v| v.span()),
                srv.reply.as_ref().map(|v| v.span()),
                srv.session.as_ref().map(|v| v.span()),
            ]) {
                Some(span) => Err(self.error_at(
                    span,
                    format!(
                        "server {id:?}: a server built from its `source` has no recipe, so no version, runtime, api, program, lock, bytecode, reply or session to choose"
                    ),
                )),
                None => Ok(()),
            },
            (None, false) => match first(vec![
                srv.port.as_ref().map(|v| v.span()),
                srv.http_path.as_ref().map(|v| v.span()),
                srv.command.as_ref().map(|v| v.span()),
            ]) {
                Some(span) => Err(self.error_at(
                    span,
                    format!("server {id:?}: `port`, `http_path` and `command` are declared for a server built from its `source`; a recipe's server follows its recipe"),
                )),
                None => Ok(()),
            },
        }
    }

    /// Refuses an unknown scenario suite, at `span` (its key).
    pub(super) fn check_suite(&self, span: Range<usize>) -> Result<(), ScenarioError> {
        if self.suite_named(&self.suite).is_none() {
            let names = self.suite_names();
            return Err(
                self.error_at(span, format!("unknown suite {:?} (known: {})", self.suite, names.join(", ")))
            );
        }
        Ok(())
    }

    /// Server ids are well-formed and unique, and their suites known.
    pub(super) fn check_servers(&self) -> Result<(), ScenarioError> {
        for (i, srv) in self.servers.iter().enumerate() {
            let id = srv.id.get_ref();
            if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
                return Err(self.error_at(
                    srv.id.span(),
                    format!("server id {id:?} must be non-empty letters, digits, '-', '_' or '.'"),
                ));
            }
            if self.servers[..i].iter().any(|o| o.id.get_ref() == id) {
                return Err(self.error_at(srv.id.span(), format!("server id {id:?} is used twice")));
            }
            self.check_source_server(srv)?;
            if srv.family.get_ref() == crate::recipe::NULL_FAMILY {
                let spans = [
                    srv.program.as_ref().map(|v| v.span()),
                    srv.lock.as_ref().map(|v| v.span()),
                    srv.bytecode.as_ref().map(|v| v.span()),
                ];
                if let Some(span) = spans.into_iter().flatten().next() {
                    return Err(self.error_at(
                        span,
                        format!("server {id:?}: the built-in null server has no program, lock or bytecode to choose"),
                    ));
                }
            }
            if let Some(b) = &srv.bytecode {
                if *b.get_ref() == super::raw::Bytecode::Absent && srv.program.is_none() {
                    return Err(self.error_at(
                        b.span(),
                        format!("server {id:?}: `bytecode = \"none\"` builds a source's own program without bytecode; set `program` too"),
                    ));
                }
            }
            if let Some(w) = &srv.workers {
                self.check_workers(srv, w)?;
            }
            if let Some(span) = zero_limit(&srv.startup_ms) {
                return Err(self.error_at(span, format!("server {id:?}: {}", limit_rule("startup_ms"))));
            }
            if let Some(suite) = &srv.suite {
                if self.suite_named(suite).is_none() {
                    return Err(
                        self.error_at(srv.id.span(), format!("server {id:?}: unknown suite {suite:?}"))
                    );
                }
            }
        }
        Ok(())
    }

    /// Types a `[[workload]]` table, checks each of its workloads against the servers it runs
    /// on, and adds them with their cell-id names.
    pub(super) fn add_workload(&mut self, raw_w: &Spanned<RawWorkload>) -> Result<(), ScenarioError> {
        let suite = self.suite_named(&self.suite).expect("checked above");
        let typed = raw_w.get_ref().typed().map_err(|(span, m)| self.error_at(span, m))?;
        let only = match raw_w.get_ref().servers.as_ref() {
            Some(list) => Some(self.workload_server_ids(list)?),
            None => None,
        };
        for (workload, suffix) in typed {
            let w = Spanned::new(raw_w.span(), workload);
            self.check_workload(&w, raw_w.get_ref(), only.as_deref(), &suite)?;
            if self.workloads.contains(w.get_ref()) {
                return Err(self.error_at(w.span(), "this workload is listed twice"));
            }
            let name = self.workload_name(raw_w.get_ref(), &w, &suffix)?;
            self.workloads.push(w.get_ref().clone());
            self.workload_names.push(name);
            self.workload_servers.push(only.clone());
        }
        Ok(())
    }

    /// A server's `workers`: a count the lab can give, on a server that has a multi-worker mode.
    fn check_workers(&self, srv: &ServerEntry, w: &Spanned<u32>) -> Result<(), ScenarioError> {
        let (id, n) = (srv.id.get_ref(), *w.get_ref());
        let refuse = |m: String| Err(self.error_at(w.span(), format!("server {id:?}: {m}")));
        if !(1..=64).contains(&n) {
            return refuse("`workers` is from 1 to 64".into());
        }
        if n == 1 {
            return Ok(());
        }
        if !srv.transport.as_ref().is_some_and(|t| t.get_ref().is_http()) {
            return refuse(
                "several workers need an HTTP server (a stdio server is the one process its client spawns)"
                    .into(),
            );
        }
        // Whether a recipe's server has a multi-worker launch is the recipe's to say (resolve).
        if srv.family.get_ref() == crate::recipe::NULL_FAMILY
            && srv
                .session
                .as_ref()
                .is_some_and(|s| *s.get_ref() == crate::mcp::transport::SessionMode::Stateful)
        {
            return refuse("the null server keeps a session in the worker that opened it: several workers serve stateless".into());
        }
        Ok(())
    }

    /// The server ids a workload's `servers` names: ids, or patterns with `*` (a matrix's ids,
    /// `rmcp-*-http`) that stand for every id they match, in the order the servers are listed.
    /// An id that is no server's, or a pattern that matches none, is an error at the list.
    fn workload_server_ids(&self, list: &Spanned<Vec<String>>) -> Result<Vec<String>, ScenarioError> {
        for entry in list.get_ref() {
            if !self.servers.iter().any(|x| glob_match(entry, x.id.get_ref())) {
                let what = if entry.contains('*') { "a pattern that matches no" } else { "no" };
                return Err(
                    self.error_at(list.span(), format!("`servers` names {entry:?}, {what} [[server]] id"))
                );
            }
        }
        Ok(self
            .servers
            .iter()
            .map(|x| x.id.get_ref())
            .filter(|id| list.get_ref().iter().any(|p| glob_match(p, id)))
            .cloned()
            .collect())
    }

    /// A workload's counts, and its tool and transport on every server it runs on.
    fn check_workload(
        &self,
        w: &Spanned<Workload>,
        raw: &RawWorkload,
        only: Option<&[String]>,
        suite: &AnySuite,
    ) -> Result<(), ScenarioError> {
        match w.get_ref() {
            Workload::ColdStart { spawns } if *spawns == 0 => {
                return Err(self.error_at(w.span(), "cold_start needs spawns >= 1"))
            }
            Workload::SerialCalls { calls, .. } if *calls == 0 => {
                return Err(self.error_at(w.span(), "serial_calls needs calls >= 1"))
            }
            _ => {}
        }
        let runs_on = |x: &&ServerEntry| only.is_none_or(|l| l.contains(x.id.get_ref()));
        for tool in w.get_ref().tools() {
            for srv in self.servers.iter().filter(runs_on) {
                let suite =
                    srv.suite.as_deref().and_then(|n| self.suite_named(n)).unwrap_or_else(|| suite.clone());
                if suite.call(tool, 0).is_none() {
                    return Err(self.error_at(
                        raw.flow_span_of(tool)
                            .or(raw.tool.as_ref().map(|t| t.span()))
                            .or(raw.mix.as_ref().map(|m| m.span()))
                            .unwrap_or(w.span()),
                        format!(
                            "{}: suite {} (of server {:?}) has no tool {tool:?} (it has {})",
                            w.get_ref().kind(),
                            suite.name(),
                            srv.id.get_ref(),
                            suite.tools().join(", ")
                        ),
                    ));
                }
            }
        }
        for srv in self.servers.iter().filter(runs_on) {
            let http = srv.transport.as_ref().is_some_and(|t| t.get_ref().is_http());
            if w.get_ref().is_load() != http {
                let msg = if http {
                    format!(
                        "a {} workload runs over stdio, but server {:?} is {}: limit the workload with `servers = [...]`",
                        w.get_ref().kind(),
                        srv.id.get_ref(),
                        srv.transport.as_ref().map_or("stdio", |t| t.get_ref().as_str())
                    )
                } else {
                    format!(
                        "a {} workload needs an HTTP server, but server {:?} is stdio: set its `transport` or limit the workload with `servers = [...]`",
                        w.get_ref().kind(),
                        srv.id.get_ref()
                    )
                };
                return Err(self.error_at(w.span(), msg));
            }
        }
        Ok(())
    }

    /// The name of a workload in cell ids: the table's `name` (or its kind) with the sweep's
    /// suffix, unique in the scenario.
    fn workload_name(
        &self,
        raw: &RawWorkload,
        w: &Spanned<Workload>,
        suffix: &str,
    ) -> Result<String, ScenarioError> {
        let name = match &raw.name {
            Some(n) => {
                let v = n.get_ref();
                if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
                    return Err(self.error_at(
                        n.span(),
                        format!("workload name {v:?} must be letters, digits, '-', '_' or '.'"),
                    ));
                }
                format!("{v}{suffix}")
            }
            None => format!("{}{suffix}", w.get_ref().kind()),
        };
        if self.workload_names.contains(&name) {
            return Err(self.error_at(
                w.span(),
                format!(
                    "a second workload named {name:?}: give each workload of the same kind its own `name`"
                ),
            ));
        }
        Ok(name)
    }
}
