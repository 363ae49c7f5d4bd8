//! The door: the one guarded write path of the memory API.
//!
//! Every write of the client logic — an `ingest`'s Lens process, a `memory_add`
//! (direct or through a Lens), a `replace`, the capture buffer's writes, community
//! detection and the extraction of pending episodes — passes here, in four steps:
//!
//! 1. *validate*: done by the caller's `validate_*`, which resolves the graph the
//!    [`Entry`] names (so nothing unvalidated reaches the door);
//! 2. *authorize*: [`MemoryClient::door`] checks `contribute` on that graph for the
//!    subject (with an authorizer the subject is required) and hands back a [`Door`]:
//!    the only value that can write, so no write skips the check;
//! 3. *write* through the storage port ([`Door::add_episode`],
//!    [`Door::run_process`], [`Door::replace_graph`], [`Door::build_communities`],
//!    [`Door::extract_pending`]);
//! 4. *record* the fragment of every episode written (`source_group`, `shared_by` =
//!    the subject, `involves`) — also when the write fails midway: a Lens process
//!    that wrote and then failed leaves episodes its writer can `remove_episode`.
//!
//! Then it reports what was written (the stored episodes with their cost) or the
//! write's error.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::memory::MemoryClient;
use crate::access::Subject;
use crate::lens::{Graph, Ingest, IngestedRepresentation, Lens, LensStore};
use crate::ontology::Ontology;
use crate::storage::{
    CommunityCounts, ExtractionReport, GraphId, NewEpisode, OperatorId, Storage, StoredEpisode,
};
use crate::{Error, Result};

/// Who writes where: the subject, the operator and the graph a validated request
/// resolved to, and whom the written episodes concern.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    subject: Option<Subject>,
    operator: OperatorId,
    graph: GraphId,
    involves: Vec<Subject>,
}

impl Entry {
    /// `subject` writing to `graph` for `operator`.
    pub(crate) fn new(subject: Option<&Subject>, operator: &OperatorId, graph: GraphId) -> Entry {
        Entry {
            subject: subject.cloned(),
            operator: operator.clone(),
            graph,
            involves: Vec::new(),
        }
    }

    /// The people and agents the written episodes concern (they may view them).
    pub(crate) fn involves(mut self, involves: &[Subject]) -> Entry {
        self.involves = involves.to_vec();
        self
    }
}

/// An [`Entry`] the client let through: the subject may `contribute` to the graph (or
/// the client has no authorizer). Only [`MemoryClient::door`] makes one, and every
/// write of the client logic is a method of it. Owns a clone of the client, so a
/// background write can take it along.
pub(crate) struct Door<S> {
    client: MemoryClient<S>,
    entry: Entry,
    /// The subject the fragments name: `Some` exactly when the client has an
    /// authorizer.
    recorded_as: Option<Subject>,
}

impl<S> std::fmt::Debug for Door<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Door")
            .field("entry", &self.entry)
            .finish_non_exhaustive()
    }
}

impl<S: Storage> MemoryClient<S> {
    /// Steps 1–2 of every write: with an authorizer, the entry's subject is required
    /// and needs `contribute` on its graph ([`Error::PermissionDenied`] otherwise,
    /// nothing written); without one, every entry passes.
    pub(crate) async fn door(&self, entry: Entry) -> Result<Door<S>> {
        let recorded_as = match self.guard(entry.subject.as_ref())? {
            Some((access, subject)) => {
                access
                    .may_contribute(subject, &entry.operator, &entry.graph)
                    .await?;
                Some(subject.clone())
            }
            None => None,
        };
        Ok(Door {
            client: self.clone(),
            entry,
            recorded_as,
        })
    }

