//! [`NativeClient`]: the memory API over FalkorDB and the graph engine.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::Client;
use super::core::StorageClient;
use super::request::{
    BuildCommunities, EpisodeRef, Ingest, MemoryAdd, Replace, ResultType, Search, SourceKind,
};
use super::response::{
    CommunityCounts, EpisodeRecord, FactRecord, FactSource, Hit, IngestedRepresentation,
    NodeRecord, SearchResult,
};
use super::storage::{GraphQuery, NewEpisode, Storage};
use crate::config::Config;
use crate::falkordb::FalkorDb;
use crate::graph::search::{
    self as gsearch, MAX_SEARCH_LIMIT, Methods, RerankerKind, ScopeConfig, SearchConfig,
    SearchFilters, SearchRequest,
};
use crate::graph::{self, AddEpisode, CommunityOptions, Engine};
use crate::lens::Graph;
use crate::provenance::{self, Writer};
use crate::runtime::{Runtime, RuntimeConfig};
use crate::{Error, Result};

/// Candidates fetched per result wanted when a Lens selector filters them afterwards.
const LENS_OVERFETCH: usize = 5;

/// The [`Storage`] of [`NativeClient`]: episodes go through the [`Engine`]
/// (extraction when it has models, episodes only otherwise), and so do searches
/// ([`Engine::search`]) and replace-graph content ([`Engine::replace_owned`], one
/// statement, atomic).
#[derive(Debug, Clone)]
pub struct NativeStorage {
    engine: Engine,
}

impl NativeStorage {
    /// A storage over `engine`: its embedder enables vector search, its reranker the
    /// cross-encoder recipes.
    pub fn new(engine: Engine) -> NativeStorage {
        NativeStorage { engine }
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

    async fn run(
        &self,
        graph: &str,
        config: SearchConfig,
        query: &str,
        filters: SearchFilters,
    ) -> Result<gsearch::SearchResults> {
        let request = SearchRequest::new(query, config).filters(filters);
        self.engine.search(graph, &request).await
    }
}

/// The episode uuid of a replayable write: the same graph, writer and replay key give
/// the same uuid, so the engine recognises the replay.
fn replay_uuid(graph: &str, writer: &Writer, key: &str) -> Uuid {
    let mut h = Sha256::new();
    for part in [graph, &writer.to_string(), key] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&h.finalize()[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
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
        let uuid = episode
            .replay_key
            .as_deref()
            .map_or_else(Uuid::new_v4, |k| {
                replay_uuid(&episode.graph, &episode.writer, k)
            });
        let defaulted_time = !episode.reference_time_given;
        let mut request = AddEpisode::new(
            episode.content.encoded(),
            episode.content.kind().episode_kind(),
            episode.reference_time,
        )
        .uuid(uuid)
        .source_description(episode.stored_description)
        .ontology(episode.ontology);
        let out = match self
            .engine
            .add_episode(&episode.graph, request.clone())
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
                    .get_episode(&episode.graph, uuid)
                    .await?
                    .ok_or_else(|| Error::NotFound(format!("episode {uuid}")))?;
                request.reference_time = stored.valid_at;
                self.engine.add_episode(&episode.graph, request).await?
            }
            other => other?,
        };
        Ok(out.episode.uuid)
    }

    async fn search(&self, graph: &str, query: &GraphQuery) -> Result<Vec<Hit>> {
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
        let mut hits: Vec<Hit> = match &query.result_type {
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
                    .map(|h| Hit::Episode(episode_record(h.episode)))
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
                                    Some(SourceKind::from_episode_kind(s.source)),
                                    &s.source_description,
                                )
                            })
                            .collect();
                        if filtered && sources.is_empty() {
                            return None;
                        }
                        let f = h.fact;
                        Some(Hit::Fact(FactRecord {
                            uuid: f.uuid,
                            fact: f.fact,
                            created_at: Some(f.created_at),
                            valid_at: f.valid_at,
                            invalid_at: f.invalid_at,
                            expired_at: f.expired_at,
                            sources,
                        }))
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
                let mut nodes: Vec<Hit> = self
                    .run(graph, config, &query.query, filters)
                    .await?
                    .entities
                    .into_iter()
                    .map(|h| {
                        let e = h.entity;
                        Hit::Node(NodeRecord {
                            uuid: e.uuid,
                            name: e.name,
                            labels: e.labels,
                            summary: e.summary,
                            attributes: serde_json::Value::Object(e.attributes),
                        })
                    })
                    .collect();
                // Replace-graph content is not extracted, so it has no entity index
                // entries: match its ids and text properties by word, as the twin does.
                let wanted = words(&query.query);
                for (_, node) in self.engine.owned_nodes(graph).await? {
                    if !entity_types.is_empty()
                        && !node.labels.iter().any(|l| entity_types.contains(l))
                    {
                        continue;
                    }
                    let mut text = node.id.clone();
                    for v in node.properties.values() {
                        if let Some(s) = v.as_str() {
                            text.push(' ');
                            text.push_str(s);
                        }
                    }
                    if words(&text).is_disjoint(&wanted) {
                        continue;
                    }
                    let attributes: serde_json::Map<String, serde_json::Value> = node
                        .properties
                        .iter()
                        .map(|(k, v)| (k.clone(), v.to_json()))
                        .collect();
                    nodes.push(Hit::Node(NodeRecord {
                        uuid: owned_uuid(graph, &node.id),
                        name: node
                            .properties
                            .get("name")
                            .and_then(|v| v.as_str())
                            .unwrap_or(&node.id)
                            .to_string(),
                        labels: node.labels,
                        summary: String::new(),
                        attributes: serde_json::Value::Object(attributes),
                    }));
                }
                nodes
            }
            ResultType::Artefacts { .. } => Vec::new(),
        };
        hits.truncate(query.limit);
        Ok(hits)
    }

    async fn replace_graph(&self, graph: &str, lens: &str, replacement: &Graph) -> Result<()> {
        let (nodes, relationships) = replacement.to_owned_parts();
        self.engine
            .replace_owned(graph, lens, &nodes, &relationships)
            .await?;
        Ok(())
    }

    async fn get_episode(&self, graph: &str, uuid: Uuid) -> Result<Option<EpisodeRecord>> {
        Ok(self
            .engine
            .get_episode(graph, uuid)
            .await?
            .map(episode_record))
    }

    async fn remove_episode(&self, graph: &str, uuid: Uuid) -> Result<bool> {
        Ok(self.engine.remove_episode(graph, uuid).await?.episode)
    }

    async fn build_indices(&self) -> Result<()> {
        self.engine.build_all_indices().await
    }

    async fn build_communities(&self, graph: &str) -> Result<CommunityCounts> {
        let report = self
            .engine
            .build_communities(graph, &CommunityOptions::default())
            .await?;
        Ok(CommunityCounts {
            communities: report.communities,
            edges: report.members,
        })
    }
}

