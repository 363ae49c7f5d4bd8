//! The scope runner: the one sequence every scope of a search follows — candidates
//! per method (fulltext and vector concurrently, then the breadth-first walk), fusion,
//! the scope's reranker, the minimum score and the limit — parameterised by a
//! [`ScopeKind`] that says how the scope gathers candidates and what its rerankers
//! need. A new scope is one more `ScopeKind`.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use uuid::Uuid;

use super::config::{RerankerKind, ScopeConfig, SearchConfig};
use super::methods::{self, Ctx, Embedded};
use super::rerank;
use super::results::{CommunityHit, EntityHit, EpisodeHit, FactHit, Hit};
use super::{SEARCH_LABEL, SearchRequest};
use crate::llm::Reranker;
use crate::{Error, Result};

/// One scope: its hits, its configuration, its methods and its rerankers' inputs. A
/// method or input a scope lacks has a default that yields nothing; the configuration
/// check ([`SearchConfig::check`]) refuses the methods and rerankers a scope does not
/// support, so the defaults are never asked for more than that.
pub(crate) trait ScopeKind {
    /// What the scope returns.
    type Hit: Hit + Sync;

    /// The nodes a MMR similarity matrix is computed over, if the scope has
    /// embeddings.
    const EMBEDDED: Option<Embedded> = None;

    /// The scope's configuration in `c`, if the scope runs.
    fn config(c: &SearchConfig) -> Option<ScopeConfig>;

    /// Candidates matching the fulltext query `q`, best first, at most `n`.
    fn fulltext(
        ctx: Ctx<'_>,
        q: &str,
        n: usize,
    ) -> impl Future<Output = Result<Vec<Self::Hit>>> + Send;

    /// Candidates nearest to `v` (similarity ≥ `min_sim`), best first, at most `n`.
    fn vector(
        _ctx: Ctx<'_>,
        _v: &[f32],
        _n: usize,
        _min_sim: f64,
    ) -> impl Future<Output = Result<Vec<Self::Hit>>> + Send {
        async { Ok(Vec::new()) }
    }

    /// Candidates reached by walking from `origins`, nearest first, at most `n`.
    fn bfs(
        _ctx: Ctx<'_>,
        _origins: &[Uuid],
        _depth: u32,
        _n: usize,
    ) -> impl Future<Output = Result<Vec<Self::Hit>>> + Send {
        async { Ok(Vec::new()) }
    }

    /// The graph nodes a hit stands at: where a walk without origins starts from, and
    /// what node distance measures.
    fn nodes(_hit: &Self::Hit) -> Vec<Uuid> {
        Vec::new()
    }

    /// Per hit (by uuid), the count the episode-mentions reranker orders by; `None`
    /// keeps the fused order.
    fn mentions(
        _ctx: Ctx<'_>,
        _hits: &[Self::Hit],
    ) -> impl Future<Output = Result<Option<BTreeMap<Uuid, u64>>>> + Send {
        async { Ok(None) }
    }

    /// The whole RRF search (no walk) in one statement, when the scope has one:
    /// `Some(final hits)`, or `None` to take the per-method path.
    #[allow(clippy::too_many_arguments)]
    fn one_statement(
        _ctx: Ctx<'_>,
        _q: Option<&str>,
        _v: Option<&[f32]>,
        _n: usize,
        _min_sim: f64,
        _min_score: f64,
        _limit: usize,
        _ft_weight: f64,
    ) -> impl Future<Output = Result<Option<Vec<Self::Hit>>>> + Send {
        async { Ok(None) }
    }
}

/// Facts (`RELATES_TO`).
pub(crate) struct Facts;

impl ScopeKind for Facts {
    type Hit = FactHit;
    const EMBEDDED: Option<Embedded> = Some(Embedded::Fact);

    fn config(c: &SearchConfig) -> Option<ScopeConfig> {
        c.facts
    }

    fn fulltext(
        ctx: Ctx<'_>,
        q: &str,
        n: usize,
    ) -> impl Future<Output = Result<Vec<FactHit>>> + Send {
        methods::fact_fulltext(ctx, q, n)
    }

    fn vector(
        ctx: Ctx<'_>,
        v: &[f32],
        n: usize,
        min_sim: f64,
    ) -> impl Future<Output = Result<Vec<FactHit>>> + Send {
        methods::fact_vector(ctx, v, n, min_sim)
    }

    fn bfs(
        ctx: Ctx<'_>,
        origins: &[Uuid],
        depth: u32,
        n: usize,
    ) -> impl Future<Output = Result<Vec<FactHit>>> + Send {
        methods::fact_bfs(ctx, origins, depth, n)
    }

