//! A small blocking HTTP/1.1 client for the lab's HTTP services (the API, the mock): JSON in and
//! out over one kept-alive connection, bodies with a Content-Length only, and the readiness
//! probes. Not a general client (no TLS, no chunked bodies, no redirects).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The largest answer body read (the API's largest is a few kB).
const MAX_BODY: usize = 16 << 20;

/// A kept-alive connection to one HTTP server, opened at the first request and again when the
/// server closed it.
pub struct Client {
    addr: String,
    timeout: Duration,
    conn: Option<BufReader<TcpStream>>,
}

/// Why a request failed, and whether it may be sent again on a fresh connection: only when a
/// reused connection failed before any byte of the answer came back.
struct Failure {
    message: String,
    stale: bool,
}

impl Client {
    /// A client of `addr` (`host:port`); `timeout` bounds the connect and every read and write.
    pub fn new(addr: &str, timeout: Duration) -> Client {
        Client { addr: addr.to_string(), timeout, conn: None }
    }

    pub fn get(&mut self, path: &str) -> Result<(u16, Value), String> {
        self.request("GET", path, None)
    }

    pub fn post_json(&mut self, path: &str, body: &Value) -> Result<(u16, Value), String> {
        self.request("POST", path, Some(body.to_string().as_bytes()))
    }

    /// One request (a JSON body when there is one) and its answer's status and JSON body.
    pub fn request(&mut self, method: &str, path: &str, body: Option<&[u8]>) -> Result<(u16, Value), String> {
        let reused = self.conn.is_some();
        match self.exchange(method, path, body) {
            Ok(r) => Ok(r),
            Err(f) if f.stale && reused => {
                self.conn = None;
                self.exchange(method, path, body).map_err(|f| f.message)
            }
            Err(f) => Err(f.message),
        }
    }

    fn connect(&self) -> Result<BufReader<TcpStream>, String> {
        let err = |e: String| format!("http://{}: {e}", self.addr);
        let sock = self
            .addr
            .to_socket_addrs()
            .map_err(|e| err(e.to_string()))?
            .next()
            .ok_or_else(|| err("no address".into()))?;
        let s = TcpStream::connect_timeout(&sock, self.timeout).map_err(|e| err(format!("connect: {e}")))?;
        s.set_read_timeout(Some(self.timeout)).map_err(|e| err(e.to_string()))?;
        s.set_write_timeout(Some(self.timeout)).map_err(|e| err(e.to_string()))?;
        s.set_nodelay(true).map_err(|e| err(e.to_string()))?;
        Ok(BufReader::new(s))
    }

    /// One request and its answer on the kept connection (opened first when there is none).
    fn exchange(&mut self, method: &str, path: &str, body: Option<&[u8]>) -> Result<(u16, Value), Failure> {
        let fatal = |message: String| Failure { message, stale: false };
        if self.conn.is_none() {
            self.conn = Some(self.connect().map_err(fatal)?);
        }
        let conn = self.conn.as_mut().expect("connected above");
        let body = body.unwrap_or_default();
        let mut req =
            format!("{method} {path} HTTP/1.1\r\nhost: {}\r\ncontent-length: {}\r\n", self.addr, body.len());
        if !body.is_empty() {
            req.push_str("content-type: application/json\r\n");
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        let at = format!("{method} http://{}{path}", self.addr);
        if let Err(e) = conn.get_mut().write_all(&bytes) {
            self.conn = None;
            return Err(Failure { message: format!("{at}: write: {e}"), stale: true });
        }
        match read_response(conn) {
            Ok((status, value, close)) => {
                if close {
                    self.conn = None;
                }
                Ok((status, value))
            }
            Err(f) => {
                self.conn = None;
                Err(Failure { message: format!("{at}: {}", f.message), stale: f.stale })
            }
        }
    }
}

/// Reads one answer: its status, its JSON body (`Null` when empty) and whether the server closes
/// the connection after it.
fn read_response(r: &mut impl BufRead) -> Result<(u16, Value, bool), Failure> {
    let fatal = |message: String| Failure { message, stale: false };
    let mut line = String::new();
    match r.read_line(&mut line) {
        Ok(0) => return Err(Failure { message: "connection closed before the answer".into(), stale: true }),
        Err(e) if line.is_empty() => return Err(Failure { message: format!("read: {e}"), stale: true }),
        Err(e) => return Err(fatal(format!("read: {e}"))),
        Ok(_) => {}
    }
    let status = line
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| line.strip_prefix("HTTP/1.0 "))
        .and_then(|s| s.get(..3))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| fatal(format!("not an HTTP/1.x status line: {:?}", line.trim_end())))?;
    let (mut length, mut close) = (None, line.starts_with("HTTP/1.0"));
    loop {
        line.clear();
        r.read_line(&mut line).map_err(|e| fatal(format!("read: {e}")))?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').ok_or_else(|| fatal(format!("bad header {header:?}")))?;
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => {
                length =
                    Some(value.parse::<usize>().map_err(|_| fatal(format!("bad content-length {value:?}")))?)
            }
            "transfer-encoding" => return Err(fatal(format!("transfer-encoding {value} is not supported"))),
            "connection" => close = value.eq_ignore_ascii_case("close"),
            _ => {}
        }
    }
    let length = length.ok_or_else(|| fatal("an answer without content-length".into()))?;
    if length > MAX_BODY {
        return Err(fatal(format!("an answer of {length} bytes (at most {MAX_BODY})")));
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body).map_err(|e| fatal(format!("read body: {e}")))?;
    let value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).map_err(|e| fatal(format!("an answer that is not JSON: {e}")))?
    };
    Ok((status, value, close))
}

