//! The crate's one retry loop: bounded attempts, exponential backoff with a cap, a
//! predicate that says which errors are worth another attempt (by default
//! [`Error::is_retryable`]), and a tracing event per retry. Plus [`poll`], the same
//! backoff for waiting until the server reports something ready, bounded by a
//! deadline.
//!
//! Built on [`backon`], which the `redis` crate already depends on (same version, no
//! default features, so nothing new is compiled): backon runs the loop, the predicate
//! and the notification; the delays are [`Backoff`]'s own exact iterator and tokio's
//! timer is the sleeper.
//!
//! ```text
//! retry(what, backoff, op)                    retries while e.is_retryable()
//! retry_when(what, backoff, when, op)         retries while when(&e)
//! retry_waiting(what, backoff, when, wait, op) … and waits with wait(delay), not sleep
//! poll(what, backoff, deadline, check)        until check gives Some, or the deadline
//! ```
//!
//! `op` is an `FnMut() -> impl Future<Output = Result<T>>` called once per attempt
//! (it may borrow); the last error is returned when the attempts run out or the
//! predicate refuses it. A step that retries a lost connection 6 times from 50 ms to
//! 2 s (the ingest pipeline's policy) is one line:
//!
//! ```ignore
//! // in graph/ingest: the body of `retry(what, step)`
//! crate::retry::retry_when(what, crate::retry::Backoff::new(6, Duration::from_millis(50), Duration::from_secs(2)), Error::is_connection, step).await
//! ```

use std::future::Future;
use std::time::Duration;

use backon::Retryable;

use crate::{Error, Result};

/// How often and how long to wait between attempts: `first`, then each delay
/// `factor` times the one before (2 unless set), never more than `cap`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Backoff {
    /// Attempts in all, the first included; at least 1.
    attempts: usize,
    /// The delay before the second attempt.
    first: Duration,
    /// The longest delay.
    cap: Duration,
    /// Growth of the delay per retry.
    factor: u32,
}

impl Backoff {
    /// `attempts` in all (the first included; 0 counts as 1), waiting `first` before
    /// the second and doubling up to `cap`.
    pub(crate) const fn new(attempts: usize, first: Duration, cap: Duration) -> Self {
        Backoff {
            attempts: if attempts == 0 { 1 } else { attempts },
            first,
            cap,
            factor: 2,
        }
    }

    /// No bound on attempts: for [`poll`], which its deadline bounds instead.
    pub(crate) const fn polling(first: Duration, cap: Duration) -> Self {
        Backoff {
            attempts: usize::MAX,
            first,
            cap,
            factor: 2,
        }
    }

    /// The same with another growth factor (0 counts as 1: a constant delay).
    #[allow(dead_code)] // part of the helper's surface; no caller needs it yet
    pub(crate) const fn with_factor(mut self, factor: u32) -> Self {
        self.factor = if factor == 0 { 1 } else { factor };
        self
    }

    /// The delays between attempts, in order (one fewer than the attempts), exact:
    /// whole multiples, no float rounding (backon's own exponential builder computes
    /// in `f32`, so 50 ms doubled is 100.000001 ms and a paused clock shows it).
    fn delays(&self) -> impl Iterator<Item = Duration> + Send + Sync + Unpin + use<> {
        let (factor, cap) = (self.factor, self.cap);
        std::iter::successors(Some(self.first.min(cap)), move |d| {
            Some(d.saturating_mul(factor).min(cap))
        })
        .take(self.attempts - 1)
    }
}

/// Runs `op` until it succeeds, fails with an error that is not
/// [retryable](Error::is_retryable), or has used `backoff`'s attempts; returns its
/// last outcome. `what` names the operation in the tracing event of each retry.
#[allow(dead_code)] // the default form; today's callers all need a narrower predicate
pub(crate) async fn retry<T, F, Fut>(what: &str, backoff: Backoff, op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    retry_when(what, backoff, Error::is_retryable, op).await
}

