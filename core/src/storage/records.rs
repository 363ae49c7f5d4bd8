//! What a storage returns and takes: episode, fact and node records, search hits
//! with their relevance, the resolved episode to store and the per-graph query.
//!
//! Every type here is `Serialize + Deserialize` (timestamps as RFC 3339 text) and
//! `#[non_exhaustive]`, so fields can be added without breaking users; build requests
//! with their constructors.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::content::{Content, SourceKind};
use super::ids::GraphId;
use super::provenance::{self, Writer};
use crate::ontology::Ontology;
use crate::vocab::{FactTimes, GENERIC_RELATION_TYPE, Timestamp, derived_uuid, times_current};

/// One search hit: an episode, a fact, a node or an artefact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Hit {
    /// An episode.
    Episode(EpisodeRecord),
    /// A fact.
    Fact(FactRecord),
    /// An entity or replace-graph node.
    Node(NodeRecord),
    /// A Reflection's artefact.
    Artefact(Artefact),
}

impl Hit {
    /// The episode, if this is one.
    pub fn as_episode(&self) -> Option<&EpisodeRecord> {
        match self {
            Hit::Episode(e) => Some(e),
            _ => None,
        }
    }

    /// The fact, if this is one.
    pub fn as_fact(&self) -> Option<&FactRecord> {
        match self {
            Hit::Fact(f) => Some(f),
            _ => None,
        }
    }

    /// The node, if this is one.
    pub fn as_node(&self) -> Option<&NodeRecord> {
        match self {
            Hit::Node(n) => Some(n),
            _ => None,
        }
    }
}

/// A hit with its relevance: higher is more relevant, comparable within one
/// search of one graph only (a fused rank score for hybrid search, a word-overlap
/// share for the in-memory twin).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ScoredHit {
    /// The relevance.
    pub score: f64,
    /// What was found.
    pub hit: Hit,
}

impl ScoredHit {
    /// A hit with its score.
    pub fn new(score: f64, hit: Hit) -> ScoredHit {
        ScoredHit { score, hit }
    }
}

/// A stored episode: the content as stored, the caller's own description (writer
/// marker removed) and the writer it names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EpisodeRecord {
    /// The episode's uuid.
    pub uuid: Uuid,
    /// The content as stored (a structured record JSON-encoded).
    pub content: String,
    /// The episode kind.
    pub source_kind: SourceKind,
    /// The caller's description, without the writer marker.
    pub source_description: String,
    /// Who wrote it (`None`: unattributed).
    pub writer: Option<Writer>,
    /// When it happened in the world.
    pub valid_at: Timestamp,
    /// When it was stored.
    pub created_at: Timestamp,
    /// For an episode a Reflection wrote: its artefact, read from the body
    /// (`{"id": …, "payload": {…}}`). `None` for every other writer — text that looks
    /// like an artefact stays text — and for a malformed Reflection body, which a
    /// search reports as [`Error::InvalidReflectionArtefact`](crate::Error::InvalidReflectionArtefact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artefact: Option<Artefact>,
}

impl EpisodeRecord {
    /// A record from a stored episode; the writer and the caller's description are
    /// read from the stored description's marker.
    pub fn from_stored(
        uuid: Uuid,
        content: impl Into<String>,
        source_kind: SourceKind,
        stored_description: &str,
        valid_at: Timestamp,
        created_at: Timestamp,
    ) -> EpisodeRecord {
        let p = provenance::parse(stored_description);
        let content = content.into();
        let artefact = match &p.writer {
            Some(Writer::Reflection(_)) => Artefact::from_body(&content),
            _ => None,
        };
        EpisodeRecord {
            uuid,
            content,
            source_kind,
            source_description: p.description,
            writer: p.writer,
            valid_at,
            created_at,
            artefact,
        }
    }
}

