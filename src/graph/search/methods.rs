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
//! which together with the indices' `efRuntime` (see
//! [`index_specs`](crate::graph::index_specs)) gives recall@10 ≥ 0.95 in
//! `examples/bench_search.rs`. The fulltext procedure has no `k`: it yields every
//! match, so the statement keeps the best `k` by score (BM25, from the postings read
//! before it: see `lexical.rs`) the same way, then filters, then cuts to `n`. The best `k` are collected into a list before the filter: left as
//! a plain `WITH … WHERE`, FalkorDB moves the filter in front of the sort, onto every
//! match (thousands for common words), which made the filter the costliest step.
//!
//! ## Filters that name their results
//!
//! Over-fetch cannot help a filter that names a few facts or entities among many: the
//! index's nearest neighbours would rarely include them. When the filters name fact
//! uuids, or entity uuids (facts: those touching them), the vector method instead
//! ranks exactly that set — looked up by its indexed uuids — by exact cosine
//! similarity, and the fulltext method filters every match before it keeps the best.
//! The result is exact, and its cost follows the size of the set, not of the graph.
//!
//! ## Source selections
//!
//! A source selection — [`SearchFilters::writers`], [`SearchFilters::episodes`] or
//! both (see [`filters`](super::filters#source-selections-writers-and-episodes)) — is
//! a filter that often names few results among many: a Lens that wrote 3 of 500
//! episodes, or the 3 of 500 episodes of a group a subject may not read that involve
//! it. So it never relies on over-fetch alone. Episodes found by fulltext are
//! filtered on every match before the best are kept (an episode's writer and uuid
//! are its own properties: the check is cheap); the vector method ranks the selected
//! episodes exactly (found by uuid, else through the range index on
//! `Episodic.writer`). Facts are kept when one of their source episodes (each looked
//! up by its indexed uuid) is selected, in up to three passes, each stopping the
//! method once `n` facts survive:
//!
//! 1. the usual candidates filtered: the index's `k` nearest, or the best `k`
//!    fulltext matches;
//! 2. the same with [`WRITER_WIDEN`] × `k`;
//! 3. fulltext: every match filtered (exact); vector: the selected episodes' facts —
//!    those listed in the `entity_edges` of the selected episodes (looked up by
//!    their indexed uuids when uuids are selected, else found through the range index
//!    on `Episodic.writer`; the engine lists there every fact an episode produced or
//!    supports), each checked again against its own `episodes` — ranked exactly by
//!    cosine similarity and merged with pass 2 by score.
//!
//! When a pass leaves `n` survivors they are the best `n` of all the selected facts
//! (every candidate outside it ranks lower), so the passes only save work. A large
//! selection is filled by pass 1 or 2; a small one pays for an exact pass over its
//! own facts (vector) or over every match (fulltext) — measured in
//! `examples/bench_search.rs` (rows "writer of 1%" and "writer of 50%") and, for
//! episode uuids, `examples/bench_access.rs`. Raising `k` alone would not be exact
//! for a small selection. The breadth-first walk filters each level's facts before
//! its cut. The one-statement RRF paths of the fact and episode scopes are not used
//! under a source selection (they have no room for the passes); the per-method path
//! fuses the same way. Every membership test is `toString(x) IN $list` (see
//! [`filters`](super::filters#source-selections-writers-and-episodes)).
//!
//! ## Graphs without indices, and indices being rebuilt
//!
//! FalkorDB answers an index procedure on a missing index — or on a vector index still
//! being built — with a generic error (`Invalid arguments for procedure
//! 'db.idx.vector.queryNodes'`). A vector index is missing for a moment whenever the
//! engine rebuilds it to purge stale entries (see
//! [`rebuild_vector_index`](crate::graph::store::rebuild_vector_index)), so a search
//! running beside a writer can meet that window. When a vector call fails, the statement
//! is built once more with an exact scan of the records carrying the property in
//! place of the call (their cosine distances, the best `k`; the builders take the
//! access, index or scan) and run: the search answers,
//! exactly, while the index is away, and costs a scan only then. When a fulltext method
//! fails, the index list is read once: if the index really is missing (a fresh or empty
//! graph, before [`build_indices`](crate::graph::build_indices)), the method yields
//! nothing; otherwise the server's error is returned.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::filters::{SearchFilters, Where};
use super::lexical;
use super::results::{
    COMMUNITY_COLUMNS, CommunityHit, ENTITY_COLUMNS, EPISODE_COLUMNS, EntityHit, EpisodeHit,
    FACT_COLUMNS, FactHit, community_hit, entity_hit, episode_hit, fact_hit,
};
use crate::falkordb::{FalkorDb, IndexEntity, IndexKind, Params, Value};
use crate::graph::model::Timestamp;
use crate::graph::store::debt::{VectorIndex, stale_clause};
use crate::{Error, Result};

/// The vector index is asked for this many times the candidates a method returns.
pub const OVERFETCH: usize = 2;

/// The vector index is asked for at least this many neighbours.
pub const MIN_INDEX_K: usize = 20;

/// Under a source selection (writers or episodes) that leaves too few of the first
/// candidates, the index (or the fulltext ranking) is asked again for this many times
/// as many.
pub const WRITER_WIDEN: usize = 10;

/// What every method of one search shares.
#[derive(Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub db: &'a FalkorDb,
    pub graph: &'a str,
    pub filters: &'a SearchFilters,
    pub now: Timestamp,
    /// The fulltext postings fetched ahead for this graph, if any.
    pub lexical: Option<&'a lexical::Prefetched>,
}

