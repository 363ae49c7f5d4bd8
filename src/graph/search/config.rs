//! What a search does: per scope, the methods that gather candidates and the reranker
//! that orders them, plus the recipes equivalent to Graphiti's
//! `search_config_recipes.py`, as constants.

use crate::{Error, Result};

pub use crate::vocab::MAX_SEARCH_LIMIT;

/// Deepest breadth-first walk ([`ScopeConfig::bfs_max_depth`]) accepted.
pub const MAX_BFS_DEPTH: u32 = 5;

/// The methods that gather candidates for one scope. Any combination; at least one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Methods {
    /// Fulltext (BM25) through the scope's fulltext index; the query text goes
    /// through `fulltext_query`.
    pub fulltext: bool,
    /// Nearest neighbours of the query's embedding through the scope's HNSW vector
    /// index, cut at [`ScopeConfig::min_similarity`]. Episodes are found by their
    /// content embedding (written when the engine has an embedder).
    pub vector: bool,
    /// A breadth-first walk over `RELATES_TO` and `MENTIONS` from origin nodes (the
    /// request's, else the other methods' hits) up to [`ScopeConfig::bfs_max_depth`]
    /// hops. Facts and entities only.
    pub bfs: bool,
}

impl Methods {
    /// Fulltext only.
    pub const FULLTEXT: Methods = Methods {
        fulltext: true,
        vector: false,
        bfs: false,
    };
    /// Vector only.
    pub const VECTOR: Methods = Methods {
        fulltext: false,
        vector: true,
        bfs: false,
    };
    /// Fulltext and vector: hybrid search.
    pub const HYBRID: Methods = Methods {
        fulltext: true,
        vector: true,
        bfs: false,
    };
    /// Fulltext, vector and breadth-first.
    pub const HYBRID_BFS: Methods = Methods {
        fulltext: true,
        vector: true,
        bfs: true,
    };
    /// Breadth-first only.
    pub const BFS: Methods = Methods {
        fulltext: false,
        vector: false,
        bfs: true,
    };
}

/// How one scope's candidates are ordered. Every reranker's score is "higher is
/// better"; see `rerank` for the exact formulas.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RerankerKind {
    /// Reciprocal rank fusion of the methods' lists: Σ w / (rank + 1), rank from 0,
    /// `w` the list's weight ([`ScopeConfig::fulltext_weight`] for fulltext, else 1).
    Rrf,
    /// Maximal marginal relevance (greedy) with this λ in `[0, 1]`: 1 is pure
    /// relevance, 0 pure diversity. Needs the query embedding.
    Mmr {
        /// Weight of relevance against diversity.
        lambda: f64,
    },
    /// RRF, then by hop distance from the request's center node
    /// ([`SearchRequest::center`](super::SearchRequest::center)); facts and entities only.
    NodeDistance,
    /// RRF, then by how often the candidate is mentioned: entities by `MENTIONS`
    /// links, facts by supporting episodes. Facts and entities only.
    EpisodeMentions,
    /// RRF, then the cross-encoder ([`crate::llm::Reranker`]) over the best 2 × limit
    /// candidates' texts.
    CrossEncoder,
}

/// The configuration of one scope (facts, entities, episodes or communities).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScopeConfig {
    /// The methods that gather candidates.
    pub methods: Methods,
    /// The reranker that orders them.
    pub reranker: RerankerKind,
    /// Vector hits below this cosine similarity (`1 − distance`, in `[-1, 1]`) are
    /// dropped. Graphiti's default 0.6 on its `(1 + cos) / 2` scale is cos 0.2.
    pub min_similarity: f64,
    /// Hops of the breadth-first walk, `1..=``MAX_BFS_DEPTH`; also the farthest
    /// distance [`RerankerKind::NodeDistance`] measures.
    pub bfs_max_depth: u32,
    /// The weight of the fulltext list in the reciprocal rank fusion that every
    /// reranker starts from: a fulltext hit at rank `r` (from 0) adds
    /// `fulltext_weight / (r + 1)`, a vector or breadth-first hit `1 / (r + 1)`.
    /// Greater than 0, at most 10; default 1 (Graphiti's unweighted RRF). Only the
    /// order of fused lists changes: a list fused with nothing keeps its own scores.
    pub fulltext_weight: f64,
}

