//! Hybrid search on a real FalkorDB: each method and scope, results, isolation, hostile
//! text, empty graphs and limits. Mirrors `test-trees/graph-search.md`; rerankers are in
//! `graph_search_rerank.rs`, filters and time in `graph_search_filters.rs`.

use crate::common;
use crate::graph_search_support;

use common::TestGraph;
use gralkor::Error;
use gralkor::falkordb::{Params, Value};
use gralkor::graph::search::{
    self, COMBINED_HYBRID_SEARCH_RRF, EDGE_HYBRID_SEARCH_RRF, Methods, RerankerKind, ScopeConfig,
    SearchConfig, SearchRequest, SearchResults,
};
use gralkor::graph::{self, SourceKind};
use gralkor::llm::doubles::HashEmbedder;
use graph_search_support::{DIM, World, world};

/// A configuration with only facts, `methods` fused by RRF.
fn facts_only(methods: Methods) -> SearchConfig {
    SearchConfig {
        facts: Some(ScopeConfig::new(methods, RerankerKind::Rrf)),
        ..EDGE_HYBRID_SEARCH_RRF
    }
}

fn entities_only(methods: Methods) -> SearchConfig {
    SearchConfig {
        facts: None,
        entities: Some(ScopeConfig::new(methods, RerankerKind::Rrf)),
        ..EDGE_HYBRID_SEARCH_RRF
    }
}

async fn run(w: &World, req: &SearchRequest) -> SearchResults {
    search::search(&w.g.db, &w.g.name, req, Some(&w.emb), None)
        .await
        .unwrap()
}

fn fact_keys(w: &World, r: &SearchResults) -> Vec<&'static str> {
    r.facts.iter().map(|h| w.fact_key(h.fact.uuid)).collect()
}

fn entity_names(w: &World, r: &SearchResults) -> Vec<&'static str> {
    r.entities
        .iter()
        .map(|h| w.entity_name(h.entity.uuid))
        .collect()
}

mod methods {
    use super::*;

    #[tokio::test]
    async fn fulltext_finds_facts_by_their_words_best_first() {
        let w = world("gsr-ft").await;
        let r = run(
            &w,
            &SearchRequest::new("Globex manager", facts_only(Methods::FULLTEXT)),
        )
        .await;
        // Both current facts naming Globex and a manager; the retired Acme fact is not current.
        let keys = fact_keys(&w, &r);
        assert_eq!(keys.len(), 2, "{keys:?}");
        assert!(
            keys.contains(&"globex") && keys.contains(&"plan"),
            "{keys:?}"
        );
        assert!(r.facts.windows(2).all(|p| p[0].score >= p[1].score));
        // No embedding was needed.
        assert!(w.emb.embedded_texts().is_empty());
    }

    #[tokio::test]
    async fn vector_finds_the_nearest_facts_through_the_index_above_the_cut_off() {
        let w = world("gsr-vec").await;
        let q = w.emb.vector("Alice lives in Paris");
        let cfg = facts_only(Methods::VECTOR);
        let r = run(
            &w,
            &SearchRequest::new("ignored words", cfg).query_vector(q.clone()),
        )
        .await;
        assert_eq!(fact_keys(&w, &r)[0], "paris");
        assert!(
            (r.facts[0].score - 1.0).abs() < 1e-5,
            "{}",
            r.facts[0].score
        );
        assert!(r.facts.windows(2).all(|p| p[0].score >= p[1].score));
        // Only the identical fact clears a 0.99 cut-off.
        let strict = SearchConfig {
            facts: Some(ScopeConfig::new(Methods::VECTOR, RerankerKind::Rrf).min_similarity(0.99)),
            ..cfg
        };
        let r = run(&w, &SearchRequest::new("x", strict).query_vector(q)).await;
        assert_eq!(fact_keys(&w, &r), ["paris"]);
        // The query vector was given: the embedder was not called.
        assert!(w.emb.embedded_texts().is_empty());
    }

    #[tokio::test]
    async fn breadth_first_walks_from_origins_nearest_first() {
        let w = world("gsr-bfs").await;
        let one = SearchConfig {
            facts: Some(ScopeConfig::new(Methods::BFS, RerankerKind::Rrf).bfs_max_depth(1)),
            ..EDGE_HYBRID_SEARCH_RRF
        };
        let req = SearchRequest::new("", one).bfs_origins([w.e["Bob"]]);
        // One hop from Bob: the current fact touching him (the visit has ended).
        assert_eq!(fact_keys(&w, &run(&w, &req).await), ["knows"]);
        // Two hops: also Alice's current facts, scored 1/2.
        let two = SearchConfig {
            facts: Some(ScopeConfig::new(Methods::BFS, RerankerKind::Rrf).bfs_max_depth(2)),
            ..one
        };
        let r = run(
            &w,
            &SearchRequest::new("", two)
                .bfs_origins([w.e["Bob"]])
                .history(),
        )
        .await;
        let keys = fact_keys(&w, &r);
        assert_eq!(keys.len(), 5, "{keys:?}");
        assert!(
            !keys.contains(&"plan"),
            "Carol is three hops away: {keys:?}"
        );
        for h in &r.facts {
            let k = w.fact_key(h.fact.uuid);
            let direct = matches!(k, "knows" | "visit");
            // RRF of one list: rank-based, so direct facts (hop 1) come first.
            let pos = keys.iter().position(|x| *x == k).unwrap();
            assert_eq!(pos < 2, direct, "{keys:?}");
        }
    }

