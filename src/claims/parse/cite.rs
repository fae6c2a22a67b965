//! Published figures read from the source's own result files (`source::results::Published`): a
//! JSON Pointer into one of them, resolved to a number when the claims are read, with the file,
//! its sha256 and the commit kept for the audit. A pointer that does not resolve, a file the
//! scenario does not list, or a written `value` that disagrees is an error at its key.

use std::ops::Range;

use toml::Spanned;

use super::kinds::SpanErr;
use super::types::Cited;
use crate::source::results::Published;

/// The files a claim may cite, when the scenario's `[source] results` were read.
pub(super) type Files<'a> = Option<&'a Published>;

/// The number at `pointer` in the result file `results`.
pub(super) fn read(
    files: Files,
    results: &Spanned<String>,
    pointer: &str,
    at: Range<usize>,
) -> Result<Cited, SpanErr> {
    let name = results.get_ref();
    let Some(p) = files else {
        return Err((
            results.span(),
            format!(
                "the claim cites the result file {name:?}, but no result files were read: name it in [source] results (with `repository`), and give the run folder that keeps it or --source-mirror"
            ),
        ));
    };
    let Some(f) = p.file(name) else {
        let listed: Vec<&str> = p.files.iter().map(|f| f.path.as_str()).collect();
        return Err((
            results.span(),
            format!("result file {name:?} is not one of [source] results ({})", listed.join(", ")),
        ));
    };
    if !(pointer.is_empty() || pointer.starts_with('/')) {
        return Err((
            at,
            format!("{pointer:?} is not a JSON Pointer (it starts with `/`: \"/servers/python/http/rps\")"),
        ));
    }
    let doc: serde_json::Value = serde_json::from_slice(&f.content)
        .map_err(|e| (results.span(), format!("result file {name:?} is not JSON: {e}")))?;
    let v = doc.pointer(pointer).ok_or_else(|| {
        (at.clone(), format!("{pointer:?} resolves to nothing in {name:?} (at commit {})", short(&p.commit)))
    })?;
    let value =
        v.as_f64().ok_or_else(|| (at.clone(), format!("{pointer:?} in {name:?} is {v}, not a number")))?;
    Ok(Cited {
        git: p.git.clone(),
        commit: p.commit.clone(),
        file: name.clone(),
        sha256: f.sha256.clone(),
        pointer: pointer.to_string(),
        value,
    })
}

/// A value written beside a cited one must be the same number.
pub(super) fn agree(written: Option<&Spanned<f64>>, cited: &Cited) -> Result<(), SpanErr> {
    match written {
        Some(w) if (w.get_ref() - cited.value).abs() > 1e-9 * cited.value.abs().max(1.0) => Err((
            w.span(),
            format!(
                "`value` {} disagrees with the {} the claim cites: {}",
                w.get_ref(),
                cited.value,
                cited.text()
            ),
        )),
        _ => Ok(()),
    }
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}
