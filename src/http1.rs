//! HTTP/1.1 wire details both ends of the lab write the same way: the driver's connection
//! (`driver::httpclient::wire`) and the null server's loop (`nullserver::http`) — a number's
//! decimal digits without allocating (also what the native backend writes to cgroup.procs
//! between fork and exec, where nothing may allocate), and what a `Connection` header says about
//! closing.

/// A number's decimal digits, rendered on the stack: no allocation, no lock (async-signal-safe).
pub struct Decimal {
    digits: [u8; 20],
    start: usize,
}

impl Decimal {
    pub fn new(n: u64) -> Decimal {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        let mut v = n;
        loop {
            start -= 1;
            digits[start] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        Decimal { digits, start }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start..]
    }
}

/// Whether the connection closes after this message, given a `Connection` header's value and
/// what was decided before it (`close`: HTTP/1.0, or an earlier `Connection: close`): `close`
/// closes; `keep-alive` keeps an HTTP/1.0 (`http10`) connection open.
pub fn connection_closes(value: &[u8], http10: bool, close: bool) -> bool {
    let mut close = close;
    for t in value.split(|b| *b == b',').map(<[u8]>::trim_ascii) {
        if t.eq_ignore_ascii_case(b"close") {
            close = true;
        } else if t.eq_ignore_ascii_case(b"keep-alive") && http10 {
            close = false;
        }
    }
    close
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_render_as_std_does() {
        for n in [0, 7, 10, 99, 1234567890, u64::MAX] {
            assert_eq!(Decimal::new(n).as_bytes(), n.to_string().as_bytes());
        }
    }

    #[test]
    fn close_and_keep_alive_tokens() {
        assert!(connection_closes(b"Close", false, false));
        assert!(connection_closes(b"upgrade, close", false, false));
        assert!(!connection_closes(b"keep-alive", true, true), "HTTP/1.0 kept alive");
        assert!(connection_closes(b"keep-alive", false, true), "keep-alive undoes a close only in HTTP/1.0");
        assert!(!connection_closes(b"upgrade", false, false));
    }
}
