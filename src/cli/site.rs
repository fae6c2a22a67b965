//! `benchlab site`: reads every run folder under `results/` (records, the store's audit, the
//! newest run's claims judged as `verify` judges them), writes the static site `site::build`
//! makes, and with `--serve` serves it on loopback for a local preview.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};

use super::exit::{Exit, OK};
use crate::claims::Audit;
use crate::record::store::{read_audited, RECORDS_FILE};
use crate::scenario::Scenario;
use crate::site::{self, RunInput};

#[derive(Debug, clap::Args)]
pub struct SiteArgs {
    /// The folder of scenario folders holding run folders (results/<scenario>/<run-id>/records.jsonl).
    #[arg(default_value = "results")]
    results: PathBuf,
    /// Where the site is written. A folder that holds something other than an earlier site (no
    /// site.json) is refused; an earlier site there is replaced whole.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// After writing, serve DIR on http://127.0.0.1:PORT/ until interrupted (a local preview, as
    /// `asv preview`). The first line on stdout is the address.
    #[arg(long)]
    serve: bool,
    /// The port --serve listens on; 0 picks a free one.
    #[arg(long, default_value_t = 8000, requires = "serve")]
    port: u16,
    /// Print what was written as JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: SiteArgs) -> Result<i32, Exit> {
    let started = std::time::Instant::now();
    let runs = read_runs(&args.results)?;
    if runs.is_empty() {
        return Err(Exit::input(format!(
            "{}: no run folder with records (results/<scenario>/<run-id>/{RECORDS_FILE}); `benchlab run` makes them",
            args.results.display()
        )));
    }
    eprintln!(
        "site: read {} runs ({} records) in {:.1} s; judging claims, drawing the pages…",
        runs.len(),
        runs.iter().map(|r| r.records.len()).sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
    let audits = audits(&runs, &args.results);
    let built = site::build(&runs, &audits);
    write_site(&args.out, &built.files)?;
    eprintln!("site: done in {:.1} s", started.elapsed().as_secs_f64());
    let s = &built.summary;
    let text = format!(
        "{}: {} runs of {} scenarios ({} records): {} history pages ({} series), {} audits, {} compare pages; \
         {} files, {:.1} MB; front page with style and script {:.0} kB",
        args.out.display(),
        s.runs,
        s.scenarios,
        s.records,
        s.history_pages,
        s.series,
        s.audits,
        s.compares,
        s.files,
        s.bytes as f64 / 1e6,
        s.front_page_bytes as f64 / 1e3
    );
    match (args.json, args.serve) {
        (true, _) => println!("{}", serde_json::to_string_pretty(s).expect("summaries serialise")),
        (false, false) => println!("{text}"),
        (false, true) => eprintln!("{text}"),
    }
    if args.serve {
        serve(&args.out, args.port)?;
    }
    Ok(OK)
}

/// Every run folder with records, by scenario then run id (a run id starts with its UTC time).
fn read_runs(results: &Path) -> Result<Vec<RunInput>, Exit> {
    let dirs = |p: &Path| -> Result<Vec<PathBuf>, Exit> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(p)
            .map_err(|e| Exit::input(format!("{}: {e}", p.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        v.sort();
        Ok(v)
    };
    let mut runs = Vec::new();
    for scenario in dirs(results)? {
        for run in dirs(&scenario)? {
            let path = run.join(RECORDS_FILE);
            if !path.metadata().is_ok_and(|m| m.len() > 0) {
                continue;
            }
            let (records, audit) = read_audited(&path).map_err(|e| Exit::input(e.to_string()))?;
            let damaged = audit.first_problem().map(|p| p.to_string());
            let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            runs.push(RunInput { scenario: name(&scenario), id: name(&run), records, damaged });
        }
    }
    Ok(runs)
}

/// Per scenario, its newest run's claims judged against it (the run's own scenario copy), as
/// `benchlab verify` does by default. A copy that no longer parses is named on stderr and skipped.
fn audits(runs: &[RunInput], results: &Path) -> Vec<Audit> {
    let newest: Vec<&RunInput> = runs
        .iter()
        .enumerate()
        .filter(|(i, r)| runs.get(i + 1).is_none_or(|n| n.scenario != r.scenario))
        .map(|(_, r)| r)
        .collect();
    let judged = site::par_map(&newest, |r| {
        let dir = results.join(&r.scenario).join(&r.id);
        let copy = dir.join("scenario.toml");
        if !copy.exists() {
            return Ok::<_, String>(None);
        }
        let sc = Scenario::load(&copy).map_err(|e| format!("{}: claims not judged: {e}", copy.display()))?;
        let published = crate::source::results::read_kept(&dir)
            .map_err(|e| format!("{}: claims not judged: {e}", dir.display()))?;
        let claims = crate::claims::scenario_claims(&sc, published.as_ref())
            .map_err(|e| format!("{}: claims not judged: {e}", copy.display()))?;
        Ok((!claims.is_empty())
            .then(|| crate::claims::verify(&sc, &claims, &r.records, Some(dir.display().to_string()))))
    });
    let mut out = Vec::new();
    for j in judged {
        match j {
            Ok(Some(a)) => out.push(a),
            Ok(None) => {}
            Err(e) => eprintln!("warning: {e}"),
        }
    }
    out
}

/// Writes the files into `out`, after removing an earlier site there (never anything else).
fn write_site(out: &Path, files: &[(String, String)]) -> Result<(), Exit> {
    let env =
        |what: &str, p: &Path, e: std::io::Error| Exit::environment(format!("{what} {}: {e}", p.display()));
    if out.exists() {
        let empty = std::fs::read_dir(out).map_err(|e| env("read", out, e))?.next().is_none();
        if !empty && !out.join("site.json").exists() {
            return Err(Exit::input(format!(
                "{} holds files but no site.json: it is not an earlier site, so nothing there is replaced; \
                 give an empty or new folder",
                out.display()
            )));
        }
        std::fs::remove_dir_all(out).map_err(|e| env("remove", out, e))?;
    }
    for (rel, text) in files {
        let path = out.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| env("create", parent, e))?;
        }
        std::fs::write(&path, text).map_err(|e| env("write", &path, e))?;
    }
    Ok(())
}

/// Serves `root` on loopback, one thread per connection, until the process is interrupted.
fn serve(root: &Path, port: u16) -> Result<(), Exit> {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .map_err(|e| Exit::environment(format!("listen on 127.0.0.1:{port}: {e}; pick another --port")))?;
    let addr = listener.local_addr().map_err(|e| Exit::environment(e.to_string()))?;
    println!("serving {} on http://{addr}/ (Ctrl-C stops)", root.display());
    let _ = std::io::stdout().flush();
    for conn in listener.incoming().flatten() {
        let root = root.to_path_buf();
        std::thread::spawn(move || {
            let _ = answer(&root, conn);
        });
    }
    Ok(())
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

/// The file a request path names inside `root`: no `..`, no absolute part; a folder means its
/// index.html.
pub(super) fn file_for(root: &Path, target: &str) -> Option<PathBuf> {
    let path = target.split(['?', '#']).next()?;
    // Site paths are slugs (letters, digits, `.-_`): a `+`, which this decodes as a space, names
    // no file of a site.
    let decoded = crate::services::api::percent_decode(path).ok()?;
    let rel = Path::new(decoded.trim_start_matches('/'));
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    let full = root.join(rel);
    Some(if full.is_dir() { full.join("index.html") } else { full })
}

fn answer(root: &Path, mut conn: TcpStream) -> std::io::Result<()> {
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let reply = |conn: &mut TcpStream, status: &str, ctype: &str, body: &[u8], head_only: bool| {
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        conn.write_all(head.as_bytes())?;
        if !head_only {
            conn.write_all(body)?;
        }
        conn.flush()
    };
    if method != "GET" && method != "HEAD" {
        return reply(&mut conn, "405 Method Not Allowed", "text/plain", b"GET or HEAD only\n", false);
    }
    match file_for(root, target).and_then(|p| std::fs::read(&p).ok().map(|b| (p, b))) {
        Some((p, body)) => reply(&mut conn, "200 OK", content_type(&p), &body, method == "HEAD"),
        // Browsers ask for one on their own; the site has none, and a 404 would be a console error.
        None if target == "/favicon.ico" => reply(&mut conn, "204 No Content", "image/x-icon", b"", true),
        None => reply(&mut conn, "404 Not Found", "text/plain", b"not found\n", method == "HEAD"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_paths_stay_inside_the_site() {
        let root = Path::new("/srv/site");
        assert_eq!(file_for(root, "/history/a%20b.html?x=1#y"), Some(root.join("history/a b.html")));
        assert_eq!(file_for(root, "/../etc/passwd"), None);
        assert_eq!(file_for(root, "/a/%2e%2e/%2e%2e/etc"), None);
        assert_eq!(file_for(root, "/%zz"), None);
    }
}
