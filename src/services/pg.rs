//! A small blocking PostgreSQL client (protocol 3.0 over a `TcpStream`, trust authentication,
//! the simple query protocol): enough for the lab's readiness probe and seeding of the shop's
//! catalogue into tables. Not a general client (no TLS, no password methods, no extended
//! protocol, no COPY).

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::mcp::shop::Dataset;

/// The role and database the lab's PostgreSQL service is initialised with (trust on loopback).
pub const USER: &str = "bench";
pub const DATABASE: &str = "postgres";

/// A connection, authenticated and ready for queries.
pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// One backend message: its type byte and body.
type Message = (u8, Vec<u8>);

impl Client {
    /// Connects to 127.0.0.1:`port` as [`USER`] on [`DATABASE`]; `timeout` bounds every read and
    /// write.
    pub fn connect(port: u16, timeout: Duration) -> Result<Client, String> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let stream =
            TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("postgres at {addr}: {e}"))?;
        let _ = stream.set_nodelay(true);
        stream.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        stream.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        let writer = stream.try_clone().map_err(|e| e.to_string())?;
        let mut c = Client { reader: BufReader::new(stream), writer };
        let mut body = 196_608u32.to_be_bytes().to_vec(); // protocol 3.0
        for (k, v) in [("user", USER), ("database", DATABASE)] {
            body.extend_from_slice(k.as_bytes());
            body.push(0);
            body.extend_from_slice(v.as_bytes());
            body.push(0);
        }
        body.push(0);
        let mut msg = ((body.len() + 4) as u32).to_be_bytes().to_vec();
        msg.extend_from_slice(&body);
        c.writer.write_all(&msg).map_err(|e| format!("postgres: startup: {e}"))?;
        loop {
            match c.read()? {
                (b'R', b) if b.get(..4) == Some(&[0, 0, 0, 0]) => {}
                (b'R', b) => {
                    return Err(format!(
                        "postgres asks for authentication method {:?}; the lab's service trusts loopback",
                        b.get(..4)
                    ))
                }
                (b'E', b) => return Err(format!("postgres refused the connection: {}", error_text(&b))),
                (b'Z', _) => return Ok(c),
                _ => {} // parameter status, backend key, notices
            }
        }
    }

    fn read(&mut self) -> Result<Message, String> {
        let mut head = [0u8; 5];
        self.reader.read_exact(&mut head).map_err(|e| format!("postgres: read: {e}"))?;
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if !(4..=64 << 20).contains(&len) {
            return Err(format!("postgres: a message of {len} bytes"));
        }
        let mut body = vec![0u8; len - 4];
        self.reader.read_exact(&mut body).map_err(|e| format!("postgres: read: {e}"))?;
        Ok((head[0], body))
    }

    /// Runs `sql` (one or more statements) with the simple query protocol; returns the rows of
    /// the last statement that returned any, each column as text (None for NULL).
    pub fn query(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, String> {
        let mut msg = vec![b'Q'];
        msg.extend_from_slice(&((sql.len() + 5) as u32).to_be_bytes());
        msg.extend_from_slice(sql.as_bytes());
        msg.push(0);
        self.writer.write_all(&msg).map_err(|e| format!("postgres: write: {e}"))?;
        let (mut rows, mut error) = (Vec::new(), None);
        loop {
            match self.read()? {
                (b'T', _) => rows.clear(),
                (b'D', b) => rows.push(data_row(&b)?),
                (b'E', b) => error = Some(error_text(&b)),
                (b'Z', _) => break,
                _ => {}
            }
        }
        match error {
            Some(e) => Err(format!("postgres: {e}")),
            None => Ok(rows),
        }
    }
}

/// The columns of a DataRow as text.
fn data_row(b: &[u8]) -> Result<Vec<Option<String>>, String> {
    let bad = || "postgres: a malformed data row".to_string();
    let n = u16::from_be_bytes([*b.first().ok_or_else(bad)?, *b.get(1).ok_or_else(bad)?]) as usize;
    let (mut at, mut out) = (2, Vec::with_capacity(n));
    for _ in 0..n {
        let len = i32::from_be_bytes(b.get(at..at + 4).ok_or_else(bad)?.try_into().map_err(|_| bad())?);
        at += 4;
        if len < 0 {
            out.push(None);
            continue;
        }
        let v = b.get(at..at + len as usize).ok_or_else(bad)?;
        out.push(Some(String::from_utf8_lossy(v).into_owned()));
        at += len as usize;
    }
    Ok(out)
}

