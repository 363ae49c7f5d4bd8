//! Hybrid search over the temporal graph: facts, entities, episodes and communities,
//! found through FalkorDB's own indices and ordered by a reranker.
//!
//! [`search`] is given the database handle, the logical graph id and, per call, the
//! [`Embedder`] (for vector search and MMR) and the cross-encoder [`Reranker`]
//! (for [`RerankerKind::CrossEncoder`]); nothing is stored between calls. A
//! [`SearchRequest`] carries the query text, a [`SearchConfig`] (which scopes run, with
//! which methods and reranker — the [recipes](config) are constants equivalent to
//! Graphiti's) and [`SearchFilters`] (labels, types, uuids, date groups and the
//! [`TimeMode`]: current facts by default, the whole history, or what was true at an
//! instant).
//!
//! How a search runs:
//!
//! 1. The request is checked; bad input fails with [`Error::InvalidInput`] naming the
//!    field, before any call.
//! 2. The query is embedded **once**, if any scope needs it and no
//!    [`SearchRequest::query_vector`] is given.
//! 3. The scopes run **concurrently**. Inside a scope, the fulltext and vector
//!    statements are issued together as two concurrent read-only queries on the
//!    handle's read connections — as fast as one pipeline in
//!    `examples/bench_search.rs` (its two floor rows), and unlike a pipeline
//!    (`GRAPH.QUERY`) read-only, retried on a lost connection, and answered by an
//!    empty graph when the graph does not exist (a search never creates one). Then
//!    the breadth-first walk if configured (it starts from their hits unless origins
//!    are given), then the reranker, then [`SearchConfig::min_score`] and the limit.
//! 4. Each method is one statement: index call, filters, cut, and — for facts — the
//!    lookup of their source episodes, all in Cypher ([`methods`] documents
//!    the over-fetch). Rerankers that need the graph (MMR similarities, node
//!    distances, mention counts) add one statement for the whole candidate list.
//! 5. The commonest search, facts with RRF and no breadth-first walk
//!    (`EDGE_HYBRID_SEARCH_RRF`, the fact scope of `COMBINED_HYBRID_SEARCH_RRF`), is
//!    **one statement**: the index calls in subqueries, the fusion, the minimum
//!    score, the limit and the winners' sources, so only the winners are loaded and
//!    nothing waits on a second round trip. Measured against two concurrent reads and a third statement loading the
//!    fused winners, it is the faster of the two (`examples/bench_search.rs`), even
//!    though the server then runs the two index calls one after the other.
//!
//! Only the properties a result needs are projected; embeddings never leave the
//! server. Episodes are searched by fulltext only: they carry no embedding, because an
//! episode is long, mixed text whose meaning is already embedded, sentence by sentence,
//! in the facts extracted from it, and embedding every episode would cost one more
//! embedding call per ingestion for a vector that matches queries poorly.
//!
//! A query without a searchable word skips fulltext; a blank query (and no query
//! vector) skips fulltext and vector, so only a breadth-first walk from explicit
//! origins can return anything.
//!
//! ```no_run
//! # async fn run(db: gralkor::FalkorDb, embedder: &dyn gralkor::llm::Embedder) -> gralkor::Result<()> {
//! use gralkor::graph::search::{self, EDGE_HYBRID_SEARCH_RRF, SearchRequest};
//! use gralkor::graph::Timestamp;
//!
//! // Current facts about Alice's job.
//! let found = search::search(&db, "notes", &SearchRequest::new("where does Alice work", EDGE_HYBRID_SEARCH_RRF),
//!     Some(embedder), None).await?;
//! for hit in &found.facts {
//!     println!("{:.3} {} (from {} episodes)", hit.score, hit.fact.fact, hit.sources.len());
//! }
//! // What was true on 2025-01-01.
//! let then = SearchRequest::new("where does Alice work", EDGE_HYBRID_SEARCH_RRF)
//!     .as_of("2025-01-01T00:00:00Z".parse::<Timestamp>()?);
//! let found = search::search(&db, "notes", &then, Some(embedder), None).await?;
//! # let _ = found; Ok(()) }
//! ```

pub mod config;
pub mod filters;
pub mod methods;
pub mod rerank;
pub mod results;

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