/// The index a method reads, to tell "index missing" from other failures.
#[derive(Clone, Copy)]
pub(crate) enum Index {
    Fulltext(&'static str, bool),
    Vector(VectorSource),
    None,
}

/// An episode has one embedding per passage ([`episode_passages`](crate::graph::store::episode_passages)):
/// the episode vector index is asked for this many times the neighbours, so that the
/// best passages of enough distinct episodes come back; an episode scores its best
/// passage's similarity.
const PASSAGE_FANOUT: usize = 4;

/// A vector index the methods query: the label (or relationship type) and property.
#[derive(Clone, Copy)]
pub(crate) struct VectorSource {
    label: &'static str,
    node: bool,
    property: &'static str,
    /// Neighbours asked per result wanted: more than one where a record has several
    /// vectors (an episode's passages, [`PASSAGE_FANOUT`]).
    fanout: usize,
}

const ENTITY_INDEX: VectorSource = VectorSource {
    label: "Entity",
    node: true,
    property: "name_embedding",
    fanout: 1,
};
const FACT_INDEX: VectorSource = VectorSource {
    label: "RELATES_TO",
    node: false,
    property: "fact_embedding",
    fanout: 1,
};
const COMMUNITY_INDEX: VectorSource = VectorSource {
    label: "Community",
    node: true,
    property: "name_embedding",
    fanout: 1,
};
const EPISODE_INDEX: VectorSource = VectorSource {
    label: crate::graph::store::EPISODE_EMBEDDING_LABEL,
    node: true,
    property: "embedding",
    fanout: PASSAGE_FANOUT,
};

/// How a statement reaches a vector's nearest neighbours: through the index, or by
/// the exact scan that stands in while the index is away ([`VectorSource::scan`]).
/// The statement builders take it, so the fallback builds its own statement.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Access {
    Index,
    Scan,
}

/// A statement built for one [`Access`]; statements without a vector index call
/// ignore it ([`fixed`]).
type Statement<'a> = &'a (dyn Fn(Access) -> String + Sync);

/// A statement that reads no vector index: the same text under either access.
fn fixed(query: &str) -> impl Fn(Access) -> String + Sync + '_ {
    move |_| query.to_owned()
}

impl VectorSource {
    /// The neighbours as `access` reaches them: the index [`call`](Self::call) or the
    /// exact [`scan`](Self::scan).
    fn neighbours(self, access: Access) -> String {
        match access {
            Access::Index => self.call(),
            Access::Scan => self.scan(),
        }
    }

    /// The index call, after [`stale_clause`]: the `$k + stale` nearest neighbours of
    /// `$v`, yielding `node` (or `relationship`) and `score`, the cosine distance.
    fn call(self) -> String {
        let VectorSource {
            label, property, ..
        } = self;
        let k = self.k();
        if self.node {
            format!(
                "CALL db.idx.vector.queryNodes('{label}', '{property}', {k} + stale, \
                 vecf32($v)) YIELD node, score"
            )
        } else {
            format!(
                "CALL db.idx.vector.queryRelationships('{label}', '{property}', {k} + stale, \
                 vecf32($v)) YIELD relationship, score"
            )
        }
    }

    /// The neighbours asked for: `$k`, times the fan-out where a record has several vectors.
    fn k(self) -> String {
        if self.fanout > 1 {
            format!("$k * {}", self.fanout)
        } else {
            "$k".to_string()
        }
    }

