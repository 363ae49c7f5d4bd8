//! Claims across writers and the model-cost bound of add_episode
//! (test-trees/graph-ingest.md).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::TestGraph;
use common::graph::t;
use common::ingest::{CountingEmbedder, Rules, World, answer, extraction};
use gralkor::falkordb::{FalkorDb, Params, Value};
use gralkor::graph::{AddEpisode, Engine, EngineOptions, OutcomeStatus, SourceKind};
use gralkor::llm::{GenerateRequest, Generation, LanguageModel, ModelSize, TokenUsage};
use gralkor::ontology::{EntityMode, EntityType, Field, Ontology, RelationshipMode};
use gralkor::{Error, Result};
use tokio::sync::{Notify, Semaphore};
use uuid::Uuid;

/// A model that answers by `rules` but holds every call of schema `held` until the
/// test opens the gate, announcing that it is waiting.
#[derive(Debug, Clone)]
struct GatedModel {
    rules: Arc<Rules>,
    held: &'static str,
    entered: Arc<Notify>,
    gate: Arc<Semaphore>,
}

#[async_trait]
impl LanguageModel for GatedModel {
    async fn generate(&self, request: &GenerateRequest) -> Result<Generation> {
        if request.schema.name == self.held {
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

/// An engine whose extraction calls wait at the gate.
fn gated(db: &FalkorDb, rules: Rules, lease: Duration) -> (Engine, Arc<Notify>, Arc<Semaphore>) {
    gated_at(db, "extraction", rules, lease)
}

/// An engine whose `held` calls wait at the gate.
fn gated_at(
    db: &FalkorDb,
    held: &'static str,
    rules: Rules,
    lease: Duration,
) -> (Engine, Arc<Notify>, Arc<Semaphore>) {
    let entered = Arc::new(Notify::new());
    let gate = Arc::new(Semaphore::new(0));
    let model = GatedModel {
        rules: Arc::new(rules),
        held,
        entered: entered.clone(),
        gate: gate.clone(),
    };
    let mut options = EngineOptions::default();
    options.lease = lease;
    let engine = Engine::new(
        db.clone(),
        Arc::new(model),
        Arc::new(CountingEmbedder::new()),
    )
    .with_options(options);
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
    let (first, entered, gate) = gated(&g.db, story(), Duration::from_secs(60));
    let second = World::new(&g.db, story()).engine; // another process: its own queue and id
    let id = Uuid::new_v4();
    let name = g.name.clone();
    let running = tokio::spawn(async move { first.add_episode(&name, request(id)).await });
    entered.notified().await;
    match second.add_episode(&g.name, request(id)).await {
        Err(Error::EpisodeBusy { uuid }) => assert_eq!(uuid, id),
        other => panic!("expected busy, got {other:?}"),
    }
    gate.add_permits(1);
    let done = running.await.unwrap().unwrap();
    assert_eq!(done.status, OutcomeStatus::Completed);
    let replay = second.add_episode(&g.name, request(id)).await.unwrap();
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
    let (first, entered, gate) = gated(&g.db, story(), Duration::ZERO);
    let second = World::new(&g.db, story()).engine;
    let id = Uuid::new_v4();
    let name = g.name.clone();
    let running = tokio::spawn(async move { first.add_episode(&name, request(id)).await });
    entered.notified().await;
    let taken = second.add_episode(&g.name, request(id)).await.unwrap();
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
    let w = World::new(&g.db, rules);
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

#[tokio::test]
async fn a_writer_that_dies_mid_episode_leaves_it_pending_for_resume_once_its_lease_lapses() {
    let g = TestGraph::new("claim-crash").await;
    // The dying writer's lease is zero, so it lapses at once (a real one lapses after
    // `EngineOptions::lease`).
    let (dying, entered, _gate) = gated(&g.db, story(), Duration::ZERO);
    let id = Uuid::new_v4();
    let name = g.name.clone();
    let running = tokio::spawn(async move { dying.add_episode(&name, request(id)).await });
    entered.notified().await;
    running.abort(); // the process dies between the durable write and the commit
    assert!(running.await.unwrap_err().is_cancelled());
    let pending = gralkor::graph::get_episode(&g.db, &g.name, id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(pending.state, gralkor::graph::EpisodeState::Pending);
    assert_eq!(count(&g, "MATCH (n:Entity) RETURN count(n) AS n").await, 0);

    let survivor = World::new(&g.db, story()).engine;
    let report = survivor.resume_pending(&g.name, None).await.unwrap();
    assert_eq!(report.completed.len(), 1);
    assert_eq!(report.completed[0].episode.uuid, id);
    assert_eq!(
        count(&g, "MATCH ()-[f:RELATES_TO]->() RETURN count(f) AS n").await,
        1
    );
}

#[tokio::test]
async fn resume_reports_an_episode_another_writer_holds_as_busy() {
    let g = TestGraph::new("claim-resume-busy").await;
    let (first, entered, gate) = gated(&g.db, story(), Duration::from_secs(60));
    let id = Uuid::new_v4();
    let name = g.name.clone();
    let running = tokio::spawn(async move { first.add_episode(&name, request(id)).await });
    entered.notified().await;
    let report = World::new(&g.db, story())
        .engine
        .resume_pending(&g.name, None)
        .await
        .unwrap();
    assert_eq!(report.busy, vec![id]);
    assert!(report.completed.is_empty() && report.failed.is_empty());
    gate.add_permits(1);
    running.await.unwrap().unwrap();
}

/// Waits (bounded) until `cond` holds.
async fn eventually<F, Fut>(deadline: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while start.elapsed() < deadline {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn a_falkordb_crash_and_restart_mid_episode_loses_nothing() {
    use gralkor::falkordb::{EmbeddedConfig, FalkorConfig};
    let dir = tempfile::Builder::new()
        .prefix("gralkor-ingest-crash-")
        .tempdir()
        .unwrap();
    let db = FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new(dir.path())))
        .await
        .unwrap();
    let server = db.embedded_server().unwrap().clone();
    let (engine, entered, gate) = gated(&db, story(), Duration::from_secs(60));
    let id = Uuid::new_v4();
    let running = tokio::spawn(async move { engine.add_episode("crash", request(id)).await });
    entered.notified().await; // the episode is durable; extraction is under way
    let old = server.pid().unwrap();
    assert!(
        std::process::Command::new("kill")
            .args(["-9", &old.to_string()])
            .status()
            .unwrap()
            .success()
    );
    assert!(
        eventually(Duration::from_secs(60), || async {
            matches!(server.pid(), Some(p) if p != old)
        })
        .await,
        "the supervisor restarted FalkorDB"
    );
    gate.add_permits(1);
    let out = running
        .await
        .unwrap()
        .expect("the episode completes across the restart");
    assert_eq!(out.status, OutcomeStatus::Completed);
    let stored = gralkor::graph::get_episode(&db, "crash", id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.state, gralkor::graph::EpisodeState::Complete);
    let facts = db
        .ro_query(
            "crash",
            "MATCH ()-[f:RELATES_TO]->() RETURN count(f) AS n",
            &Params::new(),
        )
        .await
        .unwrap();
    assert_eq!(facts.get(0, "n").and_then(Value::as_int), Some(1));
    db.shutdown().await.unwrap();
}

#[tokio::test]
async fn two_processes_creating_the_same_new_entity_at_once_make_one_node() {
    let g = TestGraph::new("claim-name-race").await;
    let rules = Rules::default();
    rules.extraction(
        "live",
        extraction(
            &[("Kim", 1), ("Oslo", 0)],
            &[("Kim", "lives in", "Oslo", "Kim lives in Oslo.", None, None)],
        ),
    );
    rules.extraction(
        "work",
        extraction(
            &[("Kim", 1), ("Oslo", 0)],
            &[("Kim", "works in", "Oslo", "Kim works in Oslo.", None, None)],
        ),
    );
    rules
        .attributes
        .lock()
        .unwrap()
        .push(("Person".into(), serde_json::json!({"age": 30})));
    let ontology = Ontology::builder(EntityMode::Open, RelationshipMode::Open)
        .entity(EntityType::new("Person").field(Field::integer("age")))
        .build()
        .unwrap();
    // Two engines are two processes: their own queues and writer ids. Both stop at
    // the details call (Kim is a Person who learned something), after reading the
    // candidates and before committing.
    let held = || {
        gated_at(
            &g.db,
            "entity_details",
            rules.clone(),
            Duration::from_secs(60),
        )
    };
    let ((a, reached_a, gate_a), (b, reached_b, gate_b)) = (held(), held());
    let ingest = |engine: Engine, text: &'static str| {
        let (name, ontology) = (g.name.clone(), ontology.clone());
        tokio::spawn(async move {
            engine
                .add_episode(
                    &name,
                    AddEpisode::new(text, SourceKind::Message, t("2024-01-01T00:00:00Z"))
                        .ontology(ontology),
                )
                .await
        })
    };
    let first = ingest(a, "Kim: I live in Oslo");
    let second = ingest(b, "Kim: I work in Oslo");
    // Both have resolved Kim and Oslo as new.
    reached_a.notified().await;
    reached_b.notified().await;
    gate_a.add_permits(1);
    let first = first.await.unwrap().unwrap();
    // The second's commit finds the names taken, writes nothing, resolves again
    // (details asked again) and commits onto the first's entities.
    gate_b.add_permits(1);
    let second = second.await.unwrap().unwrap();
    assert_eq!(first.status, OutcomeStatus::Completed);
    assert_eq!(second.status, OutcomeStatus::Completed);
    for name in ["kim", "oslo"] {
        assert_eq!(
            count(
                &g,
                &format!("MATCH (n:Entity {{name_key: '{name}'}}) RETURN count(n) AS n")
            )
            .await,
            1,
            "{name}"
        );
    }
    let uuids = |o: &gralkor::graph::EpisodeOutcome| {
        let mut u: Vec<Uuid> = o.entities.iter().map(|e| e.uuid).collect();
        u.sort();
        u
    };
    assert_eq!(uuids(&first), uuids(&second));
    // Both facts hang between the one Kim and the one Oslo; both episodes mention them.
    assert_eq!(
        count(
            &g,
            "MATCH (:Entity {name_key: 'kim'})-[f:RELATES_TO]->(:Entity {name_key: 'oslo'}) \
             RETURN count(f) AS n"
        )
        .await,
        2
    );
    assert_eq!(
        count(
            &g,
            "MATCH (:Episodic)-[m:MENTIONS]->(:Entity) RETURN count(m) AS n"
        )
        .await,
        4
    );
}