/// One episode a fact was extracted from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FactSource {
    /// The episode's uuid.
    pub episode: Uuid,
    /// Its kind, when known.
    pub source_kind: Option<SourceKind>,
    /// The description as the Destinations document shows it with a fact: a Lens's or
    /// a Reflection's keeps its stored provenance marker (`runbook [lens: jira]`,
    /// `reflection:generalisations`); a direct write's is the caller's text, the
    /// storage-owned `[gralkor: direct]` removed; an unmarked one is as stored.
    pub source_description: String,
    /// Who wrote the episode.
    pub writer: Option<Writer>,
}

impl FactSource {
    /// A source from a stored description (the writer read from its marker; the
    /// marker kept for a Lens or a Reflection, removed for a direct write).
    ///
    /// ```
    /// use gralkor::client::FactSource;
    /// use gralkor::provenance::Writer;
    ///
    /// let lens = FactSource::from_stored(uuid::Uuid::nil(), None, "PAY-1 [lens: jira]");
    /// assert_eq!((lens.source_description.as_str(), lens.writer), ("PAY-1 [lens: jira]", Some(Writer::Lens("jira".into()))));
    /// let reflection = FactSource::from_stored(uuid::Uuid::nil(), None, "reflection:erl");
    /// assert_eq!(reflection.source_description, "reflection:erl");
    /// let direct = FactSource::from_stored(uuid::Uuid::nil(), None, "manual [gralkor: direct]");
    /// assert_eq!((direct.source_description.as_str(), direct.writer), ("manual", Some(Writer::Direct)));
    /// ```
    pub fn from_stored(
        episode: Uuid,
        source_kind: Option<SourceKind>,
        stored_description: &str,
    ) -> FactSource {
        let p = provenance::parse(stored_description);
        let source_description = match p.writer {
            Some(Writer::Lens(_) | Writer::Reflection(_)) => stored_description.to_string(),
            Some(Writer::Direct) | None => p.description,
        };
        FactSource {
            episode,
            source_kind,
            source_description,
            writer: p.writer,
        }
    }
}

/// A fact: a relationship between two entities with its validity in the world
/// (`valid_at`/`invalid_at`) and in the system (`created_at`/`expired_at`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FactRecord {
    /// The fact's uuid.
    pub uuid: Uuid,
    /// The fact as a sentence.
    pub fact: String,
    /// When it was stored.
    pub created_at: Option<Timestamp>,
    /// When it became true.
    pub valid_at: Option<Timestamp>,
    /// When it stopped being true.
    pub invalid_at: Option<Timestamp>,
    /// When a later fact superseded it.
    pub expired_at: Option<Timestamp>,
    /// The episodes it came from (for a Lens-filtered search, only the selected
    /// Lenses').
    pub sources: Vec<FactSource>,
}

impl FactRecord {
    /// A stored, not-yet-extracted episode standing in as a fact (what a storage that
    /// does not extract returns for a fact search): its content, timed by the episode,
    /// with the episode as its single source.
    pub fn from_episode(
        uuid: Uuid,
        content: impl Into<String>,
        source_kind: SourceKind,
        stored_description: &str,
        valid_at: Timestamp,
        created_at: Timestamp,
    ) -> FactRecord {
        let mut fact = FactRecord::new(uuid, content);
        fact.created_at = Some(created_at);
        fact.valid_at = Some(valid_at);
        fact.sources = vec![FactSource::from_stored(
            uuid,
            Some(source_kind),
            stored_description,
        )];
        fact
    }

    /// A fact with no times and no sources.
    pub fn new(uuid: Uuid, fact: impl Into<String>) -> FactRecord {
        FactRecord {
            uuid,
            fact: fact.into(),
            created_at: None,
            valid_at: None,
            invalid_at: None,
            expired_at: None,
            sources: Vec::new(),
        }
    }
}

/// An entity or a replace-graph node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NodeRecord {
    /// The uuid (derived from graph and id for replace-graph nodes).
    pub uuid: Uuid,
    /// The name.
    pub name: String,
    /// Its labels.
    pub labels: Vec<String>,
    /// Its summary (empty for replace-graph nodes).
    pub summary: String,
    /// Its attributes or properties.
    pub attributes: Value,
}

