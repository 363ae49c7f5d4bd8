//! Candidate retrieval for entity resolution (exact name, vector KNN, fulltext, in one
//! round trip) on a real FalkorDB. Mirrors `test-trees/graph-store.md` (candidates).

use crate::common;

use common::TestGraph;
use common::graph::entity;
use gralkor::Error;
use gralkor::graph::{self, EntityCandidate, EntityNode};

mod candidates {
    use super::*;
    use gralkor::graph::CandidateQuery;

    fn names(list: &[EntityCandidate]) -> Vec<&str> {
        list.iter().map(|c| c.entity.name.as_str()).collect()
    }

    async fn indexed(tag: &str, entities: &[EntityNode]) -> TestGraph {
        let g = TestGraph::new(tag).await;
        graph::build_indices(&g.db, &g.name, 3).await.unwrap();
        graph::save_entities(&g.db, &g.name, entities)
            .await
            .unwrap();
        g
    }

    #[tokio::test]
    async fn an_exact_name_matches_regardless_of_case() {
        let g = indexed(
            "gs-cand-exact",
            &[entity("Alice Smith", &[], None), entity("Bob", &[], None)],
        )
        .await;
        let queries = [
            CandidateQuery::new("alice smith"),
            CandidateQuery::new("  ALICE SMITH "),
        ];
        let got = graph::entity_candidates(&g.db, &g.name, &queries, 5)
            .await
            .unwrap();
        assert_eq!(got.len(), 2);
        for list in &got {
            assert_eq!(names(list).first(), Some(&"Alice Smith"), "{list:?}");
            assert!(!names(list).contains(&"Bob"));
        }
    }

    #[tokio::test]
    async fn a_close_embedding_finds_a_differently_spelt_neighbour() {
        let g = indexed(
            "gs-cand-vec",
            &[
                entity("Katherine", &[], Some(vec![1.0, 0.0, 0.0])),
                entity("Bob", &[], Some(vec![0.0, 1.0, 0.0])),
            ],
        )
        .await;
        let q = CandidateQuery::new("Catherine").with_embedding(vec![0.99, 0.05, 0.0]);
        let got = graph::entity_candidates(&g.db, &g.name, std::slice::from_ref(&q), 1)
            .await
            .unwrap();
        assert_eq!(names(&got[0]), ["Katherine"]);
        // With room for both, the nearest comes first.
        let got = graph::entity_candidates(&g.db, &g.name, &[q], 2)
            .await
            .unwrap();
        assert_eq!(names(&got[0]), ["Katherine", "Bob"]);
    }

    #[tokio::test]
    async fn fulltext_finds_acme_corporation_for_acme() {
        let g = indexed(
            "gs-cand-ft",
            &[
                entity("Acme Corporation", &[], None),
                entity("Globex", &[], None),
            ],
        )
        .await;
        let got = graph::entity_candidates(&g.db, &g.name, &[CandidateQuery::new("acme")], 10)
            .await
            .unwrap();
        assert_eq!(names(&got[0]), ["Acme Corporation"]);
        // A name without a searchable word skips fulltext and finds nothing here.
        let got = graph::entity_candidates(&g.db, &g.name, &[CandidateQuery::new("the")], 10)
            .await
            .unwrap();
        assert_eq!(got, vec![Vec::<EntityCandidate>::new()]);
    }

    #[tokio::test]
    async fn the_union_is_deduplicated_with_exact_matches_first() {
        let g = indexed(
            "gs-cand-union",
            &[
                entity("Acme", &[], Some(vec![1.0, 0.0, 0.0])),
                entity("Acme Labs", &[], Some(vec![0.9, 0.1, 0.0])),
            ],
        )
        .await;
        // Acme is found by all three paths, Acme Labs by vector (nearest) and fulltext.
        let q = CandidateQuery::new("ACME").with_embedding(vec![0.9, 0.1, 0.0]);
        let got = graph::entity_candidates(&g.db, &g.name, &[q], 10)
            .await
            .unwrap();
        assert_eq!(names(&got[0]), ["Acme", "Acme Labs"]);
        let uuids: std::collections::BTreeSet<_> = got[0].iter().map(|c| c.entity.uuid).collect();
        assert_eq!(uuids.len(), got[0].len());
    }

