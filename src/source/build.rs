//! A source's own Dockerfile made buildable on the lab's bases: each `FROM` of an image rewritten
//! to the base its `[source.base]` rule maps it to (`{{BASE}}` for the final stage's, `{{FETCH_BASE}}`
//! for one other), the host's CA bundle and the rule's build environment handed to every stage as
//! build arguments, and the server's command read from the final stage's `ENTRYPOINT`/`CMD`; what
//! differs from the Dockerfile as written, in words, for the cells' deviations. Pure: text in,
//! text out; the engine build is the image side's (`recipe::ImagePlan::from_source`).

use std::collections::BTreeMap;

use super::dockerfile::{froms, instructions, map, Mapped};
use crate::spec::{BaseRule, DebianSuite};

/// The build context's name for the host's CA bundle (`recipe::CA_FILE` is this one).
pub const CA_IN_CONTEXT: &str = "fetch-ca.pem";

/// Where every stage finds the host's CA bundle (a TLS-intercepting proxy stands between this
/// host and the package registries). Build arguments point the usual package managers at it.
pub const CA_PATH: &str = "/etc/benchlab/fetch-ca.pem";

/// The variables that make pip, requests, npm, Node, cargo, curl and git trust [`CA_PATH`]:
/// build arguments (`ARG NAME=value`), so they reach each `RUN` but not the image's config.
pub const CA_VARIABLES: &[&str] = &[
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "NODE_EXTRA_CA_CERTS",
    "NPM_CONFIG_CAFILE",
    "CARGO_HTTP_CAINFO",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
];

/// A lab base as a `[source.base]` rule names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedBase {
    pub suite: DebianSuite,
    pub packages: Vec<String>,
}

/// A source's Dockerfile, rewritten for the lab's bases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceBuild {
    /// The Dockerfile with `{{BASE}}` and `{{FETCH_BASE}}` where its images were.
    pub template: String,
    /// The final stage's base.
    pub base: MappedBase,
    /// The base of the other stages, when it differs from the final one.
    pub other_base: Option<MappedBase>,
    /// The final stage's `ENTRYPOINT` and `CMD` together, as the engine would run them; None
    /// when it has neither.
    pub command: Option<Vec<String>>,
    /// The `EXPOSE`d ports of the final stage, as written.
    pub exposed: Vec<u16>,
    /// What differs from the Dockerfile as written, one sentence each.
    pub deviations: Vec<String>,
    /// Files the rewritten Dockerfile copies beside the source's (name, text): pip constraints.
    pub extra_files: Vec<(String, String)>,
}

/// Why a source's Dockerfile cannot be built here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A `[source.base]` rule says an image cannot be had on this host: the server is not measured.
    #[error("Dockerfile line {line}: `FROM {image}` cannot be had here ({why})")]
    Unavailable { line: usize, image: String, why: String },
    /// Something the scenario must fix: the message says what to write.
    #[error("{0}")]
    Input(String),
}

