//! The vector indices survive their own rebuilds, `status` reports one that is
//! missing, and a search answers while an index is away — alone or beside writers
//! that rebuild it (test-trees/graph-search.md, "index maintenance").

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::TestGraph;
use common::graph::t;
use common::ingest::{Rules, World, extraction};
use gralkor::falkordb::{IndexKind, IndexSpec, Similarity};
use gralkor::graph::search::{
    COMBINED_HYBRID_SEARCH_RRF, EDGE_HYBRID_SEARCH_RRF, Methods, NODE_HYBRID_SEARCH_RRF,
    RerankerKind, ScopeConfig, SearchConfig, SearchRequest,
};
use gralkor::graph::{self, AddEpisode, EngineOptions, SourceKind};
use uuid::Uuid;

fn msg(content: &str) -> AddEpisode {
    AddEpisode::new(content, SourceKind::Message, t("2024-03-01T00:00:00Z"))
        .source_description("chat")
}

/// Every episode "… visited <Place>": Ada, the place, and the visit.
fn visits() -> Rules {
    Rules {
        fallback: Some(Arc::new(|text: &str| {
            let place = text.rsplit(' ').next().unwrap_or_default().to_owned();
            extraction(
                &[("Ada", 0), (place.as_str(), 0)],
                &[(
                    "Ada",
                    "visited",
                    place.as_str(),
                    &format!("Ada visited {place}."),
                    None,
                    None,
                )],
            )
        })),
        ..Rules::default()
    }
}

/// The engine's vector indices as specs (entity, fact, episode content).
fn vector_specs() -> Vec<IndexSpec> {
    let dim = common::ingest::DIM as u32;
    vec![
        IndexSpec::vector_nodes("Entity", "name_embedding", dim, Similarity::Cosine),
        IndexSpec::vector_relationships("RELATES_TO", "fact_embedding", dim, Similarity::Cosine),
        IndexSpec::vector_nodes("EpisodeEmbedding", "embedding", dim, Similarity::Cosine),
    ]
}

/// Whether `graph` lists `spec`'s vector index as operational.
async fn serves(g: &TestGraph, spec: &IndexSpec) -> bool {
    g.db.list_indices(&g.name).await.unwrap().iter().any(|i| {
        i.entity == spec.entity
            && i.property == spec.properties[0]
            && matches!(i.kind, IndexKind::Vector { .. })
            && i.operational
    })
}

mod index_rebuild {
    use super::*;

    #[tokio::test]
    async fn a_vector_index_rebuilt_again_and_again_is_listed_after_every_rebuild() {
        let g = TestGraph::new("rebuild-again").await;
        let w = World::new(&g.db, visits());
        for i in 0..4 {
            w.engine
                .add_episode(&g.name, msg(&format!("Ada: today I visited Town{i}")))
                .await
                .unwrap();
        }
        for round in 0..5 {
            for spec in vector_specs() {
                let info =
                    g.db.list_indices(&g.name)
                        .await
                        .unwrap()
                        .into_iter()
                        .find(|i| {
                            i.entity == spec.entity
                                && i.property == spec.properties[0]
                                && matches!(i.kind, IndexKind::Vector { .. })
                        })
                        .unwrap_or_else(|| panic!("round {round}: {:?} missing", spec.entity));
                g.db.rebuild_index(&g.name, info).await.unwrap();
                assert!(serves(&g, &spec).await, "round {round}: {:?}", spec.entity);
            }
            let status = w.engine.graph_status(&g.name).await.unwrap();
            assert!(status.indices_missing.is_empty(), "{status:?}");
        }
    }

    #[tokio::test]
    async fn a_world_that_rebuilds_at_every_commit_keeps_its_vector_indices() {
        let g = TestGraph::new("rebuild-every-commit").await;
        let mut options = EngineOptions::default();
        options.vector_rebuild_threshold = 1;
        let w = World::with_options(&g.db, visits(), options);
        for i in 0..10 {
            w.engine
                .add_episode(&g.name, msg(&format!("Ada: today I visited Town{i}")))
                .await
                .unwrap();
            for spec in vector_specs() {
                assert!(serves(&g, &spec).await, "episode {i}: {:?}", spec.entity);
            }
            // Ada was re-summarised by this commit (from the second on), so her index
            // had a stale entry: the rebuild ran and purged it.
            let debt = graph::store::vector_debt(&g.db, &g.name).await.unwrap();
            assert!(
                debt.contains(&(graph::store::VectorIndex::Entity, 0)),
                "episode {i}: {debt:?}"
            );
            let status = w.engine.graph_status(&g.name).await.unwrap();
            assert!(status.indices_missing.is_empty(), "{status:?}");
            assert!(status.indices_building.is_empty(), "{status:?}");
        }
    }

    #[tokio::test]
    async fn status_reports_a_missing_vector_index() {
        let g = TestGraph::new("rebuild-status").await;
        let w = World::new(&g.db, visits());
        w.engine
            .add_episode(&g.name, msg("Ada: today I visited Porto"))
            .await
            .unwrap();
        assert!(
            w.engine
                .graph_status(&g.name)
                .await
                .unwrap()
                .indices_missing
                .is_empty()
        );
        assert!(g.db.drop_index(&g.name, &vector_specs()[0]).await.unwrap());
        let status = w.engine.graph_status(&g.name).await.unwrap();
        assert_eq!(status.indices_missing, ["vector Entity.name_embedding"]);
    }

