//! Writes and reads of the graph's data types on FalkorDB. Every function takes the
//! database handle and the logical graph id; nothing is remembered between calls.
//!
//! Every value travels as a query parameter; lists of records travel as one list of
//! maps, unwound in Cypher. Labels cannot be parameters, so they are checked with
//! [`is_identifier`] before any statement is sent.
//!
//! Split by concern: this file holds indices, episodes, entities, facts and the shared
//! helpers; [`entity_candidates`] the candidate lookup of entity resolution; [`links`] the `MENTIONS` and `HAS_MEMBER` relationships; [`communities`] the
//! `Community` nodes; [`owned`] the nodes and relationships of replace-graph Lenses.
//!
//! ## Embedding dimensions
//!
//! A write carrying an embedding first reads the dimension of the matching vector index
//! with one `db.indexes()` call ([`FalkorDb::list_indices`]) and rejects an embedding of
//! another length with [`Error::InvalidInput`] naming it (e.g.
//! `entities[2].name_embedding`), before anything is written. The dimension is looked up
//! per call rather than passed in or cached: the index is the single source of truth
//! (it keeps the dimension it was created with), and no state outlives a call. A write
//! without embeddings makes no lookup; a graph without the vector index (indices not
//! built yet) accepts any length.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::dedup::normalize_name;
use super::model::{EntityEdge, EntityNode, Episode, EpisodeState, SourceKind, Timestamp};
use crate::falkordb::{
    DEFAULT_STOPWORDS, FalkorDb, HnswOptions, IndexEntity, IndexKind, IndexSpec, Params,
    QueryResult, QueryStats, Similarity, Value, is_identifier,
};
use crate::{Error, Result};

mod candidates;
pub mod communities;
pub(crate) mod debt;
pub(crate) mod ingest;
pub mod links;
pub mod owned;
mod remove;

pub use candidates::{CandidateQuery, MAX_CANDIDATE_LIMIT, entity_candidates};
pub use communities::{get_communities, get_community_members, save_communities};
pub use debt::{VectorIndex, rebuild_vector_index, vector_debt};
pub use links::{
    get_episodes_mentioning, get_mentioned_entities, link_uuid, save_community_members,
    save_mentions,
};
pub use owned::{
    OWNED_ID_KEY, OWNER_KEY, OwnedNode, OwnedRelationship, ReplaceCounts, get_owned, replace_owned,
};
pub use remove::{Removal, remove_episode};

const RESERVED_LABELS: [&str; 3] = ["Entity", "Episodic", "Community"];

/// HNSW parameters of the vector indices: efRuntime 300 instead of FalkorDB's 10.
/// Measured by `examples/bench_search.rs` (1024-d, recall@10 against an exact scan):
/// efRuntime 10 gave 0.80 on 10,000 facts, 100 gave 0.98 on 10,000 but 0.92 on
/// 100,000. A query explores `max(efRuntime, k)` candidates, so searches that
/// over-fetch up to 300 neighbours cost the same as a top 10.
const HNSW: HnswOptions = HnswOptions {
    m: None,
    ef_construction: None,
    ef_runtime: Some(300),
};

