//! [`InMemoryStorage`]: the deterministic storage of the test twin.

use crate::vocab::content::EpisodeFields;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::Value;
use uuid::Uuid;

use super::content::{overlap, words};
use super::provenance::Writer;
use super::{
    CommunityCounts, Content, EpisodeRecord, FactRecord, Graph, GraphId, GraphNode, GraphQuery,
    GraphRelationship, Hit, NewEpisode, NodeRecord, OWNER_PROPERTY, ResultType, ScoredHit, Storage,
    owned_node_uuid,
};
use crate::Result;
use crate::vocab::{GraphStatus, Timestamp};

/// Deterministic in-memory [`Storage`]: no extraction, no network.
///
/// * Episodes are kept per logical graph in insertion order.
/// * A search matches an episode when it shares at least one word with the query
///   (case-insensitive; words are runs of letters and digits); results come in
///   insertion order, the Lens filter and the episode selection applied before the
///   limit; a hit's score is the share of the query's words it contains.
/// * Fact search wraps each matching episode as one fact record: the fact is the
///   episode body, typed `RELATES_TO`, timed by the episode, with the episode as its
///   single source (kind, description and writer).
/// * Node search reads the nodes of replace-graph Lenses (name = the `name` property,
///   else the node id); replacement follows the ownership rules of the real storage.
/// * Artefacts: a Reflection's episode is create-or-confirm by uuid (different content
///   is a conflict, as in the engine); an artefact search ranks Reflection episodes
///   by word overlap (or takes the one `artefact_id`), then collapses every episode
///   carrying a selected id (a disagreeing duplicate is a conflict).
/// * Communities are always zero.
#[derive(Debug, Default)]
pub struct InMemoryStorage {
    graphs: Mutex<HashMap<String, GraphState>>,
}

#[derive(Debug, Default, Clone)]
struct GraphState {
    episodes: Vec<HeldEpisode>,
    nodes: Vec<GraphNode>,
    relationships: Vec<GraphRelationship>,
}

#[derive(Debug, Clone)]
struct HeldEpisode {
    uuid: Uuid,
    content: Content,
    stored_description: String,
    writer: Writer,
    valid_at: Timestamp,
    created_at: Timestamp,
    session: Option<String>,
    /// The extraction instructions it was written with (what the engine would get).
    instructions: Option<String>,
}

impl HeldEpisode {
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

    fn lens(&self) -> Option<&str> {
        match &self.writer {
            Writer::Lens(name) => Some(name),
            _ => None,
        }
    }
}

