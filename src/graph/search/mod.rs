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
//!    [`SearchRequest::query_vector`] is given — once for every graph of a
//!    [`search_many`] too, which then searches the graphs concurrently. Meanwhile
//!    (the embedder runs off the async threads) the fulltext **postings** of every
//!    graph are fetched: for each query term, the ids of the records matching it, one
//!    statement per graph and scope. Fulltext matches are ranked by BM25 computed
//!    from them (`lexical.rs`): FalkorDB's own fulltext score ranks a record
//!    matching several query terms below one matching only the rarest of them.
//! 3. The scopes run **concurrently**. Inside a scope, the fulltext and vector
//!    statements are issued together as two concurrent read-only queries on the
//!    handle's read connections — as fast as one pipeline in
//!    `examples/bench_search.rs` (its two floor rows), and unlike a pipeline
//!    (`GRAPH.QUERY`) read-only, retried on a lost connection, and answered by an
//!    empty graph when the graph does not exist (a search never creates one). Then
//!    the breadth-first walk if configured (it starts from their hits unless origins
//!    are given), then the reranker, then [`SearchConfig::min_score`] and the limit.
//!    Every scope runs this one sequence (the scope runner, parameterised per scope).
//! 4. Each method is one statement (the fulltext method after its postings): index
//!    call, filters, cut, and — for facts — the lookup of their source episodes, all
//!    in Cypher ([`methods`] documents
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
//! A source selection ([`SearchFilters::writers`], [`SearchFilters::episodes`]) runs
//! inside the statements, before the limit, so a writer with few of many matching
//! episodes or facts — or a subject who may view few of a group's episodes — gets all
//! of them ([`methods`](methods#source-selections) tells how the vector method copes
//! with an index that cannot filter).
//!
//! Only the properties a result needs are projected; embeddings never leave the
//! server. Episodes are found by fulltext and by their content embedding (the first
//! [`EPISODE_EMBEDDING_CHARS`](crate::graph::store::EPISODE_EMBEDDING_CHARS)
//! characters, embedded in the ingest's one embedding request): without a language
//! model nothing else carries their meaning, and with one a question phrased unlike
//! the extracted facts still reaches the episode it came from.
//!
//! A query without a searchable word skips fulltext; a blank query (and no query
//! vector) skips fulltext and vector, so only a breadth-first walk from explicit
//! origins can return anything.
//!
//! ```no_run
//! # async fn run(db: gralkor::falkordb::FalkorDb, embedder: &dyn gralkor::llm::Embedder) -> gralkor::Result<()> {
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

internal_mod!(config);
internal_mod!(filters);
mod lexical;
internal_mod!(methods);
internal_mod!(rerank);
internal_mod!(results);
mod scope;

use futures_util::future::try_join_all;
use uuid::Uuid;

pub use config::{
    COMBINED_HYBRID_SEARCH_RRF, EDGE_HYBRID_SEARCH_RRF, Methods, RerankerKind, ScopeConfig,
    SearchConfig,
};
pub use filters::{DateFilter, SearchFilters, TimeMode};
pub use results::{CommunityHit, EntityHit, EpisodeHit, FactHit, SearchResults};
internal_use!(config::{MAX_BFS_DEPTH, MAX_SEARCH_LIMIT});
testing_use!(config::{
    COMBINED_HYBRID_SEARCH_CROSS_ENCODER, COMBINED_HYBRID_SEARCH_MMR,
    COMMUNITY_HYBRID_SEARCH_CROSS_ENCODER, COMMUNITY_HYBRID_SEARCH_MMR,
    COMMUNITY_HYBRID_SEARCH_RRF, EDGE_HYBRID_SEARCH_CROSS_ENCODER,
    EDGE_HYBRID_SEARCH_EPISODE_MENTIONS, EDGE_HYBRID_SEARCH_MMR, EDGE_HYBRID_SEARCH_NODE_DISTANCE,
    NODE_HYBRID_SEARCH_CROSS_ENCODER, NODE_HYBRID_SEARCH_EPISODE_MENTIONS, NODE_HYBRID_SEARCH_MMR,
    NODE_HYBRID_SEARCH_NODE_DISTANCE, NODE_HYBRID_SEARCH_RRF,
});
internal_use!(methods::{MIN_INDEX_K, OVERFETCH, WRITER_WIDEN});
internal_use!(results::EpisodeSource);