/// The indices [`build_indices`] creates for an embedder of `embedding_dim` dimensions:
/// range indices on `uuid` of every kind (plus names and times that searches filter
/// on), fulltext indices with [`DEFAULT_STOPWORDS`], and cosine vector indices on
/// `Entity.name_embedding`, `RELATES_TO.fact_embedding` and `Community.name_embedding`
/// (efRuntime 300).
pub fn index_specs(embedding_dim: u32) -> Vec<IndexSpec> {
    let sw = DEFAULT_STOPWORDS;
    vec![
        IndexSpec::range_nodes("Episodic", ["uuid", "created_at", "valid_at"]),
        IndexSpec::range_nodes("Entity", ["uuid", "name", "name_key", "created_at"]),
        IndexSpec::range_nodes("Community", ["uuid"]),
        IndexSpec::range_relationships(
            "RELATES_TO",
            [
                "uuid",
                "name",
                "created_at",
                "valid_at",
                "invalid_at",
                "expired_at",
            ],
        ),
        IndexSpec::range_relationships("MENTIONS", ["uuid"]),
        IndexSpec::range_relationships("HAS_MEMBER", ["uuid"]),
        IndexSpec::fulltext_nodes("Episodic", ["content", "source_description"], sw),
        IndexSpec::fulltext_nodes("Entity", ["name", "summary"], sw),
        IndexSpec::fulltext_relationships("RELATES_TO", ["name", "fact"], sw),
        IndexSpec::fulltext_nodes("Community", ["name"], sw),
        IndexSpec::vector_nodes(
            "Entity",
            "name_embedding",
            embedding_dim,
            Similarity::Cosine,
        )
        .with_hnsw(HNSW),
        IndexSpec::vector_relationships(
            "RELATES_TO",
            "fact_embedding",
            embedding_dim,
            Similarity::Cosine,
        )
        .with_hnsw(HNSW),
        IndexSpec::vector_nodes(
            "Community",
            "name_embedding",
            embedding_dim,
            Similarity::Cosine,
        )
        .with_hnsw(HNSW),
    ]
}

/// Creates every index of [`index_specs`] on `graph` that does not exist yet and
/// returns how many were created (0 when run again). Vector indices are sized to
/// `embedding_dim`; an existing vector index keeps the dimension it was created with.
///
/// ```no_run
/// # async fn run(db: gralkor::FalkorDb) -> gralkor::Result<()> {
/// let created = gralkor::graph::build_indices(&db, "notes", 1024).await?;
/// assert_eq!(gralkor::graph::build_indices(&db, "notes", 1024).await?, 0);
/// # let _ = created; Ok(()) }
/// ```
pub async fn build_indices(db: &FalkorDb, graph: &str, embedding_dim: u32) -> Result<usize> {
    let created = db
        .create_indices(graph, &index_specs(embedding_dim))
        .await?;
    debt::prepare(db, graph).await?;
    Ok(created)
}

/// Deletes `graph` with everything in it, indices included. Returns `false` if it did
/// not exist.
pub async fn clear(db: &FalkorDb, graph: &str) -> Result<bool> {
    db.delete_graph(graph).await
}

fn uuids(list: &[Uuid]) -> Value {
    Value::List(list.iter().map(|u| Value::String(u.to_string())).collect())
}

fn ts(t: Option<Timestamp>) -> Value {
    t.map_or(Value::Null, |t| Value::Int(t.0))
}

fn json_text(map: &serde_json::Map<String, serde_json::Value>) -> Value {
    Value::String(serde_json::Value::Object(map.clone()).to_string())
}

fn add_stats(total: &mut QueryStats, s: &QueryStats) {
    total.labels_added += s.labels_added;
    total.nodes_created += s.nodes_created;
    total.nodes_deleted += s.nodes_deleted;
    total.properties_set += s.properties_set;
    total.properties_removed += s.properties_removed;
    total.relationships_created += s.relationships_created;
    total.relationships_deleted += s.relationships_deleted;
    total.indices_created += s.indices_created;
    total.indices_deleted += s.indices_deleted;
    total.execution_time_ms += s.execution_time_ms;
}

/// The dimension of the vector index on `entity`.`property` of `graph`, if there is one.
async fn vector_dimension(
    db: &FalkorDb,
    graph: &str,
    entity: &IndexEntity,
    property: &str,
) -> Result<Option<usize>> {
    Ok(db
        .list_indices(graph)
        .await?
        .into_iter()
        .find_map(|i| match i.kind {
            IndexKind::Vector { dimension, .. }
                if &i.entity == entity && i.property == property =>
            {
                usize::try_from(dimension).ok()
            }
            _ => None,
        }))
}