    /// What [`call`](Self::call) yields, without the index: the exact `$k` nearest, by
    /// a scan of every record with the property. It answers while the index is not
    /// there to — dropped and being rebuilt ([`rebuild_vector_index`]) or still being
    /// built, when FalkorDB refuses the call (`Invalid arguments for procedure
    /// 'db.idx.vector.queryNodes'`) — and holds no stale entries, so `$k` are enough.
    ///
    /// [`rebuild_vector_index`]: crate::graph::store::rebuild_vector_index
    fn scan(self) -> String {
        let VectorSource {
            label, property, ..
        } = self;
        let (pattern, var) = if self.node {
            (format!("(node:{label})"), "node")
        } else {
            (format!("()-[relationship:{label}]->()"), "relationship")
        };
        format!(
            "MATCH {pattern} WHERE {var}.{property} IS NOT NULL \
             WITH {var}, vec.cosineDistance({var}.{property}, vecf32($v)) AS score \
             ORDER BY score{}",
            // LIMIT takes no expression: where a record has several vectors, every
            // one is kept and the caller's per-record aggregate and limit apply.
            if self.fanout > 1 { "" } else { " LIMIT $k" }
        )
    }
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

/// The clauses that turn a fact `f` (with `score` and the `carry` variables, written
/// `", x, y"`) into `f, score, …carry, sources`, looking each supporting episode up by
/// its indexed uuid (an `IN` over the list would scan every episode); under a source
/// selection, only the selected episodes are listed.
fn fact_sources(w: &Where, carry: &str) -> String {
    format!(
        "UNWIND (CASE WHEN size(coalesce(f.episodes, [])) = 0 \
         THEN [null] ELSE f.episodes END) AS eu \
         OPTIONAL MATCH (ep:Episodic {{uuid: eu}}){} \
         WITH f, score{carry}, collect(CASE WHEN ep IS NULL THEN NULL \
              ELSE [ep.uuid, ep.source, ep.source_description, ep.writer] END) AS sources",
        w.source_condition()
    )
}

/// Runs one read, built for the index. A failed vector index call is answered by the
/// statement built for the exact scan instead (see [`VectorSource::scan`]); a
/// fulltext failure on a missing index yields no rows.
async fn read(
    ctx: Ctx<'_>,
    index: Index,
    query: Statement<'_>,
    params: &Params,
) -> Result<Vec<BTreeMap<String, Value>>> {
    match ctx.db.ro_query(ctx.graph, &query(Access::Index), params).await {
        Ok(res) => Ok(res.into_maps()),
        Err(err @ Error::Query { .. }) => match index {
            Index::Vector(_) => scanned(ctx, &query(Access::Scan), params, err).await,
            Index::None => Err(err),
            _ if index_exists(ctx, index).await? => Err(err),
            _ => Ok(Vec::new()),
        },
        Err(e) => Err(e),
    }
}

/// [`read`] of a statement that reads no vector index.
pub(crate) async fn read_fixed(
    ctx: Ctx<'_>,
    index: Index,
    query: &str,
    params: &Params,
) -> Result<Vec<BTreeMap<String, Value>>> {
    read(ctx, index, &fixed(query), params).await
}

/// The exact-scan rerun of a statement whose vector index call failed: its rows, or
/// the index call's own error `first` when the scan fails too.
async fn scanned(
    ctx: Ctx<'_>,
    query: &str,
    params: &Params,
    first: Error,
) -> Result<Vec<BTreeMap<String, Value>>> {
    tracing::debug!(graph = ctx.graph, error = %first, "a vector index call failed; scanning");
    match ctx.db.ro_query(ctx.graph, query, params).await {
        Ok(res) => Ok(res.into_maps()),
        Err(Error::Query { .. }) => Err(first),
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
        Index::Vector(v) => listed.iter().any(|i| {
            i.entity == entity(v.label, v.node)
                && i.property == v.property
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

/// The facts the filters name, if they name any — fact uuids, else entity uuids (the
/// facts touching them) —: a clause binding each to `f` once, through the uuid
/// indices. The filters' parameters carry the lists.
fn named_facts(filters: &SearchFilters) -> Option<&'static str> {
    if !filters.fact_uuids.is_empty() {
        Some(
            "UNWIND $flt_fact_uuids AS fu \
             MATCH ()-[f:RELATES_TO {uuid: fu}]->() WITH DISTINCT f",
        )
    } else if !filters.entity_uuids.is_empty() {
        Some(
            "UNWIND $flt_entity_uuids AS eu \
             MATCH (:Entity {uuid: eu})-[f:RELATES_TO]-() WITH DISTINCT f",
        )
    } else {
        None
    }
}

/// The entities the filters name, if they name any: a clause binding each to `n`
/// once.
fn named_entities(filters: &SearchFilters) -> Option<&'static str> {
    (!filters.entity_uuids.is_empty())
        .then_some("UNWIND $flt_entity_uuids AS eu MATCH (n:Entity {uuid: eu}) WITH DISTINCT n")
}

/// The clauses that rank facts by their embedding's similarity to `$v` (at least
/// `$min_sim`), filter them and keep the best `$n`, binding `f` and `score`: the
/// HNSW index asked for `$k`, or an exact scan of the facts the filters name.
fn fact_vector_clauses(ctx: Ctx<'_>, w: &Where, access: Access) -> String {
    let source = match named_facts(ctx.filters) {
        None => format!(
            "{}{} WITH relationship AS f, 1.0 - score AS score",
            stale_clause(VectorIndex::Fact),
            FACT_INDEX.neighbours(access)
        ),
        Some(named) => format!(
            "{named} WITH f, 1.0 - vec.cosineDistance(f.fact_embedding, vecf32($v)) AS score"
        ),
    };
    format!(
        "{source} WHERE score >= $min_sim{}{} \
         WITH f, score ORDER BY score DESC, f.uuid LIMIT $n",
        w.and_clause(),
        w.sourced("f, score")
    )
}

/// The clauses that find facts matching `$q`, filter them and keep the best `$n`,
/// binding `f` and `score`. The best `$k` matches are kept before the filters (see
/// the module docs), unless the filters name the facts or `all` matches are asked for.
fn fact_fulltext_clauses(ctx: Ctx<'_>, w: &Where, all: bool) -> String {
    let matches = fulltext_matches(
        &lexical::FACTS.call(),
        "relationship",
        "f",
        w,
        named_facts(ctx.filters).is_some() || all,
    );
    format!(
        "{matches}{} WITH f, score ORDER BY score DESC, f.uuid LIMIT $n",
        w.sourced("f, score")
    )
}

/// The matches of the fulltext procedure `call` (yielding `item` and `score`), bound
/// to `var` and `score` and filtered by `w`: the best `$k` by score first, then the
/// filters — or the filters on every match when they `named` the results.
fn fulltext_matches(call: &str, item: &str, var: &str, w: &Where, named: bool) -> String {
    if named {
        format!("{call} WITH {item} AS {var}, score {}", w.where_clause())
    } else {
        format!(
            "{call} WITH {item} AS {var}, score ORDER BY score DESC LIMIT $k \
             WITH collect([{var}, score]) AS top UNWIND top AS t \
             WITH t[0] AS {var}, t[1] AS score {}",
            w.where_clause()
        )
    }
}

/// The index the vector method reads, if it reads one.
fn fact_vector_index(ctx: Ctx<'_>) -> Index {
    match named_facts(ctx.filters) {
        None => Index::Vector(FACT_INDEX),
        Some(_) => Index::None,
    }
}

/// Facts nearest to `v` with cosine similarity ≥ `min_sim`, best first. Under a
/// source selection that leaves fewer than `n` of the index's neighbours, the exact
/// ranking of the selected episodes' facts is merged in (see the module docs).
pub(crate) async fn fact_vector(
    ctx: Ctx<'_>,
    v: &[f32],
    n: usize,
    min_sim: f64,
) -> Result<Vec<FactHit>> {
    let w = ctx.filters.fact_where(ctx.now);
    let query = |access| format!("{} {}", fact_vector_clauses(ctx, &w, access), fact_tail(&w));
    let params = with(&w)
        .set("k", index_k(n))
        .set("v", v.to_vec())
        .set("min_sim", min_sim)
        .set("n", int(n));
    let index = fact_vector_index(ctx);
    let rows = read(ctx, index, &query, &params).await?;
    let mut hits: Vec<FactHit> = rows.iter().map(fact_hit).collect::<Result<_>>()?;
    let selective = w.selects_sources() && named_facts(ctx.filters).is_none();
    if selective && hits.len() < n {
        // The index's neighbours, widened (see the module docs).
        let wide = params.clone().set("k", index_k(n * WRITER_WIDEN));
        let rows = read(ctx, index, &query, &wide).await?;
        hits = rows.iter().map(fact_hit).collect::<Result<_>>()?;
    }
    if selective
        && hits.len() < n
        && let Some(selected) = w.selected_episodes("flt_sep")
    {
        let query = format!(
            "{selected} \
             UNWIND coalesce(flt_sep.entity_edges, []) AS flt_fu \
             MATCH ()-[f:RELATES_TO {{uuid: flt_fu}}]->() WITH DISTINCT f \
             WITH f, 1.0 - vec.cosineDistance(f.fact_embedding, vecf32($v)) AS score \
             WHERE score >= $min_sim{}{} \
             WITH f, score ORDER BY score DESC, f.uuid LIMIT $n {}",
            w.and_clause(),
            w.sourced("f, score"),
            fact_tail(&w)
        );
        let exact = read(ctx, Index::None, &fixed(&query), &params).await?;
        let seen: std::collections::BTreeSet<Uuid> = hits.iter().map(|h| h.fact.uuid).collect();
        for row in &exact {
            let hit = fact_hit(row)?;
            if !seen.contains(&hit.fact.uuid) {
                hits.push(hit);
            }
        }
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.fact.uuid.cmp(&b.fact.uuid))
        });
        hits.truncate(n);
    }
    Ok(hits)
}