use self::methods::Ctx;
use self::scope::Scope;
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
        if let Some(v) = &self.query_vector {
            check_vector(v)?;
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
/// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
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
    let mut found = embed_and_run(db, &[graph], request, embedder, reranker).await?;
    Ok(found.remove(0))
}

/// Runs `request` on each of `graphs`, concurrently, and returns their results in the
/// order of `graphs`. The query is embedded **once** for all of them (when a scope
/// needs it and the request has no [`SearchRequest::query_vector`]); every graph is
/// then searched as [`search`] would with that vector, so each result equals the
/// one-graph search. Any failing graph fails the call. The request and every graph
/// name are checked before anything is sent; no graph makes no call at all.
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
/// use gralkor::graph::search::{self, EDGE_HYBRID_SEARCH_RRF, SearchRequest};
/// use gralkor::llm::doubles::HashEmbedder;
///
/// let embedder = HashEmbedder::new(1024);
/// let req = SearchRequest::new("where does Alice work", EDGE_HYBRID_SEARCH_RRF.limit(5));
/// let found = search::search_many(&db, &["work", "home"], &req, Some(&embedder), None).await?;
/// assert_eq!(found.len(), 2);
/// assert_eq!(embedder.embedded_texts().len(), 1); // one embedding for both graphs
/// # Ok(()) }
/// ```
#[tracing::instrument(skip_all, fields(graphs = graphs.len(), limit = request.config.limit))]
pub async fn search_many(
    db: &FalkorDb,
    graphs: &[&str],
    request: &SearchRequest,
    embedder: Option<&dyn Embedder>,
    reranker: Option<&dyn Reranker>,
) -> Result<Vec<SearchResults>> {
    request.check(embedder.is_some(), reranker.is_some())?;
    for graph in graphs {
        crate::falkordb::physical_graph_name(graph)?;
    }
    if graphs.is_empty() {
        return Ok(Vec::new());
    }
    embed_and_run(db, graphs, request, embedder, reranker).await
}

/// Runs `request` on each of `graphs` (checked, not empty): the query is embedded once
/// (see [`embed_or_degrade`]; the embedder runs off the async threads) while the
/// fulltext postings of every graph are read, and each graph's search goes on as soon
/// as the embedding and its own postings are in — not when every graph's are, so one
/// graph's methods run on the server while another's postings are still being read.
async fn embed_and_run(
    db: &FalkorDb,
    graphs: &[&str],
    request: &SearchRequest,
    embedder: Option<&dyn Embedder>,
    reranker: Option<&dyn Reranker>,
) -> Result<Vec<SearchResults>> {
    let text = search_text(request);
    let targets = lexical_targets(&request.config);
    let now = Timestamp::now();
    // The pool every method keeps without filters over every match (a method that
    // filters every match reads the postings whole itself).
    let need = methods::pool(false, scope::candidates(request.config.limit));
    // The first graph to want the embedding makes it; the others wait for it.
    let embedded: tokio::sync::OnceCell<(Option<Vec<f32>>, Option<String>)> =
        tokio::sync::OnceCell::new();
    let embedding = || embedded.get_or_init(|| embed_or_degrade(request, embedder));
    let q = text.as_deref().filter(|_| !targets.is_empty());
    let mut found = try_join_all(graphs.iter().map(|graph| {
        let targets = &targets;
        let embedding = &embedding;
        async move {
            let ctx = Ctx {
                db,
                graph,
                filters: &request.filters,
                now,
                lexical: None,
            };
            let prefetch = async {
                match q {
                    Some(q) => Some(lexical::prefetch(ctx, targets, q, need).await),
                    None => None,
                }
            };
            let ((vector, _), prefetched) = tokio::join!(embedding(), prefetch);
            run_graph(
                db,
                graph,
                request,
                vector.as_deref(),
                reranker,
                prefetched.as_ref(),
            )
            .await
        }
    }))
    .await?;
    let degraded = embedded.get().and_then(|(_, d)| d.clone());
    for results in &mut found {
        results.degraded.clone_from(&degraded);
    }
    Ok(found)
}