/// Checks every embedding of a batch against the vector index on `entity`.`property`
/// (see the module docs): `embeddings` yields each record's embedding, if any; an
/// embedding of the wrong length fails with `{list}[i].{property}`. Makes no round trip
/// when no record carries an embedding.
async fn check_dimensions<'a>(
    db: &FalkorDb,
    graph: &str,
    entity: IndexEntity,
    property: &str,
    list: &str,
    embeddings: impl Iterator<Item = Option<&'a Vec<f32>>> + Clone,
) -> Result<()> {
    if embeddings.clone().all(|e| e.is_none()) {
        return Ok(());
    }
    let Some(dim) = vector_dimension(db, graph, &entity, property).await? else {
        return Ok(());
    };
    for (i, e) in embeddings.enumerate() {
        if let Some(e) = e
            && e.len() != dim
        {
            return Err(Error::invalid(
                format!("{list}[{i}].{property}"),
                format!(
                    "must have {dim} components, the dimension of the graph's vector index \
                     (got {})",
                    e.len()
                ),
            ));
        }
    }
    Ok(())
}

/// Writes `episode` (`MERGE` on its uuid, then every property set to the given
/// values). Returns what the write changed: saving the same episode again creates no
/// node.
pub async fn save_episode(db: &FalkorDb, graph: &str, episode: &Episode) -> Result<QueryStats> {
    let params = Params::new()
        .set("uuid", episode.uuid.to_string())
        .set("content", episode.content.as_str())
        .set("source", episode.source.as_str())
        .set("source_description", episode.source_description.as_str())
        .set("valid_at", episode.valid_at.0)
        .set("created_at", episode.created_at.0)
        .set("entity_edges", uuids(&episode.entity_edges))
        .set("state", episode.state.as_str());
    let res = db
        .query(
            graph,
            "MERGE (e:Episodic {uuid: $uuid}) \
             SET e.content = $content, e.source = $source, \
                 e.source_description = $source_description, e.valid_at = $valid_at, \
                 e.created_at = $created_at, e.entity_edges = $entity_edges, e.state = $state",
            &params,
        )
        .await?;
    Ok(res.stats)
}

/// The columns [`episode_from_row`] reads, for the episode bound to `e`.
const EPISODE_COLUMNS: &str = "e.uuid AS uuid, e.content AS content, e.source AS source, \
     e.source_description AS source_description, e.valid_at AS valid_at, \
     e.created_at AS created_at, e.entity_edges AS entity_edges, e.state AS state";

/// The episode with `uuid`, if there is one.
pub async fn get_episode(db: &FalkorDb, graph: &str, uuid: Uuid) -> Result<Option<Episode>> {
    let res = db
        .ro_query(
            graph,
            &format!("MATCH (e:Episodic {{uuid: $uuid}}) RETURN {EPISODE_COLUMNS}"),
            &Params::new().set("uuid", uuid.to_string()),
        )
        .await?;
    res.into_maps().first().map(episode_from_row).transpose()
}

/// An episode from a row of [`EPISODE_COLUMNS`].
pub(crate) fn episode_from_row(row: &BTreeMap<String, Value>) -> Result<Episode> {
    let r = Row::new("episode", row);
    let source = r.str("source")?;
    let state = r.str("state")?;
    Ok(Episode {
        uuid: r.uuid("uuid")?,
        content: r.str("content")?.to_owned(),
        source: SourceKind::parse(source).ok_or_else(|| r.bad("source"))?,
        source_description: r.str("source_description")?.to_owned(),
        valid_at: r.ts("valid_at")?,
        created_at: r.ts("created_at")?,
        entity_edges: r.uuid_list("entity_edges")?,
        state: EpisodeState::parse(state).ok_or_else(|| r.bad("state"))?,
    })
}

/// The `SET` clause writing an [`entity_row`] bound to `r` onto the entity `n`.
const SET_ENTITY: &str = "SET n.name = r.name, n.name_key = r.name_key, n.summary = r.summary, \
     n.attributes = r.attributes, n.created_at = r.created_at, \
     n.name_embedding = CASE WHEN r.name_embedding IS NULL THEN NULL \
                        ELSE vecf32(r.name_embedding) END";

