//! Claims across writers and the model-cost bound of add_episode
//! (test-trees/graph-ingest.md).

mod common;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::TestGraph;
use common::graph::t;
use common::ingest::{CountingEmbedder, Rules, World, answer, extraction};
use gralkor::falkordb::{Params, Value};
use gralkor::graph::{AddEpisode, Engine, EngineOptions, OutcomeStatus, SourceKind};
use gralkor::llm::{GenerateRequest, Generation, LanguageModel, ModelSize, TokenUsage};
use gralkor::ontology::{EntityMode, EntityType, Field, Ontology, RelationshipMode};
use gralkor::{Error, Result};
use tokio::sync::{Notify, Semaphore};
use uuid::Uuid;

/// A model that answers by `rules` but holds every extraction call until the test
/// opens the gate, announcing that it is waiting.
#[derive(Debug, Clone)]
struct GatedModel {
    rules: Arc<Rules>,
    entered: Arc<Notify>,
    gate: Arc<Semaphore>,
}

#[async_trait]
impl LanguageModel for GatedModel {
    async fn generate(&self, request: &GenerateRequest) -> Result<Generation> {
        if request.schema.name == "extraction" {
            self.entered.notify_one();
            let _permit = self.gate.acquire().await.expect("gate open");
        }
        Ok(Generation {
            value: answer(&self.rules, request)?,
            usage: TokenUsage::default(),
            repaired: false,
        })
    }
    fn provider(&self) -> &str {
        "gated"
    }
    fn model(&self, _: ModelSize) -> &str {
        "gated"
    }
}

fn gated(rules: Rules, lease: Duration) -> (Engine, Arc<Notify>, Arc<Semaphore>) {
    let entered = Arc::new(Notify::new());
    let gate = Arc::new(Semaphore::new(0));
    let model = GatedModel {
        rules: Arc::new(rules),
        entered: entered.clone(),
        gate: gate.clone(),
    };
    let mut options = EngineOptions::default();
    options.lease = lease;
    let engine =
        Engine::new(Arc::new(model), Arc::new(CountingEmbedder::new())).with_options(options);
    (engine, entered, gate)
}

fn story() -> Rules {
    let rules = Rules::default();
    rules.extraction(
        "Kim",
        extraction(
            &[("Kim", 0), ("Oslo", 0)],
            &[("Kim", "lives in", "Oslo", "Kim lives in Oslo.", None, None)],
        ),
    );
    rules
}

fn request(id: Uuid) -> AddEpisode {
    AddEpisode::new(
        "Kim: I live in Oslo",
        SourceKind::Message,
        t("2024-01-01T00:00:00Z"),
    )
    .uuid(id)
}

async fn count(g: &TestGraph, query: &str) -> i64 {
    let res = g.db.ro_query(&g.name, query, &Params::new()).await.unwrap();
    res.get(0, "n").and_then(Value::as_int).unwrap()
}

#[tokio::test]
async fn a_second_writer_is_refused_while_the_first_holds_a_live_claim() {
    let g = TestGraph::new("claim-busy").await;
    let (first, entered, gate) = gated(story(), Duration::from_secs(60));
    let second = World::new(story()).engine; // another process: its own queue and id
    let id = Uuid::new_v4();
    let (db, name) = (g.db.clone(), g.name.clone());
    let running = tokio::spawn(async move { first.add_episode(&db, &name, request(id)).await });
    entered.notified().await;
    match second.add_episode(&g.db, &g.name, request(id)).await {
        Err(Error::EpisodeBusy { uuid }) => assert_eq!(uuid, id),
        other => panic!("expected busy, got {other:?}"),
    }
    gate.add_permits(1);
    let done = running.await.unwrap().unwrap();
    assert_eq!(done.status, OutcomeStatus::Completed);
    let replay = second
        .add_episode(&g.db, &g.name, request(id))
        .await
        .unwrap();
    assert_eq!(replay.status, OutcomeStatus::Replayed);
    assert_eq!(
        count(&g, "MATCH ()-[f:RELATES_TO]->() RETURN count(f) AS n").await,
        1
    );
}

#[tokio::test]
async fn a_writer_whose_lease_lapsed_and_was_taken_over_cannot_commit() {
    let g = TestGraph::new("claim-fence").await;
    // A zero lease lapses at once: the second writer may take the claim over.
    let (first, entered, gate) = gated(story(), Duration::ZERO);
    let second = World::new(story()).engine;
    let id = Uuid::new_v4();
    let (db, name) = (g.db.clone(), g.name.clone());
    let running = tokio::spawn(async move { first.add_episode(&db, &name, request(id)).await });
    entered.notified().await;
    let taken = second
        .add_episode(&g.db, &g.name, request(id))
        .await
        .unwrap();
    assert_eq!(taken.status, OutcomeStatus::Completed);
    gate.add_permits(1);
    match running.await.unwrap() {
        Err(Error::ClaimLost { uuid }) => assert_eq!(uuid, id),
        other => panic!("expected the fence to stop the first writer, got {other:?}"),
    }
    assert_eq!(
        count(&g, "MATCH ()-[f:RELATES_TO]->() RETURN count(f) AS n").await,
        1
    );
    assert_eq!(count(&g, "MATCH (n:Entity) RETURN count(n) AS n").await, 2);
    assert_eq!(
        count(&g, "MATCH (e:Episodic) RETURN max(e.generation) AS n").await,
        2,
        "two claims were made"
    );
}

