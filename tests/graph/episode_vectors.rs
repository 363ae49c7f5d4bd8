//! Episode content embeddings: every engine with an embedder stores one per episode
//! (one embedding request per ingest), episode search is hybrid, and the embedding
//! node is never updated, so it leaves no stale vector entries.

use crate::common;

use std::sync::Arc;

use common::ingest::{CountingEmbedder, Rules, World, extraction};
use common::{TestGraph, count};
use gralkor::graph::search::{Methods, RerankerKind, ScopeConfig, SearchConfig, SearchRequest};
use gralkor::graph::store::{VectorIndex, vector_debt};
use gralkor::graph::{AddEpisode, Engine, OutcomeStatus, SourceKind, Timestamp};
use gralkor::llm::Embedder;
use uuid::Uuid;

fn text(content: &str, day: u32) -> AddEpisode {
    let when: Timestamp = format!("2024-01-{day:02}T00:00:00Z").parse().unwrap();
    AddEpisode::new(content, SourceKind::Text, when)
}

async fn embedding_nodes(g: &TestGraph) -> i64 {
    count(g, "MATCH (x:EpisodeEmbedding) RETURN count(x) AS n").await
}

async fn episode_debt(g: &TestGraph) -> i64 {
    vector_debt(&g.db, &g.name)
        .await
        .unwrap()
        .into_iter()
        .find_map(|(i, s)| (i == VectorIndex::Episode).then_some(s))
        .expect("an episode debt counter")
}

/// Episodes only, by one method, RRF.
fn episodes_by(methods: Methods, query: &str, vector: Option<Vec<f32>>) -> SearchRequest {
    let config = SearchConfig {
        facts: None,
        entities: None,
        episodes: Some(ScopeConfig::new(methods, RerankerKind::Rrf).min_similarity(0.5)),
        communities: None,
        limit: 10,
        min_score: 0.0,
    };
    let request = SearchRequest::new(query, config);
    match vector {
        Some(v) => request.query_vector(v),
        None => request,
    }
}

async fn found(engine: &Engine, g: &TestGraph, request: &SearchRequest) -> Vec<Uuid> {
    engine
        .search(&g.name, request)
        .await
        .unwrap()
        .episodes
        .into_iter()
        .map(|h| h.episode.uuid)
        .collect()
}

#[tokio::test]
async fn without_a_language_model_each_episode_is_embedded_once_and_found_by_meaning() {
    let g = TestGraph::new("episode-vectors-offline").await;
    let embedder = CountingEmbedder::new();
    let engine = Engine::without_llm(g.db.clone(), Arc::new(embedder.clone()));
    let out = engine
        .add_episode(&g.name, text("Dana adopted a grey cat", 1))
        .await
        .unwrap();
    assert_eq!(out.status, OutcomeStatus::Pending);
    assert_eq!((out.usage.llm_calls, out.usage.embedding_calls), (0, 1));
    assert_eq!(embedder.requests(), 1);
    assert_eq!(embedding_nodes(&g).await, 1);
    engine
        .add_episode(&g.name, text("The boiler is serviced in October", 2))
        .await
        .unwrap();

    // A query vector near the episode's, with no word of it in the query text: only
    // the vector method finds it.
    let near = embedder.inner.vector("Dana adopted a grey cat");
    let by_vector = found(
        &engine,
        &g,
        &episodes_by(Methods::VECTOR, "zzqx", Some(near.clone())),
    )
    .await;
    assert_eq!(by_vector, vec![out.episode.uuid]);
    let by_text = found(&engine, &g, &episodes_by(Methods::FULLTEXT, "zzqx", None)).await;
    assert!(by_text.is_empty(), "{by_text:?}");
    let hybrid = found(
        &engine,
        &g,
        &episodes_by(Methods::HYBRID, "zzqx", Some(near)),
    )
    .await;
    assert_eq!(hybrid, vec![out.episode.uuid]);
}

