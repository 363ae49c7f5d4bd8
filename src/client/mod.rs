//! The memory API: the [`Client`] trait, its request and result values, and the
//! validation every implementation shares.
//!
//! * Requests: [`Ingest`] (through an appending Lens), [`Replace`] (a replace-graph
//!   Lens's whole graph), [`Search`] (Destinations × Lenses, with a [`ResultType`]),
//!   [`MemoryAdd`] (fire-and-forget), [`EpisodeRef`], [`BuildCommunities`].
//! * Results: [`SearchResult`] names its Destination and carries a [`Hit`]: an
//!   [`EpisodeRecord`] or [`FactRecord`] with its writer ([`Writer`](crate::provenance::Writer)),
//!   a [`NodeRecord`] or an [`Artefact`].
//! * Validation: [`validate_ingest`], [`validate_replace`], [`validate_search`],
//!   [`validate_memory_add`], [`validate_episode_ref`], [`validate_build_communities`],
//!   [`validate_content`] and [`validate_source_description`] (the engine's content and
//!   description limits, so no implementation accepts what the engine refuses) — each checks a request against one runtime
//!   [`Snapshot`](crate::runtime::Snapshot) before anything is stored, and names the
//!   field and rule in an [`Error::InvalidInput`](crate::Error::InvalidInput).
//! * Implementations: [`StorageClient`] writes the client logic once over a
//!   [`Storage`]; [`InMemoryClient`] is the deterministic twin for tests (no
//!   extraction, no network). The native client over FalkorDB and the graph engine
//!   provides a [`Storage`] for the same logic.
//!
//! Every implementation is checked by one contract suite (`tests/client_contract/`).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
//! use gralkor::client::{Client, Content, Hit, InMemoryClient, Ingest, Search};
//! use gralkor::provenance::Writer;
//!
//! let client = InMemoryClient::new();
//! client.ingest(&Ingest::new("turn-1", "operator-42", "personal-chat",
//!     Content::conversation("Ada: We release on Fridays."))
//!     .source_description("chat")).await?;
//!
//! let results = client.search(&Search::new("operator-42", "When do we release?")).await?;
//! let Hit::Episode(episode) = &results[0].hit else { unreachable!() };
//! assert_eq!(results[0].destination, "personal");
//! assert_eq!(episode.writer, Some(Writer::Lens("personal-chat".into())));
//! assert_eq!(episode.source_description, "chat");
//! # Ok(()) }
//! ```

mod core;
mod in_memory;
mod native;
mod request;
mod response;
mod storage;
pub(crate) mod validate;

use async_trait::async_trait;

pub use core::StorageClient;
pub use in_memory::{Call, Canned, InMemoryClient, InMemoryStorage};
pub use native::{NativeClient, NativeStorage};
pub use request::{
    BuildCommunities, Content, DEFAULT_MAX_RESULTS, DEFAULT_MEMORY_ADD_DESCRIPTION, EpisodeRef,
    Ingest, MAX_RESULTS_LIMIT, MemoryAdd, Replace, ResultType, Route, Search, SourceKind,
};
pub use response::{
    Artefact, CommunityCounts, EpisodeRecord, FactRecord, FactSource, Hit, IngestedRepresentation,
    NodeRecord, SearchResult,
};
pub use storage::{GraphQuery, NewEpisode, Storage};
pub use validate::{
    MemoryAddPlan, SearchPlan, Target, validate_build_communities, validate_content,
    validate_episode_ref, validate_ingest, validate_memory_add, validate_replace, validate_search,
    validate_source_description,
};

use crate::Result;
use crate::runtime::Runtime;

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
    /// use gralkor::client::{Client, Content, InMemoryClient, Ingest};
    ///
    /// let client = InMemoryClient::new();
    /// let written = client.ingest(&Ingest::new("doc-1", "op", "personal-chat",
    ///     Content::document("Payments retry three times."))).await?;
    /// assert_eq!(written.len(), 1);
    /// let err = client.ingest(&Ingest::new(" ", "op", "personal-chat",
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
    /// use gralkor::client::{Client, InMemoryClient, Replace};
    /// use gralkor::lens::{Graph, Lens};
    /// use gralkor::runtime::RuntimeConfig;
    /// use serde_json::json;
    ///
    /// let client = InMemoryClient::with_config(
    ///     RuntimeConfig::new().lens(Lens::replace_graph("systems", "global")))?;
    /// let graph = Graph::new().node("payments", ["System"], json!({"name": "Payments"}));
    /// client.replace(&Replace::new("op", "systems", graph)).await?;
    /// # Ok(()) }
    /// ```
    async fn replace(&self, request: &Replace) -> Result<()>;

    /// Searches Destinations concurrently; results keep the requested Destination
    /// order and each names its Destination. Any failing Destination fails the whole
    /// search.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::client::{Client, InMemoryClient, Search};
    ///
    /// let client = InMemoryClient::new();
    /// assert!(client.search(&Search::new("op", "anything")).await?.is_empty());
    /// # Ok(()) }
    /// ```
    async fn search(&self, request: &Search) -> Result<Vec<SearchResult>>;

    /// Validates at once and returns; the write happens in the background, and a
    /// failure there is logged (best effort). Direct writes carry the direct writer
    /// marker; Lens writes run the Lens's process.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::client::{Client, Content, InMemoryClient, MemoryAdd};
    ///
    /// let client = InMemoryClient::new();
    /// client.memory_add(&MemoryAdd::new("op", Content::document("Ada likes tea."))).await?;
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
    /// use gralkor::client::{Client, EpisodeRef, InMemoryClient};
    ///
    /// let client = InMemoryClient::new();
    /// let missing = EpisodeRef::new("op", "personal", uuid::Uuid::new_v4());
    /// assert_eq!(client.get_episode(&missing).await?, None);
    /// # Ok(()) }
    /// ```
    async fn get_episode(&self, request: &EpisodeRef) -> Result<Option<EpisodeRecord>>;

    /// Removes one episode; `false` when there was none.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::client::{Client, EpisodeRef, InMemoryClient};
    ///
    /// let client = InMemoryClient::new();
    /// assert!(!client.remove_episode(&EpisodeRef::new("op", "global", uuid::Uuid::new_v4())).await?);
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
    /// use gralkor::client::{BuildCommunities, Client, InMemoryClient};
    /// let counts = InMemoryClient::new().build_communities(&BuildCommunities::new("op")).await?;
    /// assert_eq!(counts.communities, 0);
    /// # Ok(()) }
    /// ```
    async fn build_communities(&self, request: &BuildCommunities) -> Result<CommunityCounts>;
}