    #[tokio::test]
    async fn breadth_first_from_an_episode_goes_through_its_mentions() {
        let w = world("gsr-bfs-ep").await;
        let cfg = SearchConfig {
            entities: Some(ScopeConfig::new(Methods::BFS, RerankerKind::Rrf).bfs_max_depth(1)),
            ..entities_only(Methods::BFS)
        };
        let r = run(&w, &SearchRequest::new("", cfg).bfs_origins([w.ep["ep3"]])).await;
        let mut names = entity_names(&w, &r);
        names.sort();
        assert_eq!(names, ["Bob", "Paris"]);
    }

    #[tokio::test]
    async fn breadth_first_without_origins_starts_from_the_other_methods_hits() {
        let w = world("gsr-bfs-hits").await;
        let cfg = SearchConfig {
            facts: Some(
                ScopeConfig::new(
                    Methods {
                        fulltext: true,
                        vector: false,
                        bfs: true,
                    },
                    RerankerKind::Rrf,
                )
                .bfs_max_depth(1),
            ),
            ..EDGE_HYBRID_SEARCH_RRF
        };
        // Fulltext finds only the university fact (Bob, Alice); the walk adds Alice's
        // other current facts.
        let r = run(&w, &SearchRequest::new("university", cfg)).await;
        let keys = fact_keys(&w, &r);
        assert_eq!(keys[0], "knows");
        for k in ["globex", "paris"] {
            assert!(keys.contains(&k), "{keys:?}");
        }
    }

    #[tokio::test]
    async fn entities_episodes_and_communities_are_found_by_their_methods() {
        let w = world("gsr-scopes").await;
        let r = run(
            &w,
            &SearchRequest::new("rockets", entities_only(Methods::FULLTEXT)),
        )
        .await;
        assert_eq!(entity_names(&w, &r), ["Acme"]);
        let r = run(
            &w,
            &SearchRequest::new("x", entities_only(Methods::VECTOR))
                .query_vector(w.emb.vector("Globex")),
        )
        .await;
        assert_eq!(entity_names(&w, &r)[0], "Globex");
        assert_eq!(r.entities[0].entity.labels, ["Organization"]);
        assert_eq!(r.entities[0].entity.summary, "Globex sells software");

        let eps = SearchConfig {
            facts: None,
            episodes: Some(ScopeConfig::new(Methods::FULLTEXT, RerankerKind::Rrf)),
            ..EDGE_HYBRID_SEARCH_RRF
        };
        let r = run(&w, &SearchRequest::new("slack", eps)).await;
        assert_eq!(r.episodes.len(), 1);
        assert_eq!(r.episodes[0].episode.uuid, w.ep["ep2"]);
        assert_eq!(
            r.episodes[0].episode.content,
            "Alice: I left Acme and now work at Globex."
        );

        let r = run(
            &w,
            &SearchRequest::new("employers", search::COMMUNITY_HYBRID_SEARCH_RRF),
        )
        .await;
        assert_eq!(r.communities[0].community.uuid, w.c["Employers"]);
        assert_eq!(r.communities[0].community.summary, "Acme and Globex");
        assert_eq!(r.communities[0].community.name_embedding, None);
    }
}

mod overfetch {
    use super::*;
    use gralkor::graph::{EntityEdge, EntityNode};

