//! The plain data types of the graph: episodes, entities, facts, communities, and the
//! [`Timestamp`] every one of them carries.

use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

use crate::{Error, Result};

/// A stable uuid derived from a namespace and parts: the first 16 bytes of SHA-256 over
/// `gralkor/<namespace>/` followed by each part's length (8 bytes, little endian) and
/// bytes, marked as an RFC 9562 version 8 uuid. The one derivation of every uuid
/// that must be the same whenever the same thing is written again (links, communities,
/// replayed episodes, replace-graph nodes); the length prefixes keep `["ab", "c"]` and
/// `["a", "bc"]` apart.
///
/// ```
/// use gralkor::graph::model::derived_uuid;
///
/// let a = derived_uuid("owned", &[b"global", b"payments"]);
/// assert_eq!(a, derived_uuid("owned", &[b"global", b"payments"]));
/// assert_ne!(a, derived_uuid("owned", &[b"globalp", b"ayments"]));
/// assert_ne!(a, derived_uuid("episode", &[b"global", b"payments"]));
/// assert_eq!(a.get_version_num(), 8);
/// ```
pub fn derived_uuid(namespace: &str, parts: &[&[u8]]) -> Uuid {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"gralkor/");
    h.update(namespace.as_bytes());
    h.update(b"/");
    for part in parts {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&h.finalize()[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

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

/// What kind of text an episode holds. Serialised as its stored name (`message`,
/// `text`, `json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// A conversation turn, `speaker: text`.
    Message,
    /// Free text.
    Text,
    /// A JSON document.
    Json,
}

impl SourceKind {
    /// The name stored in the graph: `message`, `text` or `json`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Message => "message",
            SourceKind::Text => "text",
            SourceKind::Json => "json",
        }
    }

    /// The kind named `s` (as stored by [`SourceKind::as_str`]).
    pub fn parse(s: &str) -> Option<SourceKind> {
        match s {
            "message" => Some(SourceKind::Message),
            "text" => Some(SourceKind::Text),
            "json" => Some(SourceKind::Json),
            _ => None,
        }
    }
}

/// Whether an episode's extraction has been committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EpisodeState {
    /// Stored and searchable by its text; extraction not (yet) committed.
    Pending,
    /// Extraction committed together with this marker.
    Complete,
    /// Stored and searchable by its text, but not processed again: the database
    /// server was lost while its commits were in flight (see
    /// [`Error::EpisodeQuarantined`]).
    Quarantined,
}

impl EpisodeState {
    /// The name stored in the graph: `pending`, `complete` or `quarantined`.
    pub fn as_str(self) -> &'static str {
        match self {
            EpisodeState::Pending => "pending",
            EpisodeState::Complete => "complete",
            EpisodeState::Quarantined => "quarantined",
        }
    }

    /// The state named `s` (as stored by [`EpisodeState::as_str`]).
    pub fn parse(s: &str) -> Option<EpisodeState> {
        match s {
            "pending" => Some(EpisodeState::Pending),
            "complete" => Some(EpisodeState::Complete),
            "quarantined" => Some(EpisodeState::Quarantined),
            _ => None,
        }
    }
}

/// A piece of input (`Episodic` node): what was said or written, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    /// Identity.
    pub uuid: Uuid,
    /// The text as given.
    pub content: String,
    /// What kind of text it is.
    pub source: SourceKind,
    /// Where it came from, e.g. `slack #general`.
    pub source_description: String,
    /// The reference time: when the episode happened in the world.
    pub valid_at: Timestamp,
    /// When gralkor stored it.
    pub created_at: Timestamp,
    /// Uuids of the facts (`RELATES_TO`) it produced or touched.
    pub entity_edges: Vec<Uuid>,
    /// Whether its extraction has been committed.
    pub state: EpisodeState,
    /// Who wrote it: an opaque writer key (e.g. `lens:personal-chat`), stored as the
    /// `Episodic` property `writer` and selectable by
    /// [`SearchFilters::writers`](crate::graph::search::SearchFilters::writers);
    /// `None` for an unattributed episode (and for a record stored without the
    /// property).
    pub writer: Option<String>,
    /// The conversation session it came from (an opaque id the harness chose), stored
    /// as the `Episodic` property `session` so that a session can be forgotten
    /// ([`Client::purge_session`](crate::client::Client::purge_session));
    /// `None` for an episode outside any session.
    pub session: Option<String>,
}

impl Episode {
    /// A new pending episode with a fresh uuid, created now.
    pub fn new(
        content: impl Into<String>,
        source: SourceKind,
        source_description: impl Into<String>,
        valid_at: Timestamp,
    ) -> Episode {
        Episode {
            uuid: Uuid::new_v4(),
            content: content.into(),
            source,
            source_description: source_description.into(),
            valid_at,
            created_at: Timestamp::now(),
            entity_edges: Vec::new(),
            state: EpisodeState::Pending,
            writer: None,
            session: None,
        }
    }

    /// The same episode written by `writer` (see [`Episode::writer`](Episode#structfield.writer)).
    ///
    /// ```
    /// use gralkor::graph::{Episode, SourceKind, Timestamp};
    ///
    /// let ep = Episode::new("Alice: hi", SourceKind::Message, "chat", Timestamp::now())
    ///     .writer("lens:personal-chat");
    /// assert_eq!(ep.writer.as_deref(), Some("lens:personal-chat"));
    /// ```
    pub fn writer(mut self, writer: impl Into<String>) -> Episode {
        self.writer = Some(writer.into());
        self
    }

