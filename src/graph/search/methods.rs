//! The candidate-gathering methods, one Cypher statement each: fulltext (BM25), vector
//! KNN through the HNSW indices, and a breadth-first walk. Filters run inside the same
//! statement, right after the index call; facts resolve their source episodes in it
//! too, so a method is exactly one round trip.
//!
//! ## Over-fetch
//!
//! A method returns at most `n` candidates (2 × the search's limit, as Graphiti). The
//! vector index is asked for [`OVERFETCH`] × `n` neighbours (at least
//! [`MIN_INDEX_K`]), so that up to three quarters of them may be removed by filters
//! (retired facts, labels, dates…) and `n` still come back. A very selective filter
//! can still leave fewer: the index knows nothing of filters. Asking the index for
//! more neighbours also widens its search (HNSW explores at least `k` candidates),
//! which is what raises recall@10 to ≥ 0.95 in `examples/bench_search.rs`. The fulltext
//! procedure has no `k`: it yields every match, and the statement filters, sorts by
//! score and cuts to `n`.
//!
//! ## Graphs without indices
//!
//! FalkorDB answers an index procedure on a missing index with a generic error. When an
//! index method fails, the index list is read once: if the index really is missing (a
//! fresh or empty graph, before [`build_indices`](crate::graph::build_indices)), the
//! method yields nothing; otherwise the server's error is returned.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::filters::{SearchFilters, Where};
use super::results::{
    COMMUNITY_COLUMNS, CommunityHit, ENTITY_COLUMNS, EPISODE_COLUMNS, EntityHit, EpisodeHit,
    FACT_COLUMNS, FactHit, community_hit, entity_hit, episode_hit, fact_hit,
};
use crate::falkordb::{FalkorDb, IndexEntity, IndexKind, Params, Value};
use crate::graph::model::Timestamp;
use crate::{Error, Result};

/// The vector index is asked for this many times the candidates a method returns.
pub const OVERFETCH: usize = 4;

/// The vector index is asked for at least this many neighbours.
pub const MIN_INDEX_K: usize = 40;

/// What every method of one search shares.
#[derive(Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub db: &'a FalkorDb,
    pub graph: &'a str,
    pub filters: &'a SearchFilters,
    pub now: Timestamp,
}

