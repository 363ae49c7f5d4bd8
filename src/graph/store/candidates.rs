//! Candidate entities for entity resolution (Graphiti §2 step 3): for every extracted
//! name at once, the stored entities it might be.
//!
//! [`entity_candidates`] gathers, per name, the union of three paths, deduplicated by
//! uuid and in this order:
//!
//! 1. **Exact**: entities whose normalised name ([`normalize_name`], stored on every
//!    entity as `name_key` and range-indexed) equals the query name's — an index
//!    lookup, not a scan; [`dedup`](crate::graph::dedup) then decides.
//! 2. **Vector**: the `limit` nearest neighbours of the query's embedding, when one is
//!    given, through the `Entity.name_embedding` vector index, nearest first.
//! 3. **Fulltext**: the `limit` best fulltext hits of the name on `Entity` name and
//!    summary, best score first. The name goes through [`fulltext_query`] with
//!    [`DEFAULT_STOPWORDS`]; a name without a searchable word skips this path.
//!
//! The three paths of one name are **one** statement (a `UNION ALL` of three branches,
//! so the name's embedding travels once), and the statements of every name travel in
//! **one** [`FalkorDb::pipeline`] round trip, so the cost of resolution does not grow
//! in round trips with the number of names.
//!
//! ## Similarity on the server
//!
//! No embedding comes back. Each candidate carries instead the cosine similarity of
//! its name embedding to the query's, as the server computes it — `1 - score` of the
//! vector index on the vector path, `1 - vec.cosineDistance(…)` on the others
//! ([`EntityCandidate::similarity`]) — and whether it has an embedding at all. Reading
//! every candidate's 1,024 floats back only to take a cosine in the client made the
//! replies ten times larger and was most of an ingest's CPU time.
//!
//! ## Graphs without indices
//!
//! Callers are expected to have run [`build_indices`](super::build_indices). On a graph
//! whose vector or fulltext index does not exist yet (a fresh graph), the index paths
//! fail on the server with a generic "invalid arguments" error; the call then reads the
//! index list and reruns without the paths whose index is missing (two more round
//! trips, on this path only), so a fresh graph yields exact matches rather than an
//! error. A vector index listed but not yet operational (a rebuild dropped and
//! recreated it) is read by an exact scan in the rerun instead (the same answer,
//! without the index); with both indices listed and operational the rerun uses them,
//! and a second failure is the caller's.
//!

use std::collections::BTreeSet;

use super::{ENTITY_COLUMNS, entity_from_row, rows};
use crate::falkordb::Value;
use crate::falkordb::{
    DEFAULT_STOPWORDS, FalkorDb, IndexEntity, IndexKind, Params, QueryResult, fulltext_query,
};
use crate::graph::dedup::normalize_name;
use crate::graph::model::EntityNode;
use crate::{Error, Result};

/// Largest `limit` [`entity_candidates`] accepts.
pub const MAX_CANDIDATE_LIMIT: usize = 100;

/// One extracted name to find candidates for.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateQuery {
    /// The name as extracted.
    pub name: String,
    /// The name's embedding, if one was computed; without it the vector path is skipped.
    pub embedding: Option<Vec<f32>>,
}

impl CandidateQuery {
    /// A query for `name` without an embedding.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            embedding: None,
        }
    }

    /// The same query with `embedding`.
    pub fn with_embedding(mut self, embedding: Vec<f32>) -> Self {
        self.embedding = Some(embedding);
        self
    }
}

/// A stored entity an extracted name may mean, as [`entity_candidates`] finds it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EntityCandidate {
    /// The entity as stored, except its name embedding, which is not read back
    /// (`name_embedding` is always `None`).
    pub entity: EntityNode,
    /// Whether the stored entity has a name embedding.
    pub has_embedding: bool,
    /// The cosine similarity of the entity's name embedding to the query's, computed
    /// by the server; `None` when either has no embedding, 0 when either is zero.
    pub similarity: Option<f32>,
}

