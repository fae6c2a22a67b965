//! Differences between what a reproduced source states (the scenario's `[source]` and a server's
//! `source_runtime`) and what a cell ran, in words: derived at run time into the record's
//! `environment.deviations`, and again by `benchlab verify` for records written before that.
//! Pure: it reads the statement and the cell's environment, nothing else.

use super::manifest::Environment;
use crate::spec::SourceStatement;

/// What a cell ran, beside its environment: what the derivation compares with the statement.
#[derive(Debug, Clone, Copy)]
pub struct CellRan<'a> {
    pub env: &'a Environment,
    /// The runtime version the source used, as the server entry states it.
    pub source_runtime: Option<&'a str>,
    /// What the server stands in for, when its entry declares it a stand-in (`stand_in`).
    pub stand_in: Option<&'a str>,
    /// The source's program the cell ran (`program` of its server entry), if any.
    pub program: Option<&'a str>,
    /// The suite of the lab's server the cell ran otherwise.
    pub suite: &'a str,
    /// The cell runs the lab's built-in null server (no SDK, no program to compare).
    pub null_server: bool,
}

/// Every difference between the statement and what the cell ran, one sentence each, in a fixed
/// order: runtime, packages, program (or the stand-in), hardware, kernel, client.
pub fn derive(stated: &SourceStatement, ran: &CellRan<'_>) -> Vec<String> {
    let env = ran.env;
    let mut out = Vec::new();
    out.extend(runtime_deviation(&env.runtime.name, ran.source_runtime, &env.runtime.version));
    let norm = |s: &str| s.trim().to_ascii_lowercase().replace('_', "-");
    for (name, version) in &stated.packages {
        let mine = env.image.packages.iter().find(|p| norm(&p.name) == norm(name));
        if let Some(p) = mine.filter(|p| p.version != *version) {
            out.push(format!("this cell ran {name} {} where the source states {name} {version}", p.version));
        }
    }
    if let Some(what) = ran.stand_in {
        out.push(format!("this cell ran a stand-in: the lab's own `{}` suite server for {what}", ran.suite));
    } else if let Some(p) = &stated.program {
        if ran.program != Some(p.as_str()) && !ran.null_server {
            out.push(format!(
                "this cell ran the lab's own `{}` suite server, not the source's program ({p})",
                ran.suite
            ));
        }
    }
    if let Some(h) = &stated.hardware {
        let host = &env.host;
        let same_model = host.cpu_model.to_lowercase().contains(&h.cpu_model.to_lowercase());
        if !same_model || host.logical_cpus != h.cpus {
            out.push(format!(
                "the source measured on {} × {} CPUs; this cell ran on {} × {} CPUs",
                h.cpu_model, h.cpus, host.cpu_model, host.logical_cpus
            ));
        }
    }
    if let Some(k) = stated.kernel.as_ref().filter(|k| **k != env.host.kernel) {
        out.push(format!("the source ran kernel {k}; this cell's host ran {}", env.host.kernel));
    }
    if let Some(c) = &stated.client {
        out.push(format!(
            "the source's client: {c}; this cell's client: benchlab {}'s driver (Rust)",
            env.benchlab.version
        ));
    }
    out
}

/// The deviation to record when a reproduction asked for a runtime version this cell did not
/// run ("3.12" is met by any 3.12.x; "3.12.3" only by itself).
pub fn runtime_deviation(kind: &str, wanted: Option<&str>, actual: &str) -> Option<String> {
    let wanted = wanted?;
    let met = actual == wanted || actual.starts_with(&format!("{wanted}."));
    (!met).then(|| {
        format!("the reproduced source ran {kind} {wanted}, which cannot be had here; this cell ran {kind} {actual}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::manifest::Package;
    use crate::spec::StatedHardware;

    fn env() -> Environment {
        let mut e = crate::record::tests::sample_record("x").environment.into_inner();
        e.runtime.name = "cpython".into();
        e.runtime.version = "3.13.5".into();
        e.host.cpu_model = "Intel(R) Xeon(R) Processor".into();
        e.host.logical_cpus = 2;
        e.image.packages = vec![
            Package { name: "fastmcp".into(), version: "0.4.1".into() },
            Package { name: "mcp".into(), version: "1.1.1".into() },
        ];
        e
    }

    fn ran<'a>(env: &'a Environment, program: Option<&'a str>) -> CellRan<'a> {
        CellRan {
            env,
            source_runtime: Some("3.12.3"),
            stand_in: None,
            program,
            suite: "tax",
            null_server: false,
        }
    }

    #[test]
    fn every_stated_difference_is_derived_and_nothing_else() {
        let e = env();
        let stated = SourceStatement {
            file: None,
            kernel: None,
            hardware: Some(StatedHardware { cpu_model: "AMD EPYC 9654".into(), cpus: 8 }),
            client: Some("a Python client".into()),
            packages: [("fastmcp", "0.4.1"), ("mcp", "1.1.2"), ("zod", "3.24.1")]
                .into_iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            program: Some("seed-000".into()),
            base: Default::default(),
            repository: None,
            results: Vec::new(),
        };
        let d = derive(&stated, &ran(&e, None));
        assert_eq!(d.len(), 5, "{d:#?}");
        assert!(d[0].contains("cpython 3.12.3") && d[0].contains("3.13.5"), "{}", d[0]);
        assert_eq!(d[1], "this cell ran mcp 1.1.1 where the source states mcp 1.1.2");
        assert!(d[2].contains("`tax` suite server") && d[2].contains("seed-000"), "{}", d[2]);
        assert!(d[3].contains("AMD EPYC 9654 × 8") && d[3].contains("× 2 CPUs"), "{}", d[3]);
        assert!(d[4].starts_with("the source's client: a Python client;"), "{}", d[4]);
        // The program run, the same machine class and no client statement derive nothing more.
        let same = SourceStatement {
            hardware: Some(StatedHardware { cpu_model: "xeon".into(), cpus: 2 }),
            client: None,
            ..stated
        };
        let mut r = ran(&e, Some("seed-000"));
        r.source_runtime = Some("3.13");
        assert_eq!(derive(&same, &r), vec!["this cell ran mcp 1.1.1 where the source states mcp 1.1.2"]);
        assert!(derive(&SourceStatement::default(), &r).is_empty());
    }

    #[test]
    fn runtime_deviations_are_named() {
        assert_eq!(runtime_deviation("cpython", Some("3.13"), "3.13.5"), None);
        assert_eq!(runtime_deviation("cpython", Some("3.13.5"), "3.13.5"), None);
        assert_eq!(runtime_deviation("cpython", None, "3.11.2"), None);
        let d = runtime_deviation("cpython", Some("3.12.3"), "3.13.5").unwrap();
        assert!(d.contains("3.12.3") && d.contains("3.13.5"), "{d}");
        assert!(runtime_deviation("node", Some("22.1"), "22.12.0").is_some());
    }
}