/// [`retry`] with the errors worth another attempt chosen by `when`.
pub(crate) async fn retry_when<T, F, Fut, P>(
    what: &str,
    backoff: Backoff,
    when: P,
    op: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
    P: FnMut(&Error) -> bool,
{
    retry_waiting(what, backoff, when, tokio::time::sleep, op).await
}

/// [`retry_when`] that waits between attempts with `wait(delay)` instead of sleeping
/// for the delay: e.g. until an embedded server is up again.
pub(crate) async fn retry_waiting<T, F, Fut, P, W, WFut>(
    what: &str,
    backoff: Backoff,
    when: P,
    wait: W,
    op: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
    P: FnMut(&Error) -> bool,
    W: Fn(Duration) -> WFut + 'static,
    WFut: Future<Output = ()>,
{
    let mut attempt = 0_usize;
    op.retry(backoff.delays())
        .sleep(wait)
        .when(when)
        .notify(|e: &Error, delay: Duration| {
            attempt += 1;
            tracing::warn!(
                operation = what,
                attempt,
                delay_ms = delay.as_millis() as u64,
                error = %e,
                "attempt failed; retrying"
            );
        })
        .await
}

/// Calls `check` until it gives `Some` (returned), fails (its error returned), or
/// `deadline` has passed since the first call with `check` still giving `None`
/// (`Ok(None)`: the caller says what timed out). Waits between calls as `backoff`
/// says; its attempts bound the calls too.
pub(crate) async fn poll<T, F, Fut>(
    what: &str,
    backoff: Backoff,
    deadline: Duration,
    mut check: F,
) -> Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    enum Step {
        NotYet,
        Expired,
        Failed(Error),
    }
    let start = tokio::time::Instant::now();
    let outcome = (|| {
        let checked = check();
        async move {
            match checked.await {
                Ok(Some(v)) => Ok(v),
                Ok(None) if start.elapsed() > deadline => Err(Step::Expired),
                Ok(None) => Err(Step::NotYet),
                Err(e) => Err(Step::Failed(e)),
            }
        }
    })
    .retry(backoff.delays())
    .sleep(tokio::time::sleep)
    .when(|s: &Step| matches!(s, Step::NotYet))
    .notify(|_: &Step, delay: Duration| {
        tracing::trace!(
            operation = what,
            delay_ms = delay.as_millis() as u64,
            "not ready yet; polling again"
        );
    })
    .await;
    match outcome {
        Ok(v) => Ok(Some(v)),
        Err(Step::NotYet | Step::Expired) => Ok(None),
        Err(Step::Failed(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::time::Instant;

    use super::*;

    const fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn lost() -> Error {
        Error::Connection {
            context: "lost".into(),
            source: None,
        }
    }

    fn timeout() -> Error {
        Error::Timeout {
            operation: "q".into(),
            after: ms(1),
        }
    }

    fn millis(d: impl Iterator<Item = Duration>) -> Vec<u128> {
        d.map(|d| d.as_millis()).collect()
    }

    #[test]
    fn delays_double_from_first_up_to_the_cap() {
        let b = Backoff::new(7, ms(50), ms(500));
        assert_eq!(millis(b.delays()), [50, 100, 200, 400, 500, 500]);
        assert_eq!(millis(Backoff::new(1, ms(50), ms(500)).delays()), [0; 0]);
        assert_eq!(
            millis(Backoff::new(0, ms(50), ms(500)).delays()),
            [0; 0],
            "0 attempts is one attempt, never retried"
        );
        let tripled = Backoff::new(4, ms(10), ms(200)).with_factor(3);
        assert_eq!(millis(tripled.delays()), [10, 30, 90]);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_a_retryable_error_until_the_attempts_run_out() {
        let calls = Mutex::new(0);
        let start = Instant::now();
        let res: Result<()> = retry("step", Backoff::new(5, ms(50), ms(2000)), || async {
            *calls.lock().unwrap() += 1;
            Err(lost())
        })
        .await;
        assert!(matches!(res, Err(Error::Connection { .. })), "{res:?}");
        assert_eq!(*calls.lock().unwrap(), 5);
        // 50 + 100 + 200 + 400 ms of the paused clock, nothing after the last attempt.
        assert_eq!(start.elapsed().as_millis(), 750);
    }

    #[tokio::test(start_paused = true)]
    async fn returns_the_first_success() {
        let calls = Mutex::new(0);
        let res = retry("step", Backoff::new(5, ms(50), ms(2000)), || async {
            let mut n = calls.lock().unwrap();
            *n += 1;
            if *n < 3 { Err(timeout()) } else { Ok(*n) }
        })
        .await;
        assert_eq!(res.unwrap(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_the_predicate_refuses_returns_at_once() {
        let calls = Mutex::new(0);
        let start = Instant::now();
        let res: Result<()> = retry("step", Backoff::new(5, ms(50), ms(2000)), || async {
            *calls.lock().unwrap() += 1;
            Err(Error::invalid("graph", "must not be blank"))
        })
        .await;
        assert!(matches!(res, Err(Error::InvalidInput { .. })));
        assert_eq!(*calls.lock().unwrap(), 1);
        assert_eq!(start.elapsed(), Duration::ZERO);

        // A narrower predicate: a timeout is retryable, but not retried here.
        let calls = Mutex::new(0);
        let only_lost = |e: &Error| matches!(e, Error::Connection { .. });
        let res: Result<()> = retry_when(
            "read",
            Backoff::new(5, ms(50), ms(2000)),
            only_lost,
            || async {
                let mut n = calls.lock().unwrap();
                *n += 1;
                Err(if *n == 1 { lost() } else { timeout() })
            },
        )
        .await;
        assert!(matches!(res, Err(Error::Timeout { .. })), "{res:?}");
        assert_eq!(*calls.lock().unwrap(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_custom_wait_replaces_the_sleep_and_gets_each_delay() {
        let waited = Arc::new(Mutex::new(Vec::new()));
        let log = waited.clone();
        let wait = move |d: Duration| {
            log.lock().unwrap().push(d.as_millis());
            std::future::ready(())
        };
        let start = Instant::now();
        let res: Result<()> = retry_waiting(
            "read",
            Backoff::new(4, ms(50), ms(150)),
            Error::is_retryable,
            wait,
            || async { Err(lost()) },
        )
        .await;
        assert!(res.is_err());
        assert_eq!(*waited.lock().unwrap(), [50, 100, 150]);
        assert_eq!(start.elapsed(), Duration::ZERO, "nothing slept");
    }

    #[tokio::test(start_paused = true)]
    async fn poll_returns_what_is_ready_passes_errors_and_gives_up_after_the_deadline() {
        let calls = Mutex::new(0);
        let ready = poll(
            "index",
            Backoff::polling(ms(5), ms(200)),
            ms(1000),
            || async {
                let mut n = calls.lock().unwrap();
                *n += 1;
                Ok((*n == 4).then_some("ready"))
            },
        )
        .await;
        assert_eq!(ready.unwrap(), Some("ready"));

        let failed: Result<Option<()>> = poll(
            "index",
            Backoff::polling(ms(5), ms(200)),
            ms(1000),
            || async { Err(Error::Protocol("bad".into())) },
        )
        .await;
        assert!(matches!(failed, Err(Error::Protocol(_))));

        let start = Instant::now();
        let never: Result<Option<()>> = poll(
            "index",
            Backoff::polling(ms(5), ms(200)),
            ms(1000),
            || async { Ok(None) },
        )
        .await;
        assert_eq!(never.unwrap(), None);
        let waited = start.elapsed();
        // Gave up at the first check after the deadline, at most one capped delay late.
        assert!(waited > ms(1000) && waited <= ms(1200), "{waited:?}");
    }
}
