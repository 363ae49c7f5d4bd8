//! The engine handle: [`Engine`] owns the database handle, the models and the
//! per-graph queues; [`EngineOptions`] are its tunables. The pipeline of one episode is
//! in `pipeline`, its model steps in `work`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use uuid::Uuid;

use crate::falkordb::{FalkorDb, physical_graph_name};
use crate::graph::communities::{CommunityOptions, CommunityReport};
use crate::graph::model::{Episode, EpisodeState};
use crate::graph::store::{self, OwnedNode, OwnedRelationship, ReplaceCounts, ingest as st};
use crate::llm::{Embedder, LanguageModel, Reranker};
use crate::{Error, Result};

/// Tunables of an [`Engine`]. `Default` (or [`EngineOptions::new`]) gives the
/// documented values; the methods named like the fields set one each.
///
/// ```
/// use std::time::Duration;
/// use gralkor::graph::EngineOptions;
///
/// let options = EngineOptions::new()
///     .lease(Duration::from_secs(30))
///     .previous_episodes(2)
///     .summary_budget(600);
/// assert_eq!(options.previous_episodes, 2);
/// assert_eq!(options.fact_candidates, EngineOptions::default().fact_candidates);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EngineOptions {
    /// How long a claim lasts without renewal (server clock); renewed every third of
    /// it while the episode is processed. Default 60 s. `Duration::ZERO` makes every
    /// claim immediately takeable (useful in tests of takeover only).
    pub lease: Duration,
    /// Previous episodes given to extraction as context. Default 4.
    pub previous_episodes: usize,
    /// Candidates per path (exact, vector, fulltext) for each extracted name. Default 10.
    pub entity_candidates: usize,
    /// Related facts offered per new fact as possible contradictions. Default 10.
    pub fact_candidates: usize,
    /// Characters an entity summary may reach before a model call condenses it.
    /// Default 1000.
    pub summary_budget: usize,
    /// Cosine similarity of name embeddings at or above which an existing entity the
    /// deterministic pass did not match is still offered to the model as a possible
    /// duplicate ("Bob Smith" / "Robert Smith"). Default 0.8; above 1 disables it.
    pub entity_similarity: f32,
    /// Stale entries a vector index may gather before the engine rebuilds it (see
    /// `store::debt`): FalkorDB 4.16 leaves one each
    /// time a statement updates a stored entity or fact, and searches ask the index
    /// for that many extra neighbours until the rebuild. Default 256 (about the HNSW
    /// `efRuntime` of 300, so the extra neighbours cost little); 0 rebuilds after
    /// every commit that leaves one.
    pub vector_rebuild_threshold: i64,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            lease: Duration::from_secs(60),
            previous_episodes: 4,
            entity_candidates: 10,
            fact_candidates: 10,
            summary_budget: 1000,
            entity_similarity: 0.8,
            vector_rebuild_threshold: 256,
        }
    }
}

impl EngineOptions {
    /// The documented defaults.
    pub fn new() -> Self {
        EngineOptions::default()
    }

    /// Sets [`lease`](EngineOptions::lease).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets [`previous_episodes`](EngineOptions::previous_episodes).
    pub fn previous_episodes(mut self, n: usize) -> Self {
        self.previous_episodes = n;
        self
    }

    /// Sets [`entity_candidates`](EngineOptions::entity_candidates).
    pub fn entity_candidates(mut self, n: usize) -> Self {
        self.entity_candidates = n;
        self
    }

    /// Sets [`fact_candidates`](EngineOptions::fact_candidates).
    pub fn fact_candidates(mut self, n: usize) -> Self {
        self.fact_candidates = n;
        self
    }

    /// Sets [`summary_budget`](EngineOptions::summary_budget).
    pub fn summary_budget(mut self, chars: usize) -> Self {
        self.summary_budget = chars;
        self
    }

    /// Sets [`entity_similarity`](EngineOptions::entity_similarity).
    pub fn entity_similarity(mut self, similarity: f32) -> Self {
        self.entity_similarity = similarity;
        self
    }

    /// Sets [`vector_rebuild_threshold`](EngineOptions::vector_rebuild_threshold).
    pub fn vector_rebuild_threshold(mut self, stale: i64) -> Self {
        self.vector_rebuild_threshold = stale;
        self
    }
}

