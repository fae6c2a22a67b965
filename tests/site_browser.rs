//! The static site of `benchlab site` in a real browser: Debian's Chromium, driven over WebDriver
//! (chromedriver) by the small client in this file, opens a site built from a sample of the
//! committed results/ (a sweep of 25 releases, a reproduction's two newest runs with its claims, a
//! scenario's two runs: every kind of page, in seconds rather than the minutes the whole set takes a
//! debug build) and does what a reader does there; and it opens every page of the published site,
//! docs/site/ (the whole set, written by a release build). It owns: every page loading from
//! `file://` with no console error and the right `data-page`; the front page's filters and their permalinks; the
//! history charts, metric switch and release compare; the two-run compare; no horizontal scrolling
//! at 1366×768; screenshots under `<target>/site-screenshots/`; and `--serve`. It judges no figure
//! on a page (the site's own unit tests do). Without chromium or chromedriver the tests fail, never
//! skip: `bash scripts/test.sh` installs Debian's chromium and chromium-driver.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::sleep;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");
const CHROMIUM: &str = "/usr/bin/chromium";
const INSTALL_HINT: &str =
    "run the tests with `bash scripts/test.sh`, which installs Debian's chromium and chromium-driver";
const VERDICTS: [&str; 6] = ["faster", "slower", "unchanged", "inconclusive", "larger", "smaller"];
const KINDS: [&str; 5] = ["front", "history", "audit", "run", "compare"];

/// One Chromium at a time: the machine has two cores, and a test holding the lock that panics
/// must not fail the others, so a poisoned lock is taken all the same.
static ONE_BROWSER: Mutex<()> = Mutex::new(());

fn one_browser() -> MutexGuard<'static, ()> {
    ONE_BROWSER.lock().unwrap_or_else(|e| e.into_inner())
}

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

// ---------------------------------------------------------------------------------------------
// HTTP/1.1 and WebDriver

/// One HTTP/1.1 exchange with `Connection: close`: the status and the body as JSON (`null` when
/// the body is empty).
fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value), String> {
    let io = |e: std::io::Error| format!("{method} {path} on 127.0.0.1:{port}: {e}");
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(io)?;
    s.set_read_timeout(Some(Duration::from_secs(120))).map_err(io)?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json; \
         charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).and_then(|_| s.write_all(body.as_bytes())).map_err(io)?;
    let raw = read_answer(&mut s).map_err(io)?;
    parse_response(&raw).map_err(|e| format!("{method} {path}: {e}"))
}

/// Reads one answer: up to its Content-Length or last chunk, since chromedriver answers
/// `Connection: close` without closing; to the end of the stream otherwise.
fn read_answer(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let (mut raw, mut buf) = (Vec::new(), [0u8; 16 * 1024]);
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(raw);
        }
        raw.extend_from_slice(&buf[..n]);
        let Some(end) = head_end(&raw) else { continue };
        match framing(&String::from_utf8_lossy(&raw[..end])) {
            (Some(length), _) if raw.len() >= end + 4 + length => return Ok(raw),
            (None, true) if raw.ends_with(b"0\r\n\r\n") => return Ok(raw),
            _ => {}
        }
    }
}

fn head_end(raw: &[u8]) -> Option<usize> {
    raw.windows(4).position(|w| w == b"\r\n\r\n")
}

/// The head's Content-Length and whether the body is chunked.
fn framing(head: &str) -> (Option<usize>, bool) {
    let (mut length, mut chunked) = (None, false);
    for (k, v) in head.split("\r\n").skip(1).filter_map(|l| l.split_once(':')) {
        match k.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = v.trim().parse::<usize>().ok(),
            "transfer-encoding" => chunked = v.trim().eq_ignore_ascii_case("chunked"),
            _ => {}
        }
    }
    (length, chunked)
}

