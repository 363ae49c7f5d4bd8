//! The ingestion engine: [`Engine::add_episode`] turns an episode into entities and
//! facts, durably, idempotently, and with a bounded number of model calls.
//!
//! ## The pipeline of one episode
//!
//! 1. **Durable first.** The episode is written as `pending` (and is at once
//!    searchable by its text) before any model call. Whatever happens next — a crash, a
//!    429 storm, a missing model — the episode is never lost and the graph is never half
//!    written; [`Engine::resume_pending`] finishes pending episodes later.
//! 2. **Claim.** The writer claims the episode in the graph (a lease on the server's
//!    clock, renewed in the background, and a generation fence; see *The claim* below),
//!    so two processes cannot both process it and a writer that lost its claim cannot
//!    commit.
//! 3. **Extraction** — language-model call 1 ([`extract`](super::extract())): entities
//!    and facts together, with the graph's latest previous episodes as context.
//! 4. **Embeddings** — embedding request 1: every extracted name and fact text in one
//!    batch.
//! 5. **Entity resolution**: candidates for all names in one pipeline
//!    ([`entity_candidates`](super::entity_candidates)), the deterministic pass of
//!    [`dedup`](super::dedup) (exact normalised names, MinHash/Jaccard), then —
//!    language-model call 2, only when some name is still ambiguous (several or
//!    low-information matches, or an unmatched name whose embedding is close to an
//!    existing entity's, see [`EngineOptions::entity_similarity`]) — one batched call.
//!    A merge keeps the union of labels and the existing attributes.
//! 6. **Fact resolution**: for all new facts at once, the current facts between the
//!    same entities (possible duplicates) and the nearest current facts touching
//!    either entity (possible contradictions), then — call 3, only when some fact has
//!    candidates — one batched call that marks duplicates and contradictions. A
//!    duplicate adds the episode to the existing fact; contradictions go through
//!    [`temporal`](super::temporal)'s invalidation rules.
//! 7. **Details**: an entity's summary grows by the sentences of its new facts; call 4,
//!    only when needed, condenses every summary that outgrew
//!    [`EngineOptions::summary_budget`] and fills the ontology attributes of typed
//!    entities that learned something.
//! 8. **Commit**: entities, facts, fact updates, `MENTIONS` and the completion marker
//!    in one atomic statement, fenced by the claim's generation.
//!
//! So an episode costs **at most 4 language-model calls and 1 embedding request**
//! whatever the number of entities and facts it yields; [`IngestUsage`] reports the
//! exact counts. (Graphiti makes about 3 + M calls for M facts.)
//!
//! ## The claim
//!
//! An `Episodic` node carries three bookkeeping properties besides its data:
//! `generation` (how many times a writer has claimed it), `lease_owner` (the writer
//! holding the claim) and `lease_until` (milliseconds on the **server's** clock,
//! `timestamp()`, so writers on machines with skewed clocks agree). A writer claims a
//! pending episode only when no live lease exists, and the claim bumps `generation`;
//! renewing and committing both require the generation the writer claimed, so a writer
//! whose lease lapsed and was taken over can neither renew nor commit (the *fence*).
//! A unique constraint on `Episodic.uuid`, created with the graph's indices, makes the
//! server itself refuse a second episode node with the same uuid, whoever writes it.
//!
//! ## Why the commit is atomic
//!
//! The commit is **one** `GRAPH.QUERY`. FalkorDB runs a write query under the
//! graph's write lock, so no other query observes it half done, and when any clause
//! fails at run time it rolls back every change the query made (checked by
//! `graph_ingest`'s tests: a failing statement leaves the graph unchanged). Redis
//! appends the command to the AOF as one entry, so a crash either replays all of it or
//! none. The statement starts with the fence — `MATCH` of the pending episode at the
//! claimed generation — and every write hangs off that one row, so a fenced-out writer's
//! query matches nothing and writes nothing. The completion marker (`state =
//! 'complete'`) is set by the same statement.
//!
//! ## Idempotency and concurrency
//!
//! With a caller-supplied uuid ([`AddEpisode::uuid`]) a request can be replayed: an
//! equal, complete episode returns at once without model calls
//! ([`OutcomeStatus::Replayed`]); an equal pending one is resumed; one whose content,
//! source kind, description or reference time differs fails with
//! [`Error::EpisodeConflict`] and writes nothing. Another live writer holding the claim
//! gives [`Error::EpisodeBusy`]; losing the claim mid-way gives [`Error::ClaimLost`].
//!
//! Episodes to one graph are processed one at a time within a process (every clone of
//! an [`Engine`] shares the queue), so two concurrent episodes naming a new "Alice"
//! create one node; episodes to different graphs run in parallel. Across processes the
//! claim keeps one episode from being processed twice, and the commit keeps two
//! processes ingesting *different* episodes at once from creating the same entity
//! twice: it also checks that none of the names the episode creates anew (names no
//! stored entity had when its candidates were read) has appeared since. If one has —
//! another process created it — the statement writes nothing, and the episode is
//! resolved again (extraction and embeddings are kept; resolution may ask its
//! follow-up calls again, which `usage` counts) and now merges into that entity. After
//! three such races in a row the commit goes ahead without the check.

