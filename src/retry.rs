//! The crate's one retry policy and its one loop.
//!
//! [`Backoff`] says when another attempt is made and how long to wait before it:
//!
//! * **delays**: exponential (`first`, times `factor` per retry, never more than
//!   `cap`) or a listed schedule (exactly these waits, in order);
//! * **jitter** (optional): each wait is a random value between half and all of it;
//! * **a Retry-After hint** (optional): a wait the failing service asked for (a
//!   provider's `Retry-After`, carried in [`Error::Provider`]) replaces the computed
//!   one when longer;
//! * **an attempt bound**: attempts in all, the first included;
//! * **a total-time bound** (optional): a retry is made only if its wait ends within
//!   the budget, measured from the first attempt or from the first failure.
//!
//! Every retry in the crate is a configuration of it: the engine's database steps
//! (`Backoff::new`), the provider calls ([`crate::llm::RetryPolicy`] maps onto it),
//! the capture buffer's `retry_delays` (a listed schedule) and the Reflection
//! schedule (doubling from 1 s to 1 h within 24 h of the first failure).
//!
//! ```text
//! retry(what, backoff, op)                      retries while e.is_retryable()
//! retry_when(what, backoff, when, op)           retries while when(&e)
//! retry_waiting(what, backoff, when, wait, op)  … and waits with wait(delay), not sleep
//! retry_on_clock(what, backoff, when, now, wait, op)  … and measures time with now()
//! poll(what, backoff, deadline, check)          until check gives Some, or the deadline
//! ```
//!
//! `op` is an `FnMut() -> impl Future<Output = Result<T>>` called once per attempt
//! (it may borrow); the last error is returned when the policy gives up or the
//! predicate refuses it. Each retry is a tracing event. A step that retries a lost
//! connection 6 times from 50 ms to 2 s is one line:
//!
//! ```ignore
//! crate::retry::retry_when(what, crate::retry::Backoff::new(6, Duration::from_millis(50), Duration::from_secs(2)), Error::is_connection, step).await
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::{Error, Result};

/// How much later than a Retry-After hint a jittered wait may end.
const HINT_SLACK: Duration = Duration::from_millis(250);

/// The one retry policy: when another attempt is made and how long to wait before
/// it (see the [module documentation](self)).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Backoff {
    /// Attempts in all, the first included; at least 1.
    attempts: usize,
    /// The waits before the computed jitter and hint.
    delays: Delays,
    /// Each wait a random value between half and all of it.
    jitter: bool,
    /// A Retry-After hint from the error replaces a shorter wait.
    hints: bool,
    /// The total-time bound, if any.
    budget: Option<Budget>,
}

/// The waits of a [`Backoff`], before jitter and hints.
#[derive(Clone, Debug, PartialEq)]
enum Delays {
    /// `first`, then each `factor` times the one before, never more than `cap`.
    Exponential {
        first: Duration,
        cap: Duration,
        factor: u32,
    },
    /// Exactly these, in order; no retry after the last.
    Listed(Arc<[Duration]>),
}

/// A bound on the time the retries may take: a retry is made only if its wait ends
/// at most `limit` after `since`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Budget {
    limit: Duration,
    since: Since,
}

/// Where a [`Budget`] is measured from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Since {
    /// The start of the first attempt: the whole call, attempts and waits included.
    FirstAttempt,
    /// The end of the first failed attempt.
    FirstFailure,
}

impl Backoff {
    /// `attempts` in all (the first included; 0 counts as 1), waiting `first` before
    /// the second and doubling up to `cap`.
    pub(crate) const fn new(attempts: usize, first: Duration, cap: Duration) -> Self {
        Backoff {
            attempts: if attempts == 0 { 1 } else { attempts },
            delays: Delays::Exponential {
                first,
                cap,
                factor: 2,
            },
            jitter: false,
            hints: false,
            budget: None,
        }
    }

    /// No bound on attempts: for [`poll`], which its deadline bounds instead, or
    /// with a [budget](Self::within).
    pub(crate) const fn polling(first: Duration, cap: Duration) -> Self {
        Backoff::new(usize::MAX, first, cap)
    }

    /// Exactly `delays`, in order: one attempt more than there are delays.
    pub(crate) fn listed(delays: impl IntoIterator<Item = Duration>) -> Self {
        let delays: Arc<[Duration]> = delays.into_iter().collect();
        Backoff {
            attempts: delays.len().saturating_add(1),
            delays: Delays::Listed(delays),
            jitter: false,
            hints: false,
            budget: None,
        }
    }