/// Rewrites `text` (a source's Dockerfile) with the scenario's `rules`.
pub fn prepare(text: &str, rules: &BTreeMap<String, BaseRule>) -> Result<SourceBuild, Refusal> {
    let mapped = map(&froms(text), rules);
    if mapped.is_empty() {
        return Err(Refusal::Input("the Dockerfile has no FROM instruction".into()));
    }
    let mut bases: Vec<MappedBase> = Vec::new();
    let mut deviations = Vec::new();
    for (f, m) in &mapped {
        match m {
            Mapped::Unavailable(why) => {
                return Err(Refusal::Unavailable { line: f.line, image: f.image.clone(), why: why.clone() })
            }
            Mapped::Unmapped => {
                return Err(Refusal::Input(format!(
                    "Dockerfile line {}: no [source.base] rule for `FROM {}` (no registry is reached from this host): \
                     write `\"{}\" = {{ suite = \"bookworm\", packages = [...] }}` or `{{ unavailable = \"why\" }}` under [source.base]",
                    f.line, f.image, f.image
                )))
            }
            Mapped::Base { suite, packages } => {
                let b = MappedBase { suite: *suite, packages: packages.clone() };
                let rule = &rules[&f.image];
                deviations.push(format!(
                    "Dockerfile line {}: `FROM {}` built on a lab base instead (Debian {}{}), by the scenario's [source.base] rule{}",
                    f.line,
                    f.image,
                    suite.as_str(),
                    if packages.is_empty() { String::new() } else { format!(" with {}", packages.join(", ")) },
                    match (rule.build_env.is_empty(), rule.pip_constraints.is_empty()) {
                        (true, true) => String::new(),
                        _ => format!(
                            ", built with {}",
                            rule.build_env
                                .iter()
                                .map(|(k, v)| format!("{k}={v}"))
                                .chain((!rule.pip_constraints.is_empty()).then(|| format!(
                                    "pip constrained to {}",
                                    rule.pip_constraints.join(", ")
                                )))
                                .collect::<Vec<_>>()
                                .join(" ")
                        ),
                    }
                ));
                if !bases.contains(&b) {
                    bases.push(b);
                }
            }
            Mapped::Stage(_) => {}
        }
    }
    // The final stage's base is {{BASE}}; a stage starting from an earlier one inherits its base.
    let final_base = base_of_stage(&mapped, mapped.len() - 1)
        .ok_or_else(|| Refusal::Input("the Dockerfile's final stage starts from no image".into()))?;
    let others: Vec<&MappedBase> = bases.iter().filter(|b| **b != final_base).collect();
    if others.len() > 1 {
        return Err(Refusal::Input(format!(
            "the Dockerfile's stages map to {} different lab bases; the lab builds on two at most (map the build stages to one base)",
            bases.len()
        )));
    }
    let other_base = others.first().map(|b| (*b).clone());

    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let from_at: BTreeMap<usize, usize> = mapped.iter().enumerate().map(|(i, (f, _))| (f.line, i)).collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(&k) = from_at.get(&(i + 1)) else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let (f, m) = &mapped[k];
        if line.trim_end().ends_with('\\') {
            return Err(Refusal::Input(format!(
                "Dockerfile line {}: a FROM continued on the next line is not rewritten by the lab; write it on one line",
                f.line
            )));
        }
        let image = match m {
            Mapped::Stage(s) => s.clone(),
            Mapped::Base { suite, packages } => {
                let b = MappedBase { suite: *suite, packages: packages.clone() };
                if b == final_base {
                    "{{BASE}}".to_string()
                } else {
                    "{{FETCH_BASE}}".to_string()
                }
            }
            _ => unreachable!("refused above"),
        };
        if line.contains("--platform") {
            deviations.push(format!(
                "Dockerfile line {}: its --platform flag dropped (the lab builds for this host)",
                f.line
            ));
        }
        out.push_str(&format!("FROM {image}"));
        if let Some(stage) = &f.stage {
            out.push_str(&format!(" AS {stage}"));
        }
        out.push('\n');
        out.push_str(&stage_prologue(m, rules.get(&f.image)));
    }
    deviations.push(format!(
        "the host's CA bundle is at {CA_PATH} in every stage (the runtime image's included) and named to the build's package managers by build arguments ({}): this host reaches package registries through a TLS-intercepting proxy",
        CA_VARIABLES.join(", ")
    ));
    let (command, exposed) = final_stage_facts(text);
    let mut extra_files: Vec<(String, String)> = mapped
        .iter()
        .filter_map(|(f, _)| rules.get(&f.image))
        .filter(|r| !r.pip_constraints.is_empty())
        .map(|r| constraints_file(&r.pip_constraints))
        .collect();
    extra_files.sort();
    extra_files.dedup();
    Ok(SourceBuild { template: out, base: final_base, other_base, command, exposed, deviations, extra_files })
}

/// The lab's lines after a stage's `FROM`: the CA bundle and the build arguments that name it,
/// then the rule's build environment. A stage from an earlier stage has the bundle already, but
/// build arguments are per stage.
fn stage_prologue(m: &Mapped, rule: Option<&BaseRule>) -> String {
    let mut s = String::new();
    if !matches!(m, Mapped::Stage(_)) {
        s.push_str(&format!("COPY {CA_IN_CONTEXT} {CA_PATH}\n"));
    }
    for v in CA_VARIABLES {
        s.push_str(&format!("ARG {v}={CA_PATH}\n"));
    }
    if let Some(rule) = rule {
        for (k, v) in &rule.build_env {
            s.push_str(&format!("ARG {k}={}\n", quote(v)));
        }
        if !rule.pip_constraints.is_empty() {
            s.push_str(&format!(
                "COPY {} {PIP_CONSTRAINTS_PATH}\n",
                constraints_file(&rule.pip_constraints).0
            ));
            s.push_str(&format!("ARG PIP_CONSTRAINT={PIP_CONSTRAINTS_PATH}\n"));
        }
    }
    s
}

