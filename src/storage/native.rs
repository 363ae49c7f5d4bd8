//! [`NativeStorage`]: the graph engine (FalkorDB and the models) plus a mapping.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use super::{
    CommunityCounts, EpisodeRecord, FactRecord, FactSource, Graph, GraphId, GraphQuery, Hit,
    NewEpisode, NodeRecord, ResultType, ScoredHit, Storage, owned_node_uuid,
};
use crate::falkordb::FalkorDb;
use crate::graph::search::{
    self as gsearch, MAX_SEARCH_LIMIT, Methods, RerankerKind, ScopeConfig, SearchConfig,
    SearchFilters, SearchRequest,
};
use crate::graph::{self, AddEpisode, CommunityOptions, Engine};
use crate::llm::{Embedder, Reranker};
use crate::provenance::{self, Writer};
use crate::{Error, Result};

/// Candidates fetched per result wanted when a Lens selector filters them afterwards.
const LENS_OVERFETCH: usize = 5;

/// The [`Storage`] of [`NativeClient`]: episodes go through the [`Engine`]
/// (extraction when it has models, episodes only otherwise), searches through
/// [`graph::search`](mod@crate::graph::search), replace-graph content through
/// [`graph::replace_owned`](crate::graph::replace_owned) (one statement, atomic).
#[derive(Debug, Clone)]
pub struct NativeStorage {
    db: FalkorDb,
    engine: Engine,
    embedder: Option<Arc<dyn Embedder>>,
    reranker: Option<Arc<dyn Reranker>>,
}

impl NativeStorage {
    /// A storage on `db` ingesting with `engine`; `embedder` (the engine's) enables
    /// vector search, `reranker` the cross-encoder recipes.
    pub fn new(
        db: FalkorDb,
        engine: Engine,
        embedder: Option<Arc<dyn Embedder>>,
        reranker: Option<Arc<dyn Reranker>>,
    ) -> NativeStorage {
        NativeStorage {
            db,
            engine,
            embedder,
            reranker,
        }
    }

    /// The database handle.
    pub fn db(&self) -> &FalkorDb {
        &self.db
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn scope(&self) -> ScopeConfig {
        let methods = if self.embedder.is_some() {
            Methods::HYBRID
        } else {
            Methods::FULLTEXT
        };
        ScopeConfig::new(methods, RerankerKind::Rrf)
    }

    async fn run(
        &self,
        graph: &str,
        config: SearchConfig,
        query: &str,
        filters: SearchFilters,
    ) -> Result<gsearch::SearchResults> {
        let request = SearchRequest::new(query, config).filters(filters);
        gsearch::search(
            &self.db,
            graph,
            &request,
            self.embedder.as_deref(),
            self.reranker.as_deref(),
        )
        .await
    }
}

fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn lens_of(stored_description: &str) -> Option<String> {
    match provenance::parse(stored_description).writer {
        Some(Writer::Lens(l)) => Some(l),
        _ => None,
    }
}

#[async_trait]
impl Storage for NativeStorage {
    async fn add_episode(&self, episode: NewEpisode) -> Result<Uuid> {
        let uuid = episode.uuid;
        let graph = episode.graph.as_str();
        let defaulted_time = !episode.reference_time_given;
        let mut request = AddEpisode::new(
            episode.content.encoded(),
            episode.content.kind(),
            episode.reference_time,
        )
        .uuid(uuid)
        .source_description(episode.stored_description)
        .ontology(episode.ontology);
        match self
            .engine
            .add_episode(&self.db, graph, request.clone())
            .await
        {
            // A replay without a reference time keeps the time the first write chose;
            // only a replay pays for the extra read.
            Err(Error::EpisodeConflict {
                field: "reference_time",
                ..
            }) if defaulted_time => {
                let stored = self
                    .engine
                    .get_episode(&self.db, graph, uuid)
                    .await?
                    .ok_or_else(|| Error::NotFound(format!("episode {uuid}")))?;
                request.reference_time = stored.valid_at;
                self.engine.add_episode(&self.db, graph, request).await?;
            }
            other => {
                other?;
            }
        }
        Ok(uuid)
    }

    async fn search(&self, graphs: &[GraphId], query: &GraphQuery) -> Result<Vec<Vec<ScoredHit>>> {
        let mut out = Vec::with_capacity(graphs.len());
        for graph in graphs {
            out.push(self.search_graph(graph, query).await?);
        }
        Ok(out)
    }

    async fn replace_graph(&self, graph: &GraphId, lens: &str, replacement: &Graph) -> Result<()> {
        let (nodes, relationships) = replacement.to_owned_parts();
        graph::replace_owned(&self.db, graph.as_str(), lens, &nodes, &relationships).await?;
        Ok(())
    }

    async fn get_episode(&self, graph: &GraphId, uuid: Uuid) -> Result<Option<EpisodeRecord>> {
        Ok(self
            .engine
            .get_episode(&self.db, graph.as_str(), uuid)
            .await?
            .map(episode_record))
    }

    async fn remove_episode(&self, graph: &GraphId, uuid: Uuid) -> Result<bool> {
        Ok(self
            .engine
            .remove_episode(&self.db, graph.as_str(), uuid)
            .await?
            .episode)
    }

    async fn build_indices(&self) -> Result<()> {
        for graph in self.db.list_graphs().await? {
            if let Err(first) = self.engine.build_indices(&self.db, &graph).await {
                // A graph deleted while its indices were being built is recreated,
                // half indexed, by the remaining index statements (any graph command
                // creates its key): build it once more — creating indices is
                // idempotent — unless it is gone for good.
                if !self.db.list_graphs().await?.contains(&graph) {
                    continue;
                }
                tracing::warn!(graph, error = %first, "building indices failed; trying once more");
                self.engine.build_indices(&self.db, &graph).await?;
            }
        }
        Ok(())
    }