    /// The same with another growth factor (0 counts as 1: a constant delay); no
    /// effect on a listed schedule.
    #[allow(dead_code)] // part of the policy's surface; no caller needs it yet
    pub(crate) const fn with_factor(mut self, factor: u32) -> Self {
        if let Delays::Exponential { factor: f, .. } = &mut self.delays {
            *f = if factor == 0 { 1 } else { factor };
        }
        self
    }

    /// Each wait a random value between half and all of the computed one.
    pub(crate) const fn with_jitter(mut self) -> Self {
        self.jitter = true;
        self
    }

    /// A Retry-After hint carried by the error (see [`hint`]) is honoured: the wait
    /// is at least the hint (and at most [`HINT_SLACK`] longer).
    pub(crate) const fn with_hints(mut self) -> Self {
        self.hints = true;
        self
    }

    /// A retry is made only if its wait ends at most `limit` after `since`.
    pub(crate) const fn within(mut self, limit: Duration, since: Since) -> Self {
        self.budget = Some(Budget { limit, since });
        self
    }

    /// The computed wait after `failed` failed attempts (1-based), before jitter and
    /// hints, or `None` when the schedule has none.
    fn delay(&self, failed: usize) -> Option<Duration> {
        match &self.delays {
            Delays::Exponential { first, cap, factor } => {
                let mut d = (*first).min(*cap);
                for _ in 1..failed {
                    if d >= *cap {
                        break;
                    }
                    d = d.saturating_mul(*factor).min(*cap);
                }
                Some(d)
            }
            Delays::Listed(delays) => delays.get(failed.checked_sub(1)?).copied(),
        }
    }

    /// The wait before the next attempt after `failed` failed attempts (1-based), or
    /// `None` when the policy gives up. `elapsed` is the time since the budget's
    /// origin; `hint` a wait the failing service asked for.
    pub(crate) fn next_wait(
        &self,
        failed: usize,
        elapsed: Duration,
        hint: Option<Duration>,
    ) -> Option<Duration> {
        if failed == 0 || failed >= self.attempts {
            return None;
        }
        let mut wait = self.delay(failed)?;
        if self.jitter {
            wait = wait.mul_f64(0.5 + 0.5 * jitter_unit());
        }
        if let (true, Some(h)) = (self.hints, hint) {
            wait = h.max(wait.min(h + HINT_SLACK));
        }
        match self.budget {
            Some(b) if elapsed.saturating_add(wait) > b.limit => None,
            _ => Some(wait),
        }
    }
}

/// A random number in [0, 1) from the system's random source (through UUID v4).
fn jitter_unit() -> f64 {
    let bits = uuid::Uuid::new_v4().as_u128() as u64 >> 11;
    bits as f64 / (1u64 << 53) as f64
}

/// The Retry-After hint an error carries: a provider's `Retry-After` (or its
/// equivalent in the body).
pub(crate) fn hint(e: &Error) -> Option<Duration> {
    match e {
        Error::Provider { retry_after, .. } => *retry_after,
        _ => None,
    }
}

/// Runs `op` until it succeeds, fails with an error that is not
/// [retryable](Error::is_retryable), or `backoff` gives up; returns its last
/// outcome. `what` names the operation in the tracing event of each retry.
#[allow(dead_code)] // the default form
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
    W: FnMut(Duration) -> WFut,
    WFut: Future<Output = ()>,
{
    let start = tokio::time::Instant::now();
    retry_on_clock(what, &backoff, when, || start.elapsed(), wait, op).await
}