#[tokio::test]
async fn a_replayed_episode_is_not_embedded_into_a_second_node_and_leaves_no_debt() {
    let g = TestGraph::new("episode-vectors-replay").await;
    let engine = Engine::without_llm(g.db.clone(), Arc::new(CountingEmbedder::new()));
    let uuid = Uuid::new_v4();
    for _ in 0..3 {
        engine
            .add_episode(&g.name, text("Ada keeps bees", 1).uuid(uuid))
            .await
            .unwrap();
    }
    assert_eq!(embedding_nodes(&g).await, 1);
    assert_eq!(episode_debt(&g).await, 0);
}

#[tokio::test]
async fn an_extracting_engine_embeds_the_content_in_the_same_request_as_names_and_facts() {
    let g = TestGraph::new("episode-vectors-extracting").await;
    let w = World::new(&g.db, Rules::narrator());
    let out = w
        .engine
        .add_episode(&g.name, text("Ada moved to Lisbon", 1))
        .await
        .unwrap();
    assert_eq!(out.status, OutcomeStatus::Completed);
    assert_eq!(out.usage.embedding_calls, 1);
    assert_eq!(w.embedder.requests(), 1);
    assert_eq!(embedding_nodes(&g).await, 1);
    let near = w.embedder.inner.vector("Ada moved to Lisbon");
    let hits = found(
        &w.engine,
        &g,
        &episodes_by(Methods::VECTOR, "zzqx", Some(near)),
    )
    .await;
    assert_eq!(hits, vec![out.episode.uuid]);
    // The claim, the lease and the commit updated the `Episodic` node, never the
    // embedding node.
    assert_eq!(episode_debt(&g).await, 0);
}

#[tokio::test]
async fn an_episode_stored_offline_keeps_its_one_embedding_when_extracted_later() {
    let g = TestGraph::new("episode-vectors-resume").await;
    let offline = Engine::without_llm(g.db.clone(), Arc::new(CountingEmbedder::new()));
    offline
        .add_episode(&g.name, text("Dana adopted a cat", 1))
        .await
        .unwrap();
    let w = World::new(&g.db, Rules::default());
    w.rules.extraction(
        "Dana",
        extraction(
            &[("Dana", 0), ("Cat", 0)],
            &[("Dana", "adopted", "Cat", "Dana adopted a cat.", None, None)],
        ),
    );
    let report = w.engine.resume_pending(&g.name, None).await.unwrap();
    assert_eq!(report.completed.len(), 1);
    assert_eq!(embedding_nodes(&g).await, 1);
    assert_eq!(episode_debt(&g).await, 0);
}

#[tokio::test]
async fn removing_an_episode_removes_its_embedding_and_counts_the_stale_entries() {
    let g = TestGraph::new("episode-vectors-remove").await;
    let w = World::new(&g.db, Rules::narrator());
    let one = w
        .engine
        .add_episode(&g.name, text("Gus knows Hanna", 1))
        .await
        .unwrap();
    w.engine
        .add_episode(&g.name, text("Ivy plays chess", 2))
        .await
        .unwrap();
    assert_eq!(embedding_nodes(&g).await, 2);
    let before = vector_debt(&g.db, &g.name).await.unwrap();
    let removal = w
        .engine
        .remove_episode(&g.name, one.episode.uuid)
        .await
        .unwrap();
    assert!(removal.episode);
    assert_eq!(embedding_nodes(&g).await, 1);
    let after = vector_debt(&g.db, &g.name).await.unwrap();
    let grew = |index: VectorIndex| {
        let at = |list: &[(VectorIndex, i64)]| {
            list.iter()
                .find_map(|(i, s)| (*i == index).then_some(*s))
                .unwrap()
        };
        at(&after) - at(&before)
    };
    assert_eq!(grew(VectorIndex::Episode), 1);
    // The fact only it supported went: a deleted record leaves a stale entry too.
    assert_eq!(
        grew(VectorIndex::Fact),
        i64::try_from(removal.facts_deleted + removal.facts_updated).unwrap()
    );
    assert_eq!(
        grew(VectorIndex::Entity),
        i64::try_from(removal.entities_deleted).unwrap()
    );
}

