//! The in-memory twin: a real, deterministic [`Client`] for consumers' tests.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::Client;
use super::core::StorageClient;
use super::request::{
    BuildCommunities, Content, EpisodeRef, Ingest, MemoryAdd, Replace, ResultType, Search,
};
use super::response::{
    CommunityCounts, EpisodeRecord, FactRecord, FactSource, Hit, IngestedRepresentation,
    NodeRecord, SearchResult,
};
use super::storage::{GraphQuery, NewEpisode, Storage};
use super::validate::{
    validate_build_communities, validate_episode_ref, validate_ingest, validate_memory_add,
    validate_replace, validate_search,
};
use crate::Result;
use crate::graph::{GENERIC_RELATION_TYPE, Timestamp};
use crate::lens::{Graph, GraphNode, GraphRelationship, OWNER_PROPERTY};
use crate::provenance::{self, Writer};
use crate::runtime::{Runtime, RuntimeConfig};

/// Deterministic in-memory [`Storage`]: no extraction, no network.
///
/// * Episodes are kept per logical graph in insertion order.
/// * A search matches an episode when it shares at least one word with the query
///   (case-insensitive; words are runs of letters and digits); results come in
///   insertion order, the Lens filter applied before the limit.
/// * Fact search wraps each matching episode as one fact record: the fact is the
///   episode body, typed `RELATES_TO`, timed by the episode, with the episode as its
///   single source (kind, description and writer).
/// * Node search reads the nodes of replace-graph Lenses (name = the `name` property,
///   else the node id); replacement follows the ownership rules of the real storage.
/// * No artefacts (Reflections do not run yet); communities are always zero.
#[derive(Debug, Default)]
pub struct InMemoryStorage {
    graphs: Mutex<HashMap<String, GraphState>>,
}

#[derive(Debug, Default, Clone)]
struct GraphState {
    episodes: Vec<StoredEpisode>,
    nodes: Vec<GraphNode>,
    relationships: Vec<GraphRelationship>,
}

#[derive(Debug, Clone)]
struct StoredEpisode {
    uuid: Uuid,
    content: Content,
    stored_description: String,
    valid_at: Timestamp,
    created_at: Timestamp,
}

impl StoredEpisode {
    fn record(&self) -> EpisodeRecord {
        EpisodeRecord::from_stored(
            self.uuid,
            self.content.encoded(),
            self.content.kind(),
            &self.stored_description,
            self.valid_at,
            self.created_at,
        )
    }

    fn lens(&self) -> Option<String> {
        match provenance::parse(&self.stored_description).writer {
            Some(Writer::Lens(name)) => Some(name),
            _ => None,
        }
    }
}

fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn owner(properties: &serde_json::Map<String, Value>) -> Option<&str> {
    properties.get(OWNER_PROPERTY).and_then(Value::as_str)
}

