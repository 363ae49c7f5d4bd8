//! The storage seam under the memory API: the [`Storage`] trait, the values it takes
//! and returns, and its two implementations.
//!
//! A storage stores and reads, one logical graph at a time (several at once for a
//! search); everything above it — request validation, Destination and Lens
//! resolution, provenance marking, ingestion processes, background writes — is the
//! client's (`MemoryClient`), written once over any
//! storage. One file a job, after tantivy's `directory/`:
//!
//! * [`ids`](OperatorId) — [`OperatorId`] and [`GraphId`], each checked once when
//!   made, and the name rules every name shares (`check_name_text`).
//! * [`content`](Content) — [`Content`] and its one rule ([`validate_content`], the
//!   shared vocabulary's content check, which the engine runs too), source
//!   descriptions with their writer marker, query texts and result counts.
//! * [`records`](EpisodeRecord) — what a storage returns ([`EpisodeRecord`],
//!   [`FactRecord`], [`NodeRecord`], [`ScoredHit`]…) and takes ([`NewEpisode`],
//!   [`GraphQuery`]).
//! * [`graph`](Graph) — the whole-graph payload of a replace-graph Lens, validated in
//!   full before anything is removed.
//! * [`InMemoryStorage`] — deterministic, no extraction, no network: the storage of
//!   the test twin `InMemoryClient`.
//!
//! The port imports neither the engine nor an adapter: the words it shares with them
//! (timestamps, source kinds, the content rule, derived ids, status records) live in
//! the shared vocabulary below all three. The engine *implements* the port:
//! `NativeStorage`, the graph engine (FalkorDB and the models)
//! plus a mapping, is the storage of `NativeClient`. Both
//! implementations pass one contract suite (`tests/client/contract/`), run through
//! the client over each.

mod content;
mod graph;
mod ids;
mod memory;
pub mod provenance;
mod records;
mod status;

use async_trait::async_trait;
use uuid::Uuid;

pub use content::{
    Content, DEFAULT_MAX_RESULTS, MAX_RESULTS_LIMIT, SourceKind, validate_content,
    validate_source_description,
};
internal_use!(content::{overlap, validate_max_results, validate_query, words});
pub use graph::{Graph, GraphNode, GraphRelationship};
internal_use!(graph::{MAX_REPLACEMENT_BYTES, OWNER_PROPERTY, RESERVED_PROPERTY_PREFIX, owned_node_uuid});
pub use ids::{GraphId, MAX_NAME_BYTES, OperatorId};
internal_use!(ids::{RESERVED_PREFIXES, check_name_text, check_session_id});
pub use memory::InMemoryStorage;
internal_use!(records::check_reflection_bodies);
pub use records::{
    Artefact, CommunityCounts, EpisodeRecord, ExtractionReport, FactRecord, FactSource, GraphQuery,
    Hit, IngestCost, NewEpisode, NodeRecord, ResultType, ScoredHit, StoredEpisode,
};
pub use status::{ModelStatus, StorageStatus};

/// The one content rule every stored episode passes.
pub use crate::vocab::check_content;
/// The shared words of the port's values: instants, what a graph holds, a server's
/// versions.
pub use crate::vocab::{GraphStatus, ServerInfo, Timestamp};

use crate::Result;