impl NodeRecord {
    /// A node with no labels, summary or attributes.
    pub fn new(uuid: Uuid, name: impl Into<String>) -> NodeRecord {
        NodeRecord {
            uuid,
            name: name.into(),
            labels: Vec::new(),
            summary: String::new(),
            attributes: Value::Object(Default::default()),
        }
    }
}

/// A Reflection's artefact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Artefact {
    /// The artefact's id.
    pub id: String,
    /// What the Reflection produced.
    pub payload: Value,
}

impl Artefact {
    /// An artefact.
    pub fn new(id: impl Into<String>, payload: Value) -> Artefact {
        Artefact {
            id: id.into(),
            payload,
        }
    }

    /// The episode body a Reflection's artefact is stored as: `{"id": …, "payload": …}`.
    pub fn body(&self) -> Value {
        serde_json::json!({"id": self.id, "payload": self.payload})
    }

    /// Reads an artefact from a stored episode body; `None` unless the body is an
    /// object with exactly a string `id` and an object `payload`.
    pub fn from_body(body: &str) -> Option<Artefact> {
        let v: Value = serde_json::from_str(body).ok()?;
        let map = v.as_object()?;
        if map.len() != 2 {
            return None;
        }
        let id = map.get("id")?.as_str()?;
        let payload = map.get("payload")?;
        if !payload.is_object() {
            return None;
        }
        Some(Artefact::new(id, payload.clone()))
    }
}

/// Refuses episode hits written by a Reflection whose body is no well-formed artefact
/// (`invalid_reflection_artefact`): a search returns that error, never a partial
/// result.
#[doc(hidden)]
pub fn check_reflection_bodies(hits: &[ScoredHit]) -> crate::Result<()> {
    for h in hits {
        if let Hit::Episode(e) = &h.hit
            && let Some(Writer::Reflection(name)) = &e.writer
            && e.artefact.is_none()
        {
            return Err(crate::Error::InvalidReflectionArtefact {
                reflection: name.clone(),
            });
        }
    }
    Ok(())
}

/// What community detection made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CommunityCounts {
    /// Communities.
    pub communities: usize,
    /// Membership edges.
    pub edges: usize,
}

impl CommunityCounts {
    /// Counts of communities and their membership edges.
    pub fn new(communities: usize, edges: usize) -> CommunityCounts {
        CommunityCounts { communities, edges }
    }
}

/// What a search returns, with the filters it takes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResultType {
    /// Episodes.
    #[default]
    Episodes,
    /// Facts, optionally only of these relationship types.
    Facts {
        /// Relationship types (empty: any).
        #[serde(default)]
        edge_types: Vec<String>,
    },
    /// Entities and replace-graph nodes, optionally only with these labels.
    Nodes {
        /// Labels (empty: any).
        #[serde(default)]
        entity_types: Vec<String>,
    },
    /// Reflection artefacts, optionally one by id.
    Artefacts {
        /// One artefact (the query may then be blank).
        #[serde(default)]
        artefact_id: Option<String>,
    },
}

impl ResultType {
    /// Whether a fact search restricted to `edge_types` may return episode-backed facts
    /// ([`FactRecord::from_episode`]), which are typed like the generic relationship:
    /// any type, or `RELATES_TO` among them.
    #[doc(hidden)]
    pub fn episode_facts_wanted(edge_types: &[String]) -> bool {
        edge_types.is_empty() || edge_types.iter().any(|t| t == GENERIC_RELATION_TYPE)
    }

    /// `episodes`, `facts`, `nodes` or `artefacts`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ResultType::Episodes => "episodes",
            ResultType::Facts { .. } => "facts",
            ResultType::Nodes { .. } => "nodes",
            ResultType::Artefacts { .. } => "artefacts",
        }
    }
}

