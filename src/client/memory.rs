//! [`MemoryClient`]: the [`Client`] logic, written once over any [`Storage`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use tokio::task::JoinSet;
use tracing::Instrument;
use uuid::Uuid;

use super::Client;
use super::Drain;
use super::SearchResult;
use super::authorize::{self, Access};
use super::door::Entry;
use super::forget::{
    ClearDestination, PurgeOperator, PurgeReport, PurgeSession, SessionPurgeReport,
};
use super::request::{
    BuildCommunities, DestinationExtraction, EpisodeRef, ExtractPending, MemoryAdd, Replace, Search,
};
use super::status::{Status, StatusRequest};
use super::validate::{
    MemoryAddPlan, validate_build_communities, validate_episode_ref, validate_extract_pending,
    validate_ingest, validate_memory_add, validate_replace, validate_search,
};
use crate::access::Authorizer;
use crate::lens::{Ingest, IngestedRepresentation, Lens};
use crate::llm::LanguageModel;
use crate::ontology::Ontology;
use crate::provenance::Writer;
use crate::runtime::{Runtime, Snapshot};
use crate::storage::{CommunityCounts, EpisodeRecord, GraphId, NewEpisode, OperatorId, Storage};
use crate::{Error, Result};

/// The memory API over a [`Storage`]: it validates every request once with the shared
/// validation functions, resolves Destinations and Lenses
/// from one runtime snapshot per operation, marks provenance, runs ingestion
/// processes, searches every Destination in one storage call and keeps background
/// writes. The storage only stores.
///
/// [`NativeClient`](crate::NativeClient) and [`InMemoryClient`](crate::InMemoryClient)
/// are this type over their storages, with their own constructors; any other
/// [`Storage`] gets the same behaviour through [`MemoryClient::with_storage`].
///
/// Cheap to clone; clones share the runtime, the storage, the background writes and
/// the closed state: after [`Client::shutdown`] every clone's next call fails at once
/// with [`Error::Closed`].
pub struct MemoryClient<S> {
    inner: Arc<Inner<S>>,
}

struct Inner<S> {
    runtime: Runtime,
    storage: Arc<S>,
    background: Mutex<JoinSet<()>>,
    /// What [`Client::shutdown`] drains before it closes.
    drains: Mutex<Vec<Arc<dyn Drain>>>,
    /// Set by the first shutdown, before its drains run.
    stopping: AtomicBool,
    closed: AtomicBool,
    /// The language model a Reflection's chain of thought is answered with when the
    /// submission names none (the native client's extraction model).
    language_model: OnceLock<Arc<dyn LanguageModel>>,
    /// The FalkorDB server a capture buffer over this client keeps accepted turns in
    /// (the native client's).
    durable_capture: Option<crate::falkordb::FalkorDb>,
    /// Admitted Reflection invocations, stopped without callbacks at shutdown.
    reflections: super::reflect::Work,
    /// The authorizer, when one is configured (see `authorize.rs`).
    access: OnceLock<Access>,
    /// `memory_add` background writes that failed for good, and the last one's error.
    failures: Mutex<BackgroundFailures>,
}

/// `memory_add` background writes that failed after their retries, since the client
/// was built ([`Status::background_failures`](super::Status::background_failures)).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct BackgroundFailures {
    /// How many.
    pub count: u64,
    /// The last one's error.
    pub last: Option<String>,
}

impl<S> Clone for MemoryClient<S> {
    fn clone(&self) -> Self {
        MemoryClient {
            inner: self.inner.clone(),
        }
    }
}