/// Facts matching the fulltext query `q` (already sanitised), best first.
/// Under a source selection, the best `k` matches are filtered first, then the best
/// [`WRITER_WIDEN`] × `k`, and only when both leave fewer than `n`, every match (see
/// the module docs).
pub(crate) async fn fact_fulltext(ctx: Ctx<'_>, q: &str, n: usize) -> Result<Vec<FactHit>> {
    let w = ctx.filters.fact_where(ctx.now);
    let index = lexical::FACTS.index();
    let every = w.selects_sources() || named_facts(ctx.filters).is_some();
    let postings = lexical::postings(ctx, lexical::FACTS, q, pool(every, n)).await?;
    let params = with(&w).set("k", index_k(n)).set("n", int(n));
    if w.selects_sources() && named_facts(ctx.filters).is_none() {
        let query = format!(
            "{} {}",
            fact_fulltext_clauses(ctx, &w, false),
            fact_tail(&w)
        );
        for k in [index_k(n), index_k(n * WRITER_WIDEN)] {
            let Some(lex) = postings.pool(usize::try_from(k).ok()) else {
                return Ok(Vec::new());
            };
            let params = lex.params(params.clone().set("k", k));
            let rows = read(ctx, index, &fixed(&query), &params).await?;
            if rows.len() >= n {
                return rows.iter().map(fact_hit).collect();
            }
        }
    }
    let Some(lex) = postings.pool(pool(every, n)) else {
        return Ok(Vec::new());
    };
    let query = format!(
        "{} {}",
        fact_fulltext_clauses(ctx, &w, w.selects_sources()),
        fact_tail(&w)
    );
    let rows = read(ctx, index, &fixed(&query), &lex.params(params)).await?;
    rows.iter().map(fact_hit).collect()
}

/// How many matches a fulltext method's lexical pool keeps: every one when the
/// filters run on every match (`every`), else the best `k` the statement keeps.
pub(crate) fn pool(every: bool, n: usize) -> Option<usize> {
    (!every).then(|| usize::try_from(index_k(n)).unwrap_or(usize::MAX))
}

/// The lexical pool of the sanitised query `q` over `target` for a one-statement
/// hybrid path (`None`: no query, or nothing matched).
async fn hybrid_lexical(
    ctx: Ctx<'_>,
    target: lexical::Target,
    q: Option<&str>,
    every: bool,
    n: usize,
) -> Result<Option<lexical::Lexical>> {
    match q {
        None => Ok(None),
        Some(q) => {
            let need = pool(every, n);
            Ok(lexical::postings(ctx, target, q, need).await?.pool(need))
        }
    }
}

/// The clauses that end a fact method's statement, with `f` and `score` bound: the
/// fact's columns and its sources.
fn fact_tail(w: &Where) -> String {
    format!(
        "{} RETURN {FACT_COLUMNS} ORDER BY score DESC, uuid",
        fact_sources(w, "")
    )
}

