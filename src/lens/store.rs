//! The Lens-bound store an ingestion process writes through.

use std::sync::{Arc, Mutex};

use uuid::Uuid;

use super::{IngestedRepresentation, Lens};
use crate::Result;
use crate::graph::Timestamp;
use crate::provenance::Writer;
use crate::storage::{
    Content, EpisodeRecord, GraphId, GraphQuery, Hit, NewEpisode, OperatorId, ResultType, Storage,
    validate_content, validate_max_results, validate_query, validate_source_description,
};

/// A store bound to one operator, one appending Lens and one ingestion request. Every
/// [`add`](LensStore::add) writes to the Lens's Destination graph, with the Lens's
/// ontology and the Lens's provenance marker; [`search`](LensStore::search) reads that
/// graph.
pub struct LensStore {
    operator_id: OperatorId,
    ingest_id: String,
    lens: Lens,
    destination: String,
    graph: GraphId,
    reference_time: Option<Timestamp>,
    session: Option<String>,
    instructions: Option<String>,
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
    /// resolves, for `operator_id`, to `graph`; the client builds it after
    /// validating the request.
    pub fn new(
        storage: Arc<dyn Storage>,
        lens: Lens,
        operator_id: OperatorId,
        ingest_id: impl Into<String>,
        graph: GraphId,
        reference_time: Option<Timestamp>,
    ) -> LensStore {
        LensStore {
            instructions: lens.custom_instructions().map(str::to_owned),
            operator_id,
            ingest_id: ingest_id.into(),
            destination: lens.destination().to_string(),
            lens,
            graph,
            reference_time,
            session: None,
            storage,
            written: Mutex::new(Vec::new()),
        }
    }

    /// Records `session` on every episode it writes (the ingestion's
    /// [`session_id`](crate::lens::Ingest#structfield.session_id)).
    pub fn session(mut self, session: Option<String>) -> LensStore {
        self.session = session;
        self
    }

    /// Extracts every episode it writes with the request's custom instructions, when it
    /// has some, in place of the Lens's.
    pub(crate) fn custom_instructions(mut self, instructions: Option<String>) -> LensStore {
        if instructions.is_some() {
            self.instructions = instructions;
        }
        self
    }

    /// The operator.
    pub fn operator_id(&self) -> &OperatorId {
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
    /// use gralkor::storage::Content;
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
        let episode = NewEpisode::new(
            self.graph.clone(),
            writer,
            content.clone(),
            source_description,
            self.reference_time,
        )
        .ontology(ontology)
        .replay_key(format!("{}#{}", self.ingest_id, self.written_count()))
        .session(self.session.clone())
        .instructions(self.instructions.clone());
        let stored = self.storage.add_episode(episode).await?;
        self.written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(IngestedRepresentation {
                id: self.ingest_id.clone(),
                lens: self.lens.name().to_string(),
                content,
                episode: stored.uuid,
                cost: stored.cost,
            });
        Ok(stored.uuid)
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
        let query = GraphQuery::new(query, ResultType::Episodes, max_results);
        let hits = self
            .storage
            .search(std::slice::from_ref(&self.graph), &query)
            .await?
            .into_iter()
            .flatten()
            .map(|h| h.hit);
        Ok(hits
            .filter_map(|h| match h {
                Hit::Episode(e) => Some(e),
                _ => None,
            })
            .collect())
    }

    /// The episodes written so far, in write order. The client reads them after the
    /// ingestion process returns — also when it failed — and records each one's
    /// fragment, so what a failed process wrote stays deletable by its writer.
    pub fn written(&self) -> Vec<IngestedRepresentation> {
        self.written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
