//! The Lens-bound store an ingestion process writes through.

use std::sync::{Arc, Mutex};

use uuid::Uuid;

use super::Lens;
use crate::Result;
use crate::client::validate::{validate_max_results, validate_query};
use crate::client::{
    Content, EpisodeRecord, GraphQuery, Hit, IngestedRepresentation, NewEpisode, ResultType,
    Storage, validate_content, validate_source_description,
};
use crate::graph::Timestamp;
use crate::provenance::{self, Writer};

/// A store bound to one operator, one appending Lens and one ingestion request. Every
/// [`add`](LensStore::add) writes to the Lens's Destination graph, with the Lens's
/// ontology and the Lens's provenance marker; [`search`](LensStore::search) reads that
/// graph.
pub struct LensStore {
    operator_id: String,
    ingest_id: String,
    lens: Lens,
    destination: String,
    graph: String,
    reference_time: Option<Timestamp>,
    storage: Arc<dyn Storage>,
    written: Mutex<Vec<IngestedRepresentation>>,
}

impl std::fmt::Debug for LensStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LensStore")
            .field("operator_id", &self.operator_id)
            .field("lens", &self.lens.name())
            .field("graph", &self.graph)
            .finish()
    }
}

impl LensStore {
    fn written_count(&self) -> usize {
        self.written.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// A store for one ingestion. `lens` must be an appending Lens whose Destination
    /// resolves, for this operator, to the logical `graph`; client implementations
    /// build it after [`validate_ingest`](crate::client::validate_ingest).
    pub fn new(
        storage: Arc<dyn Storage>,
        lens: Lens,
        operator_id: impl Into<String>,
        ingest_id: impl Into<String>,
        graph: impl Into<String>,
        reference_time: Option<Timestamp>,
    ) -> LensStore {
        LensStore {
            operator_id: operator_id.into(),
            ingest_id: ingest_id.into(),
            destination: lens.destination().to_string(),
            lens,
            graph: graph.into(),
            reference_time,
            storage,
            written: Mutex::new(Vec::new()),
        }
    }

    /// The operator.
    pub fn operator_id(&self) -> &str {
        &self.operator_id
    }

    /// The Lens's name.
    pub fn lens(&self) -> &str {
        self.lens.name()
    }

    /// The Destination's name.
    pub fn destination(&self) -> &str {
        &self.destination
    }

    /// Writes one episode: `content` (checked like a request's content) described by
    /// `source_description`, which gets the Lens's ` [lens: <name>]` marker. Returns
    /// the episode's uuid.
    ///
    /// ```no_run
    /// # async fn run(store: &gralkor::lens::LensStore) -> gralkor::Result<()> {
    /// use gralkor::client::Content;
    /// let uuid = store.add(Content::document("We chose Friday."), "release planning").await?;
    /// # let _ = uuid; Ok(()) }
    /// ```
    pub async fn add(&self, content: Content, source_description: &str) -> Result<Uuid> {
        validate_content("content", &content)?;
        let writer = Writer::Lens(self.lens.name().to_string());
        validate_source_description("source_description", source_description, &writer)?;
        let ontology = self
            .lens
            .ontology()
            .cloned()
            .unwrap_or_else(crate::ontology::Ontology::generic);
        let uuid = self
            .storage
            .add_episode(NewEpisode {
                graph: self.graph.clone(),
                destination: self.destination.clone(),
                content: content.clone(),
                stored_description: provenance::lens_description(
                    source_description,
                    self.lens.name(),
                ),
                writer,
                ontology,
                reference_time: self.reference_time.unwrap_or_else(Timestamp::now),
                reference_time_given: self.reference_time.is_some(),
                replay_key: Some(format!("{}#{}", self.ingest_id, self.written_count())),
            })
            .await?;
        self.written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(IngestedRepresentation {
                id: self.ingest_id.clone(),
                lens: self.lens.name().to_string(),
                content,
                episode: uuid,
            });
        Ok(uuid)
    }

    /// Searches the episodes of the Lens's Destination graph (every writer), at most
    /// `max_results` (1 to [`MAX_RESULTS_LIMIT`](crate::client::MAX_RESULTS_LIMIT)) of
    /// them. The query is checked like a [`Search`](crate::client::Search)'s: non-blank,
    /// no NUL characters.
    ///
    /// ```no_run
    /// # async fn run(store: &gralkor::lens::LensStore) -> gralkor::Result<()> {
    /// let earlier = store.search("release day", 5).await?;
    /// # let _ = earlier; Ok(()) }
    /// ```
    pub async fn search(&self, query: &str, max_results: usize) -> Result<Vec<EpisodeRecord>> {
        validate_query("query", query)?;
        validate_max_results("max_results", max_results)?;
        let hits = self
            .storage
            .search(
                &self.graph,
                &GraphQuery {
                    query: query.to_string(),
                    result_type: ResultType::Episodes,
                    lenses: Vec::new(),
                    limit: max_results,
                },
            )
            .await?;
        Ok(hits
            .into_iter()
            .filter_map(|h| match h {
                Hit::Episode(e) => Some(e),
                _ => None,
            })
            .collect())
    }

    /// The episodes written so far, in write order.
    pub fn written(&self) -> Vec<IngestedRepresentation> {
        self.written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
