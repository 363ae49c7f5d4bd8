//! [`NativeStorage`]: the engine implementing the storage port — the graph engine
//! (FalkorDB and the models) plus a mapping between the port's values and the
//! engine's.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::{Map, Value as Json};
use uuid::Uuid;

use super::search::{
    MAX_SEARCH_LIMIT, Methods, RerankerKind, ScopeConfig, SearchConfig, SearchFilters,
    SearchRequest, SearchResults, TimeMode,
};
use super::{
    AddEpisode, CommunityOptions, Engine, EpisodeState, IngestUsage, OwnedNode, OwnedRelationship,
};
use crate::falkordb::{FalkorDb, Value};
use crate::llm::UsageMeter;
use crate::ontology::Ontology;
use crate::storage::provenance::Writer;
use crate::storage::{
    Artefact, CommunityCounts, EpisodeRecord, ExtractionReport, FactRecord, FactSource, Graph,
    GraphId, GraphQuery, GraphStatus, Hit, IngestCost, ModelStatus, NewEpisode, NodeRecord,
    ResultType, ScoredHit, Storage, StorageStatus, StoredEpisode, check_reflection_bodies, overlap,
    owned_node_uuid, words,
};
use crate::vocab::OWNER_KEY;
use crate::{Error, Result};

/// The storage of [`NativeClient`](crate::NativeClient): the [`Engine`] plus a
/// mapping. Episodes go through the engine (extraction when it has models, episodes
/// only otherwise), and so do searches ([`Engine::search_many`], one query embedding
/// for every graph) and replace-graph content ([`Engine::replace_owned`], one
/// statement, atomic). Nothing below the engine is reached around it.
#[derive(Debug, Clone)]
pub struct NativeStorage {
    engine: Engine,
    usage: Option<UsageMeter>,
    configuration: Option<String>,
}

impl NativeStorage {
    /// A storage over `engine`: its embedder enables vector search, its reranker the
    /// cross-encoder recipes.
    pub fn new(engine: Engine) -> NativeStorage {
        NativeStorage {
            engine,
            usage: None,
            configuration: None,
        }
    }

    /// The same storage reporting, in its [status](Storage::status), how its models
    /// were chosen (a [`Config::describe`](crate::Config::describe) sentence; never a
    /// key). [`NativeClient::connect`](crate::NativeClient::connect) sets it.
    pub fn with_configuration(mut self, description: impl Into<String>) -> NativeStorage {
        self.configuration = Some(description.into());
        self
    }

    /// The same storage reporting `usage`, the meter the engine's model clients
    /// record into ([`Models::usage`](crate::llm::Models::usage)).
    pub fn with_usage(mut self, usage: UsageMeter) -> NativeStorage {
        self.usage = Some(usage);
        self
    }

    /// The meter the model clients record every call into (per label and per
    /// provider), when it was given.
    pub fn usage(&self) -> Option<&UsageMeter> {
        self.usage.as_ref()
    }

    /// The database handle.
    pub fn db(&self) -> &FalkorDb {
        self.engine.db()
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn scope(&self) -> ScopeConfig {
        let methods = if self.engine.embedder().is_some() {
            Methods::HYBRID
        } else {
            Methods::FULLTEXT
        };
        ScopeConfig::new(methods, RerankerKind::Rrf)
    }
}

#[async_trait]
impl Storage for NativeStorage {
    async fn add_episode(&self, episode: NewEpisode) -> Result<StoredEpisode> {
        let uuid = episode.uuid;
        let graph = episode.graph.as_str();
        let defaulted_time = !episode.reference_time_given;
        let mut request = AddEpisode::new(
            episode.content.encoded(),
            episode.content.kind(),
            episode.reference_time,
        )
        .uuid(uuid)
        .writer(episode.writer.key())
        .source_description(episode.stored_description)
        .ontology(episode.ontology);
        if let Some(session) = episode.session {
            request = request.session(session);
        }
        if let Some(instructions) = episode.instructions {
            request = request.instructions(instructions);
        }
        let started = std::time::Instant::now();
        let mut cost = match self.engine.add_episode(graph, request.clone()).await {
            // A replay without a reference time keeps the time the first write chose;
            // only a replay pays for the extra read.
            Err(Error::EpisodeConflict {
                field: "reference_time",
                ..
            }) if defaulted_time => {
                let stored = self
                    .engine
                    .get_episode(graph, uuid)
                    .await?
                    .ok_or_else(|| Error::NotFound(format!("episode {uuid}")))?;
                request.reference_time = stored.valid_at;
                let outcome = self.engine.add_episode(graph, request).await?;
                let mut cost = cost_of(&outcome.usage);
                // The refused first attempt and the read.
                cost.db_round_trips += 2;
                cost
            }
            other => cost_of(&other?.usage),
        };
        cost.wall_time_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        Ok(StoredEpisode::new(uuid, cost))
    }

