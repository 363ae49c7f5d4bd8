//! [`InMemoryClient`]: the client logic over [`InMemoryStorage`], with the twin's
//! recording and canned responses.

use std::sync::{Arc, Mutex};

use super::SearchResult;
use super::forget::{
    ClearDestination, PurgeOperator, PurgeReport, PurgeSession, SessionPurgeReport,
};
use super::memory::MemoryClient;
use super::request::{
    BuildCommunities, DestinationExtraction, EpisodeRef, ExtractPending, MemoryAdd, Replace, Search,
};
use super::status::StatusRequest;
use crate::Result;
use crate::lens::{Ingest, IngestedRepresentation};
use crate::reflection::runner::Invocation;
use crate::runtime::{Runtime, RuntimeConfig};
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

/// The twin's hook: the calls that passed validation and the queued answers.
#[derive(Debug, Default)]
pub(super) struct Recorder {
    calls: Mutex<Vec<Call>>,
    canned: Mutex<Vec<Canned>>,
}

impl Recorder {
    pub(super) fn record(&self, call: Call) {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(call);
    }

    pub(super) fn take(&self, wanted: impl Fn(&Canned) -> bool) -> Option<Canned> {
        let mut canned = self.canned.lock().unwrap_or_else(|p| p.into_inner());
        let at = canned.iter().position(wanted)?;
        Some(canned.remove(at))
    }
}

/// The in-memory twin of the native client, for consumers' tests: the same client
/// logic ([`MemoryClient`]) over [`InMemoryStorage`] (no extraction, no network), so
/// it validates exactly as the native client does; it also records every call that
/// passed validation and can be given canned responses. Invalid calls are rejected
/// before they are recorded.
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
pub type InMemoryClient = MemoryClient<InMemoryStorage>;

impl Default for MemoryClient<InMemoryStorage> {
    fn default() -> Self {
        InMemoryClient::new()
    }
}

impl MemoryClient<InMemoryStorage> {
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
        MemoryClient::build(
            runtime,
            Arc::new(InMemoryStorage::new()),
            Some(Recorder::default()),
        )
    }

    fn twin(&self) -> &Recorder {
        self.recorder()
            .expect("an in-memory client is always built with its recorder")
    }

    /// Every call that passed validation so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.twin()
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Queues a canned response for the next valid call of its operation.
    pub fn respond(&self, canned: Canned) {
        self.twin()
            .canned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(canned);
    }

    /// Clears recorded calls, canned responses and stored memory (the runtime
    /// configuration stays).
    pub fn reset(&self) {
        let twin = self.twin();
        twin.calls.lock().unwrap_or_else(|p| p.into_inner()).clear();
        twin.canned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.storage().clear();
    }
}