    /// The same episode from session `session` (see [`Episode::session`](Episode#structfield.session)).
    ///
    /// ```
    /// use gralkor::graph::{Episode, SourceKind, Timestamp};
    ///
    /// let ep = Episode::new("Alice: hi", SourceKind::Message, "chat", Timestamp::now())
    ///     .session("session-1");
    /// assert_eq!(ep.session.as_deref(), Some("session-1"));
    /// ```
    pub fn session(mut self, session: impl Into<String>) -> Episode {
        self.session = Some(session.into());
        self
    }
}

/// A thing the graph knows about (`Entity` node, plus ontology labels).
#[derive(Debug, Clone, PartialEq)]
pub struct EntityNode {
    /// Identity.
    pub uuid: Uuid,
    /// The name, e.g. `Alice`.
    pub name: String,
    /// Ontology labels beyond `Entity` (identifiers). Read back sorted.
    pub labels: Vec<String>,
    /// A short description gathered from the episodes that mention it.
    pub summary: String,
    /// Ontology fields and their values.
    pub attributes: serde_json::Map<String, serde_json::Value>,
    /// Embedding of the name, when computed.
    pub name_embedding: Option<Vec<f32>>,
    /// When gralkor created it.
    pub created_at: Timestamp,
}

impl EntityNode {
    /// A new entity with a fresh uuid, no labels, summary, attributes or embedding,
    /// created now.
    pub fn new(name: impl Into<String>) -> EntityNode {
        EntityNode {
            uuid: Uuid::new_v4(),
            name: name.into(),
            labels: Vec::new(),
            summary: String::new(),
            attributes: serde_json::Map::new(),
            name_embedding: None,
            created_at: Timestamp::now(),
        }
    }
}

/// A fact (`RELATES_TO` relationship) between two entities, with its time span.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityEdge {
    /// Identity.
    pub uuid: Uuid,
    /// The subject entity.
    pub source_uuid: Uuid,
    /// The object entity.
    pub target_uuid: Uuid,
    /// The relation type, e.g. `WORKS_AT`.
    pub name: String,
    /// The fact as a sentence, e.g. `Alice works at Acme`.
    pub fact: String,
    /// Embedding of the fact text, when computed.
    pub fact_embedding: Option<Vec<f32>>,
    /// Uuids of the episodes that support it.
    pub episodes: Vec<Uuid>,
    /// When it became true in the world, if known.
    pub valid_at: Option<Timestamp>,
    /// When it stopped being true in the world, if known.
    pub invalid_at: Option<Timestamp>,
    /// When gralkor retired it (superseded by a contradicting fact).
    pub expired_at: Option<Timestamp>,
    /// When gralkor created it.
    pub created_at: Timestamp,
    /// Ontology fields of the relation type and their values.
    pub attributes: serde_json::Map<String, serde_json::Value>,
}

impl EntityEdge {
    /// A new fact with a fresh uuid, no embedding, episodes, times or attributes,
    /// created now.
    pub fn new(
        source_uuid: Uuid,
        target_uuid: Uuid,
        name: impl Into<String>,
        fact: impl Into<String>,
    ) -> EntityEdge {
        EntityEdge {
            uuid: Uuid::new_v4(),
            source_uuid,
            target_uuid,
            name: name.into(),
            fact: fact.into(),
            fact_embedding: None,
            episodes: Vec::new(),
            valid_at: None,
            invalid_at: None,
            expired_at: None,
            created_at: Timestamp::now(),
            attributes: serde_json::Map::new(),
        }
    }
}

/// A cluster of related entities (`Community` node, members via `HAS_MEMBER`).
#[derive(Debug, Clone, PartialEq)]
pub struct Community {
    /// Identity.
    pub uuid: Uuid,
    /// A short name for the cluster.
    pub name: String,
    /// What the members have in common.
    pub summary: String,
    /// Embedding of the name, when computed.
    pub name_embedding: Option<Vec<f32>>,
    /// When gralkor created it.
    pub created_at: Timestamp,
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

    #[test]
    fn source_kinds_and_states_round_trip_their_names() {
        for k in [SourceKind::Message, SourceKind::Text, SourceKind::Json] {
            assert_eq!(SourceKind::parse(k.as_str()), Some(k));
        }
        for s in [EpisodeState::Pending, EpisodeState::Complete] {
            assert_eq!(EpisodeState::parse(s.as_str()), Some(s));
        }
    }
}

/// What a graph holds and whether its indices serve
/// ([`Engine::graph_status`](crate::graph::Engine::graph_status)).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct GraphStatus {
    /// Whether the graph exists (its first write creates it); when not, the rest is
    /// empty.
    pub exists: bool,
    /// Episodes stored.
    pub episodes: u64,
    /// Episodes stored but not extracted yet: searchable by their text, and finished
    /// by a later write's extraction or [`Engine::resume_pending`](crate::graph::Engine::resume_pending).
    pub pending: u64,
    /// Indices the engine keeps that the graph lacks (`range Episodic.uuid`, …).
    pub indices_missing: Vec<String>,
    /// Indices still being built (not `OPERATIONAL`); searches fall back to scans.
    pub indices_building: Vec<String>,
}

impl GraphStatus {
    /// Whether every index the engine keeps serves (trivially so for a graph that
    /// does not exist yet).
    pub fn indices_operational(&self) -> bool {
        self.indices_missing.is_empty() && self.indices_building.is_empty()
    }
}
