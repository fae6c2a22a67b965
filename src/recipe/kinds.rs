//! The closed sets among recipe facts: the kind of runtime an image runs its server on, and the
//! locker that pins a runtime's dependencies. Parsed once, from `recipe.toml`; records keep their
//! names (`as_str`), exactly as before these were enums.

use serde::{Deserialize, Serialize};

/// The kind of runtime a server runs on (a recipe's `[runtime.*] kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    /// CPython: a venv, locked by uv.
    Cpython,
    /// PyPy (Debian's `pypy3`): a venv of PyPy's, locked by uv for that interpreter.
    Pypy,
    /// Node.js: `node_modules`, locked by npm.
    Node,
    /// Bun, with npm's lock.
    Bun,
    /// A Rust server compiled in the image's build stage from a `Cargo.lock` (`--locked
    /// --offline`) and shipped as a static binary; the "runtime" is the toolchain that built it.
    Rust,
    /// Anything else a recipe's own Dockerfile sets up and its launcher runs (a shell script,
    /// say; tests/e2e_faults.rs's servers): built and measured like the others; the native
    /// engine cannot install it.
    Shell,
    /// The lab's own binary (the built-in null server); no recipe names it.
    #[serde(skip_deserializing)]
    Native,
}

impl RuntimeKind {
    /// The name records and manifests carry (`cpython`, `pypy`, `node`, `bun`, `rust`, `shell`, `native`).
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeKind::Cpython => "cpython",
            RuntimeKind::Pypy => "pypy",
            RuntimeKind::Node => "node",
            RuntimeKind::Bun => "bun",
            RuntimeKind::Rust => "rust",
            RuntimeKind::Shell => "shell",
            RuntimeKind::Native => "native",
        }
    }
}

impl std::fmt::Display for RuntimeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The tool that regenerates a lock folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Locker {
    /// Python: `requirements.in` → `requirements.txt`, with hashes.
    Uv,
    /// Node and Bun: `package.json` → `package-lock.json`.
    Npm,
    /// Rust: `Cargo.toml` → `Cargo.lock` (checksums), resolved as of a publication time.
    Cargo,
}

impl Locker {
    pub fn as_str(self) -> &'static str {
        match self {
            Locker::Uv => "uv",
            Locker::Npm => "npm",
            Locker::Cargo => "cargo",
        }
    }
}

impl std::fmt::Display for Locker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_kinds_keep_their_recorded_names() {
        for k in [
            RuntimeKind::Cpython,
            RuntimeKind::Pypy,
            RuntimeKind::Node,
            RuntimeKind::Bun,
            RuntimeKind::Rust,
            RuntimeKind::Shell,
            RuntimeKind::Native,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(k.as_str()));
        }
        let parsed: RuntimeKind = serde_json::from_str("\"bun\"").unwrap();
        assert_eq!(parsed, RuntimeKind::Bun);
        // A recipe's own Dockerfile and launcher (the fault fixtures' shell servers).
        assert_eq!(serde_json::from_str::<RuntimeKind>("\"shell\"").unwrap(), RuntimeKind::Shell);
        assert!(serde_json::from_str::<RuntimeKind>("\"perl\"").is_err());
        assert!(serde_json::from_str::<RuntimeKind>("\"native\"").is_err());
        assert_eq!(serde_json::from_str::<RuntimeKind>("\"rust\"").unwrap(), RuntimeKind::Rust);
        assert_eq!(format!("{} {} {}", Locker::Uv, Locker::Npm, Locker::Cargo), "uv npm cargo");
    }
}
