//! Context rotation for long-running agents: before the harness replaces a full context
//! with a fresh one, the session's captured turns are flushed and awaited, and the new
//! context is seeded with the most recent entries of the old one plus every entry that
//! landed while the flush ran — so nothing said is lost from memory or from the
//! conversation.
//!
//! The harness owns its context (a thread of entries of its own type) and the session
//! ids: [`rotate`] reads the thread through [`Thread`], mints nothing, and hands back
//! the seed; installing the new thread under a new session id is the harness's.

use std::time::Duration;

use super::capture::CaptureBuffer;
use crate::{Error, Result};

/// How long the pre-rotation flush may take by default: 30 s.
pub(crate) const DEFAULT_ROTATION_FLUSH_TIMEOUT: Duration = Duration::from_secs(30);
/// Pre-flush entries seeded into the new context by default: 4.
pub(crate) const DEFAULT_KEEP_LAST_N: usize = 4;

/// A harness's context, read by [`rotate`]: its entries, oldest first. Entries are
/// only ever appended while a rotation runs (a turn landing during the flush).
pub trait Thread<E> {
    /// Every entry, oldest first.
    fn entries(&self) -> Vec<E>;
}

impl<E: Clone> Thread<E> for std::sync::Mutex<Vec<E>> {
    fn entries(&self) -> Vec<E> {
        self.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// How [`rotate`] rotates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RotateOptions {
    /// How long the flush may take (`DEFAULT_ROTATION_FLUSH_TIMEOUT`; positive).
    pub flush_timeout: Duration,
    /// Most recent pre-flush entries seeded into the new context
    /// (`DEFAULT_KEEP_LAST_N`); 0 drops everything that existed before the flush.
    /// Entries that landed during the flush are always carried over.
    pub keep_last_n: usize,
}

impl Default for RotateOptions {
    fn default() -> Self {
        RotateOptions {
            flush_timeout: DEFAULT_ROTATION_FLUSH_TIMEOUT,
            keep_last_n: DEFAULT_KEEP_LAST_N,
        }
    }
}

impl RotateOptions {
    /// The defaults: a 30 s flush, the last 4 entries kept.
    pub fn new() -> RotateOptions {
        RotateOptions::default()
    }

    /// Sets [`flush_timeout`](RotateOptions::flush_timeout).
    pub fn flush_timeout(mut self, timeout: Duration) -> Self {
        self.flush_timeout = timeout;
        self
    }

    /// Sets [`keep_last_n`](RotateOptions::keep_last_n).
    pub fn keep_last_n(mut self, n: usize) -> Self {
        self.keep_last_n = n;
        self
    }
}

/// Rotates the context of `session`: flushes its captured turns and waits for them
/// ([`CaptureBuffer::flush_and_await`] within [`RotateOptions::flush_timeout`]), then
/// returns the new context's seed — the last [`RotateOptions::keep_last_n`] entries
/// `thread` held before the flush, followed by every entry that landed during it.
///
/// Without a committed session (`None`: the harness has no session id yet) there is
/// nothing to rotate: `Ok(None)`, nothing flushed. A flush that fails or times out is
/// the error (the turns are put back in the buffer, and the old context stays).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// use std::sync::Mutex;
/// use gralkor::agent::capture::{CaptureBuffer, CaptureConfig};
/// use gralkor::agent::rotation::{RotateOptions, rotate};
/// use gralkor::client::InMemoryClient;
///
/// let buffer = CaptureBuffer::in_memory(&InMemoryClient::new(), CaptureConfig::new()).await?;
/// let thread = Mutex::new((1..=6).map(|i| format!("entry {i}")).collect::<Vec<_>>());
/// let seed = rotate(&buffer, Some("thread-7"), &thread, &RotateOptions::new().keep_last_n(2))
///     .await?
///     .expect("a committed session");
/// assert_eq!(seed, ["entry 5", "entry 6"]);
/// assert_eq!(rotate(&buffer, None, &thread, &RotateOptions::new()).await?, None);
/// # Ok(()) }
/// ```
pub async fn rotate<E>(
    buffer: &CaptureBuffer,
    session: Option<&str>,
    thread: &(impl Thread<E> + ?Sized),
    options: &RotateOptions,
) -> Result<Option<Vec<E>>> {
    if options.flush_timeout.is_zero() {
        return Err(Error::invalid("flush_timeout", "must be positive"));
    }
    let Some(session) = session else {
        return Ok(None);
    };
    let before = thread.entries().len();
    buffer
        .flush_and_await(session, options.flush_timeout)
        .await?;
    let mut after = thread.entries();
    let before = before.min(after.len());
    let landed = after.split_off(before);
    let keep = options.keep_last_n.min(after.len());
    let mut seed = after.split_off(after.len() - keep);
    seed.extend(landed);
    tracing::info!(
        session,
        kept = keep,
        landed = seed.len() - keep,
        "[gralkor] context rotated"
    );
    Ok(Some(seed))
}
