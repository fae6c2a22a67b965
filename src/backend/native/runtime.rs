//! Which runtime a native cell can have: natively a CPython server runs on the host's own
//! interpreter, so a cell whose runtime is for another CPython minor takes the family's lock for
//! the host's minor, and its record says so.

use std::sync::Mutex;

use crate::backend::{Admission, EngineError};
use crate::recipe::{ImagePlan, RuntimeKind};

/// The CPython minor version of each Debian suite a recipe runtime names (its `python3`).
const SUITE_PYTHON: &[(&str, &str)] = &[("bullseye", "3.9"), ("bookworm", "3.11"), ("trixie", "3.13")];

/// Natively a CPython server runs on the host's interpreter, and a lock's compiled wheels fit
/// one minor version: when the cell's runtime is for another minor than the host's, the cell
/// takes the family's runtime whose suite has the host's minor (its own lock), and the record
/// says so. Without such a runtime the cell cannot run natively, and the error says why.
pub async fn adapt(
    a: &Admission<'_>,
    image: &mut ImagePlan,
    deviations: &mut Vec<String>,
    host_python: &Mutex<Option<String>>,
) -> Result<(), EngineError> {
    if image.runtime_kind != RuntimeKind::Cpython {
        return Ok(());
    }
    let Some(suite) = image.base.suite() else { return Ok(()) };
    let wanted = SUITE_PYTHON.iter().find(|(s, _)| *s == suite).map(|(_, v)| *v);
    let known = host_python.lock().expect("not poisoned").clone();
    let host = match known {
        Some(h) => h,
        None => {
            let h = host_python_minor().await?;
            host_python.lock().expect("not poisoned").insert(h).clone()
        }
    };
    if wanted.is_none_or(|w| w == host) {
        return Ok(());
    }
    let refuse = |m: String| EngineError::Refused { cell: format!("{} natively", a.cell_id), detail: m };
    let host_suite = SUITE_PYTHON.iter().find(|(_, v)| *v == host).map(|(s, _)| *s);
    let mut tried = Vec::new();
    for rt in a.recipes.runtimes_of(&image.family) {
        let mut want = a.want.clone();
        want.runtime = Some(rt.clone());
        if let Ok(other) = a.recipes.resolve(&want) {
            if other.runtime_kind == RuntimeKind::Cpython && other.base.suite() == host_suite {
                deviations.push(format!(
                    "the scenario asks for {} (CPython {}); natively this host's python3 is {host}, so the cell ran the {rt} lock on it",
                    image.runtime_name,
                    wanted.unwrap_or("?"),
                ));
                *image = other;
                return Ok(());
            }
        }
        tried.push(rt);
    }
    Err(refuse(format!(
        "{} needs CPython {} but this host's python3 is {host}, and {} has no lock for a runtime of CPython {host} (it has: {}); run it with --engine docker",
        image.runtime_name,
        wanted.unwrap_or("?"),
        image.family,
        tried.join(", ")
    )))
}

/// The host interpreter's `major.minor`.
async fn host_python_minor() -> Result<String, EngineError> {
    let python = super::cache::host_python()?;
    let out = tokio::process::Command::new(&python)
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .await
        .map_err(|e| EngineError::Io { what: format!("run {}", python.display()), source: e })?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