/// The `SET` clause writing a [`fact_row`] bound to `r` onto the fact `f`.
const SET_FACT: &str = "SET f.name = r.name, f.fact = r.fact, f.episodes = r.episodes, \
     f.valid_at = r.valid_at, f.invalid_at = r.invalid_at, \
     f.expired_at = r.expired_at, f.created_at = r.created_at, \
     f.attributes = r.attributes, f.source_uuid = r.source, f.target_uuid = r.target, \
     f.fact_embedding = CASE WHEN r.fact_embedding IS NULL THEN NULL \
                        ELSE vecf32(r.fact_embedding) END";

/// An entity's properties as one parameter map (labels travel separately).
fn entity_row(e: &EntityNode) -> Value {
    Value::Map(BTreeMap::from([
        ("uuid".to_owned(), Value::String(e.uuid.to_string())),
        ("name".to_owned(), e.name.as_str().into()),
        ("name_key".to_owned(), normalize_name(&e.name).into()),
        ("summary".to_owned(), e.summary.as_str().into()),
        ("attributes".to_owned(), json_text(&e.attributes)),
        ("name_embedding".to_owned(), e.name_embedding.clone().into()),
        ("created_at".to_owned(), Value::Int(e.created_at.0)),
    ]))
}

/// A fact's properties and endpoints as one parameter map.
fn fact_row(f: &EntityEdge) -> Value {
    Value::Map(BTreeMap::from([
        ("uuid".to_owned(), Value::String(f.uuid.to_string())),
        (
            "source".to_owned(),
            Value::String(f.source_uuid.to_string()),
        ),
        (
            "target".to_owned(),
            Value::String(f.target_uuid.to_string()),
        ),
        ("name".to_owned(), f.name.as_str().into()),
        ("fact".to_owned(), f.fact.as_str().into()),
        ("fact_embedding".to_owned(), f.fact_embedding.clone().into()),
        ("episodes".to_owned(), uuids(&f.episodes)),
        ("valid_at".to_owned(), ts(f.valid_at)),
        ("invalid_at".to_owned(), ts(f.invalid_at)),
        ("expired_at".to_owned(), ts(f.expired_at)),
        ("created_at".to_owned(), Value::Int(f.created_at.0)),
        ("attributes".to_owned(), json_text(&f.attributes)),
    ]))
}

/// Checks an entity's extra labels: identifiers, not one of gralkor's own labels.
fn checked_labels(i: usize, e: &EntityNode) -> Result<Vec<String>> {
    let mut labels = BTreeSet::new();
    for label in &e.labels {
        let field = format!("entities[{i}].labels");
        if !is_identifier(label) {
            return Err(Error::invalid(
                field,
                "must be identifiers: an ASCII letter or `_` followed by ASCII letters, digits or `_`",
            ));
        }
        if label == "Entity" {
            continue;
        }
        if RESERVED_LABELS
            .iter()
            .any(|r| r.eq_ignore_ascii_case(label))
        {
            return Err(Error::invalid(
                field,
                "must not be `Episodic`, `Community` or `Entity` spelt in another case: \
                 those are gralkor's own labels",
            ));
        }
        labels.insert(label.clone());
    }
    Ok(labels.into_iter().collect())
}

/// Writes `entities` in one round trip: `MERGE` on each uuid, extra labels added (never
/// removed), properties set to the given values. Every label is checked first; an
/// invalid one fails the call with [`Error::InvalidInput`] before anything is written.
/// Returns the summed statistics: saving the same entities again creates no node.
pub async fn save_entities(
    db: &FalkorDb,
    graph: &str,
    entities: &[EntityNode],
) -> Result<QueryStats> {
    // Labels cannot be parameters: one statement per distinct label set.
    let mut groups: BTreeMap<Vec<String>, Vec<Value>> = BTreeMap::new();
    for (i, e) in entities.iter().enumerate() {
        let labels = checked_labels(i, e)?;
        groups.entry(labels).or_default().push(entity_row(e));
    }
    check_dimensions(
        db,
        graph,
        IndexEntity::Node("Entity".into()),
        "name_embedding",
        "entities",
        entities.iter().map(|e| e.name_embedding.as_ref()),
    )
    .await?;
    let statements: Vec<(String, Params)> = groups
        .into_iter()
        .map(|(labels, rows)| {
            let set_labels = if labels.is_empty() {
                String::new()
            } else {
                format!("SET n:{} ", labels.join(":"))
            };
            // Every row may update a stored entity: each adds a stale vector entry.
            let query = format!(
                "UNWIND $rows AS r \
                 MERGE (n:Entity {{uuid: r.uuid}}) \
                 {set_labels}{SET_ENTITY} {}",
                debt::add_clause(VectorIndex::Entity, "size($rows)", "count(*) AS written")
            );
            (query, Params::new().set("rows", Value::List(rows)))
        })
        .collect();
    run_all(db, graph, &statements).await
}