    async fn build_communities(&self, graph: &GraphId) -> Result<CommunityCounts> {
        let report = self
            .engine
            .build_communities(&self.db, graph.as_str(), &CommunityOptions::default())
            .await?;
        Ok(CommunityCounts::new(report.communities, report.members))
    }

    async fn shutdown(&self) -> Result<()> {
        self.db.shutdown().await
    }
}

impl NativeStorage {
    async fn search_graph(&self, graph: &GraphId, query: &GraphQuery) -> Result<Vec<ScoredHit>> {
        let graph = graph.as_str();
        let filtered = !query.lenses.is_empty();
        let fetch = if filtered {
            (query.limit * LENS_OVERFETCH).min(MAX_SEARCH_LIMIT)
        } else {
            query.limit.min(MAX_SEARCH_LIMIT)
        }
        .max(1);
        let selected = |d: &str| !filtered || lens_of(d).is_some_and(|l| query.lenses.contains(&l));
        let empty = SearchConfig {
            facts: None,
            entities: None,
            episodes: None,
            communities: None,
            limit: fetch,
            min_score: 0.0,
        };
        let mut hits: Vec<ScoredHit> = match &query.result_type {
            ResultType::Episodes => {
                let config = SearchConfig {
                    episodes: Some(ScopeConfig::new(Methods::FULLTEXT, RerankerKind::Rrf)),
                    ..empty
                };
                self.run(graph, config, &query.query, SearchFilters::default())
                    .await?
                    .episodes
                    .into_iter()
                    .filter(|h| selected(&h.episode.source_description))
                    .map(|h| ScoredHit::new(h.score, Hit::Episode(episode_record(h.episode))))
                    .collect()
            }
            ResultType::Facts { edge_types } => {
                let config = SearchConfig {
                    facts: Some(self.scope()),
                    ..empty
                };
                let filters = SearchFilters {
                    fact_types: edge_types.clone(),
                    ..SearchFilters::default()
                };
                self.run(graph, config, &query.query, filters)
                    .await?
                    .facts
                    .into_iter()
                    .filter_map(|h| {
                        let sources: Vec<FactSource> = h
                            .sources
                            .iter()
                            .filter(|s| selected(&s.source_description))
                            .map(|s| {
                                FactSource::from_stored(
                                    s.uuid,
                                    Some(s.source),
                                    &s.source_description,
                                )
                            })
                            .collect();
                        if filtered && sources.is_empty() {
                            return None;
                        }
                        let f = h.fact;
                        let mut fact = FactRecord::new(f.uuid, f.fact);
                        fact.created_at = Some(f.created_at);
                        fact.valid_at = f.valid_at;
                        fact.invalid_at = f.invalid_at;
                        fact.expired_at = f.expired_at;
                        fact.sources = sources;
                        Some(ScoredHit::new(h.score, Hit::Fact(fact)))
                    })
                    .collect()
            }
            ResultType::Nodes { entity_types } => {
                let config = SearchConfig {
                    entities: Some(self.scope()),
                    ..empty
                };
                let filters = SearchFilters {
                    entity_labels: entity_types.clone(),
                    ..SearchFilters::default()
                };
                let mut nodes: Vec<ScoredHit> = self
                    .run(graph, config, &query.query, filters)
                    .await?
                    .entities
                    .into_iter()
                    .map(|h| {
                        let e = h.entity;
                        let mut node = NodeRecord::new(e.uuid, e.name);
                        node.labels = e.labels;
                        node.summary = e.summary;
                        node.attributes = serde_json::Value::Object(e.attributes);
                        ScoredHit::new(h.score, Hit::Node(node))
                    })
                    .collect();
                // Replace-graph content is not extracted, so it has no entity index
                // entries: match its ids and text properties by word, as the twin does.
                let wanted = words(&query.query);
                let id = GraphId::new(graph)?;
                for (_, owned) in graph::store::owned::all_owned_nodes(&self.db, graph).await? {
                    if !entity_types.is_empty()
                        && !owned.labels.iter().any(|l| entity_types.contains(l))
                    {
                        continue;
                    }
                    let mut text = owned.id.clone();
                    for v in owned.properties.values() {
                        if let Some(s) = v.as_str() {
                            text.push(' ');
                            text.push_str(s);
                        }
                    }
                    let found = words(&text);
                    let shared = wanted.iter().filter(|w| found.contains(*w)).count();
                    if shared == 0 {
                        continue;
                    }
                    let attributes: serde_json::Map<String, serde_json::Value> = owned
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
                    let mut node = NodeRecord::new(owned_node_uuid(&id, &owned.id), name);
                    node.labels = owned.labels;
                    node.attributes = serde_json::Value::Object(attributes);
                    nodes.push(ScoredHit::new(
                        shared as f64 / wanted.len().max(1) as f64,
                        Hit::Node(node),
                    ));
                }
                nodes
            }
            ResultType::Artefacts { .. } => Vec::new(),
        };
        hits.truncate(query.limit);
        Ok(hits)
    }
}

/// An engine episode as the client returns it (writer read from the description).
fn episode_record(e: graph::Episode) -> EpisodeRecord {
    EpisodeRecord::from_stored(
        e.uuid,
        e.content,
        e.source,
        &e.source_description,
        e.valid_at,
        e.created_at,
    )
}