fn parse_response(raw: &[u8]) -> Result<(u16, Value), String> {
    let end = head_end(raw).ok_or("the answer has no end of head")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let status_line = head.split("\r\n").next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let (length, chunked) = framing(&head);
    let mut body = raw[end + 4..].to_vec();
    if chunked {
        body = dechunk(&body)?;
    } else if let Some(n) = length {
        body.truncate(n);
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok((status, Value::Null));
    }
    let value = serde_json::from_slice(&body).map_err(|e| format!("HTTP {status}, body not JSON: {e}"))?;
    Ok((status, value))
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n").ok_or("a chunk without its size line")?;
        let size_text = String::from_utf8_lossy(&rest[..eol]);
        let size_hex = size_text.split(';').next().unwrap_or_default().trim();
        let size =
            usize::from_str_radix(size_hex, 16).map_err(|e| format!("chunk size {size_hex:?}: {e}"))?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(rest.get(..size).ok_or("a chunk shorter than its size")?);
        rest = rest.get(size + 2..).ok_or("a chunk shorter than its size")?;
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// chromedriver from PATH; fails (never skips) when it or Debian's chromium is missing.
fn chromedriver() -> PathBuf {
    assert!(Path::new(CHROMIUM).exists(), "Debian's chromium is missing (no {CHROMIUM}): {INSTALL_HINT}");
    let found = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("chromedriver"))
        .find(|p| p.is_file());
    found.unwrap_or_else(|| panic!("chromedriver is not on PATH: {INSTALL_HINT}"))
}