/// Percent-encodes a query parameter's value: every byte but the unreserved ones (RFC 3986's
/// letters, digits, `-`, `.`, `_`, `~`).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Waits until the API on 127.0.0.1:`port` answers `GET /health` with 200, trying every 50 ms
/// until `deadline`; its answer, or an error that says what was seen last.
pub fn api_ready(port: u16, deadline: Instant) -> Result<Value, String> {
    http_ready("the API", port, "GET", "/health", deadline)
}

/// Waits until the mock on 127.0.0.1:`port` answers MockServer's `PUT /mockserver/status` with
/// 200, as [`api_ready`] does; its answer names the expectations it serves.
pub fn mock_ready(port: u16, deadline: Instant) -> Result<Value, String> {
    http_ready("the mock", port, "PUT", crate::services::mock::STATUS_PATH, deadline)
}

fn http_ready(what: &str, port: u16, method: &str, path: &str, deadline: Instant) -> Result<Value, String> {
    let addr = format!("127.0.0.1:{port}");
    loop {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(10));
        let last = match Client::new(&addr, left.min(Duration::from_secs(1))).request(method, path, None) {
            Ok((200, v)) => return Ok(v),
            Ok((status, v)) => format!("{method} {path} answered {status} {v}"),
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(format!("{what} on port {port} is not ready: {last}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(bytes: &[u8]) -> Result<(u16, Value, bool), String> {
        read_response(&mut &bytes[..]).map_err(|f| f.message)
    }

    #[test]
    fn reads_answers_with_a_content_length() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 8\r\n\r\n{\"a\": 1}";
        assert_eq!(parse(ok), Ok((200, json!({"a": 1}), false)));
        let gone = b"HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(parse(gone), Ok((404, Value::Null, true)));
        assert!(parse(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            .unwrap_err()
            .contains("chunked"));
        assert!(parse(b"HTTP/1.1 200 OK\r\n\r\n").unwrap_err().contains("content-length"));
        assert!(parse(b"SSH-2.0\r\n").unwrap_err().contains("status line"));
        assert!(parse(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\n{x}").unwrap_err().contains("JSON"));
        assert!(read_response(&mut &b""[..]).is_err_and(|f| f.stale));
    }

    /// A server that answers one request per connection and closes it (without saying so): the
    /// client's second request finds the kept socket closed and reconnects once.
    #[test]
    fn reconnects_once_when_the_kept_connection_was_closed() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            for (n, conn) in listener.incoming().take(2).enumerate() {
                let mut r = BufReader::new(conn.unwrap());
                let mut line = String::new();
                while r.read_line(&mut line).unwrap() > 2 {
                    line.clear();
                }
                let body = format!("{{\"n\":{n}}}");
                let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                r.get_mut().write_all(answer.as_bytes()).unwrap();
            }
        });
        let mut c = Client::new(&addr, Duration::from_secs(5));
        assert_eq!(c.get("/health").unwrap(), (200, json!({"n": 0})));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(c.get("/health").unwrap(), (200, json!({"n": 1})));
        server.join().unwrap();
    }

    #[test]
    fn percent_encodes_all_but_unreserved_bytes() {
        assert_eq!(percent_encode("Amber Kettle"), "Amber%20Kettle");
        assert_eq!(percent_encode("a&b=c+d/é~"), "a%26b%3Dc%2Bd%2F%C3%A9~");
        for s in ["Amber Kettle", "a&b=c+d/é~%", ""] {
            assert_eq!(crate::services::api::percent_decode(&percent_encode(s)).unwrap(), s);
        }
    }

    #[test]
    fn a_closed_port_is_not_ready_and_says_so() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let err = api_ready(port, Instant::now() + Duration::from_millis(120)).unwrap_err();
        assert!(err.contains("not ready") && err.contains("connect"), "{err}");
    }
}