mod details;
mod entities;
mod facts;
mod lease;
mod triplet;

pub use triplet::{Triplet, TripletEntity, TripletOutcome};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::Instrument;
use uuid::Uuid;

use super::extract::{ExtractionInput, extract};
use super::model::{EntityEdge, EntityNode, Episode, EpisodeState, SourceKind, Timestamp};
use super::store::{self, ingest as st};
use crate::falkordb::{FalkorDb, IndexEntity, IndexKind, physical_graph_name};
use crate::llm::{Embedder, LanguageModel, TokenUsage};
use crate::ontology::Ontology;
use crate::{Error, Result};

/// Largest episode content accepted, in bytes.
pub const MAX_CONTENT_BYTES: usize = 1 << 20;

/// Largest source description accepted, in bytes.
pub const MAX_SOURCE_DESCRIPTION_BYTES: usize = 4096;

/// Tunables of an [`Engine`]. `Default` gives the documented values.
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
    /// [`store::debt`](crate::graph::store::VectorIndex)): FalkorDB 4.16 leaves one each
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

/// One episode to ingest. Build with [`AddEpisode::new`] and the setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AddEpisode {
    /// A caller-chosen uuid that makes the request replay-safe; a fresh one otherwise.
    pub uuid: Option<Uuid>,
    /// The text (for [`SourceKind::Json`], a JSON document).
    pub content: String,
    /// What kind of text it is.
    pub source: SourceKind,
    /// Where it came from (may be empty).
    pub source_description: String,
    /// When it happened in the world; relative times resolve against it.
    pub reference_time: Timestamp,
    /// Entity and relationship types; the generic ontology when `None`.
    pub ontology: Option<Ontology>,
    /// Entity type labels not to extract.
    pub excluded_types: Vec<String>,
    /// Extra instructions appended to the extraction prompt.
    pub instructions: Option<String>,
}

impl AddEpisode {
    /// An episode of `content` of kind `source` that happened at `reference_time`.
    pub fn new(content: impl Into<String>, source: SourceKind, reference_time: Timestamp) -> Self {
        AddEpisode {
            uuid: None,
            content: content.into(),
            source,
            source_description: String::new(),
            reference_time,
            ontology: None,
            excluded_types: Vec::new(),
            instructions: None,
        }
    }

    /// Sets the replay-safe uuid.
    pub fn uuid(mut self, uuid: Uuid) -> Self {
        self.uuid = Some(uuid);
        self
    }

    /// Sets the source description.
    pub fn source_description(mut self, description: impl Into<String>) -> Self {
        self.source_description = description.into();
        self
    }

    /// Sets the ontology.
    pub fn ontology(mut self, ontology: Ontology) -> Self {
        self.ontology = Some(ontology);
        self
    }

    /// Sets the entity types not to extract.
    pub fn excluded_types(mut self, labels: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.excluded_types = labels.into_iter().map(Into::into).collect();
        self
    }

    /// Sets extra extraction instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Checks the request; the error names the field and the rule.
    pub fn validate(&self) -> Result<()> {
        if self.content.trim().is_empty() {
            return Err(Error::invalid("content", "must not be blank"));
        }
        if self.content.len() > MAX_CONTENT_BYTES {
            return Err(Error::invalid(
                "content",
                format!("must be at most {MAX_CONTENT_BYTES} bytes"),
            ));
        }
        if self.source_description.len() > MAX_SOURCE_DESCRIPTION_BYTES {
            return Err(Error::invalid(
                "source_description",
                format!("must be at most {MAX_SOURCE_DESCRIPTION_BYTES} bytes"),
            ));
        }
        for (field, text) in [
            ("content", self.content.as_str()),
            ("source_description", self.source_description.as_str()),
            ("instructions", self.instructions.as_deref().unwrap_or("")),
        ] {
            if text.contains('\0') {
                return Err(Error::invalid(field, "must not contain NUL characters"));
            }
        }
        if self.source == SourceKind::Json
            && !matches!(
                serde_json::from_str::<serde_json::Value>(&self.content),
                Ok(serde_json::Value::Object(_) | serde_json::Value::Array(_))
            )
        {
            return Err(Error::invalid(
                "content",
                "must be a JSON object or array for a json episode",
            ));
        }
        Ok(())
    }
}

/// What one episode cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IngestUsage {
    /// Language-model calls (at most 4 per episode).
    pub llm_calls: u32,
    /// Embedding requests (at most 1 per episode).
    pub embedding_calls: u32,
    /// Tokens the language-model calls used.
    pub tokens: TokenUsage,
    /// Statements or pipelines sent to FalkorDB (each one round trip).
    pub db_round_trips: u32,
}

