//! A small blocking Redis client (RESP2 over a `TcpStream`): commands, pipelines, the seeding of
//! the shop's dataset and the readiness probe. It is enough for the lab's seeding and the null
//! server's tools; it is not a general client (no pub/sub, no RESP3, no cluster).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::mcp::shop::{self, Dataset};

/// One RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The reply, or its error text as an `Err`.
    pub fn ok(self) -> Result<Reply, String> {
        match self {
            Reply::Error(e) => Err(e),
            other => Ok(other),
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// A simple or bulk string as text (`None` for nil, other kinds and non-UTF-8 bytes).
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Reply::Simple(s) => Some(s),
            Reply::Bulk(Some(b)) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }
}

/// A connection to one Redis server.
pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    /// Connects to `addr` (`host:port`); `timeout` bounds the connect and every read and write.
    pub fn connect(addr: &str, timeout: Duration) -> Result<Client, String> {
        let sock = addr
            .to_socket_addrs()
            .map_err(|e| format!("redis at {addr}: {e}"))?
            .next()
            .ok_or_else(|| format!("redis at {addr}: no address"))?;
        let stream = TcpStream::connect_timeout(&sock, timeout)
            .map_err(|e| format!("redis at {addr}: connect: {e}"))?;
        let setup = || -> std::io::Result<TcpStream> {
            stream.set_read_timeout(Some(timeout))?;
            stream.set_write_timeout(Some(timeout))?;
            stream.set_nodelay(true)?;
            stream.try_clone()
        };
        let writer = setup().map_err(|e| format!("redis at {addr}: {e}"))?;
        Ok(Client { reader: BufReader::new(stream), writer })
    }

    /// Sends one command and reads its reply (a Redis error is `Ok(Reply::Error)`).
    pub fn command(&mut self, args: &[&str]) -> Result<Reply, String> {
        self.writer.write_all(&encode(args)).map_err(|e| format!("redis: write: {e}"))?;
        read_reply(&mut self.reader)
    }

    /// Writes every command, then reads every reply, in order.
    pub fn pipeline(&mut self, cmds: &[Vec<String>]) -> Result<Vec<Reply>, String> {
        let mut out = Vec::new();
        for c in cmds {
            out.extend(encode(c));
        }
        self.writer.write_all(&out).map_err(|e| format!("redis: write: {e}"))?;
        cmds.iter().map(|_| read_reply(&mut self.reader)).collect()
    }
}

/// A command as a RESP array of bulk strings.
pub fn encode<S: AsRef<str>>(args: &[S]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref().as_bytes();
        out.extend(format!("${}\r\n", a.len()).as_bytes());
        out.extend(a);
        out.extend(b"\r\n");
    }
    out
}

/// A reply as a server writes it.
pub fn encode_reply(r: &Reply) -> Vec<u8> {
    match r {
        Reply::Simple(s) => format!("+{s}\r\n").into_bytes(),
        Reply::Error(e) => format!("-{e}\r\n").into_bytes(),
        Reply::Int(n) => format!(":{n}\r\n").into_bytes(),
        Reply::Bulk(None) => b"$-1\r\n".to_vec(),
        Reply::Bulk(Some(b)) => {
            let mut out = format!("${}\r\n", b.len()).into_bytes();
            out.extend(b);
            out.extend(b"\r\n");
            out
        }
        Reply::Array(None) => b"*-1\r\n".to_vec(),
        Reply::Array(Some(items)) => {
            let mut out = format!("*{}\r\n", items.len()).into_bytes();
            for i in items {
                out.extend(encode_reply(i));
            }
            out
        }
    }
}

/// Reads one reply.
pub fn read_reply(r: &mut impl BufRead) -> Result<Reply, String> {
    let mut line = Vec::new();
    let n = r.read_until(b'\n', &mut line).map_err(|e| format!("redis: read: {e}"))?;
    if n == 0 {
        return Err("redis: connection closed".into());
    }
    let body = line
        .strip_suffix(b"\r\n")
        .ok_or_else(|| format!("redis: a reply line without CRLF: {:?}", String::from_utf8_lossy(&line)))?;
    let (kind, rest) = body.split_first().ok_or("redis: an empty reply line")?;
    let text = std::str::from_utf8(rest).map_err(|_| "redis: a reply line that is not UTF-8".to_string())?;
    let number = || text.parse::<i64>().map_err(|_| format!("redis: bad length or integer {text:?}"));
    match kind {
        b'+' => Ok(Reply::Simple(text.into())),
        b'-' => Ok(Reply::Error(text.into())),
        b':' => Ok(Reply::Int(number()?)),
        b'$' => match number()? {
            -1 => Ok(Reply::Bulk(None)),
            len if len >= 0 => {
                let mut buf = vec![0; len as usize + 2];
                r.read_exact(&mut buf).map_err(|e| format!("redis: read: {e}"))?;
                if !buf.ends_with(b"\r\n") {
                    return Err("redis: a bulk string not ended by CRLF".into());
                }
                buf.truncate(len as usize);
                Ok(Reply::Bulk(Some(buf)))
            }
            len => Err(format!("redis: bad bulk length {len}")),
        },
        b'*' => match number()? {
            -1 => Ok(Reply::Array(None)),
            len if len >= 0 => {
                Ok(Reply::Array(Some((0..len).map(|_| read_reply(r)).collect::<Result<_, _>>()?)))
            }
            len => Err(format!("redis: bad array length {len}")),
        },
        other => Err(format!("redis: unknown reply type {:?}", *other as char)),
    }
}

