//! Dump and restore (`Engine::dump`, `Engine::restore`) on embedded servers of their
//! own (the shared server holds other tests' graphs): a graph with an invalidated fact,
//! communities, a Reflection artefact, a pending capture and an authorizer
//! relationship is dumped, restored into an empty server and dumped again — the same
//! bytes; restores into a non-empty server and of an unknown version are refused.
//! Mirrors `test-trees/dump.md`.

use std::sync::Arc;

use gralkor::NativeStorage;
use gralkor::access::{Authorizer, EmbeddedAuthorizer, Relationship, Subject};
use gralkor::agent::capture::{Capture, CaptureBuffer, CaptureConfig};
use gralkor::agent::turn::Turn;
use gralkor::client::{Client, NativeClient, OperatorId, ReflectOptions};
use gralkor::falkordb::{EmbeddedConfig, FalkorConfig, FalkorDb};
use gralkor::graph::{AddEpisode, CommunityOptions, SourceKind, Timestamp};
use gralkor::llm::doubles::ScriptedModel;
use gralkor::reflection::runner::Invocation;
use gralkor::reflection::{Reflection, Step, artefact_uuid};
use gralkor::runtime::{Runtime, RuntimeConfig};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::common::ingest::{Rules, World, extraction};

/// A server of its own in a fresh data directory.
async fn server() -> (tempfile::TempDir, FalkorDb) {
    let dir = tempfile::tempdir().unwrap();
    let db = FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new(dir.path())))
        .await
        .expect("starting an embedded FalkorDB");
    (dir, db)
}

fn t(s: &str) -> Timestamp {
    Timestamp::parse_rfc3339(s).unwrap()
}