/// How an [`EpisodeOutcome`] came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutcomeStatus {
    /// Extracted and committed by this call.
    Completed,
    /// The same episode was complete already; nothing was extracted.
    Replayed,
    /// Stored and searchable, extraction not done (an episodes-only engine).
    Pending,
}

/// The result of [`Engine::add_episode`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EpisodeOutcome {
    /// The episode as stored.
    pub episode: Episode,
    /// How the outcome came about.
    pub status: OutcomeStatus,
    /// Entities the episode created or updated (for a replay: the ones it mentions).
    pub entities: Vec<EntityNode>,
    /// Facts the episode created, or existing facts it confirmed (for a replay: its
    /// facts as stored now).
    pub facts: Vec<EntityEdge>,
    /// Existing facts the episode invalidated, as updated (empty for a replay).
    pub invalidated: Vec<EntityEdge>,
    /// What it cost.
    pub usage: IngestUsage,
}

/// The result of [`Engine::resume_pending`].
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ResumeReport {
    /// Episodes finished by this call, oldest first.
    pub completed: Vec<EpisodeOutcome>,
    /// Episodes another live writer holds.
    pub busy: Vec<Uuid>,
    /// Episodes that failed again, with the error; they stay pending — unless the
    /// error is [`Error::EpisodeQuarantined`].
    pub failed: Vec<(Uuid, Error)>,
    /// Episodes quarantined (before this call or by it), which it did not process:
    /// see [`Engine::quarantined`].
    pub quarantined: Vec<Uuid>,
}

