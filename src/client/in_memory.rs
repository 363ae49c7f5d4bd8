//! [`InMemoryClient`]: the test twin. A wrapper around the client logic over
//! [`InMemoryStorage`] that records every call that passed validation and serves
//! canned responses, then delegates; the client logic itself knows nothing of it.

use std::ops::Deref;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::forget::{
    ClearDestination, PurgeOperator, PurgeReport, PurgeSession, SessionPurgeReport,
};
use super::memory::MemoryClient;
use super::request::{
    BuildCommunities, DestinationExtraction, EpisodeRef, ExtractPending, MemoryAdd, Replace, Search,
};
use super::status::Status;
use super::status::StatusRequest;
use super::validate::{
    validate_build_communities, validate_episode_ref, validate_extract_pending, validate_ingest,
    validate_memory_add, validate_replace, validate_search,
};
use super::{Client, ReflectOptions, SearchResult};
use crate::Result;
use crate::lens::{Ingest, IngestedRepresentation};
use crate::reflection::runner::Invocation;
use crate::runtime::{Runtime, RuntimeConfig, Snapshot};
use crate::storage::{CommunityCounts, EpisodeRecord, InMemoryStorage};

/// One recorded call of an [`InMemoryClient`], with its exact arguments.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Call {
    /// [`Client::ingest`](super::Client::ingest).
    Ingest(Ingest),
    /// [`Client::replace`](super::Client::replace).
    Replace(Replace),
    /// [`Client::search`](super::Client::search).
    Search(Search),
    /// [`Client::memory_add`](super::Client::memory_add).
    MemoryAdd(MemoryAdd),
    /// [`Client::get_episode`](super::Client::get_episode).
    GetEpisode(EpisodeRef),
    /// [`Client::remove_episode`](super::Client::remove_episode).
    RemoveEpisode(EpisodeRef),
    /// [`Client::build_indices`](super::Client::build_indices).
    BuildIndices,
    /// [`Client::build_communities`](super::Client::build_communities).
    BuildCommunities(BuildCommunities),
    /// [`Client::status`](super::Client::status) (an empty request) and
    /// [`Client::status_of`](super::Client::status_of).
    Status(StatusRequest),
    /// [`Client::purge_operator`](super::Client::purge_operator).
    PurgeOperator(PurgeOperator),
    /// [`Client::purge_session`](super::Client::purge_session).
    PurgeSession(PurgeSession),
    /// [`Client::clear_destination`](super::Client::clear_destination).
    ClearDestination(ClearDestination),
    /// [`Client::extract_pending`](super::Client::extract_pending).
    ExtractPending(ExtractPending),
    /// [`Client::reflect`](super::Client::reflect): the Reflection's name and the
    /// invocation (the options hold Rust values and are not recorded).
    Reflect {
        /// The Reflection.
        name: String,
        /// The invocation.
        invocation: Invocation,
    },
}

/// A canned response: the next valid call of that operation returns it instead of
/// touching the storage (it is still validated and recorded first). Each is used
/// once, in the order given.
#[derive(Debug)]
#[non_exhaustive]
pub enum Canned {
    /// For [`Client::ingest`](super::Client::ingest).
    Ingest(Result<Vec<IngestedRepresentation>>),
    /// For [`Client::replace`](super::Client::replace).
    Replace(Result<()>),
    /// For [`Client::search`](super::Client::search).
    Search(Result<Vec<SearchResult>>),
    /// For [`Client::memory_add`](super::Client::memory_add) (what the call returns;
    /// nothing is written).
    MemoryAdd(Result<()>),
    /// For [`Client::get_episode`](super::Client::get_episode).
    GetEpisode(Result<Option<EpisodeRecord>>),
    /// For [`Client::remove_episode`](super::Client::remove_episode).
    RemoveEpisode(Result<bool>),
    /// For [`Client::build_indices`](super::Client::build_indices).
    BuildIndices(Result<()>),
    /// For [`Client::build_communities`](super::Client::build_communities).
    BuildCommunities(Result<CommunityCounts>),
    /// For [`Client::purge_operator`](super::Client::purge_operator).
    PurgeOperator(Result<PurgeReport>),
    /// For [`Client::purge_session`](super::Client::purge_session).
    PurgeSession(Result<SessionPurgeReport>),
    /// For [`Client::clear_destination`](super::Client::clear_destination).
    ClearDestination(Result<PurgeReport>),
    /// For [`Client::extract_pending`](super::Client::extract_pending).
    ExtractPending(Result<Vec<DestinationExtraction>>),
    /// For [`Client::reflect`](super::Client::reflect): what the submission returns;
    /// nothing runs, is written or calls back.
    Reflect(Result<String>),
}