    async fn search(&self, graphs: &[GraphId], query: &GraphQuery) -> Result<Vec<Vec<ScoredHit>>> {
        let names: Vec<&str> = graphs.iter().map(GraphId::as_str).collect();
        let request = self.request(query);
        // An artefact lookup by id may have a blank query: nothing to rank then. An
        // empty episode selection leaves no episode or fact.
        let found = if (matches!(query.result_type, ResultType::Artefacts { .. })
            && query.query.trim().is_empty())
            || (query.episodes.as_ref().is_some_and(Vec::is_empty)
                && matches!(
                    query.result_type,
                    ResultType::Episodes | ResultType::Facts { .. }
                )) {
            vec![SearchResults::default(); graphs.len()]
        } else {
            self.engine.search_many(&names, &request).await?
        };
        let mut out = Vec::with_capacity(graphs.len());
        for (graph, results) in graphs.iter().zip(found) {
            out.push(self.hits(graph, results, query).await?);
        }
        Ok(out)
    }

    async fn replace_graph(&self, graph: &GraphId, lens: &str, replacement: &Graph) -> Result<()> {
        let (nodes, relationships) = owned_parts(replacement);
        self.engine
            .replace_owned(graph.as_str(), lens, &nodes, &relationships)
            .await?;
        Ok(())
    }

    async fn get_episode(&self, graph: &GraphId, uuid: Uuid) -> Result<Option<EpisodeRecord>> {
        Ok(self
            .engine
            .get_episode(graph.as_str(), uuid)
            .await?
            .map(episode_record))
    }

    async fn remove_episode(&self, graph: &GraphId, uuid: Uuid) -> Result<bool> {
        Ok(self
            .engine
            .remove_episode(graph.as_str(), uuid)
            .await?
            .episode)
    }

    async fn session_episodes(&self, graph: &GraphId, session: &str) -> Result<Vec<Uuid>> {
        self.engine.session_episodes(graph.as_str(), session).await
    }

    async fn purge_graph(&self, graph: &GraphId) -> Result<bool> {
        let db = self.engine.db();
        let existed = db.delete_graph(graph.as_str()).await?;
        // The AOF (and an RDB snapshot saved before) still hold the deleted content
        // until they are rewritten from the data set.
        if let Some(server) = db.embedded_server() {
            server.forget_deleted().await?;
        }
        Ok(existed)
    }

    async fn rewrite_log(&self) -> Result<()> {
        match self.engine.db().embedded_server() {
            Some(server) => server.forget_deleted().await,
            None => Ok(()),
        }
    }

    async fn health(&self) -> Result<String> {
        let db = self.engine.db();
        let graphs = db.list_graphs().await?;
        let backend = if db.embedded_server().is_some() {
            "embedded"
        } else {
            "remote"
        };
        Ok(format!("FalkorDB ({backend}): {} graphs", graphs.len()))
    }

    async fn status(&self) -> Result<StorageStatus> {
        let db = self.engine.db();
        let (graphs, server) = tokio::try_join!(db.list_graphs(), db.server_info())?;
        let mut models = Vec::new();
        if let Some(llm) = self.engine.llm() {
            models.push(ModelStatus::new(
                "llm",
                llm.provider(),
                llm.model(crate::llm::ModelSize::Default),
            ));
        }
        if let Some(e) = self.engine.embedder() {
            models.push(ModelStatus::new("embedder", e.provider(), e.model()));
        }
        if let Some(r) = self.engine.reranker() {
            models.push(ModelStatus::new("reranker", r.provider(), "cross-encoder"));
        }
        let mut status = StorageStatus::new(if db.embedded_server().is_some() {
            "FalkorDB (embedded)"
        } else {
            "FalkorDB (remote)"
        });
        status.server = Some(server);
        status.graphs = graphs.len();
        status.models = models;
        status.configuration = self.configuration.clone();
        Ok(status)
    }

