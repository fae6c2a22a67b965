//! Work over many items on every CPU this process may use, results in the items' order: the
//! site's pages and histories, a file's lines (the store's, read block by block by every CPU at
//! once); and a big value dropped aside.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// `f` over the items on every CPU this process may use, results in the items' order.
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let size = chunk_len(items.len());
    map_chunks(items.chunks(size).collect(), items.len(), size, |chunk: &[T], slots| {
        for (item, slot) in chunk.iter().zip(slots.iter_mut()) {
            slot.write(f(item));
        }
        chunk.len()
    })
}

/// `f` over the items, each by `&mut` (to take something out of it), on every CPU this process
/// may use, results in the items' order.
pub fn par_map_mut<T: Send, R: Send>(items: &mut [T], f: impl Fn(&mut T) -> R + Sync) -> Vec<R> {
    let (len, size) = (items.len(), chunk_len(items.len()));
    map_chunks(items.chunks_mut(size).collect(), len, size, |chunk: &mut [T], slots| {
        for (item, slot) in chunk.iter_mut().zip(slots.iter_mut()) {
            slot.write(f(item));
        }
        chunk.len()
    })
}

/// Items per chunk: about 16 chunks per CPU, so a slow CPU is waited for little, and one item
/// per chunk for few items (a site's pages, each a different size).
fn chunk_len(len: usize) -> usize {
    (len / (threads() * 16)).max(1)
}

/// The results, `len` of them, written in place: chunk `i` of `chunks` (each `size` items, the
/// last fewer) fills chunk `i` of the results, the chunks handed out one by one to every CPU.
/// `fill` writes its chunk's results from the first slot on and says how many it wrote. Each
/// result is written once, by a worker, into memory no other thread touches: nothing is moved or
/// faulted in afterwards on one thread.
fn map_chunks<C: Send, R: Send>(
    chunks: Vec<C>,
    len: usize,
    size: usize,
    fill: impl Fn(C, &mut [MaybeUninit<R>]) -> usize + Sync,
) -> Vec<R> {
    let mut out: Vec<R> = Vec::with_capacity(len);
    let written = AtomicUsize::new(0);
    // Each chunk with the slots it fills, taken once by the worker it is handed to.
    type Work<'a, C, R> = Mutex<Option<(C, &'a mut [MaybeUninit<R>])>>;
    let work: Vec<Work<C, R>> = chunks
        .into_iter()
        .zip(out.spare_capacity_mut()[..len].chunks_mut(size))
        .map(|pair| Mutex::new(Some(pair)))
        .collect();
    let next = AtomicUsize::new(0);
    let threads = threads().clamp(1, work.len().max(1));
    // The scope joins every worker, and panics on when one did.
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(cell) = work.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let taken = cell.lock().unwrap_or_else(|p| p.into_inner()).take();
                    let (chunk, slots) = taken.expect("each chunk is handed out once");
                    let wanted = slots.len();
                    assert_eq!(fill(chunk, slots), wanted, "a chunk fills every slot of its own");
                    written.fetch_add(wanted, Ordering::Relaxed);
                }
            });
        }
    });
    drop(work);
    assert_eq!(written.into_inner(), len, "every slot written");
    // SAFETY: the slot chunks are disjoint and cover the first `len` slots of `out`'s capacity;
    // each was filled from its first slot to its last (checked above, per chunk, against what
    // `fill` wrote), and together they hold `len` (checked just above). A worker's panic, or a
    // failed check, propagated out of the scope before this line.
    unsafe { out.set_len(len) };
    out
}

/// Drops `value` on a thread of its own, off the caller's path: what a command read (100,000
/// records take a tenth of a second to free one by one) once it has printed what it read it
/// for. At the process's end the drop is cut short: the kernel takes the memory back at once.
pub fn drop_aside<T: Send + 'static>(value: T) {
    // Where no thread can be started, the value is dropped here, with the failed start.
    let _ = std::thread::Builder::new().name("drop-aside".into()).spawn(move || drop(value));
}

/// The CPUs this process may use.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A file's lines, mapped: the results block by block, each block's in its lines' order.
pub struct Lines<R> {
    blocks: Vec<Vec<R>>,
    /// The bytes after the last newline: a line cut short (0 when the file ends in a newline).
    pub rest: usize,
    /// The file's length when it was opened: what was read.
    pub len: usize,
}