/// A chromedriver child on a free port, killed on drop (also when a test panics).
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    /// `tmp`: the TMPDIR of chromedriver and the Chromium it starts (their scoped folders go
    /// there, not to /tmp, and are removed with it).
    fn start(tmp: &std::path::Path) -> Driver {
        let exe = chromedriver();
        let port = free_port();
        let child = Command::new(&exe)
            .arg(format!("--port={port}"))
            .env("TMPDIR", tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}; {INSTALL_HINT}", exe.display()));
        let mut driver = Driver { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok((200, v)) = http(port, "GET", "/status", None) {
                if v["value"]["ready"] == true {
                    return driver;
                }
            }
            if let Ok(Some(status)) = driver.child.try_wait() {
                panic!("chromedriver exited ({status}) before it was ready on port {port}");
            }
            assert!(Instant::now() < deadline, "chromedriver not ready on port {port} after 30 s");
            sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A headless Chromium session. Dropping it deletes the session (Chromium quits), then the
/// driver is killed and the profile folder removed, in that (field) order.
struct Browser {
    session: String,
    driver: Driver,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn open() -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let tmp = profile.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let driver = Driver::start(&tmp);
        let args = [
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--window-size=1366,768".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
            "timeouts": {"pageLoad": 60_000, "script": 30_000},
        }}});
        let (status, v) =
            http(driver.port, "POST", "/session", Some(&caps)).unwrap_or_else(|e| panic!("{e}"));
        let session = v["value"]["sessionId"].as_str().unwrap_or_else(|| {
            panic!("chromedriver started no Chromium session (HTTP {status}): {}", v["value"]["message"])
        });
        Browser { session: session.to_string(), driver, _profile: profile }
    }

    /// A WebDriver command of this session; its `value`, or a panic naming the error.
    fn cmd(&self, method: &str, rel: &str, body: Option<&Value>) -> Value {
        let path = format!("/session/{}{rel}", self.session);
        match http(self.driver.port, method, &path, body) {
            Ok((200, mut v)) => v["value"].take(),
            Ok((status, v)) => {
                let message = v["value"]["message"].as_str().unwrap_or_default();
                let message = message.lines().next().unwrap_or_default();
                panic!("WebDriver {method} {rel}: HTTP {status} {}: {message}", v["value"]["error"])
            }
            Err(e) => panic!("WebDriver: {e}"),
        }
    }

    fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(&json!({ "url": url })));
    }

    /// A fresh load of `url`, even when only its fragment differs from the current page.
    fn load_afresh(&self, url: &str) {
        self.goto("about:blank");
        self.goto(url);
    }

    fn js(&self, script: &str, args: Value) -> Value {
        self.cmd("POST", "/execute/sync", Some(&json!({ "script": script, "args": args })))
    }

    /// Polls `script` until it returns something truthy; panics with `what` after 10 s.
    fn wait_for(&self, script: &str, args: Value, what: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let v = self.js(script, args.clone());
            let truthy = !matches!(&v, Value::Null | Value::Bool(false))
                && v != json!(0)
                && v.as_str().is_none_or(|s| !s.is_empty());
            if truthy {
                return v;
            }
            assert!(Instant::now() < deadline, "waited 10 s for {what}; last answer {v}");
            sleep(Duration::from_millis(100));
        }
    }

    /// The browser console's SEVERE entries since the last call.
    fn severe_console(&self) -> Vec<String> {
        let entries = self.cmd("POST", "/se/log", Some(&json!({"type": "browser"})));
        let entries = entries.as_array().cloned().unwrap_or_default();
        let severe = entries.iter().filter(|e| e["level"] == "SEVERE");
        severe.map(|e| e["message"].as_str().unwrap_or_default().to_string()).collect()
    }

    fn assert_clean_console(&self, page: &str) {
        let severe = self.severe_console();
        assert!(severe.is_empty(), "{page}: console errors (SEVERE):\n  {}", severe.join("\n  "));
    }

    /// Fails naming every selector the current page lacks.
    fn require(&self, page: &str, selectors: &[&str]) {
        let missing =
            self.js("return arguments[0].filter(s => !document.querySelector(s))", json!([selectors]));
        assert_eq!(missing, json!([]), "{page}: the page lacks these elements");
    }

    fn text(&self, script: &str, args: Value) -> String {
        self.js(script, args).as_str().unwrap_or_default().to_string()
    }

    fn body_kind(&self) -> String {
        self.text("return document.body && document.body.getAttribute('data-page')", json!([]))
    }

    /// The option values of the select `sel` (null when there is no such select).
    fn options(&self, page: &str, sel: &str) -> Vec<String> {
        let v = self.js(
            "const e = document.querySelector(arguments[0]); return e && e.options ? [...e.options].map(o => o.value) : null",
            json!([sel]),
        );
        let v = v.as_array().unwrap_or_else(|| panic!("{page}: no select {sel}"));
        v.iter().map(|o| o.as_str().unwrap_or_default().to_string()).collect()
    }

    fn value(&self, sel: &str) -> String {
        self.text("const e = document.querySelector(arguments[0]); return e ? e.value : null", json!([sel]))
    }

    /// Sets the select `sel` to `value` and dispatches `change`, as a reader's choice would.
    fn choose(&self, page: &str, sel: &str, value: &str) {
        let err = self.js(
            "const [sel, v] = arguments; const e = document.querySelector(sel);
             if (!e) return 'no element ' + sel;
             if (![...e.options].some(o => o.value === v)) return sel + ' has no option ' + JSON.stringify(v);
             e.value = v; e.dispatchEvent(new Event('change', {bubbles: true})); return null;",
            json!([sel, value]),
        );
        assert!(err.is_null(), "{page}: {err}");
    }

    fn hash(&self) -> String {
        self.text("return location.hash", json!([]))
    }

    fn assert_fits_width(&self, page: &str) {
        let v = self.js("return [document.documentElement.scrollWidth, window.innerWidth]", json!([]));
        let (scroll, inner) = (v[0].as_u64().unwrap_or(u64::MAX), v[1].as_u64().unwrap_or(0));
        assert!(
            scroll <= inner,
            "{page} scrolls sideways at 1366×768: scrollWidth {scroll} > innerWidth {inner}"
        );
    }

    /// A PNG of what the window shows (1366×768, less the browser's own bars).
    fn screenshot_png(&self) -> Vec<u8> {
        use base64::Engine as _;
        let b64 = self.cmd("GET", "/screenshot", None);
        base64::engine::general_purpose::STANDARD.decode(b64.as_str().unwrap_or_default()).unwrap()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = http(self.driver.port, "DELETE", &format!("/session/{}", self.session), None);
    }
}

// ---------------------------------------------------------------------------------------------
// The site

/// The site `benchlab site` builds from the committed results/: built once per run of these
/// tests (a debug build of it takes minutes), into `<target>/site-browser/site`, where it stays
/// beside the screenshots for a look after the run. A failed build fails every test that needs it.
struct Site {
    root: PathBuf,
    manifest: Value,
}

static SITE: OnceLock<Result<Site, String>> = OnceLock::new();