    #[tokio::test]
    async fn many_names_are_answered_in_input_order_by_one_call() {
        let stored = ["Alice", "Bob", "Carol", "Dave", "Erin"];
        let entities: Vec<EntityNode> = stored
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut v = vec![0.0; 3];
                v[i % 3] = 1.0;
                entity(n, &[], Some(v))
            })
            .collect();
        let g = indexed("gs-cand-many", &entities).await;
        let asked = ["erin", "CAROL", "alice", "dave", "bob"];
        let queries: Vec<CandidateQuery> = asked
            .iter()
            .map(|n| CandidateQuery::new(*n).with_embedding(vec![0.0, 0.0, 1.0]))
            .collect();
        let got = graph::entity_candidates(&g.db, &g.name, &queries, 2)
            .await
            .unwrap();
        assert_eq!(got.len(), 5);
        for (name, list) in asked.iter().zip(&got) {
            assert!(
                name.eq_ignore_ascii_case(&list[0].entity.name),
                "{name}: {list:?}"
            );
            assert!(list.len() <= 1 + 2 + 2);
        }
    }

    /// The cosine similarity of two vectors, as the client computed it before.
    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        dot / (norm(a) * norm(b))
    }

    #[tokio::test]
    async fn candidates_carry_the_servers_similarity_and_no_vector() {
        let acme = vec![1.0, 0.0, 0.0];
        let labs = vec![0.6, 0.8, 0.0];
        let g = indexed(
            "gs-cand-sim",
            &[
                entity("Acme", &[], Some(acme.clone())),
                entity("Acme Labs", &[], Some(labs.clone())),
                entity("Acme Bare", &[], None),
            ],
        )
        .await;
        let query = vec![0.8, 0.6, 0.0];
        let q = CandidateQuery::new("acme").with_embedding(query.clone());
        let got = graph::entity_candidates(&g.db, &g.name, &[q], 10)
            .await
            .unwrap();
        // Every path: the exact match, the vector neighbours, the fulltext hits.
        assert_eq!(names(&got[0]), ["Acme", "Acme Labs", "Acme Bare"]);
        for c in &got[0] {
            assert_eq!(c.entity.name_embedding, None, "{c:?}");
        }
        let by_name = |n: &str| got[0].iter().find(|c| c.entity.name == n).unwrap();
        for (name, stored) in [("Acme", &acme), ("Acme Labs", &labs)] {
            let c = by_name(name);
            assert!(c.has_embedding);
            let s = c.similarity.expect("both have embeddings");
            assert!((s - cosine(stored, &query)).abs() < 1e-6, "{name}: {s}");
        }
        // 0.8 and 0.96: not the same, so each score is its own entity's.
        assert!(by_name("Acme Labs").similarity > by_name("Acme").similarity);
        let bare = by_name("Acme Bare");
        assert!(!bare.has_embedding);
        assert_eq!(bare.similarity, None);
        // Without a query embedding there is no similarity.
        let got = graph::entity_candidates(&g.db, &g.name, &[CandidateQuery::new("acme")], 10)
            .await
            .unwrap();
        assert!(got[0].iter().all(|c| c.similarity.is_none()), "{got:?}");
        assert!(got[0][0].has_embedding);
    }

    #[tokio::test]
    async fn empty_input_gives_empty_output_without_a_query() {
        let db = common::db().await;
        // A blank graph id fails any query: an answer proves none was made.
        assert_eq!(
            graph::entity_candidates(&db, " ", &[], 10).await.unwrap(),
            Vec::<Vec<EntityCandidate>>::new()
        );
    }

    #[tokio::test]
    async fn a_limit_outside_1_to_100_is_rejected() {
        let db = common::db().await;
        for limit in [0, graph::MAX_CANDIDATE_LIMIT + 1] {
            let err = graph::entity_candidates(&db, "x", &[CandidateQuery::new("a")], limit)
                .await
                .unwrap_err();
            assert!(
                matches!(&err, Error::InvalidInput { field, .. } if field == "limit"),
                "{limit}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn with_indices_a_server_error_is_not_hidden() {
        let g = indexed("gs-cand-err", &[entity("Alice", &[], None)]).await;
        let q = CandidateQuery::new("alice").with_embedding(vec![1.0, 0.0]);
        let err = graph::entity_candidates(&g.db, &g.name, &[q], 10)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Query { .. }), "{err}");
    }

    #[tokio::test]
    async fn a_graph_without_indices_yields_exact_matches() {
        let g = TestGraph::new("gs-cand-fresh").await;
        graph::save_entities(
            &g.db,
            &g.name,
            &[
                entity("Alice", &[], Some(vec![1.0, 0.0, 0.0])),
                entity("Alice Cooper", &[], None),
            ],
        )
        .await
        .unwrap();
        let q = CandidateQuery::new("alice").with_embedding(vec![1.0, 0.0, 0.0]);
        let got = graph::entity_candidates(&g.db, &g.name, &[q, CandidateQuery::new("x")], 10)
            .await
            .unwrap();
        assert_eq!(names(&got[0]), ["Alice"]);
        assert!(got[1].is_empty());
    }
}