    async fn graph_status(&self, graph: &GraphId) -> Result<GraphStatus> {
        self.engine.graph_status(graph.as_str()).await
    }

    async fn build_indices(&self) -> Result<()> {
        self.engine.build_all_indices().await
    }

    async fn build_communities(&self, graph: &GraphId) -> Result<CommunityCounts> {
        let report = self
            .engine
            .build_communities(graph.as_str(), &CommunityOptions::default())
            .await?;
        Ok(CommunityCounts::new(report.communities, report.members))
    }

    async fn extract_pending(
        &self,
        graph: &GraphId,
        ontologies: &BTreeMap<String, Ontology>,
    ) -> Result<ExtractionReport> {
        let resumed = self
            .engine
            .resume_pending_by_writer(graph.as_str(), &|writer| {
                writer.and_then(|key| ontologies.get(key).cloned())
            })
            .await?;
        let mut report = ExtractionReport::default();
        report.completed = resumed.completed.iter().map(|o| o.episode.uuid).collect();
        report.busy = resumed.busy;
        report.failed = resumed
            .failed
            .into_iter()
            .map(|(uuid, e)| (uuid, e.to_string()))
            .collect();
        report.quarantined = resumed.quarantined;
        Ok(report)
    }

    async fn shutdown(&self) -> Result<()> {
        self.engine.db().shutdown().await
    }
}

impl NativeStorage {
    /// The engine request for `query`: the same for every graph searched.
    fn request(&self, query: &GraphQuery) -> SearchRequest {
        let fetch = query.limit.clamp(1, MAX_SEARCH_LIMIT);
        let mut config = SearchConfig {
            facts: None,
            entities: None,
            episodes: None,
            communities: None,
            limit: fetch,
            min_score: 0.0,
        };
        // The writer filter runs inside the engine's statements, before the limit.
        let mut filters = SearchFilters {
            writers: query
                .lenses
                .iter()
                .map(|l| Writer::Lens(l.clone()).key())
                .collect(),
            ..SearchFilters::default()
        };
        match &query.result_type {
            ResultType::Episodes => {
                config.episodes = Some(self.scope());
                filters.episodes = query.episodes.clone().unwrap_or_default();
            }
            ResultType::Facts { edge_types } => {
                config.facts = Some(self.scope());
                filters.fact_types = edge_types.clone();
                // Facts with a selected source, listing only those (pending episodes
                // standing in as facts are selected by their own uuid).
                filters.episodes = query.episodes.clone().unwrap_or_default();
                // Without a language model nothing is extracted: the episodes not yet
                // extracted stand in as facts (as the twin's do), found by the same
                // hybrid search, so memory answers.
                if !self.engine.extracts() && ResultType::episode_facts_wanted(edge_types) {
                    config.episodes = Some(self.scope());
                }
            }
            ResultType::Nodes { entity_types } => {
                config.entities = Some(self.scope());
                filters.entity_labels = entity_types.clone();
            }
            ResultType::Artefacts { .. } => {
                // Ranked episodes select the artefact ids; fetch widely so that other
                // writers' and incomplete episodes do not crowd artefacts out.
                config.episodes = Some(self.scope());
                config.limit = MAX_SEARCH_LIMIT;
            }
            // `ResultType` is non-exhaustive: a kind added to the port later searches
            // nothing here and is refused when the hits are built.
            _ => {}
        }
        if let Some(t) = query.as_of {
            // The engine's own as-of rule, inside its statements before their limits:
            // facts true at `t`, episodes that had happened by then. An episode's
            // vector candidates come from the index before that condition, so with an
            // embedder the fetch is wide: later episodes do not crowd earlier ones out.
            filters.time = TimeMode::AsOf(t);
            if config.episodes.is_some() && self.engine.embedder().is_some() {
                config.limit = MAX_SEARCH_LIMIT;
            }
        }
        SearchRequest::new(query.query.clone(), config).filters(filters)
    }

