//! The null server's faults on purpose, for the lab's own tests: `$BENCHLAB_NULL_FAULT` (or
//! `null-server --fault`) names one, as `<kind>[:<arg>][@<calls>]`.
//!
//! `leak:<bytes>` leaks exactly that many bytes of resident memory at every tools/call (anonymous
//! pages mapped, touched and never unmapped, so the tree's RSS grows by the bytes rounded up to
//! whole pages and by nothing else the leak allocates): the soak test's known slope, and with a
//! small memory limit a server the cgroup kills mid-load.
//!
//! The HTTP faults strike from the tools/call after the first `@<calls>` (the correctness gate's
//! included), so a load measures a healthy server first and then a faulty one: `refuse` (stop
//! listening; every connection closes after its next answer), `reset` (half an answer, then a TCP
//! reset), `status:<code>` (503, 429, ... instead of the answer), `sse_stall` (an event stream that
//! never sends the answer), `bad_sse` and `bad_json` (an answer that is not JSON-RPC, in an event
//! stream or a JSON body), `drop_session` (404 on every session's tools/call, as a server that
//! forgets sessions does), `wrong` (the answer with the last digit of its result changed: the same
//! bytes but one, a wrong value a client that does not check every answer misses) and `exit` (the
//! process exits). The floor path reads one atomic when no fault is set.
//!
//! `shop_wrong` (the `shop` suite, any transport): get_cart and checkout answer a total_cents one
//! cent too high from the first call, so the lab's gate must fail the server.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Bytes leaked per tools/call (0: no leak).
static LEAK_PER_CALL: AtomicUsize = AtomicUsize::new(0);
/// `shop_wrong` is installed.
static SHOP_WRONG: AtomicBool = AtomicBool::new(false);
/// The HTTP fault, when one is installed, and the tools/call requests it lets through.
static HTTP_FAULT: OnceLock<(HttpFault, u64)> = OnceLock::new();
/// tools/call requests seen so far (counted only while an HTTP fault is installed).
static CALLS: AtomicU64 = AtomicU64::new(0);

/// A fault the null server can be told to have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Leak this many bytes (rounded up to whole pages) at every tools/call.
    Leak { bytes: usize },
    /// Over HTTP, from tools/call number `after + 1` on.
    Http { fault: HttpFault, after: u64 },
    /// The shop's get_cart and checkout answer total_cents + 1.
    ShopWrong,
}

/// What the HTTP server does once a fault strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpFault {
    Refuse,
    Reset,
    Status(u16),
    SseStall,
    BadSse,
    BadJson,
    DropSession,
    Wrong,
    Exit,
}

const KNOWN: &str = "leak:<bytes>, shop_wrong, refuse, reset, status:<code>, sse_stall, bad_sse, bad_json, drop_session, wrong, exit (the HTTP ones take @<calls> to let that many tools/call through first)";

impl Fault {
    /// Parses `<kind>[:<arg>][@<calls>]`; the error says what is accepted.
    pub fn parse(s: &str) -> Result<Fault, String> {
        let (spec, after) = match s.split_once('@') {
            Some((spec, n)) => {
                let n = n.parse::<u64>().map_err(|_| {
                    format!("fault {s:?}: @ takes the tools/call requests to let through, e.g. reset@100")
                })?;
                (spec, Some(n))
            }
            None => (s, None),
        };
        let (kind, arg) = spec.split_once(':').map_or((spec, None), |(k, a)| (k, Some(a)));
        let no_arg = |f: HttpFault| match arg {
            None => Ok(f),
            Some(_) => Err(format!("fault {s:?}: {kind} takes no argument")),
        };
        let fault = match kind {
            "leak" => {
                if after.is_some() {
                    return Err(format!("fault {s:?}: a leak starts at the first call (no @)"));
                }
                let bytes = arg
                    .and_then(|a| a.parse::<usize>().ok())
                    .filter(|b| *b > 0)
                    .ok_or_else(|| format!("fault {s:?}: leak takes the bytes per call, e.g. leak:65536"))?;
                return Ok(Fault::Leak { bytes });
            }
            "shop_wrong" => {
                if arg.is_some() || after.is_some() {
                    return Err(format!("fault {s:?}: shop_wrong takes no argument and no @"));
                }
                return Ok(Fault::ShopWrong);
            }
            "refuse" => no_arg(HttpFault::Refuse)?,
            "reset" => no_arg(HttpFault::Reset)?,
            "sse_stall" => no_arg(HttpFault::SseStall)?,
            "bad_sse" => no_arg(HttpFault::BadSse)?,
            "bad_json" => no_arg(HttpFault::BadJson)?,
            "drop_session" => no_arg(HttpFault::DropSession)?,
            "wrong" => no_arg(HttpFault::Wrong)?,
            "exit" => no_arg(HttpFault::Exit)?,
            "status" => {
                let code = arg.and_then(|a| a.parse::<u16>().ok()).filter(|c| (400..600).contains(c));
                HttpFault::Status(code.ok_or_else(|| {
                    format!("fault {s:?}: status takes an error status, e.g. status:503 or status:429")
                })?)
            }
            _ => return Err(format!("unknown fault {s:?}: the null server knows {KNOWN}")),
        };
        Ok(Fault::Http { fault, after: after.unwrap_or(0) })
    }

    /// Whether the fault needs the HTTP server.
    pub fn is_http(self) -> bool {
        matches!(self, Fault::Http { .. })
    }

    /// Makes the fault take effect for the rest of the process.
    pub fn install(self) {
        match self {
            Fault::Leak { bytes } => LEAK_PER_CALL.store(bytes, Ordering::Relaxed),
            Fault::Http { fault, after } => {
                let _ = HTTP_FAULT.set((fault, after));
            }
            Fault::ShopWrong => SHOP_WRONG.store(true, Ordering::Relaxed),
        }
    }
}

