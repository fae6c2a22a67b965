//! Whether this thread reads records shared — one copy of what many of the records it reads
//! hold the same, by its text — and the parts of a record read that way (`record::shared` keeps
//! the environments). Apart from `record` so that `host`, whose fingerprint is such a part, does
//! not depend on it.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

thread_local! {
    /// Whether this thread reads records shared (see [`shared`]).
    static SHARED_READS: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with this thread reading records shared: what many records hold the same (an
/// environment, a fingerprint, a server's info) is read once per text and kept as one copy.
/// Only serde_json's own deserialiser, over text in memory, may read records in `f`.
pub fn shared<T>(f: impl FnOnce() -> T) -> T {
    with_flag(&SHARED_READS, f)
}

/// Whether this thread reads records shared now.
pub fn is_shared() -> bool {
    SHARED_READS.get()
}

/// Runs `f` with `flag` set, restoring it after (also when `f` panics).
pub(crate) fn with_flag<T>(flag: &'static std::thread::LocalKey<Cell<bool>>, f: impl FnOnce() -> T) -> T {
    struct Restore(&'static std::thread::LocalKey<Cell<bool>>, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            self.0.set(self.1);
        }
    }
    let _restore = Restore(flag, flag.replace(true));
    f()
}

/// A part as read shared: its text, and the part (of whichever type it was read as).
type Part = (Box<str>, Arc<dyn Any + Send + Sync>);

thread_local! {
    /// The parts (see [`part`]) this thread read shared lately, the newest first.
    static PARTS: RefCell<Vec<Part>> = const { RefCell::new(Vec::new()) };
}

/// How many parts each thread keeps to compare a part's text with.
const PARTS_KEPT: usize = 8;

/// A part of a record that many records hold the same (a run's speed fingerprint, the server's
/// info), for `deserialize_with`. Read shared (see [`shared`]), a part whose text this
/// thread read lately is that part's copy: its text is compared, not parsed, and the records
/// keep one copy between them. Else it is read as itself. As for an environment, a part that
/// does not parse when read shared is an error without the position inside it.
pub fn part<'de, D, T>(d: D) -> Result<Option<Arc<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: serde::de::DeserializeOwned + Send + Sync + 'static,
{
    if !is_shared() {
        return Option::<T>::deserialize(d).map(|t| t.map(Arc::new));
    }
    let Some(text) = Option::<&RawValue>::deserialize(d)?.map(RawValue::get) else {
        return Ok(None);
    };
    let known = PARTS.with_borrow_mut(|parts| {
        let i = parts.iter().position(|(t, p)| p.is::<T>() && **t == *text)?;
        parts[..=i].rotate_right(1);
        Arc::clone(&parts[0].1).downcast::<T>().ok()
    });
    if let Some(known) = known {
        return Ok(Some(known));
    }
    let read = Arc::new(serde_json::from_str::<T>(text).map_err(D::Error::custom)?);
    PARTS.with_borrow_mut(|parts| {
        parts.insert(0, (text.into(), read.clone()));
        parts.truncate(PARTS_KEPT);
    });
    Ok(Some(read))
}