async fn run_all(
    db: &FalkorDb,
    graph: &str,
    statements: &[(String, Params)],
) -> Result<QueryStats> {
    let mut total = QueryStats::default();
    match statements {
        [] => {}
        [(q, p)] => add_stats(&mut total, &db.query(graph, q, p).await?.stats),
        _ => {
            for res in db.pipeline(graph, statements).await? {
                add_stats(&mut total, &res.stats);
            }
        }
    }
    Ok(total)
}

/// The columns [`entity_from_row`] reads, for the entity bound to `n`.
const ENTITY_COLUMNS: &str = "n.uuid AS uuid, n.name AS name, labels(n) AS labels, \
     n.summary AS summary, n.attributes AS attributes, \
     n.name_embedding AS name_embedding, n.created_at AS created_at";

/// The entities with the given uuids that exist, in the order asked for. Labels come
/// back sorted, without `Entity`.
pub async fn get_entities(db: &FalkorDb, graph: &str, uuids_: &[Uuid]) -> Result<Vec<EntityNode>> {
    if uuids_.is_empty() {
        return Ok(Vec::new());
    }
    let res = db
        .ro_query(
            graph,
            &format!("UNWIND $uuids AS u MATCH (n:Entity {{uuid: u}}) RETURN {ENTITY_COLUMNS}"),
            &Params::new().set("uuids", uuids(uuids_)),
        )
        .await?;
    rows(res).iter().map(entity_from_row).collect()
}

/// An entity from a row of [`ENTITY_COLUMNS`]; labels sorted, without `Entity`.
pub(crate) fn entity_from_row(row: &BTreeMap<String, Value>) -> Result<EntityNode> {
    let r = Row::new("entity", row);
    let mut labels: Vec<String> = r
        .list("labels")?
        .iter()
        .map(|v| v.as_str().map(str::to_owned).ok_or_else(|| r.bad("labels")))
        .collect::<Result<_>>()?;
    labels.retain(|l| l != "Entity");
    labels.sort();
    Ok(EntityNode {
        uuid: r.uuid("uuid")?,
        name: r.str("name")?.to_owned(),
        labels,
        summary: r.str("summary")?.to_owned(),
        attributes: r.json("attributes")?,
        name_embedding: r.embedding("name_embedding")?,
        created_at: r.ts("created_at")?,
    })
}

/// The uuids of `wanted` that are not stored on a node labelled `label` (one read,
/// in the order asked for).
async fn missing_nodes(
    db: &FalkorDb,
    graph: &str,
    label: &str,
    wanted: &[Uuid],
) -> Result<Vec<String>> {
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let res = db
        .ro_query(
            graph,
            &format!(
                "UNWIND $uuids AS u \
                 OPTIONAL MATCH (n:{label} {{uuid: u}}) \
                 WITH u, n WHERE n IS NULL RETURN u AS missing"
            ),
            &Params::new().set("uuids", uuids(wanted)),
        )
        .await?;
    Ok(res
        .column_values("missing")
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect())
}