/// The twin's recording: the calls that passed validation and the queued answers.
#[derive(Debug, Default)]
struct Recorder {
    calls: Mutex<Vec<Call>>,
    canned: Mutex<Vec<Canned>>,
}

impl Recorder {
    fn record(&self, call: Call) {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(call);
    }

    fn take(&self, wanted: impl Fn(&Canned) -> bool) -> Option<Canned> {
        let mut canned = self.canned.lock().unwrap_or_else(|p| p.into_inner());
        let at = canned.iter().position(wanted)?;
        Some(canned.remove(at))
    }
}

/// Records a validated call, and returns the first queued canned response of its
/// operation when there is one.
macro_rules! recorded {
    ($self:ident, $call:expr, $variant:ident) => {
        $self.twin.record($call);
        if let Some(Canned::$variant(canned)) =
            $self.twin.take(|c| matches!(c, Canned::$variant(_)))
        {
            return canned;
        }
    };
}

/// The in-memory twin of the native client, for consumers' tests: the same client
/// logic ([`MemoryClient`]) over [`InMemoryStorage`] (no extraction, no network), so
/// it validates exactly as the native client does, wrapped in a recorder: every call
/// that passed validation is recorded ([`calls`](Self::calls)) and may be answered
/// by a canned response ([`respond`](Self::respond)) instead of the storage. Invalid
/// calls are rejected before they are recorded. It dereferences to the wrapped
/// [`MemoryClient`] for the methods only a concrete client has
/// ([`storage`](MemoryClient::storage), [`drain_on_shutdown`](MemoryClient::drain_on_shutdown), …);
/// calls made there are not recorded. Clones share the recording and the memory.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// use gralkor::client::{Call, Canned, Client, InMemoryClient, OperatorId, Search};
///
/// let client = InMemoryClient::new();
/// let op = OperatorId::new("op")?;
/// client.respond(Canned::Search(Err(gralkor::Error::NotFound("down".into()))));
/// assert!(client.search(&Search::new(&op, "tea")).await.is_err()); // canned
/// assert!(client.search(&Search::new(&op, "tea")).await?.is_empty()); // real
/// assert!(matches!(&client.calls()[..], [Call::Search(_), Call::Search(_)]));
///
/// assert!(client.search(&Search::new(&op, " ")).await.is_err()); // invalid: not recorded
/// assert_eq!(client.calls().len(), 2);
///
/// // The admin operations too, through `Arc<dyn Client>`.
/// use std::sync::Arc;
/// use gralkor::client::{PurgeSession, StatusRequest};
/// client.reset();
/// client.respond(Canned::PurgeSession(Err(gralkor::Error::NotFound("down".into()))));
/// let shared: Arc<dyn Client> = Arc::new(client.clone());
/// assert!(shared.purge_session(&PurgeSession::new(&op, "s-1")).await.is_err()); // canned
/// let _ = shared.status().await;
/// assert_eq!(client.calls(), [
///     Call::PurgeSession(PurgeSession::new(&op, "s-1")),
///     Call::Status(StatusRequest::new()),
/// ]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct InMemoryClient {
    client: MemoryClient<InMemoryStorage>,
    twin: Arc<Recorder>,
}