impl<S> std::fmt::Debug for MemoryClient<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryClient")
            .field("storage", &std::any::type_name::<S>())
            .field("runtime", &self.inner.runtime)
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<S: Storage> MemoryClient<S> {
    /// A client resolving names through `runtime` and storing in `storage`.
    ///
    /// ```
    /// use gralkor::client::{Client, MemoryClient};
    /// use gralkor::runtime::Runtime;
    /// use gralkor::storage::InMemoryStorage;
    ///
    /// let client = MemoryClient::with_storage(Runtime::packaged(), InMemoryStorage::new());
    /// assert!(client.runtime().snapshot().lens("lens", "personal-chat").is_ok());
    /// ```
    pub fn with_storage(runtime: Runtime, storage: S) -> MemoryClient<S> {
        MemoryClient::build(runtime, Arc::new(storage), None, None)
    }

    pub(super) fn build(
        runtime: Runtime,
        storage: Arc<S>,
        language_model: Option<Arc<dyn LanguageModel>>,
        durable_capture: Option<crate::falkordb::FalkorDb>,
    ) -> MemoryClient<S> {
        MemoryClient {
            inner: Arc::new(Inner {
                runtime,
                storage,
                background: Mutex::new(JoinSet::new()),
                drains: Mutex::new(Vec::new()),
                stopping: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                language_model: language_model.map(OnceLock::from).unwrap_or_default(),
                durable_capture,
                reflections: Default::default(),
                access: OnceLock::new(),
                failures: Mutex::new(BackgroundFailures::default()),
            }),
        }
    }

    /// Enforces `authorizer` on every guarded operation of this client and its clones
    /// (see [`access`](crate::access)): requests must then name a subject
    /// (`.subject(…)`), writes need `contribute`, searches show only what the subject
    /// may view, forgetting needs `delete`.
    ///
    /// **Without an authorizer nothing is checked**: any caller who names an operator id
    /// reads that operator's `personal` graph and every shared Destination, and the
    /// subject of a request is ignored. Set it before the client is used; a second
    /// authorizer is an error.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::sync::Arc;
    /// use gralkor::access::{InMemoryAuthorizer, Subject};
    /// use gralkor::client::{Client, Content, InMemoryClient, MemoryAdd, OperatorId};
    ///
    /// let client = InMemoryClient::new().with_authorizer(Arc::new(InMemoryAuthorizer::new()))?;
    /// let ada = OperatorId::new("ada")?;
    /// // No subject: refused before anything is stored.
    /// assert!(client.memory_add(&MemoryAdd::new(&ada, Content::document("tea"))).await.is_err());
    /// // Ada writes to her own `personal` graph.
    /// client.memory_add(&MemoryAdd::new(&ada, Content::document("tea")).subject(Subject::person("ada")?)).await?;
    /// # Ok(()) }
    /// ```
    pub fn with_authorizer(self, authorizer: Arc<dyn Authorizer>) -> Result<Self> {
        self.inner
            .access
            .set(Access::new(authorizer))
            .map_err(|_| Error::invalid("authorizer", "is already set on this client"))?;
        Ok(self)
    }

    /// Answers Reflections with `model` when a submission names none
    /// ([`ReflectOptions::model`](super::ReflectOptions::model)). The native client
    /// sets its extraction model when it is built; a second model is an error.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use gralkor::client::{MemoryClient};
    /// use gralkor::llm::doubles::ScriptedModel;
    /// use gralkor::runtime::Runtime;
    /// use gralkor::storage::InMemoryStorage;
    ///
    /// let client = MemoryClient::with_storage(Runtime::packaged(), InMemoryStorage::new())
    ///     .with_language_model(Arc::new(ScriptedModel::new()))?;
    /// assert!(client.language_model().is_some());
    /// # Ok::<(), gralkor::Error>(())
    /// ```
    pub fn with_language_model(self, model: Arc<dyn LanguageModel>) -> Result<Self> {
        self.inner
            .language_model
            .set(model)
            .map_err(|_| Error::invalid("language_model", "is already set on this client"))?;
        Ok(self)
    }

    /// The language model Reflections are answered with when a submission names
    /// none.
    pub fn language_model(&self) -> Option<Arc<dyn LanguageModel>> {
        self.inner.language_model.get().cloned()
    }

    /// The authorizer, when one is configured.
    pub fn authorizer(&self) -> Option<&Arc<dyn Authorizer>> {
        self.inner.access.get().map(Access::authorizer)
    }

    /// The storage.
    pub fn storage(&self) -> &S {
        &self.inner.storage
    }

    /// Where a capture buffer over this client keeps accepted turns durably.
    pub(super) fn durable_capture(&self) -> Option<&crate::falkordb::FalkorDb> {
        self.inner.durable_capture.as_ref()
    }

    pub(super) fn reflections(&self) -> &super::reflect::Work {
        &self.inner.reflections
    }

    /// Registers `drain` to run at the start of [`Client::shutdown`], while this
    /// client still accepts writes; holders that are gone are forgotten here. The
    /// capture buffer registers itself, so one `shutdown` writes its accepted turns
    /// before the storage stops.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use gralkor::client::{Client, Drain, InMemoryClient};
    ///
    /// struct Flag(AtomicBool);
    /// #[async_trait::async_trait]
    /// impl Drain for Flag {
    ///     fn is_live(&self) -> bool { true }
    ///     async fn drain(&self) -> gralkor::Result<()> {
    ///         self.0.store(true, Ordering::SeqCst);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let client = InMemoryClient::new();
    /// let flag = Arc::new(Flag(AtomicBool::new(false)));
    /// client.drain_on_shutdown(flag.clone());
    /// client.shutdown().await?;
    /// assert!(flag.0.load(Ordering::SeqCst));
    /// # Ok(()) }
    /// ```
    pub fn drain_on_shutdown(&self, drain: Arc<dyn Drain>) {
        let mut drains = self.inner.drains.lock().unwrap_or_else(|p| p.into_inner());
        drains.retain(|d| d.is_live());
        drains.push(drain);
    }

    /// Whether [`Client::shutdown`] has run on this client or a clone.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    pub(super) fn open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed {
                what: "this memory client".into(),
            });
        }
        Ok(())
    }

    /// The authorizer and the request's subject, when the client has an authorizer
    /// (the subject is then required).
    pub(super) fn guard<'a>(
        &'a self,
        subject: Option<&'a crate::access::Subject>,
    ) -> Result<Option<(&'a Access, &'a crate::access::Subject)>> {
        match self.inner.access.get() {
            Some(access) => Ok(Some((access, authorize::require(subject)?))),
            None => Ok(None),
        }
    }

    /// For the agent layer's own writes (captured turns): the door's authorization
    /// step — with an authorizer, the subject is required and needs `contribute` on
    /// `graph`; without one, nothing.
    pub(crate) async fn authorize_write(
        &self,
        subject: Option<&crate::access::Subject>,
        operator: &OperatorId,
        graph: &GraphId,
    ) -> Result<()> {
        self.door(Entry::new(subject, operator, graph.clone()))
            .await
            .map(|_| ())
    }

    /// Records the fragments of episodes the agent layer wrote to `graph` as
    /// `subject` (the door's recording step; nothing without an authorizer).
    pub(crate) async fn record_write(
        &self,
        subject: Option<&crate::access::Subject>,
        graph: &GraphId,
        episodes: impl IntoIterator<Item = Uuid>,
    ) -> Result<()> {
        self.record_fragments(subject, graph, episodes, &[]).await
    }

    pub(super) fn dyn_storage(&self) -> Arc<dyn Storage> {
        self.inner.storage.clone()
    }

    fn background_failed(&self, e: &Error) {
        let mut f = self
            .inner
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        f.count += 1;
        f.last = Some(e.to_string());
    }

    /// The `memory_add` background writes that failed for good so far.
    pub(super) fn background_failures(&self) -> BackgroundFailures {
        self.inner
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The client's authorization, when it has an authorizer.
    pub(super) fn access(&self) -> Option<&Access> {
        self.inner.access.get()
    }

    /// The drains registered and still live.
    pub(super) fn live_drains(&self) -> Vec<Arc<dyn Drain>> {
        let drains = self.inner.drains.lock().unwrap_or_else(|p| p.into_inner());
        drains.iter().filter(|d| d.is_live()).cloned().collect()
    }

    /// [`Client::ingest`] against a given snapshot: through the door.
    pub(crate) async fn ingest_with(
        &self,
        snapshot: &Snapshot,
        request: &Ingest,
    ) -> Result<Vec<IngestedRepresentation>> {
        self.open()?;
        let lens = validate_ingest(request, snapshot)?.clone();
        {
            let graph = lens_graph(snapshot, &lens, &request.operator_id)?;
            let entry = Entry::new(request.subject.as_ref(), &request.operator_id, graph)
                .involves(&request.involves);
            let door = self.door(entry).await?;
            door.run_process(lens, request)
                .instrument(tracing::info_span!("gralkor.ingest", lens = %request.lens))
                .await
        }
    }

    /// [`Client::replace`] against a given snapshot: through the door.
    pub(crate) async fn replace_with(&self, snapshot: &Snapshot, request: &Replace) -> Result<()> {
        self.open()?;
        let lens = validate_replace(request, snapshot)?;
        {
            let graph = lens_graph(snapshot, lens, &request.operator_id)?;
            let door = self
                .door(Entry::new(
                    request.subject.as_ref(),
                    &request.operator_id,
                    graph,
                ))
                .await?;
            door.replace_graph(lens.name(), &request.graph)
                .instrument(tracing::info_span!("gralkor.replace", lens = %lens.name()))
                .await
        }
    }

    /// [`Client::search`] against a given snapshot: one storage call for every
    /// Destination, so the query is prepared (embedded) once.
    pub(crate) async fn search_with(
        &self,
        snapshot: &Snapshot,
        request: &Search,
    ) -> Result<Vec<SearchResult>> {
        self.open()?;
        let plan = validate_search(request, snapshot)?;
        {
            let span = tracing::info_span!(
                "gralkor.search",
                result_type = plan.query.result_type.as_str(),
                destinations = plan.targets.len()
            );
            let graphs: Vec<GraphId> = plan.targets.iter().map(|t| t.graph.clone()).collect();
            let per_graph = match self.guard(request.subject.as_ref())? {
                Some((access, subject)) => {
                    access
                        .search(
                            subject,
                            &request.operator_id,
                            &*self.inner.storage,
                            &graphs,
                            &plan.query,
                        )
                        .instrument(span)
                        .await?
                }
                None => {
                    self.inner
                        .storage
                        .search(&graphs, &plan.query)
                        .instrument(span)
                        .await?
                }
            };
            if per_graph.len() != graphs.len() {
                return Err(Error::Protocol(format!(
                    "the storage answered {} graphs for a search of {}",
                    per_graph.len(),
                    graphs.len()
                )));
            }
            let mut results = Vec::new();
            for (t, hits) in plan.targets.iter().zip(per_graph) {
                for scored in hits {
                    results.push(SearchResult::new(
                        t.destination.clone(),
                        scored.score,
                        scored.hit,
                    ));
                }
            }
            Ok(results)
        }
    }

    /// [`Client::memory_add`] against a given snapshot: validates, resolves and
    /// authorizes now (a refused subject is the caller's error, nothing written),
    /// writes through the door in the background.
    pub(crate) async fn memory_add_with(
        &self,
        snapshot: &Snapshot,
        request: &MemoryAdd,
    ) -> Result<()> {
        self.open()?;
        let plan = validate_memory_add(request, snapshot)?;
        let graph = match &plan {
            MemoryAddPlan::Direct(t) => t.graph.clone(),
            MemoryAddPlan::Lens(lens) => lens_graph(snapshot, lens, &request.operator_id)?,
        };
        let entry = Entry::new(request.subject.as_ref(), &request.operator_id, graph)
            .involves(&request.involves);
        let door = self.door(entry).await?;
        {
            let request = request.clone();
            let client = self.clone();
            let task = async move {
                let outcome = match plan {
                    MemoryAddPlan::Direct(_) => door
                        .add_episode(
                            NewEpisode::new(
                                door.graph().clone(),
                                Writer::Direct,
                                request.content.clone(),
                                &request.source_description,
                                None,
                            )
                            .session(request.session_id.clone())
                            .instructions(request.custom_instructions.clone()),
                        )
                        .await
                        .map(|_| ()),
                    MemoryAddPlan::Lens(lens) => {
                        let ingest = Ingest::new(
                            format!("memory-add-{}", Uuid::new_v4()),
                            request.operator_id.clone(),
                            lens.name().to_string(),
                            request.content.clone(),
                        )
                        .source_description(request.source_description.clone());
                        let mut ingest = ingest;
                        ingest.custom_instructions = request.custom_instructions.clone();
                        let ingest = match &request.session_id {
                            Some(s) => ingest.session(s.clone()),
                            None => ingest,
                        };
                        door.run_process(lens, &ingest).await.map(|_| ())
                    }
                };
                if let Err(e) = outcome {
                    tracing::error!(error = %e, "memory_add background write failed");
                    client.background_failed(&e);
                }
            }
            .instrument(tracing::info_span!("gralkor.memory_add"));
            let mut set = self
                .inner
                .background
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            while set.try_join_next().is_some() {}
            set.spawn(task);
            Ok(())
        }
    }

    /// [`Client::get_episode`] against a given snapshot.
    pub(crate) async fn get_episode_with(
        &self,
        snapshot: &Snapshot,
        request: &EpisodeRef,
    ) -> Result<Option<EpisodeRecord>> {
        self.open()?;
        let t = validate_episode_ref(request, snapshot)?;
        {
            if let Some((access, subject)) = self.guard(request.subject.as_ref())? {
                let op = &request.operator_id;
                if !access.may_view(subject, op, &t.graph, request.uuid).await? {
                    return Ok(None);
                }
            }
            self.inner.storage.get_episode(&t.graph, request.uuid).await
        }
    }

    /// [`Client::remove_episode`] against a given snapshot.
    pub(crate) async fn remove_episode_with(
        &self,
        snapshot: &Snapshot,
        request: &EpisodeRef,
    ) -> Result<bool> {
        self.open()?;
        let t = validate_episode_ref(request, snapshot)?;
        {
            let guard = self.guard(request.subject.as_ref())?;
            if let Some((access, subject)) = guard {
                access.may_delete(subject, request.uuid).await?;
            }
            let removed = self
                .inner
                .storage
                .remove_episode(&t.graph, request.uuid)
                .instrument(tracing::info_span!("gralkor.remove_episode"))
                .await?;
            if let Some((access, _)) = guard {
                access.forget_fragment(request.uuid).await?;
            }
            Ok(removed)
        }
    }

    /// [`Client::build_communities`] against a given snapshot: through the door
    /// (with an authorizer, `contribute` on the Destination's graph).
    pub(crate) async fn build_communities_with(
        &self,
        snapshot: &Snapshot,
        request: &BuildCommunities,
    ) -> Result<CommunityCounts> {
        self.open()?;
        let t = validate_build_communities(request, snapshot)?;
        {
            let door = self
                .door(Entry::new(
                    request.subject.as_ref(),
                    &request.operator_id,
                    t.graph,
                ))
                .await?;
            door.build_communities()
                .instrument(tracing::info_span!("gralkor.build_communities"))
                .await
        }
    }

    /// [`Client::extract_pending`]: through the door, one Destination after another.
    pub(crate) async fn extract_pending(
        &self,
        request: &ExtractPending,
    ) -> Result<Vec<DestinationExtraction>> {
        self.open()?;
        let snapshot = self.runtime().snapshot();
        let targets = validate_extract_pending(request, &snapshot)?;
        {
            // Every Destination is authorized before any is extracted: a named one
            // the subject may not contribute to refuses the request; without names,
            // only those the subject may contribute to are extracted.
            let mut doors = Vec::with_capacity(targets.len());
            for t in targets {
                let entry = Entry::new(request.subject.as_ref(), &request.operator_id, t.graph);
                match self.door(entry).await {
                    Ok(door) => doors.push((t.destination, door)),
                    Err(Error::PermissionDenied { .. }) if request.destinations.is_empty() => {}
                    Err(e) => return Err(e),
                }
            }
            // Each Lens's episodes are extracted with that Lens's ontology.
            let ontologies: BTreeMap<String, Ontology> = snapshot
                .lenses()
                .iter()
                .filter_map(|l| {
                    Some((
                        Writer::Lens(l.name().to_string()).key(),
                        l.ontology()?.clone(),
                    ))
                })
                .collect();
            let mut out = Vec::with_capacity(doors.len());
            for (destination, door) in doors {
                let report = door
                    .extract_pending(&ontologies)
                    .instrument(
                        tracing::info_span!("gralkor.extract_pending", destination = %destination),
                    )
                    .await?;
                out.push(DestinationExtraction::new(destination, report));
            }
            Ok(out)
        }
    }

    async fn drain_background(&self) {
        loop {
            let mut set = std::mem::take(
                &mut *self
                    .inner
                    .background
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            );
            if set.is_empty() {
                return;
            }
            while let Some(joined) = set.join_next().await {
                if let Err(e) = joined {
                    let e = Error::task("a memory_add background write", e);
                    tracing::error!(error = %e, "a background write did not finish");
                }
            }
        }
    }
}