/// The graph engine: the database handle, the models and the per-graph queues in one
/// handle. Cheap to clone (clones share the queues, the models and the database
/// handle); the graph is named per call.
///
/// ```
/// use gralkor::graph::Engine;
/// use gralkor::llm::doubles::{HashEmbedder, ScriptedModel};
/// use std::sync::Arc;
///
/// # async fn run(db: gralkor::falkordb::FalkorDb) {
/// let full = Engine::new(db.clone(), Arc::new(ScriptedModel::new()), Arc::new(HashEmbedder::new(64)));
/// assert!(full.extracts());
/// let quick = Engine::episodes_only(db);
/// assert!(!quick.extracts());
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Engine {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) db: FalkorDb,
    pub(super) llm: Option<Arc<dyn LanguageModel>>,
    pub(super) embedder: Option<Arc<dyn Embedder>>,
    pub(super) reranker: Option<Arc<dyn Reranker>>,
    pub(super) options: EngineOptions,
    /// This engine's claim owner id (one per engine, shared by its clones).
    pub(super) writer: String,
    queues: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("db", &self.db)
            .field("llm", &self.llm)
            .field("embedder", &self.embedder)
            .field("reranker", &self.reranker)
            .field("options", &self.options)
            .field("writer", &self.writer)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine on `db` that extracts with `llm` and embeds with `embedder`.
    pub fn new(db: FalkorDb, llm: Arc<dyn LanguageModel>, embedder: Arc<dyn Embedder>) -> Engine {
        Engine::build(db, Some(llm), Some(embedder))
    }

    /// An engine on `db` without models: [`add_episode`](Engine::add_episode) stores
    /// episodes (searchable by their text) and leaves them pending for an engine with
    /// models to [`resume`](Engine::resume_pending). It creates no vector index.
    pub fn episodes_only(db: FalkorDb) -> Engine {
        Engine::build(db, None, None)
    }

    /// An engine on `db` with an embedder and no language model: it extracts nothing,
    /// but [`add_episode`](Engine::add_episode) stores each episode with its content
    /// embedding (one embedding request), so episode searches are hybrid (fulltext and
    /// vector, fused). Episodes stay pending for an engine with a language model to
    /// [`resume`](Engine::resume_pending). This is the offline engine: with the
    /// in-process embedder (feature `local-embedder`) it needs no network at all.
    ///
    /// ```
    /// use gralkor::graph::Engine;
    /// use gralkor::llm::doubles::HashEmbedder;
    /// use std::sync::Arc;
    ///
    /// # async fn run(db: gralkor::falkordb::FalkorDb) {
    /// let offline = Engine::without_llm(db, Arc::new(HashEmbedder::new(64)));
    /// assert!(!offline.extracts());
    /// assert!(offline.embedder().is_some());
    /// # }
    /// ```
    pub fn without_llm(db: FalkorDb, embedder: Arc<dyn Embedder>) -> Engine {
        Engine::build(db, None, Some(embedder))
    }

    fn build(
        db: FalkorDb,
        llm: Option<Arc<dyn LanguageModel>>,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> Engine {
        Engine {
            inner: Arc::new(Inner {
                db,
                llm,
                embedder,
                reranker: None,
                options: EngineOptions::default(),
                writer: store::owner::new_owner_id(),
                queues: Arc::default(),
            }),
        }
    }

    /// The same database handle and models with other options (and a queue and claim
    /// owner id of its own).
    pub fn with_options(self, options: EngineOptions) -> Engine {
        let inner = &self.inner;
        Engine {
            inner: Arc::new(Inner {
                db: inner.db.clone(),
                llm: inner.llm.clone(),
                embedder: inner.embedder.clone(),
                reranker: inner.reranker.clone(),
                options,
                writer: store::owner::new_owner_id(),
                queues: Arc::default(),
            }),
        }
    }

    /// The same engine with a cross-encoder `reranker` for [`search`](Engine::search)
    /// (the recipes that rerank by cross-encoder need one). It keeps the queues and the
    /// claim owner id: ingestion does not use the reranker.
    pub fn with_reranker(self, reranker: Arc<dyn Reranker>) -> Engine {
        let inner = &self.inner;
        Engine {
            inner: Arc::new(Inner {
                db: inner.db.clone(),
                llm: inner.llm.clone(),
                embedder: inner.embedder.clone(),
                reranker: Some(reranker),
                options: inner.options.clone(),
                writer: inner.writer.clone(),
                queues: inner.queues.clone(),
            }),
        }
    }

    /// The database handle.
    pub fn db(&self) -> &FalkorDb {
        &self.inner.db
    }

    /// The language model, if this engine extracts.
    pub fn llm(&self) -> Option<&Arc<dyn LanguageModel>> {
        self.inner.llm.as_ref()
    }

    /// The embedder, if this engine has one: it embeds episodes, extracted names and
    /// facts, and search queries.
    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.inner.embedder.as_ref()
    }

    /// The cross-encoder reranker, if one was given ([`with_reranker`](Engine::with_reranker)).
    pub fn reranker(&self) -> Option<&Arc<dyn Reranker>> {
        self.inner.reranker.as_ref()
    }

    /// The options in force.
    pub fn options(&self) -> &EngineOptions {
        &self.inner.options
    }

    /// Whether this engine extracts (has models) rather than storing episodes only.
    pub fn extracts(&self) -> bool {
        self.inner.llm.is_some()
    }

    /// The graphs on the database server, in the server's order.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// for graph in engine.list_graphs().await? {
    ///     println!("{graph}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_graphs(&self) -> Result<Vec<String>> {
        self.inner.db.list_graphs().await
    }

    /// Every Lens-owned node of `graph` with its owner, ordered by owner then id (see
    /// `store::owned::all_owned_nodes`).
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// for (lens, node) in engine.owned_nodes("global").await? {
    ///     println!("{lens}: {}", node.id);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn owned_nodes(&self, graph: &str) -> Result<Vec<(String, OwnedNode)>> {
        store::owned::all_owned_nodes(&self.inner.db, graph).await
    }

    /// Replaces everything `owner` owns in `graph` with `nodes` and `relationships`,
    /// atomically (see `store::replace_owned`).
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// use std::collections::BTreeMap;
    /// use gralkor::graph::OwnedNode;
    ///
    /// let node = OwnedNode { id: "payments".into(), labels: vec!["System".into()],
    ///                        properties: BTreeMap::from([("name".into(), "Payments".into())]) };
    /// engine.replace_owned("global", "systems", &[node], &[]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn replace_owned(
        &self,
        graph: &str,
        owner: &str,
        nodes: &[OwnedNode],
        relationships: &[OwnedRelationship],
    ) -> Result<ReplaceCounts> {
        store::replace_owned(&self.inner.db, graph, owner, nodes, relationships).await
    }

    /// The quarantined episodes of `graph`, oldest reference time first: episodes
    /// whose commits the database server never answered
    /// ([`Error::EpisodeQuarantined`]). They stay stored and searchable by their
    /// text; [`resume_pending`](Engine::resume_pending) skips them.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// for uuid in engine.quarantined("notes").await? {
    ///     println!("quarantined: {uuid}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn quarantined(&self, graph: &str) -> Result<Vec<Uuid>> {
        physical_graph_name(graph)?;
        st::episodes_in(&self.inner.db, graph, EpisodeState::Quarantined).await
    }

    /// Makes a quarantined episode pending again, for [`resume_pending`](Engine::resume_pending)
    /// or a replay to process (after upgrading the server that crashed on it, say);
    /// `false` when it is not quarantined.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine, id: uuid::Uuid) -> gralkor::Result<()> {
    /// if engine.release_quarantined("notes", id).await? {
    ///     engine.resume_pending("notes", None).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release_quarantined(&self, graph: &str, uuid: Uuid) -> Result<bool> {
        physical_graph_name(graph)?;
        let queue = self.queue(graph);
        let _turn = queue.lock().await;
        st::release_quarantined(&self.inner.db, graph, uuid).await
    }

    /// Removes an episode and what only it supported; see `store::remove_episode`.
    /// Waits for the graph's queue, so it never interleaves with an ingestion.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine, id: uuid::Uuid) -> gralkor::Result<()> {
    /// let removal = engine.remove_episode("notes", id).await?;
    /// assert!(removal.episode);
    /// # Ok(()) }
    /// ```
    pub async fn remove_episode(&self, graph: &str, uuid: Uuid) -> Result<store::Removal> {
        physical_graph_name(graph)?;
        let queue = self.queue(graph);
        let _turn = queue.lock().await;
        store::remove_episode(&self.inner.db, graph, uuid).await
    }

    /// Rebuilds the communities of `graph` with this engine's models (see
    /// `build_communities`), queued with the graph's
    /// episodes so it never reads a half-processed graph. Without a language model, a
    /// graph with no entities has nothing to cluster (an empty report); one with
    /// entities is [`Error::Config`]: naming communities needs the model.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// use gralkor::graph::CommunityOptions;
    ///
    /// let report = engine.build_communities("notes", &CommunityOptions::default()).await?;
    /// println!("{} communities", report.communities);
    /// # Ok(()) }
    /// ```
    pub async fn build_communities(
        &self,
        graph: &str,
        options: &CommunityOptions,
    ) -> Result<CommunityReport> {
        physical_graph_name(graph)?;
        if !self.extracts() && !self.has_entities(graph).await? {
            // Nothing was extracted, so there is nothing to cluster: not an error
            // without a language model, as for the in-memory twin.
            return Ok(CommunityReport::default());
        }
        let (llm, embedder) = self.models()?;
        let queue = self.queue(graph);
        let _turn = queue.lock().await;
        crate::graph::build_communities(&self.inner.db, graph, llm, embedder, options).await
    }

    /// The episode with `uuid`, if any.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine, id: uuid::Uuid) -> gralkor::Result<()> {
    /// if let Some(ep) = engine.get_episode("notes", id).await? {
    ///     println!("{}", ep.content);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_episode(&self, graph: &str, uuid: Uuid) -> Result<Option<Episode>> {
        store::get_episode(&self.inner.db, graph, uuid).await
    }

    /// The uuids of the episodes of session `session` in `graph`, oldest first (none
    /// when the graph does not exist).
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// for id in engine.session_episodes("notes", "session-1").await? {
    ///     engine.remove_episode("notes", id).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn session_episodes(&self, graph: &str, session: &str) -> Result<Vec<Uuid>> {
        store::session_episodes(&self.inner.db, graph, session).await
    }

    /// Deletes `graph` entirely and forgets that its indices were built.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// engine.clear("scratch").await?;
    /// # Ok(()) }
    /// ```
    pub async fn clear(&self, graph: &str) -> Result<bool> {
        let queue = self.queue(graph);
        let _turn = queue.lock().await;
        store::clear(&self.inner.db, graph).await
    }

    /// What `graph` holds: episodes (and how many are pending), entities, facts and
    /// communities; all zero when the graph does not exist.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// let counts = engine.counts("notes").await?;
    /// println!("{} episodes, {} facts", counts.episodes, counts.facts);
    /// # Ok(()) }
    /// ```
    pub async fn counts(&self, graph: &str) -> Result<crate::graph::GraphCounts> {
        physical_graph_name(graph)?;
        store::counts(&self.inner.db, graph).await
    }

    /// The uuids and extraction states of the most recently created episodes of
    /// `graph`, newest first: the `skip` newest are passed over and at most `last`
    /// returned (none when the graph does not exist).
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// for (uuid, state) in engine.recent_episodes("notes", 0, 10).await? {
    ///     println!("{uuid} {}", state.as_str());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn recent_episodes(
        &self,
        graph: &str,
        skip: usize,
        last: usize,
    ) -> Result<Vec<(Uuid, crate::graph::EpisodeState)>> {
        physical_graph_name(graph)?;
        store::recent_episodes(&self.inner.db, graph, skip, last).await
    }

    /// Every entity of `graph` (ordered by name, then uuid) and every fact, current
    /// or invalidated (ordered by creation, then uuid): the whole graph, for export
    /// and evaluation. Empty when the graph does not exist.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// let (entities, facts) = engine.contents("notes").await?;
    /// println!("{} entities, {} facts", entities.len(), facts.len());
    /// # Ok(()) }
    /// ```
    pub async fn contents(
        &self,
        graph: &str,
    ) -> Result<(Vec<crate::graph::EntityNode>, Vec<crate::graph::EntityEdge>)> {
        physical_graph_name(graph)?;
        store::contents(&self.inner.db, graph).await
    }

    /// The facts of `graph` with these uuids that exist, in the order asked for.
    ///
    /// ```no_run
    /// # async fn run(engine: gralkor::graph::Engine, id: uuid::Uuid) -> gralkor::Result<()> {
    /// let found = engine.get_facts("notes", &[id]).await?;
    /// # let _ = found; Ok(()) }
    /// ```
    pub async fn get_facts(
        &self,
        graph: &str,
        uuids: &[Uuid],
    ) -> Result<Vec<crate::graph::EntityEdge>> {
        physical_graph_name(graph)?;
        store::get_facts(&self.inner.db, graph, uuids).await
    }

    /// Whether `graph` holds any entity (reading only; a missing graph holds none).
    async fn has_entities(&self, graph: &str) -> Result<bool> {
        store::has_entities(&self.inner.db, graph).await
    }

    pub(super) fn queue(&self, graph: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut queues = self.inner.queues.lock().expect("poisoned");
        queues.retain(|_, q| Arc::strong_count(q) > 1);
        queues.entry(graph.to_owned()).or_default().clone()
    }

    pub(super) fn models(&self) -> Result<(&dyn LanguageModel, &dyn Embedder)> {
        match (&self.inner.llm, &self.inner.embedder) {
            (Some(l), Some(e)) => Ok((l.as_ref(), e.as_ref())),
            _ => Err(Error::config(
                "language model",
                "is required to extract: this engine stores episodes only",
            )),
        }
    }
}
