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
//! * Validation: `validate_ingest`, `validate_replace`, `validate_search`,
//!   `validate_memory_add`, `validate_episode_ref`, `validate_build_communities`
//!   check a request against one runtime [`Snapshot`](crate::runtime::Snapshot)
//!   before anything is stored, once, and name the field and rule in an
//!   [`Error::InvalidInput`](crate::Error::InvalidInput). Values that carry their own
//!   rule are checked when they are made ([`OperatorId`], [`GraphId`]).
//! * One implementation: [`MemoryClient`] is the client logic over a storage;
//!   [`NativeClient`] is it over the [native storage](crate::NativeStorage)
//!   (FalkorDB and the engine); [`InMemoryClient`] wraps it over the
//!   [in-memory storage](crate::storage::InMemoryStorage) with the twin's recording
//!   and canned responses (after validation, before it delegates).
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
mod capture_sink;
pub(crate) use memory::lens_graph;
mod door;
pub(crate) use door::Entry;
mod drain;
mod forget;
mod in_memory;
mod memory;
mod native;
mod reflect;
mod request;
mod status;
pub(crate) mod validate;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Public at `agent::capture::CaptureSink`, its one documented path.
#[doc(hidden)]
pub use capture_sink::CaptureSink;
pub use drain::{Drain, Held};
pub use forget::{ClearDestination, PurgeOperator, PurgeReport, PurgeSession, SessionPurgeReport};
pub use in_memory::{Call, Canned, InMemoryClient};
pub use memory::{BackgroundFailures, MemoryClient};
pub use native::NativeClient;
pub use reflect::{ReflectCallback, ReflectOptions};
pub use request::{
    BuildCommunities, DestinationExtraction, EpisodeRef, ExtractPending, MemoryAdd, Replace, Route,
    Search,
};
pub use status::{DestinationStatus, Status, StatusRequest};

/// The values the requests and results are made of, re-exported from the layers that
/// own them so a user of the memory API needs only this module.
pub use crate::lens::{Ingest, IngestedRepresentation};
#[doc(no_inline)]
pub use crate::storage::{
    Artefact, CommunityCounts, Content, DEFAULT_MAX_RESULTS, EpisodeRecord, ExtractionReport,
    FactRecord, FactSource, GraphId, Hit, IngestCost, MAX_RESULTS_LIMIT, NodeRecord, OperatorId,
    ResultType, SourceKind,
};

