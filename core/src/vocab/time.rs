//! Time: [`Timestamp`], the instant every stored thing carries, and the one rule of a
//! fact being true at an instant ([`times_current`]).
//!
//! Every instant is whole **microseconds since the Unix epoch, UTC**, stored as a
//! plain integer property; text in and out is RFC 3339 in UTC.

use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

use crate::{Error, Result};

/// An instant in UTC, as whole microseconds since the Unix epoch (1970-01-01T00:00:00Z).
///
/// Stored in FalkorDB as a plain integer, so Cypher comparisons (`f.valid_at <= $t`)
/// are integer comparisons: exact, ordered and free of time zones. Text is RFC 3339,
/// always written in UTC with six fractional digits; years 0000–9999 parse, instants
/// outside them still format (with more digits or a sign) but do not parse back.
///
/// ```
/// use gralkor::graph::Timestamp;
///
/// let t: Timestamp = "2024-02-29T23:59:59.5+01:00".parse().unwrap();
/// assert_eq!(t.to_rfc3339(), "2024-02-29T22:59:59.500000Z");
/// assert_eq!(Timestamp::from_unix_micros(0).to_string(), "1970-01-01T00:00:00.000000Z");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub i64);

const MICROS_PER_SEC: i64 = 1_000_000;
const SECS_PER_DAY: i64 = 86_400;

impl Timestamp {
    /// The current time, truncated to the microsecond.
    pub fn now() -> Timestamp {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
    }

    /// The instant `micros` microseconds after (or, if negative, before) the epoch.
    pub fn from_unix_micros(micros: i64) -> Timestamp {
        Timestamp(micros)
    }

    /// Microseconds since the epoch.
    pub fn as_unix_micros(self) -> i64 {
        self.0
    }

    /// RFC 3339 text in UTC with six fractional digits, e.g.
    /// `2024-05-01T12:00:00.000000Z`.
    pub fn to_rfc3339(self) -> String {
        self.to_string()
    }

    /// The form fact lines show: seconds precision, UTC written `+0`
    /// (`2024-05-01T12:00:00+0`).
    ///
    /// ```
    /// use gralkor::storage::Timestamp;
    ///
    /// let at: Timestamp = "2024-05-01T12:00:00.250Z".parse().unwrap();
    /// assert_eq!(at.to_fact_text(), "2024-05-01T12:00:00+0");
    /// ```
    pub fn to_fact_text(self) -> String {
        let text = self.to_rfc3339();
        let without_fraction = match (text.find('.'), text.rfind(['Z', '+', '-'])) {
            (Some(dot), Some(zone)) if zone > dot => format!("{}{}", &text[..dot], &text[zone..]),
            _ => text,
        };
        match without_fraction.strip_suffix('Z') {
            Some(base) => format!("{base}+0"),
            None => without_fraction,
        }
    }

    /// Parses RFC 3339 (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`); `t`, `z` and a space
    /// separator are accepted too. Digits after the sixth fractional one are dropped.
    pub fn parse_rfc3339(s: &str) -> Result<Timestamp> {
        parse(s.as_bytes()).ok_or_else(|| {
            Error::invalid(
                "timestamp",
                "must be RFC 3339, e.g. 2024-05-01T12:00:00Z or 2024-05-01T14:00:00.5+02:00",
            )
        })
    }
}

/// Serialised as RFC 3339 text in UTC with microseconds (`2026-03-01T09:30:00.000000Z`);
/// any RFC 3339 offset is accepted when read.
///
/// ```
/// use gralkor::graph::Timestamp;
///
/// let t: Timestamp = "2026-03-01T10:30:00+01:00".parse()?;
/// let text = serde_json::to_string(&t).unwrap();
/// assert_eq!(text, "\"2026-03-01T09:30:00.000000Z\"");
/// assert_eq!(serde_json::from_str::<Timestamp>(&text).unwrap(), t);
/// assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
/// # Ok::<(), gralkor::Error>(())
/// ```
impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Timestamp, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.div_euclid(MICROS_PER_SEC);
        let micros = self.0.rem_euclid(MICROS_PER_SEC);
        let days = secs.div_euclid(SECS_PER_DAY);
        let sod = secs.rem_euclid(SECS_PER_DAY);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
            sod / 3600,
            sod / 60 % 60,
            sod % 60
        )
    }
}

impl FromStr for Timestamp {
    type Err = Error;
    fn from_str(s: &str) -> Result<Timestamp> {
        Timestamp::parse_rfc3339(s)
    }
}

/// Days since 1970-01-01 of the proleptic Gregorian date `y-m-d`.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    // Years start in March so that the leap day is the last day of a year.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400; // [0, 399]
    let mp = if m > 2 { m - 3 } else { m + 9 }; // March = 0
    let doy = (153 * mp + 2) / 5 + d - 1; // [0, 365]
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // [0, 146096]
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of day `z` since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn digits(b: &[u8]) -> Option<i64> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0, |n, c| n * 10 + i64::from(c - b'0')))
}