    #[tokio::test]
    async fn filtered_out_nearest_hits_leave_room_for_the_rest() {
        let g = TestGraph::new("gsr-overfetch").await;
        graph::build_indices(&g.db, &g.name, 3).await.unwrap();
        let (a, b) = (EntityNode::new("A"), EntityNode::new("B"));
        graph::save_entities(&g.db, &g.name, &[a.clone(), b.clone()])
            .await
            .unwrap();
        // Ten retired facts nearest to the query, then four current ones further away.
        let fact = |i: usize, retired: bool| {
            let mut f = EntityEdge::new(a.uuid, b.uuid, "R", format!("fact {i}"));
            let angle = i as f32 * 0.05;
            f.fact_embedding = Some(vec![angle.cos(), angle.sin(), 0.0]);
            if retired {
                f.invalid_at = Some(common::graph::t("2024-01-01T00:00:00Z"));
                f.expired_at = Some(common::graph::t("2024-01-02T00:00:00Z"));
            }
            f
        };
        let facts: Vec<EntityEdge> = (0..14).map(|i| fact(i, i < 10)).collect();
        graph::save_facts(&g.db, &g.name, &facts).await.unwrap();
        // limit 2 → 4 candidates per method; the index is asked for max(8, MIN_INDEX_K).
        let req = SearchRequest::new("q", facts_only(Methods::VECTOR).limit(2))
            .query_vector(vec![1.0, 0.0, 0.0]);
        let r = search::search(&g.db, &g.name, &req, None, None)
            .await
            .unwrap();
        let got: Vec<uuid::Uuid> = r.facts.iter().map(|h| h.fact.uuid).collect();
        assert_eq!(got, [facts[10].uuid, facts[11].uuid]);
    }
}

mod results {
    use super::*;

    #[tokio::test]
    async fn facts_carry_their_source_episodes_and_no_embedding() {
        let w = world("gsr-sources").await;
        let r = run(
            &w,
            &SearchRequest::new("Paris university", facts_only(Methods::FULLTEXT)),
        )
        .await;
        let paris = r
            .facts
            .iter()
            .find(|h| h.fact.uuid == w.f["paris"])
            .unwrap();
        let got: Vec<_> = paris
            .sources
            .iter()
            .map(|s| (s.uuid, s.source, s.source_description.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (w.ep["ep1"], SourceKind::Text, "onboarding notes"),
                (w.ep["ep2"], SourceKind::Message, "slack #general"),
            ]
        );
        assert_eq!(paris.fact.fact, "Alice lives in Paris");
        assert_eq!(paris.fact.source_uuid, w.e["Alice"]);
        assert_eq!(paris.fact.target_uuid, w.e["Paris"]);
        assert_eq!(
            paris.fact.valid_at,
            Some(common::graph::t("2020-06-01T00:00:00Z"))
        );
        // An episode uuid that is not stored is kept in `episodes` but has no source.
        let knows = r
            .facts
            .iter()
            .find(|h| h.fact.uuid == w.f["knows"])
            .unwrap();
        assert_eq!(knows.fact.episodes, [w.ep["ep3"], w.ep["ep-missing"]]);
        assert_eq!(knows.sources.len(), 1);
        assert_eq!(knows.sources[0].source, SourceKind::Json);
        assert!(r.facts.iter().all(|h| h.fact.fact_embedding.is_none()));
    }

    #[tokio::test]
    async fn a_combined_search_embeds_once_and_fills_every_scope() {
        let w = world("gsr-combined").await;
        let r = run(
            &w,
            &SearchRequest::new("Alice Paris", COMBINED_HYBRID_SEARCH_RRF),
        )
        .await;
        assert_eq!(w.emb.embedded_texts(), ["Alice Paris"]);
        assert!(!r.facts.is_empty());
        assert_eq!(
            entity_names(&w, &r)[..2]
                .iter()
                .filter(|n| ["Alice", "Paris"].contains(n))
                .count(),
            2
        );
        assert!(!r.episodes.is_empty());
        assert_eq!(r.communities[0].community.uuid, w.c["Paris friends"]);
        assert!(r.entities.iter().all(|h| h.entity.name_embedding.is_none()));
    }

    #[tokio::test]
    async fn the_limit_caps_every_scope() {
        let w = world("gsr-limit").await;
        let r = run(
            &w,
            &SearchRequest::new(
                "Alice Bob Paris Globex Acme",
                COMBINED_HYBRID_SEARCH_RRF.limit(2),
            )
            .history(),
        )
        .await;
        assert_eq!(r.facts.len(), 2);
        assert_eq!(r.entities.len(), 2);
        assert_eq!(r.episodes.len(), 2);
        assert!(r.communities.len() <= 2);
    }
}

mod isolation {
    use super::*;

    #[tokio::test]
    async fn a_search_of_one_graph_never_returns_another_graphs_data() {
        let a = world("gsr-iso-a").await;
        let b = world("gsr-iso-b").await;
        let r = run(
            &a,
            &SearchRequest::new("Alice Paris Globex", COMBINED_HYBRID_SEARCH_RRF).history(),
        )
        .await;
        let b_uuids: std::collections::BTreeSet<uuid::Uuid> =
            b.e.values()
                .chain(b.f.values())
                .chain(b.ep.values())
                .chain(b.c.values())
                .copied()
                .collect();
        assert!(!r.facts.is_empty() && !r.entities.is_empty());
        assert!(
            r.facts
                .iter()
                .all(|h| a.f.values().any(|u| *u == h.fact.uuid))
        );
        assert!(r.facts.iter().all(|h| !b_uuids.contains(&h.fact.uuid)));
        assert!(r.entities.iter().all(|h| !b_uuids.contains(&h.entity.uuid)));
        assert!(
            r.episodes
                .iter()
                .all(|h| !b_uuids.contains(&h.episode.uuid))
        );
        assert!(
            r.communities
                .iter()
                .all(|h| !b_uuids.contains(&h.community.uuid))
        );
        // The same search on B sees only B.
        let r = run(
            &b,
            &SearchRequest::new("Alice Paris Globex", COMBINED_HYBRID_SEARCH_RRF),
        )
        .await;
        assert!(r.facts.iter().all(|h| b_uuids.contains(&h.fact.uuid)));
    }
}

