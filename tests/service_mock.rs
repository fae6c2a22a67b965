//! `benchlab service-mock` as a process on the loopback: the reproduced benchmark's expectation
//! answered, a miss answered 404 naming the request, a delay waited (a lower bound only: the host
//! is shared) on its own connection while another connection is answered, two requests on one
//! kept-alive connection, and a bad file refused with exit 2 naming its field. Nothing but the
//! loopback; the service is started on port 0 and the test waits for the line naming its port.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_benchlab");

const EXPECTATIONS: &str = r#"[
  {"httpRequest": {"method": "GET", "path": "/api"},
   "httpResponse": {"statusCode": 200, "headers": {"Content-Type": ["application/json"]},
                    "body": "{\"status\":\"ok\",\"message\":\"Mock API response\",\"data\":{\"id\":1,\"name\":\"benchmark-test\"}}"}},
  {"httpRequest": {"path": "/slow"},
   "httpResponse": {"body": "late", "delay": {"timeUnit": "MILLISECONDS", "value": 400}}},
  {"httpRequest": {"path": "/never"},
   "httpResponse": {"body": "much later", "delay": {"timeUnit": "HOURS", "value": 1}}}
]"#;

/// The service on a port of its choosing, killed when dropped.
struct Mock {
    _child: common::KillOnDrop,
    port: u16,
}

/// Starts the service on `file` and waits for its line naming the port it listens on.
fn start(file: &std::path::Path) -> Mock {
    let mut child = Command::new(BIN)
        .args(["service-mock", "--port", "0", "--expectations"])
        .arg(file)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    assert!(lines.read_line(&mut line).unwrap() > 0, "the service ended without a line");
    let port = line
        .split("listening on 127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    Mock { _child: common::KillOnDrop(child), port }
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s
}

fn send(s: &mut TcpStream, method: &str, path: &str) {
    write!(s, "{method} {path} HTTP/1.1\r\nhost: mock-api:1080\r\ncontent-length: 0\r\n\r\n").unwrap();
}

/// One answer read off a kept-alive connection: status, headers (names in lower case), body.
fn answer(r: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>, String) {
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        assert!(r.read_line(&mut line).unwrap() > 0, "the connection closed mid-answer");
        if line == "\r\n" {
            break;
        }
        head.push(line.trim_end().to_string());
    }
    let status = head[0].split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = head[1..]
        .iter()
        .map(|h| h.split_once(':').unwrap())
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length = headers.iter().find(|(n, _)| n == "content-length").unwrap().1.parse().unwrap();
    let mut body = vec![0; length];
    r.read_exact(&mut body).unwrap();
    (status, headers, String::from_utf8(body).unwrap())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

#[test]
fn answers_misses_delays_and_keeps_connections_alive() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mockserver.json");
    std::fs::write(&file, EXPECTATIONS).unwrap();
    let mock = start(&file);

    // Two requests on one connection: the expectation, then a miss.
    let mut c = BufReader::new(connect(mock.port));
    send(c.get_mut(), "GET", "/api");
    let (status, headers, body) = answer(&mut c);
    assert_eq!((status, header(&headers, "content-type")), (200, Some("application/json")));
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["data"], json!({"id": 1, "name": "benchmark-test"}));
    send(c.get_mut(), "POST", "/api?x=1");
    let (status, _, body) = answer(&mut c);
    assert_eq!(status, 404);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"error": "no expectation matches", "method": "POST", "path": "/api"})
    );

    // An answer an hour away holds its own connection only: the kept one is answered meanwhile,
    // and so is a delayed one, no sooner than its delay.
    let mut never = connect(mock.port);
    send(&mut never, "GET", "/never");
    let asked = Instant::now();
    send(c.get_mut(), "GET", "/slow");
    let (status, _, body) = answer(&mut c);
    let waited = asked.elapsed();
    assert_eq!((status, body.as_str()), (200, "late"));
    assert!(waited >= Duration::from_millis(400), "answered after {waited:?}, before its 400 ms delay");
    never.set_nonblocking(true).unwrap();
    let pending = never.read(&mut [0; 1]).map_err(|e| e.kind());
    assert_eq!(pending, Err(std::io::ErrorKind::WouldBlock), "the hour's answer is still pending");

    // The status route names the file it serves.
    send(c.get_mut(), "PUT", "/mockserver/status");
    let (status, _, body) = answer(&mut c);
    let sha256 = benchlab::hash::sha256_hex(EXPECTATIONS.as_bytes());
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"ports": [mock.port], "expectations": 3, "expectations_sha256": sha256})
    );
}

#[test]
fn a_bad_file_is_refused_with_exit_2_naming_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mockserver.json");
    std::fs::write(&file, r#"[{"httpRequest": {"path": "/api"}, "httpResponse": {"statusCode": "200"}}]"#)
        .unwrap();
    let out = Command::new(BIN)
        .args(["service-mock", "--port", "0", "--expectations"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "mockserver.json: expectations[0].httpResponse.statusCode: expected a number, found a string"
        ),
        "{stderr}"
    );
    let missing = dir.path().join("absent.json");
    let out = Command::new(BIN).args(["service-mock", "--expectations"]).arg(&missing).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}