/// Writes `facts` in one statement: `MERGE (s)-[:RELATES_TO {uuid}]->(t)` between the
/// existing endpoint entities, properties set to the given values. Before anything is
/// written, an endpoint that does not exist fails the call with [`Error::NotFound`],
/// and a uuid already stored between other endpoints (a fact cannot move) with
/// [`Error::InvalidInput`]. Returns the statistics: saving the same facts again creates
/// no relationship.
pub async fn save_facts(db: &FalkorDb, graph: &str, facts: &[EntityEdge]) -> Result<QueryStats> {
    if facts.is_empty() {
        return Ok(QueryStats::default());
    }
    check_dimensions(
        db,
        graph,
        IndexEntity::Relationship("RELATES_TO".into()),
        "fact_embedding",
        "facts",
        facts.iter().map(|f| f.fact_embedding.as_ref()),
    )
    .await?;
    let endpoints: BTreeSet<Uuid> = facts
        .iter()
        .flat_map(|f| [f.source_uuid, f.target_uuid])
        .collect();
    let endpoints: Vec<Uuid> = endpoints.into_iter().collect();
    if let Some(missing) = missing_nodes(db, graph, "Entity", &endpoints)
        .await?
        .first()
    {
        return Err(Error::NotFound(format!(
            "entity {missing}, an endpoint of a fact to save"
        )));
    }
    let moved = db
        .ro_query(
            graph,
            "UNWIND $rows AS r \
             MATCH (s)-[f:RELATES_TO]->(t) WHERE f.uuid = r.uuid \
               AND (s.uuid <> r.source OR t.uuid <> r.target) \
             RETURN r.uuid AS moved LIMIT 1",
            &Params::new().set(
                "rows",
                Value::List(
                    facts
                        .iter()
                        .map(|f| {
                            Value::Map(BTreeMap::from([
                                ("uuid".to_owned(), Value::String(f.uuid.to_string())),
                                (
                                    "source".to_owned(),
                                    Value::String(f.source_uuid.to_string()),
                                ),
                                (
                                    "target".to_owned(),
                                    Value::String(f.target_uuid.to_string()),
                                ),
                            ]))
                        })
                        .collect(),
                ),
            ),
        )
        .await?;
    if let Some(moved) = moved.get(0, "moved").and_then(Value::as_str) {
        let i = facts
            .iter()
            .position(|f| f.uuid.to_string() == moved)
            .unwrap_or_default();
        return Err(Error::invalid(
            format!("facts[{i}]"),
            "must keep the source and target of the stored fact with the same uuid",
        ));
    }
    let rows: Vec<Value> = facts.iter().map(fact_row).collect();
    let res = db
        .query(
            graph,
            &format!(
                "UNWIND $rows AS r \
                 MATCH (s:Entity {{uuid: r.source}}) \
                 MATCH (t:Entity {{uuid: r.target}}) \
                 MERGE (s)-[f:RELATES_TO {{uuid: r.uuid}}]->(t) \
                 {SET_FACT} {}",
                debt::add_clause(VectorIndex::Fact, "size($rows)", "count(*) AS written")
            ),
            &Params::new().set("rows", Value::List(rows)),
        )
        .await?;
    Ok(res.stats)
}

/// The facts with the given uuids that exist, in the order asked for.
pub async fn get_facts(db: &FalkorDb, graph: &str, uuids_: &[Uuid]) -> Result<Vec<EntityEdge>> {
    if uuids_.is_empty() {
        return Ok(Vec::new());
    }
    let res = db
        .ro_query(
            graph,
            // Endpoints stay unlabelled: with `(s:Entity)-[f:RELATES_TO {uuid: u}]->(t:Entity)`
            // under UNWIND, FalkorDB was seen to drop a row (the reverse-direction fact of
            // `facts_round_trip_exactly_and_resaving_creates_nothing`).
            &format!(
                "UNWIND $uuids AS u \
                 MATCH ()-[f:RELATES_TO {{uuid: u}}]->() \
                 RETURN {FACT_COLUMNS}"
            ),
            &Params::new().set("uuids", uuids(uuids_)),
        )
        .await?;
    rows(res).iter().map(fact_from_row).collect()
}