/// The index a method reads, to tell "index missing" from other failures.
#[derive(Clone, Copy)]
enum Index {
    Fulltext(&'static str, bool),
    Vector(&'static str, bool, &'static str),
    None,
}

fn index_k(n: usize) -> i64 {
    i64::try_from((n * OVERFETCH).max(MIN_INDEX_K)).unwrap_or(i64::MAX)
}

fn int(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn uuid_list(list: &[Uuid]) -> Value {
    Value::List(list.iter().map(|u| Value::String(u.to_string())).collect())
}

/// The clause that turns a fact `f` (with `score`) into `f, score, sources`, looking
/// each supporting episode up by its indexed uuid (an `IN` over the list would scan
/// every episode).
const FACT_SOURCES: &str = "UNWIND (CASE WHEN size(coalesce(f.episodes, [])) = 0 \
     THEN [null] ELSE f.episodes END) AS eu \
     OPTIONAL MATCH (ep:Episodic {uuid: eu}) \
     WITH f, score, collect(CASE WHEN ep IS NULL THEN NULL \
          ELSE [ep.uuid, ep.source, ep.source_description] END) AS sources";

/// Runs one read; an index failure on a missing index yields no rows.
async fn read(
    ctx: Ctx<'_>,
    index: Index,
    query: &str,
    params: &Params,
) -> Result<Vec<BTreeMap<String, Value>>> {
    match ctx.db.ro_query(ctx.graph, query, params).await {
        Ok(res) => Ok(res.into_maps()),
        Err(err @ Error::Query { .. }) if !matches!(index, Index::None) => {
            if index_exists(ctx, index).await? {
                Err(err)
            } else {
                Ok(Vec::new())
            }
        }
        Err(e) => Err(e),
    }
}

async fn index_exists(ctx: Ctx<'_>, index: Index) -> Result<bool> {
    let listed = ctx.db.list_indices(ctx.graph).await?;
    let entity = |name: &str, node: bool| {
        if node {
            IndexEntity::Node(name.into())
        } else {
            IndexEntity::Relationship(name.into())
        }
    };
    Ok(match index {
        Index::Fulltext(name, node) => listed.iter().any(|i| {
            i.entity == entity(name, node) && matches!(i.kind, IndexKind::Fulltext { .. })
        }),
        Index::Vector(name, node, prop) => listed.iter().any(|i| {
            i.entity == entity(name, node)
                && i.property == prop
                && matches!(i.kind, IndexKind::Vector { .. })
        }),
        Index::None => true,
    })
}

/// The filter's parameters, to which a method adds its own.
fn with(w: &Where) -> Params {
    w.params.clone()
}

// ---------------------------------------------------------------- facts

/// Facts nearest to `v` with cosine similarity ≥ `min_sim`, best first.
pub(crate) async fn fact_vector(
    ctx: Ctx<'_>,
    v: &[f32],
    n: usize,
    min_sim: f64,
) -> Result<Vec<FactHit>> {
    let w = ctx.filters.fact_where(ctx.now);
    let query = format!(
        "CALL db.idx.vector.queryRelationships('RELATES_TO', 'fact_embedding', $k, vecf32($v)) \
         YIELD relationship, score \
         WITH relationship AS f, 1.0 - score AS score \
         WHERE score >= $min_sim{} \
         WITH f, score ORDER BY score DESC, f.uuid LIMIT $n \
         {FACT_SOURCES} \
         RETURN {FACT_COLUMNS} ORDER BY score DESC, uuid",
        w.and_clause()
    );
    let params = with(&w)
        .set("k", index_k(n))
        .set("v", v.to_vec())
        .set("min_sim", min_sim)
        .set("n", int(n));
    let rows = read(
        ctx,
        Index::Vector("RELATES_TO", false, "fact_embedding"),
        &query,
        &params,
    )
    .await?;
    rows.iter().map(fact_hit).collect()
}

/// Facts matching the fulltext query `q` (already sanitised), best first.
pub(crate) async fn fact_fulltext(ctx: Ctx<'_>, q: &str, n: usize) -> Result<Vec<FactHit>> {
    let w = ctx.filters.fact_where(ctx.now);
    let query = format!(
        "CALL db.idx.fulltext.queryRelationships('RELATES_TO', $q) \
         YIELD relationship, score \
         WITH relationship AS f, score {} \
         WITH f, score ORDER BY score DESC, f.uuid LIMIT $n \
         {FACT_SOURCES} \
         RETURN {FACT_COLUMNS} ORDER BY score DESC, uuid",
        w.where_clause()
    );
    let params = with(&w).set("q", q).set("n", int(n));
    let rows = read(ctx, Index::Fulltext("RELATES_TO", false), &query, &params).await?;
    rows.iter().map(fact_hit).collect()
}

/// The origins (entities or episodes) bound to `o`.
const ORIGINS: &str = "UNWIND $origins AS ou \
     OPTIONAL MATCH (oa:Entity {uuid: ou}) \
     OPTIONAL MATCH (ob:Episodic {uuid: ou}) \
     WITH coalesce(oa, ob) AS o WHERE o IS NOT NULL";

/// Facts on the paths of at most `depth` `RELATES_TO`/`MENTIONS` hops from `origins`,
/// nearest first; score 1 / hops.
pub(crate) async fn fact_bfs(
    ctx: Ctx<'_>,
    origins: &[Uuid],
    depth: u32,
    n: usize,
) -> Result<Vec<FactHit>> {
    if origins.is_empty() {
        return Ok(Vec::new());
    }
    let w = ctx.filters.fact_where(ctx.now);
    // The depth is a validated integer (1..=MAX_BFS_DEPTH): Cypher does not take
    // variable-length bounds as parameters.
    let query = format!(
        "{ORIGINS} \
         MATCH path = (o)-[:RELATES_TO|MENTIONS*1..{depth}]-(:Entity) \
         UNWIND range(0, length(path) - 1) AS i \
         WITH relationships(path)[i] AS f, i + 1 AS hop \
         WHERE type(f) = 'RELATES_TO' \
         WITH f, min(hop) AS hop {} \
         WITH f, 1.0 / hop AS score ORDER BY score DESC, f.uuid LIMIT $n \
         {FACT_SOURCES} \
         RETURN {FACT_COLUMNS} ORDER BY score DESC, uuid",
        w.where_clause()
    );
    let params = with(&w).set("origins", uuid_list(origins)).set("n", int(n));
    let rows = read(ctx, Index::None, &query, &params).await?;
    rows.iter().map(fact_hit).collect()
}

// ---------------------------------------------------------------- entities

/// Entities nearest to `v` with cosine similarity ≥ `min_sim`, best first.
pub(crate) async fn entity_vector(
    ctx: Ctx<'_>,
    v: &[f32],
    n: usize,
    min_sim: f64,
) -> Result<Vec<EntityHit>> {
    let w = ctx.filters.entity_where();
    let query = format!(
        "CALL db.idx.vector.queryNodes('Entity', 'name_embedding', $k, vecf32($v)) \
         YIELD node, score \
         WITH node AS n, 1.0 - score AS score \
         WHERE score >= $min_sim{} \
         RETURN {ENTITY_COLUMNS} ORDER BY score DESC, uuid LIMIT $n",
        w.and_clause()
    );
    let params = with(&w)
        .set("k", index_k(n))
        .set("v", v.to_vec())
        .set("min_sim", min_sim)
        .set("n", int(n));
    let rows = read(
        ctx,
        Index::Vector("Entity", true, "name_embedding"),
        &query,
        &params,
    )
    .await?;
    rows.iter().map(entity_hit).collect()
}

/// Entities matching the fulltext query `q` on name and summary, best first.
pub(crate) async fn entity_fulltext(ctx: Ctx<'_>, q: &str, n: usize) -> Result<Vec<EntityHit>> {
    let w = ctx.filters.entity_where();
    let query = format!(
        "CALL db.idx.fulltext.queryNodes('Entity', $q) YIELD node, score \
         WITH node AS n, score {} \
         RETURN {ENTITY_COLUMNS} ORDER BY score DESC, uuid LIMIT $n",
        w.where_clause()
    );
    let params = with(&w).set("q", q).set("n", int(n));
    let rows = read(ctx, Index::Fulltext("Entity", true), &query, &params).await?;
    rows.iter().map(entity_hit).collect()
}

/// Entities at most `depth` `RELATES_TO`/`MENTIONS` hops from `origins`, nearest
/// first; score 1 / hops.
pub(crate) async fn entity_bfs(
    ctx: Ctx<'_>,
    origins: &[Uuid],
    depth: u32,
    n: usize,
) -> Result<Vec<EntityHit>> {
    if origins.is_empty() {
        return Ok(Vec::new());
    }
    let w = ctx.filters.entity_where();
    let query = format!(
        "{ORIGINS} \
         MATCH path = (o)-[:RELATES_TO|MENTIONS*1..{depth}]-(n:Entity) \
         WITH n, min(length(path)) AS hop {} \
         WITH n, 1.0 / hop AS score \
         RETURN {ENTITY_COLUMNS} ORDER BY score DESC, uuid LIMIT $n",
        w.where_clause()
    );
    let params = with(&w).set("origins", uuid_list(origins)).set("n", int(n));
    let rows = read(ctx, Index::None, &query, &params).await?;
    rows.iter().map(entity_hit).collect()
}

// ---------------------------------------------------------------- episodes

/// Episodes matching the fulltext query `q` on content and source description.
pub(crate) async fn episode_fulltext(ctx: Ctx<'_>, q: &str, n: usize) -> Result<Vec<EpisodeHit>> {
    let query = format!(
        "CALL db.idx.fulltext.queryNodes('Episodic', $q) YIELD node, score \
         WITH node AS e, score \
         RETURN {EPISODE_COLUMNS} ORDER BY score DESC, uuid LIMIT $n"
    );
    let params = Params::new().set("q", q).set("n", int(n));
    let rows = read(ctx, Index::Fulltext("Episodic", true), &query, &params).await?;
    rows.iter().map(episode_hit).collect()
}

// ---------------------------------------------------------------- communities

/// Communities nearest to `v` with cosine similarity ≥ `min_sim`.
pub(crate) async fn community_vector(
    ctx: Ctx<'_>,
    v: &[f32],
    n: usize,
    min_sim: f64,
) -> Result<Vec<CommunityHit>> {
    let query = format!(
        "CALL db.idx.vector.queryNodes('Community', 'name_embedding', $k, vecf32($v)) \
         YIELD node, score \
         WITH node AS c, 1.0 - score AS score WHERE score >= $min_sim \
         RETURN {COMMUNITY_COLUMNS} ORDER BY score DESC, uuid LIMIT $n"
    );
    let params = Params::new()
        .set("k", index_k(n))
        .set("v", v.to_vec())
        .set("min_sim", min_sim)
        .set("n", int(n));
    let rows = read(
        ctx,
        Index::Vector("Community", true, "name_embedding"),
        &query,
        &params,
    )
    .await?;
    rows.iter().map(community_hit).collect()
}

/// Communities matching the fulltext query `q` on their name.
pub(crate) async fn community_fulltext(
    ctx: Ctx<'_>,
    q: &str,
    n: usize,
) -> Result<Vec<CommunityHit>> {
    let query = format!(
        "CALL db.idx.fulltext.queryNodes('Community', $q) YIELD node, score \
         WITH node AS c, score \
         RETURN {COMMUNITY_COLUMNS} ORDER BY score DESC, uuid LIMIT $n"
    );
    let params = Params::new().set("q", q).set("n", int(n));
    let rows = read(ctx, Index::Fulltext("Community", true), &query, &params).await?;
    rows.iter().map(community_hit).collect()
}

// ---------------------------------------------------------------- reranker inputs

/// The node a similarity matrix is computed over.
#[derive(Clone, Copy)]
pub(crate) enum Embedded {
    Fact,
    Entity,
    Community,
}

/// For MMR: per candidate (by uuid), its cosine similarity to `v` and to every
/// candidate, computed on the server so that no embedding is shipped. A candidate
/// without an embedding has similarity 0 to everything.
pub(crate) async fn similarities(
    ctx: Ctx<'_>,
    kind: Embedded,
    uuids: &[Uuid],
    v: &[f32],
) -> Result<BTreeMap<Uuid, (f64, BTreeMap<Uuid, f64>)>> {
    if uuids.is_empty() {
        return Ok(BTreeMap::new());
    }
    let (matcher, prop) = match kind {
        Embedded::Fact => ("MATCH ()-[x:RELATES_TO {uuid: u}]->()", "fact_embedding"),
        Embedded::Entity => ("MATCH (x:Entity {uuid: u})", "name_embedding"),
        Embedded::Community => ("MATCH (x:Community {uuid: u})", "name_embedding"),
    };
    let query = format!(
        "UNWIND $uuids AS u {matcher} \
         WITH collect(x) AS xs \
         UNWIND xs AS a \
         RETURN a.uuid AS uuid, [b IN xs | b.uuid] AS others, \
                CASE WHEN a.{prop} IS NULL THEN 0.0 \
                     ELSE 1.0 - vec.cosineDistance(a.{prop}, vecf32($v)) END AS qsim, \
                [b IN xs | CASE WHEN a.{prop} IS NULL OR b.{prop} IS NULL THEN 0.0 \
                     ELSE 1.0 - vec.cosineDistance(a.{prop}, b.{prop}) END] AS sims"
    );
    let params = Params::new()
        .set("uuids", uuid_list(uuids))
        .set("v", v.to_vec());
    let rows = read(ctx, Index::None, &query, &params).await?;
    let bad = || Error::Protocol("malformed similarity row".into());
    let parse_uuid = |v: &Value| v.as_str().and_then(|s| Uuid::parse_str(s).ok());
    let mut out = BTreeMap::new();
    for row in rows {
        let uuid = row.get("uuid").and_then(parse_uuid).ok_or_else(bad)?;
        let qsim = row.get("qsim").and_then(Value::as_f64).ok_or_else(bad)?;
        let others = row.get("others").and_then(Value::as_list).ok_or_else(bad)?;
        let sims = row.get("sims").and_then(Value::as_list).ok_or_else(bad)?;
        let mut to = BTreeMap::new();
        for (o, s) in others.iter().zip(sims) {
            to.insert(parse_uuid(o).ok_or_else(bad)?, s.as_f64().ok_or_else(bad)?);
        }
        out.insert(uuid, (qsim, to));
    }
    Ok(out)
}

/// Hop distances (over `RELATES_TO`, either direction, at most `depth`) from the
/// entity `center` to each of `uuids` that is reachable; the center itself is 0.
pub(crate) async fn distances(
    ctx: Ctx<'_>,
    center: Uuid,
    uuids: &[Uuid],
    depth: u32,
) -> Result<BTreeMap<Uuid, u32>> {
    let mut out = BTreeMap::new();
    if uuids.contains(&center) {
        out.insert(center, 0);
    }
    if uuids.is_empty() {
        return Ok(out);
    }
    // FalkorDB has no undirected shortestPath: take the shortest of the bounded paths.
    let query = format!(
        "MATCH (c:Entity {{uuid: $center}}) \
         MATCH path = (c)-[:RELATES_TO*1..{depth}]-(n:Entity) \
         WHERE n.uuid IN $uuids AND n <> c \
         RETURN n.uuid AS uuid, min(length(path)) AS hops"
    );
    let params = Params::new()
        .set("center", center.to_string())
        .set("uuids", uuid_list(uuids));
    for row in read(ctx, Index::None, &query, &params).await? {
        let uuid = row
            .get("uuid")
            .and_then(Value::as_str)
            .and_then(|s| Uuid::parse_str(s).ok());
        let hops = row.get("hops").and_then(Value::as_int);
        if let (Some(u), Some(h)) = (uuid, hops) {
            out.insert(u, u32::try_from(h).unwrap_or(u32::MAX));
        }
    }
    Ok(out)
}

/// How many `MENTIONS` links point at each of the entities `uuids`.
pub(crate) async fn mention_counts(ctx: Ctx<'_>, uuids: &[Uuid]) -> Result<BTreeMap<Uuid, u64>> {
    if uuids.is_empty() {
        return Ok(BTreeMap::new());
    }
    let rows = read(
        ctx,
        Index::None,
        "UNWIND $uuids AS u MATCH (n:Entity {uuid: u}) \
         OPTIONAL MATCH (:Episodic)-[m:MENTIONS]->(n) \
         RETURN u AS uuid, count(m) AS mentions",
        &Params::new().set("uuids", uuid_list(uuids)),
    )
    .await?;
    let mut out = BTreeMap::new();
    for row in rows {
        let uuid = row
            .get("uuid")
            .and_then(Value::as_str)
            .and_then(|s| Uuid::parse_str(s).ok());
        let count = row.get("mentions").and_then(Value::as_int);
        if let (Some(u), Some(c)) = (uuid, count) {
            out.insert(u, u64::try_from(c).unwrap_or(0));
        }
    }
    Ok(out)
}
