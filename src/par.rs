//! Work over many items on every CPU this process may use, results in the items' order: the
//! audit's lines, the site's pages and histories; a big file read by every CPU at once; and a
//! big value dropped aside.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

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
    std::thread::spawn(move || drop(value));
}

/// The CPUs this process may use.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A whole file read into memory, each CPU this process may use reading its share at once (with
/// `pread`): the copy out of the page cache and the faults of the fresh memory it lands in are
/// split among them. A file that grows meanwhile is read up to its size when opened.
pub fn read_file(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path)?;
    let len = usize::try_from(file.metadata()?.len()).map_err(std::io::Error::other)?;
    // Below a few MB one thread is as fast.
    if len < 8 << 20 || threads() == 1 {
        let mut bytes = Vec::with_capacity(len);
        std::io::Read::read_to_end(&mut std::io::Read::take(&file, len as u64), &mut bytes)?;
        return Ok(bytes);
    }
    let mut bytes = vec![0u8; len];
    let share = len.div_ceil(threads());
    std::thread::scope(|s| {
        let readers: Vec<_> = bytes
            .chunks_mut(share)
            .enumerate()
            .map(|(i, part)| {
                let file = &file;
                s.spawn(move || file.read_exact_at(part, (i * share) as u64))
            })
            .collect();
        readers.into_iter().try_for_each(|r| r.join().expect("a reader panicked"))
    })?;
    Ok(bytes)
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
    fn read_file_reads_what_was_written_small_and_big() {
        let d = tempfile::tempdir().unwrap();
        for len in [0usize, 10, (8 << 20) + 12_345] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let p = d.path().join(format!("f{len}"));
            std::fs::write(&p, &bytes).unwrap();
            assert_eq!(read_file(&p).unwrap(), bytes, "{len} bytes");
        }
        assert!(read_file(&d.path().join("absent")).is_err());
    }
}