/// One episode to store, fully resolved: the graph, the stored description with its
/// writer marker already appended, and the writer's ontology.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NewEpisode {
    /// The episode's uuid: random, or derived from the graph, the writer and the
    /// replay key ([`NewEpisode::replay_key`]).
    pub uuid: Uuid,
    /// The graph.
    pub graph: GraphId,
    /// The content (its kind picks the episode kind).
    pub content: Content,
    /// The source description as stored, ending with the writer's marker.
    pub stored_description: String,
    /// The writer (also recorded by the marker, and stored as the episode's writer
    /// property so searches filter by it).
    pub writer: Writer,
    /// The ontology to extract with.
    pub ontology: Ontology,
    /// When it happened in the world.
    pub reference_time: Timestamp,
    /// Whether the caller gave `reference_time` (`false`: it is the time of writing).
    pub reference_time_given: bool,
    /// A key that is the same when the same request is replayed (`<ingest id>#<n>` for
    /// the n-th episode an ingestion writes); `None` for writes that are never
    /// replayed. A storage derives the episode's identity from it so that a replay
    /// stores nothing twice.
    pub replay_key: Option<String>,
    /// The conversation session it came from (see
    /// [`Storage::session_episodes`](super::Storage::session_episodes)); `None`
    /// outside any session. Not part of its identity.
    pub session: Option<String>,
    /// Extra extraction instructions (the writer's custom instructions: the request's,
    /// else its Lens's); `None` for none. Not part of its identity.
    pub instructions: Option<String>,
}

impl NewEpisode {
    /// An episode by `writer` in `graph`, described by `source_description` (the
    /// writer's marker is appended here), at `reference_time` (the time of writing
    /// when `None`), with the generic ontology and no replay key.
    pub fn new(
        graph: GraphId,
        writer: Writer,
        content: Content,
        source_description: &str,
        reference_time: Option<Timestamp>,
    ) -> NewEpisode {
        NewEpisode {
            uuid: Uuid::new_v4(),
            graph,
            stored_description: writer.describe(source_description),
            content,
            writer,
            ontology: Ontology::generic(),
            reference_time: reference_time.unwrap_or_else(Timestamp::now),
            reference_time_given: reference_time.is_some(),
            replay_key: None,
            session: None,
            instructions: None,
        }
    }

    /// Extract with these extra instructions (blank ones add nothing).
    pub fn instructions(mut self, instructions: Option<String>) -> NewEpisode {
        self.instructions = instructions;
        self
    }

    /// From conversation session `session` (checked by the client with
    /// `check_session_id`).
    pub fn session(mut self, session: Option<String>) -> NewEpisode {
        self.session = session;
        self
    }

    /// Extract with `ontology`.
    pub fn ontology(mut self, ontology: Ontology) -> NewEpisode {
        self.ontology = ontology;
        self
    }

    /// Identify a replayed write by `key`: the uuid becomes
    /// the derived uuid (SHA-256 over a namespace and length-prefixed parts, version
    /// 8) over the graph, the writer's key and `key`, so the same write replayed has the same uuid in every storage.
    pub fn replay_key(mut self, key: impl Into<String>) -> NewEpisode {
        let key = key.into();
        self.uuid = derived_uuid(
            "episode",
            &[
                self.graph.as_str().as_bytes(),
                self.writer.key().as_bytes(),
                key.as_bytes(),
            ],
        );
        self.replay_key = Some(key);
        self
    }
}

/// A search of one or more graphs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GraphQuery {
    /// The query text.
    pub query: String,
    /// What to return, with its filters.
    pub result_type: ResultType,
    /// Only episodes and facts written by these Lenses (empty: any writer). For
    /// facts, only the selected Lenses' sources are kept. Applied inside the search,
    /// before `limit`.
    pub lenses: Vec<String>,
    /// Only these episodes, and facts with a source among them (a fact lists only
    /// those sources); `None`: no restriction, `Some(vec![])`: no episode or fact.
    /// Nodes and artefacts are not restricted. Applied inside the search, before
    /// `limit` (the authorization pre-filter of graphs the subject may not read).
    pub episodes: Option<Vec<Uuid>>,
    /// At most this many results per graph.
    pub limit: usize,
    /// What was true at this instant instead of what is current: facts with
    /// `valid_at` unknown or `<= t`, `invalid_at` unknown or `> t` and `expired_at`
    /// unknown or `> t` (the engine's own rule of a current fact);
    /// episodes (and episodes standing in as facts) that happened by `t`
    /// (`valid_at <= t`). Applied before `limit`.
    pub as_of: Option<Timestamp>,
}