pub use config::{
    COMBINED_HYBRID_SEARCH_CROSS_ENCODER, COMBINED_HYBRID_SEARCH_MMR, COMBINED_HYBRID_SEARCH_RRF,
    COMMUNITY_HYBRID_SEARCH_CROSS_ENCODER, COMMUNITY_HYBRID_SEARCH_MMR,
    COMMUNITY_HYBRID_SEARCH_RRF, EDGE_HYBRID_SEARCH_CROSS_ENCODER,
    EDGE_HYBRID_SEARCH_EPISODE_MENTIONS, EDGE_HYBRID_SEARCH_MMR, EDGE_HYBRID_SEARCH_NODE_DISTANCE,
    EDGE_HYBRID_SEARCH_RRF, MAX_BFS_DEPTH, MAX_SEARCH_LIMIT, Methods,
    NODE_HYBRID_SEARCH_CROSS_ENCODER, NODE_HYBRID_SEARCH_EPISODE_MENTIONS, NODE_HYBRID_SEARCH_MMR,
    NODE_HYBRID_SEARCH_NODE_DISTANCE, NODE_HYBRID_SEARCH_RRF, RerankerKind, ScopeConfig,
    SearchConfig,
};
pub use filters::{DateFilter, SearchFilters, TimeMode};
pub use methods::{MIN_INDEX_K, OVERFETCH};
pub use results::{CommunityHit, EntityHit, EpisodeHit, EpisodeSource, FactHit, SearchResults};

use self::methods::{Ctx, Embedded};
use self::results::Hit;
use crate::falkordb::{DEFAULT_STOPWORDS, FalkorDb, fulltext_query};
use crate::graph::model::Timestamp;
use crate::llm::{Embedder, Reranker};
use crate::{Error, Result};

/// The usage label of the query embedding and the cross-encoder calls.
pub const SEARCH_LABEL: &str = "search";

/// One search: the query, what to search and how, and what may be returned.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    /// The query text.
    pub query: String,
    /// Scopes, methods, rerankers, limit.
    pub config: SearchConfig,
    /// What may be returned, and which facts are seen in time.
    pub filters: SearchFilters,
    /// The entity [`RerankerKind::NodeDistance`] measures from (required by it).
    pub center: Option<Uuid>,
    /// Where breadth-first walks start (entities or episodes); when empty, they start
    /// from the other methods' hits (facts: their endpoints; entities: themselves).
    pub bfs_origins: Vec<Uuid>,
    /// The query's embedding, if the caller has it; the embedder is then not called.
    pub query_vector: Option<Vec<f32>>,
}

impl SearchRequest {
    /// A search for `query` with `config`, no filters (current facts only).
    pub fn new(query: impl Into<String>, config: SearchConfig) -> SearchRequest {
        SearchRequest {
            query: query.into(),
            config,
            filters: SearchFilters::default(),
            center: None,
            bfs_origins: Vec::new(),
            query_vector: None,
        }
    }

    /// The same request with `filters`.
    pub fn filters(mut self, filters: SearchFilters) -> SearchRequest {
        self.filters = filters;
        self
    }

    /// The same request seeing the facts true at `at` ([`TimeMode::AsOf`]).
    pub fn as_of(mut self, at: Timestamp) -> SearchRequest {
        self.filters.time = TimeMode::AsOf(at);
        self
    }

    /// The same request seeing every fact, retired or not ([`TimeMode::History`]).
    pub fn history(mut self) -> SearchRequest {
        self.filters.time = TimeMode::History;
        self
    }

    /// The same request with a center entity for node-distance reranking.
    pub fn center(mut self, center: Uuid) -> SearchRequest {
        self.center = Some(center);
        self
    }

    /// The same request with breadth-first origins.
    pub fn bfs_origins(mut self, origins: impl IntoIterator<Item = Uuid>) -> SearchRequest {
        self.bfs_origins = origins.into_iter().collect();
        self
    }

    /// The same request with a precomputed query embedding.
    pub fn query_vector(mut self, v: Vec<f32>) -> SearchRequest {
        self.query_vector = Some(v);
        self
    }

    fn check(&self, embedder: bool, reranker: bool) -> Result<()> {
        self.config.check()?;
        self.filters.check()?;
        if self.query.contains('\0') {
            return Err(Error::invalid("query", "must not contain a NUL character"));
        }
        if let Some(v) = &self.query_vector
            && (v.is_empty() || v.iter().any(|x| !x.is_finite()))
        {
            return Err(Error::invalid(
                "query_vector",
                "must be a non-empty list of finite numbers",
            ));
        }
        if self.config.needs_embedding()
            && self.query_vector.is_none()
            && !embedder
            && !self.query.trim().is_empty()
        {
            return Err(Error::invalid(
                "embedder",
                "must be given (or a query_vector): the configuration uses vector search or MMR",
            ));
        }
        if self.config.needs_cross_encoder() && !reranker {
            return Err(Error::invalid(
                "reranker",
                "must be given: the configuration uses the cross-encoder",
            ));
        }
        if self.config.needs_center() && self.center.is_none() {
            return Err(Error::invalid(
                "center",
                "must be given: the configuration reranks by node distance",
            ));
        }
        Ok(())
    }
}