impl ScopeConfig {
    /// Default cosine similarity cut-off of vector hits (Graphiti's 0.6, converted).
    pub const DEFAULT_MIN_SIMILARITY: f64 = 0.2;
    /// Default breadth-first depth (Graphiti's).
    pub const DEFAULT_BFS_DEPTH: u32 = 3;
    /// Default weight of the fulltext list in the fusion (Graphiti's: unweighted).
    pub const DEFAULT_FULLTEXT_WEIGHT: f64 = 1.0;
    /// The largest [`ScopeConfig::fulltext_weight`] accepted.
    pub const MAX_FULLTEXT_WEIGHT: f64 = 10.0;

    /// `methods` ordered by `reranker`, with the default cut-off and depth.
    pub const fn new(methods: Methods, reranker: RerankerKind) -> ScopeConfig {
        ScopeConfig {
            methods,
            reranker,
            min_similarity: Self::DEFAULT_MIN_SIMILARITY,
            bfs_max_depth: Self::DEFAULT_BFS_DEPTH,
            fulltext_weight: Self::DEFAULT_FULLTEXT_WEIGHT,
        }
    }

    /// The same configuration with another similarity cut-off.
    pub const fn min_similarity(mut self, min: f64) -> ScopeConfig {
        self.min_similarity = min;
        self
    }

    /// The same configuration with another breadth-first depth.
    pub const fn bfs_max_depth(mut self, depth: u32) -> ScopeConfig {
        self.bfs_max_depth = depth;
        self
    }

    /// The same configuration with another fulltext weight in the fusion.
    pub const fn fulltext_weight(mut self, weight: f64) -> ScopeConfig {
        self.fulltext_weight = weight;
        self
    }
}

/// A whole search: which scopes run (a `None` scope is skipped), how many results each
/// returns, and the minimum reranker score a result must reach.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchConfig {
    /// Facts (`RELATES_TO`).
    pub facts: Option<ScopeConfig>,
    /// Entities.
    pub entities: Option<ScopeConfig>,
    /// Episodes (fulltext, and vector over their content embeddings).
    pub episodes: Option<ScopeConfig>,
    /// Communities.
    pub communities: Option<ScopeConfig>,
    /// Results per scope, `1..=``MAX_SEARCH_LIMIT`.
    pub limit: usize,
    /// Results whose final score is below this are dropped. Every reranker's scores
    /// are non-negative except MMR's, which is negative for a candidate more redundant
    /// than relevant: the default 0 drops those (as Graphiti's `reranker_min_score`).
    pub min_score: f64,
}

impl SearchConfig {
    /// The same configuration returning `limit` results per scope.
    pub const fn limit(mut self, limit: usize) -> SearchConfig {
        self.limit = limit;
        self
    }

    /// The same configuration with a minimum final score.
    pub const fn min_score(mut self, min: f64) -> SearchConfig {
        self.min_score = min;
        self
    }

    /// Checks the configuration; errors name the field and the rule.
    pub(crate) fn check(&self) -> Result<()> {
        if !(1..=MAX_SEARCH_LIMIT).contains(&self.limit) {
            return Err(Error::invalid(
                "config.limit",
                format!(
                    "must be between 1 and {MAX_SEARCH_LIMIT} (got {})",
                    self.limit
                ),
            ));
        }
        if !self.min_score.is_finite() {
            return Err(Error::invalid(
                "config.min_score",
                "must be a finite number",
            ));
        }
        for (name, scope) in [
            ("facts", self.facts),
            ("entities", self.entities),
            ("episodes", self.episodes),
            ("communities", self.communities),
        ] {
            if let Some(s) = scope {
                check_scope(name, &s)?;
            }
        }
        Ok(())
    }

    /// Whether any scope needs the query's embedding.
    pub(crate) fn needs_embedding(&self) -> bool {
        [self.facts, self.entities, self.episodes, self.communities]
            .into_iter()
            .flatten()
            .any(|s| s.methods.vector || matches!(s.reranker, RerankerKind::Mmr { .. }))
    }

    /// Whether any scope uses the cross-encoder.
    pub(crate) fn needs_cross_encoder(&self) -> bool {
        [self.facts, self.entities, self.episodes, self.communities]
            .into_iter()
            .flatten()
            .any(|s| s.reranker == RerankerKind::CrossEncoder)
    }

    /// Whether any scope reranks by distance from a center node.
    pub(crate) fn needs_center(&self) -> bool {
        [self.facts, self.entities]
            .into_iter()
            .flatten()
            .any(|s| s.reranker == RerankerKind::NodeDistance)
    }
}