/// Seeds a graph in which the next episode needs every follow-up call: an ambiguous
/// low-information name (entity resolution), facts with same-endpoint candidates (fact
/// resolution) and a typed entity with fields that learned something (details).
async fn bound_for(facts: usize) {
    let g = TestGraph::new(&format!("bound-{facts}")).await;
    let rules = Rules {
        same_entity: Some(Arc::new(|_, _| false)),
        contradicts: Some(Arc::new(|new, old| {
            new.contains("leads") && old.contains("leads")
        })),
        ..Rules::default()
    };
    let w = World::new(rules);
    w.rules
        .attributes
        .lock()
        .unwrap()
        .push(("Person".into(), serde_json::json!({"age": 50})));
    let ontology = Ontology::builder(EntityMode::Open, RelationshipMode::Open)
        .entity(EntityType::new("Person").field(Field::integer("age")))
        .build()
        .unwrap();
    let names: Vec<String> = (0..facts).map(|i| format!("Project Number {i}")).collect();
    let mut seed_entities: Vec<(&str, i64)> = vec![("Hugo Lindqvist", 1)];
    seed_entities.extend(names.iter().map(|n| (n.as_str(), 0)));
    let seed_facts: Vec<String> = names
        .iter()
        .map(|n| format!("Hugo Lindqvist leads {n}."))
        .collect();
    let seed: Vec<_> = names
        .iter()
        .zip(&seed_facts)
        .map(|(n, f)| {
            (
                "Hugo Lindqvist",
                "leads",
                n.as_str(),
                f.as_str(),
                Some("2024-01-01T00:00:00Z"),
                None,
            )
        })
        .collect();
    w.rules
        .extraction("seed", extraction(&seed_entities, &seed));
    let mut entities = seed_entities.clone();
    entities.push(("Al", 0));
    let new_facts: Vec<String> = names
        .iter()
        .map(|n| format!("Hugo Lindqvist now leads {n} with Al."))
        .collect();
    let next: Vec<_> = names
        .iter()
        .zip(&new_facts)
        .map(|(n, f)| {
            (
                "Hugo Lindqvist",
                "leads",
                n.as_str(),
                f.as_str(),
                Some("2025-01-01T00:00:00Z"),
                None,
            )
        })
        .collect();
    w.rules.extraction("next", extraction(&entities, &next));
    w.engine
        .add_episode(
            &g.db,
            &g.name,
            AddEpisode::new("seed", SourceKind::Text, t("2024-01-01T00:00:00Z"))
                .ontology(ontology.clone()),
        )
        .await
        .unwrap();
    let (calls, requests) = (w.model.calls().len(), w.embedder.requests());
    let out = w
        .engine
        .add_episode(
            &g.db,
            &g.name,
            AddEpisode::new("next", SourceKind::Text, t("2025-01-01T00:00:00Z")).ontology(ontology),
        )
        .await
        .unwrap();
    assert_eq!(out.facts.len(), facts);
    assert_eq!(
        out.invalidated.len(),
        facts,
        "each new lead ends the old one"
    );
    assert_eq!(out.usage.llm_calls, 4, "{facts} facts");
    assert_eq!(w.model.calls().len() - calls, 4, "{facts} facts");
    for schema in [
        "extraction",
        "entity_resolution",
        "fact_resolution",
        "entity_details",
    ] {
        assert_eq!(
            w.model.calls_for(schema).len(),
            if schema == "extraction" || schema == "entity_details" {
                2
            } else {
                1
            },
            "{schema}"
        );
    }
    assert_eq!(out.usage.embedding_calls, 1);
    assert_eq!(w.embedder.requests() - requests, 1);
}

#[tokio::test]
async fn an_episode_yielding_1_fact_costs_at_most_4_model_calls_and_1_embedding_request() {
    bound_for(1).await;
}

#[tokio::test]
async fn an_episode_yielding_10_facts_costs_at_most_4_model_calls_and_1_embedding_request() {
    bound_for(10).await;
}

#[tokio::test]
async fn an_episode_yielding_40_facts_costs_at_most_4_model_calls_and_1_embedding_request() {
    bound_for(40).await;
}
