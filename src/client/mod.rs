//! The memory API: the [`Client`] trait, its requests, and the client logic written
//! once over any [`Storage`](crate::storage::Storage).
//!
//! * Requests: [`Ingest`] (through an appending Lens; it lives with the Lenses),
//!   [`Replace`] (a replace-graph Lens's whole graph), [`Search`] (Destinations ×
//!   Lenses, with a [`ResultType`]), [`MemoryAdd`] (fire-and-forget), [`EpisodeRef`],
//!   [`BuildCommunities`]. Every request and result is `Serialize + Deserialize`.
//! * Results: [`SearchResult`] names its Destination and carries a relevance score
//!   and a [`Hit`]: an [`EpisodeRecord`] or [`FactRecord`] with its writer
//!   ([`Writer`](crate::provenance::Writer)), a [`NodeRecord`] or an [`Artefact`].
//! * Validation: [`validate_ingest`], [`validate_replace`], [`validate_search`],
//!   [`validate_memory_add`], [`validate_episode_ref`], [`validate_build_communities`]
//!   check a request against one runtime [`Snapshot`](crate::runtime::Snapshot)
//!   before anything is stored, once, and name the field and rule in an
//!   [`Error::InvalidInput`](crate::Error::InvalidInput). Values that carry their own
//!   rule are checked when they are made ([`OperatorId`], [`GraphId`]).
//! * One implementation: [`MemoryClient`] is the client logic over a storage;
//!   [`NativeClient`] is it over the [native storage](crate::NativeStorage)
//!   (FalkorDB and the engine), [`InMemoryClient`] over the
//!   [in-memory storage](crate::storage::InMemoryStorage), plus the twin's recording
//!   and canned responses, which hook in after validation.
//!
//! Both clients are checked by one contract suite (`tests/client/contract/`).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
//! use gralkor::client::{Client, Content, Hit, InMemoryClient, Ingest, OperatorId, Search};
//! use gralkor::provenance::Writer;
//!
//! let client = InMemoryClient::new();
//! let op = OperatorId::new("operator-42")?;
//! client.ingest(&Ingest::new("turn-1", &op, "personal-chat",
//!     Content::conversation("Ada: We release on Fridays."))
//!     .source_description("chat")).await?;
//!
//! let results = client.search(&Search::new(&op, "When do we release?")).await?;
//! let Hit::Episode(episode) = &results[0].hit else { unreachable!() };
//! assert_eq!(results[0].destination, "personal");
//! assert!(results[0].score > 0.0);
//! assert_eq!(episode.writer, Some(Writer::Lens("personal-chat".into())));
//! assert_eq!(episode.source_description, "chat");
//! # Ok(()) }
//! ```

mod authorize;
pub(crate) use memory::lens_graph;
mod drain;
mod forget;
mod in_memory;
mod memory;
mod native;
mod reflect;
mod request;
pub(crate) mod validate;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use drain::{Drain, Held};
pub use forget::{
    ClearDestination, DestinationStatus, PurgeOperator, PurgeReport, PurgeSession,
    SessionPurgeReport, Status, StatusRequest,
};
pub use in_memory::{Call, Canned, InMemoryClient};
pub use memory::{BackgroundFailures, MemoryClient};
pub use native::NativeClient;
pub use reflect::ReflectOptions;
pub use request::{
    BuildCommunities, DEFAULT_MEMORY_ADD_DESCRIPTION, DestinationExtraction, EpisodeRef,
    ExtractPending, MemoryAdd, Replace, Route, Search,
};
pub use validate::{
    MemoryAddPlan, SearchPlan, Target, validate_build_communities, validate_episode_ref,
    validate_extract_pending, validate_ingest, validate_memory_add, validate_replace,
    validate_search,
};

/// The values the requests and results are made of, re-exported from the layers that
/// own them so a user of the memory API needs only this module.
pub use crate::lens::{Ingest, IngestedRepresentation};
pub use crate::storage::{
    Artefact, CommunityCounts, Content, DEFAULT_MAX_RESULTS, EpisodeRecord, ExtractionReport,
    FactRecord, FactSource, GraphId, Hit, IngestCost, MAX_RESULTS_LIMIT, NodeRecord, OperatorId,
    ResultType, SourceKind,
};

use crate::Result;
use crate::runtime::Runtime;

/// One search result: the Destination it came from, its relevance (higher is more
/// relevant; comparable within one Destination of one search) and the hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SearchResult {
    /// The Destination's name.
    pub destination: String,
    /// The relevance score.
    pub score: f64,
    /// What was found.
    pub hit: Hit,
}

impl SearchResult {
    /// A result.
    pub fn new(destination: impl Into<String>, score: f64, hit: Hit) -> SearchResult {
        SearchResult {
            destination: destination.into(),
            score,
            hit,
        }
    }
}

/// Long-term memory for one agent: the operations an agent (or its tools) calls.
///
/// Object safe: hold it as `Arc<dyn Client>`. Every operation resolves Destination and
/// Lens names through [`Client::runtime`], taking one snapshot when it starts and
/// keeping it. Invalid input is an [`Error::InvalidInput`](crate::Error::InvalidInput)
/// naming the field and rule, returned before anything is stored.
///
/// Later releases add capture, recall and reflect as further methods with default
/// bodies, so implementations outside the crate keep compiling.
#[async_trait]
pub trait Client: Send + Sync {
    /// The runtime configuration this client resolves names with. Replace it with
    /// [`Runtime::replace`].
    fn runtime(&self) -> &Runtime;