/// An engine episode as the client returns it (writer read from the description).
fn episode_record(e: graph::Episode) -> EpisodeRecord {
    EpisodeRecord::from_stored(
        e.uuid,
        e.content,
        SourceKind::from_episode_kind(e.source),
        &e.source_description,
        e.valid_at,
        e.created_at,
    )
}

/// A stable uuid for a Lens-owned node, from its graph and id.
fn owned_uuid(graph: &str, id: &str) -> Uuid {
    replay_uuid(graph, &Writer::Direct, &format!("owned:{id}"))
}

/// The memory API over FalkorDB and the graph engine: the [`Client`] logic of
/// [`StorageClient`] on a [`NativeStorage`].
///
/// Build it from [`Config`] (`Config::from_env()` reads the seed's variables) and a
/// [`RuntimeConfig`]. Without model configuration it stores episodes only (searchable
/// by text; an engine with models can [`resume`](Engine::resume_pending) them later).
///
/// ```no_run
/// use gralkor::client::{Client, Ingest, Content, NativeClient, Search};
/// use gralkor::config::Config;
/// use gralkor::runtime::RuntimeConfig;
///
/// # async fn run() -> gralkor::Result<()> {
/// let client = NativeClient::connect(Config::from_env()?, RuntimeConfig::new()).await?;
/// client
///     .ingest(&Ingest::new("turn-1", "op-7", "personal-chat", Content::conversation("Ada: I moved to Lisbon.")))
///     .await?;
/// let found = client.search(&Search::new("op-7", "Lisbon")).await?;
/// println!("{} results", found.len());
/// client.shutdown().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct NativeClient {
    core: StorageClient,
    storage: Arc<NativeStorage>,
}

impl NativeClient {
    /// Connects to (or starts) FalkorDB as `config` says, builds the model clients if
    /// configured, and validates `runtime`. Nothing is written.
    pub async fn connect(config: Config, runtime: RuntimeConfig) -> Result<NativeClient> {
        config.validate()?;
        let runtime = Runtime::new(runtime)?;
        let db = FalkorDb::connect(config.falkordb.clone()).await?;
        let engine = match &config.models {
            Some(models) => {
                let m = models.build()?;
                Engine::new(db, m.llm, m.embedder).with_reranker(m.reranker)
            }
            None => Engine::episodes_only(db),
        };
        Ok(NativeClient::from_parts(
            runtime,
            NativeStorage::new(engine),
        ))
    }

    /// A client over an existing storage (for your own engine options, models or
    /// database handle).
    pub fn from_parts(runtime: Runtime, storage: NativeStorage) -> NativeClient {
        let storage = Arc::new(storage);
        NativeClient {
            core: StorageClient::new(runtime, storage.clone()),
            storage,
        }
    }

    /// The storage (database handle and engine).
    pub fn storage(&self) -> &NativeStorage {
        &self.storage
    }

    /// Waits for background writes ([`Client::memory_add`]) to finish, then stops the
    /// embedded server if this client started it (a remote server is left running).
    /// Episodes whose extraction failed stay pending in the graph.
    pub async fn shutdown(&self) -> Result<()> {
        self.core.await_background_writes().await;
        self.storage.db().shutdown().await
    }
}

#[async_trait]
impl Client for NativeClient {
    fn runtime(&self) -> &Runtime {
        self.core.runtime()
    }

    async fn ingest(&self, request: &Ingest) -> Result<Vec<IngestedRepresentation>> {
        self.core.ingest(request).await
    }

    async fn replace(&self, request: &Replace) -> Result<()> {
        self.core.replace(request).await
    }

    async fn search(&self, request: &Search) -> Result<Vec<SearchResult>> {
        self.core.search(request).await
    }

    async fn memory_add(&self, request: &MemoryAdd) -> Result<()> {
        self.core.memory_add(request).await
    }

    async fn await_background_writes(&self) {
        self.core.await_background_writes().await;
    }

    async fn get_episode(&self, request: &EpisodeRef) -> Result<Option<EpisodeRecord>> {
        self.core.get_episode(request).await
    }

    async fn remove_episode(&self, request: &EpisodeRef) -> Result<bool> {
        self.core.remove_episode(request).await
    }

    async fn build_indices(&self) -> Result<()> {
        self.core.build_indices().await
    }

    async fn build_communities(&self, request: &BuildCommunities) -> Result<CommunityCounts> {
        self.core.build_communities(request).await
    }
}
