//! Engine::add_triplet against a real FalkorDB (test-trees/graph-ingest.md).

use crate::common;

use common::TestGraph;
use common::graph::t;
use common::ingest::{Rules, World, extraction};
use gralkor::Error;
use gralkor::falkordb::{Params, Value};
use gralkor::graph::{self, AddEpisode, Engine, SourceKind, Triplet, TripletEntity};

async fn count(g: &TestGraph, query: &str) -> i64 {
    let res = g.db.ro_query(&g.name, query, &Params::new()).await.unwrap();
    res.get(0, "n").and_then(Value::as_int).unwrap()
}

fn alice_acme() -> Triplet {
    Triplet::new(
        TripletEntity::new("Alice Chen").label("Person"),
        "works at",
        TripletEntity::new("Acme Corp"),
        "Alice Chen works at Acme Corp.",
    )
    .valid_at(t("2024-01-01T00:00:00Z"))
}

#[tokio::test]
async fn a_triplet_creates_its_entities_and_fact_without_a_model_call() {
    let g = TestGraph::new("triplet-new").await;
    let w = World::new(&g.db, Rules::default());
    let out = w.engine.add_triplet(&g.name, alice_acme()).await.unwrap();
    assert!(out.created);
    assert_eq!(out.fact.name, "WORKS_AT");
    assert_eq!(out.fact.valid_at, Some(t("2024-01-01T00:00:00Z")));
    assert!(out.fact.episodes.is_empty());
    assert!(w.model.calls().is_empty());
    assert_eq!(w.embedder.requests(), 1);
    let stored = graph::get_facts(&g.db, &g.name, &[out.fact.uuid])
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].source_uuid, out.source.uuid);
    let alice = graph::get_entities(&g.db, &g.name, &[out.source.uuid])
        .await
        .unwrap();
    assert_eq!(alice[0].labels, vec!["Person".to_string()]);
}

#[tokio::test]
async fn the_same_triplet_twice_is_stored_once() {
    let g = TestGraph::new("triplet-twice").await;
    let w = World::new(&g.db, Rules::default());
    let first = w.engine.add_triplet(&g.name, alice_acme()).await.unwrap();
    let second = w.engine.add_triplet(&g.name, alice_acme()).await.unwrap();
    assert!(!second.created);
    assert_eq!(second.fact.uuid, first.fact.uuid);
    assert_eq!(
        count(&g, "MATCH ()-[f:RELATES_TO]->() RETURN count(f) AS n").await,
        1
    );
    assert_eq!(count(&g, "MATCH (n:Entity) RETURN count(n) AS n").await, 2);
}

#[tokio::test]
async fn a_triplet_links_entities_an_episode_created() {
    let g = TestGraph::new("triplet-existing").await;
    let w = World::new(&g.db, Rules::default());
    w.rules.extraction(
        "Acme",
        extraction(
            &[("Alice Chen", 0), ("Acme Corp", 0)],
            &[(
                "Alice Chen",
                "likes",
                "Acme Corp",
                "Alice Chen likes Acme Corp.",
                None,
                None,
            )],
        ),
    );
    let ep = w
        .engine
        .add_episode(
            &g.name,
            AddEpisode::new(
                "Alice likes Acme",
                SourceKind::Text,
                t("2024-01-01T00:00:00Z"),
            ),
        )
        .await
        .unwrap();
    let out = w.engine.add_triplet(&g.name, alice_acme()).await.unwrap();
    let ids: Vec<_> = ep.entities.iter().map(|e| e.uuid).collect();
    assert!(ids.contains(&out.source.uuid) && ids.contains(&out.target.uuid));
    assert_eq!(count(&g, "MATCH (n:Entity) RETURN count(n) AS n").await, 2);
    // Removing the episode keeps the entities the triplet's fact still touches.
    let removal = w
        .engine
        .remove_episode(&g.name, ep.episode.uuid)
        .await
        .unwrap();
    assert_eq!((removal.facts_deleted, removal.entities_deleted), (1, 0));
    assert_eq!(count(&g, "MATCH (n:Entity) RETURN count(n) AS n").await, 2);
}

#[tokio::test]
async fn invalid_triplets_are_rejected_before_anything_is_written() {
    let g = TestGraph::new("triplet-invalid").await;
    let w = World::new(&g.db, Rules::default());
    let mut no_fact = alice_acme();
    no_fact.fact = " ".into();
    let mut backwards = alice_acme();
    backwards.invalid_at = Some(t("2023-01-01T00:00:00Z"));
    for (triplet, field) in [
        (
            Triplet::new(TripletEntity::new(" "), "x", TripletEntity::new("B"), "f"),
            "source.name",
        ),
        (
            Triplet::new(
                TripletEntity::new("A"),
                "x",
                TripletEntity::new("B").label("Not a label"),
                "f",
            ),
            "target.label",
        ),
        (
            Triplet::new(
                TripletEntity::new("A").label("Episodic"),
                "x",
                TripletEntity::new("B"),
                "f",
            ),
            "source.label",
        ),
        (no_fact, "fact"),
        (backwards, "invalid_at"),
    ] {
        match w.engine.add_triplet(&g.name, triplet).await {
            Err(Error::InvalidInput { field: f, .. }) => assert_eq!(f, field),
            other => panic!("expected invalid {field}, got {other:?}"),
        }
    }
    assert!(!g.db.list_graphs().await.unwrap().contains(&g.name));
    assert!(matches!(
        Engine::episodes_only(g.db.clone())
            .add_triplet(&g.name, alice_acme())
            .await,
        Err(Error::Config { .. })
    ));
}