fn lines(dump: &[u8]) -> Vec<Value> {
    std::str::from_utf8(dump)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Fills `world`'s server: facts (one invalidated by a later one) and communities in
/// `notes`, a Reflection's artefact in `reviews`, a pending capture and a group
/// membership.
async fn fill(world: &World) {
    let engine = &world.engine;
    world.rules.extraction(
        "Lisbon",
        extraction(
            &[("Ada", 0), ("Lisbon", 0)],
            &[(
                "Ada",
                "LIVES_IN",
                "Lisbon",
                "Ada lives in Lisbon.",
                Some("2024-01-01T00:00:00Z"),
                None,
            )],
        ),
    );
    world.rules.extraction(
        "Porto",
        extraction(
            &[("Ada", 0), ("Porto", 0), ("Acme", 0)],
            &[
                (
                    "Ada",
                    "LIVES_IN",
                    "Porto",
                    "Ada lives in Porto.",
                    Some("2024-06-01T00:00:00Z"),
                    None,
                ),
                ("Ada", "WORKS_AT", "Acme", "Ada works at Acme.", None, None),
            ],
        ),
    );
    for (text, at) in [
        ("Ada: I live in Lisbon.", "2024-01-02T00:00:00Z"),
        (
            "Ada: I moved to Porto and work at Acme.",
            "2024-06-02T00:00:00Z",
        ),
    ] {
        engine
            .add_episode(
                "notes",
                AddEpisode::new(text, SourceKind::Message, t(at)).source_description("chat"),
            )
            .await
            .unwrap();
    }
    engine
        .build_communities("notes", &CommunityOptions::default())
        .await
        .unwrap();

    // A Reflection's artefact, through the client over the same engine.
    let reflection = Reflection::new("release-review", "reviews")
        .step(Step::new("summarise", "Summarise the release.").typed("summary", "string"));
    let runtime = Runtime::new(
        RuntimeConfig::new()
            .destination("reviews")
            .reflection(reflection),
    )
    .unwrap();
    let client = NativeClient::from_parts(runtime, NativeStorage::new(engine.clone()));
    let op = OperatorId::new("op-dump").unwrap();
    let model = ScriptedModel::new().answer("step_summarise", json!({"summary": "ship it"}));
    let (tx, rx) = oneshot::channel();
    client
        .reflect(
            "release-review",
            Invocation::new("inv-1", op.clone()),
            ReflectOptions::new()
                .model(Arc::new(model))
                .on_complete(move |c| {
                    let _ = tx.send(c);
                }),
        )
        .await
        .unwrap();
    rx.await.unwrap();
    client.await_reflections().await;

    // A capture still pending, and a group membership.
    let buffer = CaptureBuffer::native(&client, CaptureConfig::new())
        .await
        .unwrap();
    buffer
        .append(Capture::new(
            "session-1",
            op.clone(),
            "Susu",
            "Ada",
            Turn::completed("what changed?", ["tool clock → now"], "Ada moved."),
        ))
        .await
        .unwrap();
    EmbeddedAuthorizer::new(engine.db().clone())
        .write_relationships(&[
            Relationship::member("team-x", &Subject::person("ada").unwrap()).unwrap(),
        ])
        .await
        .unwrap();
}

/// The dump of the filled server, with the server and its world.
async fn filled() -> (tempfile::TempDir, World, Vec<u8>) {
    let (dir, db) = server().await;
    let world = World::new(
        &db,
        Rules {
            contradicts: Some(Arc::new(|new, old| {
                new.contains("lives in") && old.contains("lives in")
            })),
            ..Rules::default()
        },
    );
    fill(&world).await;
    let mut dump = Vec::new();
    world.engine.dump(&mut dump).await.unwrap();
    (dir, world, dump)
}

/// The first line where two dumps differ, for a readable failure.
fn first_difference(a: &[u8], b: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}:\n  {x}\n  {y}", i + 1);
        }
    }
    format!("{} lines against {}", a.lines().count(), b.lines().count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dump_restore_dump_is_byte_identical_and_holds_every_kind_of_record() {
    let (_dir, world, first) = filled().await;
    let records = lines(&first);
    assert_eq!(
        records[0],
        json!({"record": "header", "format": "gralkor-dump", "version": 1})
    );
    let graphs: Vec<&str> = records
        .iter()
        .filter(|r| r["record"] == "graph")
        .map(|r| r["graph"].as_str().unwrap())
        .collect();
    assert_eq!(
        graphs,
        [
            "gralkor/access",
            "gralkor/capture-buffer",
            "notes",
            "reviews"
        ]
    );
    let has_label = |r: &Value, l: &str| {
        r["labels"]
            .as_array()
            .is_some_and(|ls| ls.iter().any(|x| x == l))
    };
    // The invalidated fact keeps its four times; the current one has none retired.
    let facts: Vec<&Value> = records
        .iter()
        .filter(|r| r["record"] == "relationship" && r["type"] == "RELATES_TO")
        .collect();
    let lisbon = facts
        .iter()
        .find(|f| f["properties"]["fact"] == "Ada lives in Lisbon.")
        .expect("the Lisbon fact");
    for time in ["valid_at", "invalid_at", "created_at", "expired_at"] {
        assert!(lisbon["properties"][time].is_i64(), "{time}: {lisbon}");
    }
    assert!(lisbon["properties"]["fact_embedding"]["vecf32"].is_array());
    assert!(lisbon["properties"]["episodes"].is_array());
    let porto = facts
        .iter()
        .find(|f| f["properties"]["fact"] == "Ada lives in Porto.")
        .expect("the Porto fact");
    assert!(porto["properties"].get("invalid_at").is_none(), "{porto}");
    assert!(records.iter().any(|r| has_label(r, "Community")));
    assert!(records.iter().any(|r| r["type"] == "HAS_MEMBER"));
    assert!(records.iter().any(|r| r["type"] == "MENTIONS"));
    let artefact = artefact_uuid("op-dump", "inv-1", "release-review").to_string();
    assert!(
        records
            .iter()
            .any(|r| has_label(r, "Episodic") && r["properties"]["uuid"] == artefact.as_str()),
        "the artefact's episode"
    );
    assert!(records.iter().any(|r| has_label(r, "PendingTurn")));
    assert!(records.iter().any(|r| has_label(r, "Obj")));
    assert!(
        records
            .iter()
            .any(|r| r["record"] == "index" && r["kind"] == "vector")
    );
    let end = records.last().unwrap();
    assert_eq!(end["record"], "end");

    // Restored into an empty server and dumped again: the same bytes.
    let (_dir2, db2) = server().await;
    let target = World::new(&db2, Rules::default());
    let restored = target
        .engine
        .restore(&mut first.as_slice(), false, false)
        .await
        .unwrap();
    assert_eq!(restored.nodes, end["nodes"].as_u64().unwrap());
    assert_eq!(
        restored.relationships,
        end["relationships"].as_u64().unwrap()
    );
    let mut second = Vec::new();
    target.engine.dump(&mut second).await.unwrap();
    assert!(first == second, "{}", first_difference(&first, &second));
    assert_eq!(
        target.engine.counts("notes").await.unwrap(),
        world.engine.counts("notes").await.unwrap()
    );

    // Restoring again is refused: the server is not empty, and with
    // `into_existing` the dump's graphs exist already; nothing was written.
    let e = target
        .engine
        .restore(&mut first.as_slice(), false, false)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs a server without graphs"), "{e}");
    let e = target
        .engine
        .restore(&mut first.as_slice(), true, false)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dump line 2") && e.contains("graph `gralkor/access` exists"),
        "{e}"
    );
    // A dump of an unknown version is refused naming its line, before the target is
    // even looked at.
    let text = String::from_utf8(first.clone()).unwrap();
    let newer = text.replacen("\"version\":1", "\"version\":99", 1);
    let e = target
        .engine
        .restore(&mut newer.as_bytes(), true, false)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dump line 1") && e.contains("version 99 is not one this gralkor reads"),
        "{e}"
    );
    let mut third = Vec::new();
    target.engine.dump(&mut third).await.unwrap();
    assert!(first == third, "{}", first_difference(&first, &third));
    db2.shutdown().await.unwrap();
    world.engine.db().shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recomputed_embeddings_match_the_ones_ingestion_wrote() {
    let (_dir, world, first) = filled().await;
    // Embeddings recomputed by the same embedder are the ones ingestion wrote, so
    // the dump comes back byte for byte.
    let (_dir2, db2) = server().await;
    let target = World::new(&db2, Rules::default());
    target
        .engine
        .restore(&mut first.as_slice(), false, true)
        .await
        .unwrap();
    assert!(
        target.embedder.requests() > 0,
        "the embeddings were recomputed"
    );
    let mut second = Vec::new();
    target.engine.dump(&mut second).await.unwrap();
    assert!(first == second, "{}", first_difference(&first, &second));
    db2.shutdown().await.unwrap();
    world.engine.db().shutdown().await.unwrap();
}