/// Fact search with RRF in one statement: the fulltext method on `q` and the vector
/// method on `v` (whichever are given; each as [`fact_fulltext`] and [`fact_vector`]
/// run it, filters included) in subqueries, their fusion, the minimum score, the
/// limit, and the winners' columns and sources — so only the winners are loaded, in
/// one round trip.
///
/// The fusion is [`rrf_fusion`], [`rerank::rrf`](super::rerank) exactly. `None` when
/// an index it needs is missing: the per-method path tolerates that.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn fact_hybrid_rrf(
    ctx: Ctx<'_>,
    q: Option<&str>,
    v: Option<&[f32]>,
    n: usize,
    min_sim: f64,
    min_score: f64,
    limit: usize,
    ft_weight: f64,
) -> Result<Option<Vec<FactHit>>> {
    let w = ctx.filters.fact_where(ctx.now);
    let lex = hybrid_lexical(ctx, lexical::FACTS, q, named_facts(ctx.filters).is_some(), n).await?;
    let q = lex.as_ref().map(|l| l.cover.as_str());
    let ft = match q {
        Some(_) => format!(
            "CALL {{ {} RETURN collect([f, score]) AS ft }}",
            fact_fulltext_clauses(ctx, &w, false)
        ),
        None => "WITH [] AS ft".to_owned(),
    };
    let vec = |access| match v {
        Some(_) => format!(
            "CALL {{ {} RETURN collect([f, score]) AS vec }}",
            fact_vector_clauses(ctx, &w, access)
        ),
        None => "WITH ft, [] AS vec".to_owned(),
    };
    let query = |access| {
        format!(
            "{ft} {vec} {fused} {sources} RETURN {FACT_COLUMNS}, pos ORDER BY score DESC, pos",
            vec = vec(access),
            fused = rrf_fusion("f"),
            sources = fact_sources(&w, ", pos"),
        )
    };
    let mut params = hybrid_params(with(&w), q, v, n, min_sim, min_score, limit)
        .set("w_ft", ft_weight);
    if let Some(lex) = &lex {
        params = lex.params(params);
    }
    let indices = [
        (q.is_some(), Index::Fulltext("RELATES_TO", false)),
        (v.is_some(), fact_vector_index(ctx)),
    ];
    let Some(rows) = one_statement(ctx, &query, &params, indices).await? else {
        return Ok(None);
    };
    rows.iter().map(fact_hit).collect::<Result<_>>().map(Some)
}

/// The RRF fusion of the lists `ft` and `vec` of `[item, score]` (best first) that
/// a hybrid one statement has collected, exactly as [`rerank::rrf`](super::rerank)
/// fuses: each candidate carries its position of first appearance (`2 × rank +
/// method`, fulltext first), so equal fused scores keep the client's order; when only
/// one list found anything, its own scores and order stand. A fulltext rank adds
/// `$w_ft / (rank + 1)` (the scope's fulltext weight), a vector rank `1 / (rank + 1)`.
/// Then the minimum score and the limit, binding `var`, `score` and `pos`.
fn rrf_fusion(var: &str) -> String {
    format!(
        "WITH ft, vec, size(ft) > 0 AND size(vec) > 0 AS fuse \
         UNWIND [i IN range(0, size(ft) - 1) | \
                   [ft[i][0], CASE WHEN fuse THEN $w_ft / (i + 1) ELSE ft[i][1] END, 2 * i]] \
              + [i IN range(0, size(vec) - 1) | \
                   [vec[i][0], CASE WHEN fuse THEN 1.0 / (i + 1) ELSE vec[i][1] END, 2 * i + 1]] \
              AS c \
         WITH c[0] AS {var}, sum(c[1]) AS score, min(c[2]) AS pos \
         WHERE score >= $min_score \
         WITH {var}, score, pos ORDER BY score DESC, pos LIMIT $limit"
    )
}

/// A hybrid one statement's parameters on top of `base` (its filters'): the index and
/// candidate counts, the cut-offs, the limit, and the query text and vector it uses.
#[allow(clippy::too_many_arguments)]
fn hybrid_params(
    base: Params,
    q: Option<&str>,
    v: Option<&[f32]>,
    n: usize,
    min_sim: f64,
    min_score: f64,
    limit: usize,
) -> Params {
    let mut params = base
        .set("k", index_k(n))
        .set("n", int(n))
        .set("min_sim", min_sim)
        .set("min_score", min_score)
        .set("limit", int(limit));
    if let Some(q) = q {
        params = params.set("q", q);
    }
    if let Some(v) = v {
        params = params.set("v", v.to_vec());
    }
    params
}

/// Runs a hybrid one statement: its rows, or `None` when it failed because one of the
/// `indices` it used (`(used, index)`) is missing — the per-method path tolerates that.
async fn one_statement(
    ctx: Ctx<'_>,
    query: Statement<'_>,
    params: &Params,
    indices: [(bool, Index); 2],
) -> Result<Option<Vec<BTreeMap<String, Value>>>> {
    let indexed = query(Access::Index);
    match ctx.db.ro_query(ctx.graph, &indexed, params).await {
        Ok(res) => Ok(Some(res.into_maps())),
        Err(err @ Error::Query { .. }) => {
            for (used, index) in indices {
                if used
                    && matches!(index, Index::Fulltext(..))
                    && !index_exists(ctx, index).await?
                {
                    return Ok(None);
                }
            }
            // The fulltext index serves: the vector call failed, so scan instead.
            if !indices
                .iter()
                .any(|&(used, index)| used && matches!(index, Index::Vector(_)))
            {
                return Err(err);
            }
            let exact = query(Access::Scan);
            scanned(ctx, &exact, params, err).await.map(Some)
        }
        Err(e) => Err(e),
    }
}