impl Site {
    fn get() -> &'static Site {
        SITE.get_or_init(Site::build).as_ref().unwrap_or_else(|e| panic!("{e}"))
    }

    fn build() -> Result<Site, String> {
        let root = target_dir().join("site-browser").join("site");
        if root.exists() {
            std::fs::remove_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
        }
        let results = sample_results()?;
        let started = Instant::now();
        let out = Command::new(BIN)
            .current_dir(manifest_dir())
            .arg("site")
            .arg(&results)
            .arg("--out")
            .arg(&root)
            .output()
            .map_err(|e| format!("cannot run {BIN}: {e}"))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!("benchlab site failed ({}):\n{stderr}", out.status));
        }
        let took = started.elapsed().as_secs_f64();
        println!("benchlab site built {} in {took:.1} s", root.display());
        let text = std::fs::read_to_string(root.join("site.json"))
            .map_err(|e| format!("the built site has no site.json: {e}"))?;
        let manifest = serde_json::from_str(&text).map_err(|e| format!("site.json is not JSON: {e}"))?;
        Ok(Site { root, manifest })
    }

    /// The published site, docs/site/, as committed.
    fn published() -> Site {
        let root = manifest_dir().join("docs").join("site");
        let text = std::fs::read_to_string(root.join("site.json")).unwrap_or_else(|e| {
            panic!("{}/site.json: {e}; publish with `benchlab site results --out docs/site`", root.display())
        });
        Site { root, manifest: serde_json::from_str(&text).expect("docs/site/site.json is not JSON") }
    }

    fn url(&self, rel: &str) -> String {
        file_url(&self.root.join(rel))
    }

    /// site.json's pages as (path, kind).
    fn pages(&self) -> Vec<(String, String)> {
        let pages = self.manifest["pages"].as_array().expect("site.json has no `pages` list");
        let field = |p: &Value, k: &str| {
            p[k].as_str().unwrap_or_else(|| panic!("site.json page {p}: no {k}")).to_string()
        };
        pages.iter().map(|p| (field(p, "path"), field(p, "kind"))).collect()
    }

    /// The path of the entry of site.json's `list` whose `count` field is largest, which must be
    /// at least 2 (two versions to compare, two runs to compare).
    fn largest(&self, list: &str, count: &str) -> String {
        let entries =
            self.manifest[list].as_array().unwrap_or_else(|| panic!("site.json has no `{list}` list"));
        let best = entries.iter().max_by_key(|e| e[count].as_u64().unwrap_or(0));
        let best = best.unwrap_or_else(|| panic!("site.json's `{list}` is empty"));
        assert!(
            best[count].as_u64().unwrap_or(0) >= 2,
            "no entry of site.json's `{list}` has {count} ≥ 2: {best}"
        );
        best["path"].as_str().unwrap_or_else(|| panic!("site.json {list} entry {best}: no path")).to_string()
    }
}

/// Percent-encodes all but unreserved characters (and `/` when `keep_slash`).
fn percent_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || (keep_slash && b == b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn file_url(path: &Path) -> String {
    format!("file://{}", percent_encode(&path.display().to_string(), true))
}

/// The file a `file://` URL names (fragment and query dropped, percent-escapes decoded).
fn url_file(url: &str) -> PathBuf {
    let path = url.trim_start_matches("file://").split(['#', '?']).next().unwrap_or_default();
    let (bytes, mut out, mut i) = (path.as_bytes(), Vec::new(), 0);
    while i < bytes.len() {
        let hex =
            bytes.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => (out.push(b), i += 3),
            (b, _) => (out.push(b), i += 1),
        };
    }
    PathBuf::from(String::from_utf8_lossy(&out).into_owned())
}

fn target_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| "target".into());
    manifest_dir().join(dir)
}

fn verdict_in(text: &str) -> Option<&'static str> {
    let lower = text.to_lowercase();
    VERDICTS.into_iter().find(|w| lower.contains(w))
}

/// A pair of two different values from `values`, other than `(a, b)` as they stand.
fn other_pair(values: &[String], a: &str, b: &str) -> (String, String) {
    let pairs = values.iter().flat_map(|x| values.iter().map(move |y| (x, y)));
    let mut pairs = pairs.filter(|(x, y)| x != y && (x.as_str(), y.as_str()) != (a, b));
    let (x, y) = pairs.next().unwrap_or_else(|| panic!("fewer than two values to compare: {values:?}"));
    (x.clone(), y.clone())
}

// ---------------------------------------------------------------------------------------------
// The tests

