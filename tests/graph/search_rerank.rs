//! The rerankers on a real FalkorDB, against hand-computed expected orders. Mirrors
//! `test-trees/graph-search.md` (rerankers).

use crate::common;
use crate::graph_search_support;

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use common::TestGraph;
use common::graph::t;
use gralkor::graph::search::{
    self, EDGE_HYBRID_SEARCH_RRF, Methods, RerankerKind, ScopeConfig, SearchConfig, SearchRequest,
    SearchResults,
};
use gralkor::graph::{self, EntityEdge, EntityNode};
use gralkor::llm::Reranker;
use gralkor::llm::doubles::WordOverlapReranker;
use graph_search_support::{World, world};
use uuid::Uuid;

fn facts_with(methods: Methods, reranker: RerankerKind) -> SearchConfig {
    SearchConfig {
        facts: Some(ScopeConfig::new(methods, reranker).min_similarity(-1.0)),
        ..EDGE_HYBRID_SEARCH_RRF
    }
}

fn entities_with(methods: Methods, reranker: RerankerKind) -> SearchConfig {
    SearchConfig {
        facts: None,
        entities: Some(ScopeConfig::new(methods, reranker).min_similarity(-1.0)),
        ..EDGE_HYBRID_SEARCH_RRF
    }
}

async fn run(w: &World, req: &SearchRequest) -> SearchResults {
    search::search(
        &w.g.db,
        &w.g.name,
        req,
        Some(&w.emb),
        Some(&WordOverlapReranker),
    )
    .await
    .unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// A graph of 3-d facts and entities whose texts and vectors are chosen by hand.
async fn hand_graph(tag: &str) -> (TestGraph, HashMap<&'static str, Uuid>) {
    let g = TestGraph::new(tag).await;
    graph::build_indices(&g.db, &g.name, 3).await.unwrap();
    let mut ids = HashMap::new();
    let mut nodes = Vec::new();
    for n in ["C", "A", "B", "D", "E", "F"] {
        let mut e = EntityNode::new(format!("Node {n}"));
        e.summary = format!("node {n} of the chain");
        e.name_embedding = Some(vec![1.0, 0.0, 0.0]);
        e.created_at = t("2024-01-01T00:00:00Z");
        ids.insert(n, e.uuid);
        nodes.push(e);
    }
    graph::save_entities(&g.db, &g.name, &nodes).await.unwrap();
    // Chain C - A - B - D, and E - F apart. Fulltext on "link" favours the far facts
    // (more occurrences), so the RRF seed is roughly the reverse of the distance order.
    // Vectors for MMR: see `mmr_prefers_a_different_fact_to_a_near_duplicate`.
    let facts = [
        ("c_a", "C", "A", "the link one", [0.1, 0.0, 0.995]),
        ("a_b", "A", "B", "link link two", [1.0, 0.0, 0.0]),
        (
            "b_d",
            "B",
            "D",
            "link link link three",
            [0.995, 0.0998, 0.0],
        ),
        ("e_f", "E", "F", "link link link link four", [0.0, 1.0, 0.0]),
    ];
    let edges: Vec<EntityEdge> = facts
        .iter()
        .map(|(k, s, tt, text, v)| {
            let mut f = EntityEdge::new(ids[s], ids[tt], "LINKS", *text);
            f.fact_embedding = Some(v.to_vec());
            f.created_at = t("2024-01-01T00:00:00Z");
            ids.insert(k, f.uuid);
            f
        })
        .collect();
    graph::save_facts(&g.db, &g.name, &edges).await.unwrap();
    (g, ids)
}

fn key_of(ids: &HashMap<&'static str, Uuid>, u: Uuid) -> &'static str {
    ids.iter().find(|(_, v)| **v == u).map(|(k, _)| *k).unwrap()
}

mod rrf {
    use super::*;

    /// Runs `req` with fulltext only, vector only and both (the hybrid path fuses and
    /// loads in one statement), and checks the hybrid result against the fusion of
    /// the two single-method lists computed here: Σ w/(rank+1) (`w` the scope's
    /// fulltext weight for the fulltext list, 1 for the vector list), ties by first
    /// appearance rank by rank with fulltext first; when only one method found
    /// anything, its own order and scores; then the minimum score and the limit.
    /// Returns the hybrid's fact uuids and the lengths of the two method lists.
    async fn assert_hybrid_is_the_fusion(
        w: &World,
        req: SearchRequest,
    ) -> (Vec<Uuid>, usize, usize) {
        let with = |m: Methods| {
            let mut r = req.clone();
            r.config.facts = Some(
                ScopeConfig::new(m, RerankerKind::Rrf)
                    .min_similarity(req.config.facts.unwrap().min_similarity)
                    .fulltext_weight(req.config.facts.unwrap().fulltext_weight),
            );
            r
        };
        let wide = |m: Methods| {
            // The single-method lists before the minimum score and the limit cut
            // them: the same candidates (2 × limit) the hybrid fuses.
            let mut r = with(m);
            r.config.min_score = f64::MIN;
            r.config.limit *= 2;
            r
        };
        let ft = run(w, &wide(Methods::FULLTEXT)).await.facts;
        let vec = run(w, &wide(Methods::VECTOR)).await.facts;
        let both = run(w, &with(Methods::HYBRID)).await.facts;
        let mut expected: Vec<(Uuid, f64, usize)> = Vec::new();
        if ft.is_empty() || vec.is_empty() {
            for (i, h) in ft.iter().chain(&vec).enumerate() {
                expected.push((h.fact.uuid, h.score, i));
            }
        } else {
            for rank in 0..ft.len().max(vec.len()) {
                let weight = req.config.facts.unwrap().fulltext_weight;
                for (list, weight) in [(&ft, weight), (&vec, 1.0)] {
                    if let Some(h) = list.get(rank) {
                        let add = weight / (rank as f64 + 1.0);
                        match expected.iter_mut().find(|e| e.0 == h.fact.uuid) {
                            Some(e) => e.1 += add,
                            None => {
                                let order = expected.len();
                                expected.push((h.fact.uuid, add, order))
                            }
                        }
                    }
                }
            }
        }
        expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
        expected.retain(|e| e.1 >= req.config.min_score);
        expected.truncate(req.config.limit);
        let got: Vec<(Uuid, f64)> = both.iter().map(|h| (h.fact.uuid, h.score)).collect();
        assert_eq!(got.len(), expected.len(), "{got:?} vs {expected:?}");
        for (g, e) in got.iter().zip(&expected) {
            assert_eq!(g.0, e.0, "{got:?} vs {expected:?}");
            assert!(close(g.1, e.1), "{got:?} vs {expected:?}");
        }
        // Whole facts with their sources, as the single-method paths return them.
        for h in &both {
            let same = ft
                .iter()
                .chain(&vec)
                .find(|x| x.fact.uuid == h.fact.uuid)
                .unwrap();
            assert_eq!(h.fact, same.fact);
            assert_eq!(h.sources, same.sources);
        }
        (got.into_iter().map(|g| g.0).collect(), ft.len(), vec.len())
    }

    #[tokio::test]
    async fn hybrid_order_is_the_reciprocal_rank_fusion_of_the_method_lists() {
        let w = world("gsrr-rrf").await;
        let cfg = facts_with(Methods::HYBRID, RerankerKind::Rrf);
        let (got, ft, vec) = assert_hybrid_is_the_fusion(
            &w,
            SearchRequest::new("Alice works in Paris", cfg).history(),
        )
        .await;
        assert!(got.len() >= 3 && ft >= 2 && vec >= 2, "{got:?}");
    }

    #[tokio::test]
    async fn the_fusion_holds_under_filters_cut_offs_and_a_missing_method() {
        let w = world("gsrr-rrf2").await;
        let cfg = facts_with(Methods::HYBRID, RerankerKind::Rrf);
        let q = "Alice works in Paris";
        // Current facts only (the default), and as of a date.
        assert_hybrid_is_the_fusion(&w, SearchRequest::new(q, cfg)).await;
        assert_hybrid_is_the_fusion(
            &w,
            SearchRequest::new(q, cfg).as_of(t("2024-06-01T00:00:00Z")),
        )
        .await;
        // A small limit and a minimum score cut the fused list.
        let small = SearchConfig { limit: 2, ..cfg };
        let (got, ..) =
            assert_hybrid_is_the_fusion(&w, SearchRequest::new(q, small).history()).await;
        assert_eq!(got.len(), 2);
        let strict = SearchConfig {
            min_score: 0.6,
            ..cfg
        };
        let (got, ft, _) =
            assert_hybrid_is_the_fusion(&w, SearchRequest::new(q, strict).history()).await;
        assert!(!got.is_empty() && got.len() < ft, "{got:?}");
        // Words found nowhere: the vector list alone, with its cosine scores.
        let (got, ft, vec) = assert_hybrid_is_the_fusion(
            &w,
            SearchRequest::new("zyxwv qwerty", cfg)
                .query_vector(w.emb.vector("Alice works in Paris"))
                .history(),
        )
        .await;
        assert!(!got.is_empty() && ft == 0 && vec > 0);
        // A cut-off no vector passes: the fulltext list alone, with its scores.
        let only_text = SearchConfig {
            facts: Some(ScopeConfig::new(Methods::HYBRID, RerankerKind::Rrf).min_similarity(1.0)),
            ..cfg
        };
        let (got, ft, vec) =
            assert_hybrid_is_the_fusion(&w, SearchRequest::new(q, only_text).history()).await;
        assert!(!got.is_empty() && ft > 0 && vec == 0);
    }

    #[tokio::test]
    async fn a_weighted_fulltext_list_is_fused_with_its_weight() {
        let w = world("gsrr-rrfw").await;
        let q = "Alice works in Paris";
        let weighted = |weight: f64| SearchConfig {
            facts: Some(
                ScopeConfig::new(Methods::HYBRID, RerankerKind::Rrf)
                    .min_similarity(-1.0)
                    .fulltext_weight(weight),
            ),
            ..facts_with(Methods::HYBRID, RerankerKind::Rrf)
        };
        let mut orders = Vec::new();
        for weight in [0.25, 0.75, 1.0, 4.0] {
            let (got, ft, vec) =
                assert_hybrid_is_the_fusion(&w, SearchRequest::new(q, weighted(weight)).history())
                    .await;
            assert!(got.len() >= 3 && ft >= 2 && vec >= 2, "{got:?}");
            orders.push(got);
        }
        // The weight moves the order: a fulltext-heavy and a vector-heavy fusion differ.
        assert_ne!(orders[0], orders[3]);
        // Out of range: refused naming the field, before any call.
        for bad in [0.0, -1.0, 10.5, f64::NAN] {
            let err = search::search(
                &w.g.db,
                &w.g.name,
                &SearchRequest::new(q, weighted(bad)),
                Some(&w.emb),
                None,
            )
            .await
            .unwrap_err();
            assert!(
                err.to_string().contains("config.facts.fulltext_weight"),
                "{err}"
            );
        }
    }
}

mod mmr {
    use super::*;

    #[tokio::test]
    async fn mmr_prefers_a_different_fact_to_a_near_duplicate() {
        let (g, ids) = hand_graph("gsrr-mmr").await;
        // q = (1, 0, 1)/√2. Similarities to q: c_a 0.774, a_b 0.707, b_d 0.704, e_f 0.
        // a_b and b_d are near-duplicates (0.995); c_a is close to neither.
        // λ = 0.5, greedy: c_a (0.387); then a_b 0.354 − 0.5·0.100 = 0.304 beats
        // b_d 0.352 − 0.5·0.0995 = 0.302; then e_f 0 − 0 = 0 beats b_d 0.352 − 0.5·0.995 < 0.
        let q = vec![1.0, 0.0, 1.0];
        let order = |r: &SearchResults| -> Vec<&'static str> {
            r.facts.iter().map(|h| key_of(&ids, h.fact.uuid)).collect()
        };
        let run = |lambda: f64, min_score: f64| {
            let req = SearchRequest::new(
                "zzz",
                facts_with(Methods::VECTOR, RerankerKind::Mmr { lambda }).min_score(min_score),
            )
            .query_vector(q.clone());
            let g = &g;
            async move {
                search::search(&g.db, &g.name, &req, None, None)
                    .await
                    .unwrap()
            }
        };
        let r = run(0.5, -1.0).await;
        assert_eq!(order(&r), ["c_a", "a_b", "e_f", "b_d"]);
        assert!(r.facts[3].score < 0.0);
        // The default minimum score (0) drops what is more redundant than relevant.
        let r = run(0.5, 0.0).await;
        assert_eq!(order(&r), ["c_a", "a_b", "e_f"]);
        let sq = |v: [f64; 3]| {
            let n = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
            (v[0] + v[2]) / (n * 2f64.sqrt())
        };
        assert!((r.facts[0].score - 0.5 * sq([0.1, 0.0, 0.995])).abs() < 1e-4);
        // λ = 1 is pure relevance.
        let r = run(1.0, 0.0).await;
        assert_eq!(order(&r), ["c_a", "a_b", "b_d", "e_f"]);
    }
}

mod node_distance {
    use super::*;

    #[tokio::test]
    async fn facts_are_ordered_by_hops_from_the_center() {
        let (g, ids) = hand_graph("gsrr-dist").await;
        let req = SearchRequest::new(
            "link",
            facts_with(Methods::FULLTEXT, RerankerKind::NodeDistance),
        )
        .center(ids["C"]);
        let r = search::search(&g.db, &g.name, &req, None, None)
            .await
            .unwrap();
        let got: Vec<(&str, f64)> = r
            .facts
            .iter()
            .map(|h| (key_of(&ids, h.fact.uuid), h.score))
            .collect();
        // Touching C: 0 hops; A: 1; B: 2; E-F unreachable.
        let expected = [("c_a", 1.0), ("a_b", 0.5), ("b_d", 1.0 / 3.0), ("e_f", 0.0)];
        assert_eq!(got.len(), 4);
        for (g, e) in got.iter().zip(expected) {
            assert_eq!(g.0, e.0, "{got:?}");
            assert!(close(g.1, e.1), "{got:?}");
        }
        // With a depth of 1, B is out of reach.
        let cfg = SearchConfig {
            facts: Some(
                ScopeConfig::new(Methods::FULLTEXT, RerankerKind::NodeDistance).bfs_max_depth(1),
            ),
            ..EDGE_HYBRID_SEARCH_RRF
        };
        let req = SearchRequest::new("link", cfg).center(ids["C"]);
        let r = search::search(&g.db, &g.name, &req, None, None)
            .await
            .unwrap();
        let scores: Vec<f64> = r.facts.iter().map(|h| h.score).collect();
        assert_eq!(key_of(&ids, r.facts[0].fact.uuid), "c_a");
        assert_eq!(key_of(&ids, r.facts[1].fact.uuid), "a_b");
        assert!(close(scores[2], 0.0) && close(scores[3], 0.0), "{scores:?}");
    }

    #[tokio::test]
    async fn entities_are_ordered_by_hops_from_the_center() {
        let (g, ids) = hand_graph("gsrr-dist-n").await;
        let req = SearchRequest::new(
            "node chain",
            entities_with(Methods::FULLTEXT, RerankerKind::NodeDistance),
        )
        .center(ids["C"]);
        let r = search::search(&g.db, &g.name, &req, None, None)
            .await
            .unwrap();
        let got: Vec<(&str, f64)> = r
            .entities
            .iter()
            .map(|h| (key_of(&ids, h.entity.uuid), h.score))
            .collect();
        assert_eq!(got.len(), 6, "{got:?}");
        for (g, e) in got
            .iter()
            .zip([("C", 1.0), ("A", 0.5), ("B", 1.0 / 3.0), ("D", 0.25)])
        {
            assert_eq!(g.0, e.0, "{got:?}");
            assert!(close(g.1, e.1), "{got:?}");
        }
        let mut rest: Vec<&str> = got[4..].iter().map(|x| x.0).collect();
        rest.sort();
        assert_eq!(rest, ["E", "F"]);
        assert!(got[4..].iter().all(|x| close(x.1, 0.0)));
    }
}

mod episode_mentions {
    use super::*;

    #[tokio::test]
    async fn entities_by_mentions_and_facts_by_supporting_episodes() {
        let w = world("gsrr-mentions").await;
        let r = run(
            &w,
            &SearchRequest::new(
                "Alice Bob Carol Acme Globex Paris",
                entities_with(Methods::FULLTEXT, RerankerKind::EpisodeMentions),
            ),
        )
        .await;
        let got: Vec<(&str, f64)> = r
            .entities
            .iter()
            .map(|h| (w.entity_name(h.entity.uuid), h.score))
            .collect();
        assert_eq!(got.len(), 6, "{got:?}");
        let mut top: Vec<&str> = got[..3].iter().map(|x| x.0).collect();
        top.sort();
        assert_eq!(top, ["Acme", "Alice", "Paris"], "{got:?}");
        assert!(got[..3].iter().all(|x| x.1 == 2.0));
        let mut mid: Vec<&str> = got[3..5].iter().map(|x| x.0).collect();
        mid.sort();
        assert_eq!(mid, ["Bob", "Globex"]);
        assert!(got[3..5].iter().all(|x| x.1 == 1.0));
        assert_eq!(got[5], ("Carol", 0.0));

        let r = run(
            &w,
            &SearchRequest::new(
                "Alice Bob Carol Globex Paris",
                facts_with(Methods::FULLTEXT, RerankerKind::EpisodeMentions),
            ),
        )
        .await;
        let got: Vec<(&str, f64)> = r
            .facts
            .iter()
            .map(|h| (w.fact_key(h.fact.uuid), h.score))
            .collect();
        let mut top: Vec<&str> = got[..2].iter().map(|x| x.0).collect();
        top.sort();
        assert_eq!(top, ["knows", "paris"], "{got:?}");
        assert_eq!(&got[2..], [("globex", 1.0), ("plan", 0.0)]);
    }
}

/// A reranker that records what it was asked.
#[derive(Debug, Default)]
struct Recording(Mutex<Vec<Vec<String>>>);

#[async_trait]
impl Reranker for Recording {
    async fn rerank(
        &self,
        query: &str,
        passages: &[String],
        label: &str,
    ) -> gralkor::Result<Vec<f64>> {
        self.0.lock().unwrap().push(passages.to_vec());
        WordOverlapReranker.rerank(query, passages, label).await
    }
    fn provider(&self) -> &str {
        "recording"
    }
}

mod cross_encoder {
    use super::*;

    #[tokio::test]
    async fn the_cross_encoder_orders_by_its_scores_and_min_score_cuts() {
        let w = world("gsrr-ce").await;
        let rec = Recording::default();
        let req = SearchRequest::new(
            "Alice Globex manager",
            search::EDGE_HYBRID_SEARCH_CROSS_ENCODER,
        );
        let r = search::search(&w.g.db, &w.g.name, &req, Some(&w.emb), Some(&rec))
            .await
            .unwrap();
        // Word overlap with {alice, globex, manager}.
        let got: Vec<(&str, f64)> = r
            .facts
            .iter()
            .map(|h| (w.fact_key(h.fact.uuid), h.score))
            .collect();
        assert_eq!(got[0], ("globex", 1.0));
        assert_eq!(got[1].0, "plan");
        assert!(close(got[1].1, 2.0 / 3.0));
        assert!(got[2..].iter().all(|x| close(x.1, 1.0 / 3.0)), "{got:?}");
        assert_eq!(rec.0.lock().unwrap().len(), 1, "one call per scope");

        // A minimum score drops the rest.
        let req = SearchRequest::new(
            "Alice Globex manager",
            search::EDGE_HYBRID_SEARCH_CROSS_ENCODER.min_score(0.5),
        );
        let r = search::search(&w.g.db, &w.g.name, &req, Some(&w.emb), Some(&rec))
            .await
            .unwrap();
        let keys: Vec<&str> = r.facts.iter().map(|h| w.fact_key(h.fact.uuid)).collect();
        assert_eq!(keys, ["globex", "plan"]);

        // Only the best 2 × limit candidates are sent, each text once.
        let rec = Recording::default();
        let req = SearchRequest::new(
            "Alice Globex manager",
            search::EDGE_HYBRID_SEARCH_CROSS_ENCODER.limit(1),
        );
        let r = search::search(&w.g.db, &w.g.name, &req, Some(&w.emb), Some(&rec))
            .await
            .unwrap();
        assert_eq!(r.facts.len(), 1);
        let calls = rec.0.lock().unwrap();
        assert!(calls[0].len() <= 2, "{calls:?}");
    }

    #[tokio::test]
    async fn every_scope_of_the_combined_recipe_is_cross_encoded() {
        let w = world("gsrr-ce-all").await;
        let rec = Recording::default();
        let req = SearchRequest::new(
            "Alice Paris friends",
            search::COMBINED_HYBRID_SEARCH_CROSS_ENCODER,
        );
        let r = search::search(&w.g.db, &w.g.name, &req, Some(&w.emb), Some(&rec))
            .await
            .unwrap();
        assert_eq!(rec.0.lock().unwrap().len(), 4);
        assert_eq!(r.communities[0].community.uuid, w.c["Paris friends"]);
        assert!(close(r.communities[0].score, 1.0));
        assert!(r.facts.windows(2).all(|p| p[0].score >= p[1].score));
        assert!(r.entities.windows(2).all(|p| p[0].score >= p[1].score));
        assert!(r.episodes.windows(2).all(|p| p[0].score >= p[1].score));
    }
}
