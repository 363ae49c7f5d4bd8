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
//! Every statement for every name travels in **one** [`FalkorDb::pipeline`] round trip,
//! so the cost of resolution does not grow in round trips with the number of names.
//!
//! ## Graphs without indices
//!
//! Callers are expected to have run [`build_indices`](super::build_indices). On a graph
//! whose vector or fulltext index does not exist yet (a fresh graph), the index paths
//! fail on the server with a generic "invalid arguments" error; the call then reads the
//! index list and reruns without the paths whose index is missing (two more round
//! trips, on this path only), so a fresh graph yields exact matches rather than an
//! error. When both indices exist, the server's error is returned unchanged.
//!

use std::collections::BTreeSet;

use uuid::Uuid;

use super::{ENTITY_COLUMNS, entity_from_row, rows};
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

/// The candidate entities for every query, one list per query in input order (see the
/// module docs for the three paths and their order). Each list holds at most `limit`
/// exact matches plus `limit` vector and `limit` fulltext hits, each entity once.
///
/// Makes one pipeline round trip for all queries (none for an empty `queries`), plus
/// two more only when an index is missing. `limit` must be in
/// `1..=`[`MAX_CANDIDATE_LIMIT`] ([`Error::InvalidInput`] naming `limit` otherwise).
///
/// ```no_run
/// # async fn run(db: gralkor::FalkorDb) -> gralkor::Result<()> {
/// use gralkor::graph::{self, CandidateQuery};
///
/// graph::build_indices(&db, "notes", 3).await?;
/// let queries = [
///     CandidateQuery::new("acme"),
///     CandidateQuery::new("Alice").with_embedding(vec![0.1, 0.2, 0.3]),
/// ];
/// let found = graph::entity_candidates(&db, "notes", &queries, 10).await?;
/// assert_eq!(found.len(), 2);
/// # Ok(()) }
/// ```
pub async fn entity_candidates(
    db: &FalkorDb,
    graph: &str,
    queries: &[CandidateQuery],
    limit: usize,
) -> Result<Vec<Vec<EntityNode>>> {
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
    let (mut plan, statements) = plan(queries, k, true, true);
    let results = match db.pipeline(graph, &statements).await {
        Ok(results) => results,
        Err(err @ Error::Query { .. }) => {
            // A fresh graph has no vector or fulltext index yet, and FalkorDB answers
            // a procedure call on a missing index with a generic error. Confirm from
            // the index list, then rerun without the missing paths; any other failure
            // (both indices present) is the caller's.
            let (vector, fulltext) = entity_indices(db, graph).await?;
            if vector && fulltext {
                return Err(err);
            }
            let statements;
            (plan, statements) = self::plan(queries, k, vector, fulltext);
            db.pipeline(graph, &statements).await?
        }
        Err(e) => return Err(e),
    };
    let mut out: Vec<Vec<EntityNode>> = vec![Vec::new(); queries.len()];
    let mut seen: Vec<BTreeSet<Uuid>> = vec![BTreeSet::new(); queries.len()];
    for (i, res) in plan.into_iter().zip(results) {
        for entity in read_entities(res)? {
            if seen[i].insert(entity.uuid) {
                out[i].push(entity);
            }
        }
    }
    Ok(out)
}

/// The statements for every query, each tagged with its query's index; the vector
/// and fulltext paths only where `vector` and `fulltext` say their index exists.
fn plan(
    queries: &[CandidateQuery],
    k: i64,
    vector: bool,
    fulltext: bool,
) -> (Vec<usize>, Vec<(String, Params)>) {
    let mut plan = Vec::new();
    let mut statements = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        plan.push(i);
        statements.push((
            format!(
                "MATCH (n:Entity {{name_key: $key}}) \
                 RETURN {ENTITY_COLUMNS} ORDER BY n.created_at, n.uuid LIMIT $k"
            ),
            Params::new()
                .set("key", normalize_name(&q.name))
                .set("k", k),
        ));
        if let Some(v) = q.embedding.as_ref().filter(|_| vector) {
            plan.push(i);
            statements.push((
                format!(
                    "{}CALL db.idx.vector.queryNodes('Entity', 'name_embedding', $k + stale, \
                     vecf32($v)) YIELD node, score \
                     WITH node AS n, score \
                     RETURN {ENTITY_COLUMNS} ORDER BY score ASC LIMIT $k",
                    super::debt::stale_clause(super::VectorIndex::Entity)
                ),
                Params::new().set("k", k).set("v", v.clone()),
            ));
        }
        if let Some(ft) = fulltext_query(&q.name, DEFAULT_STOPWORDS).filter(|_| fulltext) {
            plan.push(i);
            statements.push((
                format!(
                    "CALL db.idx.fulltext.queryNodes('Entity', $q) \
                     YIELD node, score \
                     WITH node AS n, score \
                     RETURN {ENTITY_COLUMNS} ORDER BY score DESC, n.uuid LIMIT $k"
                ),
                Params::new().set("q", ft).set("k", k),
            ));
        }
    }
    (plan, statements)
}

/// Whether `graph` has the `Entity.name_embedding` vector index and an `Entity`
/// fulltext index.
async fn entity_indices(db: &FalkorDb, graph: &str) -> Result<(bool, bool)> {
    let entity = IndexEntity::Node("Entity".into());
    let listed = db.list_indices(graph).await?;
    let vector = listed.iter().any(|i| {
        i.entity == entity
            && i.property == "name_embedding"
            && matches!(i.kind, IndexKind::Vector { .. })
    });
    let fulltext = listed
        .iter()
        .any(|i| i.entity == entity && matches!(i.kind, IndexKind::Fulltext { .. }));
    Ok((vector, fulltext))
}

fn read_entities(res: QueryResult) -> Result<Vec<EntityNode>> {
    rows(res).iter().map(entity_from_row).collect()
}