/// The candidate entities for every query, one list per query in input order (see the
/// module docs for the three paths and their order). Each list holds at most `limit`
/// exact matches plus `limit` vector and `limit` fulltext hits, each entity once, with
/// its similarity to the query computed on the server and without its embedding.
///
/// Makes one pipeline round trip for all queries, one statement each (none for an
/// empty `queries`), plus
/// two more only when an index is missing. `limit` must be in
/// `1..=`[`MAX_CANDIDATE_LIMIT`] ([`Error::InvalidInput`] naming `limit` otherwise).
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
/// use gralkor::graph::{self, CandidateQuery};
///
/// graph::build_indices(&db, "notes", 3).await?;
/// let queries = [
///     CandidateQuery::new("acme"),
///     CandidateQuery::new("Alice").with_embedding(vec![0.1, 0.2, 0.3]),
/// ];
/// let found = graph::entity_candidates(&db, "notes", &queries, 10).await?;
/// assert_eq!(found.len(), 2);
/// for candidate in &found[1] {
///     println!("{}: {:?}", candidate.entity.name, candidate.similarity);
/// }
/// # Ok(()) }
/// ```
pub async fn entity_candidates(
    db: &FalkorDb,
    graph: &str,
    queries: &[CandidateQuery],
    limit: usize,
) -> Result<Vec<Vec<EntityCandidate>>> {
    if !(1..=MAX_CANDIDATE_LIMIT).contains(&limit) {
        return Err(Error::invalid(
            "limit",
            format!("must be between 1 and {MAX_CANDIDATE_LIMIT} (got {limit})"),
        ));
    }
    if queries.is_empty() {
        return Ok(Vec::new());
    }
    let k = i64::try_from(limit).unwrap_or(i64::MAX);
    let statements = plan(queries, k, VectorPath::Index, true);
    let results = match db.pipeline(graph, &statements).await {
        Ok(results) => results,
        Err(err @ Error::Query { .. }) => {
            // A fresh graph has no vector or fulltext index yet, and FalkorDB answers
            // a procedure call on a missing index with a generic error. Confirm from
            // the index list, then rerun without the missing paths; any other failure
            // (both indices present) is the caller's.
            // The vector index listed but still building (a rebuild dropped and
            // recreated it): the rerun reads the vectors by an exact scan, which
            // answers whatever the index's state. Listed and operational: the window
            // has passed (or the error is not the index's), so the rerun uses it again
            // and a second failure is returned.
            let (vector, fulltext) = entity_indices(db, graph).await?;
            let vector = match vector {
                None => VectorPath::Off,
                Some(false) => VectorPath::Scan,
                Some(true) => VectorPath::Index,
            };
            tracing::debug!(error = %err, ?vector, fulltext, "candidate query rerun");
            db.pipeline(graph, &plan(queries, k, vector, fulltext))
                .await?
        }
        Err(e) => return Err(e),
    };
    let mut out: Vec<Vec<EntityCandidate>> = Vec::with_capacity(queries.len());
    for res in results {
        let mut seen = BTreeSet::new();
        let mut list = Vec::new();
        for candidate in read_candidates(res)? {
            if seen.insert(candidate.entity.uuid) {
                list.push(candidate);
            }
        }
        out.push(list);
    }
    Ok(out)
}

/// How the vector branch of a candidate statement reads the name embeddings.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum VectorPath {
    /// The `Entity.name_embedding` index.
    Index,
    /// An exact scan of every entity with an embedding: while the index is being
    /// rebuilt (the same scan as search's fallback).
    Scan,
    /// No vector branch: the graph has no vector index yet.
    Off,
}