use crate::Result;
use crate::reflection::runner::Invocation;
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
/// Methods added after the first release have default bodies, so implementations
/// outside the crate keep compiling: the admin operations (`status_of`, the purges,
/// `extract_pending`, `reflect`) then answer that this client does not implement them.
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
    /// should not call it unless asked. With an authorizer the request's subject needs
    /// `contribute` on the graph (refused otherwise, nothing done).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use gralkor::client::{BuildCommunities, Client, InMemoryClient, OperatorId};
    /// let counts = InMemoryClient::new().build_communities(&BuildCommunities::new(OperatorId::new("op")?)).await?;
    /// assert_eq!(counts.communities, 0);
    /// # Ok(()) }
    /// ```
    async fn build_communities(&self, request: &BuildCommunities) -> Result<CommunityCounts>;

    /// The health report of the shared Destinations: [`Client::status_of`] with an
    /// empty request.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::sync::Arc;
    /// use gralkor::client::{Client, InMemoryClient};
    ///
    /// let client: Arc<dyn Client> = Arc::new(InMemoryClient::new());
    /// let status = client.status().await;
    /// assert!(status.healthy());
    /// assert_eq!(status.storage.unwrap().backend, "in-memory");
    /// assert_eq!(status.authorizer, None);
    /// # Ok(()) }
    /// ```
    async fn status(&self) -> Status {
        self.status_of(&StatusRequest::new()).await
    }

    /// The health report (see [`Status`]): the storage's backend, server and models,
    /// the authorizer, each Destination's graph (episodes, pending extraction,
    /// indices), and what the capture buffer holds. Every part is asked at once: one
    /// round trip to the storage's server for its status, one to the authorizer (and
    /// one lookup of what the subject may read), and four reads per graph, all
    /// concurrent. A part that fails is reported as its error; the report itself
    /// always comes back.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::sync::Arc;
    /// use gralkor::client::{Client, Content, InMemoryClient, MemoryAdd, OperatorId, StatusRequest};
    ///
    /// let client: Arc<dyn Client> = Arc::new(InMemoryClient::new());
    /// let ada = OperatorId::new("ada")?;
    /// client.memory_add(&MemoryAdd::new(&ada, Content::document("Ada likes tea."))).await?;
    /// client.await_background_writes().await;
    /// let status = client.status_of(&StatusRequest::new().operator(&ada)).await;
    /// let personal = status.destination("personal").unwrap();
    /// assert_eq!(personal.graph.as_deref(), Some("personal/ada"));
    /// assert_eq!(personal.status.as_ref().unwrap().episodes, 1);
    /// # Ok(()) }
    /// ```
    async fn status_of(&self, request: &StatusRequest) -> Status {
        let _ = request;
        Status::unreported(self.runtime())
    }

    /// Forgets one operator entirely (see [`PurgeOperator`]). An admin operation.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::sync::Arc;
    /// use gralkor::client::{Client, Content, InMemoryClient, MemoryAdd, OperatorId, PurgeOperator, Search};
    ///
    /// let client: Arc<dyn Client> = Arc::new(InMemoryClient::new());
    /// let ada = OperatorId::new("ada")?;
    /// client.memory_add(&MemoryAdd::new(&ada, Content::document("Ada likes tea."))).await?;
    /// client.await_background_writes().await;
    /// let report = client.purge_operator(&PurgeOperator::new(&ada)).await?;
    /// assert!(report.graph_removed);
    /// assert!(client.search(&Search::new(&ada, "tea")).await?.is_empty());
    /// # Ok(()) }
    /// ```
    async fn purge_operator(&self, request: &PurgeOperator) -> Result<PurgeReport> {
        let _ = request;
        Err(unsupported("purge_operator"))
    }

    /// Forgets one conversation session (see [`PurgeSession`]). Turns a capture
    /// buffer still holds are its own to drop:
    /// [`CaptureBuffer::purge_session`](crate::agent::capture::CaptureBuffer::purge_session).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::sync::Arc;
    /// use gralkor::client::{Client, Content, InMemoryClient, MemoryAdd, OperatorId, PurgeSession, Search};
    ///
    /// let client: Arc<dyn Client> = Arc::new(InMemoryClient::new());
    /// let ada = OperatorId::new("ada")?;
    /// client.memory_add(&MemoryAdd::new(&ada, Content::document("Ada likes tea.")).session("s-1")).await?;
    /// client.memory_add(&MemoryAdd::new(&ada, Content::document("Ada likes jazz.")).session("s-2")).await?;
    /// client.await_background_writes().await;
    /// let report = client.purge_session(&PurgeSession::new(&ada, "s-1")).await?;
    /// assert_eq!(report.episodes.len(), 1);
    /// assert!(client.search(&Search::new(&ada, "tea")).await?.is_empty());
    /// assert_eq!(client.search(&Search::new(&ada, "jazz")).await?.len(), 1);
    /// # Ok(()) }
    /// ```
    async fn purge_session(&self, request: &PurgeSession) -> Result<SessionPurgeReport> {
        let _ = request;
        Err(unsupported("purge_session"))
    }

    /// Clears one Destination's graph (see [`ClearDestination`]). An admin operation.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::sync::Arc;
    /// use gralkor::client::{ClearDestination, Client, Content, InMemoryClient, MemoryAdd, OperatorId, Search};
    ///
    /// let client: Arc<dyn Client> = Arc::new(InMemoryClient::new());
    /// let ada = OperatorId::new("ada")?;
    /// client.memory_add(&MemoryAdd::new(&ada, Content::document("Ada likes tea."))).await?;
    /// client.await_background_writes().await;
    /// let report = client.clear_destination(&ClearDestination::new(&ada, "personal")).await?;
    /// assert!(report.graph_removed);
    /// assert!(client.search(&Search::new(&ada, "tea")).await?.is_empty());
    /// # Ok(()) }
    /// ```
    async fn clear_destination(&self, request: &ClearDestination) -> Result<PurgeReport> {
        let _ = request;
        Err(unsupported("clear_destination"))
    }

    /// Extracts the episodes stored but not yet extracted in the request's
    /// Destinations (written while no language model was configured, or whose
    /// extraction failed), each with the ontology of the Lens that wrote it (direct
    /// writes and unattributed episodes with the generic one). An admin operation.
    ///
    /// Destinations are done one after another; the report says, per Destination,
    /// which episodes were completed, which another writer holds (busy) and which
    /// failed again (they stay pending). With an authorizer the subject needs
    /// `contribute` on each Destination named (one refusal refuses the request,
    /// before anything is extracted); without names, the Destinations it may
    /// contribute to are extracted. A storage without a language model refuses with a
    /// configuration error; one that never defers extraction (the twin) reports
    /// nothing pending.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::sync::Arc;
    /// use gralkor::client::{Client, ExtractPending, InMemoryClient, OperatorId};
    ///
    /// let client: Arc<dyn Client> = Arc::new(InMemoryClient::new());
    /// let reports = client.extract_pending(&ExtractPending::new(OperatorId::new("op")?)).await?;
    /// assert_eq!(reports.len(), 2); // the operator's `personal` and `global`
    /// assert!(reports.iter().all(|r| r.report.completed.is_empty()));
    /// # Ok(()) }
    /// ```
    async fn extract_pending(
        &self,
        request: &ExtractPending,
    ) -> Result<Vec<DestinationExtraction>> {
        let _ = request;
        Err(unsupported("extract_pending"))
    }

    /// Submits an invocation of the Reflection `name` (declared in the runtime, or
    /// packaged) and returns its id at once; a background task owned by this client
    /// produces the artefact (the chain of thought, with the definition in force now),
    /// delivers it create-or-confirm to the Reflection's Destination, retries 5xx
    /// failures for up to 24 hours, and calls the options' callback
    /// ([`ReflectOptions::on_complete`]) exactly once with the
    /// [`Completion`](crate::reflection::delivery::Completion). When the client shuts
    /// down, unfinished invocations end without a callback; resubmitting the same
    /// invocation id converges on the same artefact (an artefact already stored is
    /// delivered again without running the chain of thought). Call it within a tokio
    /// runtime (the task is spawned on it).
    ///
    /// Checked before the id is returned, nothing run otherwise: as
    /// [`Error::InvalidInput`](crate::Error::InvalidInput), a non-blank invocation id
    /// without NUL, a declared or packaged Reflection, the options and a model to
    /// answer with (the options' inference or model, else the client's:
    /// [`MemoryClient::language_model`](crate::client::MemoryClient::language_model));
    /// with an authorizer, the invocation's subject
    /// ([`Invocation::subject`](crate::reflection::runner::Invocation::subject)) is
    /// required and needs `contribute` on the Destination the artefact goes to
    /// ([`Error::PermissionDenied`](crate::Error::PermissionDenied)). It is checked
    /// again at delivery: a refusal then is an abandoned delivery, nothing written.
    /// A delivered artefact's fragment is recorded for the subject, so it can
    /// [`remove_episode`](Client::remove_episode) it; the packaged
    /// `generalisations`' related-memory search runs as the subject.
    ///
    /// The default body refuses with a configuration error (a client that runs no
    /// Reflections).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::sync::Arc;
    /// use gralkor::client::{Client, InMemoryClient, OperatorId, ReflectOptions};
    /// use gralkor::llm::doubles::ScriptedModel;
    /// use gralkor::reflection::delivery::Outcome;
    /// use gralkor::reflection::runner::Invocation;
    /// use gralkor::reflection::{Reflection, Step};
    /// use gralkor::runtime::RuntimeConfig;
    /// use serde_json::json;
    ///
    /// let client: Arc<dyn Client> = Arc::new(InMemoryClient::with_config(RuntimeConfig::new()
    ///     .reflection(Reflection::new("release-review", "global")
    ///         .step(Step::new("review", "Review the evidence.").typed("approved", "boolean"))))?);
    /// let model = ScriptedModel::new().answer("step_review", json!({"approved": true}));
    /// let (tx, rx) = tokio::sync::oneshot::channel();
    /// let id = client.reflect(
    ///     "release-review",
    ///     Invocation::new("release-1", OperatorId::new("ada")?),
    ///     ReflectOptions::new()
    ///         .model(Arc::new(model))
    ///         .on_complete(move |done| { let _ = tx.send(done); }),
    /// ).await?;
    /// assert_eq!(id, "release-1");
    /// let done = rx.await.unwrap();
    /// assert!(matches!(done.outcome, Outcome::Delivered { .. }));
    /// client.await_reflections().await;
    /// # Ok(()) }
    /// ```
    async fn reflect(
        &self,
        name: &str,
        invocation: Invocation,
        options: ReflectOptions,
    ) -> Result<String> {
        let _ = (name, invocation, options);
        Err(crate::Error::Config {
            field: "client".into(),
            rule: "does not run Reflections".into(),
        })
    }

    /// Waits until every Reflection invocation submitted so far has ended (for tests
    /// and graceful shutdown). The default body has none to wait for.
    async fn await_reflections(&self) {}

    /// What a capture buffer built on this client writes through, so one is built
    /// from an `Arc<dyn Client>`
    /// ([`CaptureBuffer::for_client`](crate::agent::capture::CaptureBuffer::for_client)):
    /// the client itself for both clients (the native one keeps accepted turns in its
    /// FalkorDB server). The default body has none: the client takes no captured
    /// turns.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::sync::Arc;
    /// use gralkor::client::{Client, InMemoryClient};
    ///
    /// let client: Arc<dyn Client> = Arc::new(InMemoryClient::new());
    /// let sink = client.capture_sink().expect("the twin takes captured turns");
    /// assert!(sink.capture_server().is_none()); // kept in memory
    /// # Ok(()) }
    /// ```
    fn capture_sink(&self) -> Option<std::sync::Arc<dyn CaptureSink>> {
        None
    }

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

/// What a [`Client`] method's default body answers: the implementation does not
/// provide the operation.
fn unsupported(operation: &str) -> crate::Error {
    crate::Error::Config {
        field: "client".into(),
        rule: format!("does not implement `{operation}`"),
    }
}