    fn nodes(hit: &FactHit) -> Vec<Uuid> {
        vec![hit.fact.source_uuid, hit.fact.target_uuid]
    }

    fn mentions(
        _ctx: Ctx<'_>,
        hits: &[FactHit],
    ) -> impl Future<Output = Result<Option<BTreeMap<Uuid, u64>>>> + Send {
        // A fact's count is its supporting episodes: no statement needed.
        let counts = hits
            .iter()
            .map(|h| (h.fact.uuid, h.fact.episodes.len() as u64))
            .collect();
        async { Ok(Some(counts)) }
    }

    #[allow(clippy::too_many_arguments)]
    async fn one_statement(
        ctx: Ctx<'_>,
        q: Option<&str>,
        v: Option<&[f32]>,
        n: usize,
        min_sim: f64,
        min_score: f64,
        limit: usize,
        ft_weight: f64,
    ) -> Result<Option<Vec<FactHit>>> {
        // A source selection (writers, episodes) may need the exact fallback of the
        // vector method, which the one statement has no room for: it takes the
        // per-method path.
        if ctx.filters.selects_sources() {
            return Ok(None);
        }
        // `None` when an index is missing, which the per-method path tolerates.
        methods::fact_hybrid_rrf(ctx, q, v, n, min_sim, min_score, limit, ft_weight).await
    }
}

/// Entities (`Entity`).
pub(crate) struct Entities;

impl ScopeKind for Entities {
    type Hit = EntityHit;
    const EMBEDDED: Option<Embedded> = Some(Embedded::Entity);

    fn config(c: &SearchConfig) -> Option<ScopeConfig> {
        c.entities
    }

    fn fulltext(
        ctx: Ctx<'_>,
        q: &str,
        n: usize,
    ) -> impl Future<Output = Result<Vec<EntityHit>>> + Send {
        methods::entity_fulltext(ctx, q, n)
    }

    fn vector(
        ctx: Ctx<'_>,
        v: &[f32],
        n: usize,
        min_sim: f64,
    ) -> impl Future<Output = Result<Vec<EntityHit>>> + Send {
        methods::entity_vector(ctx, v, n, min_sim)
    }

    fn bfs(
        ctx: Ctx<'_>,
        origins: &[Uuid],
        depth: u32,
        n: usize,
    ) -> impl Future<Output = Result<Vec<EntityHit>>> + Send {
        methods::entity_bfs(ctx, origins, depth, n)
    }

    fn nodes(hit: &EntityHit) -> Vec<Uuid> {
        vec![hit.entity.uuid]
    }

    fn mentions(
        ctx: Ctx<'_>,
        hits: &[EntityHit],
    ) -> impl Future<Output = Result<Option<BTreeMap<Uuid, u64>>>> + Send {
        let nodes: Vec<Uuid> = hits.iter().map(|h| h.entity.uuid).collect();
        async move { Ok(Some(methods::mention_counts(ctx, &nodes).await?)) }
    }
}

/// Episodes (`Episodic`): fulltext, and vector over their content embeddings.
pub(crate) struct Episodes;

impl ScopeKind for Episodes {
    type Hit = EpisodeHit;
    const EMBEDDED: Option<Embedded> = Some(Embedded::Episode);

    fn config(c: &SearchConfig) -> Option<ScopeConfig> {
        c.episodes
    }

    fn fulltext(
        ctx: Ctx<'_>,
        q: &str,
        n: usize,
    ) -> impl Future<Output = Result<Vec<EpisodeHit>>> + Send {
        methods::episode_fulltext(ctx, q, n)
    }

    fn vector(
        ctx: Ctx<'_>,
        v: &[f32],
        n: usize,
        min_sim: f64,
    ) -> impl Future<Output = Result<Vec<EpisodeHit>>> + Send {
        methods::episode_vector(ctx, v, n, min_sim)
    }

    #[allow(clippy::too_many_arguments)]
    fn one_statement(
        ctx: Ctx<'_>,
        q: Option<&str>,
        v: Option<&[f32]>,
        n: usize,
        min_sim: f64,
        min_score: f64,
        limit: usize,
        ft_weight: f64,
    ) -> impl Future<Output = Result<Option<Vec<EpisodeHit>>>> + Send {
        // `None` under a source selection or without an index: the per-method path.
        methods::episode_hybrid_rrf(ctx, q, v, n, min_sim, min_score, limit, ft_weight)
    }
}

/// Communities (`Community`): fulltext and vector.
pub(crate) struct Communities;

impl ScopeKind for Communities {
    type Hit = CommunityHit;
    const EMBEDDED: Option<Embedded> = Some(Embedded::Community);