/// Facts found by walking `RELATES_TO`/`MENTIONS` links from `origins` (entities or
/// episodes), level by level: a fact touching a node first reached at level `l` is
/// `l + 1` hops away and scores 1 / hops. The walk stops at `depth` hops or as soon as
/// `n` facts are found (one statement for each level's facts, one for the next
/// level's nodes), so a dense neighbourhood costs what it returns, not its paths.
pub(crate) async fn fact_bfs(
    ctx: Ctx<'_>,
    origins: &[Uuid],
    depth: u32,
    n: usize,
) -> Result<Vec<FactHit>> {
    let w = ctx.filters.fact_where(ctx.now);
    let query = format!(
        "UNWIND $frontier AS u \
         MATCH (x:Entity {{uuid: u}}) \
         MATCH (x)-[f:RELATES_TO]-() \
         WITH DISTINCT f WHERE NOT f.uuid IN $seen{}{} \
         WITH f, $score AS score ORDER BY f.uuid LIMIT $left \
         {sources} \
         RETURN {FACT_COLUMNS} ORDER BY uuid",
        w.and_clause(),
        w.sourced("f"),
        sources = fact_sources(&w, "")
    );
    let mut out: Vec<FactHit> = Vec::new();
    let mut visited: Vec<Uuid> = origins.to_vec();
    let mut frontier: Vec<Uuid> = origins.to_vec();
    for level in 0..depth {
        if frontier.is_empty() || out.len() >= n {
            break;
        }
        let seen: Vec<Uuid> = out.iter().map(|h| h.fact.uuid).collect();
        let params = with(&w)
            .set("frontier", uuid_list(&frontier))
            .set("seen", uuid_list(&seen))
            .set("score", 1.0 / f64::from(level + 1))
            .set("left", int(n - out.len()));
        for row in read(ctx, Index::None, &fixed(&query), &params).await? {
            out.push(fact_hit(&row)?);
        }
        if out.len() >= n || level + 1 == depth {
            break;
        }
        frontier = next_level(ctx, &frontier, &visited).await?;
        visited.extend(frontier.iter().copied());
    }
    Ok(out)
}

/// The nodes (entities or episodes) linked by `RELATES_TO` or `MENTIONS` to any of
/// `frontier` and not in `visited`.
async fn next_level(ctx: Ctx<'_>, frontier: &[Uuid], visited: &[Uuid]) -> Result<Vec<Uuid>> {
    let rows = read(
        ctx,
        Index::None,
        &fixed(
            "UNWIND $frontier AS u \
         OPTIONAL MATCH (a:Entity {uuid: u}) \
         OPTIONAL MATCH (b:Episodic {uuid: u}) \
         WITH coalesce(a, b) AS x WHERE x IS NOT NULL \
         MATCH (x)-[:RELATES_TO|MENTIONS]-(y) \
         WITH DISTINCT y.uuid AS uuid WHERE NOT uuid IN $visited \
         RETURN uuid",
        ),
        &Params::new()
            .set("frontier", uuid_list(frontier))
            .set("visited", uuid_list(visited)),
    )
    .await?;
    Ok(rows
        .iter()
        .filter_map(|r| r.get("uuid").and_then(Value::as_str))
        .filter_map(|s| Uuid::parse_str(s).ok())
        .collect())
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
    let named = named_entities(ctx.filters);
    let source = |access| match named {
        None => format!(
            "{}{} WITH node AS n, 1.0 - score AS score",
            stale_clause(VectorIndex::Entity),
            ENTITY_INDEX.neighbours(access)
        ),
        Some(named) => format!(
            "{named} WITH n, 1.0 - vec.cosineDistance(n.name_embedding, vecf32($v)) AS score"
        ),
    };
    let index = match named {
        None => Index::Vector(ENTITY_INDEX),
        Some(_) => Index::None,
    };
    let query = |access| {
        format!(
            "{} WHERE score >= $min_sim{} \
             RETURN {ENTITY_COLUMNS} ORDER BY score DESC, uuid LIMIT $n",
            source(access),
            w.and_clause()
        )
    };
    let params = with(&w)
        .set("k", index_k(n))
        .set("v", v.to_vec())
        .set("min_sim", min_sim)
        .set("n", int(n));
    let rows = read(ctx, index, &query, &params).await?;
    rows.iter().map(entity_hit).collect()
}

/// Entities matching the fulltext query `q` on name and summary, best first.
pub(crate) async fn entity_fulltext(ctx: Ctx<'_>, q: &str, n: usize) -> Result<Vec<EntityHit>> {
    let w = ctx.filters.entity_where();
    let every = named_entities(ctx.filters).is_some();
    let need = pool(every, n);
    let postings = lexical::postings(ctx, lexical::ENTITIES, q, need).await?;
    let Some(lex) = postings.pool(need) else {
        return Ok(Vec::new());
    };
    let matches = fulltext_matches(&lexical::ENTITIES.call(), "node", "n", &w, every);
    let query = format!("{matches} RETURN {ENTITY_COLUMNS} ORDER BY score DESC, uuid LIMIT $n");
    let params = lex.params(with(&w).set("k", index_k(n)).set("n", int(n)));
    let rows = read(ctx, Index::Fulltext("Entity", true), &fixed(&query), &params).await?;
    rows.iter().map(entity_hit).collect()
}

