//! [`StorageClient`]: the [`Client`] logic written once over any [`Storage`].

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::task::JoinSet;
use tracing::Instrument;
use uuid::Uuid;

use super::Client;
use super::request::{BuildCommunities, EpisodeRef, Ingest, MemoryAdd, Replace, Search};
use super::response::{CommunityCounts, EpisodeRecord, IngestedRepresentation, SearchResult};
use super::storage::{NewEpisode, Storage};
use super::validate::{
    MemoryAddPlan, validate_build_communities, validate_episode_ref, validate_ingest,
    validate_memory_add, validate_replace, validate_search,
};
use crate::destination::Destination;
use crate::graph::Timestamp;
use crate::lens::{Lens, LensStore};
use crate::ontology::Ontology;
use crate::provenance::{self, Writer};
use crate::runtime::{Runtime, Snapshot};
use crate::{Error, Result};

/// A [`Client`] over a [`Storage`]: it validates every request with the shared
/// [validation functions](super::validate_search), resolves Destinations and Lenses
/// from one runtime snapshot per operation, marks provenance, runs ingestion
/// processes, and fans searches out to Destinations concurrently. The storage only
/// stores.
///
/// Cheap to clone; clones share the runtime, the storage and the background writes.
#[derive(Clone)]
pub struct StorageClient {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Runtime,
    storage: Arc<dyn Storage>,
    background: Mutex<JoinSet<()>>,
}

impl std::fmt::Debug for StorageClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageClient")
            .field("runtime", &self.inner.runtime)
            .finish_non_exhaustive()
    }
}

impl StorageClient {
    /// A client resolving names through `runtime` and storing in `storage`.
    pub fn new(runtime: Runtime, storage: Arc<dyn Storage>) -> StorageClient {
        StorageClient {
            inner: Arc::new(Inner {
                runtime,
                storage,
                background: Mutex::new(JoinSet::new()),
            }),
        }
    }