/// The columns [`fact_from_row`] reads, for the fact bound to `f`, embedding included.
const FACT_COLUMNS: &str = "f.uuid AS uuid, startNode(f).uuid AS source, \
     endNode(f).uuid AS target, f.name AS name, f.fact AS fact, \
     f.fact_embedding AS fact_embedding, f.episodes AS episodes, f.valid_at AS valid_at, \
     f.invalid_at AS invalid_at, f.expired_at AS expired_at, f.created_at AS created_at, \
     f.attributes AS attributes";

/// A fact from a row of [`FACT_COLUMNS`] (a missing embedding column reads as none).
pub(crate) fn fact_from_row(row: &BTreeMap<String, Value>) -> Result<EntityEdge> {
    let r = Row::new("fact", row);
    Ok(EntityEdge {
        uuid: r.uuid("uuid")?,
        source_uuid: r.uuid("source")?,
        target_uuid: r.uuid("target")?,
        name: r.str("name")?.to_owned(),
        fact: r.str("fact")?.to_owned(),
        fact_embedding: r.embedding("fact_embedding")?,
        episodes: r.uuid_list("episodes")?,
        valid_at: r.opt_ts("valid_at")?,
        invalid_at: r.opt_ts("invalid_at")?,
        expired_at: r.opt_ts("expired_at")?,
        created_at: r.ts("created_at")?,
        attributes: r.json("attributes")?,
    })
}

fn rows(res: QueryResult) -> Vec<BTreeMap<String, Value>> {
    res.into_maps()
}

/// One reply row of a stored record, read with errors that name the record and field.
pub(crate) struct Row<'a> {
    kind: &'static str,
    row: &'a BTreeMap<String, Value>,
}

impl<'a> Row<'a> {
    pub(crate) fn new(kind: &'static str, row: &'a BTreeMap<String, Value>) -> Self {
        Row { kind, row }
    }

    pub(crate) fn bad(&self, field: &str) -> Error {
        Error::Protocol(format!(
            "stored {} has a missing or malformed `{field}`",
            self.kind
        ))
    }

    pub(crate) fn get(&self, field: &str) -> &'a Value {
        self.row.get(field).unwrap_or(&Value::Null)
    }

    pub(crate) fn str(&self, field: &str) -> Result<&'a str> {
        self.get(field).as_str().ok_or_else(|| self.bad(field))
    }

    pub(crate) fn uuid(&self, field: &str) -> Result<Uuid> {
        Uuid::parse_str(self.str(field)?).map_err(|_| self.bad(field))
    }

    pub(crate) fn ts(&self, field: &str) -> Result<Timestamp> {
        self.opt_ts(field)?.ok_or_else(|| self.bad(field))
    }

    pub(crate) fn opt_ts(&self, field: &str) -> Result<Option<Timestamp>> {
        match self.get(field) {
            Value::Null => Ok(None),
            Value::Int(i) => Ok(Some(Timestamp(*i))),
            _ => Err(self.bad(field)),
        }
    }

    /// A list; a missing (null) one reads as empty.
    pub(crate) fn list(&self, field: &str) -> Result<&'a [Value]> {
        match self.get(field) {
            Value::Null => Ok(&[]),
            v => v.as_list().ok_or_else(|| self.bad(field)),
        }
    }

    pub(crate) fn uuid_list(&self, field: &str) -> Result<Vec<Uuid>> {
        self.list(field)?
            .iter()
            .map(|v| {
                v.as_str()
                    .and_then(|s| Uuid::parse_str(s).ok())
                    .ok_or_else(|| self.bad(field))
            })
            .collect()
    }

    pub(crate) fn embedding(&self, field: &str) -> Result<Option<Vec<f32>>> {
        match self.get(field) {
            Value::Null => Ok(None),
            Value::Vector(v) => Ok(Some(v.clone())),
            _ => Err(self.bad(field)),
        }
    }

    pub(crate) fn json(&self, field: &str) -> Result<serde_json::Map<String, serde_json::Value>> {
        match self.get(field) {
            Value::Null => Ok(serde_json::Map::new()),
            Value::String(s) => match serde_json::from_str(s) {
                Ok(serde_json::Value::Object(m)) => Ok(m),
                _ => Err(self.bad(field)),
            },
            _ => Err(self.bad(field)),
        }
    }
}