/// Runs `request` on `graph` (see the [module docs](self)). `embedder` is needed when a
/// scope uses vector search or MMR and no query vector is given; `reranker` when a
/// scope uses the cross-encoder.
///
/// ```no_run
/// # async fn run(db: gralkor::FalkorDb) -> gralkor::Result<()> {
/// use gralkor::graph::search::{self, COMBINED_HYBRID_SEARCH_RRF, SearchRequest};
/// use gralkor::llm::doubles::HashEmbedder;
///
/// let embedder = HashEmbedder::new(1024);
/// let req = SearchRequest::new("Alice Acme", COMBINED_HYBRID_SEARCH_RRF.limit(5));
/// let found = search::search(&db, "notes", &req, Some(&embedder), None).await?;
/// assert!(found.facts.len() <= 5 && found.entities.len() <= 5);
/// # Ok(()) }
/// ```
#[tracing::instrument(skip_all, fields(graph, limit = request.config.limit))]
pub async fn search(
    db: &FalkorDb,
    graph: &str,
    request: &SearchRequest,
    embedder: Option<&dyn Embedder>,
    reranker: Option<&dyn Reranker>,
) -> Result<SearchResults> {
    request.check(embedder.is_some(), reranker.is_some())?;
    crate::falkordb::physical_graph_name(graph)?;
    let blank = request.query.trim().is_empty();
    let vector = match (&request.query_vector, embedder) {
        (Some(v), _) => Some(v.clone()),
        (None, Some(e)) if request.config.needs_embedding() && !blank => {
            let mut out = e
                .embed(std::slice::from_ref(&request.query), SEARCH_LABEL)
                .await?;
            if out.len() != 1 {
                return Err(Error::Protocol(format!(
                    "the embedder returned {} vectors for one query",
                    out.len()
                )));
            }
            Some(out.remove(0))
        }
        _ => None,
    };
    let text = if blank {
        None
    } else {
        fulltext_query(&request.query, DEFAULT_STOPWORDS)
    };
    let s = Scope {
        ctx: Ctx {
            db,
            graph,
            filters: &request.filters,
            now: Timestamp::now(),
        },
        request,
        vector: vector.as_deref(),
        text: text.as_deref(),
        reranker,
    };
    let c = &request.config;
    let (facts, entities, episodes, communities) = tokio::try_join!(
        async {
            match c.facts {
                Some(cfg) => s.facts(cfg).await,
                None => Ok(Vec::new()),
            }
        },
        async {
            match c.entities {
                Some(cfg) => s.entities(cfg).await,
                None => Ok(Vec::new()),
            }
        },
        async {
            match c.episodes {
                Some(cfg) => s.episodes(cfg).await,
                None => Ok(Vec::new()),
            }
        },
        async {
            match c.communities {
                Some(cfg) => s.communities(cfg).await,
                None => Ok(Vec::new()),
            }
        },
    )?;
    Ok(SearchResults {
        facts,
        entities,
        episodes,
        communities,
    })
}

/// The current facts most relevant to `query`: [`EDGE_HYBRID_SEARCH_RRF`] with
/// `limit` results — Graphiti's `search()`.
///
/// ```no_run
/// # async fn run(db: gralkor::FalkorDb, embedder: &dyn gralkor::llm::Embedder) -> gralkor::Result<()> {
/// for hit in gralkor::graph::search::search_facts(&db, "notes", "Alice's employer", embedder, 5).await? {
///     println!("{}", hit.fact.fact);
/// }
/// # Ok(()) }
/// ```
pub async fn search_facts(
    db: &FalkorDb,
    graph: &str,
    query: &str,
    embedder: &dyn Embedder,
    limit: usize,
) -> Result<Vec<FactHit>> {
    let request = SearchRequest::new(query, EDGE_HYBRID_SEARCH_RRF.limit(limit));
    Ok(search(db, graph, &request, Some(embedder), None)
        .await?
        .facts)
}

/// What the scopes of one search share.
struct Scope<'a> {
    ctx: Ctx<'a>,
    request: &'a SearchRequest,
    vector: Option<&'a [f32]>,
    text: Option<&'a str>,
    reranker: Option<&'a dyn Reranker>,
}

/// `Some(fut.await)` when `run`, else an empty list — for `try_join!`.
async fn maybe<T, F>(run: bool, fut: F) -> Result<Vec<T>>
where
    F: std::future::Future<Output = Result<Vec<T>>>,
{
    if run { fut.await } else { Ok(Vec::new()) }
}