#[tokio::test]
async fn a_writer_with_one_episode_among_many_is_found_by_meaning() {
    let g = TestGraph::new("episode-vectors-writer").await;
    let embedder = CountingEmbedder::new();
    let engine = Engine::without_llm(g.db.clone(), Arc::new(embedder.clone()));
    for i in 0..60 {
        engine
            .add_episode(
                &g.name,
                text(&format!("Dana adopted a grey cat number {i}"), 1).writer("lens:busy"),
            )
            .await
            .unwrap();
    }
    let rare = engine
        .add_episode(
            &g.name,
            text("Dana adopted a grey cat at last", 2).writer("lens:rare"),
        )
        .await
        .unwrap();
    let near = embedder.inner.vector("Dana adopted a grey cat");
    let mut request = episodes_by(Methods::VECTOR, "zzqx", Some(near));
    request.config.limit = 1;
    let request = request.filters(gralkor::graph::search::SearchFilters {
        writers: vec!["lens:rare".into()],
        ..Default::default()
    });
    assert_eq!(found(&engine, &g, &request).await, vec![rare.episode.uuid]);
}

/// The episode selection by uuid (the authorization pre-filter) ranks the selected
/// episodes exactly: one among 60 nearer ones is found by meaning, alone or with
/// others, by the vector method and by hybrid; the limit follows the filter.
#[tokio::test]
async fn a_selected_episode_among_many_is_found_by_meaning() {
    let g = TestGraph::new("episode-vectors-selected").await;
    let embedder = CountingEmbedder::new();
    let engine = Engine::without_llm(g.db.clone(), Arc::new(embedder.clone()));
    let mut busy = Vec::new();
    for i in 0..60 {
        let out = engine
            .add_episode(
                &g.name,
                text(&format!("Dana adopted a grey cat number {i}"), 1),
            )
            .await
            .unwrap();
        busy.push(out.episode.uuid);
    }
    let rare = engine
        .add_episode(&g.name, text("Dana adopted a grey cat at last", 2))
        .await
        .unwrap()
        .episode
        .uuid;
    let near = embedder.inner.vector("Dana adopted a grey cat");
    let select = |methods: Methods, query: &str, limit: usize, episodes: Vec<Uuid>| {
        let mut request = episodes_by(methods, query, Some(near.clone()));
        request.config.limit = limit;
        request.filters(gralkor::graph::search::SearchFilters {
            episodes,
            ..Default::default()
        })
    };
    // Unselected, the index's nearest ten hold no room for it at a limit of one.
    let plain = found(
        &engine,
        &g,
        &episodes_by(Methods::VECTOR, "zzqx", Some(near.clone())),
    )
    .await;
    assert_eq!(plain.len(), 10);
    for methods in [Methods::VECTOR, Methods::HYBRID] {
        let got = found(&engine, &g, &select(methods, "zzqx", 1, vec![rare])).await;
        assert_eq!(got, vec![rare], "{methods:?}");
        // Three selected, a limit of two: two of the three, best first.
        let three = vec![rare, busy[3], busy[40]];
        let got = found(&engine, &g, &select(methods, "Dana cat", 2, three.clone())).await;
        assert_eq!(got.len(), 2, "{methods:?}");
        assert!(got.iter().all(|u| three.contains(u)), "{methods:?} {got:?}");
        // A uuid of no episode of the graph selects nothing.
        let none = found(
            &engine,
            &g,
            &select(methods, "Dana cat", 5, vec![Uuid::new_v4()]),
        )
        .await;
        assert!(none.is_empty(), "{methods:?}");
    }
}

