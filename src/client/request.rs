//! Request values of the [`Client`](super::Client) operations.

use std::fmt;

use serde_json::Value;
use uuid::Uuid;

use crate::destination::{GLOBAL, PERSONAL};
use crate::graph::Timestamp;
use crate::lens::Graph;

/// Where a piece of content came from. It says nothing about how credible it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// Speaker-attributed text (`Alice: …`), stored as a message episode.
    Conversation,
    /// Free text, stored as a text episode.
    Document,
    /// A JSON object or array, stored JSON-encoded as a JSON episode.
    StructuredRecord,
}

impl SourceKind {
    /// `conversation`, `document` or `structured_record`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Conversation => "conversation",
            SourceKind::Document => "document",
            SourceKind::StructuredRecord => "structured_record",
        }
    }

    /// The engine's episode kind for this source kind.
    pub fn episode_kind(self) -> crate::graph::SourceKind {
        match self {
            SourceKind::Conversation => crate::graph::SourceKind::Message,
            SourceKind::Document => crate::graph::SourceKind::Text,
            SourceKind::StructuredRecord => crate::graph::SourceKind::Json,
        }
    }

    /// The source kind of an engine episode kind.
    pub fn from_episode_kind(kind: crate::graph::SourceKind) -> SourceKind {
        match kind {
            crate::graph::SourceKind::Message => SourceKind::Conversation,
            crate::graph::SourceKind::Text => SourceKind::Document,
            crate::graph::SourceKind::Json => SourceKind::StructuredRecord,
        }
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Content to remember, with its source kind: text for a conversation or a
/// document, a JSON object or array for a structured record.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// Speaker-attributed text.
    Conversation(String),
    /// Free text.
    Document(String),
    /// A JSON object or array.
    StructuredRecord(Value),
}

impl Content {
    /// Conversation text.
    pub fn conversation(text: impl Into<String>) -> Content {
        Content::Conversation(text.into())
    }

    /// Document text.
    pub fn document(text: impl Into<String>) -> Content {
        Content::Document(text.into())
    }

    /// A structured record (must be a JSON object or array).
    pub fn structured(record: Value) -> Content {
        Content::StructuredRecord(record)
    }

    /// The source kind.
    pub fn kind(&self) -> SourceKind {
        match self {
            Content::Conversation(_) => SourceKind::Conversation,
            Content::Document(_) => SourceKind::Document,
            Content::StructuredRecord(_) => SourceKind::StructuredRecord,
        }
    }

    /// The text of a conversation or document.
    pub fn text(&self) -> Option<&str> {
        match self {
            Content::Conversation(t) | Content::Document(t) => Some(t),
            Content::StructuredRecord(_) => None,
        }
    }

    /// The episode body: the text as given, or the record JSON-encoded.
    pub fn encoded(&self) -> String {
        match self {
            Content::Conversation(t) | Content::Document(t) => t.clone(),
            Content::StructuredRecord(v) => v.to_string(),
        }
    }
}

/// Content sent through an appending Lens.
///
/// `id` is the caller's replay-stable id for this ingestion (it does not deduplicate
/// the episode write). Validation happens before the Lens runs: an invalid request
/// writes nothing.
///
/// ```
/// use gralkor::client::{Content, Ingest};
///
/// let req = Ingest::new("planning-2026-08-28", "operator-42", "decisions",
///                       Content::conversation("Ada: We chose Friday."))
///     .source_description("release planning");
/// assert_eq!(req.content.kind().as_str(), "conversation");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Ingest {
    /// Replay-stable caller id; non-blank, no NUL.
    pub id: String,
    /// The operator; non-blank, no NUL, at most 256 bytes, not a private graph name.
    pub operator_id: String,
    /// The registered appending Lens.
    pub lens: String,
    /// What to remember.
    pub content: Content,
    /// Where it came from, in the caller's words (may be empty).
    pub source_description: String,
    /// When it happened in the world; the time of writing when `None`.
    pub reference_time: Option<Timestamp>,
}

impl Ingest {
    /// A request with an empty source description and no reference time.
    pub fn new(
        id: impl Into<String>,
        operator_id: impl Into<String>,
        lens: impl Into<String>,
        content: Content,
    ) -> Ingest {
        Ingest {
            id: id.into(),
            operator_id: operator_id.into(),
            lens: lens.into(),
            content,
            source_description: String::new(),
            reference_time: None,
        }
    }