    /// Sends content through an appending Lens: validates the request, then runs the
    /// Lens's ingestion process with a Lens-bound store. Returns the episodes the
    /// process wrote, in write order (none on failure: no partial list). A
    /// replace-graph Lens is an error.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::client::{Client, Content, InMemoryClient, Ingest, OperatorId};
    ///
    /// let client = InMemoryClient::new();
    /// let written = client.ingest(&Ingest::new("doc-1", OperatorId::new("op")?, "personal-chat",
    ///     Content::document("Payments retry three times."))).await?;
    /// assert_eq!(written.len(), 1);
    /// let err = client.ingest(&Ingest::new(" ", OperatorId::new("op")?, "personal-chat",
    ///     Content::document("x"))).await.unwrap_err();
    /// assert!(err.to_string().contains("`id` must not be blank"));
    /// # Ok(()) }
    /// ```
    async fn ingest(&self, request: &Ingest) -> Result<Vec<IngestedRepresentation>>;

    /// Replaces a replace-graph Lens's whole graph at its Destination, atomically: the
    /// graph is validated in full before anything is removed, and the swap itself is
    /// all or nothing (on error the previous graph is unchanged).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::client::{Client, InMemoryClient, Replace, OperatorId};
    /// use gralkor::lens::{Graph, Lens};
    /// use gralkor::runtime::RuntimeConfig;
    /// use serde_json::json;
    ///
    /// let client = InMemoryClient::with_config(
    ///     RuntimeConfig::new().lens(Lens::replace_graph("systems", "global")))?;
    /// let graph = Graph::new().node("payments", ["System"], json!({"name": "Payments"}));
    /// client.replace(&Replace::new(OperatorId::new("op")?, "systems", graph)).await?;
    /// # Ok(()) }
    /// ```
    async fn replace(&self, request: &Replace) -> Result<()>;

    /// Searches Destinations concurrently; results keep the requested Destination
    /// order and each names its Destination. Any failing Destination fails the whole
    /// search.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::client::{Client, InMemoryClient, Search, OperatorId};
    ///
    /// let client = InMemoryClient::new();
    /// assert!(client.search(&Search::new(OperatorId::new("op")?, "anything")).await?.is_empty());
    /// # Ok(()) }
    /// ```
    async fn search(&self, request: &Search) -> Result<Vec<SearchResult>>;

    /// Validates at once and returns; the write happens in the background, and a
    /// failure there is logged (best effort). Direct writes carry the direct writer
    /// marker; Lens writes run the Lens's process.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::client::{Client, Content, InMemoryClient, MemoryAdd, OperatorId};
    ///
    /// let client = InMemoryClient::new();
    /// client.memory_add(&MemoryAdd::new(OperatorId::new("op")?, Content::document("Ada likes tea."))).await?;
    /// client.await_background_writes().await;
    /// # Ok(()) }
    /// ```
    async fn memory_add(&self, request: &MemoryAdd) -> Result<()>;

    /// Waits until every background write accepted so far has finished (for tests
    /// and graceful shutdown).
    async fn await_background_writes(&self);

    /// One episode by Destination and uuid.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::client::{Client, EpisodeRef, InMemoryClient, OperatorId};
    ///
    /// let client = InMemoryClient::new();
    /// let missing = EpisodeRef::new(OperatorId::new("op")?, "personal", uuid::Uuid::new_v4());
    /// assert_eq!(client.get_episode(&missing).await?, None);
    /// # Ok(()) }
    /// ```
    async fn get_episode(&self, request: &EpisodeRef) -> Result<Option<EpisodeRecord>>;

    /// Removes one episode; `false` when there was none.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::client::{Client, EpisodeRef, InMemoryClient, OperatorId};
    ///
    /// let client = InMemoryClient::new();
    /// assert!(!client.remove_episode(&EpisodeRef::new(OperatorId::new("op")?, "global", uuid::Uuid::new_v4())).await?);
    /// # Ok(()) }
    /// ```
    async fn remove_episode(&self, request: &EpisodeRef) -> Result<bool>;

    /// Builds the indices of every graph (idempotent). An admin operation: agents
    /// should not call it unless asked.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::client::{Client, InMemoryClient};
    /// InMemoryClient::new().build_indices().await?;
    /// # Ok(()) }
    /// ```
    async fn build_indices(&self) -> Result<()>;

    /// Detects communities in one Destination's graph. An admin operation: agents
    /// should not call it unless asked.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::client::{BuildCommunities, Client, InMemoryClient, OperatorId};
    /// let counts = InMemoryClient::new().build_communities(&BuildCommunities::new(OperatorId::new("op")?)).await?;
    /// assert_eq!(counts.communities, 0);
    /// # Ok(()) }
    /// ```
    async fn build_communities(&self, request: &BuildCommunities) -> Result<CommunityCounts>;

    /// Drains what was registered to be written first (a capture buffer's accepted
    /// turns: see [`Drain`]), waits for background writes ([`Client::memory_add`]) to
    /// finish, then releases the storage (stops an embedded FalkorDB this client started; a remote server is
    /// left running). Afterwards every call on this client or any clone fails at once
    /// with the non-retryable [`Error::Closed`](crate::Error::Closed); a second
    /// shutdown does nothing. Episodes whose extraction failed stay pending in the
    /// graph.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::sync::Arc;
    /// use gralkor::client::{Client, InMemoryClient, OperatorId, Search};
    ///
    /// let client: Arc<dyn Client> = Arc::new(InMemoryClient::new());
    /// client.shutdown().await?;
    /// let err = client.search(&Search::new(OperatorId::new("op")?, "tea")).await.unwrap_err();
    /// assert!(matches!(err, gralkor::Error::Closed { .. }) && !err.is_retryable());
    /// # Ok(()) }
    /// ```
    async fn shutdown(&self) -> Result<()>;
}