    /// One graph's engine results as hits (plus, for nodes, its replace-graph nodes).
    async fn hits(
        &self,
        graph: &GraphId,
        results: SearchResults,
        query: &GraphQuery,
    ) -> Result<Vec<ScoredHit>> {
        let mut hits: Vec<ScoredHit> = match &query.result_type {
            ResultType::Episodes => results
                .episodes
                .into_iter()
                .map(|h| ScoredHit::new(h.score, Hit::Episode(episode_record(h.episode))))
                .collect(),
            ResultType::Facts { .. } => results
                .facts
                .into_iter()
                .map(|h| {
                    // With a writer filter the engine lists only the selected writers'
                    // sources.
                    let sources: Vec<FactSource> = h
                        .sources
                        .iter()
                        .map(|s| {
                            FactSource::from_stored(s.uuid, Some(s.source), &s.source_description)
                        })
                        .collect();
                    let f = h.fact;
                    let mut fact = FactRecord::new(f.uuid, f.fact);
                    fact.created_at = Some(f.created_at);
                    fact.valid_at = f.valid_at;
                    fact.invalid_at = f.invalid_at;
                    fact.expired_at = f.expired_at;
                    fact.sources = sources;
                    ScoredHit::new(h.score, Hit::Fact(fact))
                })
                // `as_of` already ran inside the engine's statements (`TimeMode::AsOf`),
                // for facts and for episodes.
                .chain(
                    results
                        .episodes
                        .into_iter()
                        .filter(|h| h.episode.state == EpisodeState::Pending)
                        .map(|h| ScoredHit::new(h.score, Hit::Fact(episode_fact(h.episode)))),
                )
                .collect(),
            ResultType::Nodes { entity_types } => {
                let mut nodes: Vec<ScoredHit> = results
                    .entities
                    .into_iter()
                    .map(|h| {
                        let e = h.entity;
                        let mut node = NodeRecord::new(e.uuid, e.name);
                        node.labels = e.labels;
                        node.summary = e.summary;
                        node.attributes = Json::Object(e.attributes);
                        ScoredHit::new(h.score, Hit::Node(node))
                    })
                    .collect();
                nodes.extend(self.owned_hits(graph, &query.query, entity_types).await?);
                nodes
            }
            ResultType::Artefacts { artefact_id } => {
                self.artefact_hits(graph, results, query, artefact_id.as_deref())
                    .await?
            }
            _ => return Err(unsupported_result_type()),
        };
        hits.truncate(query.limit);
        check_reflection_bodies(&hits)?;
        Ok(hits)
    }

    /// Artefact search by identity convergence: the ranked, *completed* Reflection
    /// episodes (or the one `artefact_id`) select up to `limit` artefact ids; then
    /// every completed episode carrying a selected id is enumerated independently of
    /// the ranking (the ranked ones and the episode whose uuid is the id): equal
    /// duplicates collapse, a disagreeing one is an [`Error::ArtefactConflict`], a
    /// malformed completed body an [`Error::InvalidReflectionArtefact`]. Incomplete
    /// episodes stay hidden.
    async fn artefact_hits(
        &self,
        graph: &GraphId,
        results: SearchResults,
        query: &GraphQuery,
        artefact_id: Option<&str>,
    ) -> Result<Vec<ScoredHit>> {
        fn read(e: &super::Episode) -> Result<Option<Artefact>> {
            let Some(Writer::Reflection(name)) = e.writer.as_deref().and_then(Writer::from_key)
            else {
                return Ok(None);
            };
            if e.state != EpisodeState::Complete {
                return Ok(None);
            }
            Artefact::from_body(&e.content)
                .map(Some)
                .ok_or(Error::InvalidReflectionArtefact { reflection: name })
        }
        let mut ranked: Vec<(Artefact, f64)> = Vec::new();
        for h in &results.episodes {
            if let Some(a) = read(&h.episode)? {
                ranked.push((a, h.score));
            }
        }
        let mut selected: Vec<(String, f64)> = Vec::new();
        match artefact_id {
            Some(id) => selected.push((id.to_string(), 1.0)),
            None => {
                for (a, score) in &ranked {
                    if selected.len() >= query.limit {
                        break;
                    }
                    if !selected.iter().any(|(id, _)| *id == a.id) {
                        selected.push((a.id.clone(), *score));
                    }
                }
            }
        }
        let mut hits = Vec::with_capacity(selected.len());
        for (id, score) in selected {
            let mut carrying: Vec<Artefact> = ranked
                .iter()
                .filter(|(a, _)| a.id == id)
                .map(|(a, _)| a.clone())
                .collect();
            if let Ok(uuid) = Uuid::parse_str(&id)
                && let Some(e) = self.engine.get_episode(graph.as_str(), uuid).await?
                && let Some(a) = read(&e)?
            {
                if a.id != id {
                    return Err(Error::ArtefactConflict { id });
                }
                carrying.push(a);
            }
            let Some(first) = carrying.first().cloned() else {
                continue;
            };
            if carrying.iter().any(|a| *a != first) {
                return Err(Error::ArtefactConflict { id });
            }
            hits.push(ScoredHit::new(score, Hit::Artefact(first)));
        }
        Ok(hits)
    }

