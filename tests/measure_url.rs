//! `benchlab measure --url` against the real null server over streamable HTTP on the loopback: a
//! closed and an open loop with every answer checked, a server that turns wrong mid-load (each
//! wrong answer counted, though it differs from a right one in a single byte), the ungated mode
//! (any answer that is not an error), and bad input refused with exit 2; and the null server's own
//! HTTP/1.1 loop on a raw socket: pipelined requests answered in order, a request split across
//! writes and its 100 Continue, and what it refuses (411, 400), closing after.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");

/// The null server on a free port, killed when dropped.
struct Server {
    _child: common::KillOnDrop,
    url: String,
}

fn server(fault: Option<&str>) -> Server {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut cmd = Command::new(BIN);
    cmd.args(["null-server", "--http", &port.to_string()]);
    if let Some(f) = fault {
        cmd.args(["--fault", f]);
    }
    let s = Server {
        _child: common::KillOnDrop(cmd.spawn().unwrap()),
        url: format!("http://127.0.0.1:{port}/mcp"),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the null server did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    s
}

fn measure(url: &str, args: &[&str]) -> (i32, Value, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(["measure", "--url", url, "--duration", "1s", "--json"]).args(args);
    if !args.contains(&"--warmup-secs") {
        cmd.args(["--warmup-secs", "200ms"]);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v, stderr)
}

#[test]
fn closed_and_open_loops_check_every_answer() {
    let s = server(None);
    let (code, v, err) = measure(&s.url, &["--suite", "weekly", "--workers", "4"]);
    assert_eq!(code, 0, "{err}");
    let load = &v["load"];
    assert_eq!((load["mode"].as_str(), load["workers"].as_u64()), (Some("closed"), Some(4)), "{v}");
    assert!(load["ok"].as_u64().unwrap() > 100, "{load}");
    assert_eq!(load["failed"], 0, "{load}");
    assert_eq!(v["tool"], "add_numbers");
    assert!(v["protocol_version"].as_str().is_some_and(|p| !p.is_empty()));
    assert_eq!(v["server_info"]["name"], "benchlab-null");

    let (code, v, err) = measure(&s.url, &["--suite", "weekly", "--rate", "2000", "--workers", "8"]);
    assert_eq!(code, 0, "{err}");
    let load = &v["load"];
    assert_eq!(load["mode"], "open");
    assert_eq!(load["target_rps"], 2000.0);
    // 2,000 slots in the 1 s window: each taken or counted as dropped, and the taken ones answered.
    let ok = load["ok"].as_u64().unwrap();
    assert_eq!(ok + load["dropped"].as_u64().unwrap(), 2000, "{load}");
    assert!(ok > 1500, "{load}");
    assert_eq!(load["failed"], 0, "{load}");
}

#[test]
fn two_driver_cpus_drive_one_load_from_two_threads() {
    let s = server(None);
    // Five users dealt between two threads (3 and 2): every one counted once, every answer checked.
    let mut child = Command::new(BIN)
        .args(["measure", "--url", &s.url, "--duration", "1s", "--json", "--warmup-secs", "200ms"])
        .args(["--suite", "weekly", "--workers", "5", "--driver-cpus", "0-1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The second driver thread, seen while the load runs, on the second CPU.
    let mut second = None;
    while second.is_none() && child.try_wait().unwrap().is_none() {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id())).into_iter().flatten().flatten();
        second = tasks
            .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "driver-1"))
            .find_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
            .and_then(|st| {
                st.lines().find(|l| l.starts_with("Cpus_allowed_list:")).map(|l| l[18..].trim().to_string())
            });
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let (code, err) = (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(code, 0, "{err}");
    assert_eq!(second.as_deref(), Some("1"), "a thread named driver-1 pinned to CPU 1 while the load ran");
    assert_eq!((v["driver_cpus"].as_str(), v["driver_threads"].as_u64()), (Some("0-1"), Some(2)), "{v}");
    let load = &v["load"];
    assert_eq!((load["workers"].as_u64(), load["sessions"].as_u64()), (Some(5), Some(5)), "{load}");
    let ok = load["ok"].as_u64().unwrap();
    assert!(ok > 100, "{load}");
    assert_eq!(load["failed"], 0, "{load}");
    // The two threads' series merged: its intervals hold every call, the warm-up's too.
    let series: u64 =
        load["series"]["intervals"].as_array().unwrap().iter().map(|i| i["ok"].as_u64().unwrap()).sum();
    assert!(series >= ok, "series {series} < ok {ok}");
    // The two threads' histograms merged: one latency for every correct answer.
    assert_eq!(load["latency"]["summary"]["count"].as_u64(), Some(ok), "{load}");

    // One schedule dealt slot by slot: each of the 2,000 slots taken once or dropped.
    let (code, v, err) =
        measure(&s.url, &["--suite", "weekly", "--rate", "2000", "--workers", "8", "--driver-cpus", "0-1"]);
    assert_eq!(code, 0, "{err}");
    let load = &v["load"];
    let ok = load["ok"].as_u64().unwrap();
    assert_eq!(ok + load["dropped"].as_u64().unwrap(), 2000, "{load}");
    assert!(ok > 1500, "{load}");
    assert_eq!(load["failed"], 0, "{load}");
    assert_eq!(load["latency"]["summary"]["count"].as_u64(), Some(ok), "{load}");
    // A single CPU stays one thread.
    let (code, v, err) = measure(&s.url, &["--suite", "weekly", "--workers", "2", "--driver-cpus", "1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["driver_threads"], 1, "{v}");
}

#[test]
fn a_server_that_turns_wrong_mid_load_has_every_wrong_answer_counted() {
    // Right for the first 400 calls (the gate's included), then every answer is the right one
    // with one digit changed: same length, same bytes but one.
    let s = server(Some("wrong@400"));
    let (code, v, err) = measure(&s.url, &["--suite", "weekly", "--workers", "2", "--warmup-secs", "0s"]);
    assert_eq!(code, 0, "{err}");
    let load = &v["load"];
    let ok = load["ok"].as_u64().unwrap();
    let wrong = load["errors"]["wrong_result"].as_u64().unwrap_or(0);
    assert!(ok > 0 && ok < 400, "{load}");
    assert!(wrong > 100, "{load}");
    assert_eq!(load["failed"].as_u64(), Some(wrong), "only wrong results: {load}");
    let example = load["error_examples"][0].as_str().unwrap_or("");
    assert!(example.contains("expected"), "{example}");
}

#[test]
fn without_a_suite_any_answer_that_is_not_an_error_counts() {
    let s = server(None);
    let (code, v, err) =
        measure(&s.url, &["--tool", "echo", "--args", r#"{"message":"hi"}"#, "--workers", "2"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["suite"], Value::Null);
    assert_eq!(v["tool"], "echo");
    assert!(v["load"]["ok"].as_u64().unwrap() > 100);
    // add_numbers (the first tool listed) without its arguments: every call is a tool error,
    // and the message says how to give them.
    let (code, _, err) = measure(&s.url, &["--workers", "1"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("tool_error") && err.contains("--args"), "{err}");
}

#[test]
fn bad_urls_and_options_are_refused_with_exit_2() {
    for (args, says) in [
        (vec!["--url", "https://127.0.0.1:1/mcp"], "https"),
        (vec!["--url", "http://example.org/mcp"], "IP address"),
        (vec!["--url", "http://127.0.0.1:1/mcp", "--transport", "ws"], "--transport"),
        (vec!["--url", "http://127.0.0.1:1/mcp", "--rate", "0"], "--rate"),
        (vec!["--url", "http://127.0.0.1:1/mcp", "--suite", "nope"], "unknown suite"),
        (vec!["--url", "http://127.0.0.1:1/mcp", "--runs", "3"], "cannot be used"),
        (vec!["--rate", "10", "--", "python3"], "--url"),
        (vec!["--url", "http://127.0.0.1:1/mcp", "--duration", "5 parsecs"], "unknown unit"),
        (vec!["--url", "http://127.0.0.1:1/mcp", "--duration", "0s"], "more than 0"),
    ] {
        let out = Command::new(BIN).arg("measure").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // Nothing listens there: an error that names the address, not a panic. The old spelling of
    // a duration (a bare number of seconds) still works, with a notice.
    let out = Command::new(BIN)
        .args(["measure", "--url", "http://127.0.0.1:1/mcp", "--duration", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(err.contains("127.0.0.1:1"), "{err}");
    assert!(err.contains("--duration 1: a bare number of seconds is deprecated; write 1s"), "{err}");
}

/// Reads from `s` until what came satisfies `done` or the server closes (10 s at most).
fn read_until(s: &mut std::net::TcpStream, done: impl Fn(&str) -> bool) -> String {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if done(&text) {
            return text;
        }
        match s.read(&mut buf) {
            Ok(0) => return text,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("reading the null server's answers: {e}; so far {text:?}"),
        }
    }
}

#[test]
fn the_null_server_answers_pipelined_split_and_refused_requests_in_order() {
    use std::io::Write;
    let s = server(None);
    let addr = s.url.trim_start_matches("http://").trim_end_matches("/mcp").to_string();
    let connect = || std::net::TcpStream::connect(&addr).unwrap();
    let call = |id: u32, a: u32| {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"add_numbers","arguments":{{"a":{a},"b":1}}}}}}"#
        );
        format!("POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len())
    };
    let answered = |n: usize| move |t: &str| t.matches(r#""isError":false}}"#).count() >= n;
    // Three requests in one write: three answers, in order, on the one connection.
    let mut c = connect();
    c.write_all(format!("{}{}{}", call(1, 10), call(2, 20), call(3, 30)).as_bytes()).unwrap();
    let text = read_until(&mut c, answered(3));
    let ids: Vec<_> = text.match_indices(r#""id":"#).map(|(i, _)| &text[i + 5..i + 6]).collect();
    assert_eq!(ids, ["1", "2", "3"], "{text}");
    for v in ["11", "21", "31"] {
        assert!(text.contains(&format!(r#""structuredContent":{{"result":{v}}}"#)), "{v}: {text}");
    }
    // On the same connection, one request in three writes: its head in two, then its body once
    // the server has said 100 Continue.
    let req = call(4, 40).replace("Host: x\r\n", "Host: x\r\nExpect: 100-continue\r\n");
    let (head, body) = req.split_once("\r\n\r\n").unwrap();
    c.write_all(&head.as_bytes()[..20]).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    c.write_all(format!("{}\r\n\r\n", &head[20..]).as_bytes()).unwrap();
    let cont = read_until(&mut c, |t| t.ends_with("\r\n\r\n"));
    assert_eq!(cont, "HTTP/1.1 100 Continue\r\n\r\n");
    c.write_all(body.as_bytes()).unwrap();
    let text = read_until(&mut c, answered(1));
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n") && text.contains(r#""result":41}"#), "{text}");
    // A chunked body is refused with 411, and the connection closed after it.
    let mut c = connect();
    c.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        .unwrap();
    let text = read_until(&mut c, |_| false);
    assert!(text.starts_with("HTTP/1.1 411 Length Required\r\n"), "{text}");
    assert!(text.contains("connection: close\r\n") && text.contains("Content-Length"), "{text}");
    // Bytes that are no request: 400, and closed.
    let mut c = connect();
    c.write_all(b"\x01\x02 nonsense\r\n\r\n").unwrap();
    let text = read_until(&mut c, |_| false);
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
}

const DATA_SUITE: &str = r#"name = "weekly-data"

[[tool]]
name = "add_numbers"
args = { a = 17, b = 25 }
check = { path = "", equals = 42 }

[[tool]]
name = "echo"
args_list = [{ message = "alpha" }, { message = "beta" }]
check = { path = "", regex = "^(alpha|beta)$" }

[[tool]]
name = "word_count"
args = { text = "one two three" }
check = { path = "", equals = 3 }
"#;

/// A suite written as data (a file of its tools, arguments and checks), here describing the null
/// server's own tools: its gate passes, every load answer is checked by the file's check, a
/// wrong expectation fails the gate with what was found, and `list` decides how tools/list is
/// read.
#[test]
fn a_suite_file_gates_the_server_and_checks_every_answer_by_its_own_rule() {
    let s = server(None);
    let d = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let p = d.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let good = file("good.toml", DATA_SUITE);
    let (code, v, err) = measure(&s.url, &["--suite", &good, "--tool", "echo", "--workers", "2"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!((v["suite"].as_str(), v["tool"].as_str()), (Some("weekly-data"), Some("echo")), "{v}");
    let load = &v["load"];
    assert!(load["ok"].as_u64().unwrap() > 100, "{load}");
    assert_eq!(load["failed"], 0, "{load}");

    let wrong = file("wrong.toml", &DATA_SUITE.replace("equals = 42", "equals = 43"));
    let (code, _, err) = measure(&s.url, &["--suite", &wrong, "--workers", "1"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("correctness gate failed") && err.contains("expected 43, got 42"), "{err}");

    // Only echo written down: exact (the default) refuses the other two tools listed, includes
    // takes them.
    let echo_only = "name = \"echo-only\"\n[[tool]]\nname = \"echo\"\nargs = { message = \"x\" }\n";
    let exact = file("exact.toml", echo_only);
    let (code, _, err) = measure(&s.url, &["--suite", &exact, "--workers", "1"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("expected exactly the echo-only suite"), "{err}");
    let includes = file("includes.toml", &echo_only.replace("[[tool]]", "list = \"includes\"\n[[tool]]"));
    let (code, v, err) = measure(&s.url, &["--suite", &includes, "--workers", "1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["load"]["failed"], 0);

    let bad = file("bad.toml", "name = \"b\"\n[[tool]]\nname = \"echo\"\ncheck = \"fine\"\n");
    let (code, _, err) = measure(&s.url, &["--suite", &bad]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad.toml:4:9") && err.contains("expected \"not_error\""), "{err}");
}

/// A suite file whose calls come from files beside it and from its seed: generated arguments
/// checked by a schema, arguments from a JSON-lines file checked by a schema file, and calls
/// paired with their own answers, of which a wrong one is counted in the load (the gate takes
/// only the first call).
#[test]
fn a_suite_file_reads_its_calls_from_files_beside_it_and_from_its_seed() {
    let s = server(None);
    let d = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(d.path().join(name), text).unwrap();
    write(
        "suite.toml",
        r#"name = "weekly-files"
seed = 7

[[tool]]
name = "add_numbers"
args_gen = { a = { int = [1, 1000] }, b = { int = [-50, 50] } }
check = { schema = { type = "integer", minimum = -49, maximum = 1050 } }

[[tool]]
name = "echo"
args_file = "messages.jsonl"
check = { schema_file = "echo.schema.json" }

[[tool]]
name = "word_count"
calls_file = "word_count.jsonl"
"#,
    );
    write("messages.jsonl", "{\"message\": \"alpha\"}\n{\"message\": \"beta\"}\n");
    write("echo.schema.json", r#"{"type": "string", "enum": ["alpha", "beta"]}"#);
    write("word_count.jsonl", "{\"args\": {\"text\": \"a b\"}, \"check\": {\"equals\": 2}}\n{\"args\": {\"text\": \"a b c\"}, \"check\": {\"equals\": 3}}\n");
    let suite = d.path().join("suite.toml").to_string_lossy().into_owned();
    let mut hashes = std::collections::BTreeSet::new();
    for tool in ["add_numbers", "echo", "word_count"] {
        let (code, v, err) = measure(&s.url, &["--suite", &suite, "--tool", tool, "--workers", "2"]);
        assert_eq!(code, 0, "{tool}: {err}");
        assert_eq!(v["suite"], "weekly-files", "{v}");
        hashes.insert(v["suite_sha256"].as_str().unwrap().to_string());
        assert!(v["load"]["ok"].as_u64().unwrap() > 100, "{tool}: {}", v["load"]);
        assert_eq!(v["load"]["failed"], 0, "{tool}: {}", v["load"]);
    }
    assert_eq!(hashes.len(), 1, "one suite, one hash: {hashes:?}");
    // The second paired call expects the wrong count: the gate (its first call) passes, and the
    // load counts about every other answer as wrong.
    write("word_count.jsonl", "{\"args\": {\"text\": \"a b\"}, \"check\": {\"equals\": 2}}\n{\"args\": {\"text\": \"a b c\"}, \"check\": {\"equals\": 4}}\n");
    let (_, v, err) = measure(&s.url, &["--suite", &suite, "--tool", "word_count", "--workers", "2"]);
    assert!(
        !hashes.contains(v["suite_sha256"].as_str().unwrap()),
        "a file changed, the suite's hash did: {v}"
    );
    let load = &v["load"];
    assert!(load["ok"].as_u64().unwrap() > 50 && load["failed"].as_u64().unwrap() > 50, "{err} {load}");
    // A schema keyword outside the subset is refused when the file is read, at the check.
    write("echo.schema.json", r#"{"type": "string", "format": "email"}"#);
    let (code, _, err) = measure(&s.url, &["--suite", &suite, "--tool", "echo"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("suite.toml:12:9") && err.contains("keyword `format` is not understood"), "{err}");
}