/// Resolution on the engine with server-side similarities: an entity that existed keeps
/// its stored name embedding, whatever name resolves to it.
mod resolution {
    use super::*;
    use common::ingest::{DIM, Rules, World, extraction};
    use gralkor::graph::{AddEpisode, SourceKind};

    #[tokio::test]
    async fn a_search_right_after_a_new_graphs_first_write_finds_it() {
        use gralkor::graph::search::{COMBINED_HYBRID_SEARCH_RRF, SearchRequest};
        let g = TestGraph::new("gs-cand-new").await;
        let w = World::new(&g.db, Rules::default());
        w.rules.extraction(
            "Porto",
            extraction(
                &[("Dmitri", 0), ("Porto", 0)],
                &[(
                    "Dmitri",
                    "lives in",
                    "Porto",
                    "Dmitri lives in Porto.",
                    None,
                    None,
                )],
            ),
        );
        // No build_indices first: the write prepares the graph without waiting for
        // an AOF rewrite, and every index answers at once.
        let out = w
            .engine
            .add_episode(
                &g.name,
                AddEpisode::new(
                    "Dmitri moved to Porto.",
                    SourceKind::Text,
                    common::graph::t("2024-01-01T00:00:00Z"),
                ),
            )
            .await
            .unwrap();
        let found = w
            .engine
            .search(
                &g.name,
                &SearchRequest::new("Dmitri Porto", COMBINED_HYBRID_SEARCH_RRF.limit(5)),
            )
            .await
            .unwrap();
        assert!(
            found
                .episodes
                .iter()
                .any(|e| e.episode.uuid == out.episode.uuid),
            "{found:?}"
        );
        assert!(
            found
                .facts
                .iter()
                .any(|f| f.fact.fact == "Dmitri lives in Porto."),
            "{found:?}"
        );
        assert!(
            found.entities.iter().any(|e| e.entity.name == "Dmitri"),
            "{found:?}"
        );
    }

    #[tokio::test]
    async fn an_episode_costs_five_database_round_trips_every_one_counted() {
        let g = TestGraph::new("gs-cand-trips").await;
        let w = World::new(&g.db, Rules::default());
        // Prepared beforehand: the first write would count the preparation too.
        w.engine.build_indices(&g.name).await.unwrap();
        w.rules.extraction(
            "met",
            extraction(
                &[("Alice", 0), ("Bob", 0)],
                &[("Alice", "met", "Bob", "Alice met Bob.", None, None)],
            ),
        );
        for day in ["01", "02"] {
            let out = w
                .engine
                .add_episode(
                    &g.name,
                    AddEpisode::new(
                        format!("Alice met Bob on the {day}th."),
                        SourceKind::Text,
                        common::graph::t(&format!("2024-01-{day}T00:00:00Z")),
                    ),
                )
                .await
                .unwrap();
            // The write with the claim and the context (previous episodes and known
            // facts), the entity candidates, the fact candidates, and the commit's two
            // statements: the in-flight mark, then the commit.
            assert_eq!(out.usage.db_round_trips, 5, "{day}: {:?}", out.usage);
            assert_eq!(out.facts.len(), 1);
        }
    }