/// The one retry loop: [`retry_waiting`] that reads the time from `now` (any
/// monotonic clock; a test's manual clock) for the policy's budget.
pub(crate) async fn retry_on_clock<T, F, Fut, P, N, W, WFut>(
    what: &str,
    backoff: &Backoff,
    mut when: P,
    now: N,
    mut wait: W,
    mut op: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
    P: FnMut(&Error) -> bool,
    N: Fn() -> Duration,
    W: FnMut(Duration) -> WFut,
    WFut: Future<Output = ()>,
{
    let start = now();
    let mut first_failure = None;
    let mut failed = 0_usize;
    loop {
        let e = match op().await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        failed += 1;
        if !when(&e) {
            return Err(e);
        }
        let t = now();
        let origin = match backoff.budget.map(|b| b.since) {
            Some(Since::FirstFailure) => *first_failure.get_or_insert(t),
            _ => start,
        };
        let Some(delay) = backoff.next_wait(failed, t.saturating_sub(origin), hint(&e)) else {
            tracing::warn!(operation = what, attempts = failed, error = %e, "retries exhausted; giving up");
            return Err(e);
        };
        tracing::warn!(
            operation = what,
            attempt = failed,
            delay_ms = delay.as_millis() as u64,
            error = %e,
            "attempt failed; retrying"
        );
        wait(delay).await;
    }
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
    let start = tokio::time::Instant::now();
    let mut calls = 0_usize;
    loop {
        if let Some(v) = check().await? {
            return Ok(Some(v));
        }
        calls += 1;
        let elapsed = start.elapsed();
        if elapsed > deadline {
            return Ok(None);
        }
        let Some(delay) = backoff.next_wait(calls, elapsed, None) else {
            return Ok(None);
        };
        tracing::trace!(
            operation = what,
            delay_ms = delay.as_millis() as u64,
            "not ready yet; polling again"
        );
        tokio::time::sleep(delay).await;
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

    /// Every wait the policy gives, failure after failure, with no time spent.
    fn millis(b: &Backoff) -> Vec<u128> {
        (1..)
            .map_while(|n| b.next_wait(n, Duration::ZERO, None))
            .map(|d| d.as_millis())
            .collect()
    }

    #[test]
    fn delays_double_from_first_up_to_the_cap() {
        let b = Backoff::new(7, ms(50), ms(500));
        assert_eq!(millis(&b), [50, 100, 200, 400, 500, 500]);
        assert_eq!(millis(&Backoff::new(1, ms(50), ms(500))), [0; 0]);
        assert_eq!(
            millis(&Backoff::new(0, ms(50), ms(500))),
            [0; 0],
            "0 attempts is one attempt, never retried"
        );
        let tripled = Backoff::new(4, ms(10), ms(200)).with_factor(3);
        assert_eq!(millis(&tripled), [10, 30, 90]);
        // Exact: whole multiples, no float rounding, also far along a long schedule.
        let long = Backoff::polling(ms(50), ms(2000));
        assert_eq!(long.next_wait(3, Duration::ZERO, None), Some(ms(200)));
        assert_eq!(long.next_wait(10_000, Duration::ZERO, None), Some(ms(2000)));
    }

    #[test]
    fn a_listed_schedule_waits_exactly_its_delays_then_gives_up() {
        let b = Backoff::listed([ms(30), ms(10), ms(70)]);
        assert_eq!(millis(&b), [30, 10, 70]);
        assert_eq!(
            millis(&Backoff::listed([])),
            [0; 0],
            "no delays: one attempt"
        );
    }

    #[test]
    fn jitter_keeps_each_wait_between_half_and_all_of_it_and_varies_it() {
        let b = Backoff::new(20, Duration::from_secs(1), Duration::from_secs(8)).with_jitter();
        for _ in 0..50 {
            let w1 = b.next_wait(1, Duration::ZERO, None).unwrap();
            assert!(w1 >= ms(500) && w1 <= ms(1000), "{w1:?}");
            let w3 = b.next_wait(3, Duration::ZERO, None).unwrap();
            assert!(w3 >= ms(2000) && w3 <= ms(4000), "{w3:?}");
            let w9 = b.next_wait(9, Duration::ZERO, None).unwrap();
            assert!(w9 >= ms(4000) && w9 <= ms(8000), "{w9:?}");
        }
        let distinct: std::collections::HashSet<_> = (0..20)
            .map(|_| b.next_wait(2, Duration::ZERO, None))
            .collect();
        assert!(distinct.len() > 1, "jitter varies the waits");
    }

    #[test]
    fn a_retry_after_hint_is_honoured_only_when_the_policy_takes_hints() {
        let plain = Backoff::new(5, Duration::from_secs(1), Duration::from_secs(60));
        let hinted = plain.clone().with_hints();
        let hint = Some(Duration::from_secs(7));
        assert_eq!(
            plain.next_wait(1, Duration::ZERO, hint),
            Some(Duration::from_secs(1))
        );
        // Longer than the computed wait: the hint, at most HINT_SLACK later.
        assert_eq!(
            hinted.next_wait(1, Duration::ZERO, hint),
            Some(Duration::from_secs(7))
        );
        // A hint shorter than the computed wait: the computed wait, capped at hint + slack.
        assert_eq!(
            hinted.next_wait(4, Duration::ZERO, Some(ms(100))),
            Some(ms(100) + HINT_SLACK)
        );
        let jittered = hinted.with_jitter();
        for _ in 0..20 {
            let w = jittered.next_wait(1, Duration::ZERO, hint).unwrap();
            assert!(w >= Duration::from_secs(7) && w <= ms(7250), "{w:?}");
        }
        // The hint an error carries: a provider's Retry-After only.
        let limited = Error::Provider {
            provider: "p".into(),
            status: Some(429),
            message: "slow down".into(),
            retry_after: hint,
            source: None,
        };
        assert_eq!(super::hint(&limited), hint);
        assert_eq!(super::hint(&lost()), None);
    }

    #[test]
    fn a_budget_stops_the_retry_whose_wait_would_end_after_it() {
        let b = Backoff::polling(Duration::from_secs(1), Duration::from_secs(60))
            .with_hints()
            .within(Duration::from_secs(30), Since::FirstAttempt);
        assert_eq!(
            b.next_wait(1, Duration::from_secs(28), None),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            b.next_wait(1, Duration::from_secs(29), None),
            Some(Duration::from_secs(1)),
            "ending exactly at the bound"
        );
        assert_eq!(b.next_wait(1, Duration::from_secs(30), None), None);
        assert_eq!(
            b.next_wait(1, Duration::ZERO, Some(Duration::from_secs(31))),
            None
        );
        assert_eq!(
            b.next_wait(2, Duration::from_secs(29), Some(Duration::from_secs(2))),
            None
        );
        // The attempt bound holds alongside the budget.
        let both =
            Backoff::new(3, ms(10), ms(10)).within(Duration::from_secs(30), Since::FirstAttempt);
        assert_eq!(millis(&both), [10, 10]);
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

    /// A manual clock: sleeping advances it at once and is recorded.
    #[derive(Default)]
    struct Manual(Mutex<(Duration, Vec<u128>)>);

    impl Manual {
        fn now(&self) -> Duration {
            self.0.lock().unwrap().0
        }
        fn advance(&self, d: Duration) {
            self.0.lock().unwrap().0 += d;
        }
        fn sleep(&self, d: Duration) -> std::future::Ready<()> {
            let mut s = self.0.lock().unwrap();
            s.0 += d;
            s.1.push(d.as_millis());
            std::future::ready(())
        }
    }

    /// Runs an always-failing step on a manual clock under a 10 s budget from
    /// `since`, waits doubling from 1 s; each attempt takes 1 s, the first `first`.
    /// Returns the waits, in ms.
    async fn waits_within_ten_seconds(since: Since, first: Duration) -> Vec<u128> {
        let clock = Manual::default();
        let policy = Backoff::polling(Duration::from_secs(1), Duration::from_secs(60))
            .within(Duration::from_secs(10), since);
        let mut calls = 0;
        let res: Result<()> = retry_on_clock(
            "step",
            &policy,
            Error::is_retryable,
            || clock.now(),
            |d| clock.sleep(d),
            || {
                calls += 1;
                clock.advance(if calls == 1 {
                    first
                } else {
                    Duration::from_secs(1)
                });
                async { Err(lost()) }
            },
        )
        .await;
        assert!(matches!(res, Err(Error::Connection { .. })));
        let waits = clock.0.lock().unwrap().1.clone();
        assert_eq!(calls, waits.len() + 1);
        waits
    }

    #[tokio::test]
    async fn the_budget_counts_from_the_first_attempt_or_from_the_first_failure() {
        let s = Duration::from_secs;
        // From the first attempt (t = 0): failures at 1 s (1 + 1 ≤ 10), 3 s (3 + 2),
        // 6 s (6 + 4 = 10, ending exactly at the bound), 11 s (over).
        assert_eq!(
            waits_within_ten_seconds(Since::FirstAttempt, s(1)).await,
            [1000, 2000, 4000]
        );
        // From the first failure (1 s): elapsed 0 + 1, 2 + 2, 5 + 4, 10 + 8 (over).
        assert_eq!(
            waits_within_ten_seconds(Since::FirstFailure, s(1)).await,
            [1000, 2000, 4000]
        );
        // A slow first attempt (9 s) counts only from the first attempt: 9 + 1 = 10,
        // then 11 + 2 is over; from the first failure: 0 + 1, 2 + 2, 5 + 4, 10 + 8.
        assert_eq!(
            waits_within_ten_seconds(Since::FirstAttempt, s(9)).await,
            [1000]
        );
        assert_eq!(
            waits_within_ten_seconds(Since::FirstFailure, s(9)).await,
            [1000, 2000, 4000]
        );
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