/// Resources loaded from anywhere but the site (or a data: URL), and the site's files that its
/// `file://` links name.
const LINKS_JS: &str = "
    const far = [];
    for (const e of document.querySelectorAll('script[src], link[href], img[src], iframe[src], source[src], object[data]')) {
      const u = e.src || e.href || e.data;
      if (!u.startsWith('file:') && !u.startsWith('data:')) far.push(u);
    }
    const links = [...document.querySelectorAll('a[href]')].map(a => a.href).filter(u => u.startsWith('file:'));
    return [far, [...new Set(links)]];";

#[test]
fn every_page_loads_from_file_without_a_console_error() {
    let _one = one_browser();
    every_page_loads(Site::get());
}

#[test]
fn every_page_of_the_published_site_loads_without_a_console_error() {
    let _one = one_browser();
    let site = Site::published();
    every_page_loads(&site);
    // The first paint of the pages a visitor opens first, printed (not judged: this host is
    // shared and noisy; the README states the figures).
    let b = Browser::open();
    for page in ["index.html".to_string(), site.largest("histories", "versions")] {
        b.goto(&site.url(&page));
        let paint = b.js(
            "const p = performance.getEntriesByName('first-contentful-paint')[0]; \
             const n = performance.getEntriesByType('navigation')[0]; \
             return [p ? p.startTime : null, n ? n.loadEventEnd : null];",
            json!([]),
        );
        println!("published {page}: first contentful paint {} ms, load event end {} ms", paint[0], paint[1]);
    }
}

/// Every page of site.json: present, no SEVERE console entry, its `data-page`, nothing loaded
/// from outside the site, no link to a missing file.
fn every_page_loads(site: &Site) {
    let pages = site.pages();
    let kinds: Vec<&str> = pages.iter().map(|(_, k)| k.as_str()).collect();
    for kind in KINDS {
        assert!(kinds.contains(&kind), "site.json lists no page of kind {kind}: {kinds:?}");
    }
    assert!(
        pages.contains(&("index.html".into(), "front".into())),
        "site.json lists no front page index.html"
    );
    let b = Browser::open();
    let mut failures = Vec::new();
    for (path, kind) in &pages {
        if !site.root.join(path).is_file() {
            failures.push(format!("{path}: listed in site.json, but no such file"));
            continue;
        }
        b.goto(&site.url(path));
        let severe = b.severe_console();
        if !severe.is_empty() {
            failures.push(format!("{path}: console errors (SEVERE):\n    {}", severe.join("\n    ")));
        }
        let shown = b.body_kind();
        if shown != *kind {
            failures.push(format!("{path}: body[data-page] is {shown:?}, site.json says {kind:?}"));
        }
        let v = b.js(LINKS_JS, json!([]));
        for far in v[0].as_array().into_iter().flatten() {
            failures.push(format!("{path}: loads {far} from outside the site"));
        }
        for link in v[1].as_array().into_iter().flatten().filter_map(Value::as_str) {
            if !url_file(link).is_file() {
                failures.push(format!("{path}: links to {link}, which is no file of the site"));
            }
        }
    }
    println!("{} pages of {}/site.json opened in Chromium", pages.len(), site.root.display());
    assert!(failures.is_empty(), "{} failures:\n  {}", failures.len(), failures.join("\n  "));
}

/// Per row of `#latest tbody`: [has `hidden`, is rendered, data-family].
const ROWS_JS: &str = "return [...document.querySelectorAll('#latest tbody tr')]
    .map(r => [r.hasAttribute('hidden'), r.getClientRects().length > 0, r.getAttribute('data-family')])";

/// The families of the rows shown in `#latest`; a row is shown exactly when it is not `hidden`.
fn shown_families(b: &Browser) -> Vec<String> {
    let rows = b.js(ROWS_JS, json!([]));
    let rows = rows.as_array().cloned().unwrap_or_default();
    let mut shown = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let (hidden, rendered) = (r[0] == true, r[1] == true);
        assert_eq!(
            hidden, !rendered,
            "index.html: #latest row {i} has hidden={hidden} but rendered={rendered}"
        );
        if rendered {
            shown.push(r[2].as_str().unwrap_or("(no data-family)").to_string());
        }
    }
    shown
}