impl Default for InMemoryClient {
    fn default() -> Self {
        InMemoryClient::new()
    }
}

impl Deref for InMemoryClient {
    type Target = MemoryClient<InMemoryStorage>;

    fn deref(&self) -> &MemoryClient<InMemoryStorage> {
        &self.client
    }
}

impl InMemoryClient {
    /// A twin with only the packaged Destinations and Lens.
    pub fn new() -> InMemoryClient {
        InMemoryClient::with_runtime(Runtime::packaged())
    }

    /// A twin with the consumer's runtime configuration.
    pub fn with_config(config: RuntimeConfig) -> Result<InMemoryClient> {
        Ok(InMemoryClient::with_runtime(Runtime::new(config)?))
    }

    /// A twin holding `runtime`.
    pub fn with_runtime(runtime: Runtime) -> InMemoryClient {
        InMemoryClient {
            client: MemoryClient::with_storage(runtime, InMemoryStorage::new()),
            twin: Arc::default(),
        }
    }

    /// The twin with `authorizer` enforced (see [`MemoryClient::with_authorizer`]).
    pub fn with_authorizer(
        self,
        authorizer: Arc<dyn crate::access::Authorizer>,
    ) -> Result<InMemoryClient> {
        Ok(InMemoryClient {
            client: self.client.with_authorizer(authorizer)?,
            twin: self.twin,
        })
    }

    /// The twin answering Reflections with `model` when a submission names none (see
    /// [`MemoryClient::with_language_model`]).
    pub fn with_language_model(
        self,
        model: Arc<dyn crate::llm::LanguageModel>,
    ) -> Result<InMemoryClient> {
        Ok(InMemoryClient {
            client: self.client.with_language_model(model)?,
            twin: self.twin,
        })
    }

    /// Every call that passed validation so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.twin
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Queues a canned response for the next valid call of its operation.
    pub fn respond(&self, canned: Canned) {
        self.twin
            .canned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(canned);
    }

    /// Clears recorded calls, canned responses and stored memory (the runtime
    /// configuration stays).
    pub fn reset(&self) {
        self.twin
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.twin
            .canned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.client.storage().clear();
    }

    /// [`Client::ingest`] against a given snapshot (the capture buffer's frozen one),
    /// recorded.
    pub(crate) async fn ingest_in(
        &self,
        snapshot: &Snapshot,
        request: &Ingest,
    ) -> Result<Vec<IngestedRepresentation>> {
        self.client.open()?;
        validate_ingest(request, snapshot)?;
        recorded!(self, Call::Ingest(request.clone()), Ingest);
        self.client.ingest_with(snapshot, request).await
    }
}

#[async_trait]
impl Client for InMemoryClient {
    fn runtime(&self) -> &Runtime {
        Client::runtime(&self.client)
    }

    async fn ingest(&self, request: &Ingest) -> Result<Vec<IngestedRepresentation>> {
        self.ingest_in(&self.runtime().snapshot(), request).await
    }

    async fn replace(&self, request: &Replace) -> Result<()> {
        self.client.open()?;
        let snapshot = self.runtime().snapshot();
        validate_replace(request, &snapshot)?;
        recorded!(self, Call::Replace(request.clone()), Replace);
        self.client.replace_with(&snapshot, request).await
    }

    async fn search(&self, request: &Search) -> Result<Vec<SearchResult>> {
        self.client.open()?;
        let snapshot = self.runtime().snapshot();
        validate_search(request, &snapshot)?;
        recorded!(self, Call::Search(request.clone()), Search);
        self.client.search_with(&snapshot, request).await
    }

    async fn memory_add(&self, request: &MemoryAdd) -> Result<()> {
        self.client.open()?;
        let snapshot = self.runtime().snapshot();
        validate_memory_add(request, &snapshot)?;
        recorded!(self, Call::MemoryAdd(request.clone()), MemoryAdd);
        self.client.memory_add_with(&snapshot, request).await
    }