/// Entities reached by walking `RELATES_TO`/`MENTIONS` links from `origins`, level by
/// level (the origins themselves excluded): first reached at level `l`, an entity
/// scores 1 / `l`. Stops at `depth` or once `n` entities are found.
pub(crate) async fn entity_bfs(
    ctx: Ctx<'_>,
    origins: &[Uuid],
    depth: u32,
    n: usize,
) -> Result<Vec<EntityHit>> {
    let w = ctx.filters.entity_where();
    let query = format!(
        "UNWIND $level AS u \
         MATCH (n:Entity {{uuid: u}}) {} \
         WITH n, $score AS score \
         RETURN {ENTITY_COLUMNS} ORDER BY uuid LIMIT $left",
        w.where_clause()
    );
    let mut out: Vec<EntityHit> = Vec::new();
    let mut visited: Vec<Uuid> = origins.to_vec();
    let mut frontier: Vec<Uuid> = origins.to_vec();
    for level in 1..=depth {
        if frontier.is_empty() || out.len() >= n {
            break;
        }
        frontier = next_level(ctx, &frontier, &visited).await?;
        visited.extend(frontier.iter().copied());
        if frontier.is_empty() {
            break;
        }
        let params = with(&w)
            .set("level", uuid_list(&frontier))
            .set("score", 1.0 / f64::from(level))
            .set("left", int(n - out.len()));
        for row in read(ctx, Index::None, &fixed(&query), &params).await? {
            out.push(entity_hit(&row)?);
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------- episodes

/// Episodes matching the fulltext query `q` on content and source description; under
/// a source selection, every match is filtered before the best are kept.
pub(crate) async fn episode_fulltext(ctx: Ctx<'_>, q: &str, n: usize) -> Result<Vec<EpisodeHit>> {
    let w = ctx.filters.episode_where();
    // Every match is filtered before the limit: the pool holds every match when a
    // condition applies.
    let need = pool(!w.is_empty(), n);
    let postings = lexical::postings(ctx, lexical::EPISODES, q, need).await?;
    let Some(lex) = postings.pool(need) else {
        return Ok(Vec::new());
    };
    let query = format!(
        "{} \
         WITH node AS e, score {} \
         WITH e, score ORDER BY score DESC LIMIT $n \
         RETURN {EPISODE_COLUMNS} ORDER BY score DESC, uuid",
        lexical::EPISODES.call(),
        w.where_clause()
    );
    let params = lex.params(with(&w).set("n", int(n)));
    let rows = read(ctx, Index::Fulltext("Episodic", true), &fixed(&query), &params).await?;
    rows.iter().map(episode_hit).collect()
}

/// Episodes whose content embeddings (`EpisodeEmbedding` nodes, one per passage, see
/// [`store`](crate::graph::store)) are nearest to `v` — an episode scored by its best
/// passage — with cosine similarity ≥ `min_sim`. Under a source selection the selected episodes — looked up by uuid, or
/// the selected writers' found through the range index on `Episodic.writer` — are
/// ranked exactly instead: a Lens (or what a subject may view of a group it cannot
/// read) is often a few episodes among many, which the index's nearest neighbours
/// would miss.
pub(crate) async fn episode_vector(
    ctx: Ctx<'_>,
    v: &[f32],
    n: usize,
    min_sim: f64,
) -> Result<Vec<EpisodeHit>> {
    let label = crate::graph::store::EPISODE_EMBEDDING_LABEL;
    let w = ctx.filters.episode_where();
    let selected = w.selected_episodes("e");
    let index = match selected {
        Some(_) => Index::None,
        None => Index::Vector(EPISODE_INDEX),
    };
    let query = |access| if let Some(selected) = &selected {
        format!(
            "{selected} \
             MATCH (x:{label} {{uuid: e.uuid}}) \
             WITH e, max(1.0 - vec.cosineDistance(x.embedding, vecf32($v))) AS score \
             WHERE score >= $min_sim{} \
             RETURN {EPISODE_COLUMNS} ORDER BY score DESC, uuid LIMIT $n",
            w.and_clause()
        )
    } else {
        format!(
            "{}{} \
             WITH node.uuid AS eu, max(1.0 - score) AS score WHERE score >= $min_sim \
             MATCH (e:Episodic {{uuid: eu}}) {} \
             RETURN {EPISODE_COLUMNS} ORDER BY score DESC, uuid LIMIT $n",
            stale_clause(VectorIndex::Episode),
            EPISODE_INDEX.neighbours(access),
            w.where_clause()
        )
    };
    let params = with(&w)
        .set("k", index_k(n))
        .set("v", v.to_vec())
        .set("min_sim", min_sim)
        .set("n", int(n));
    let rows = read(ctx, index, &query, &params).await?;
    rows.iter().map(episode_hit).collect()
}

/// Episode search with RRF in one statement: [`episode_fulltext`] on `q` and the
/// index path of [`episode_vector`] on `v` (whichever are given) in subqueries, their
/// fusion exactly as [`fact_hybrid_rrf`] fuses (positions `2 × rank + method`,
/// fulltext first; one method's own scores and order when only it found anything),
/// the minimum score and the limit, in one round trip instead of two. `None` under a
/// source selection (the vector method ranks the selected episodes exactly instead)
/// or when an index it needs is missing: the per-method path handles both.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn episode_hybrid_rrf(
    ctx: Ctx<'_>,
    q: Option<&str>,
    v: Option<&[f32]>,
    n: usize,
    min_sim: f64,
    min_score: f64,
    limit: usize,
    ft_weight: f64,
) -> Result<Option<Vec<EpisodeHit>>> {
    if ctx.filters.selects_sources() {
        return Ok(None);
    }
    // The time condition (as of an instant), in both subqueries before their limits.
    let w = ctx.filters.episode_where();
    let lex = hybrid_lexical(ctx, lexical::EPISODES, q, !w.is_empty(), n).await?;
    let q = lex.as_ref().map(|l| l.cover.as_str());
    let ft = match q {
        Some(_) => format!(
            "CALL {{ {} \
             WITH node AS e, score {} \
             WITH e, score ORDER BY score DESC LIMIT $n \
             WITH e, score ORDER BY score DESC, e.uuid \
             RETURN collect([e, score]) AS ft }}",
            lexical::EPISODES.call(),
            w.where_clause()
        ),
        None => "WITH [] AS ft".to_owned(),
    };
    let vec = |access| match v {
        Some(_) => format!(
            "CALL {{ {}{} \
             WITH node.uuid AS eu, max(1.0 - score) AS score WHERE score >= $min_sim \
             MATCH (e:Episodic {{uuid: eu}}) {} \
             WITH e, score ORDER BY score DESC, e.uuid LIMIT $n \
             RETURN collect([e, score]) AS vec }}",
            stale_clause(VectorIndex::Episode),
            EPISODE_INDEX.neighbours(access),
            w.where_clause()
        ),
        None => "WITH ft, [] AS vec".to_owned(),
    };
    let query = |access| {
        format!(
            "{ft} {vec} {fused} RETURN {EPISODE_COLUMNS}, pos ORDER BY score DESC, pos",
            vec = vec(access),
            fused = rrf_fusion("e"),
        )
    };
    let mut params = hybrid_params(with(&w), q, v, n, min_sim, min_score, limit)
        .set("w_ft", ft_weight);
    if let Some(lex) = &lex {
        params = lex.params(params);
    }
    let indices = [
        (q.is_some(), Index::Fulltext("Episodic", true)),
        (v.is_some(), Index::Vector(EPISODE_INDEX)),
    ];
    let Some(rows) = one_statement(ctx, &query, &params, indices).await? else {
        return Ok(None);
    };
    rows.iter()
        .map(episode_hit)
        .collect::<Result<_>>()
        .map(Some)
}

// ---------------------------------------------------------------- communities

/// Communities nearest to `v` with cosine similarity ≥ `min_sim`.
pub(crate) async fn community_vector(
    ctx: Ctx<'_>,
    v: &[f32],
    n: usize,
    min_sim: f64,
) -> Result<Vec<CommunityHit>> {
    let query = |access| {
        format!(
            "{}{} \
             WITH node AS c, 1.0 - score AS score WHERE score >= $min_sim \
             RETURN {COMMUNITY_COLUMNS} ORDER BY score DESC, uuid LIMIT $n",
            stale_clause(VectorIndex::Community),
            COMMUNITY_INDEX.neighbours(access)
        )
    };
    let params = Params::new()
        .set("k", index_k(n))
        .set("v", v.to_vec())
        .set("min_sim", min_sim)
        .set("n", int(n));
    let rows = read(ctx, Index::Vector(COMMUNITY_INDEX), &query, &params).await?;
    rows.iter().map(community_hit).collect()
}

/// Communities matching the fulltext query `q` on their name.
pub(crate) async fn community_fulltext(
    ctx: Ctx<'_>,
    q: &str,
    n: usize,
) -> Result<Vec<CommunityHit>> {
    let need = pool(false, n);
    let postings = lexical::postings(ctx, lexical::COMMUNITIES, q, need).await?;
    let Some(lex) = postings.pool(need) else {
        return Ok(Vec::new());
    };
    let query = format!(
        "{} \
         WITH node AS c, score ORDER BY score DESC LIMIT $n \
         RETURN {COMMUNITY_COLUMNS} ORDER BY score DESC, uuid",
        lexical::COMMUNITIES.call()
    );
    let params = lex.params(Params::new().set("n", int(n)));
    let rows = read(ctx, Index::Fulltext("Community", true), &fixed(&query), &params).await?;
    rows.iter().map(community_hit).collect()
}

// ---------------------------------------------------------------- reranker inputs

/// The node a similarity matrix is computed over.
#[derive(Clone, Copy)]
pub(crate) enum Embedded {
    Fact,
    Entity,
    Community,
    Episode,
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
        Embedded::Episode => ("MATCH (x:EpisodeEmbedding {uuid: u})", "embedding"),
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
    let rows = read(ctx, Index::None, &fixed(&query), &params).await?;
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
/// entity `center` to each of `uuids` that is reachable; the center itself is 0. Walks
/// level by level and stops once every one of `uuids` is placed.
pub(crate) async fn distances(
    ctx: Ctx<'_>,
    center: Uuid,
    uuids: &[Uuid],
    depth: u32,
) -> Result<BTreeMap<Uuid, u32>> {
    let wanted: std::collections::BTreeSet<Uuid> = uuids.iter().copied().collect();
    let mut out = BTreeMap::new();
    if wanted.contains(&center) {
        out.insert(center, 0);
    }
    let mut visited = vec![center];
    let mut frontier = vec![center];
    for level in 1..=depth {
        if frontier.is_empty() || out.len() == wanted.len() {
            break;
        }
        let rows = read(
            ctx,
            Index::None,
            &fixed(
                "UNWIND $frontier AS u \
                 MATCH (x:Entity {uuid: u})-[:RELATES_TO]-(y:Entity) \
                 WITH DISTINCT y.uuid AS uuid WHERE NOT uuid IN $visited \
                 RETURN uuid",
            ),
            &Params::new()
                .set("frontier", uuid_list(&frontier))
                .set("visited", uuid_list(&visited)),
        )
        .await?;
        frontier = rows
            .iter()
            .filter_map(|r| r.get("uuid").and_then(Value::as_str))
            .filter_map(|s| Uuid::parse_str(s).ok())
            .collect();
        for u in &frontier {
            if wanted.contains(u) {
                out.insert(*u, level);
            }
        }
        visited.extend(frontier.iter().copied());
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
        &fixed(
            "UNWIND $uuids AS u MATCH (n:Entity {uuid: u}) \
             OPTIONAL MATCH (:Episodic)-[m:MENTIONS]->(n) \
             RETURN u AS uuid, count(m) AS mentions",
        ),
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
