//! Result values of the [`Client`](super::Client) operations.

use serde_json::Value;
use uuid::Uuid;

use super::request::{Content, SourceKind};
use crate::graph::Timestamp;
use crate::provenance::{self, Writer};

/// One search result: what was found, and in which Destination.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResult {
    /// The Destination's name (`personal`, not `personal/<operator>`).
    pub destination: String,
    /// What was found.
    pub hit: Hit,
}

/// What a search found; the variant follows the request's result type.
#[derive(Debug, Clone, PartialEq)]
pub enum Hit {
    /// An episode.
    Episode(EpisodeRecord),
    /// A fact with its sources.
    Fact(FactRecord),
    /// An entity.
    Node(NodeRecord),
    /// A Reflection artefact.
    Artefact(Artefact),
}

impl Hit {
    /// The episode, if this is one.
    pub fn as_episode(&self) -> Option<&EpisodeRecord> {
        match self {
            Hit::Episode(e) => Some(e),
            _ => None,
        }
    }

    /// The fact, if this is one.
    pub fn as_fact(&self) -> Option<&FactRecord> {
        match self {
            Hit::Fact(f) => Some(f),
            _ => None,
        }
    }

    /// The node, if this is one.
    pub fn as_node(&self) -> Option<&NodeRecord> {
        match self {
            Hit::Node(n) => Some(n),
            _ => None,
        }
    }
}

/// A stored episode as returned to callers.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeRecord {
    /// Identity.
    pub uuid: Uuid,
    /// The body: text as given, or a structured record JSON-encoded.
    pub content: String,
    /// Where it came from.
    pub source_kind: SourceKind,
    /// The caller's source description, with gralkor's writer marker removed (for a
    /// Reflection: `reflection:<name>`).
    pub source_description: String,
    /// Who wrote it; `None` for an episode without a writer marker.
    pub writer: Option<Writer>,
    /// When it happened in the world.
    pub valid_at: Timestamp,
    /// When it was stored.
    pub created_at: Timestamp,
}

impl EpisodeRecord {
    /// A record from what storage holds: the writer and public description are read
    /// from the stored description ([`provenance::parse`]).
    pub fn from_stored(
        uuid: Uuid,
        content: impl Into<String>,
        source_kind: SourceKind,
        stored_description: &str,
        valid_at: Timestamp,
        created_at: Timestamp,
    ) -> EpisodeRecord {
        let p = provenance::parse(stored_description);
        EpisodeRecord {
            uuid,
            content: content.into(),
            source_kind,
            source_description: p.description,
            writer: p.writer,
            valid_at,
            created_at,
        }
    }
}

/// One episode a fact came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactSource {
    /// The episode's uuid.
    pub episode: Uuid,
    /// Its source kind, when known.
    pub source_kind: Option<SourceKind>,
    /// Its public source description (marker removed).
    pub source_description: String,
    /// Its writer, when recorded.
    pub writer: Option<Writer>,
}

impl FactSource {
    /// A source from the episode's stored description.
    pub fn from_stored(
        episode: Uuid,
        source_kind: Option<SourceKind>,
        stored_description: &str,
    ) -> FactSource {
        let p = provenance::parse(stored_description);
        FactSource {
            episode,
            source_kind,
            source_description: p.description,
            writer: p.writer,
        }
    }
}

/// A fact, its times and its sources. Missing times are `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct FactRecord {
    /// Identity.
    pub uuid: Uuid,
    /// The fact as a sentence.
    pub fact: String,
    /// When gralkor learned it.
    pub created_at: Option<Timestamp>,
    /// When it became true.
    pub valid_at: Option<Timestamp>,
    /// When it stopped being true.
    pub invalid_at: Option<Timestamp>,
    /// When gralkor retired it.
    pub expired_at: Option<Timestamp>,
    /// The episodes it came from.
    pub sources: Vec<FactSource>,
}

/// An entity.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRecord {
    /// Identity.
    pub uuid: Uuid,
    /// Name.
    pub name: String,
    /// Labels besides `Entity` (ontology types).
    pub labels: Vec<String>,
    /// Summary.
    pub summary: String,
    /// Attributes (a JSON object).
    pub attributes: Value,
}

/// A Reflection artefact: exactly an id and a payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Artefact {
    /// Stable id.
    pub id: String,
    /// The structured payload (string keys).
    pub payload: Value,
}

/// One episode an ingestion wrote, in write order.
#[derive(Debug, Clone, PartialEq)]
pub struct IngestedRepresentation {
    /// The ingestion request's id.
    pub id: String,
    /// The Lens.
    pub lens: String,
    /// The content written.
    pub content: Content,
    /// The stored episode's uuid.
    pub episode: Uuid,
}

/// What community detection produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CommunityCounts {
    /// Communities built.
    pub communities: usize,
    /// Membership edges built.
    pub edges: usize,
}