fn parse(b: &[u8]) -> Option<Timestamp> {
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d) = (digits(&b[0..4])?, digits(&b[5..7])?, digits(&b[8..10])?);
    let (h, mi, s) = (
        digits(&b[11..13])?,
        digits(&b[14..16])?,
        digits(&b[17..19])?,
    );
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 {
        return None;
    }
    // A leap second (`:60`) is read as `:59`.
    if s > 60 {
        return None;
    }
    let mut rest = &b[19..];
    let mut micros = 0;
    if rest.first() == Some(&b'.') {
        let n = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        let frac = &rest[1..=n];
        for i in 0..6 {
            micros = micros * 10 + frac.get(i).map_or(0, |c| i64::from(c - b'0'));
        }
        rest = &rest[1 + n..];
    }
    let offset_secs = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), oh @ .., b':', om1, om2] if oh.len() == 2 => {
            let (oh, om) = (digits(oh)?, digits(&[*om1, *om2])?);
            if oh > 23 || om > 59 {
                return None;
            }
            let off = oh * 3600 + om * 60;
            if *sign == b'-' { -off } else { off }
        }
        _ => return None,
    };
    let secs =
        days_from_civil(y, mo, d) * SECS_PER_DAY + h * 3600 + mi * 60 + s.min(59) - offset_secs;
    Some(Timestamp(secs * MICROS_PER_SEC + micros))
}

/// The time fields of a fact, with its identity: all that the temporal rules read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FactTimes {
    /// The fact's uuid.
    pub uuid: Uuid,
    /// When it became true in the world, if known.
    pub valid_at: Option<Timestamp>,
    /// When it stopped being true in the world, if known.
    pub invalid_at: Option<Timestamp>,
    /// When gralkor retired it, if it did.
    pub expired_at: Option<Timestamp>,
}

/// Whether a fact is true at `at` (and not retired by then): it became true at or
/// before `at` (or its start is unknown), and neither ended nor was retired at or
/// before `at`. The one rule of "current" that the engine's searches and the
/// storages share.
pub fn times_current(fact: &FactTimes, at: Timestamp) -> bool {
    fact.valid_at.is_none_or(|v| v <= at)
        && fact.invalid_at.is_none_or(|i| at < i)
        && fact.expired_at.is_none_or(|e| at < e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> i64 {
        s.parse::<Timestamp>().unwrap().0
    }

    #[test]
    fn rfc3339_epoch_and_known_instants() {
        assert_eq!(ts("1970-01-01T00:00:00Z"), 0);
        assert_eq!(ts("2001-09-09T01:46:40Z"), 1_000_000_000 * MICROS_PER_SEC);
        assert_eq!(
            ts("2024-05-01T14:00:00.25+02:00"),
            ts("2024-05-01T12:00:00.25Z")
        );
        assert_eq!(ts("2024-05-01 12:00:00-00:30"), ts("2024-05-01T12:30:00Z"));
        assert_eq!(ts("2024-05-01T12:00:00.1234567Z") % MICROS_PER_SEC, 123_456);
    }

    #[test]
    fn rfc3339_round_trips_before_1970() {
        for s in [
            "1969-12-31T23:59:59.999999Z",
            "1900-03-01T00:00:00.000000Z",
            "0001-01-01T00:00:00.000000Z",
            "1583-10-15T12:34:56.000001Z",
        ] {
            let t: Timestamp = s.parse().unwrap();
            assert!(t.0 < 0, "{s}");
            assert_eq!(t.to_rfc3339(), s);
        }
        assert_eq!(ts("1969-12-31T23:59:59.999999Z"), -1);
    }

    #[test]
    fn rfc3339_handles_leap_years() {
        for s in [
            "2000-02-29T00:00:00.000000Z",
            "2024-02-29T23:59:59.999999Z",
            "1600-02-29T06:00:00.000000Z",
        ] {
            assert_eq!(s.parse::<Timestamp>().unwrap().to_rfc3339(), s);
        }
        assert_eq!(
            ts("2024-03-01T00:00:00Z") - ts("2024-02-28T00:00:00Z"),
            2 * SECS_PER_DAY * MICROS_PER_SEC
        );
        assert_eq!(
            ts("1900-03-01T00:00:00Z") - ts("1900-02-28T00:00:00Z"),
            SECS_PER_DAY * MICROS_PER_SEC
        );
        for bad in ["1900-02-29T00:00:00Z", "2023-02-29T00:00:00Z"] {
            assert!(bad.parse::<Timestamp>().is_err(), "{bad}");
        }
    }

    #[test]
    fn rfc3339_round_trips_every_day_across_four_centuries() {
        let mut day = days_from_civil(1800, 1, 1);
        let end = days_from_civil(2201, 1, 1);
        while day < end {
            let t = Timestamp(day * SECS_PER_DAY * MICROS_PER_SEC + 43_200_000_123);
            assert_eq!(t.to_rfc3339().parse::<Timestamp>().unwrap(), t);
            day += 1;
        }
    }

    #[test]
    fn malformed_rfc3339_is_rejected() {
        for bad in [
            "",
            "2024-05-01",
            "2024-05-01T12:00:00",
            "2024-13-01T00:00:00Z",
            "2024-04-31T00:00:00Z",
            "2024-05-01T24:00:00Z",
            "2024-05-01T12:00:00.Z",
            "2024-05-01T12:00:00+0200",
            "2024-05-01T12:00:00+02:00x",
            "2024-05-01X12:00:00Z",
            "+024-05-01T12:00:00Z",
        ] {
            let err = bad.parse::<Timestamp>().unwrap_err();
            assert!(
                err.to_string().contains("`timestamp` must be RFC 3339"),
                "{bad}"
            );
        }
    }
}
