//! The retry policy of provider calls: its public configuration, mapped onto the
//! crate's one retry policy ([`crate::retry`]), and the parsing of Retry-After hints.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::retry::{Backoff, Since};

/// When and how provider calls are retried.
///
/// Retried: HTTP 408, 429 and 5xx, timeouts and connection errors (exactly the errors
/// for which [`Error::is_retryable`](crate::Error::is_retryable) is true). Not retried:
/// every other 4xx. The wait before attempt *n + 1* is `initial_backoff · 2ⁿ⁻¹`, capped
/// at `max_backoff`, with full jitter in its upper half (a random value between half
/// and all of it); a `Retry-After` from the provider replaces it when longer. Retrying
/// stops after `max_attempts` attempts or when the next wait would end after
/// `max_elapsed` from the first attempt; the last error is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (at least 1). Default 5.
    pub max_attempts: u32,
    /// Base wait before the first retry. Default 1 s.
    pub initial_backoff: Duration,
    /// Longest wait between attempts (a longer `Retry-After` is still honoured as long
    /// as it fits in `max_elapsed`). Default 60 s.
    pub max_backoff: Duration,
    /// Bound on the whole call, waits included. Default 5 minutes.
    pub max_elapsed: Duration,
    /// Limit on one HTTP attempt, or `None` for none. Default 120 s.
    pub attempt_timeout: Option<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            max_elapsed: Duration::from_secs(300),
            attempt_timeout: Some(Duration::from_secs(120)),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries (one attempt), keeping the default timeout.
    pub fn no_retries() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// This policy as a configuration of the crate's one retry policy: doubling
    /// from `initial_backoff` up to `max_backoff` with jitter, a Retry-After hint
    /// honoured, `max_attempts` attempts within `max_elapsed` of the first attempt.
    pub(crate) fn backoff(&self) -> Backoff {
        Backoff::new(
            self.max_attempts.max(1) as usize,
            self.initial_backoff,
            self.max_backoff,
        )
        .with_jitter()
        .with_hints()
        .within(self.max_elapsed, Since::FirstAttempt)
    }

    /// The wait before the next attempt, or `None` when the policy gives up.
    /// `elapsed` is the time since the first attempt started.
    pub(crate) fn next_wait(
        &self,
        failed_attempts: u32,
        elapsed: Duration,
        retry_after: Option<Duration>,
    ) -> Option<Duration> {
        self.backoff()
            .next_wait(failed_attempts as usize, elapsed, retry_after)
    }
}

/// Parses a `Retry-After` value: delta-seconds (fractions accepted) or an HTTP date.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = parse_http_date(value)?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// Parses a duration in Google's `"30s"` / `"1.5s"` form (e.g. `RetryInfo.retryDelay`).
pub(crate) fn parse_seconds_suffix(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().strip_suffix('s')?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT` (the form HTTP servers send).
fn parse_http_date(value: &str) -> Option<SystemTime> {
    let rest = value.split_once(", ")?.1;
    let parts: Vec<&str> = rest.split_whitespace().collect();
    let [day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let day: u64 = day.parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| m == month)? as u64
        + 1;
    let year: u64 = year.parse().ok()?;
    let mut hms = time.split(':').map(|p| p.parse::<u64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if year < 1970 || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(UNIX_EPOCH + Duration::from_secs(days * 86_400 + h * 3600 + m * 60 + s))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_waits_double_with_jitter_and_are_capped() {
        let p = RetryPolicy {
            max_attempts: 20,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(8),
            max_elapsed: Duration::from_secs(3600),
            ..RetryPolicy::default()
        };
        for _ in 0..50 {
            let b1 = p.next_wait(1, Duration::ZERO, None).unwrap();
            assert!(
                b1 >= Duration::from_millis(500) && b1 <= Duration::from_secs(1),
                "{b1:?}"
            );
            let b3 = p.next_wait(3, Duration::ZERO, None).unwrap();
            assert!(
                b3 >= Duration::from_secs(2) && b3 <= Duration::from_secs(4),
                "{b3:?}"
            );
            let b9 = p.next_wait(9, Duration::ZERO, None).unwrap();
            assert!(
                b9 >= Duration::from_secs(4) && b9 <= Duration::from_secs(8),
                "{b9:?}"
            );
        }
    }

    #[test]
    fn gives_up_on_attempts_and_on_total_time() {
        let p = RetryPolicy {
            max_attempts: 3,
            max_elapsed: Duration::from_secs(30),
            ..Default::default()
        };
        assert!(p.next_wait(1, Duration::ZERO, None).is_some());
        assert!(p.next_wait(2, Duration::ZERO, None).is_some());
        assert_eq!(p.next_wait(3, Duration::ZERO, None), None);
        assert_eq!(
            p.next_wait(1, Duration::ZERO, Some(Duration::from_secs(31))),
            None
        );
        assert_eq!(
            p.next_wait(1, Duration::from_secs(29), Some(Duration::from_secs(2))),
            None
        );
        let w = p
            .next_wait(1, Duration::ZERO, Some(Duration::from_secs(7)))
            .unwrap();
        assert!(
            w >= Duration::from_secs(7) && w <= Duration::from_millis(7250),
            "{w:?}"
        );
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after(" 1.5 "),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("soon"), None);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(UNIX_EPOCH + Duration::from_secs(784_111_777))
        );
        assert_eq!(parse_seconds_suffix("30s"), Some(Duration::from_secs(30)));
        assert_eq!(
            parse_seconds_suffix("0.25s"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(parse_seconds_suffix("30"), None);
    }
}