impl<R> Lines<R> {
    /// How many lines (ended by a newline) there were.
    pub fn count(&self) -> usize {
        self.blocks.iter().map(Vec::len).sum()
    }

    /// The results in the file's order.
    pub fn into_results(self) -> impl Iterator<Item = R> {
        self.blocks.into_iter().flatten()
    }
}

/// `f` over each line of a file (without its newline, numbered from 1) on every CPU this process
/// may use, the results in the file's order. The file is read in blocks of up to 16 MB, each CPU
/// reading the next block (with `pread`) into a buffer of its own that it reuses: what is in
/// memory at once is a block per CPU, never the whole file, and the file's bytes land in memory
/// already faulted in. A block counts the lines that start in it as soon as it is read; its first
/// line's number waits only for the blocks before it to be counted. A line that runs past its
/// block is read on to its end. A file that grows meanwhile is read up to its size when opened.
pub fn map_lines<R: Send>(
    path: &std::path::Path,
    f: impl Fn(usize, &[u8]) -> R + Sync,
) -> std::io::Result<Lines<R>> {
    let file = std::fs::File::open(path)?;
    let len = usize::try_from(file.metadata()?.len()).map_err(std::io::Error::other)?;
    let size = (len / (threads() * 16)).clamp(256 << 10, 16 << 20);
    let count = len.div_ceil(size);
    let starts: Vec<OnceLock<usize>> = (0..count).map(|_| OnceLock::new()).collect();
    type Done<R> = Mutex<Option<std::io::Result<(Vec<R>, Option<usize>)>>>;
    let done: Vec<Done<R>> = (0..count).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    // The scope joins every worker, and panics on when one did.
    std::thread::scope(|s| {
        for _ in 0..threads().clamp(1, count.max(1)) {
            s.spawn(|| {
                let mut buf = Vec::new();
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= count {
                        break;
                    }
                    let block = Block { file: &file, len, start: k * size, end: ((k + 1) * size).min(len) };
                    let lines = block.map(&mut buf, &starts[k], &starts[..k], &f);
                    *done[k].lock().unwrap_or_else(|p| p.into_inner()) = Some(lines);
                }
            });
        }
    });
    let mut lines = Lines { blocks: Vec::with_capacity(count), rest: 0, len };
    for d in done {
        let (results, rest) =
            d.into_inner().unwrap_or_else(|p| p.into_inner()).expect("every block mapped")?;
        lines.blocks.push(results);
        lines.rest = rest.unwrap_or(lines.rest);
    }
    Ok(lines)
}

/// The bytes `[start, end)` of a file `len` long: a block, whose lines are those that start in
/// it.
struct Block<'a> {
    file: &'a std::fs::File,
    len: usize,
    start: usize,
    end: usize,
}

impl Block<'_> {
    /// `f` over the block's lines, each numbered after the lines of the blocks `before`; and the
    /// length of a last line without a newline (the file's last). How many lines start in the
    /// block is published in `counted` as soon as it is read (0 when the read failed: the file
    /// is then an error).
    fn map<R>(
        &self,
        buf: &mut Vec<u8>,
        counted: &OnceLock<usize>,
        before: &[OnceLock<usize>],
        f: &impl Fn(usize, &[u8]) -> R,
    ) -> std::io::Result<(Vec<R>, Option<usize>)> {
        use std::os::unix::fs::FileExt;
        // From the byte before the block: a line starts at the block's first byte when that one
        // is a newline.
        let from = self.start.saturating_sub(1);
        // Zeroed only where the buffer grows: blocks are one size but the last.
        buf.resize(self.end - from, 0);
        let read = self.file.read_exact_at(buf, from as u64);
        // A line starts at 0, and after every newline but one at the block's last byte.
        let starting = match read {
            Ok(()) => {
                usize::from(self.start == 0) + memchr::memchr_iter(b'\n', &buf[..buf.len() - 1]).count()
            }
            Err(_) => 0,
        };
        counted.set(starting).expect("a block is counted once");
        read?;
        if starting == 0 {
            return Ok((Vec::new(), None));
        }
        let first = 1 + before.iter().map(wait_for).sum::<usize>();
        let mut at = match self.start {
            0 => 0,
            _ => memchr::memchr(b'\n', buf).expect("a line starts here, after a newline") + 1,
        };
        let mut results = Vec::with_capacity(starting);
        let mut scanned = at;
        for number in first..first + starting {
            let newline = loop {
                if let Some(i) = memchr::memchr(b'\n', &buf[scanned..]) {
                    break scanned + i;
                }
                // The line runs past what was read: read on, up to the file's length.
                scanned = buf.len();
                let have = from + buf.len();
                if have >= self.len {
                    // The file's last line, without a newline: cut short.
                    return Ok((results, Some(buf.len() - at)));
                }
                let more = (self.len - have).min(64 << 10);
                buf.resize(scanned + more, 0);
                self.file.read_exact_at(&mut buf[scanned..], have as u64)?;
            };
            results.push(f(number, &buf[at..newline]));
            at = newline + 1;
            scanned = at;
        }
        Ok((results, None))
    }
}