/// Where a stage finds its rule's pip constraints.
pub const PIP_CONSTRAINTS_PATH: &str = "/etc/benchlab/pip-constraints.txt";

/// A rule's pip constraints as a build-context file: its name (by content) and its text.
pub fn constraints_file(constraints: &[String]) -> (String, String) {
    let text: String = constraints.iter().map(|c| format!("{c}\n")).collect();
    (format!("benchlab-pip-constraints-{}.txt", &crate::hash::sha256_hex(text.as_bytes())[..12]), text)
}

/// A build argument's default, quoted when it holds anything but plain characters.
fn quote(v: &str) -> String {
    if !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || "._-/:=,+@".contains(c)) {
        v.to_string()
    } else {
        format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// The lab base a stage builds on: its own rule's, or that of the stage it starts from.
fn base_of_stage(mapped: &[(super::dockerfile::From, Mapped)], i: usize) -> Option<MappedBase> {
    match &mapped[i].1 {
        Mapped::Base { suite, packages } => Some(MappedBase { suite: *suite, packages: packages.clone() }),
        Mapped::Stage(name) => {
            let j = mapped[..i]
                .iter()
                .rposition(|(f, _)| f.stage.as_deref().is_some_and(|s| s.eq_ignore_ascii_case(name)))?;
            base_of_stage(mapped, j)
        }
        _ => None,
    }
}

/// A stage's name, `ENTRYPOINT`, `CMD` and `EXPOSE`d ports, as far as it has them.
type StageFacts = (Option<String>, Option<Vec<String>>, Option<Vec<String>>, Vec<u16>);

/// The final stage's command (`ENTRYPOINT` then `CMD`, exec or shell form; a stage from an
/// earlier stage inherits its command) and its `EXPOSE`d ports.
fn final_stage_facts(text: &str) -> (Option<Vec<String>>, Vec<u16>) {
    let mut stages: Vec<StageFacts> = Vec::new();
    for (_, kw, rest) in instructions(text) {
        match kw.as_str() {
            "FROM" => {
                let words: Vec<&str> = rest.split_whitespace().filter(|w| !w.starts_with("--")).collect();
                let parent = words.first().and_then(|img| {
                    stages
                        .iter()
                        .rev()
                        .find(|s| s.0.as_deref().is_some_and(|n| n.eq_ignore_ascii_case(img)))
                        .cloned()
                });
                let name = match words.get(1..) {
                    Some([as_, name, ..]) if as_.eq_ignore_ascii_case("as") => Some(name.to_string()),
                    _ => None,
                };
                let (entry, cmd, exposed) = parent.map(|p| (p.1, p.2, p.3)).unwrap_or_default();
                stages.push((name, entry, cmd, exposed));
            }
            "ENTRYPOINT" if !stages.is_empty() => {
                let last = stages.last_mut().expect("a stage");
                last.1 = Some(command_form(&rest));
                // An ENTRYPOINT resets the CMD inherited from a parent stage, as Docker does.
                last.2 = None;
            }
            "CMD" if !stages.is_empty() => stages.last_mut().expect("a stage").2 = Some(command_form(&rest)),
            "EXPOSE" if !stages.is_empty() => {
                let ports = rest.split_whitespace().filter_map(|p| p.split('/').next()?.parse::<u16>().ok());
                stages.last_mut().expect("a stage").3.extend(ports);
            }
            _ => {}
        }
    }
    let Some((_, entry, cmd, exposed)) = stages.pop() else { return (None, Vec::new()) };
    let command: Vec<String> = entry.into_iter().flatten().chain(cmd.into_iter().flatten()).collect();
    ((!command.is_empty()).then_some(command), exposed)
}

/// A `CMD`/`ENTRYPOINT` argument: the exec form (a JSON array) as its words, the shell form
/// through `/bin/sh -c`.
fn command_form(rest: &str) -> Vec<String> {
    let t = rest.trim();
    if t.starts_with('[') {
        if let Ok(words) = serde_json::from_str::<Vec<String>>(t) {
            return words;
        }
    }
    vec!["/bin/sh".into(), "-c".into(), t.to_string()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(suite: DebianSuite, packages: &[&str]) -> BaseRule {
        BaseRule {
            suite: Some(suite),
            packages: packages.iter().map(|p| p.to_string()).collect(),
            unavailable: None,
            build_env: BTreeMap::new(),
            pip_constraints: Vec::new(),
        }
    }

    const TWO_STAGES: &str = "FROM rust:1.88-slim AS builder\nWORKDIR /app\nCOPY . .\nRUN cargo build --release\n\n# runtime\nFROM debian:bookworm-slim\nCOPY --from=builder /app/target/release/srv .\nEXPOSE 8084\nCMD [\"./srv\"]\n";

    #[test]
    fn each_image_becomes_its_base_slot_with_the_ca_and_build_arguments() {
        let mut rules = BTreeMap::from([
            ("rust:1.88-slim".to_string(), rule(DebianSuite::Trixie, &["cargo", "rustc"])),
            ("debian:bookworm-slim".to_string(), rule(DebianSuite::Bookworm, &["ca-certificates"])),
        ]);
        rules.get_mut("rust:1.88-slim").unwrap().build_env.insert("CARGO_NET_RETRY".into(), "5".into());
        let b = prepare(TWO_STAGES, &rules).unwrap();
        assert_eq!(
            b.base,
            MappedBase { suite: DebianSuite::Bookworm, packages: vec!["ca-certificates".into()] }
        );
        assert_eq!(b.other_base.as_ref().unwrap().suite, DebianSuite::Trixie);
        let lines: Vec<&str> = b.template.lines().collect();
        assert_eq!(lines[0], "FROM {{FETCH_BASE}} AS builder");
        assert_eq!(lines[1], format!("COPY fetch-ca.pem {CA_PATH}"));
        assert!(b.template.contains("ARG CARGO_NET_RETRY=5\nWORKDIR /app\n"), "{}", b.template);
        assert!(b.template.contains("\nFROM {{BASE}}\nCOPY fetch-ca.pem"), "{}", b.template);
        // Everything the source wrote is still there, in order.
        for l in TWO_STAGES.lines().filter(|l| !l.starts_with("FROM")) {
            assert!(b.template.lines().any(|t| t == l), "{l:?} lost");
        }
        assert_eq!(b.command, Some(vec!["./srv".to_string()]));
        assert_eq!(b.exposed, vec![8084]);
        assert!(b.deviations[0].starts_with("Dockerfile line 1: `FROM rust:1.88-slim` built on a lab base instead (Debian trixie with cargo, rustc)"));
        assert!(b.deviations[0].ends_with("built with CARGO_NET_RETRY=5"), "{}", b.deviations[0]);
    }

    #[test]
    fn a_missing_or_unavailable_image_is_refused_with_what_to_do() {
        let rules = BTreeMap::from([(
            "rust:1.88-slim".to_string(),
            BaseRule { unavailable: Some("no crates here".into()), ..Default::default() },
        )]);
        assert_eq!(
            prepare(TWO_STAGES, &rules).unwrap_err(),
            Refusal::Unavailable { line: 1, image: "rust:1.88-slim".into(), why: "no crates here".into() }
        );
        let e = prepare("FROM python:3.11-slim\nCMD python app.py\n", &BTreeMap::new()).unwrap_err();
        assert!(e.to_string().contains("no [source.base] rule for `FROM python:3.11-slim`"), "{e}");
        assert!(e.to_string().contains("\"python:3.11-slim\" = { suite"), "{e}");
    }

    #[test]
    fn the_command_is_entrypoint_then_cmd_of_the_final_stage_and_shell_forms_go_through_sh() {
        let rules =
            BTreeMap::from([("python:3.11-slim".to_string(), rule(DebianSuite::Bookworm, &["python3"]))]);
        let b = prepare("FROM python:3.11-slim AS base\nCMD [\"a\"]\nFROM base\nENTRYPOINT [\"uvicorn\"]\nCMD [\"main:app\", \"--port\", \"8082\"]\n", &rules).unwrap();
        assert_eq!(
            b.command,
            Some(vec!["uvicorn".into(), "main:app".into(), "--port".into(), "8082".into()])
        );
        assert!(b.template.contains("FROM base\nARG SSL_CERT_FILE"), "{}", b.template);
        let b = prepare("FROM python:3.11-slim\nCMD python -m app\n", &rules).unwrap();
        assert_eq!(b.command, Some(vec!["/bin/sh".into(), "-c".into(), "python -m app".into()]));
        let b = prepare("FROM python:3.11-slim AS one\nCMD [\"x\"]\nFROM one\n", &rules).unwrap();
        assert_eq!(b.command, Some(vec!["x".into()]), "a stage inherits its parent's command");
    }
}