fn check_scope(name: &str, s: &ScopeConfig) -> Result<()> {
    let field = |f: &str| format!("config.{name}.{f}");
    let m = s.methods;
    if !(m.fulltext || m.vector || m.bfs) {
        return Err(Error::invalid(
            field("methods"),
            "must name at least one method",
        ));
    }
    let graph_scope = matches!(name, "facts" | "entities");
    if m.bfs && !graph_scope {
        return Err(Error::invalid(
            field("methods"),
            "must not include bfs: only facts and entities are reached by a walk",
        ));
    }
    match s.reranker {
        RerankerKind::Mmr { lambda } if !(0.0..=1.0).contains(&lambda) => {
            return Err(Error::invalid(
                field("reranker"),
                "must have an MMR lambda between 0 and 1",
            ));
        }
        RerankerKind::NodeDistance | RerankerKind::EpisodeMentions if !graph_scope => {
            return Err(Error::invalid(
                field("reranker"),
                "must be rrf, mmr or cross-encoder: node distance and episode mentions \
                 apply to facts and entities only",
            ));
        }
        _ => {}
    }
    if !(-1.0..=1.0).contains(&s.min_similarity) {
        return Err(Error::invalid(
            field("min_similarity"),
            "must be a cosine similarity between -1 and 1",
        ));
    }
    if !(s.fulltext_weight > 0.0 && s.fulltext_weight <= ScopeConfig::MAX_FULLTEXT_WEIGHT) {
        return Err(Error::invalid(
            field("fulltext_weight"),
            format!(
                "must be a number greater than 0 and at most {}",
                ScopeConfig::MAX_FULLTEXT_WEIGHT
            ),
        ));
    }
    if !(1..=MAX_BFS_DEPTH).contains(&s.bfs_max_depth) {
        return Err(Error::invalid(
            field("bfs_max_depth"),
            format!("must be between 1 and {MAX_BFS_DEPTH}"),
        ));
    }
    Ok(())
}

const fn scope(methods: Methods, reranker: RerankerKind) -> Option<ScopeConfig> {
    Some(ScopeConfig::new(methods, reranker))
}

const fn only_facts(reranker: RerankerKind, methods: Methods) -> SearchConfig {
    SearchConfig {
        facts: scope(methods, reranker),
        entities: None,
        episodes: None,
        communities: None,
        limit: 10,
        min_score: 0.0,
    }
}

#[cfg(any(test, feature = "testing"))]
const fn only_entities(reranker: RerankerKind, methods: Methods) -> SearchConfig {
    SearchConfig {
        facts: None,
        entities: scope(methods, reranker),
        episodes: None,
        communities: None,
        limit: 10,
        min_score: 0.0,
    }
}

#[cfg(any(test, feature = "testing"))]
const fn only_communities(reranker: RerankerKind, limit: usize) -> SearchConfig {
    SearchConfig {
        facts: None,
        entities: None,
        episodes: None,
        communities: scope(Methods::HYBRID, reranker),
        limit,
        min_score: 0.0,
    }
}

#[cfg(any(test, feature = "testing"))]
const MMR: RerankerKind = RerankerKind::Mmr { lambda: 0.5 };

/// Facts: fulltext + vector, fused with RRF. Graphiti's default search.
pub const EDGE_HYBRID_SEARCH_RRF: SearchConfig = only_facts(RerankerKind::Rrf, Methods::HYBRID);
#[cfg(any(test, feature = "testing"))]
/// Facts: fulltext + vector, MMR (λ 0.5).
pub const EDGE_HYBRID_SEARCH_MMR: SearchConfig = only_facts(MMR, Methods::HYBRID);
#[cfg(any(test, feature = "testing"))]
/// Facts: fulltext + vector, ordered by distance from the center node.
pub const EDGE_HYBRID_SEARCH_NODE_DISTANCE: SearchConfig =
    only_facts(RerankerKind::NodeDistance, Methods::HYBRID);
#[cfg(any(test, feature = "testing"))]
/// Facts: fulltext + vector, ordered by supporting episodes.
pub const EDGE_HYBRID_SEARCH_EPISODE_MENTIONS: SearchConfig =
    only_facts(RerankerKind::EpisodeMentions, Methods::HYBRID);