    async fn await_background_writes(&self) {
        self.client.await_background_writes().await;
    }

    async fn get_episode(&self, request: &EpisodeRef) -> Result<Option<EpisodeRecord>> {
        self.client.open()?;
        let snapshot = self.runtime().snapshot();
        validate_episode_ref(request, &snapshot)?;
        recorded!(self, Call::GetEpisode(request.clone()), GetEpisode);
        self.client.get_episode_with(&snapshot, request).await
    }

    async fn remove_episode(&self, request: &EpisodeRef) -> Result<bool> {
        self.client.open()?;
        let snapshot = self.runtime().snapshot();
        validate_episode_ref(request, &snapshot)?;
        recorded!(self, Call::RemoveEpisode(request.clone()), RemoveEpisode);
        self.client.remove_episode_with(&snapshot, request).await
    }

    async fn build_indices(&self) -> Result<()> {
        self.client.open()?;
        recorded!(self, Call::BuildIndices, BuildIndices);
        self.client.build_indices().await
    }

    async fn build_communities(&self, request: &BuildCommunities) -> Result<CommunityCounts> {
        self.client.open()?;
        let snapshot = self.runtime().snapshot();
        validate_build_communities(request, &snapshot)?;
        recorded!(
            self,
            Call::BuildCommunities(request.clone()),
            BuildCommunities
        );
        self.client.build_communities_with(&snapshot, request).await
    }

    async fn status_of(&self, request: &StatusRequest) -> Status {
        self.twin.record(Call::Status(request.clone()));
        Client::status_of(&self.client, request).await
    }

    async fn purge_operator(&self, request: &PurgeOperator) -> Result<PurgeReport> {
        self.client.open()?;
        request.graph(&self.runtime().snapshot())?;
        recorded!(self, Call::PurgeOperator(request.clone()), PurgeOperator);
        Client::purge_operator(&self.client, request).await
    }

    async fn purge_session(&self, request: &PurgeSession) -> Result<SessionPurgeReport> {
        self.client.open()?;
        request.graphs(&self.runtime().snapshot())?;
        recorded!(self, Call::PurgeSession(request.clone()), PurgeSession);
        Client::purge_session(&self.client, request).await
    }

    async fn clear_destination(&self, request: &ClearDestination) -> Result<PurgeReport> {
        self.client.open()?;
        request.graph(&self.runtime().snapshot())?;
        recorded!(
            self,
            Call::ClearDestination(request.clone()),
            ClearDestination
        );
        Client::clear_destination(&self.client, request).await
    }

    async fn extract_pending(
        &self,
        request: &ExtractPending,
    ) -> Result<Vec<DestinationExtraction>> {
        self.client.open()?;
        validate_extract_pending(request, &self.runtime().snapshot())?;
        recorded!(self, Call::ExtractPending(request.clone()), ExtractPending);
        Client::extract_pending(&self.client, request).await
    }

    async fn reflect(
        &self,
        name: &str,
        invocation: Invocation,
        options: ReflectOptions,
    ) -> Result<String> {
        self.client.open()?;
        let snapshot = self.runtime().snapshot();
        self.client
            .admit_reflection(&snapshot, name, &invocation, &options)?;
        // A canned submission runs nothing, writes nothing and calls nothing back.
        recorded!(
            self,
            Call::Reflect {
                name: name.to_string(),
                invocation: invocation.clone(),
            },
            Reflect
        );
        Client::reflect(&self.client, name, invocation, options).await
    }

    async fn await_reflections(&self) {
        self.client.await_reflections().await;
    }

    fn capture_sink(&self) -> Option<Arc<dyn super::CaptureSink>> {
        Some(Arc::new(self.clone()))
    }

    async fn shutdown(&self) -> Result<()> {
        self.client.shutdown().await
    }
}
