//! The fuzz targets' bodies, shared by the libFuzzer entries (fuzz_targets/) and by the stable
//! tests below, which replay each target's corpus (fuzz/corpus/<target>/, plus the checkout's own
//! scenario files) and a seeded mutation run of it, so CI exercises every target without nightly.
//! A target panics only on a bug: every input, however broken, must come back as a value or an
//! error. Where a parser has an independent way to the same answer, the target checks they agree.

use std::path::Path;

use benchlab::mcp::{self, sse, Incoming};
use benchlab::scenario::Scenario;

/// Scenario files: parse, and for a valid one, everything the orchestrator derives from it first.
pub fn scenario(data: &[u8]) {
    let source = String::from_utf8_lossy(data).into_owned();
    match Scenario::parse(Path::new("fuzz.toml"), source) {
        Ok(s) => {
            let cells = s.cells();
            for c in &cells {
                let _ = c.id();
            }
            let _ = s.sha256();
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// Claims: the `[[claim]]` tables of a scenario file, against its own cells when it parses as a
/// scenario, or against a fixed set of cell ids when it does not.
pub fn claims(data: &[u8]) {
    let source = String::from_utf8_lossy(data).into_owned();
    let path = Path::new("fuzz.toml");
    let cell_ids: Vec<String> = match Scenario::parse(path, source.clone()) {
        Ok(s) => s.cells().iter().map(|c| c.id()).collect(),
        Err(_) => ["null/cold_start", "null/serial_calls", "mcp-2.3.0/serial_calls", "a/b"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    };
    match benchlab::claims::parse::parse_claims(path, &source, &cell_ids) {
        Ok(claims) => {
            let _ = format!("{claims:?}");
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// What a server sends: a stdio line through the driver's parser, then what the driver does with
/// a result (tool values, tool names); the HTTP client's views of a body (its preview, and an
/// `endpoint` event's target).
pub fn mcp_response(data: &[u8]) {
    if let Ok(Incoming::Response { outcome: Ok(result), .. }) = mcp::parse_incoming(data) {
        let _ = mcp::tool_value(&result);
        let _ = mcp::tool_names(&result);
        if let Ok(v) = mcp::tool_value(&result) {
            assert!(mcp::values_match(&v, &v) || v.as_f64().is_some_and(f64::is_nan), "{v} != itself");
        }
    }
    let _ = benchlab::driver::httpclient::preview(data);
    let text = String::from_utf8_lossy(data);
    let (path, endpoint) = text.split_once('\n').unwrap_or(("/sse", &text));
    let _ = benchlab::driver::httpclient::resolve_endpoint(path, endpoint);
}

/// Server-Sent Events: the stream fed in chunks (cut where the input's first bytes say) must give
/// the same events, or the same error, as the whole body parsed at once; every event's data then
/// goes through the MCP parser as the HTTP client does.
pub fn sse(data: &[u8]) {
    let (cuts, body) = data.split_at(data.len().min(4));
    let whole = sse::parse_all(body);
    let mut parser = sse::Parser::new();
    let mut chunked = Ok(Vec::new());
    let mut rest = body;
    let mut i = 0;
    while !rest.is_empty() {
        let n = (usize::from(cuts.get(i % cuts.len().max(1)).copied().unwrap_or(0)) % 17 + 1).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        i += 1;
        match (&mut chunked, parser.feed(chunk)) {
            (Ok(all), Ok(events)) => all.extend(events),
            (Ok(_), Err(e)) => chunked = Err(e),
            (Err(_), _) => break,
        }
    }
    if let Ok(all) = &mut chunked {
        // parse_all ends the stream: the last event is dispatched only if a blank line closed it.
        all.extend(parser.feed(b"").unwrap_or_default());
    }
    if let (Ok(w), Ok(c)) = (&whole, &chunked) {
        assert_eq!(w, c, "chunked parsing differs from parsing the whole body");
    }
    for ev in whole.iter().flatten() {
        let _ = mcp::parse_incoming(ev.data.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    /// A small deterministic generator (xorshift64*), so a failure reproduces from its seed.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    /// Tokens worth splicing in: the syntax the parsers care about.
    const DICTIONARY: &[&str] = &[
        "\n",
        "\r\n",
        "\r",
        "[[server]]\n",
        "[[workload]]\n",
        "[[claim]]\n",
        "[placement]\n",
        "[timeouts]\n",
        " = ",
        "\"",
        "'''",
        "{",
        "}",
        "[",
        "]",
        ",",
        "0",
        "-1",
        "1e309",
        "18446744073709551616",
        "\u{0}",
        "\u{feff}",
        "é",
        "data:",
        "data: ",
        "event:",
        "id:",
        "retry:",
        ":",
        "\n\n",
        "\"jsonrpc\":\"2.0\"",
        "\"id\":",
        "\"result\":",
        "\"error\":",
        "\"method\":",
        "null",
        "true",
        "kind = \"serial_calls\"",
        "calls = ",
        "spawns = ",
        "memory = \"1GiB\"",
        "family = \"benchlab-null\"",
        "id = \"x\"",
        "metric = ",
        "stat = ",
        "cell = ",
        "value = ",
        "*",
        "http://",
        "/",
        "..",
        "%",
    ];

    fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
        let mut v = input.to_vec();
        for _ in 0..=rng.below(4) {
            match rng.below(7) {
                0 if !v.is_empty() => {
                    let i = rng.below(v.len());
                    v[i] ^= 1 << rng.below(8);
                }
                1 if !v.is_empty() => {
                    let i = rng.below(v.len());
                    v[i] = rng.next() as u8;
                }
                2 if !v.is_empty() => {
                    let a = rng.below(v.len());
                    let b = (a + rng.below(64)).min(v.len());
                    v.drain(a..b);
                }
                3 => {
                    let at = rng.below(v.len() + 1);
                    let token = DICTIONARY[rng.below(DICTIONARY.len())].as_bytes();
                    v.splice(at..at, token.iter().copied());
                }
                4 if !v.is_empty() => {
                    // Repeat a slice: long lines, deep nesting, many tables.
                    let a = rng.below(v.len());
                    let b = (a + rng.below(32)).min(v.len());
                    let piece = v[a..b].to_vec();
                    for _ in 0..rng.below(64) {
                        v.splice(a..a, piece.iter().copied());
                    }
                }
                5 => v.truncate(rng.below(v.len() + 1)),
                _ => {
                    let at = rng.below(v.len() + 1);
                    v.insert(at, rng.next() as u8);
                }
            }
        }
        v.truncate(1 << 16);
        v
    }

    fn corpus(target: &str, extra: &[PathBuf]) -> Vec<(String, Vec<u8>)> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.extend_from_slice(extra);
        files.sort();
        let seeds: Vec<(String, Vec<u8>)> = files
            .into_iter()
            .filter_map(|p| Some((p.display().to_string(), std::fs::read(&p).ok()?)))
            .collect();
        assert!(!seeds.is_empty(), "no corpus for {target} in {}", dir.display());
        seeds
    }

    fn scenario_files() -> Vec<PathBuf> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Mutations per target: BENCHLAB_FUZZ_ITERS, or a default sized for CI on two cores.
    fn iterations(default: u64) -> u64 {
        std::env::var("BENCHLAB_FUZZ_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
    }

    /// Replays every seed, then `n` mutants of them; a panic names the input that caused it.
    fn run(target: &str, f: fn(&[u8]), extra: &[PathBuf], n: u64) {
        let seeds = corpus(target, extra);
        let check = |what: &str, input: &[u8]| {
            if let Err(e) = std::panic::catch_unwind(|| f(input)) {
                let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("artifacts").join(target);
                let _ = std::fs::create_dir_all(&out);
                let file = out.join(format!("crash-{}", what.replace(['/', ' '], "_")));
                let _ = std::fs::write(&file, input);
                eprintln!("{target}: {what} panicked; input saved as {}", file.display());
                std::panic::resume_unwind(e);
            }
        };
        for (name, data) in &seeds {
            check(name, data);
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ target.len() as u64);
        for i in 0..n {
            let (_, seed) = &seeds[rng.below(seeds.len())];
            let input = mutate(&mut rng, seed);
            check(&format!("mutant {i}"), &input);
        }
    }

    #[test]
    fn scenario_target() {
        run("scenario", super::scenario, &scenario_files(), iterations(3000));
    }

    #[test]
    fn claims_target() {
        run("claims", super::claims, &scenario_files(), iterations(1500));
    }

    #[test]
    fn mcp_response_target() {
        run("mcp_response", super::mcp_response, &[], iterations(20000));
    }

    #[test]
    fn sse_target() {
        run("sse", super::sse, &[], iterations(20000));
    }
}