/// The hybrid episode search (one statement: both index calls and the fusion) returns
/// exactly the reciprocal rank fusion of the fulltext and vector lists, computed here
/// from the single-method searches: Σ 1/(rank+1), ties by first appearance with
/// fulltext first; one method's own scores and order when only it found anything;
/// then the minimum score and the limit.
#[tokio::test]
async fn the_one_statement_episode_hybrid_is_the_fusion_of_the_method_lists() {
    let g = TestGraph::new("episode-hybrid-rrf").await;
    let embedder = CountingEmbedder::new();
    let engine = Engine::without_llm(g.db.clone(), Arc::new(embedder.clone()));
    let lines = [
        "Dana adopted a grey cat from the shelter",
        "The cat sleeps on the boiler all winter",
        "Dana services the boiler every October",
        "A grey heron fishes by the canal",
        "The shelter needs volunteers on Sundays",
        "Dana walks by the canal on Sundays",
        "Winter tyres go on in October",
        "The heron and the cat watch each other",
        "Volunteers repaint the shelter in spring",
        "Dana's cat is called Pebble",
        "Pebble hides from the heron",
        "The canal freezes in a hard winter",
    ];
    for (i, line) in lines.iter().enumerate() {
        engine
            .add_episode(&g.name, text(line, i as u32 + 1))
            .await
            .unwrap();
    }
    let config = |methods: Methods, min_sim: f64, limit: usize, min_score: f64| SearchConfig {
        facts: None,
        entities: None,
        episodes: Some(ScopeConfig::new(methods, RerankerKind::Rrf).min_similarity(min_sim)),
        communities: None,
        limit,
        min_score,
    };
    let hits = |request: SearchRequest| {
        let engine = engine.clone();
        let name = g.name.clone();
        async move {
            engine
                .search(&name, &request)
                .await
                .unwrap()
                .episodes
                .into_iter()
                .map(|h| (h.episode.uuid, h.score))
                .collect::<Vec<_>>()
        }
    };
    let cases: [(&str, Option<&str>, f64, usize, f64); 5] = [
        ("grey cat Dana", None, -1.0, 10, 0.0),
        ("the boiler in winter", None, 0.0, 3, 0.0),
        ("canal heron Sundays", None, -1.0, 10, 0.03),
        // Words found nowhere: the vector list alone, with its cosine scores.
        ("zyxwv qwerty", Some("grey cat Dana"), -1.0, 10, 0.0),
        // A cut-off no vector passes: the fulltext list alone, with its scores.
        ("grey cat Dana", None, 1.0, 10, 0.0),
    ];
    for (query, vector_of, min_sim, limit, min_score) in cases {
        let vector = embedder
            .inner
            .embed(&[vector_of.unwrap_or(query).to_string()], "test")
            .await
            .unwrap()
            .remove(0);
        let request = |methods: Methods, limit: usize, min_score: f64| {
            SearchRequest::new(query, config(methods, min_sim, limit, min_score))
                .query_vector(vector.clone())
        };
        // The single-method lists as the hybrid fuses them: 2 × limit candidates,
        // before the minimum score and the limit.
        let ft = hits(request(Methods::FULLTEXT, 2 * limit, f64::MIN)).await;
        let vec = hits(request(Methods::VECTOR, 2 * limit, f64::MIN)).await;
        let both = hits(request(Methods::HYBRID, limit, min_score)).await;
        let mut expected: Vec<(Uuid, f64, usize)> = Vec::new();
        if ft.is_empty() || vec.is_empty() {
            for (i, (u, s)) in ft.iter().chain(&vec).enumerate() {
                expected.push((*u, *s, i));
            }
        } else {
            for rank in 0..ft.len().max(vec.len()) {
                for list in [&ft, &vec] {
                    if let Some((u, _)) = list.get(rank) {
                        let add = 1.0 / (rank as f64 + 1.0);
                        match expected.iter_mut().find(|e| e.0 == *u) {
                            Some(e) => e.1 += add,
                            None => {
                                let order = expected.len();
                                expected.push((*u, add, order))
                            }
                        }
                    }
                }
            }
        }
        expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
        expected.retain(|e| e.1 >= min_score);
        expected.truncate(limit);
        let want: Vec<Uuid> = expected.iter().map(|e| e.0).collect();
        let got: Vec<Uuid> = both.iter().map(|h| h.0).collect();
        assert_eq!(got, want, "{query:?}: {both:?} vs {expected:?}");
        for (g, e) in both.iter().zip(&expected) {
            assert!(
                (g.1 - e.1).abs() < 1e-6,
                "{query:?}: {both:?} vs {expected:?}"
            );
        }
        match vector_of {
            Some(_) => assert!(ft.is_empty() && !vec.is_empty() && !got.is_empty()),
            None if min_sim >= 1.0 => assert!(vec.is_empty() && !ft.is_empty() && !got.is_empty()),
            None => assert!(
                !ft.is_empty() && !vec.is_empty(),
                "{query:?}: both methods found some"
            ),
        }
    }
}