    /// The storage.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.inner.storage
    }

    /// [`Client::ingest`] against a given snapshot.
    pub async fn ingest_with(
        &self,
        snapshot: &Snapshot,
        request: &Ingest,
    ) -> Result<Vec<IngestedRepresentation>> {
        let lens = validate_ingest(request, snapshot)?.clone();
        let graph = lens_graph(snapshot, &lens, &request.operator_id)?;
        run_ingestion(self.inner.storage.clone(), lens, graph, request)
            .instrument(tracing::info_span!("gralkor.ingest", lens = %request.lens))
            .await
    }

    /// [`Client::replace`] against a given snapshot.
    pub async fn replace_with(&self, snapshot: &Snapshot, request: &Replace) -> Result<()> {
        let lens = validate_replace(request, snapshot)?;
        let graph = lens_graph(snapshot, lens, &request.operator_id)?;
        self.inner
            .storage
            .replace_graph(&graph, lens.name(), &request.graph)
            .instrument(tracing::info_span!("gralkor.replace", lens = %lens.name()))
            .await
    }

    /// [`Client::search`] against a given snapshot.
    pub async fn search_with(
        &self,
        snapshot: &Snapshot,
        request: &Search,
    ) -> Result<Vec<SearchResult>> {
        let plan = validate_search(request, snapshot)?;
        let span = tracing::info_span!(
            "gralkor.search",
            result_type = plan.query.result_type.as_str(),
            destinations = plan.targets.len()
        );
        async move {
            let mut set = JoinSet::new();
            let query = Arc::new(plan.query);
            for (i, t) in plan.targets.iter().enumerate() {
                let storage = self.inner.storage.clone();
                let query = query.clone();
                let graph = t.graph.clone();
                set.spawn(
                    async move { (i, storage.search(&graph, &query).await) }.in_current_span(),
                );
            }
            let mut per_target: Vec<Option<Vec<_>>> = vec![None; plan.targets.len()];
            while let Some(joined) = set.join_next().await {
                let (i, found) =
                    joined.map_err(|e| Error::task("a Destination search task failed", e))?;
                // Any failing Destination fails the whole search; the rest are dropped.
                per_target[i] = Some(found?);
            }
            let mut results = Vec::new();
            for (t, hits) in plan.targets.iter().zip(per_target) {
                for hit in hits.unwrap_or_default() {
                    results.push(SearchResult {
                        destination: t.destination.clone(),
                        hit,
                    });
                }
            }
            Ok(results)
        }
        .instrument(span)
        .await
    }

    /// [`Client::memory_add`] against a given snapshot: validates and resolves now,
    /// writes in the background.
    pub fn memory_add_with(&self, snapshot: &Snapshot, request: &MemoryAdd) -> Result<()> {
        let plan = validate_memory_add(request, snapshot)?;
        let storage = self.inner.storage.clone();
        let request = request.clone();
        let graph = match &plan {
            MemoryAddPlan::Direct(t) => t.graph.clone(),
            MemoryAddPlan::Lens(lens) => lens_graph(snapshot, lens, &request.operator_id)?,
        };
        let span = tracing::info_span!("gralkor.memory_add");
        let task = async move {
            let outcome = match plan {
                MemoryAddPlan::Direct(t) => storage
                    .add_episode(NewEpisode {
                        graph,
                        destination: t.destination,
                        content: request.content.clone(),
                        stored_description: provenance::direct_description(
                            &request.source_description,
                        ),
                        writer: Writer::Direct,
                        ontology: Ontology::generic(),
                        reference_time: Timestamp::now(),
                        reference_time_given: false,
                        replay_key: None,
                    })
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
                    run_ingestion(storage, lens, graph, &ingest)
                        .await
                        .map(|_| ())
                }
            };
            if let Err(e) = outcome {
                tracing::warn!(error = %e, "memory_add background write failed");
            }
        }
        .instrument(span);
        let mut set = self
            .inner
            .background
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        while set.try_join_next().is_some() {}
        set.spawn(task);
        Ok(())
    }

    /// [`Client::get_episode`] against a given snapshot.
    pub async fn get_episode_with(
        &self,
        snapshot: &Snapshot,
        request: &EpisodeRef,
    ) -> Result<Option<EpisodeRecord>> {
        let t = validate_episode_ref(request, snapshot)?;
        self.inner.storage.get_episode(&t.graph, request.uuid).await
    }

    /// [`Client::remove_episode`] against a given snapshot.
    pub async fn remove_episode_with(
        &self,
        snapshot: &Snapshot,
        request: &EpisodeRef,
    ) -> Result<bool> {
        let t = validate_episode_ref(request, snapshot)?;
        self.inner
            .storage
            .remove_episode(&t.graph, request.uuid)
            .instrument(tracing::info_span!("gralkor.remove_episode"))
            .await
    }

    /// [`Client::build_communities`] against a given snapshot.
    pub async fn build_communities_with(
        &self,
        snapshot: &Snapshot,
        request: &BuildCommunities,
    ) -> Result<CommunityCounts> {
        let t = validate_build_communities(request, snapshot)?;
        self.inner
            .storage
            .build_communities(&t.graph)
            .instrument(tracing::info_span!("gralkor.build_communities"))
            .await
    }
}

fn lens_graph(snapshot: &Snapshot, lens: &Lens, operator_id: &str) -> Result<String> {
    let d: &Destination = snapshot.destination("lens.destination", lens.destination())?;
    d.graph_id(operator_id)
}

async fn run_ingestion(
    storage: Arc<dyn Storage>,
    lens: Lens,
    graph: String,
    request: &Ingest,
) -> Result<Vec<IngestedRepresentation>> {
    let ingestion = lens
        .ingestion()
        .cloned()
        .ok_or_else(|| Error::invalid("lens", "is not an appending Lens"))?;
    let store = LensStore::new(
        storage,
        lens,
        request.operator_id.clone(),
        request.id.clone(),
        graph,
        request.reference_time,
    );
    ingestion.ingest(request, &store).await?;
    Ok(store.written())
}

#[async_trait]
impl Client for StorageClient {
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
    }

    async fn await_background_writes(&self) {
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
            while set.join_next().await.is_some() {}
        }
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
        self.inner
            .storage
            .build_indices()
            .instrument(tracing::info_span!("gralkor.build_indices"))
            .await
    }

    async fn build_communities(&self, request: &BuildCommunities) -> Result<CommunityCounts> {
        self.build_communities_with(&self.runtime().snapshot(), request)
            .await
    }
}