/// An ErrorResponse's severity, code and message.
fn error_text(b: &[u8]) -> String {
    let field = |tag: u8| {
        b.split(|&c| c == 0)
            .find(|f| f.first() == Some(&tag))
            .map(|f| String::from_utf8_lossy(&f[1..]).into_owned())
            .unwrap_or_default()
    };
    format!("{} {}: {}", field(b'S'), field(b'C'), field(b'M'))
}

/// A SQL string literal.
fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The SQL that empties the database's shop tables and loads the data set: `products` (id, name,
/// category, price_cents) and `stock` (id, units), as the API serves and Redis holds them.
pub fn seed_sql(d: &Dataset) -> String {
    let products: Vec<String> = d
        .products
        .iter()
        .map(|p| format!("({}, {}, {}, {})", lit(&p.id), lit(&p.name), lit(&p.category), p.price_cents))
        .collect();
    let stock: Vec<String> = d.stock.iter().map(|(id, n)| format!("({}, {n})", lit(id))).collect();
    format!(
        "DROP TABLE IF EXISTS stock, products; \
         CREATE TABLE products (id text PRIMARY KEY, name text NOT NULL, category text NOT NULL, price_cents integer NOT NULL); \
         CREATE TABLE stock (id text PRIMARY KEY REFERENCES products, units integer NOT NULL); \
         INSERT INTO products VALUES {}; INSERT INTO stock VALUES {};",
        products.join(", "),
        stock.join(", ")
    )
}

/// Empties and seeds the PostgreSQL on 127.0.0.1:`port`; returns the rows loaded.
pub fn seed_postgres(port: u16, d: &Dataset, timeout: Duration) -> Result<usize, String> {
    let mut c = Client::connect(port, timeout)?;
    c.query(&seed_sql(d))?;
    let rows = c.query("SELECT (SELECT count(*) FROM products) + (SELECT count(*) FROM stock)")?;
    rows.first()
        .and_then(|r| r.first().cloned().flatten())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("postgres: counting the seeded rows answered {rows:?}"))
}

/// Waits until the PostgreSQL on 127.0.0.1:`port` answers `SELECT 1`, trying every 100 ms until
/// `deadline` (initdb and start-up take a few seconds); the error says what was seen last.
pub fn postgres_ready(port: u16, deadline: Instant) -> Result<(), String> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(10));
        let last = match Client::connect(port, left.min(Duration::from_secs(2))) {
            Ok(mut c) => match c.query("SELECT 1") {
                Ok(rows) if rows == vec![vec![Some("1".to_string())]] => return Ok(()),
                Ok(rows) => format!("SELECT 1 answered {rows:?}"),
                Err(e) => e,
            },
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(format!("postgres on port {port} not ready: {last}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_rows_and_errors_parse() {
        // Two columns: "1" and NULL.
        let row = [0, 2, 0, 0, 0, 1, b'1', 0xff, 0xff, 0xff, 0xff];
        assert_eq!(data_row(&row).unwrap(), vec![Some("1".to_string()), None]);
        assert!(data_row(&[0, 1, 0, 0, 0, 9, b'x']).is_err());
        let err = b"SERROR\0C42P01\0Mrelation \"nope\" does not exist\0\0";
        assert_eq!(error_text(err), "ERROR 42P01: relation \"nope\" does not exist");
    }

    #[test]
    fn the_seed_loads_every_product_and_stock_line_quoted() {
        let d = crate::mcp::shop::dataset(1);
        let sql = seed_sql(&d);
        assert_eq!(sql.matches("), (").count() + 2, d.products.len() + d.stock.len());
        assert_eq!(lit("o'clock"), "'o''clock'");
    }
}