    /// The uuids of a search's facts, entities and episodes.
    fn found(r: &graph::search::SearchResults) -> (Vec<Uuid>, Vec<Uuid>, Vec<Uuid>) {
        (
            r.facts.iter().map(|h| h.fact.uuid).collect(),
            r.entities.iter().map(|h| h.entity.uuid).collect(),
            r.episodes.iter().map(|h| h.episode.uuid).collect(),
        )
    }

    #[tokio::test]
    async fn a_search_while_the_vector_indices_are_away_answers_as_with_them() {
        let g = TestGraph::new("rebuild-away").await;
        let w = World::new(&g.db, visits());
        for i in 0..6 {
            w.engine
                .add_episode(&g.name, msg(&format!("Ada: today I visited Town{i}")))
                .await
                .unwrap();
        }
        let vector_only = SearchConfig {
            facts: Some(ScopeConfig::new(Methods::VECTOR, RerankerKind::Rrf)),
            entities: Some(ScopeConfig::new(Methods::VECTOR, RerankerKind::Rrf)),
            episodes: Some(ScopeConfig::new(Methods::VECTOR, RerankerKind::Rrf)),
            ..COMBINED_HYBRID_SEARCH_RRF
        }
        .limit(3);
        let requests = [
            SearchRequest::new("Ada visited Town4", vector_only),
            SearchRequest::new("Ada visited Town4", COMBINED_HYBRID_SEARCH_RRF.limit(3)),
        ];
        let mut with_index = Vec::new();
        for req in &requests {
            let r = w.engine.search(&g.name, req).await.unwrap();
            assert!(!r.facts.is_empty() && !r.entities.is_empty() && !r.episodes.is_empty());
            with_index.push(found(&r));
        }
        for spec in vector_specs() {
            assert!(g.db.drop_index(&g.name, &spec).await.unwrap());
        }
        for (req, expected) in requests.iter().zip(&with_index) {
            let r = w.engine.search(&g.name, req).await.unwrap();
            assert_eq!(&found(&r), expected, "{:?}", req.config);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sixteen_searches_beside_two_rebuilding_writers_never_fail() {
        let g = TestGraph::new("rebuild-under-writers").await;
        let mut options = EngineOptions::default();
        // Every commit that re-summarises Ada rebuilds the entity index.
        options.vector_rebuild_threshold = 1;
        let writers: Vec<World> = (0..2)
            .map(|_| World::with_options(&g.db, visits(), options.clone()))
            .collect();
        writers[0]
            .engine
            .add_episode(&g.name, msg("Ada: today I visited Start"))
            .await
            .unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let (searches, failures) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let configs = [
            EDGE_HYBRID_SEARCH_RRF.limit(5),
            NODE_HYBRID_SEARCH_RRF.limit(5),
            COMBINED_HYBRID_SEARCH_RRF.limit(5),
            SearchConfig {
                facts: None,
                entities: None,
                episodes: Some(ScopeConfig::new(Methods::HYBRID, RerankerKind::Rrf)),
                communities: None,
                ..COMBINED_HYBRID_SEARCH_RRF
            }
            .limit(5),
        ];
        let mut searchers = tokio::task::JoinSet::new();
        for s in 0..16 {
            let engine = writers[s % 2].engine.clone();
            let (name, done) = (g.name.clone(), done.clone());
            let (searches, failures) = (searches.clone(), failures.clone());
            let config = configs[s % configs.len()];
            searchers.spawn(async move {
                let mut errors = Vec::new();
                let mut i = 0;
                // At least one search each, then until the writers are done.
                while i == 0 || !done.load(Ordering::SeqCst) {
                    let req = SearchRequest::new(format!("Ada visited Town{}", i % 7), config);
                    match engine.search(&name, &req).await {
                        Ok(_) => {}
                        Err(e) => {
                            failures.fetch_add(1, Ordering::SeqCst);
                            errors.push(e.to_string());
                        }
                    }
                    searches.fetch_add(1, Ordering::SeqCst);
                    i += 1;
                }
                errors
            });
        }
        let mut writing = tokio::task::JoinSet::new();
        for (n, w) in writers.iter().enumerate() {
            let (engine, name) = (w.engine.clone(), g.name.clone());
            writing.spawn(async move {
                for i in 0..8 {
                    engine
                        .add_episode(&name, msg(&format!("Ada: today I visited W{n}Town{i}")))
                        .await
                        .unwrap();
                }
            });
        }
        while let Some(r) = writing.join_next().await {
            r.unwrap();
        }
        done.store(true, Ordering::SeqCst);
        let mut errors = Vec::new();
        while let Some(r) = searchers.join_next().await {
            errors.extend(r.unwrap());
        }
        assert!(searches.load(Ordering::SeqCst) >= 16);
        assert_eq!(failures.load(Ordering::SeqCst), 0, "{errors:?}");
        for spec in vector_specs() {
            assert!(serves(&g, &spec).await, "{:?}", spec.entity);
        }
    }
}