pub(crate) fn lens_graph(
    snapshot: &Snapshot,
    lens: &Lens,
    operator: &OperatorId,
) -> Result<GraphId> {
    snapshot
        .destination("lens.destination", lens.destination())?
        .graph_id(operator)
}

#[async_trait]
impl<S: Storage> Client for MemoryClient<S> {
    fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    async fn ingest(&self, request: &Ingest) -> Result<Vec<IngestedRepresentation>> {
        self.ingest_with(&self.runtime().snapshot(), request).await
    }

    async fn replace(&self, request: &Replace) -> Result<()> {
        self.replace_with(&self.runtime().snapshot(), request).await
    }

    async fn search(&self, request: &Search) -> Result<Vec<SearchResult>> {
        self.search_with(&self.runtime().snapshot(), request).await
    }

    async fn memory_add(&self, request: &MemoryAdd) -> Result<()> {
        self.memory_add_with(&self.runtime().snapshot(), request)
            .await
    }

    async fn await_background_writes(&self) {
        self.drain_background().await;
    }

    async fn get_episode(&self, request: &EpisodeRef) -> Result<Option<EpisodeRecord>> {
        self.get_episode_with(&self.runtime().snapshot(), request)
            .await
    }

    async fn remove_episode(&self, request: &EpisodeRef) -> Result<bool> {
        self.remove_episode_with(&self.runtime().snapshot(), request)
            .await
    }