/// What the memory API stores and reads. The client does the validation,
/// Destination resolution, provenance marking and fan-out; a storage only stores,
/// and is given only validated values.
///
/// Implement it to put the memory API over your own store: the client logic,
/// `MemoryClient`, works over any implementation.
#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Stores one episode (and, for an extracting storage, extracts it with the
    /// episode's ontology); returns its uuid and what storing it cost. The same replay
    /// key in the same graph by the same writer gives the same uuid and stores nothing
    /// twice.
    async fn add_episode(&self, episode: NewEpisode) -> Result<StoredEpisode>;

    /// Searches `graphs` (distinct, in the caller's order) with one query: one list
    /// of hits per graph, in that order, each in retrieval order, at most
    /// `query.limit` long, the writer filter applied before the limit. The query is
    /// prepared (embedded) once however many graphs it reads. Any failing graph
    /// fails the whole search.
    async fn search(&self, graphs: &[GraphId], query: &GraphQuery) -> Result<Vec<Vec<ScoredHit>>>;

    /// Replaces every node and relationship owned by `lens` in `graph` with
    /// `replacement` owned by `lens`, atomically: on success only the replacement is
    /// owned by `lens`; on error nothing changed. The replacement is already validated.
    async fn replace_graph(&self, graph: &GraphId, lens: &str, replacement: &Graph) -> Result<()>;

    /// One episode.
    async fn get_episode(&self, graph: &GraphId, uuid: Uuid) -> Result<Option<EpisodeRecord>>;

    /// Removes one episode; `false` when there was none.
    async fn remove_episode(&self, graph: &GraphId, uuid: Uuid) -> Result<bool>;

    /// Builds (idempotently) the indices of every graph the storage holds.
    async fn build_indices(&self) -> Result<()>;

    /// Detects communities in one graph.
    async fn build_communities(&self, graph: &GraphId) -> Result<CommunityCounts>;

    /// Extracts the episodes of `graph` that are stored but not yet extracted, each
    /// with the ontology its writer key maps to in `ontologies` (the generic one when
    /// absent). Default: nothing is ever pending (a storage that does not extract).
    async fn extract_pending(
        &self,
        graph: &GraphId,
        ontologies: &std::collections::BTreeMap<String, crate::ontology::Ontology>,
    ) -> Result<ExtractionReport> {
        let _ = (graph, ontologies);
        Ok(ExtractionReport::default())
    }

    /// The uuids of the episodes of conversation session `session` in `graph`
    /// ([`NewEpisode::session`]), oldest first; none when the graph does not exist.
    /// Default: refused (a storage that does not record sessions).
    async fn session_episodes(&self, graph: &GraphId, session: &str) -> Result<Vec<Uuid>> {
        let _ = (graph, session);
        Err(crate::Error::invalid(
            "session_id",
            "this storage does not record sessions",
        ))
    }

    /// Deletes one graph whole — episodes, facts, entities, vectors, indices — so that
    /// nothing of it can be read back, and makes the deletion durable (the native
    /// storage rewrites an embedded server's AOF, so the deleted content does not stay
    /// in its log files); `false` when there was none. Default: refused (a storage
    /// that cannot delete a graph).
    async fn purge_graph(&self, graph: &GraphId) -> Result<bool> {
        let _ = graph;
        Err(crate::Error::invalid(
            "purge",
            "this storage cannot delete a graph",
        ))
    }

    /// Makes the deletions made so far durable and unrecoverable from the storage's
    /// log files (the native storage rewrites an embedded server's AOF). Default:
    /// nothing to do.
    async fn rewrite_log(&self) -> Result<()> {
        Ok(())
    }

    /// A one-line description of the backend after a cheap round trip (for a health
    /// report); an error when it does not answer. Default: the storage's type name.
    async fn health(&self) -> Result<String> {
        Ok(std::any::type_name::<Self>().to_string())
    }

    /// The backend, its server and the models, after a cheap round trip (for a status
    /// report); an error when the backend does not answer. Default: a status naming
    /// [`health`](Self::health)'s line as the backend.
    async fn status(&self) -> Result<StorageStatus> {
        Ok(StorageStatus::new(self.health().await?))
    }

    /// What `graph` holds (episodes, those pending extraction) and whether its indices
    /// serve. Default: refused (a storage that does not count).
    async fn graph_status(&self, graph: &GraphId) -> Result<GraphStatus> {
        let _ = graph;
        Err(crate::Error::invalid(
            "graph",
            "this storage does not report a graph's status",
        ))
    }

    /// Releases what the storage holds (stops an embedded server it started). Called
    /// once by the client's `shutdown`, after background writes finished. Default:
    /// nothing to release.
    async fn shutdown(&self) -> Result<()> {
        Ok(())
    }
}