#[test]
fn front_page_filters_narrow_the_table_and_their_permalinks_restore_it() {
    let _one = one_browser();
    let site = Site::get();
    let b = Browser::open();
    let page = "index.html";
    b.goto(&site.url(page));
    b.assert_clean_console(page);
    b.require(
        page,
        &["#f-family", "#f-runtime", "#f-transport", "#f-workload", "#latest", "#latest tbody tr"],
    );
    b.assert_fits_width(page);
    for sel in ["#f-family", "#f-runtime", "#f-transport", "#f-workload"] {
        let options = b.options(page, sel);
        assert!(
            options.first().is_some_and(String::is_empty),
            "{page}: {sel}'s first option is not \"\": {options:?}"
        );
        assert!(options.len() >= 2, "{page}: {sel} has nothing to choose: {options:?}");
        let rows = b.js(
            "return document.querySelectorAll('#latest tbody tr[data-' + arguments[0] + ']').length",
            json!([&sel[3..]]),
        );
        let all = b.js("return document.querySelectorAll('#latest tbody tr').length", json!([]));
        assert_eq!(rows, all, "{page}: not every #latest row carries data-{}", &sel[3..]);
    }
    let all = shown_families(&b);
    assert!(!all.is_empty(), "{page}: #latest shows no row");
    let families = b.options(page, "#f-family");
    let narrowed = families.iter().skip(1).find_map(|f| {
        b.choose(page, "#f-family", f);
        let shown = shown_families(&b);
        (shown.len() != all.len()).then(|| (f.clone(), shown))
    });
    let (family, shown) = narrowed.unwrap_or_else(|| {
        panic!("{page}: no family of #f-family changes #latest's {} shown rows", all.len())
    });
    assert!(shown.iter().all(|f| *f == family), "{page}: #f-family={family} still shows {shown:?}");
    let own_hash = b.hash();
    assert!(own_hash.contains("family="), "{page}: location.hash after choosing a family is {own_hash:?}");
    b.assert_clean_console(page);
    let permalinks = [format!("#family={}", percent_encode(&family, false)), own_hash];
    for hash in permalinks {
        b.load_afresh(&format!("{}{hash}", site.url(page)));
        let restored = b.value("#f-family");
        assert_eq!(restored, family, "{page}{hash}: #f-family not restored");
        let again = shown_families(&b);
        assert_eq!(again.len(), shown.len(), "{page}{hash}: shows {again:?}, the filter showed {shown:?}");
        b.assert_clean_console(&format!("{page}{hash}"));
    }
}

/// Each chart point's `<title>`, with the number of points.
const POINTS_JS: &str = "const pts = [...document.querySelectorAll('#charts svg .pt')];
    return pts.map(p => { const t = p.querySelector(':scope > title'); return t ? t.textContent : null; })";

#[test]
fn history_page_switches_metric_and_compares_two_releases() {
    let _one = one_browser();
    let site = Site::get();
    let page = site.largest("histories", "versions");
    let b = Browser::open();
    b.goto(&site.url(&page));
    b.assert_clean_console(&page);
    b.require(&page, &["#metric", "#pct", "#charts", "#cmp-a", "#cmp-b", "#cmp-out"]);
    b.assert_fits_width(&page);
    let versions: Vec<String> = b.options(&page, "#cmp-a").into_iter().filter(|v| !v.is_empty()).collect();
    let titles = b.js(POINTS_JS, json!([]));
    let titles = titles.as_array().cloned().unwrap_or_default();
    assert!(!titles.is_empty(), "{page}: no `#charts svg .pt` point");
    for t in &titles {
        let t = t.as_str().unwrap_or_else(|| panic!("{page}: a .pt point without a <title> child"));
        assert!(
            versions.iter().any(|v| t.contains(v.as_str())),
            "{page}: point title {t:?} names no release of {versions:?}"
        );
    }
    let pct = b.options(&page, "#pct");
    assert!(pct.contains(&"p50".into()) && pct.contains(&"p99".into()), "{page}: #pct options {pct:?}");
    let metrics = b.options(&page, "#metric");
    let current = b.value("#metric");
    let metric = metrics
        .iter()
        .find(|m| **m != current)
        .unwrap_or_else(|| panic!("{page}: one metric only: {metrics:?}"));
    let before = b.text("return document.querySelector('#charts').innerHTML", json!([]));
    b.choose(&page, "#metric", metric);
    let changed = "return document.querySelector('#charts').innerHTML !== arguments[0]";
    b.wait_for(changed, json!([before]), &format!("{page}: #charts to change after #metric={metric}"));
    let other_pct = if b.value("#pct") == "p99" { "p50" } else { "p99" };
    b.choose(&page, "#pct", other_pct);
    let (a, bb) = other_pair(&versions, &b.value("#cmp-a"), &b.value("#cmp-b"));
    let out_before = b.text("return document.querySelector('#cmp-out').textContent", json!([]));
    b.choose(&page, "#cmp-a", &a);
    b.choose(&page, "#cmp-b", &bb);
    let out_changed =
        "const t = document.querySelector('#cmp-out').textContent; return t !== arguments[0] ? t : null";
    let out =
        b.wait_for(out_changed, json!([out_before]), &format!("{page}: #cmp-out to change for {a} vs {bb}"));
    let out = out.as_str().unwrap_or_default().to_string();
    assert!(
        verdict_in(&out).is_some(),
        "{page}: #cmp-out for {a} vs {bb} has no verdict of {VERDICTS:?}: {out:?}"
    );
    b.assert_clean_console(&page);
    let hash = b.hash();
    assert!(
        ["metric=", "pct=", "a=", "b="].iter().all(|k| hash.contains(k)),
        "{page}: location.hash is {hash:?}"
    );
    b.load_afresh(&format!("{}{hash}", site.url(&page)));
    let restored = [("#metric", metric.as_str()), ("#pct", other_pct), ("#cmp-a", &a), ("#cmp-b", &bb)];
    for (sel, want) in restored {
        assert_eq!(b.value(sel), want, "{page}{hash}: {sel} not restored");
    }
    let again = b.text("return document.querySelector('#cmp-out').textContent", json!([]));
    assert_eq!(again, out, "{page}{hash}: #cmp-out differs from the compare the permalink was taken from");
    b.assert_clean_console(&format!("{page}{hash}"));
}