fn node_uuid(graph: &str, id: &str) -> Uuid {
    let digest = Sha256::digest(format!("{}:{graph}:{id}", graph.len()).as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

impl InMemoryStorage {
    /// An empty storage.
    pub fn new() -> InMemoryStorage {
        InMemoryStorage::default()
    }

    /// Forgets everything.
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// The logical graph ids holding anything, sorted.
    pub fn graphs(&self) -> Vec<String> {
        let mut g: Vec<_> = self.lock().keys().cloned().collect();
        g.sort();
        g
    }

    /// The stored source descriptions of a graph's episodes, in insertion order
    /// (markers included), for tests of provenance.
    pub fn stored_descriptions(&self, graph: &str) -> Vec<String> {
        self.lock()
            .get(graph)
            .map(|g| {
                g.episodes
                    .iter()
                    .map(|e| e.stored_description.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A graph's replace-graph nodes and relationships, ownership property included.
    pub fn replaced_graph(&self, graph: &str) -> Graph {
        self.lock()
            .get(graph)
            .map(|g| Graph {
                nodes: g.nodes.clone(),
                relationships: g.relationships.clone(),
            })
            .unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, GraphState>> {
        self.graphs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl Storage for InMemoryStorage {
    async fn add_episode(&self, episode: NewEpisode) -> Result<Uuid> {
        let uuid = Uuid::new_v4();
        self.lock()
            .entry(episode.graph)
            .or_default()
            .episodes
            .push(StoredEpisode {
                uuid,
                content: episode.content,
                stored_description: episode.stored_description,
                valid_at: episode.reference_time,
                created_at: Timestamp::now(),
            });
        Ok(uuid)
    }

    async fn search(&self, graph: &str, query: &GraphQuery) -> Result<Vec<Hit>> {
        let graphs = self.lock();
        let Some(state) = graphs.get(graph) else {
            return Ok(Vec::new());
        };
        let wanted = words(&query.query);
        let by_lens = |e: &StoredEpisode| {
            query.lenses.is_empty() || e.lens().is_some_and(|l| query.lenses.contains(&l))
        };
        let matching = state
            .episodes
            .iter()
            .filter(|e| !words(&e.content.encoded()).is_disjoint(&wanted))
            .filter(|e| by_lens(e));
        let hits = match &query.result_type {
            ResultType::Episodes => matching.map(|e| Hit::Episode(e.record())).collect(),
            ResultType::Facts { edge_types } => {
                if !edge_types.is_empty() && !edge_types.iter().any(|t| t == GENERIC_RELATION_TYPE)
                {
                    Vec::new()
                } else {
                    matching
                        .map(|e| {
                            Hit::Fact(FactRecord {
                                uuid: e.uuid,
                                fact: e.content.encoded(),
                                created_at: Some(e.created_at),
                                valid_at: Some(e.valid_at),
                                invalid_at: None,
                                expired_at: None,
                                sources: vec![FactSource::from_stored(
                                    e.uuid,
                                    Some(e.content.kind()),
                                    &e.stored_description,
                                )],
                            })
                        })
                        .collect()
                }
            }
            ResultType::Nodes { entity_types } => state
                .nodes
                .iter()
                .filter(|n| {
                    entity_types.is_empty() || n.labels.iter().any(|l| entity_types.contains(l))
                })
                .filter(|n| {
                    let mut text = n.id.clone();
                    for v in n.properties.values() {
                        if let Value::String(s) = v {
                            text.push(' ');
                            text.push_str(s);
                        }
                    }
                    !words(&text).is_disjoint(&wanted)
                })
                .map(|n| {
                    let mut attributes = n.properties.clone();
                    attributes.remove(OWNER_PROPERTY);
                    Hit::Node(NodeRecord {
                        uuid: node_uuid(graph, &n.id),
                        name: n
                            .properties
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or(&n.id)
                            .to_string(),
                        labels: n.labels.clone(),
                        summary: String::new(),
                        attributes: Value::Object(attributes),
                    })
                })
                .collect(),
            ResultType::Artefacts { .. } => Vec::new(),
        };
        let mut hits: Vec<Hit> = hits;
        hits.truncate(query.limit);
        Ok(hits)
    }

    async fn replace_graph(&self, graph: &str, lens: &str, replacement: &Graph) -> Result<()> {
        let mut graphs = self.lock();
        let state = graphs.entry(graph.to_string()).or_default();
        state
            .relationships
            .retain(|r| owner(&r.properties) != Some(lens));
        state.nodes.retain(|n| owner(&n.properties) != Some(lens));
        for node in &replacement.nodes {
            let mut node = node.clone();
            node.properties
                .insert(OWNER_PROPERTY.into(), Value::String(lens.into()));
            state.nodes.push(node);
        }
        for rel in &replacement.relationships {
            let mut rel = rel.clone();
            rel.properties
                .insert(OWNER_PROPERTY.into(), Value::String(lens.into()));
            state.relationships.push(rel);
        }
        Ok(())
    }

    async fn get_episode(&self, graph: &str, uuid: Uuid) -> Result<Option<EpisodeRecord>> {
        Ok(self.lock().get(graph).and_then(|g| {
            g.episodes
                .iter()
                .find(|e| e.uuid == uuid)
                .map(StoredEpisode::record)
        }))
    }

    async fn remove_episode(&self, graph: &str, uuid: Uuid) -> Result<bool> {
        let mut graphs = self.lock();
        let Some(g) = graphs.get_mut(graph) else {
            return Ok(false);
        };
        let before = g.episodes.len();
        g.episodes.retain(|e| e.uuid != uuid);
        Ok(g.episodes.len() != before)
    }

    async fn build_indices(&self) -> Result<()> {
        Ok(())
    }

    async fn build_communities(&self, _graph: &str) -> Result<CommunityCounts> {
        Ok(CommunityCounts::default())
    }
}

/// One recorded call of an [`InMemoryClient`], with its exact arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// [`Client::ingest`].
    Ingest(Ingest),
    /// [`Client::replace`].
    Replace(Replace),
    /// [`Client::search`].
    Search(Search),
    /// [`Client::memory_add`].
    MemoryAdd(MemoryAdd),
    /// [`Client::get_episode`].
    GetEpisode(EpisodeRef),
    /// [`Client::remove_episode`].
    RemoveEpisode(EpisodeRef),
    /// [`Client::build_indices`].
    BuildIndices,
    /// [`Client::build_communities`].
    BuildCommunities(BuildCommunities),
}

/// A canned response: the next valid call of that operation returns it instead of
/// touching the storage (it is still validated and recorded first). Each is used
/// once, in the order given.
#[derive(Debug)]
pub enum Canned {
    /// For [`Client::ingest`].
    Ingest(Result<Vec<IngestedRepresentation>>),
    /// For [`Client::replace`].
    Replace(Result<()>),
    /// For [`Client::search`].
    Search(Result<Vec<SearchResult>>),
    /// For [`Client::memory_add`] (what the call returns; nothing is written).
    MemoryAdd(Result<()>),
    /// For [`Client::get_episode`].
    GetEpisode(Result<Option<EpisodeRecord>>),
    /// For [`Client::remove_episode`].
    RemoveEpisode(Result<bool>),
    /// For [`Client::build_indices`].
    BuildIndices(Result<()>),
    /// For [`Client::build_communities`].
    BuildCommunities(Result<CommunityCounts>),
}

/// The in-memory twin of the native client, for consumers' tests: a real,
/// deterministic implementation over [`InMemoryStorage`] (no extraction, no
/// network) that validates exactly as the native client does (same
/// [`StorageClient`] logic, same validation functions), records every valid call,
/// and can be given canned responses. Invalid calls are rejected before they are
/// recorded.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// use gralkor::client::{Call, Canned, Client, InMemoryClient, Search};
///
/// let client = InMemoryClient::new();
/// client.respond(Canned::Search(Err(gralkor::Error::NotFound("down".into()))));
/// assert!(client.search(&Search::new("op", "tea")).await.is_err()); // canned
/// assert!(client.search(&Search::new("op", "tea")).await?.is_empty()); // real
/// assert!(matches!(&client.calls()[..], [Call::Search(_), Call::Search(_)]));
///
/// assert!(client.search(&Search::new("", "tea")).await.is_err()); // invalid: not recorded
/// assert_eq!(client.calls().len(), 2);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct InMemoryClient {
    core: StorageClient,
    storage: Arc<InMemoryStorage>,
    calls: Mutex<Vec<Call>>,
    canned: Mutex<Vec<Canned>>,
}

impl Default for InMemoryClient {
    fn default() -> Self {
        InMemoryClient::new()
    }
}

impl InMemoryClient {
    /// A client with only the packaged Destinations and Lens.
    pub fn new() -> InMemoryClient {
        InMemoryClient::with_runtime(Runtime::packaged())
    }

    /// A client with the consumer's runtime configuration.
    pub fn with_config(config: RuntimeConfig) -> Result<InMemoryClient> {
        Ok(InMemoryClient::with_runtime(Runtime::new(config)?))
    }

    /// A client holding `runtime`.
    pub fn with_runtime(runtime: Runtime) -> InMemoryClient {
        let storage = Arc::new(InMemoryStorage::new());
        InMemoryClient {
            core: StorageClient::new(runtime, storage.clone()),
            storage,
            calls: Mutex::new(Vec::new()),
            canned: Mutex::new(Vec::new()),
        }
    }

    /// The storage, for inspection.
    pub fn storage(&self) -> &InMemoryStorage {
        &self.storage
    }

    /// Every valid call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Queues a canned response for the next valid call of its operation.
    pub fn respond(&self, canned: Canned) {
        self.canned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(canned);
    }

    /// Clears recorded calls, canned responses and stored memory (the runtime
    /// configuration stays).
    pub fn reset(&self) {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.canned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.storage.clear();
    }

    fn record(&self, call: Call) {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(call);
    }

    fn take(&self, wanted: impl Fn(&Canned) -> bool) -> Option<Canned> {
        let mut canned = self.canned.lock().unwrap_or_else(|p| p.into_inner());
        let at = canned.iter().position(wanted)?;
        Some(canned.remove(at))
    }
}

/// The canned response for one operation, or fall through to the real one.
macro_rules! canned_or {
    ($self:ident, $variant:ident, $real:expr) => {
        match $self.take(|c| matches!(c, Canned::$variant(_))) {
            Some(Canned::$variant(r)) => r,
            _ => $real,
        }
    };
}

#[async_trait]
impl Client for InMemoryClient {
    fn runtime(&self) -> &Runtime {
        self.core.runtime()
    }

    async fn ingest(&self, request: &Ingest) -> Result<Vec<IngestedRepresentation>> {
        let snapshot = self.runtime().snapshot();
        validate_ingest(request, &snapshot)?;
        self.record(Call::Ingest(request.clone()));
        canned_or!(
            self,
            Ingest,
            self.core.ingest_with(&snapshot, request).await
        )
    }

    async fn replace(&self, request: &Replace) -> Result<()> {
        let snapshot = self.runtime().snapshot();
        validate_replace(request, &snapshot)?;
        self.record(Call::Replace(request.clone()));
        canned_or!(
            self,
            Replace,
            self.core.replace_with(&snapshot, request).await
        )
    }

    async fn search(&self, request: &Search) -> Result<Vec<SearchResult>> {
        let snapshot = self.runtime().snapshot();
        validate_search(request, &snapshot)?;
        self.record(Call::Search(request.clone()));
        canned_or!(
            self,
            Search,
            self.core.search_with(&snapshot, request).await
        )
    }

    async fn memory_add(&self, request: &MemoryAdd) -> Result<()> {
        let snapshot = self.runtime().snapshot();
        validate_memory_add(request, &snapshot)?;
        self.record(Call::MemoryAdd(request.clone()));
        canned_or!(
            self,
            MemoryAdd,
            self.core.memory_add_with(&snapshot, request)
        )
    }

    async fn await_background_writes(&self) {
        self.core.await_background_writes().await
    }

    async fn get_episode(&self, request: &EpisodeRef) -> Result<Option<EpisodeRecord>> {
        let snapshot = self.runtime().snapshot();
        validate_episode_ref(request, &snapshot)?;
        self.record(Call::GetEpisode(request.clone()));
        canned_or!(
            self,
            GetEpisode,
            self.core.get_episode_with(&snapshot, request).await
        )
    }

    async fn remove_episode(&self, request: &EpisodeRef) -> Result<bool> {
        let snapshot = self.runtime().snapshot();
        validate_episode_ref(request, &snapshot)?;
        self.record(Call::RemoveEpisode(request.clone()));
        canned_or!(
            self,
            RemoveEpisode,
            self.core.remove_episode_with(&snapshot, request).await
        )
    }

    async fn build_indices(&self) -> Result<()> {
        self.record(Call::BuildIndices);
        canned_or!(self, BuildIndices, self.core.build_indices().await)
    }

    async fn build_communities(&self, request: &BuildCommunities) -> Result<CommunityCounts> {
        let snapshot = self.runtime().snapshot();
        validate_build_communities(request, &snapshot)?;
        self.record(Call::BuildCommunities(request.clone()));
        canned_or!(
            self,
            BuildCommunities,
            self.core.build_communities_with(&snapshot, request).await
        )
    }
}
