//! The plain data types of the graph: episodes, entities, facts, communities, and the
//! [`Timestamp`] every one of them carries.

use uuid::Uuid;

pub use crate::vocab::{GraphStatus, SourceKind, Timestamp, derived_uuid};

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
    /// [`Error::EpisodeQuarantined`](crate::Error::EpisodeQuarantined)).
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