mod many {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A [`HashEmbedder`] that counts its calls (not its texts).
    #[derive(Debug)]
    struct Counting {
        inner: HashEmbedder,
        calls: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl gralkor::llm::Embedder for Counting {
        fn dimension(&self) -> usize {
            self.inner.dimension()
        }
        async fn embed(&self, texts: &[String], label: &str) -> gralkor::Result<Vec<Vec<f32>>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.inner.embed(texts, label).await
        }
        fn provider(&self) -> &str {
            "counting"
        }
        fn model(&self) -> &str {
            "counting"
        }
    }

    #[tokio::test]
    async fn three_graphs_are_searched_with_one_embedding_and_match_one_graph_searches() {
        let ws = [
            world("gsr-many-a").await,
            world("gsr-many-b").await,
            world("gsr-many-c").await,
        ];
        // The third graph holds one more fact, so the graphs' results differ.
        let extra = {
            let mut f = graph::EntityEdge::new(
                ws[2].e["Carol"],
                ws[2].e["Paris"],
                "LIVES_IN",
                "Carol lives in Paris near Alice",
            );
            f.fact_embedding = Some(ws[2].emb.vector(&f.fact));
            f
        };
        graph::save_facts(&ws[2].g.db, &ws[2].g.name, std::slice::from_ref(&extra))
            .await
            .unwrap();
        let counting = Counting {
            inner: HashEmbedder::new(DIM),
            calls: AtomicUsize::new(0),
        };
        let req = SearchRequest::new("Alice Paris", COMBINED_HYBRID_SEARCH_RRF);
        let names: Vec<&str> = ws.iter().map(|w| w.g.name.as_str()).collect();
        let many = search::search_many(&ws[0].g.db, &names, &req, Some(&counting), None)
            .await
            .unwrap();
        assert_eq!(counting.calls.load(Ordering::SeqCst), 1);
        assert_eq!(many.len(), 3);
        for (w, got) in ws.iter().zip(&many) {
            assert_eq!(*got, run(w, &req).await, "{}", w.g.name);
            assert!(!got.facts.is_empty() && !got.entities.is_empty());
            assert!(
                got.facts
                    .iter()
                    .all(|h| w.f.values().any(|u| *u == h.fact.uuid) || h.fact.uuid == extra.uuid)
            );
        }
        assert!(many[2].facts.iter().any(|h| h.fact.uuid == extra.uuid));
        assert!(
            many[..2]
                .iter()
                .all(|r| r.facts.iter().all(|h| h.fact.uuid != extra.uuid))
        );
        // The per-graph entry with the vector at hand calls no embedder either.
        let v = counting.inner.vector("Alice Paris");
        let one = search::search_with_vector(&ws[1].g.db, &ws[1].g.name, &req, Some(&v), None)
            .await
            .unwrap();
        assert_eq!(one, many[1]);
        assert_eq!(counting.calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn one_bad_graph_fails_the_call_before_any_embedding_and_none_makes_no_call() {
        let w = world("gsr-many-bad").await;
        let counting = Counting {
            inner: HashEmbedder::new(DIM),
            calls: AtomicUsize::new(0),
        };
        let req = SearchRequest::new("Alice Paris", COMBINED_HYBRID_SEARCH_RRF);
        let err = search::search_many(&w.g.db, &[&w.g.name, "  "], &req, Some(&counting), None)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
        assert!(
            search::search_many(&w.g.db, &[], &req, Some(&counting), None)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(counting.calls.load(Ordering::SeqCst), 0);
    }
}

mod input {
    use super::*;

    #[tokio::test]
    async fn hostile_query_text_is_searched_as_words() {
        let w = world("gsr-hostile").await;
        for q in [
            "') RETURN 1 //",
            "Alice' OR 1=1 --",
            "@name:{Alice} | -Paris* ~%fuzzy% \"quoted\"",
            "MATCH (n) DETACH DELETE n",
            "\\ \\\\ ' \" ` $v {} [] () ; :",
            "user_id 5f3e-a1b2 ünïcødé 😀",
            "-",
            &"Alice ".repeat(500),
        ] {
            let r = search::search(
                &w.g.db,
                &w.g.name,
                &SearchRequest::new(q, COMBINED_HYBRID_SEARCH_RRF),
                Some(&w.emb),
                None,
            )
            .await;
            assert!(r.is_ok(), "{q:?}: {r:?}");
        }
        // Nothing was deleted.
        let res =
            w.g.db
                .ro_query(
                    &w.g.name,
                    "MATCH (n:Entity) RETURN count(n) AS c",
                    &Params::new(),
                )
                .await
                .unwrap();
        assert_eq!(res.get(0, "c"), Some(&Value::Int(6)));
        // A NUL character is refused by name.
        let e = search::search(
            &w.g.db,
            &w.g.name,
            &SearchRequest::new("a\0b", COMBINED_HYBRID_SEARCH_RRF),
            Some(&w.emb),
            None,
        )
        .await
        .unwrap_err();
        assert!(
            matches!(e, Error::InvalidInput { ref field, .. } if field == "query"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn an_empty_or_unindexed_graph_gives_empty_results() {
        let emb = HashEmbedder::new(DIM);
        let fresh = TestGraph::new("gsr-fresh").await;
        let indexed = TestGraph::new("gsr-indexed").await;
        graph::build_indices(&indexed.db, &indexed.name, DIM as u32)
            .await
            .unwrap();
        for g in [&fresh, &indexed] {
            let r = search::search(
                &g.db,
                &g.name,
                &SearchRequest::new("Alice", COMBINED_HYBRID_SEARCH_RRF),
                Some(&emb),
                None,
            )
            .await
            .unwrap();
            assert_eq!(r, SearchResults::default(), "{}", g.name);
        }
        // Searching created no graph.
        assert!(!fresh.db.list_graphs().await.unwrap().contains(&fresh.name));
    }

    #[tokio::test]
    async fn a_blank_query_returns_nothing_without_calls() {
        let w = world("gsr-blank").await;
        let r = run(&w, &SearchRequest::new("  ", COMBINED_HYBRID_SEARCH_RRF)).await;
        assert_eq!(r, SearchResults::default());
        assert!(w.emb.embedded_texts().is_empty());
    }

    #[tokio::test]
    async fn invalid_requests_are_rejected_naming_the_field() {
        let w = world("gsr-invalid").await;
        let cases: Vec<(SearchRequest, &str)> = vec![
            (
                SearchRequest::new("a", EDGE_HYBRID_SEARCH_RRF.limit(0)),
                "config.limit",
            ),
            (
                SearchRequest::new("a", EDGE_HYBRID_SEARCH_RRF.limit(201)),
                "config.limit",
            ),
            (
                SearchRequest::new(
                    "a",
                    SearchConfig {
                        facts: Some(ScopeConfig::new(Methods::default(), RerankerKind::Rrf)),
                        ..EDGE_HYBRID_SEARCH_RRF
                    },
                ),
                "config.facts.methods",
            ),
            (
                SearchRequest::new(
                    "a",
                    SearchConfig {
                        episodes: Some(ScopeConfig::new(Methods::HYBRID_BFS, RerankerKind::Rrf)),
                        ..EDGE_HYBRID_SEARCH_RRF
                    },
                ),
                "config.episodes.methods",
            ),
            (
                SearchRequest::new(
                    "a",
                    SearchConfig {
                        facts: Some(ScopeConfig::new(
                            Methods::HYBRID,
                            RerankerKind::Mmr { lambda: 1.5 },
                        )),
                        ..EDGE_HYBRID_SEARCH_RRF
                    },
                ),
                "config.facts.reranker",
            ),
            (
                SearchRequest::new(
                    "a",
                    SearchConfig {
                        communities: Some(ScopeConfig::new(
                            Methods::HYBRID,
                            RerankerKind::NodeDistance,
                        )),
                        ..EDGE_HYBRID_SEARCH_RRF
                    },
                ),
                "config.communities.reranker",
            ),
            (
                SearchRequest::new(
                    "a",
                    SearchConfig {
                        facts: Some(
                            ScopeConfig::new(Methods::BFS, RerankerKind::Rrf).bfs_max_depth(9),
                        ),
                        ..EDGE_HYBRID_SEARCH_RRF
                    },
                ),
                "config.facts.bfs_max_depth",
            ),
            (
                SearchRequest::new("a", search::EDGE_HYBRID_SEARCH_NODE_DISTANCE),
                "center",
            ),
            (
                SearchRequest::new("a", search::EDGE_HYBRID_SEARCH_CROSS_ENCODER),
                "reranker",
            ),
            (
                SearchRequest::new("a", EDGE_HYBRID_SEARCH_RRF).query_vector(vec![]),
                "query_vector",
            ),
            (
                SearchRequest::new("a", EDGE_HYBRID_SEARCH_RRF).query_vector(vec![f32::NAN]),
                "query_vector",
            ),
        ];
        for (req, field) in cases {
            let e = search::search(&w.g.db, &w.g.name, &req, Some(&w.emb), None)
                .await
                .unwrap_err();
            assert!(
                matches!(e, Error::InvalidInput { field: ref f, .. } if f == field),
                "{field}: {e}"
            );
        }
        // Vector search without an embedder or a query vector.
        let e = search::search(
            &w.g.db,
            &w.g.name,
            &SearchRequest::new("a", EDGE_HYBRID_SEARCH_RRF),
            None,
            None,
        )
        .await
        .unwrap_err();
        assert!(
            matches!(e, Error::InvalidInput { ref field, .. } if field == "embedder"),
            "{e}"
        );
        assert!(w.emb.embedded_texts().is_empty());
    }
}

/// The fulltext methods rank matches by BM25 (idf of the terms a record matches,
/// normalised by length), not by FalkorDB's own fulltext score, which ranks a record
/// matching several query terms below one matching only the rarest of them.
mod lexical {
    use super::*;
    use gralkor::graph::{EntityEdge, EntityNode, Episode, EpisodeState};

    /// A graph of facts with the given texts between two entities; their uuids in order.
    async fn facts_graph(tag: &str, texts: &[String]) -> (TestGraph, Vec<uuid::Uuid>) {
        let g = TestGraph::new(tag).await;
        graph::build_indices(&g.db, &g.name, DIM as u32)
            .await
            .unwrap();
        let (a, b) = (EntityNode::new("Someone"), EntityNode::new("Other"));
        graph::save_entities(&g.db, &g.name, &[a.clone(), b.clone()])
            .await
            .unwrap();
        let facts: Vec<EntityEdge> = texts
            .iter()
            .map(|t| EntityEdge::new(a.uuid, b.uuid, "SAID", t))
            .collect();
        for chunk in facts.chunks(200) {
            graph::save_facts(&g.db, &g.name, chunk).await.unwrap();
        }
        (g, facts.iter().map(|f| f.uuid).collect())
    }

    async fn fulltext_facts(g: &TestGraph, q: &str, limit: usize) -> Vec<uuid::Uuid> {
        let config = SearchConfig {
            limit,
            ..facts_only(Methods::FULLTEXT)
        };
        search::search(&g.db, &g.name, &SearchRequest::new(q, config), None, None)
            .await
            .unwrap()
            .facts
            .iter()
            .map(|h| h.fact.uuid)
            .collect()
    }

    #[tokio::test]
    async fn facts_matching_more_query_terms_rank_above_facts_matching_fewer() {
        // `pottery` is rarer than `noah`; three facts have both. FalkorDB's own score
        // put every pottery-only fact above them.
        let mut texts: Vec<String> = (0..40)
            .map(|i| format!("Person {i} took a pottery class"))
            .collect();
        texts.extend((0..150).map(|i| format!("Noah met friend number {i}")));
        texts.extend((0..3).map(|i| format!("Noah loves pottery, said witness {i}")));
        let (g, ids) = facts_graph("gsr-lex-more", &texts).await;
        let both: Vec<uuid::Uuid> = ids[190..].to_vec();
        let got = fulltext_facts(&g, "does Noah enjoy pottery", 5).await;
        assert_eq!(got.len(), 5);
        let mut top: Vec<uuid::Uuid> = got[..3].to_vec();
        top.sort();
        let mut want = both.clone();
        want.sort();
        assert_eq!(top, want, "the facts with both terms come first");
        // Then pottery-only facts (the rarer term) before Noah-only ones.
        assert!(got[3..].iter().all(|u| ids[..40].contains(u)), "{got:?}");
    }

    #[tokio::test]
    async fn a_rare_term_outranks_a_common_one_and_the_shorter_of_equal_matches_comes_first() {
        let mut texts: Vec<String> = (0..100).map(|i| format!("common word {i}")).collect();
        texts.push("zebra".to_owned());
        texts.push(format!(
            "zebra {}",
            "and many other words besides ".repeat(8)
        ));
        let (g, ids) = facts_graph("gsr-lex-rare", &texts).await;
        let got = fulltext_facts(&g, "zebra common", 3).await;
        assert_eq!(
            got[..2],
            [ids[100], ids[101]],
            "rare term first, the short fact first"
        );
        assert!(ids[..100].contains(&got[2]));
    }

    /// The facts `q` finds by fulltext in `g` (at most `limit`), with their scores.
    async fn scored(g: &TestGraph, q: &str, limit: usize) -> Vec<(uuid::Uuid, u64)> {
        let config = SearchConfig {
            limit,
            ..facts_only(Methods::FULLTEXT)
        };
        search::search(&g.db, &g.name, &SearchRequest::new(q, config), None, None)
            .await
            .unwrap()
            .facts
            .iter()
            .map(|h| (h.fact.uuid, h.score.to_bits()))
            .collect()
    }

    /// Through `db`: in the facts of `graph` starting with `prefix`, `from` becomes `to`.
    async fn rename(
        db: &gralkor::falkordb::FalkorDb,
        graph: &str,
        prefix: &str,
        from: &str,
        to: &str,
    ) {
        db.query(
            graph,
            "MATCH ()-[f:RELATES_TO]->() WHERE f.fact STARTS WITH $prefix \
             SET f.fact = replace(f.fact, $from, $to)",
            &Params::new()
                .set("prefix", prefix)
                .set("from", from)
                .set("to", to),
        )
        .await
        .unwrap();
    }

    /// Asserts that `got` falls into groups: for each `(from, range)`, the results from
    /// position `from` up to the next group's (or the end) are all among `ids[range]`,
    /// in any order.
    #[track_caller]
    fn assert_groups(
        got: &[(uuid::Uuid, u64)],
        ids: &[uuid::Uuid],
        groups: &[(usize, std::ops::Range<usize>)],
    ) {
        for (i, (from, range)) in groups.iter().enumerate() {
            let to = groups.get(i + 1).map_or(got.len(), |g| g.0);
            assert!(
                got[*from..to]
                    .iter()
                    .all(|x| ids[range.clone()].contains(&x.0)),
                "results {from}..{to} not among facts {range:?}: {got:?}"
            );
        }
    }

    /// Facts for the `zebra alpha beta` queries, in this order: 30 `zebra` only,
    /// `alpha` only, `beta` only, 20 `alpha beta`, 3 `zebra alpha beta`, 2 `zebra
    /// alpha`, then `filler` facts with none of the terms.
    fn zebra_texts(alpha: usize, beta: usize, filler: usize) -> Vec<String> {
        let mut texts: Vec<String> = (0..30).map(|i| format!("zebra seen {i}")).collect();
        texts.extend((0..alpha).map(|i| format!("alpha thing {i}")));
        texts.extend((0..beta).map(|i| format!("beta thing {i}")));
        texts.extend((0..20).map(|i| format!("alpha beta combo {i}")));
        texts.extend((0..3).map(|i| format!("zebra alpha beta {i}")));
        texts.extend((0..2).map(|i| format!("zebra alpha {i}")));
        texts.extend((0..filler).map(|i| format!("filler line {i}")));
        texts
    }

    #[tokio::test]
    async fn a_repeated_query_ranks_the_same_once_its_common_terms_are_counted() {
        // The first search counts every term; the next ones read `alpha` and `beta`
        // (common, together worth less than `zebra`) only where they meet `zebra`.
        let texts = zebra_texts(400, 400, 0);
        let (g, ids) = facts_graph("gsr-lex-repeat", &texts).await;
        let first = scored(&g, "zebra alpha beta", 8).await;
        assert_eq!(first.len(), 8);
        // All three terms, then `zebra alpha`, then `zebra` alone.
        assert_groups(&first, &ids, &[(0, 850..853), (3, 853..855), (5, 0..30)]);
        for _ in 0..2 {
            assert_eq!(scored(&g, "zebra alpha beta", 8).await, first);
        }
    }

    #[tokio::test]
    async fn a_repeated_query_whose_common_terms_together_outweigh_its_rarest_ranks_the_same() {
        // 855 facts: `zebra` 35, `alpha` 65, `beta` 63. Once counted, `zebra` (35 ≥ the
        // pool of 32) is read whole; `alpha` and `beta` together (5.3) outweigh `zebra`
        // (3.2), so the 20 `alpha beta` facts, which have no `zebra`, belong in the
        // pool: they are read as the conjunction of the two, in the same statement.
        let texts = zebra_texts(40, 40, 720);
        let (g, ids) = facts_graph("gsr-lex-outweigh", &texts).await;
        let first = scored(&g, "zebra alpha beta", 8).await;
        assert_eq!(first.len(), 8);
        // All three terms, then `zebra alpha`, then `alpha beta`.
        assert_groups(&first, &ids, &[(0, 130..133), (3, 133..135), (5, 110..130)]);
        for _ in 0..2 {
            assert_eq!(scored(&g, "zebra alpha beta", 8).await, first);
        }
    }

    #[tokio::test]
    async fn a_query_whose_anchor_another_handle_made_rare_still_ranks_exactly() {
        // Counted by this handle: `zebra` 35 (the anchor for a pool of 32), `alpha` 425
        // and `beta` 423 (together 1.4, below `zebra`'s 3.2: read only where they meet
        // it). Another handle (whose writes this one does not see) then renames `zebra`
        // out of 30 facts, the number of facts unchanged. This handle's next search
        // still goes by its counts, finds only 5 `zebra` facts where it needed 32, and
        // must read the rest whole: the ranking a handle without counts gives.
        let texts = zebra_texts(400, 400, 0);
        let (g, ids) = facts_graph("gsr-lex-stale", &texts).await;
        let first = scored(&g, "zebra alpha beta", 8).await;
        assert_groups(&first, &ids, &[(5, 0..30)]);
        rename(&common::db().await, &g.name, "zebra seen", "zebra", "yak").await;
        let after = scored(&g, "zebra alpha beta", 8).await;
        assert_eq!(after.len(), 8, "{after:?}");
        // The five `zebra` facts left, then `alpha beta`.
        assert_groups(&after, &ids, &[(0, 850..855), (5, 830..850)]);
        let fresh = TestGraph {
            db: common::db().await,
            name: g.name.clone(),
        };
        assert_eq!(scored(&fresh, "zebra alpha beta", 8).await, after);
    }

    #[tokio::test]
    async fn a_write_through_the_handle_makes_the_next_search_count_its_terms_again() {
        // `alpha` is common when first counted; a write then renames it out of 400 facts
        // (the number of facts unchanged). The next search must weigh `alpha` as rare:
        // the 20 `alpha beta` facts now outrank the facts with `zebra` alone.
        let texts = zebra_texts(400, 400, 0);
        let (g, ids) = facts_graph("gsr-lex-write", &texts).await;
        let first = scored(&g, "zebra alpha beta", 8).await;
        // `zebra` alone after the best.
        assert_groups(&first, &ids, &[(5, 0..30)]);
        rename(&g.db, &g.name, "alpha thing", "alpha", "gamma").await;
        let after = scored(&g, "zebra alpha beta", 8).await;
        // `zebra alpha` (short) and `zebra alpha beta` first, in either order, then
        // `alpha beta`.
        assert_groups(&after, &ids, &[(0, 850..855), (5, 830..850)]);
    }

    #[tokio::test]
    async fn postings_fetched_while_the_query_is_embedded_give_the_same_results() {
        // `search` fetches the fulltext postings while it embeds the query;
        // `search_with_vector` (the vector given) fetches them in each method.
        let w = world("gsr-lex-prefetch").await;
        for q in [
            "Alice Acme Paris",
            "Globex manager",
            "Bob friend university",
        ] {
            let req = SearchRequest::new(q, COMBINED_HYBRID_SEARCH_RRF);
            let ahead = search::search(&w.g.db, &w.g.name, &req, Some(&w.emb), None)
                .await
                .unwrap();
            let v = w.emb.vector(q);
            let each = search::search_with_vector(&w.g.db, &w.g.name, &req, Some(&v), None)
                .await
                .unwrap();
            let key = |r: &SearchResults| {
                (
                    r.facts
                        .iter()
                        .map(|h| (h.fact.uuid, h.score.to_bits()))
                        .collect::<Vec<_>>(),
                    r.entities.iter().map(|h| h.entity.uuid).collect::<Vec<_>>(),
                    r.episodes
                        .iter()
                        .map(|h| h.episode.uuid)
                        .collect::<Vec<_>>(),
                    r.communities
                        .iter()
                        .map(|h| h.community.uuid)
                        .collect::<Vec<_>>(),
                )
            };
            assert!(!ahead.facts.is_empty() && !ahead.entities.is_empty(), "{q}");
            assert_eq!(key(&ahead), key(&each), "{q}");
        }
    }

    #[tokio::test]
    async fn episodes_matching_more_query_terms_rank_first() {
        let g = TestGraph::new("gsr-lex-episodes").await;
        graph::build_indices(&g.db, &g.name, DIM as u32)
            .await
            .unwrap();
        let t0: gralkor::graph::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let mut contents: Vec<String> = (0..20)
            .map(|i| format!("Session {i}: we talked about the puppy again"))
            .collect();
        contents.extend((0..20).map(|i| format!("Session {i}: Lena went hiking")));
        contents.push("Lena named her puppy Biscuit".to_owned());
        let mut uuids = Vec::new();
        for c in &contents {
            let mut ep = Episode::new(c.as_str(), SourceKind::Message, "chat", t0);
            ep.state = EpisodeState::Complete;
            graph::save_episode(&g.db, &g.name, &ep).await.unwrap();
            uuids.push(ep.uuid);
        }
        let config = SearchConfig {
            facts: None,
            entities: None,
            episodes: Some(ScopeConfig::new(Methods::FULLTEXT, RerankerKind::Rrf)),
            communities: None,
            limit: 3,
            min_score: 0.0,
        };
        let found = search::search(
            &g.db,
            &g.name,
            &SearchRequest::new("What is Lena's puppy called?", config),
            None,
            None,
        )
        .await
        .unwrap()
        .episodes;
        assert_eq!(found.len(), 3);
        assert_eq!(
            found[0].episode.uuid, uuids[40],
            "{:?}",
            found[0].episode.content
        );
    }
}
