//! The per-graph storage seam under [`StorageClient`](super::StorageClient).

use async_trait::async_trait;
use uuid::Uuid;

use super::request::{Content, ResultType};
use super::response::{CommunityCounts, EpisodeRecord, Hit};
use crate::Result;
use crate::graph::Timestamp;
use crate::lens::Graph;
use crate::ontology::Ontology;
use crate::provenance::Writer;

/// One episode to store, fully resolved: the logical graph, the stored description
/// with its writer marker already appended, and the writer's ontology.
#[derive(Debug, Clone)]
pub struct NewEpisode {
    /// The logical graph id (`personal/<operator>`, `global`, …).
    pub graph: String,
    /// The Destination's name.
    pub destination: String,
    /// The content (its kind picks the episode kind).
    pub content: Content,
    /// The source description as stored, ending with the writer's marker.
    pub stored_description: String,
    /// The writer (also recorded by the marker).
    pub writer: Writer,
    /// The ontology to extract with.
    pub ontology: Ontology,
    /// When it happened in the world.
    pub reference_time: Timestamp,
    /// Whether the caller gave `reference_time` (`false`: it is the time of writing).
    pub reference_time_given: bool,
    /// A key that is the same when the same request is replayed (`<ingest id>#<n>` for
    /// the n-th episode an ingestion writes); `None` for writes that are never
    /// replayed. A storage may derive the episode's identity from it so that a replay
    /// stores nothing twice.
    pub replay_key: Option<String>,
}

/// A search of one graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphQuery {
    /// The query text.
    pub query: String,
    /// What to return, with its filters.
    pub result_type: ResultType,
    /// Only episodes and facts written by these Lenses (empty: any writer). For
    /// facts, only the selected Lenses' sources are kept. Applied before `limit`.
    pub lenses: Vec<String>,
    /// At most this many results.
    pub limit: usize,
}

/// What a [`Client`](super::Client) implementation stores and reads, one logical
/// graph at a time. [`StorageClient`](super::StorageClient) does the validation,
/// Destination resolution, provenance marking and fan-out; a storage only stores.
///
/// Implementations: the in-memory storage behind
/// [`InMemoryClient`](super::InMemoryClient); the engine-backed storage of the native
/// client (FalkorDB + models) maps these calls onto the graph engine.
#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Stores one episode (and, for an extracting storage, extracts it with the
    /// episode's ontology); returns its uuid.
    async fn add_episode(&self, episode: NewEpisode) -> Result<Uuid>;

    /// Searches one logical graph. Results are in retrieval order; the Lens filter is
    /// applied before the limit.
    async fn search(&self, graph: &str, query: &GraphQuery) -> Result<Vec<Hit>>;

    /// Replaces every node and relationship owned by `lens` in `graph` with
    /// `replacement` owned by `lens`, atomically: on success only the replacement is
    /// owned by `lens`; on error nothing changed. The replacement is already validated.
    async fn replace_graph(&self, graph: &str, lens: &str, replacement: &Graph) -> Result<()>;

    /// One episode.
    async fn get_episode(&self, graph: &str, uuid: Uuid) -> Result<Option<EpisodeRecord>>;

    /// Removes one episode; `false` when there was none.
    async fn remove_episode(&self, graph: &str, uuid: Uuid) -> Result<bool>;

    /// Builds (idempotently) the indices of every graph the storage holds.
    async fn build_indices(&self) -> Result<()>;

    /// Detects communities in one graph.
    async fn build_communities(&self, graph: &str) -> Result<CommunityCounts>;
}