    async fn build_indices(&self) -> Result<()> {
        self.open()?;
        {
            self.inner
                .storage
                .build_indices()
                .instrument(tracing::info_span!("gralkor.build_indices"))
                .await
        }
    }

    async fn build_communities(&self, request: &BuildCommunities) -> Result<CommunityCounts> {
        self.build_communities_with(&self.runtime().snapshot(), request)
            .await
    }

    async fn status(&self) -> Status {
        MemoryClient::status(self).await
    }

    async fn status_of(&self, request: &StatusRequest) -> Status {
        MemoryClient::status_of(self, request).await
    }

    async fn purge_operator(&self, request: &PurgeOperator) -> Result<PurgeReport> {
        MemoryClient::purge_operator(self, request).await
    }

    async fn purge_session(&self, request: &PurgeSession) -> Result<SessionPurgeReport> {
        MemoryClient::purge_session(self, request).await
    }

    async fn clear_destination(&self, request: &ClearDestination) -> Result<PurgeReport> {
        MemoryClient::clear_destination(self, request).await
    }

    async fn extract_pending(
        &self,
        request: &ExtractPending,
    ) -> Result<Vec<DestinationExtraction>> {
        MemoryClient::extract_pending(self, request).await
    }

    async fn reflect(
        &self,
        name: &str,
        invocation: crate::reflection::runner::Invocation,
        options: super::ReflectOptions,
    ) -> Result<String> {
        self.submit_reflection(name, invocation, options).await
    }