    /// Sets the source description.
    pub fn source_description(mut self, description: impl Into<String>) -> Ingest {
        self.source_description = description.into();
        self
    }

    /// Sets the reference time.
    pub fn reference_time(mut self, at: Timestamp) -> Ingest {
        self.reference_time = Some(at);
        self
    }
}

/// A whole-graph replacement through a replace-graph Lens.
#[derive(Debug, Clone, PartialEq)]
pub struct Replace {
    /// The operator; non-blank.
    pub operator_id: String,
    /// The registered replace-graph Lens.
    pub lens: String,
    /// The Lens's complete new graph.
    pub graph: Graph,
}

impl Replace {
    /// A replacement.
    pub fn new(operator_id: impl Into<String>, lens: impl Into<String>, graph: Graph) -> Replace {
        Replace {
            operator_id: operator_id.into(),
            lens: lens.into(),
            graph,
        }
    }
}

/// The default number of results per Destination.
pub const DEFAULT_MAX_RESULTS: usize = 20;

/// The largest `max_results` accepted: as many results per Destination as the engine's
/// search returns ([`MAX_SEARCH_LIMIT`](crate::graph::search::MAX_SEARCH_LIMIT)), so no
/// client promises more than the native one can deliver.
pub const MAX_RESULTS_LIMIT: usize = crate::graph::search::MAX_SEARCH_LIMIT;

/// What a search returns, with the filters that belong to each kind.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ResultType {
    /// Episodes (the default).
    #[default]
    Episodes,
    /// Facts with their sources; optionally only of these relationship types.
    Facts {
        /// Relationship types to keep (empty: all).
        edge_types: Vec<String>,
    },
    /// Entities; optionally only with these ontology labels. No Lens selector.
    Nodes {
        /// Entity labels to keep (empty: all).
        entity_types: Vec<String>,
    },
    /// Reflection artefacts; optionally one exact id. No Lens selector.
    Artefacts {
        /// One artefact id to look up.
        artefact_id: Option<String>,
    },
}

impl ResultType {
    /// `episodes`, `facts`, `nodes` or `artefacts`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ResultType::Episodes => "episodes",
            ResultType::Facts { .. } => "facts",
            ResultType::Nodes { .. } => "nodes",
            ResultType::Artefacts { .. } => "artefacts",
        }
    }
}

/// A search over Destinations.
///
/// * No selectors: every accessible Destination (the operator's own `personal` graph
///   and every shared one), every writer.
/// * `destinations`: only these graphs (names OR together).
/// * `lenses`: only episodes and facts written by these Lenses (names OR together),
///   filtered **before** the limit; both selectors must match when both are given. A
///   Lens selector never adds its Destination, and is an error with node or artefact
///   results.
/// * `max_results` (default 20, 1–[`MAX_RESULTS_LIMIT`] = 200) applies per Destination.
///
/// ```
/// use gralkor::client::{ResultType, Search};
///
/// let s = Search::new("operator-42", "When do we release?")
///     .destinations(["personal", "global"])
///     .lenses(["decisions"])
///     .facts()
///     .max_results(5);
/// assert_eq!(s.result_type, ResultType::Facts { edge_types: vec![] });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    /// The operator whose `personal` graph is accessible; non-blank.
    pub operator_id: String,
    /// The query text; non-blank except for an artefact lookup by id; no NUL.
    pub query: String,
    /// Destination selector (empty: every accessible Destination).
    pub destinations: Vec<String>,
    /// Lens selector (empty: every writer).
    pub lenses: Vec<String>,
    /// What to return.
    pub result_type: ResultType,
    /// Results per Destination.
    pub max_results: usize,
}

impl Search {
    /// An episode search of every accessible Destination, 20 results each.
    pub fn new(operator_id: impl Into<String>, query: impl Into<String>) -> Search {
        Search {
            operator_id: operator_id.into(),
            query: query.into(),
            destinations: Vec::new(),
            lenses: Vec::new(),
            result_type: ResultType::Episodes,
            max_results: DEFAULT_MAX_RESULTS,
        }
    }