fn owner(properties: &serde_json::Map<String, Value>) -> Option<&str> {
    properties.get(OWNER_PROPERTY).and_then(Value::as_str)
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

    /// The extraction instructions each of a graph's episodes was written with, in
    /// insertion order (what the engine would have been given), for tests of custom
    /// instructions.
    pub fn stored_instructions(&self, graph: &str) -> Vec<Option<String>> {
        self.lock()
            .get(graph)
            .map(|g| g.episodes.iter().map(|e| e.instructions.clone()).collect())
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
    async fn add_episode(&self, episode: NewEpisode) -> Result<super::StoredEpisode> {
        let started = std::time::Instant::now();
        let mut graphs = self.lock();
        let state = graphs
            .entry(episode.graph.as_str().to_string())
            .or_default();
        // One rule with the engine: a replay (same derived uuid) repeating the original
        // stores nothing twice; different immutable content under the same uuid is a
        // conflict naming the first difference, and writes nothing.
        if let Some(held) = state.episodes.iter().find(|e| e.uuid == episode.uuid) {
            let (held_content, asked_content) = (held.content.encoded(), episode.content.encoded());
            let field = EpisodeFields {
                content: &held_content,
                source: held.content.kind(),
                description: &held.stored_description,
                valid_at: Some(held.valid_at),
            }
            .first_difference(&EpisodeFields {
                content: &asked_content,
                source: episode.content.kind(),
                description: &episode.stored_description,
                valid_at: episode
                    .reference_time_given
                    .then_some(episode.reference_time),
            });
            if let Some(field) = field {
                return Err(crate::Error::EpisodeConflict {
                    uuid: episode.uuid,
                    field,
                });
            }
        } else {
            state.episodes.push(HeldEpisode {
                uuid: episode.uuid,
                content: episode.content,
                stored_description: episode.stored_description,
                writer: episode.writer,
                valid_at: episode.reference_time,
                created_at: Timestamp::now(),
                session: episode.session,
                instructions: episode.instructions,
            });
        }
        let cost = super::IngestCost {
            wall_time_us: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            ..super::IngestCost::default()
        };
        Ok(super::StoredEpisode::new(episode.uuid, cost))
    }

    async fn search(&self, graphs: &[GraphId], query: &GraphQuery) -> Result<Vec<Vec<ScoredHit>>> {
        let held = self.lock();
        let wanted = words(&query.query);
        graphs
            .iter()
            .map(|graph| match held.get(graph.as_str()) {
                Some(state) => match &query.result_type {
                    ResultType::Artefacts { artefact_id } => {
                        artefact_hits(state, &wanted, query, artefact_id.as_deref())
                    }
                    _ => {
                        let hits = search_graph(state, graph, &wanted, query);
                        super::records::check_reflection_bodies(&hits)?;
                        Ok(hits)
                    }
                },
                None => Ok(Vec::new()),
            })
            .collect()
    }

    async fn replace_graph(&self, graph: &GraphId, lens: &str, replacement: &Graph) -> Result<()> {
        let mut graphs = self.lock();
        let state = graphs.entry(graph.as_str().to_string()).or_default();
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

    async fn get_episode(&self, graph: &GraphId, uuid: Uuid) -> Result<Option<EpisodeRecord>> {
        Ok(self.lock().get(graph.as_str()).and_then(|g| {
            g.episodes
                .iter()
                .find(|e| e.uuid == uuid)
                .map(HeldEpisode::record)
        }))
    }

    async fn remove_episode(&self, graph: &GraphId, uuid: Uuid) -> Result<bool> {
        let mut graphs = self.lock();
        let Some(g) = graphs.get_mut(graph.as_str()) else {
            return Ok(false);
        };
        let before = g.episodes.len();
        g.episodes.retain(|e| e.uuid != uuid);
        Ok(g.episodes.len() != before)
    }

    async fn session_episodes(&self, graph: &GraphId, session: &str) -> Result<Vec<Uuid>> {
        // Held in write order: oldest first.
        Ok(self
            .lock()
            .get(graph.as_str())
            .map(|g| {
                g.episodes
                    .iter()
                    .filter(|e| e.session.as_deref() == Some(session))
                    .map(|e| e.uuid)
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn purge_graph(&self, graph: &GraphId) -> Result<bool> {
        Ok(self.lock().remove(graph.as_str()).is_some())
    }

    async fn health(&self) -> Result<String> {
        Ok(format!("in-memory: {} graphs", self.lock().len()))
    }

    async fn status(&self) -> Result<super::StorageStatus> {
        let mut status = super::StorageStatus::new("in-memory");
        status.graphs = self.lock().len();
        Ok(status)
    }

    async fn graph_status(&self, graph: &GraphId) -> Result<GraphStatus> {
        // Nothing is ever pending (nothing is extracted) and there are no indices.
        Ok(match self.lock().get(graph.as_str()) {
            Some(g) => GraphStatus {
                exists: true,
                episodes: g.episodes.len() as u64,
                ..Default::default()
            },
            None => GraphStatus::default(),
        })
    }

    async fn build_indices(&self) -> Result<()> {
        Ok(())
    }

    async fn build_communities(&self, _graph: &GraphId) -> Result<CommunityCounts> {
        Ok(CommunityCounts::default())
    }
}

/// One graph's hits for `query`, in insertion order.
fn search_graph(
    state: &GraphState,
    graph: &GraphId,
    wanted: &HashSet<String>,
    query: &GraphQuery,
) -> Vec<ScoredHit> {
    let by_lens = |e: &HeldEpisode| {
        query.lenses.is_empty()
            || e.lens()
                .is_some_and(|l| query.lenses.iter().any(|q| q == l))
    };
    // `as_of`: only what had happened by then (an episode standing in as a fact is
    // timed by its episode, so the fact rule gives the same answer). A fact's one
    // source is its episode: the episode selection keeps both alike.
    let selection: Option<HashSet<Uuid>> =
        query.episodes.as_ref().map(|l| l.iter().copied().collect());
    let selected = |e: &HeldEpisode| selection.as_ref().is_none_or(|s| s.contains(&e.uuid));
    let matching = state
        .episodes
        .iter()
        .filter(|e| by_lens(e) && selected(e) && query.admits_episode(e.valid_at))
        .map(|e| (overlap(wanted, &e.content.encoded()), e))
        .filter(|(score, _)| *score > 0.0);
    let mut hits: Vec<ScoredHit> = match &query.result_type {
        ResultType::Episodes => matching
            .map(|(score, e)| ScoredHit::new(score, Hit::Episode(e.record())))
            .collect(),
        ResultType::Facts { edge_types } => {
            if !ResultType::episode_facts_wanted(edge_types) {
                Vec::new()
            } else {
                matching
                    .map(|(score, e)| {
                        let fact = FactRecord::from_episode(
                            e.uuid,
                            e.content.encoded(),
                            e.content.kind(),
                            &e.stored_description,
                            e.valid_at,
                            e.created_at,
                        );
                        ScoredHit::new(score, Hit::Fact(fact))
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
            .filter_map(|n| {
                let mut text = n.id.clone();
                for v in n.properties.values() {
                    if let Value::String(s) = v {
                        text.push(' ');
                        text.push_str(s);
                    }
                }
                let score = overlap(wanted, &text);
                (score > 0.0).then(|| ScoredHit::new(score, Hit::Node(node_record(graph, n))))
            })
            .collect(),
        // Answered by `artefact_hits`.
        ResultType::Artefacts { .. } => Vec::new(),
    };
    hits.truncate(query.limit);
    hits
}

/// One graph's artefacts: Reflection episodes ranked by the query (or the one
/// `artefact_id`) select up to `limit` artefact ids, in insertion order; then every
/// Reflection episode carrying a selected id is enumerated: equal duplicates
/// collapse, a disagreeing one is an artefact conflict, a malformed body the
/// `invalid_reflection_artefact` error.
fn artefact_hits(
    state: &GraphState,
    wanted: &HashSet<String>,
    query: &GraphQuery,
    artefact_id: Option<&str>,
) -> Result<Vec<ScoredHit>> {
    let mut held: Vec<(&HeldEpisode, super::Artefact)> = Vec::new();
    for e in &state.episodes {
        if let Writer::Reflection(name) = &e.writer {
            match super::Artefact::from_body(&e.content.encoded()) {
                Some(a) => held.push((e, a)),
                None => {
                    return Err(crate::Error::InvalidReflectionArtefact {
                        reflection: name.clone(),
                    });
                }
            }
        }
    }
    let mut selected: Vec<(String, f64)> = Vec::new();
    for (e, a) in &held {
        if selected.len() >= query.limit {
            break;
        }
        let score = match artefact_id {
            Some(id) if a.id == id => 1.0,
            Some(_) => continue,
            None => overlap(wanted, &e.content.encoded()),
        };
        if score > 0.0 && !selected.iter().any(|(id, _)| *id == a.id) {
            selected.push((a.id.clone(), score));
        }
    }
    let mut hits = Vec::with_capacity(selected.len());
    for (id, score) in selected {
        let mut found: Option<&super::Artefact> = None;
        for (_, a) in held.iter().filter(|(_, a)| a.id == id) {
            match found {
                Some(f) if f != a => return Err(crate::Error::ArtefactConflict { id }),
                _ => found = Some(a),
            }
        }
        if let Some(a) = found {
            hits.push(ScoredHit::new(score, Hit::Artefact(a.clone())));
        }
    }
    Ok(hits)
}

/// A replace-graph node as a search returns it (its owner mark removed).
fn node_record(graph: &GraphId, n: &GraphNode) -> NodeRecord {
    let mut attributes = n.properties.clone();
    attributes.remove(OWNER_PROPERTY);
    let name = n
        .properties
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or(&n.id);
    let mut node = NodeRecord::new(owned_node_uuid(graph, &n.id), name);
    node.labels = n.labels.clone();
    node.attributes = Value::Object(attributes);
    node
}