/// One statement per query, in input order: the exact branch, then the vector and
/// fulltext branches where `vector` and `fulltext` say how (or whether) to read them,
/// joined by `UNION ALL` with a `path` column (0, 1, 2) that keeps their order.
fn plan(
    queries: &[CandidateQuery],
    k: i64,
    vector: VectorPath,
    fulltext: bool,
) -> Vec<(String, Params)> {
    let columns = ENTITY_COLUMNS.replace(
        "n.name_embedding AS name_embedding",
        "null AS name_embedding",
    );
    queries
        .iter()
        .map(|q| {
            let mut params = Params::new()
                .set("key", normalize_name(&q.name))
                .set("k", k);
            // The similarity of `n` to the query, where both have an embedding.
            let sim = if q.embedding.is_some() {
                "CASE WHEN n.name_embedding IS NULL THEN NULL \
                 ELSE 1 - vec.cosineDistance(n.name_embedding, vecf32($v)) END"
            } else {
                "NULL"
            };
            let tail = format!("{columns}, n.name_embedding IS NOT NULL AS has_embedding");
            let mut query = format!(
                "MATCH (n:Entity {{name_key: $key}}) WITH n ORDER BY n.created_at, n.uuid LIMIT $k \
                 RETURN {tail}, {sim} AS similarity, 0 AS path"
            );
            if let Some(v) = q.embedding.as_ref() {
                params.insert("v", v.clone());
                let neighbours = match vector {
                    VectorPath::Index => Some(format!(
                        "{}CALL db.idx.vector.queryNodes('Entity', 'name_embedding', \
                         $k + stale, vecf32($v)) YIELD node, score",
                        super::debt::stale_clause(super::VectorIndex::Entity)
                    )),
                    VectorPath::Scan => Some(
                        "MATCH (node:Entity) WHERE node.name_embedding IS NOT NULL \
                         WITH node, vec.cosineDistance(node.name_embedding, vecf32($v)) AS score"
                            .to_string(),
                    ),
                    VectorPath::Off => None,
                };
                if let Some(neighbours) = neighbours {
                    query.push_str(&format!(
                        " UNION ALL {neighbours} \
                         WITH node AS n, score ORDER BY score ASC LIMIT $k \
                         RETURN {tail}, 1 - score AS similarity, 1 AS path"
                    ));
                }
            }
            if let Some(ft) = fulltext_query(&q.name, DEFAULT_STOPWORDS).filter(|_| fulltext) {
                params.insert("q", ft);
                query.push_str(&format!(
                    " UNION ALL CALL db.idx.fulltext.queryNodes('Entity', $q) YIELD node, score \
                     WITH node AS n, score ORDER BY score DESC, n.uuid LIMIT $k \
                     RETURN {tail}, {sim} AS similarity, 2 AS path"
                ));
            }
            (query, params)
        })
        .collect()
}

/// Whether `graph` has the `Entity.name_embedding` vector index (and whether it is
/// operational) and an `Entity` fulltext index.
async fn entity_indices(db: &FalkorDb, graph: &str) -> Result<(Option<bool>, bool)> {
    let entity = IndexEntity::Node("Entity".into());
    let listed = db.list_indices(graph).await?;
    let vector = listed
        .iter()
        .find(|i| {
            i.entity == entity
                && i.property == "name_embedding"
                && matches!(i.kind, IndexKind::Vector { .. })
        })
        .map(|i| i.operational);
    let fulltext = listed
        .iter()
        .any(|i| i.entity == entity && matches!(i.kind, IndexKind::Fulltext { .. }));
    Ok((vector, fulltext))
}

/// The candidates of one statement: its branches in order (a stable sort on `path`,
/// which `UNION ALL` keeps anyway), each row's order within its branch kept.
fn read_candidates(res: QueryResult) -> Result<Vec<EntityCandidate>> {
    let mut read: Vec<(i64, EntityCandidate)> = rows(res)
        .iter()
        .map(|row| {
            let similarity = row
                .get("similarity")
                .and_then(Value::as_f64)
                // A zero vector has no direction: the server says NaN, the client 0.
                .map(|s| if s.is_finite() { s as f32 } else { 0.0 });
            Ok((
                row.get("path").and_then(Value::as_int).unwrap_or(0),
                EntityCandidate {
                    entity: entity_from_row(row)?,
                    has_embedding: row.get("has_embedding").and_then(Value::as_bool) == Some(true),
                    similarity,
                },
            ))
        })
        .collect::<Result<_>>()?;
    read.sort_by_key(|(path, _)| *path);
    Ok(read.into_iter().map(|(_, c)| c).collect())
}
