//! The null server's faults on purpose, for the lab's own tests: `$BENCHLAB_NULL_FAULT` (or
//! `null-server --fault`) names one. `leak:<bytes>` leaks exactly that many bytes of resident
//! memory at every tools/call (anonymous pages mapped, touched and never unmapped, so the tree's
//! RSS grows by the bytes rounded up to whole pages and by nothing else the leak allocates): the
//! soak test's known slope. The floor path reads one atomic when no fault is set.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes leaked per tools/call (0: no leak).
static LEAK_PER_CALL: AtomicUsize = AtomicUsize::new(0);

/// A fault the null server can be told to have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Leak this many bytes (rounded up to whole pages) at every tools/call.
    Leak { bytes: usize },
}

impl Fault {
    /// Parses `leak:<bytes>`; the error says what is accepted.
    pub fn parse(s: &str) -> Result<Fault, String> {
        let (kind, arg) = s.split_once(':').unwrap_or((s, ""));
        match kind {
            "leak" => {
                let bytes =
                    arg.parse::<usize>().ok().filter(|b| *b > 0).ok_or_else(|| {
                        format!("fault {s:?}: leak takes the bytes per call, e.g. leak:65536")
                    })?;
                Ok(Fault::Leak { bytes })
            }
            _ => Err(format!("unknown fault {s:?}: the null server knows leak:<bytes>")),
        }
    }

    /// Makes the fault take effect for the rest of the process.
    pub fn install(self) {
        match self {
            Fault::Leak { bytes } => LEAK_PER_CALL.store(bytes, Ordering::Relaxed),
        }
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