/// The graph engine. Cheap to clone (clones share the per-graph queues); the graph
/// and database are passed per call.
///
/// ```
/// use gralkor::graph::Engine;
/// use gralkor::llm::doubles::{HashEmbedder, ScriptedModel};
/// use std::sync::Arc;
///
/// let full = Engine::new(Arc::new(ScriptedModel::new()), Arc::new(HashEmbedder::new(64)));
/// assert!(full.extracts());
/// let quick = Engine::episodes_only();
/// assert!(!quick.extracts());
/// ```
#[derive(Clone, Debug)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    llm: Option<Arc<dyn LanguageModel>>,
    embedder: Option<Arc<dyn Embedder>>,
    options: EngineOptions,
    writer: String,
    queues: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("llm", &self.llm)
            .field("embedder", &self.embedder)
            .field("options", &self.options)
            .field("writer", &self.writer)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine that extracts with `llm` and embeds with `embedder`.
    pub fn new(llm: Arc<dyn LanguageModel>, embedder: Arc<dyn Embedder>) -> Engine {
        Engine::build(Some(llm), Some(embedder))
    }

    /// An engine without models: [`add_episode`](Engine::add_episode) stores episodes
    /// (searchable by their text) and leaves them pending for an engine with models to
    /// [`resume`](Engine::resume_pending). It creates no vector index.
    pub fn episodes_only() -> Engine {
        Engine::build(None, None)
    }

    fn build(llm: Option<Arc<dyn LanguageModel>>, embedder: Option<Arc<dyn Embedder>>) -> Engine {
        Engine {
            inner: Arc::new(Inner {
                llm,
                embedder,
                options: EngineOptions::default(),
                writer: Uuid::new_v4().to_string(),
                queues: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The same models with other options (and a queue of its own).
    pub fn with_options(self, options: EngineOptions) -> Engine {
        Engine {
            inner: Arc::new(Inner {
                llm: self.inner.llm.clone(),
                embedder: self.inner.embedder.clone(),
                options,
                writer: Uuid::new_v4().to_string(),
                queues: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The options in force.
    pub fn options(&self) -> &EngineOptions {
        &self.inner.options
    }

    /// Whether this engine extracts (has models) rather than storing episodes only.
    pub fn extracts(&self) -> bool {
        self.inner.llm.is_some()
    }

    /// Creates the graph's indices (and the unique constraint on episode uuids, and the
    /// vector-debt counters) unless `db` — this handle or a clone — prepared the graph
    /// for an engine of the same embedder dimension since the graph was last deleted
    /// ([`FalkorDb::is_prepared`]), and checks that an existing vector index has the
    /// embedder's dimension. Called by every write; call it yourself to prepare a graph.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::FalkorDb) -> gralkor::Result<()> {
    /// gralkor::graph::Engine::episodes_only().build_indices(&db, "notes").await?;
    /// # Ok(()) }
    /// ```
    pub async fn build_indices(&self, db: &FalkorDb, graph: &str) -> Result<()> {
        physical_graph_name(graph)?;
        let dimension = self.inner.embedder.as_ref().map(|e| e.dimension());
        // Readiness lives with the database handle, which forgets it when the graph
        // is deleted by any path (`FalkorDb::delete_graph`, `graph::clear`, here).
        let prepared = match dimension {
            Some(d) => format!("gralkor.engine:{d}"),
            None => "gralkor.engine:episodes".to_owned(),
        };
        if db.is_prepared(graph, &prepared) {
            return Ok(());
        }
        let specs: Vec<_> =
            store::index_specs(dimension.unwrap_or(1).try_into().unwrap_or(u32::MAX))
                .into_iter()
                .filter(|s| dimension.is_some() || !matches!(s.kind, IndexKind::Vector { .. }))
                .collect();
        db.create_indices(graph, &specs).await?;
        db.create_unique_constraint(graph, &IndexEntity::Node("Episodic".into()), "uuid")
            .await?;
        if dimension.is_some() {
            store::debt::prepare(db, graph).await?;
        }
        if let Some(want) = dimension {
            for index in db.list_indices(graph).await? {
                if let IndexKind::Vector {
                    dimension: have, ..
                } = index.kind
                    && usize::try_from(have).ok() != Some(want)
                {
                    return Err(Error::config(
                        "embedder dimension",
                        format!(
                            "must match graph `{graph}`'s vector index on {:?}.{} ({have} \
                             dimensions, this embedder gives {want}); use the embedder the \
                             graph was built with or clear the graph",
                            index.entity, index.property
                        ),
                    ));
                }
            }
        }
        db.mark_prepared(graph, &prepared);
        Ok(())
    }

    /// Ingests one episode into `graph` (see the [module documentation](self) for the
    /// pipeline, its cost bound and the replay rules).
    ///
    /// Errors: [`Error::InvalidInput`] for a bad request (nothing written),
    /// [`Error::EpisodeConflict`], [`Error::EpisodeBusy`], [`Error::ClaimLost`], and
    /// model or database failures — after which the episode stays pending, stored and
    /// searchable, for a replay or [`Engine::resume_pending`].
    ///
    /// ```
    /// use gralkor::graph::{AddEpisode, Engine, OutcomeStatus, SourceKind, Timestamp};
    /// # async fn run(db: gralkor::FalkorDb) -> gralkor::Result<()> {
    /// let engine = Engine::episodes_only();
    /// let out = engine
    ///     .add_episode(&db, "notes", AddEpisode::new("Alice joined Acme.", SourceKind::Text, Timestamp::now()))
    ///     .await?;
    /// assert_eq!(out.status, OutcomeStatus::Pending);
    /// # Ok(()) }
    /// ```
    pub async fn add_episode(
        &self,
        db: &FalkorDb,
        graph: &str,
        request: AddEpisode,
    ) -> Result<EpisodeOutcome> {
        request.validate()?;
        physical_graph_name(graph)?;
        let queue = self.queue(graph);
        let _turn = queue.lock().await;
        let span = tracing::info_span!("add_episode", graph, uuid = tracing::field::Empty);
        async {
            let mut usage = IngestUsage::default();
            self.build_indices(db, graph).await?;
            let episode = Episode {
                uuid: request.uuid.unwrap_or_else(Uuid::new_v4),
                content: request.content.clone(),
                source: request.source,
                source_description: request.source_description.clone(),
                valid_at: request.reference_time,
                created_at: Timestamp::now(),
                entity_edges: Vec::new(),
                state: EpisodeState::Pending,
            };
            tracing::Span::current().record("uuid", tracing::field::display(episode.uuid));
            let (stored, created) =
                retry("write_pending", || st::write_pending(db, graph, &episode)).await?;
            usage.db_round_trips += 1;
            if !created {
                same_episode(&stored, &episode)?;
                match stored.state {
                    EpisodeState::Complete => return replayed(db, graph, stored, usage).await,
                    EpisodeState::Quarantined => {
                        return Err(Error::EpisodeQuarantined {
                            uuid: stored.uuid,
                            unanswered: st::MAX_UNANSWERED_COMMITS,
                        });
                    }
                    _ => {}
                }
            }
            if !self.extracts() {
                return Ok(EpisodeOutcome {
                    episode: stored,
                    status: OutcomeStatus::Pending,
                    entities: Vec::new(),
                    facts: Vec::new(),
                    invalidated: Vec::new(),
                    usage,
                });
            }
            self.process(db, graph, stored, &request, usage).await
        }
        .instrument(span)
        .await
    }

    /// Finishes every pending episode of `graph`, oldest reference time first, with
    /// `ontology` (the generic one when `None`). Episodes another live writer holds are
    /// reported busy; failures are reported per episode and leave it pending.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::FalkorDb, engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// let report = engine.resume_pending(&db, "notes", None).await?;
    /// println!("{} finished, {} failed", report.completed.len(), report.failed.len());
    /// # Ok(()) }
    /// ```
    pub async fn resume_pending(
        &self,
        db: &FalkorDb,
        graph: &str,
        ontology: Option<&Ontology>,
    ) -> Result<ResumeReport> {
        physical_graph_name(graph)?;
        if !self.extracts() {
            return Err(Error::config(
                "language model",
                "is required to finish pending episodes: this engine stores episodes only",
            ));
        }
        let mut report = ResumeReport::default();
        for uuid in st::episodes_in(db, graph, EpisodeState::Pending).await? {
            let queue = self.queue(graph);
            let _turn = queue.lock().await;
            let Some(episode) = store::get_episode(db, graph, uuid).await? else {
                continue;
            };
            if episode.state == EpisodeState::Complete {
                continue;
            }
            let mut request =
                AddEpisode::new(episode.content.clone(), episode.source, episode.valid_at)
                    .uuid(uuid)
                    .source_description(episode.source_description.clone());
            request.ontology = ontology.cloned();
            let usage = IngestUsage {
                db_round_trips: 2,
                ..IngestUsage::default()
            };
            match self.process(db, graph, episode, &request, usage).await {
                Ok(outcome) => report.completed.push(outcome),
                Err(Error::EpisodeBusy { uuid }) => report.busy.push(uuid),
                Err(e) => report.failed.push((uuid, e)),
            }
        }
        report.quarantined = st::episodes_in(db, graph, EpisodeState::Quarantined).await?;
        Ok(report)
    }

    /// The quarantined episodes of `graph`, oldest reference time first: episodes
    /// whose commits the database server never answered
    /// ([`Error::EpisodeQuarantined`]). They stay stored and searchable by their
    /// text; [`resume_pending`](Engine::resume_pending) skips them.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::FalkorDb, engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// for uuid in engine.quarantined(&db, "notes").await? {
    ///     println!("quarantined: {uuid}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn quarantined(&self, db: &FalkorDb, graph: &str) -> Result<Vec<Uuid>> {
        physical_graph_name(graph)?;
        st::episodes_in(db, graph, EpisodeState::Quarantined).await
    }

    /// Makes a quarantined episode pending again, for [`resume_pending`](Engine::resume_pending)
    /// or a replay to process (after upgrading the server that crashed on it, say);
    /// `false` when it is not quarantined.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::FalkorDb, engine: gralkor::graph::Engine, id: uuid::Uuid) -> gralkor::Result<()> {
    /// if engine.release_quarantined(&db, "notes", id).await? {
    ///     engine.resume_pending(&db, "notes", None).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release_quarantined(
        &self,
        db: &FalkorDb,
        graph: &str,
        uuid: Uuid,
    ) -> Result<bool> {
        physical_graph_name(graph)?;
        let queue = self.queue(graph);
        let _turn = queue.lock().await;
        st::release_quarantined(db, graph, uuid).await
    }

    /// Rebuilds the entity or fact vector index of `graph` once a commit leaves it
    /// with [`EngineOptions::vector_rebuild_threshold`] stale entries or more. The
    /// episode is committed either way: a failed rebuild is logged, and the next
    /// commit tries again.
    async fn purge_stale_vectors(&self, db: &FalkorDb, graph: &str, stale: st::Stale) {
        let threshold = self.inner.options.vector_rebuild_threshold;
        for (index, count) in [
            (store::VectorIndex::Entity, stale.entity),
            (store::VectorIndex::Fact, stale.fact),
        ] {
            if count > 0
                && count >= threshold
                && let Err(e) = store::rebuild_vector_index(db, graph, index).await
            {
                tracing::warn!(graph, ?index, error = %e, "rebuilding a vector index failed");
            }
        }
    }

    /// Removes an episode and what only it supported; see [`store::remove_episode`].
    /// Waits for the graph's queue, so it never interleaves with an ingestion.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::FalkorDb, engine: gralkor::graph::Engine, id: uuid::Uuid) -> gralkor::Result<()> {
    /// let removal = engine.remove_episode(&db, "notes", id).await?;
    /// assert!(removal.episode);
    /// # Ok(()) }
    /// ```
    pub async fn remove_episode(
        &self,
        db: &FalkorDb,
        graph: &str,
        uuid: Uuid,
    ) -> Result<store::Removal> {
        physical_graph_name(graph)?;
        let queue = self.queue(graph);
        let _turn = queue.lock().await;
        store::remove_episode(db, graph, uuid).await
    }

    /// Rebuilds the communities of `graph` with this engine's models (see
    /// [`build_communities`](crate::graph::build_communities)), queued with the graph's
    /// episodes so it never reads a half-processed graph.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::FalkorDb, engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// use gralkor::graph::CommunityOptions;
    ///
    /// let report = engine.build_communities(&db, "notes", &CommunityOptions::default()).await?;
    /// println!("{} communities", report.communities);
    /// # Ok(()) }
    /// ```
    pub async fn build_communities(
        &self,
        db: &FalkorDb,
        graph: &str,
        options: &crate::graph::CommunityOptions,
    ) -> Result<crate::graph::CommunityReport> {
        let (llm, embedder) = self.models()?;
        physical_graph_name(graph)?;
        let queue = self.queue(graph);
        let _turn = queue.lock().await;
        crate::graph::build_communities(db, graph, llm, embedder, options).await
    }

    /// The episode with `uuid`, if any.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::FalkorDb, engine: gralkor::graph::Engine, id: uuid::Uuid) -> gralkor::Result<()> {
    /// if let Some(ep) = engine.get_episode(&db, "notes", id).await? {
    ///     println!("{}", ep.content);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_episode(
        &self,
        db: &FalkorDb,
        graph: &str,
        uuid: Uuid,
    ) -> Result<Option<Episode>> {
        store::get_episode(db, graph, uuid).await
    }

    /// Deletes `graph` entirely and forgets that its indices were built.
    ///
    /// ```no_run
    /// # async fn run(db: gralkor::FalkorDb, engine: gralkor::graph::Engine) -> gralkor::Result<()> {
    /// engine.clear(&db, "scratch").await?;
    /// # Ok(()) }
    /// ```
    pub async fn clear(&self, db: &FalkorDb, graph: &str) -> Result<bool> {
        let queue = self.queue(graph);
        let _turn = queue.lock().await;
        store::clear(db, graph).await
    }

    fn queue(&self, graph: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut queues = self.inner.queues.lock().expect("poisoned");
        queues.retain(|_, q| Arc::strong_count(q) > 1);
        queues.entry(graph.to_owned()).or_default().clone()
    }

    fn models(&self) -> Result<(&dyn LanguageModel, &dyn Embedder)> {
        match (&self.inner.llm, &self.inner.embedder) {
            (Some(l), Some(e)) => Ok((l.as_ref(), e.as_ref())),
            _ => Err(Error::config(
                "language model",
                "is required to extract: this engine stores episodes only",
            )),
        }
    }

    /// Claims a pending episode, runs the model steps and commits.
    async fn process(
        &self,
        db: &FalkorDb,
        graph: &str,
        episode: Episode,
        request: &AddEpisode,
        mut usage: IngestUsage,
    ) -> Result<EpisodeOutcome> {
        let (llm, embedder) = self.models()?;
        let opts = &self.inner.options;
        let lease_ms = i64::try_from(opts.lease.as_millis()).unwrap_or(i64::MAX);
        let claim = retry("claim", || {
            st::claim(db, graph, episode.uuid, &self.inner.writer, lease_ms)
        })
        .await?;
        usage.db_round_trips += 1;
        let generation = match claim {
            st::Claim::Held(g) => g,
            st::Claim::Complete => {
                let stored = store::get_episode(db, graph, episode.uuid)
                    .await?
                    .ok_or_else(|| Error::NotFound(format!("episode {}", episode.uuid)))?;
                return replayed(db, graph, stored, usage).await;
            }
            st::Claim::Busy => return Err(Error::EpisodeBusy { uuid: episode.uuid }),
            st::Claim::Quarantined => {
                return Err(Error::EpisodeQuarantined {
                    uuid: episode.uuid,
                    unanswered: st::MAX_UNANSWERED_COMMITS,
                });
            }
            st::Claim::Missing => {
                return Err(Error::NotFound(format!("episode {}", episode.uuid)));
            }
        };
        let lease = lease::Lease::hold(db, graph, episode.uuid, generation, opts.lease);
        let ontology = request.ontology.clone().unwrap_or_else(Ontology::generic);
        let work = Work {
            db,
            graph,
            llm,
            embedder,
            opts,
            ontology: &ontology,
            lease: &lease,
        };
        // Extraction and embeddings once; resolution again (at most
        // `MAX_NAME_RACES` times) when another process created one of the episode's
        // new entities while this one was resolving — the commit's name check finds
        // that and writes nothing.
        let outcome: Result<Done> = async {
            let extracted = work.extract(&episode, request, &mut usage).await?;
            let mut attempt = 0;
            loop {
                let mut done = work.resolve(&episode, &extracted, &mut usage).await?;
                work.check_lease(episode.uuid)?;
                if attempt == MAX_NAME_RACES {
                    // Progress over purity: a writer that keeps losing the race commits.
                    done.set.fresh_keys.clear();
                }
                let committed = retry("commit", || async {
                    let uuid = episode.uuid;
                    match st::begin_commit(db, graph, uuid, generation).await? {
                        st::BeginCommit::Go => {}
                        st::BeginCommit::Quarantined(unanswered) => {
                            tracing::error!(
                                episode = %uuid,
                                unanswered,
                                "the server was lost during every commit of this episode; \
                                 quarantined"
                            );
                            return Err(Error::EpisodeQuarantined { uuid, unanswered });
                        }
                        st::BeginCommit::NotHeld(outcome) => return Ok(outcome),
                    }
                    let sent = st::commit_episode(db, graph, uuid, generation, &done.set)
                        .instrument(tracing::info_span!("commit_statement"))
                        .await;
                    match sent {
                        Ok(Some(stale)) => Ok(st::Committed::Done(stale)),
                        // Unanswered: it stays counted (the next `begin_commit` sees it).
                        Err(e @ Error::Connection { .. }) => Err(e),
                        Err(e) => {
                            let _ = st::commit_answered(db, graph, uuid, generation).await;
                            Err(e)
                        }
                        // Nothing written: a fresh name taken, or a lost reply.
                        Ok(None) => st::commit_answered(db, graph, uuid, generation).await,
                    }
                })
                .instrument(tracing::info_span!("commit", attempt))
                .await?;
                usage.db_round_trips += 1;
                match committed {
                    st::Committed::Done(stale) => {
                        self.purge_stale_vectors(db, graph, stale).await;
                        return Ok(done);
                    }
                    st::Committed::Fenced => return Err(Error::ClaimLost { uuid: episode.uuid }),
                    // Without the name check nothing can stop the statement: never loop.
                    st::Committed::NameTaken if done.set.fresh_keys.is_empty() => {
                        return Err(Error::Protocol(format!(
                            "the commit of episode {} wrote nothing, yet the episode is \
                             still claimed by this writer",
                            episode.uuid
                        )));
                    }
                    st::Committed::NameTaken => {
                        tracing::info!(
                            episode = %episode.uuid,
                            names = ?done.set.fresh_keys,
                            "another writer created one of this episode's new entities; resolving again"
                        );
                        attempt += 1;
                    }
                }
            }
        }
        .await;
        drop(lease);
        let done = match outcome {
            Ok(done) => done,
            Err(e) => {
                if !matches!(e, Error::ClaimLost { .. }) {
                    // Best effort: let a retry take the episode at once.
                    let _ = st::release(db, graph, episode.uuid, generation).await;
                }
                return Err(e);
            }
        };
        let mut stored = episode;
        stored.state = EpisodeState::Complete;
        stored.entity_edges = done.set.entity_edges.clone();
        Ok(EpisodeOutcome {
            episode: stored,
            status: OutcomeStatus::Completed,
            entities: done.set.entities,
            facts: done.facts,
            invalidated: done.invalidated,
            usage,
        })
    }
}

/// The model steps of one claimed episode.
struct Work<'a> {
    db: &'a FalkorDb,
    graph: &'a str,
    llm: &'a dyn LanguageModel,
    embedder: &'a dyn Embedder,
    opts: &'a EngineOptions,
    ontology: &'a Ontology,
    lease: &'a lease::Lease,
}

/// Times an episode is resolved again because another writer created one of its new
/// entities meanwhile; the next commit skips the name check.
const MAX_NAME_RACES: u32 = 3;

/// What extraction produced: the entities and facts, and their embeddings.
struct Extracted {
    extraction: crate::graph::extract::Extraction,
    name_vectors: Vec<Vec<f32>>,
    fact_vectors: Vec<Vec<f32>>,
}

/// What the model steps produced: the commit, and the outcome's fact lists.
struct Done {
    set: st::CommitSet,
    facts: Vec<EntityEdge>,
    invalidated: Vec<EntityEdge>,
}

impl Work<'_> {
    /// One small-model call of a follow-up step: sends `system` and `user` against
    /// `schema`, counts the call and its tokens, and reads the answer as `T`.
    async fn ask<T: serde::de::DeserializeOwned>(
        &self,
        schema: crate::llm::OutputSchema,
        system: &str,
        user: String,
        label: &str,
        usage: &mut IngestUsage,
    ) -> Result<T> {
        let name = schema.name.clone();
        let request = crate::llm::GenerateRequest::new(schema)
            .system(system)
            .user(user)
            .size(crate::llm::ModelSize::Small)
            .label(label);
        let generation = self.llm.generate(&request).await?;
        usage.llm_calls += 1;
        usage.tokens += generation.usage;
        serde_json::from_value(generation.value).map_err(|e| Error::ModelOutput {
            provider: self.llm.provider().to_owned(),
            message: format!("`{name}` answer: {e}"),
        })
    }

    fn check_lease(&self, uuid: Uuid) -> Result<()> {
        if self.lease.lost() {
            Err(Error::ClaimLost { uuid })
        } else {
            Ok(())
        }
    }

    /// Extraction (call 1) with the previous episodes as context, and one embedding
    /// request for every name and fact text.
    async fn extract(
        &self,
        episode: &Episode,
        request: &AddEpisode,
        usage: &mut IngestUsage,
    ) -> Result<Extracted> {
        let previous = st::previous_contents(
            self.db,
            self.graph,
            episode.uuid,
            episode.valid_at,
            self.opts.previous_episodes,
        )
        .await?;
        usage.db_round_trips += 1;
        let mut input = ExtractionInput::new(
            &episode.content,
            episode.source,
            episode.valid_at,
            self.ontology,
        );
        input.source_description = &episode.source_description;
        input.previous_episodes = &previous;
        input.excluded_types = &request.excluded_types;
        input.instructions = request.instructions.as_deref();
        let extraction = extract(self.llm, &input)
            .instrument(tracing::info_span!("extract"))
            .await?;
        usage.llm_calls += 1;
        usage.tokens += extraction.usage;
        self.check_lease(episode.uuid)?;

        // One embedding request for every name and fact text.
        let texts: Vec<String> = extraction
            .entities
            .iter()
            .map(|e| e.name.clone())
            .chain(extraction.facts.iter().map(|f| f.fact.clone()))
            .collect();
        let mut vectors = if texts.is_empty() {
            Vec::new()
        } else {
            usage.embedding_calls += 1;
            self.embedder
                .embed(&texts, "ingest")
                .instrument(tracing::info_span!("embed", texts = texts.len()))
                .await?
        };
        if vectors.len() != texts.len() {
            return Err(Error::Protocol(format!(
                "the embedder returned {} vectors for {} texts",
                vectors.len(),
                texts.len()
            )));
        }
        let fact_vectors = vectors.split_off(extraction.entities.len());
        Ok(Extracted {
            extraction,
            name_vectors: vectors,
            fact_vectors,
        })
    }

    /// Entity and fact resolution, details, and the commit set.
    async fn resolve(
        &self,
        episode: &Episode,
        extracted: &Extracted,
        usage: &mut IngestUsage,
    ) -> Result<Done> {
        let Extracted {
            extraction,
            name_vectors,
            fact_vectors,
        } = extracted;
        let resolved = entities::resolve(self, &extraction.entities, name_vectors.clone(), usage)
            .instrument(tracing::info_span!("resolve_entities"))
            .await?;
        self.check_lease(episode.uuid)?;
        let facts = facts::resolve(
            self,
            episode,
            &extraction.facts,
            fact_vectors.clone(),
            &resolved,
            usage,
        )
        .instrument(tracing::info_span!("resolve_facts"))
        .await?;
        self.check_lease(episode.uuid)?;
        let mut nodes = resolved.nodes;
        details::fill(self, &mut nodes, &resolved.is_new, &facts.new_facts, usage)
            .instrument(tracing::info_span!("details"))
            .await?;
        self.check_lease(episode.uuid)?;

        let mut entity_edges: Vec<Uuid> = facts.new_facts.iter().map(|f| f.uuid).collect();
        entity_edges.extend(facts.confirmed.iter().map(|f| f.uuid));
        let mut outcome_facts = facts.new_facts.clone();
        outcome_facts.extend(facts.confirmed.iter().cloned());
        Ok(Done {
            set: st::CommitSet {
                mentions: nodes.iter().map(|n| n.uuid).collect(),
                entities: nodes,
                new_facts: facts.new_facts,
                updated_facts: facts.updates,
                entity_edges,
                fresh_keys: resolved.fresh_keys,
            },
            facts: outcome_facts,
            invalidated: facts.invalidated,
        })
    }
}

/// Runs an idempotent database step, retrying a lost connection (a FalkorDB restart)
/// up to 5 times with backoff from 50 ms to 2 s. Other errors return at once.
pub(super) async fn retry<T, F, Fut>(what: &str, mut step: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut delay = Duration::from_millis(50);
    let mut attempt = 1;
    loop {
        match step().await {
            Err(e @ Error::Connection { .. }) if attempt < 6 => {
                tracing::warn!(step = what, attempt, error = %e, "database step failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Checks a replay against the stored episode's immutable fields.
fn same_episode(stored: &Episode, asked: &Episode) -> Result<()> {
    let field = if stored.content != asked.content {
        "content"
    } else if stored.source != asked.source {
        "source"
    } else if stored.source_description != asked.source_description {
        "source_description"
    } else if stored.valid_at != asked.valid_at {
        "reference_time"
    } else {
        return Ok(());
    };
    Err(Error::EpisodeConflict {
        uuid: stored.uuid,
        field,
    })
}

/// The outcome of replaying a complete episode: what it mentions and produced, as
/// stored now.
async fn replayed(
    db: &FalkorDb,
    graph: &str,
    episode: Episode,
    mut usage: IngestUsage,
) -> Result<EpisodeOutcome> {
    let entities = store::get_mentioned_entities(db, graph, episode.uuid).await?;
    let facts = store::get_facts(db, graph, &episode.entity_edges).await?;
    usage.db_round_trips += 2;
    Ok(EpisodeOutcome {
        episode,
        status: OutcomeStatus::Replayed,
        entities,
        facts,
        invalidated: Vec::new(),
        usage,
    })
}