    async fn await_reflections(&self) {
        self.drain_reflections().await;
    }

    fn capture_sink(&self) -> Option<Arc<dyn super::CaptureSink>> {
        Some(Arc::new(self.clone()))
    }

    async fn shutdown(&self) -> Result<()> {
        // The first shutdown stops; later ones (from any clone) find it stopping.
        if self.inner.stopping.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // Registered holders write what they accepted while the client still takes
        // writes; each bounds itself.
        let drains =
            std::mem::take(&mut *self.inner.drains.lock().unwrap_or_else(|p| p.into_inner()));
        let mut first_failure = None;
        for drain in drains.into_iter().filter(|d| d.is_live()) {
            if let Err(e) = drain
                .drain()
                .instrument(tracing::info_span!("gralkor.shutdown.drain"))
                .await
            {
                tracing::warn!(error = %e, "[gralkor] a drain before shutdown failed");
                first_failure.get_or_insert(e);
            }
        }
        self.inner.closed.store(true, Ordering::Release);
        // Unfinished Reflection invocations end with their owner, without a callback.
        self.inner.reflections.stop();
        self.drain_background().await;
        let stopped = self
            .inner
            .storage
            .shutdown()
            .instrument(tracing::info_span!("gralkor.shutdown"))
            .await;
        match first_failure {
            Some(e) => stopped.and(Err(e)),
            None => stopped,
        }
    }
}