/// [`embed_query`], degrading instead of failing: when the embedder fails (after its
/// own retries) the search goes on without the query vector — fulltext and the
/// breadth-first walk answer, vector methods and MMR are skipped — and the error is
/// returned beside, for [`SearchResults::degraded`], and logged.
async fn embed_or_degrade(
    request: &SearchRequest,
    embedder: Option<&dyn Embedder>,
) -> (Option<Vec<f32>>, Option<String>) {
    match embed_query(request, embedder).await {
        Ok(vector) => (vector, None),
        Err(e) => {
            tracing::warn!(error = %e, "the query could not be embedded; searching by fulltext only");
            (None, Some(format!("the query could not be embedded ({e}); answered from fulltext only")))
        }
    }
}

#[cfg(any(test, feature = "testing"))]
/// Runs `request` on `graph` with a precomputed query embedding: `query_vector`
/// (else the request's own [`SearchRequest::query_vector`]) is used for vector search
/// and MMR, and no embedder is called — the per-graph step of [`search_many`], for
/// callers that embed the query themselves (see [`embed_query`]).
pub async fn search_with_vector(
    db: &FalkorDb,
    graph: &str,
    request: &SearchRequest,
    query_vector: Option<&[f32]>,
    reranker: Option<&dyn Reranker>,
) -> Result<SearchResults> {
    if let Some(v) = query_vector {
        check_vector(v)?;
    }
    request.check(query_vector.is_some(), reranker.is_some())?;
    crate::falkordb::physical_graph_name(graph)?;
    let vector = query_vector.or(request.query_vector.as_deref());
    run_graph(db, graph, request, vector, reranker, None).await
}

/// The query embedding `request` needs: its [`SearchRequest::query_vector`] if given,
/// else one call to `embedder` when a scope uses vector search or MMR and the query is
/// not blank, else `None`.
pub async fn embed_query(
    request: &SearchRequest,
    embedder: Option<&dyn Embedder>,
) -> Result<Option<Vec<f32>>> {
    let blank = request.query.trim().is_empty();
    match (&request.query_vector, embedder) {
        (Some(v), _) => Ok(Some(v.clone())),
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
            Ok(Some(out.remove(0)))
        }
        _ => Ok(None),
    }
}

fn check_vector(v: &[f32]) -> Result<()> {
    if v.is_empty() || v.iter().any(|x| !x.is_finite()) {
        return Err(Error::invalid(
            "query_vector",
            "must be a non-empty list of finite numbers",
        ));
    }
    Ok(())
}

/// The sanitised fulltext query of `request`, if its text has a searchable word.
fn search_text(request: &SearchRequest) -> Option<String> {
    if request.query.trim().is_empty() {
        None
    } else {
        fulltext_query(&request.query, DEFAULT_STOPWORDS)
    }
}

/// The fulltext indices `config`'s scopes read.
fn lexical_targets(config: &SearchConfig) -> Vec<lexical::Target> {
    [
        (config.facts, lexical::FACTS),
        (config.entities, lexical::ENTITIES),
        (config.episodes, lexical::EPISODES),
        (config.communities, lexical::COMMUNITIES),
    ]
    .into_iter()
    .filter(|(scope, _)| scope.is_some_and(|s| s.methods.fulltext))
    .map(|(_, target)| target)
    .collect()
}

/// One graph's search, the request checked and the query embedding at hand.
async fn run_graph(
    db: &FalkorDb,
    graph: &str,
    request: &SearchRequest,
    vector: Option<&[f32]>,
    reranker: Option<&dyn Reranker>,
    prefetched: Option<&lexical::Prefetched>,
) -> Result<SearchResults> {
    let text = search_text(request);
    let s = Scope {
        ctx: Ctx {
            db,
            graph,
            filters: &request.filters,
            now: Timestamp::now(),
            lexical: prefetched,
        },
        request,
        vector,
        text: text.as_deref(),
        reranker,
    };
    let (facts, entities, episodes, communities) = tokio::try_join!(
        s.run::<scope::Facts>(),
        s.run::<scope::Entities>(),
        s.run::<scope::Episodes>(),
        s.run::<scope::Communities>(),
    )?;
    Ok(SearchResults {
        facts,
        entities,
        episodes,
        communities,
        degraded: None,
    })
}

#[cfg(any(test, feature = "testing"))]
/// The current facts most relevant to `query`: [`EDGE_HYBRID_SEARCH_RRF`] with
/// `limit` results — Graphiti's `search()`.
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb, embedder: &dyn gralkor::llm::Embedder) -> gralkor::Result<()> {
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