/// Seeds the Redis on 127.0.0.1:`port` with `dataset`: FLUSHALL, then `shop::redis_commands`
/// pipelined; every reply must be a success. Returns the keys it holds then (DBSIZE).
pub fn seed_redis(port: u16, dataset: &Dataset, timeout: Duration) -> Result<usize, String> {
    let mut c = Client::connect(&format!("127.0.0.1:{port}"), timeout)?;
    c.command(&["FLUSHALL"])?.ok().map_err(|e| format!("redis: FLUSHALL: {e}"))?;
    let cmds = shop::redis_commands(dataset);
    for (cmd, reply) in cmds.iter().zip(c.pipeline(&cmds)?) {
        if let Reply::Error(e) = reply {
            return Err(format!("redis: {} {}: {e}", cmd[0], cmd.get(1).map_or("", String::as_str)));
        }
    }
    match c.command(&["DBSIZE"])? {
        Reply::Int(n) if n >= 0 => Ok(n as usize),
        other => Err(format!("redis: DBSIZE answered {other:?}")),
    }
}

/// Waits until the Redis on 127.0.0.1:`port` answers PING with PONG, trying every 50 ms until
/// `deadline`; the error says what was seen last.
pub fn redis_ready(port: u16, deadline: Instant) -> Result<(), String> {
    let addr = format!("127.0.0.1:{port}");
    loop {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(10));
        let last = match Client::connect(&addr, left.min(Duration::from_secs(1))) {
            Ok(mut c) => match c.command(&["PING"]) {
                Ok(Reply::Simple(s)) if s == "PONG" => return Ok(()),
                Ok(other) => format!("PING answered {other:?}"),
                Err(e) => e,
            },
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(format!("redis on port {port} not ready: {last}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<Reply, String> {
        read_reply(&mut &bytes[..])
    }

    #[test]
    fn parses_every_reply_kind() {
        assert_eq!(parse(b"+PONG\r\n"), Ok(Reply::Simple("PONG".into())));
        assert_eq!(parse(b"-ERR wrong type\r\n"), Ok(Reply::Error("ERR wrong type".into())));
        assert_eq!(parse(b":-42\r\n"), Ok(Reply::Int(-42)));
        assert_eq!(parse(b"$5\r\nhe\r\no\r\n"), Ok(Reply::Bulk(Some(b"he\r\no".to_vec()))));
        assert_eq!(parse(b"$0\r\n\r\n"), Ok(Reply::Bulk(Some(vec![]))));
        assert_eq!(parse(b"$-1\r\n"), Ok(Reply::Bulk(None)));
        assert_eq!(parse(b"*-1\r\n"), Ok(Reply::Array(None)));
        assert_eq!(
            parse(b"*3\r\n$4\r\np001\r\n$1\r\n2\r\n*1\r\n:7\r\n"),
            Ok(Reply::Array(Some(vec![
                Reply::Bulk(Some(b"p001".to_vec())),
                Reply::Bulk(Some(b"2".to_vec())),
                Reply::Array(Some(vec![Reply::Int(7)])),
            ])))
        );
        assert_eq!(parse(b"$1\r\n7\r\n").unwrap().as_text(), Some("7"));
        assert!(parse(b"-ERR x\r\n").unwrap().ok().is_err());
    }

    #[test]
    fn refuses_what_is_not_resp() {
        assert!(parse(b"").unwrap_err().contains("closed"));
        assert!(parse(b"+PONG\n").unwrap_err().contains("CRLF"));
        assert!(parse(b"$3\r\nab").is_err());
        assert!(parse(b"$2\r\nabc\r\n").unwrap_err().contains("CRLF"));
        assert!(parse(b":x\r\n").is_err());
        assert!(parse(b"?1\r\n").unwrap_err().contains("unknown"));
        assert!(parse(b"*2\r\n:1\r\n").is_err());
    }

    #[test]
    fn encodes_commands_and_reads_pipelined_replies() {
        assert_eq!(
            encode(&["SET", "stock:p001", "42"]),
            b"*3\r\n$3\r\nSET\r\n$10\r\nstock:p001\r\n$2\r\n42\r\n"
        );
        let mut r = &b"+OK\r\n:3\r\n"[..];
        assert_eq!(read_reply(&mut r), Ok(Reply::Simple("OK".into())));
        assert_eq!(read_reply(&mut r), Ok(Reply::Int(3)));
    }

    #[test]
    fn replies_encode_as_they_parse() {
        let r = Reply::Array(Some(vec![
            Reply::Simple("OK".into()),
            Reply::Error("ERR x".into()),
            Reply::Int(-3),
            Reply::Bulk(None),
            Reply::Bulk(Some(b"a\r\nb".to_vec())),
            Reply::Array(None),
        ]));
        assert_eq!(parse(&encode_reply(&r)), Ok(r));
    }

    #[test]
    fn seeds_the_dataset_and_waits_for_pong() {
        let port = fake::start();
        redis_ready(port, Instant::now() + Duration::from_secs(5)).unwrap();
        let d = shop::dataset(shop::DEFAULT_SEED);
        // 120 stock keys, 40 carts, the order counter.
        assert_eq!(seed_redis(port, &d, Duration::from_secs(5)), Ok(161));
        let mut c = Client::connect(&format!("127.0.0.1:{port}"), Duration::from_secs(5)).unwrap();
        let n = d.stock["p007"].to_string();
        assert_eq!(c.command(&["GET", "stock:p007"]).unwrap().as_text(), Some(n.as_str()));
        let Reply::Array(Some(cart)) = c.command(&["HGETALL", "cart:u01"]).unwrap() else { panic!() };
        assert_eq!(cart.len(), 2 * d.carts["u01"].len());
        let replies = c.pipeline(&[vec!["INCR".into(), "orders".into()], vec!["NOPE".into()]]).unwrap();
        assert_eq!(replies[0], Reply::Int(1));
        assert!(replies[1].clone().ok().is_err());
        // Seeding again starts from nothing.
        assert_eq!(seed_redis(port, &d, Duration::from_secs(5)), Ok(161));
        assert_eq!(c.command(&["GET", "orders"]).unwrap().as_text(), Some("0"));
    }

    #[test]
    fn a_closed_port_is_not_ready_and_says_so() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let err = redis_ready(port, Instant::now() + Duration::from_millis(120)).unwrap_err();
        assert!(err.contains("not ready") && err.contains("connect"), "{err}");
    }
}

/// An in-memory Redis for tests (the commands the shop uses), so nothing here needs a server.
#[cfg(test)]
pub(crate) mod fake {
    use std::collections::{BTreeMap, HashMap};
    use std::io::{BufReader, Write};
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};

    use super::{encode_reply, read_reply, Reply};

    #[derive(Default)]
    struct Store {
        strings: HashMap<String, String>,
        hashes: HashMap<String, BTreeMap<String, String>>,
    }

    /// Starts the fake on a free port (it serves until the test process ends); returns the port.
    pub(crate) fn start() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let store = Arc::new(Mutex::new(Store::default()));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let (Ok(conn), store) = (conn, store.clone()) else { continue };
                std::thread::spawn(move || {
                    let mut r = BufReader::new(conn);
                    while let Ok(Reply::Array(Some(args))) = read_reply(&mut r) {
                        let args: Vec<String> =
                            args.iter().map(|a| a.as_text().unwrap().to_string()).collect();
                        let reply = run(&mut store.lock().unwrap(), &args);
                        if r.get_mut().write_all(&encode_reply(&reply)).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        port
    }

    fn run(s: &mut Store, a: &[String]) -> Reply {
        let bulk = |v: &str| Reply::Bulk(Some(v.as_bytes().to_vec()));
        let ok = || Reply::Simple("OK".into());
        let add = |s: &mut Store, key: &str, by: i64| {
            let n = s.strings.get(key).map_or(Ok(0), |v| v.parse::<i64>()).map(|n| n + by);
            match n {
                Ok(n) => {
                    s.strings.insert(key.into(), n.to_string());
                    Reply::Int(n)
                }
                Err(_) => Reply::Error("ERR value is not an integer or out of range".into()),
            }
        };
        match (a[0].to_uppercase().as_str(), &a[1..]) {
            ("PING", []) => Reply::Simple("PONG".into()),
            ("FLUSHALL", []) => {
                *s = Store::default();
                ok()
            }
            ("DBSIZE", []) => Reply::Int((s.strings.len() + s.hashes.len()) as i64),
            ("SET", [k, v]) => {
                s.strings.insert(k.clone(), v.clone());
                ok()
            }
            ("GET", [k]) => s.strings.get(k).map_or(Reply::Bulk(None), |v| bulk(v)),
            ("INCR", [k]) => add(s, k, 1),
            ("DECRBY", [k, by]) => add(s, k, -by.parse::<i64>().unwrap()),
            ("DEL", keys) => {
                let n =
                    keys.iter().filter(|k| s.strings.remove(*k).is_some() | s.hashes.remove(*k).is_some());
                Reply::Int(n.count() as i64)
            }
            ("HSET", [k, pairs @ ..]) if !pairs.is_empty() && pairs.len() % 2 == 0 => {
                let h = s.hashes.entry(k.clone()).or_default();
                let added =
                    pairs.chunks(2).filter(|p| h.insert(p[0].clone(), p[1].clone()).is_none()).count();
                Reply::Int(added as i64)
            }
            ("HGETALL", [k]) => {
                let h = s.hashes.get(k).cloned().unwrap_or_default();
                Reply::Array(Some(h.iter().flat_map(|(f, v)| [bulk(f), bulk(v)]).collect()))
            }
            (cmd, _) => Reply::Error(format!("ERR unknown command or arity '{cmd}'")),
        }
    }
}