#[test]
fn compare_page_compares_two_runs() {
    let _one = one_browser();
    let site = Site::get();
    let page = site.largest("compares", "runs");
    let b = Browser::open();
    b.goto(&site.url(&page));
    b.assert_clean_console(&page);
    b.require(&page, &["#run-a", "#run-b", "#cmp-out"]);
    b.assert_fits_width(&page);
    let runs: Vec<String> = b.options(&page, "#run-a").into_iter().filter(|v| !v.is_empty()).collect();
    let (a, bb) = other_pair(&runs, &b.value("#run-a"), &b.value("#run-b"));
    b.choose(&page, "#run-a", &a);
    b.choose(&page, "#run-b", &bb);
    let with_verdict = "const t = document.querySelector('#cmp-out').textContent.toLowerCase();
        return arguments[0].some(w => t.includes(w)) ? t : null";
    b.wait_for(with_verdict, json!([VERDICTS]), &format!("{page}: a verdict in #cmp-out for {a} vs {bb}"));
    let out = b.text("return document.querySelector('#cmp-out').textContent", json!([]));
    b.assert_clean_console(&page);
    let hash = b.hash();
    assert!(!hash.is_empty(), "{page}: choosing two runs left location.hash empty");
    b.load_afresh(&format!("{}{hash}", site.url(&page)));
    assert_eq!((b.value("#run-a"), b.value("#run-b")), (a, bb), "{page}{hash}: #run-a/#run-b not restored");
    let again = b.text("return document.querySelector('#cmp-out').textContent", json!([]));
    assert_eq!(again, out, "{page}{hash}: #cmp-out differs from the compare the permalink was taken from");
    b.assert_clean_console(&format!("{page}{hash}"));
}