    /// Selects Destinations.
    pub fn destinations<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.destinations = names.into_iter().map(Into::into).collect();
        self
    }

    /// Selects Lenses.
    pub fn lenses<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.lenses = names.into_iter().map(Into::into).collect();
        self
    }

    /// Returns facts.
    pub fn facts(mut self) -> Self {
        self.result_type = ResultType::Facts {
            edge_types: Vec::new(),
        };
        self
    }

    /// Returns nodes with these labels (none: any).
    pub fn nodes<S: Into<String>>(mut self, entity_types: impl IntoIterator<Item = S>) -> Self {
        self.result_type = ResultType::Nodes {
            entity_types: entity_types.into_iter().map(Into::into).collect(),
        };
        self
    }

    /// Returns artefacts (optionally one by id).
    pub fn artefacts(mut self, artefact_id: Option<String>) -> Self {
        self.result_type = ResultType::Artefacts { artefact_id };
        self
    }

    /// Sets any result type.
    pub fn result_type(mut self, result_type: ResultType) -> Self {
        self.result_type = result_type;
        self
    }

    /// Sets the per-Destination limit.
    pub fn max_results(mut self, n: usize) -> Self {
        self.max_results = n;
        self
    }
}

/// Where a `memory_add` goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A direct write to a registered Destination, without Lens authorship.
    Direct(String),
    /// Through a registered appending Lens.
    Lens(String),
}

impl Default for Route {
    /// Direct to `personal`.
    fn default() -> Self {
        Route::Direct(PERSONAL.to_string())
    }
}

/// The default source description of `memory_add`.
pub const DEFAULT_MEMORY_ADD_DESCRIPTION: &str = "manual";

/// A fire-and-forget write: validated at once, written in the background.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryAdd {
    /// The operator; non-blank.
    pub operator_id: String,
    /// What to remember.
    pub content: Content,
    /// Where it came from (default `manual`).
    pub source_description: String,
    /// Direct to a Destination (default `personal`) or through a Lens.
    pub route: Route,
}

impl MemoryAdd {
    /// A direct write to the operator's `personal` graph, described as `manual`.
    pub fn new(operator_id: impl Into<String>, content: Content) -> MemoryAdd {
        MemoryAdd {
            operator_id: operator_id.into(),
            content,
            source_description: DEFAULT_MEMORY_ADD_DESCRIPTION.to_string(),
            route: Route::default(),
        }
    }

    /// Sets the source description.
    pub fn source_description(mut self, description: impl Into<String>) -> Self {
        self.source_description = description.into();
        self
    }

    /// Writes directly to `destination`.
    pub fn to_destination(mut self, destination: impl Into<String>) -> Self {
        self.route = Route::Direct(destination.into());
        self
    }

    /// Writes through `lens`.
    pub fn through_lens(mut self, lens: impl Into<String>) -> Self {
        self.route = Route::Lens(lens.into());
        self
    }
}

/// One episode, addressed by operator, Destination and uuid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpisodeRef {
    /// The operator; non-blank.
    pub operator_id: String,
    /// The registered Destination holding it.
    pub destination: String,
    /// The episode's uuid.
    pub uuid: Uuid,
}

impl EpisodeRef {
    /// An episode reference.
    pub fn new(operator_id: impl Into<String>, destination: impl Into<String>, uuid: Uuid) -> Self {
        EpisodeRef {
            operator_id: operator_id.into(),
            destination: destination.into(),
            uuid,
        }
    }
}

/// Community detection on one Destination's graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildCommunities {
    /// The operator; non-blank.
    pub operator_id: String,
    /// The registered Destination (default `personal`).
    pub destination: String,
}

impl BuildCommunities {
    /// Community detection on the operator's `personal` graph.
    pub fn new(operator_id: impl Into<String>) -> Self {
        BuildCommunities {
            operator_id: operator_id.into(),
            destination: PERSONAL.to_string(),
        }
    }

    /// On `global` instead.
    pub fn global(operator_id: impl Into<String>) -> Self {
        BuildCommunities {
            operator_id: operator_id.into(),
            destination: GLOBAL.to_string(),
        }
    }

    /// On another Destination.
    pub fn destination(mut self, destination: impl Into<String>) -> Self {
        self.destination = destination.into();
        self
    }
}
