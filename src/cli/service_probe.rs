//! `benchlab service-probe` and `benchlab service-ready` (hidden), run by the backend inside a
//! service's container (its loopback is the cell's). `service-probe`: one readiness probe of a
//! program service, a TCP connection or an HTTP GET that must answer 2xx; exit 0 when ready, 1
//! (saying why) when not yet. `service-ready`: one of the lab's own services readied and seeded
//! (`driver::services::ready_one`); what it did as one JSON line, or why not and exit 1.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::exit::{Exit, OK};

#[derive(Debug, clap::Args)]
pub struct ServiceProbeArgs {
    /// `tcp` (a connection is accepted) or `http` (GET answers 2xx).
    #[arg(value_parser = ["tcp", "http"])]
    probe: String,
    /// host:port for tcp; http://host:port/path for http.
    target: String,
}

#[derive(Debug, clap::Args)]
pub struct ServiceReadyArgs {
    /// The service, as the cell's job has it (JSON of `spec::ServiceSpec`).
    #[arg(long)]
    spec: String,
    /// How long it may take to become ready, in milliseconds.
    #[arg(long)]
    startup_ms: u64,
}

pub(super) fn ready(args: ServiceReadyArgs) -> Result<i32, Exit> {
    let spec: crate::spec::ServiceSpec =
        serde_json::from_str(&args.spec).map_err(|e| Exit::input(format!("--spec: {e}")))?;
    match crate::driver::services::ready_one(&spec, Duration::from_millis(args.startup_ms)) {
        Ok(ready) => {
            println!("{}", serde_json::to_string(&ready).expect("serialises"));
            Ok(OK)
        }
        Err(failure) => {
            eprintln!("{}", failure.detail);
            Ok(1)
        }
    }
}

const WAIT: Duration = Duration::from_secs(1);

pub(super) fn run(args: ServiceProbeArgs) -> Result<i32, Exit> {
    let (addr, path) = match args.probe.as_str() {
        "tcp" => (args.target.as_str(), None),
        _ => {
            let rest = args.target.strip_prefix("http://").ok_or_else(|| {
                Exit::input(format!("{}: an http probe's target is http://host:port/path", args.target))
            })?;
            let (addr, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            (addr, Some(if path.is_empty() { "/" } else { path }))
        }
    };
    let sock: SocketAddr =
        addr.parse().map_err(|e| Exit::input(format!("{addr}: not an address host:port ({e})")))?;
    match probe(sock, path) {
        Ok(()) => Ok(OK),
        Err(why) => {
            eprintln!("not ready: {why}");
            Ok(1)
        }
    }
}

fn probe(addr: SocketAddr, path: Option<&str>) -> Result<(), String> {
    let mut conn = TcpStream::connect_timeout(&addr, WAIT).map_err(|e| format!("tcp {addr}: {e}"))?;
    let Some(path) = path else { return Ok(()) };
    conn.set_read_timeout(Some(WAIT))
        .and_then(|()| conn.set_write_timeout(Some(WAIT)))
        .map_err(|e| e.to_string())?;
    write!(conn, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("GET {path}: {e}"))?;
    let mut head = [0u8; 64];
    let n = conn.read(&mut head).map_err(|e| format!("GET {path}: {e}"))?;
    let line = String::from_utf8_lossy(&head[..n]);
    let status = line.split_whitespace().nth(1).and_then(|s| s.parse::<u16>().ok());
    match status {
        Some(code) if (200..300).contains(&code) => Ok(()),
        Some(code) => Err(format!("GET {path} answered {code}")),
        None => Err(format!("GET {path}: not an HTTP answer ({:?})", line.lines().next().unwrap_or(""))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn tcp_and_http_probes_say_ready_or_why_not() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        assert_eq!(probe(addr, None), Ok(()));
        let answer = |status: &'static str| {
            let l = listener.try_clone().unwrap();
            std::thread::spawn(move || {
                let (mut c, _) = l.accept().unwrap();
                let mut buf = [0u8; 256];
                let _ = c.read(&mut buf);
                c.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes()).unwrap();
            })
        };
        // The plain tcp probe's connection is still queued: accept it first.
        let _ = listener.accept().unwrap();
        let t = answer("204 No Content");
        assert_eq!(probe(addr, Some("/health")), Ok(()));
        t.join().unwrap();
        let t = answer("503 Service Unavailable");
        assert_eq!(probe(addr, Some("/health")), Err("GET /health answered 503".into()));
        t.join().unwrap();
        drop(listener);
        assert!(probe(addr, None).unwrap_err().starts_with(&format!("tcp {addr}:")));
    }
}