#[test]
fn screenshots_of_the_front_and_history_pages() {
    let _one = one_browser();
    let site = Site::get();
    let history = site.largest("histories", "versions");
    let b = Browser::open();
    let dir = target_dir().join("site-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    // The front page from its top; the history page at its charts, what it is for.
    let shots = [("index.html", "front.png", "body"), (history.as_str(), "history.png", "#charts")];
    for (page, name, at) in shots {
        b.goto(&site.url(page));
        b.assert_clean_console(page);
        b.js("document.querySelector(arguments[0]).scrollIntoView()", json!([at]));
        let png = b.screenshot_png();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{page}: the screenshot is no PNG");
        assert!(png.len() > 10_000, "{page}: the screenshot is {} bytes, a blank page?", png.len());
        let path = dir.join(name);
        std::fs::write(&path, &png).unwrap();
        println!("{page}: {} ({} bytes)", path.display(), png.len());
    }
}

/// The committed runs the built site is made of, linked into `<target>/site-browser/results/`:
/// the rmcp sweep (25 releases, steps), seed-000-stdio's two newest runs (claims, a compare) and
/// the quickstart's two runs (a compare).
const SAMPLE: [(&str, usize); 3] = [("sweep-rmcp", 1), ("seed-000-stdio", 2), ("quickstart", 2)];

fn sample_results() -> Result<PathBuf, String> {
    let dir = target_dir().join("site-browser").join("results");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    for (scenario, newest) in SAMPLE {
        let from = manifest_dir().join("results").join(scenario);
        let mut runs: Vec<PathBuf> = std::fs::read_dir(&from)
            .map_err(|e| format!("{}: {e}", from.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("records.jsonl").is_file())
            .collect();
        runs.sort();
        if runs.len() < newest {
            return Err(format!("{} holds {} runs, the sample takes {newest}", from.display(), runs.len()));
        }
        let to = dir.join(scenario);
        std::fs::create_dir_all(&to).map_err(|e| format!("{}: {e}", to.display()))?;
        for run in &runs[runs.len() - newest..] {
            let link = to.join(run.file_name().unwrap());
            std::os::unix::fs::symlink(run, &link).map_err(|e| format!("{}: {e}", link.display()))?;
        }
    }
    Ok(dir)
}

/// `benchlab site --serve`, killed and reaped on drop; its stderr kept for failure messages.
struct Server {
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends stdout's first line, then keeps draining it so the server never blocks on a full pipe.
fn first_line(stdout: ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        if let Some(Ok(line)) = lines.next() {
            let _ = tx.send(line);
        }
        lines.for_each(drop);
    });
    rx
}

#[test]
fn serve_answers_chromium_with_the_front_page() {
    // Builds its own site from one small committed run beside the other tests' one; the
    // browser lock is taken only once the server answers.
    let out = tempfile::tempdir().unwrap();
    let results = out.path().join("results").join("quickstart");
    std::fs::create_dir_all(&results).unwrap();
    let run = std::fs::read_dir(manifest_dir().join("results/quickstart"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("records.jsonl").is_file())
        .expect("a committed quickstart run");
    std::os::unix::fs::symlink(&run, results.join(run.file_name().unwrap())).unwrap();
    let mut child = Command::new(BIN)
        .current_dir(manifest_dir())
        .arg("site")
        .arg(out.path().join("results"))
        .arg("--out")
        .arg(out.path().join("site"))
        .args(["--serve", "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (stdout, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let mut server = Server { child, stderr: Arc::default() };
    let kept = server.stderr.clone();
    std::thread::spawn(move || {
        let mut buf = String::new();
        let _ = err.read_to_string(&mut buf);
        kept.lock().unwrap().push_str(&buf);
    });
    let line = first_line(stdout).recv_timeout(Duration::from_secs(600)).unwrap_or_else(|_| {
        let status = server.child.try_wait().ok().flatten();
        let stderr = server.stderr.lock().unwrap().clone();
        panic!("benchlab site --serve printed no first line (exit: {status:?}); stderr:\n{stderr}")
    });
    let start =
        line.find("http://127.0.0.1:").unwrap_or_else(|| panic!("no http://127.0.0.1:<port>/ in {line:?}"));
    let url: String = line[start..].chars().take_while(|c| !c.is_whitespace()).collect();
    let _one = one_browser();
    let b = Browser::open();
    b.goto(&url);
    // Chromium asks an HTTP server for /favicon.ico on its own, some time after the load; whether
    // its 404 is logged before the check is a race, so that one entry is no finding here.
    let severe: Vec<String> =
        b.severe_console().into_iter().filter(|m| !m.contains("/favicon.ico ")).collect();
    assert!(severe.is_empty(), "{url}: console errors (SEVERE):\n  {}", severe.join("\n  "));
    let title = b.cmd("GET", "/title", None);
    assert!(title.as_str().is_some_and(|t| !t.trim().is_empty()), "{url}: empty title {title}");
    assert_eq!(b.body_kind(), "front", "{url}: body[data-page]");
    drop(b);
    server.child.kill().unwrap();
    let status = server.child.wait().unwrap();
    println!("{url}: served the front page; the server ended ({status}) when killed");
}