/// Whether `shop_wrong` is installed.
pub fn shop_wrong() -> bool {
    SHOP_WRONG.load(Ordering::Relaxed)
}

/// The installed HTTP fault, if any (one load on the floor path).
pub fn http_fault() -> Option<HttpFault> {
    HTTP_FAULT.get().map(|(f, _)| *f)
}

/// Counts a request (`is_call`: a tools/call) and says whether the installed fault has struck:
/// from the tools/call after the first `after` on, for every request. The first strike is told
/// on stderr, which the lab keeps as the server's log.
pub fn struck(is_call: bool) -> bool {
    let Some((fault, after)) = HTTP_FAULT.get() else {
        return false;
    };
    let n = if is_call { CALLS.fetch_add(1, Ordering::Relaxed) + 1 } else { CALLS.load(Ordering::Relaxed) };
    if is_call && n == after + 1 {
        eprintln!("benchlab null server: fault {fault:?} strikes at tools/call {n}");
    }
    n > *after
}

/// `wrong`'s answer: the last digit of the result changed (9 becomes 0, any other one more), so
/// the answer keeps its length and all its bytes but one.
pub fn wrong_value(line: &mut [u8]) {
    let from = line.windows(8).position(|w| w == b"\"result\"").unwrap_or(0);
    if let Some(d) = line[from..].iter_mut().rev().find(|b| b.is_ascii_digit()) {
        *d = if *d == b'9' { b'0' } else { *d + 1 };
    }
}

/// The page size the leak rounds to.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|p| *p > 0).unwrap_or(4096)
}

/// Called at every tools/call: leaks what the installed fault says.
pub fn on_call() {
    let bytes = LEAK_PER_CALL.load(Ordering::Relaxed);
    if bytes > 0 {
        let _ = leak(bytes);
    }
}

/// Makes the socket's close a TCP reset (SO_LINGER on, 0 s) rather than an orderly FIN.
pub fn reset_on_close(fd: std::os::fd::RawFd) {
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: `fd` is the live socket of the connection being answered; the option value is a
    // `linger` of the size passed.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Maps `bytes` rounded up to whole pages, keeps them out of huge pages, writes every page (so
/// each is resident) and forgets the mapping; returns where it is and its length.
fn leak(bytes: usize) -> Option<(usize, usize)> {
    let page = page_size();
    let len = bytes.div_ceil(page) * page;
    // SAFETY: an anonymous private mapping of `len` bytes at an address the kernel chooses; on
    // success every page of it is ours to write, and it is never unmapped (the leak).
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return None;
        }
        libc::madvise(p, len, libc::MADV_NOHUGEPAGE);
        let base = p.cast::<u8>();
        for off in (0..len).step_by(page) {
            base.add(off).write_volatile(0xa5);
        }
        Some((p as usize, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_leak_and_refuses_what_it_does_not_know() {
        assert_eq!(Fault::parse("leak:65536"), Ok(Fault::Leak { bytes: 65536 }));
        assert!(Fault::parse("leak").unwrap_err().contains("leak:65536"));
        assert!(Fault::parse("leak:0").is_err());
        assert!(Fault::parse("stall").unwrap_err().contains("unknown fault"));
        assert!(Fault::parse("leak:4096@3").is_err());
        assert_eq!(Fault::parse("shop_wrong"), Ok(Fault::ShopWrong));
        assert!(!Fault::ShopWrong.is_http());
        assert!(Fault::parse("shop_wrong@3").unwrap_err().contains("no @"));
        assert!(Fault::parse("shop_wrong:1").is_err());
        assert!(Fault::parse("nope").unwrap_err().contains("shop_wrong"));
    }

    #[test]
    fn parses_the_http_faults_with_the_calls_they_let_through() {
        let http = |fault, after| Ok(Fault::Http { fault, after });
        assert_eq!(Fault::parse("reset@100"), http(HttpFault::Reset, 100));
        assert_eq!(Fault::parse("refuse"), http(HttpFault::Refuse, 0));
        assert_eq!(Fault::parse("status:429@7"), http(HttpFault::Status(429), 7));
        assert_eq!(Fault::parse("drop_session@1"), http(HttpFault::DropSession, 1));
        assert_eq!(Fault::parse("wrong@5"), http(HttpFault::Wrong, 5));
        let mut line = br#"{"jsonrpc":"2.0","id":17,"result":{"structuredContent":{"result":49}}}"#.to_vec();
        wrong_value(&mut line);
        assert_eq!(line, br#"{"jsonrpc":"2.0","id":17,"result":{"structuredContent":{"result":40}}}"#);
        assert!(Fault::parse("status:200").unwrap_err().contains("status:503"));
        assert!(Fault::parse("reset:1").unwrap_err().contains("no argument"));
        assert!(Fault::parse("exit@soon").unwrap_err().contains("reset@100"));
        assert!(Fault::parse("exit").unwrap().is_http() && !Fault::parse("leak:1").unwrap().is_http());
    }

    #[test]
    fn a_leak_makes_every_page_of_it_resident() {
        let page = page_size();
        let (addr, len) = leak(10 * page + 1).unwrap();
        assert_eq!(len, 11 * page, "rounded up to whole pages");
        let mut resident = vec![0u8; 11];
        // SAFETY: the mapping of `len` bytes at `addr` is live (never unmapped); one byte per page.
        let rc = unsafe { libc::mincore(addr as *mut libc::c_void, len, resident.as_mut_ptr()) };
        assert_eq!(rc, 0);
        assert!(resident.iter().all(|r| r & 1 == 1), "{resident:?}");
    }
}