    /// Replace-graph content is not extracted, so it has no entity index entries:
    /// its ids and text properties are matched by word, as the twin does, scored by
    /// the share of the query's words they contain.
    async fn owned_hits(
        &self,
        graph: &GraphId,
        query: &str,
        entity_types: &[String],
    ) -> Result<Vec<ScoredHit>> {
        let wanted = words(query);
        let mut hits = Vec::new();
        for (_, owned) in self.engine.owned_nodes(graph.as_str()).await? {
            if !entity_types.is_empty() && !owned.labels.iter().any(|l| entity_types.contains(l)) {
                continue;
            }
            let mut text = owned.id.clone();
            for v in owned.properties.values() {
                if let Some(s) = v.as_str() {
                    text.push(' ');
                    text.push_str(s);
                }
            }
            let score = overlap(&wanted, &text);
            if score == 0.0 {
                continue;
            }
            let attributes: Map<String, Json> = owned
                .properties
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect();
            let name = owned
                .properties
                .get("name")
                .and_then(|v| v.as_str())
                .unwrap_or(&owned.id)
                .to_string();
            let mut node = NodeRecord::new(owned_node_uuid(graph, &owned.id), name);
            node.labels = owned.labels;
            node.attributes = Json::Object(attributes);
            hits.push(ScoredHit::new(score, Hit::Node(node)));
        }
        Ok(hits)
    }
}

/// A not-yet-extracted episode as a fact, in the twin's shape.
fn episode_fact(e: super::Episode) -> FactRecord {
    FactRecord::from_episode(
        e.uuid,
        e.content,
        e.source,
        &e.source_description,
        e.valid_at,
        e.created_at,
    )
}

/// An engine episode as the client returns it (writer read from the description).
fn episode_record(e: super::Episode) -> EpisodeRecord {
    EpisodeRecord::from_stored(
        e.uuid,
        e.content,
        e.source,
        &e.source_description,
        e.valid_at,
        e.created_at,
    )
}

/// A replace-graph payload as the store's owned nodes and relationships
/// ([`replace_owned`](super::replace_owned)); JSON property values become FalkorDB
/// values, and a supplied ownership property is dropped (the store sets it). The
/// payload is validated already.
pub fn owned_parts(graph: &Graph) -> (Vec<OwnedNode>, Vec<OwnedRelationship>) {
    let props = |m: &Map<String, Json>| {
        m.iter()
            .filter(|(k, _)| k.as_str() != OWNER_KEY)
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect()
    };
    (
        graph
            .nodes
            .iter()
            .map(|n| OwnedNode {
                id: n.id.clone(),
                labels: n.labels.clone(),
                properties: props(&n.properties),
            })
            .collect(),
        graph
            .relationships
            .iter()
            .map(|r| OwnedRelationship {
                from: r.from.clone(),
                rel_type: r.rel_type.clone(),
                to: r.to.clone(),
                properties: props(&r.properties),
            })
            .collect(),
    )
}

/// A result kind the port gained after this engine was written.
fn unsupported_result_type() -> crate::Error {
    crate::Error::invalid(
        "result_type",
        "is not a result type the native storage supports",
    )
}

/// What an engine ingest cost, as the port reports it.
fn cost_of(usage: &IngestUsage) -> IngestCost {
    let mut cost = IngestCost::default();
    cost.model_calls = usage.llm_calls;
    cost.model_calls_by_step = usage
        .steps
        .by_name()
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(step, n)| (step.to_owned(), n))
        .collect();
    cost.prompt_tokens = usage.tokens.prompt_tokens;
    cost.completion_tokens = usage.tokens.completion_tokens;
    cost.embedding_requests = usage.embedding_calls;
    cost.db_round_trips = usage.db_round_trips;
    cost.wall_time_us = u64::try_from(usage.elapsed.as_micros()).unwrap_or(u64::MAX);
    cost
}