    #[tokio::test]
    async fn a_candidate_query_that_finds_an_index_missing_counts_its_two_extra_round_trips() {
        use gralkor::falkordb::{IndexSpec, Similarity};
        let g = TestGraph::new("gs-cand-trips-missing").await;
        let w = World::new(&g.db, Rules::default());
        w.rules.extraction(
            "met",
            extraction(
                &[("Alice", 0), ("Bob", 0)],
                &[("Alice", "met", "Bob", "Alice met Bob.", None, None)],
            ),
        );
        let mut trips = Vec::new();
        for day in ["01", "02", "03"] {
            if day == "03" {
                // The entity vector index goes away: the candidate query fails, lists
                // the indices, and runs again without the vector path.
                let spec = IndexSpec::vector_nodes(
                    "Entity",
                    "name_embedding",
                    DIM as u32,
                    Similarity::Cosine,
                );
                assert!(g.db.drop_index(&g.name, &spec).await.unwrap());
            }
            let out = w
                .engine
                .add_episode(
                    &g.name,
                    AddEpisode::new(
                        format!("Alice met Bob on the {day}th."),
                        SourceKind::Text,
                        common::graph::t(&format!("2024-01-{day}T00:00:00Z")),
                    ),
                )
                .await
                .unwrap();
            assert_eq!(out.facts.len(), 1, "{day}");
            trips.push(out.usage.db_round_trips);
        }
        // The first write through a handle also prepares the graph's indices (and
        // reloads the schema cache): more than the usual five, each counted.
        assert!(trips[0] > 5, "{trips:?}");
        assert_eq!(trips[1], 5, "{trips:?}");
        assert_eq!(
            trips[2],
            5 + 2,
            "the listing and the rerun count: {trips:?}"
        );
    }

    #[tokio::test]
    async fn a_stored_entity_keeps_its_name_embedding_and_one_without_gets_the_names() {
        let g = TestGraph::new("gs-cand-keep").await;
        let w = World::new(&g.db, Rules::default());
        w.engine.build_indices(&g.name).await.unwrap();
        // Stored embeddings no hashing embedder would give these names.
        let mut stored = vec![0.0; DIM];
        stored[0] = 1.0;
        let alice = entity("Alice", &[], Some(stored.clone()));
        let acme = entity("Acme", &[], None);
        graph::save_entities(&g.db, &g.name, &[alice.clone(), acme.clone()])
            .await
            .unwrap();
        w.rules.extraction(
            "joined",
            extraction(
                &[("alice", 0), ("ACME", 0)],
                &[(
                    "alice",
                    "works at",
                    "ACME",
                    "Alice works at Acme.",
                    None,
                    None,
                )],
            ),
        );
        let out = w
            .engine
            .add_episode(
                &g.name,
                AddEpisode::new(
                    "Alice joined Acme.",
                    SourceKind::Text,
                    common::graph::t("2024-01-01T00:00:00Z"),
                ),
            )
            .await
            .unwrap();
        let uuids: Vec<_> = out.entities.iter().map(|e| e.uuid).collect();
        assert!(
            uuids.contains(&alice.uuid) && uuids.contains(&acme.uuid),
            "{uuids:?}"
        );
        let now = graph::get_entities(&g.db, &g.name, &[alice.uuid, acme.uuid])
            .await
            .unwrap();
        assert_eq!(now[0].name_embedding.as_deref(), Some(stored.as_slice()));
        let given = now[1]
            .name_embedding
            .as_ref()
            .expect("Acme got the name's embedding");
        assert_eq!(given.len(), DIM);
        assert_ne!(given, &stored);
    }
}