#[cfg(any(test, feature = "testing"))]
/// Facts: fulltext + vector + breadth-first, ordered by the cross-encoder.
pub const EDGE_HYBRID_SEARCH_CROSS_ENCODER: SearchConfig =
    only_facts(RerankerKind::CrossEncoder, Methods::HYBRID_BFS);

#[cfg(any(test, feature = "testing"))]
/// Entities: fulltext + vector, RRF.
pub const NODE_HYBRID_SEARCH_RRF: SearchConfig = only_entities(RerankerKind::Rrf, Methods::HYBRID);
#[cfg(any(test, feature = "testing"))]
/// Entities: fulltext + vector, MMR (λ 0.5).
pub const NODE_HYBRID_SEARCH_MMR: SearchConfig = only_entities(MMR, Methods::HYBRID);
#[cfg(any(test, feature = "testing"))]
/// Entities: fulltext + vector, ordered by distance from the center node.
pub const NODE_HYBRID_SEARCH_NODE_DISTANCE: SearchConfig =
    only_entities(RerankerKind::NodeDistance, Methods::HYBRID);
#[cfg(any(test, feature = "testing"))]
/// Entities: fulltext + vector, ordered by `MENTIONS` links.
pub const NODE_HYBRID_SEARCH_EPISODE_MENTIONS: SearchConfig =
    only_entities(RerankerKind::EpisodeMentions, Methods::HYBRID);
#[cfg(any(test, feature = "testing"))]
/// Entities: fulltext + vector + breadth-first, ordered by the cross-encoder.
pub const NODE_HYBRID_SEARCH_CROSS_ENCODER: SearchConfig =
    only_entities(RerankerKind::CrossEncoder, Methods::HYBRID_BFS);

#[cfg(any(test, feature = "testing"))]
/// Communities: fulltext + vector, RRF.
pub const COMMUNITY_HYBRID_SEARCH_RRF: SearchConfig = only_communities(RerankerKind::Rrf, 10);
#[cfg(any(test, feature = "testing"))]
/// Communities: fulltext + vector, MMR (λ 0.5).
pub const COMMUNITY_HYBRID_SEARCH_MMR: SearchConfig = only_communities(MMR, 10);
#[cfg(any(test, feature = "testing"))]
/// Communities: fulltext + vector, cross-encoder, 3 results.
pub const COMMUNITY_HYBRID_SEARCH_CROSS_ENCODER: SearchConfig =
    only_communities(RerankerKind::CrossEncoder, 3);

/// All four scopes with RRF (episodes fulltext only, as Graphiti's recipe).
pub const COMBINED_HYBRID_SEARCH_RRF: SearchConfig = SearchConfig {
    facts: scope(Methods::HYBRID, RerankerKind::Rrf),
    entities: scope(Methods::HYBRID, RerankerKind::Rrf),
    episodes: scope(Methods::FULLTEXT, RerankerKind::Rrf),
    communities: scope(Methods::HYBRID, RerankerKind::Rrf),
    limit: 10,
    min_score: 0.0,
};
#[cfg(any(test, feature = "testing"))]
/// All four scopes with MMR at λ 1 (pure relevance, as Graphiti's); episodes RRF.
pub const COMBINED_HYBRID_SEARCH_MMR: SearchConfig = SearchConfig {
    facts: scope(Methods::HYBRID, RerankerKind::Mmr { lambda: 1.0 }),
    entities: scope(Methods::HYBRID, RerankerKind::Mmr { lambda: 1.0 }),
    episodes: scope(Methods::FULLTEXT, RerankerKind::Rrf),
    communities: scope(Methods::HYBRID, RerankerKind::Mmr { lambda: 1.0 }),
    limit: 10,
    min_score: 0.0,
};
#[cfg(any(test, feature = "testing"))]
/// All four scopes with the cross-encoder; facts and entities add breadth-first.
pub const COMBINED_HYBRID_SEARCH_CROSS_ENCODER: SearchConfig = SearchConfig {
    facts: scope(Methods::HYBRID_BFS, RerankerKind::CrossEncoder),
    entities: scope(Methods::HYBRID_BFS, RerankerKind::CrossEncoder),
    episodes: scope(Methods::FULLTEXT, RerankerKind::CrossEncoder),
    communities: scope(Methods::HYBRID, RerankerKind::CrossEncoder),
    limit: 10,
    min_score: 0.0,
};