    /// Step 4 for writes made elsewhere: the fragment relationships of `episodes`,
    /// written to `graph` as `subject` (nothing without an authorizer).
    pub(crate) async fn record_fragments(
        &self,
        subject: Option<&Subject>,
        graph: &GraphId,
        episodes: impl IntoIterator<Item = Uuid>,
        involves: &[Subject],
    ) -> Result<()> {
        match self.guard(subject)? {
            Some((access, subject)) => access.record(subject, graph, episodes, involves).await,
            None => Ok(()),
        }
    }
}

impl<S: Storage> Door<S> {
    /// The graph this door writes to.
    pub(crate) fn graph(&self) -> &GraphId {
        &self.entry.graph
    }

    /// Records the fragments of `episodes` (nothing without an authorizer; each
    /// authorizer retries its own writes on a fault).
    async fn record(&self, episodes: Vec<Uuid>) -> Result<()> {
        let (Some(subject), Some(access)) = (&self.recorded_as, self.client.access()) else {
            return Ok(());
        };
        if episodes.is_empty() {
            return Ok(());
        }
        access
            .record(subject, &self.entry.graph, episodes, &self.entry.involves)
            .await
    }

    /// Writes one episode to the door's graph and records its fragment.
    pub(crate) async fn add_episode(&self, episode: NewEpisode) -> Result<StoredEpisode> {
        if episode.graph != self.entry.graph {
            return Err(Error::invalid(
                "episode.graph",
                format!(
                    "must be the graph the subject was authorized for (`{}`)",
                    self.entry.graph.as_str()
                ),
            ));
        }
        let stored = self.client.dyn_storage().add_episode(episode).await?;
        self.record(vec![stored.uuid]).await?;
        Ok(stored)
    }

    /// Runs an appending Lens's ingestion process for `request` with a store bound to
    /// the door's graph, then records every episode the process wrote — whether it
    /// returned `Ok` or failed after some writes (its error is then returned, and the
    /// episodes it wrote stay, deletable by their writer).
    pub(crate) async fn run_process(
        &self,
        lens: Lens,
        request: &Ingest,
    ) -> Result<Vec<IngestedRepresentation>> {
        let ingestion = lens
            .ingestion()
            .cloned()
            .ok_or_else(|| Error::invalid("lens", "is not an appending Lens"))?;
        let store = LensStore::new(
            self.client.dyn_storage(),
            lens,
            self.entry.operator.clone(),
            request.id.clone(),
            self.entry.graph.clone(),
            request.reference_time,
        )
        .session(request.session_id.clone())
        .custom_instructions(request.custom_instructions.clone());
        let outcome = ingestion.ingest_boxed(request, &store).await;
        // What the process wrote, read after it returned, Ok or not.
        let written = store.written();
        let episodes: Vec<Uuid> = written.iter().map(|w| w.episode).collect();
        match outcome {
            Ok(()) => {
                self.record(episodes).await?;
                Ok(written)
            }
            Err(e) => {
                if let Err(unrecorded) = self.record(episodes.clone()).await {
                    tracing::error!(
                        error = %unrecorded,
                        episodes = ?episodes,
                        "the fragments of a failed ingestion's episodes were not recorded"
                    );
                }
                Err(e)
            }
        }
    }

    /// Replaces replace-graph Lens `lens`'s whole graph at the door's graph.
    pub(crate) async fn replace_graph(&self, lens: &str, graph: &Graph) -> Result<()> {
        self.client
            .dyn_storage()
            .replace_graph(&self.entry.graph, lens, graph)
            .await
    }

    /// Detects the communities of the door's graph.
    pub(crate) async fn build_communities(&self) -> Result<CommunityCounts> {
        self.client
            .dyn_storage()
            .build_communities(&self.entry.graph)
            .await
    }

    /// Extracts the door's graph's pending episodes, each with the ontology its
    /// writer key maps to.
    pub(crate) async fn extract_pending(
        &self,
        ontologies: &BTreeMap<String, Ontology>,
    ) -> Result<ExtractionReport> {
        self.client
            .dyn_storage()
            .extract_pending(&self.entry.graph, ontologies)
            .await
    }
}