    fn config(c: &SearchConfig) -> Option<ScopeConfig> {
        c.communities
    }

    fn fulltext(
        ctx: Ctx<'_>,
        q: &str,
        n: usize,
    ) -> impl Future<Output = Result<Vec<CommunityHit>>> + Send {
        methods::community_fulltext(ctx, q, n)
    }

    fn vector(
        ctx: Ctx<'_>,
        v: &[f32],
        n: usize,
        min_sim: f64,
    ) -> impl Future<Output = Result<Vec<CommunityHit>>> + Send {
        methods::community_vector(ctx, v, n, min_sim)
    }
}

/// What the scopes of one search share.
pub(crate) struct Scope<'a> {
    pub(crate) ctx: Ctx<'a>,
    pub(crate) request: &'a SearchRequest,
    pub(crate) vector: Option<&'a [f32]>,
    pub(crate) text: Option<&'a str>,
    pub(crate) reranker: Option<&'a dyn Reranker>,
}

/// Candidates per method for a search of `limit` results: twice the limit, as
/// Graphiti.
pub(crate) fn candidates(limit: usize) -> usize {
    2 * limit
}

/// `fut.await` when `run`, else an empty list — for `try_join!`.
async fn maybe<T, F>(run: bool, fut: F) -> Result<Vec<T>>
where
    F: Future<Output = Result<Vec<T>>>,
{
    if run { fut.await } else { Ok(Vec::new()) }
}

impl Scope<'_> {
    fn limit(&self) -> usize {
        self.request.config.limit
    }

    /// Candidates per method ([`candidates`]).
    fn n(&self) -> usize {
        candidates(self.limit())
    }

    /// Runs scope `S` (nothing when the configuration leaves it out).
    pub(crate) async fn run<S: ScopeKind>(&self) -> Result<Vec<S::Hit>> {
        let Some(cfg) = S::config(&self.request.config) else {
            return Ok(Vec::new());
        };
        let (ctx, n, m) = (self.ctx, self.n(), cfg.methods);
        let (min_score, limit) = (self.request.config.min_score, self.limit());
        let text = self.text.filter(|_| m.fulltext);
        let vector = self.vector.filter(|_| m.vector);
        if text.is_none() && vector.is_none() && !m.bfs {
            return Ok(Vec::new());
        }
        if cfg.reranker == RerankerKind::Rrf
            && !m.bfs
            && let Some(hits) =
                S::one_statement(
                    ctx,
                    text,
                    vector,
                    n,
                    cfg.min_similarity,
                    min_score,
                    limit,
                    cfg.fulltext_weight,
                )
                .await?
        {
            return Ok(hits);
        }
        let (ft, vec) = tokio::try_join!(
            maybe(
                text.is_some(),
                S::fulltext(ctx, text.unwrap_or_default(), n)
            ),
            maybe(
                vector.is_some(),
                S::vector(ctx, vector.unwrap_or_default(), n, cfg.min_similarity)
            ),
        )?;
        let mut lists = vec![(ft, cfg.fulltext_weight), (vec, 1.0)];
        if m.bfs {
            let origins = if self.request.bfs_origins.is_empty() {
                let set: BTreeSet<Uuid> =
                    lists.iter().flat_map(|(l, _)| l).flat_map(S::nodes).collect();
                set.into_iter().collect()
            } else {
                self.request.bfs_origins.clone()
            };
            lists.push((S::bfs(ctx, &origins, cfg.bfs_max_depth, n).await?, 1.0));
        }
        let fused = rerank::rrf(lists);
        let ordered = match cfg.reranker {
            RerankerKind::Rrf => fused,
            RerankerKind::Mmr { lambda } => match S::EMBEDDED {
                Some(kind) => self.mmr(fused, kind, lambda).await?,
                None => fused,
            },
            RerankerKind::NodeDistance => {
                let center = self.request.center.expect("checked");
                let nodes: BTreeSet<Uuid> = fused.iter().flat_map(S::nodes).collect();
                let nodes: Vec<Uuid> = nodes.into_iter().collect();
                let d = methods::distances(ctx, center, &nodes, cfg.bfs_max_depth).await?;
                rerank::by_distance(fused, |h| {
                    S::nodes(h).iter().filter_map(|u| d.get(u).copied()).min()
                })
            }
            RerankerKind::EpisodeMentions => match S::mentions(ctx, &fused).await? {
                Some(counts) => rerank::by_count(fused, |h| {
                    counts.get(&h.uuid()).copied().unwrap_or_default()
                }),
                None => fused,
            },
            RerankerKind::CrossEncoder => self.cross_encode(fused).await?,
        };
        Ok(rerank::finish(ordered, min_score, limit))
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