impl GraphQuery {
    /// A query for `result_type` with at most `limit` results per graph, any writer.
    pub fn new(query: impl Into<String>, result_type: ResultType, limit: usize) -> GraphQuery {
        GraphQuery {
            query: query.into(),
            result_type,
            lenses: Vec::new(),
            episodes: None,
            limit,
            as_of: None,
        }
    }

    /// What was true at `t` (`None`: what is current).
    pub fn as_of(mut self, t: Option<Timestamp>) -> GraphQuery {
        self.as_of = t;
        self
    }

    /// Whether a fact passes the `as_of` instant (always, without one): the
    /// engine's own rule of a current fact.
    pub fn admits_fact(&self, fact: &FactRecord) -> bool {
        self.as_of.is_none_or(|t| {
            times_current(
                &FactTimes {
                    uuid: fact.uuid,
                    valid_at: fact.valid_at,
                    invalid_at: fact.invalid_at,
                    expired_at: fact.expired_at,
                },
                t,
            )
        })
    }

    /// Whether an episode that happened at `valid_at` passes the `as_of` instant
    /// (always, without one): it happened by then.
    pub fn admits_episode(&self, valid_at: Timestamp) -> bool {
        self.as_of.is_none_or(|t| valid_at <= t)
    }

    /// Only episodes and facts written by these Lenses.
    pub fn lenses(mut self, lenses: Vec<String>) -> GraphQuery {
        self.lenses = lenses;
        self
    }

    /// Only these episodes and the facts they support ([`GraphQuery::episodes`]).
    pub fn episodes(mut self, episodes: Vec<Uuid>) -> GraphQuery {
        self.episodes = Some(episodes);
        self
    }
}

/// What extracting a graph's pending episodes did.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExtractionReport {
    /// Episodes extracted by this call, oldest first.
    pub completed: Vec<Uuid>,
    /// Episodes another live writer holds (try again later).
    pub busy: Vec<Uuid>,
    /// Episodes that failed again, with the error's message; they stay pending.
    pub failed: Vec<(Uuid, String)>,
    /// Episodes set aside after unanswered commits, which the call did not process.
    pub quarantined: Vec<Uuid>,
}

/// What storing one episode cost: language-model calls (in all and by pipeline step),
/// their tokens, embedding requests, database round trips and the wall time of the
/// write. A storage that calls no model (the in-memory one, or an engine without a
/// language model) reports zero calls.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct IngestCost {
    /// Language-model calls.
    pub model_calls: u32,
    /// The same calls by step (`extract`, `resolve_entities`, `resolve_facts`,
    /// `entity_details`); steps without a call are left out.
    pub model_calls_by_step: std::collections::BTreeMap<String, u32>,
    /// Input tokens of those calls.
    pub prompt_tokens: u64,
    /// Output tokens of those calls.
    pub completion_tokens: u64,
    /// Embedding requests.
    pub embedding_requests: u32,
    /// Statements (or pipelines) sent to the database, each one round trip.
    pub db_round_trips: u32,
    /// Wall time of the write, in microseconds.
    pub wall_time_us: u64,
}

impl IngestCost {
    /// Adds `other` to this cost (a Lens that writes several episodes, or a replay
    /// that wrote twice).
    pub fn add(&mut self, other: &IngestCost) {
        self.model_calls += other.model_calls;
        for (step, n) in &other.model_calls_by_step {
            *self.model_calls_by_step.entry(step.clone()).or_default() += n;
        }
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.embedding_requests += other.embedding_requests;
        self.db_round_trips += other.db_round_trips;
        self.wall_time_us += other.wall_time_us;
    }
}

/// A stored episode: its uuid and what storing it cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StoredEpisode {
    /// The episode's uuid.
    pub uuid: Uuid,
    /// What storing it cost.
    pub cost: IngestCost,
}

impl StoredEpisode {
    /// An episode stored at `cost`.
    pub fn new(uuid: Uuid, cost: IngestCost) -> StoredEpisode {
        StoredEpisode { uuid, cost }
    }
}
