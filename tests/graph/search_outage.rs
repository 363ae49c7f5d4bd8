//! Search degrades, it does not fail, when the embedder is down
//! (test-trees/graph-search.md, "embedder outage").

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::TestGraph;
use common::graph::t;
use common::ingest::{DIM, Rules, World};
use gralkor::graph::search::{COMBINED_HYBRID_SEARCH_RRF, EDGE_HYBRID_SEARCH_RRF, SearchRequest};
use gralkor::graph::{AddEpisode, Engine, SourceKind};
use gralkor::llm::RetryPolicy;
use gralkor::llm::openai::OpenAi;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

mod search_outage {
    use super::*;

    /// An OpenAI-compatible provider on loopback that answers 500 to every request,
    /// and an engine whose embedder uses it (two quick attempts per call).
    async fn failing_engine(db: &gralkor::falkordb::FalkorDb) -> (Engine, MockServer) {
        let server = MockServer::builder().start().await;
        Mock::given(method("POST"))
            .and(path("/v1/embeddings"))
            .respond_with(ResponseTemplate::new(500).set_body_string("embedder down"))
            .mount(&server)
            .await;
        let conn = OpenAi::builder("sk-test")
            .base_url(format!("{}/v1", server.uri()))
            .retry(RetryPolicy {
                max_attempts: 2,
                initial_backoff: Duration::from_millis(5),
                max_backoff: Duration::from_millis(5),
                ..RetryPolicy::default()
            })
            .build()
            .unwrap();
        let embedder = conn.embedder("tiny", Some(DIM)).unwrap();
        (Engine::without_llm(db.clone(), Arc::new(embedder)), server)
    }

    #[tokio::test]
    async fn with_the_embedder_answering_500_a_search_answers_from_fulltext_and_says_so() {
        let g = TestGraph::new("search-embedder-down").await;
        let w = World::new(&g.db, Rules::narrator());
        for text in ["Ada keeps bees in Porto", "Bob rides bikes in Lisbon"] {
            w.engine
                .add_episode(
                    &g.name,
                    AddEpisode::new(text, SourceKind::Message, t("2024-01-01T00:00:00Z")),
                )
                .await
                .unwrap();
        }
        let (engine, server) = failing_engine(&g.db).await;
        for config in [
            COMBINED_HYBRID_SEARCH_RRF.limit(5),
            EDGE_HYBRID_SEARCH_RRF.limit(5),
        ] {
            let req = SearchRequest::new("bees Porto", config);
            let found = engine.search(&g.name, &req).await.unwrap();
            let why = found
                .degraded
                .as_deref()
                .expect("the search says it degraded");
            assert!(why.contains("500"), "{why}");
            assert!(
                found.facts.iter().any(|h| h.fact.fact.contains("bees")),
                "{found:?}"
            );
            assert!(
                found.facts.iter().all(|h| !h.fact.fact.contains("Lisbon")),
                "fulltext only: {found:?}"
            );
            if config.episodes.is_some() {
                assert_eq!(found.episodes.len(), 1, "{found:?}");
                assert!(found.episodes[0].episode.content.contains("bees"));
            }
            let many = engine.search_many(&[g.name.as_str()], &req).await.unwrap();
            assert_eq!(many[0].degraded, found.degraded);
            assert_eq!(many[0].facts, found.facts);
        }
        assert!(
            !server.received_requests().await.unwrap().is_empty(),
            "the embedder was asked"
        );
        // With a working embedder nothing is degraded.
        let req = SearchRequest::new("bees Porto", COMBINED_HYBRID_SEARCH_RRF.limit(5));
        assert_eq!(w.engine.search(&g.name, &req).await.unwrap().degraded, None);
    }
}