/// A block's line count, once its reader has published it (blocks are handed out in order, and
/// each is counted as soon as it is read, before anything waits).
fn wait_for(counted: &OnceLock<usize>) -> usize {
    loop {
        match counted.get() {
            Some(n) => return *n,
            None => std::thread::yield_now(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn par_map_keeps_the_order() {
        for n in [0u32, 1, 7, 31, 32, 33, 1000, 100_003] {
            let v: Vec<u32> = (0..n).collect();
            assert_eq!(par_map(&v, |x| x * 2), v.iter().map(|x| x * 2).collect::<Vec<_>>(), "{n}");
            let mut boxed: Vec<Option<Box<u32>>> = v.iter().map(|x| Some(Box::new(*x))).collect();
            let taken = par_map_mut(&mut boxed, |b| *b.take().unwrap());
            assert_eq!(taken, v, "{n}");
            assert!(boxed.iter().all(Option::is_none));
        }
    }

    #[test]
    #[should_panic]
    fn a_panic_in_f_is_the_callers() {
        let v: Vec<u32> = (0..10_000).collect();
        par_map(&v, |x| if *x == 7777 { panic!("item {x}") } else { x.to_string() });
    }

    #[test]
    fn map_lines_numbers_every_line_in_order_across_blocks() {
        let d = tempfile::tempdir().unwrap();
        // Lines of many lengths, some longer than a block (256 kB), some empty, and files that
        // end with and without a newline, and on a block's edge.
        let line = |i: usize| match i % 7 {
            0 => String::new(),
            3 => format!("{i}:{}", "y".repeat(300_000 + i)),
            _ => format!("{i}:{}", "x".repeat(i * 37 % 5000)),
        };
        for (n, cut) in [(0usize, ""), (1, ""), (1, "torn"), (600, ""), (600, "tail without newline")] {
            let mut text = String::new();
            for i in 0..n {
                text.push_str(&line(i));
                text.push('\n');
            }
            text.push_str(cut);
            let p = d.path().join(format!("f{n}{}", cut.len()));
            std::fs::write(&p, &text).unwrap();
            let lines = map_lines(&p, |number, l| (number, String::from_utf8(l.to_vec()).unwrap())).unwrap();
            assert_eq!((lines.count(), lines.rest, lines.len), (n, cut.len(), text.len()));
            let want: Vec<(usize, String)> = (0..n).map(|i| (i + 1, line(i))).collect();
            assert_eq!(lines.into_results().collect::<Vec<_>>(), want, "{n} lines, then {cut:?}");
        }
        // A newline on each side of a block's edge.
        let text = format!("{}\n\n{}\n", "a".repeat((256 << 10) - 1), "b".repeat(256 << 10));
        let p = d.path().join("edge");
        std::fs::write(&p, &text).unwrap();
        let lines = map_lines(&p, |number, l| (number, l.len())).unwrap();
        assert_eq!(
            lines.into_results().collect::<Vec<_>>(),
            vec![(1, (256 << 10) - 1), (2, 0), (3, 256 << 10)]
        );
        assert!(map_lines(&d.path().join("absent"), |_, _| ()).is_err());
    }

    #[test]
    #[should_panic]
    fn a_panic_in_a_line_is_the_callers() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, "a\n".repeat(1 << 20)).unwrap();
        let _ = map_lines(&p, |n, _| assert!(n != 777_777));
    }
}