impl Scope<'_> {
    fn limit(&self) -> usize {
        self.request.config.limit
    }

    /// Candidates per method: twice the limit, as Graphiti.
    fn n(&self) -> usize {
        2 * self.limit()
    }

    /// The breadth-first origins: the request's, else `from_hits`.
    fn origins(&self, from_hits: impl FnOnce() -> Vec<Uuid>) -> Vec<Uuid> {
        if self.request.bfs_origins.is_empty() {
            from_hits()
        } else {
            self.request.bfs_origins.clone()
        }
    }

    async fn facts(&self, cfg: ScopeConfig) -> Result<Vec<FactHit>> {
        let (ctx, n, m) = (self.ctx, self.n(), cfg.methods);
        if cfg.reranker == RerankerKind::Rrf && !m.bfs {
            let text = self.text.filter(|_| m.fulltext);
            let vector = self.vector.filter(|_| m.vector);
            if text.is_none() && vector.is_none() {
                return Ok(Vec::new());
            }
            // The methods, fusion and loading in one statement; `None` when an index
            // is missing, which the per-method path below tolerates.
            if let Some(hits) = methods::fact_hybrid_rrf(
                ctx,
                text,
                vector,
                n,
                cfg.min_similarity,
                self.request.config.min_score,
                self.limit(),
            )
            .await?
            {
                return Ok(hits);
            }
        }
        let (ft, vec) = tokio::try_join!(
            maybe(
                m.fulltext && self.text.is_some(),
                methods::fact_fulltext(ctx, self.text.unwrap_or_default(), n)
            ),
            maybe(
                m.vector && self.vector.is_some(),
                methods::fact_vector(ctx, self.vector.unwrap_or_default(), n, cfg.min_similarity)
            ),
        )?;
        let mut lists = vec![ft, vec];
        if m.bfs {
            let origins = self.origins(|| {
                let set: BTreeSet<Uuid> = lists
                    .iter()
                    .flatten()
                    .flat_map(|h| [h.fact.source_uuid, h.fact.target_uuid])
                    .collect();
                set.into_iter().collect()
            });
            lists.push(methods::fact_bfs(ctx, &origins, cfg.bfs_max_depth, n).await?);
        }
        let fused = rerank::rrf(lists);
        let ordered = match cfg.reranker {
            RerankerKind::Rrf => fused,
            RerankerKind::Mmr { lambda } => self.mmr(fused, Embedded::Fact, lambda).await?,
            RerankerKind::NodeDistance => {
                let center = self.request.center.expect("checked");
                let nodes: BTreeSet<Uuid> = fused
                    .iter()
                    .flat_map(|h| [h.fact.source_uuid, h.fact.target_uuid])
                    .collect();
                let nodes: Vec<Uuid> = nodes.into_iter().collect();
                let d = methods::distances(ctx, center, &nodes, cfg.bfs_max_depth).await?;
                rerank::by_distance(fused, |h| {
                    [h.fact.source_uuid, h.fact.target_uuid]
                        .iter()
                        .filter_map(|u| d.get(u).copied())
                        .min()
                })
            }
            RerankerKind::EpisodeMentions => {
                rerank::by_count(fused, |h| h.fact.episodes.len() as u64)
            }
            RerankerKind::CrossEncoder => self.cross_encode(fused).await?,
        };
        Ok(rerank::finish(
            ordered,
            self.request.config.min_score,
            self.limit(),
        ))
    }

    async fn entities(&self, cfg: ScopeConfig) -> Result<Vec<EntityHit>> {
        let (ctx, n, m) = (self.ctx, self.n(), cfg.methods);
        let (ft, vec) = tokio::try_join!(
            maybe(
                m.fulltext && self.text.is_some(),
                methods::entity_fulltext(ctx, self.text.unwrap_or_default(), n)
            ),
            maybe(
                m.vector && self.vector.is_some(),
                methods::entity_vector(ctx, self.vector.unwrap_or_default(), n, cfg.min_similarity)
            ),
        )?;
        let mut lists = vec![ft, vec];
        if m.bfs {
            let origins = self.origins(|| {
                let set: BTreeSet<Uuid> = lists.iter().flatten().map(|h| h.entity.uuid).collect();
                set.into_iter().collect()
            });
            lists.push(methods::entity_bfs(ctx, &origins, cfg.bfs_max_depth, n).await?);
        }
        let fused = rerank::rrf(lists);
        let ordered = match cfg.reranker {
            RerankerKind::Rrf => fused,
            RerankerKind::Mmr { lambda } => self.mmr(fused, Embedded::Entity, lambda).await?,
            RerankerKind::NodeDistance => {
                let center = self.request.center.expect("checked");
                let nodes: Vec<Uuid> = fused.iter().map(|h| h.entity.uuid).collect();
                let d = methods::distances(ctx, center, &nodes, cfg.bfs_max_depth).await?;
                rerank::by_distance(fused, |h| d.get(&h.entity.uuid).copied())
            }
            RerankerKind::EpisodeMentions => {
                let nodes: Vec<Uuid> = fused.iter().map(|h| h.entity.uuid).collect();
                let counts = methods::mention_counts(ctx, &nodes).await?;
                rerank::by_count(fused, |h| {
                    counts.get(&h.entity.uuid).copied().unwrap_or_default()
                })
            }
            RerankerKind::CrossEncoder => self.cross_encode(fused).await?,
        };
        Ok(rerank::finish(
            ordered,
            self.request.config.min_score,
            self.limit(),
        ))
    }

    async fn episodes(&self, cfg: ScopeConfig) -> Result<Vec<EpisodeHit>> {
        let found = match self.text {
            Some(q) if cfg.methods.fulltext => {
                methods::episode_fulltext(self.ctx, q, self.n()).await?
            }
            _ => Vec::new(),
        };
        let fused = rerank::rrf(vec![found]);
        let ordered = match cfg.reranker {
            RerankerKind::CrossEncoder => self.cross_encode(fused).await?,
            _ => fused,
        };
        Ok(rerank::finish(
            ordered,
            self.request.config.min_score,
            self.limit(),
        ))
    }

    async fn communities(&self, cfg: ScopeConfig) -> Result<Vec<CommunityHit>> {
        let (ctx, n, m) = (self.ctx, self.n(), cfg.methods);
        let (ft, vec) = tokio::try_join!(
            maybe(
                m.fulltext && self.text.is_some(),
                methods::community_fulltext(ctx, self.text.unwrap_or_default(), n)
            ),
            maybe(
                m.vector && self.vector.is_some(),
                methods::community_vector(
                    ctx,
                    self.vector.unwrap_or_default(),
                    n,
                    cfg.min_similarity
                )
            ),
        )?;
        let fused = rerank::rrf(vec![ft, vec]);
        let ordered = match cfg.reranker {
            RerankerKind::Mmr { lambda } => self.mmr(fused, Embedded::Community, lambda).await?,
            RerankerKind::CrossEncoder => self.cross_encode(fused).await?,
            _ => fused,
        };
        Ok(rerank::finish(
            ordered,
            self.request.config.min_score,
            self.limit(),
        ))
    }

    /// MMR over the best 2 × limit of the RRF order (the similarity matrix grows with
    /// the square of the candidates).
    async fn mmr<T: Hit>(&self, mut fused: Vec<T>, kind: Embedded, lambda: f64) -> Result<Vec<T>> {
        let Some(v) = self.vector else {
            // A blank query: nothing to be relevant to; keep the fused order.
            return Ok(fused);
        };
        fused.truncate(2 * self.limit());
        let uuids: Vec<Uuid> = fused.iter().map(Hit::uuid).collect();
        let sims = methods::similarities(self.ctx, kind, &uuids, v).await?;
        Ok(rerank::mmr(fused, &sims, lambda))
    }

    /// RRF order cut to 2 × limit, then the cross-encoder's scores. Identical texts
    /// are scored once.
    async fn cross_encode<T: Hit>(&self, mut fused: Vec<T>) -> Result<Vec<T>> {
        fused.truncate(2 * self.limit());
        if fused.is_empty() {
            return Ok(fused);
        }
        let reranker = self.reranker.expect("checked");
        let mut unique: BTreeMap<String, usize> = BTreeMap::new();
        let mut passages: Vec<String> = Vec::new();
        let slots: Vec<usize> = fused
            .iter()
            .map(|h| {
                let p = h.passage();
                *unique.entry(p.clone()).or_insert_with(|| {
                    passages.push(p);
                    passages.len() - 1
                })
            })
            .collect();
        let scores = reranker
            .rerank(&self.request.query, &passages, SEARCH_LABEL)
            .await?;
        if scores.len() != passages.len() {
            return Err(Error::Protocol(format!(
                "the reranker returned {} scores for {} passages",
                scores.len(),
                passages.len()
            )));
        }
        let per_hit: Vec<f64> = slots.iter().map(|&i| scores[i]).collect();
        Ok(rerank::by_scores(fused, &per_hit))
    }
}
