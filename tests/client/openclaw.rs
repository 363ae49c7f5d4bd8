//! The OpenClaw-compatible tool set (`gralkor::agent::openclaw`, test-trees/tools.md),
//! on both clients: the twin, and the offline native client (an embedder, no language
//! model: fact searches answer from the episodes) on the shared embedded FalkorDB.

use crate::common;

use std::sync::Arc;

use common::ingest::CountingEmbedder;
use gralkor::NativeStorage;
use gralkor::agent::openclaw::ToolSet;
use gralkor::agent::tools::{ForgetTarget, ToolContext};
use gralkor::client::{Client, InMemoryClient, NativeClient, OperatorId};
use gralkor::graph::Engine;
use gralkor::runtime::{Runtime, RuntimeConfig};
use gralkor::{Error, Result};
use serde_json::{Value, json};

/// A runtime with a fresh application Destination (the shared server outlives a test).
fn runtime() -> (Runtime, String) {
    let team = format!("team-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    (
        Runtime::new(RuntimeConfig::new().destination(team.clone())).unwrap(),
        team,
    )
}

#[track_caller]
fn assert_invalid(result: Result<String>, field: &str) {
    match result {
        Err(Error::InvalidInput { field: f, rule }) => assert_eq!(f, field, "{rule}"),
        other => panic!("expected invalid `{field}`, got {other:?}"),
    }
}

#[test]
fn the_openclaw_tools_are_named_as_the_plugin_and_strict_mode_compatible() {
    let tools = ToolSet::OpenClaw.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "memory_recall",
            "memory_store",
            "memory_forget",
            "memory_status"
        ]
    );
    for t in &tools {
        let p = &t.parameters;
        assert_eq!(p["additionalProperties"], false, "{}", t.name);
        let properties: Vec<&String> = p["properties"].as_object().unwrap().keys().collect();
        let required: Vec<&str> = p["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for key in properties {
            assert!(
                required.contains(&key.as_str()),
                "{}.{key} is required",
                t.name
            );
        }
    }
    let store = &tools[1].parameters["properties"];
    for optional in ["source_description", "involves", "group_id", "longTerm"] {
        assert!(
            store[optional]["type"]
                .as_array()
                .unwrap()
                .contains(&json!("null")),
            "{optional} is nullable"
        );
    }
    let id = uuid::Uuid::new_v4();
    assert_eq!(
        ToolSet::OpenClaw
            .forget_target(&json!({"episode_id": id.to_string()}))
            .unwrap(),
        ForgetTarget::Episode(id, None)
    );
}

fn store_args(content: &str, group: Option<&str>) -> Value {
    json!({"content": content, "source_description": null, "involves": ["agent:bot", "ada"],
           "group_id": group, "longTerm": null})
}

async fn recall_and_store(client: Arc<dyn Client>, team: &str, exact_matching: bool) {
    let op = OperatorId::new(format!("op-{}", uuid::Uuid::new_v4())).unwrap();
    let ctx = ToolContext::new(op);
    let set = ToolSet::OpenClaw;
    for (i, text) in ["first", "second", "third"].iter().enumerate() {
        let group = if i == 1 { Some(team) } else { None };
        let ack = set
            .call(
                client.as_ref(),
                &ctx,
                "memory_store",
                &store_args(&format!("Zqkiwi {text} note."), group),
            )
            .await
            .unwrap();
        assert_eq!(ack, "Ingesting.");
        // One at a time, so their times order them.
        client.await_background_writes().await;
    }
    let all = set
        .call(
            client.as_ref(),
            &ctx,
            "memory_recall",
            &json!({"query": "zqkiwi", "limit": null, "scope": null}),
        )
        .await
        .unwrap();
    assert!(all.starts_with("Facts:\n"), "{all}");
    let order: Vec<usize> = ["third", "second", "first"]
        .iter()
        .map(|w| all.find(&format!("Zqkiwi {w} note.")).expect(w))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "newest first: {all}");
    // Described `conversation` by default; a direct source shows the caller's text.
    assert!(
        all.contains("(source: document — conversation; episode: "),
        "{all}"
    );

    let two = set
        .call(
            client.as_ref(),
            &ctx,
            "memory_recall",
            &json!({"query": "zqkiwi", "limit": 2, "scope": "long-term"}),
        )
        .await
        .unwrap();
    assert_eq!(
        two.lines().filter(|l| l.starts_with("- ")).count(),
        2,
        "{two}"
    );
    assert!(!two.contains("Zqkiwi first note."), "{two}");

    if exact_matching {
        let nothing = set
            .call(
                client.as_ref(),
                &ctx,
                "memory_recall",
                &json!({"query": "zqnothingatall", "limit": null, "scope": "all"}),
            )
            .await
            .unwrap();
        assert_eq!(nothing, "No relevant memories found.");
    }

    assert_invalid(
        set.call(
            client.as_ref(),
            &ctx,
            "memory_recall",
            &json!({"query": "x", "limit": null, "scope": "session"}),
        )
        .await,
        "memory_recall.arguments.scope",
    );
    assert_invalid(
        set.call(
            client.as_ref(),
            &ctx,
            "memory_recall",
            &json!({"query": "x", "limit": 0, "scope": null}),
        )
        .await,
        "memory_recall.arguments.limit",
    );
    let mut short_term = store_args("x", None);
    short_term["longTerm"] = json!(false);
    assert_invalid(
        set.call(client.as_ref(), &ctx, "memory_store", &short_term)
            .await,
        "memory_store.arguments.longTerm",
    );
    assert_invalid(
        set.call(
            client.as_ref(),
            &ctx,
            "memory_store",
            &store_args("x", Some("nowhere")),
        )
        .await,
        "route.destination",
    );
    assert_invalid(
        set.call(client.as_ref(), &ctx, "memory_search", &json!({}))
            .await,
        "tool",
    );
}

#[tokio::test]
async fn the_openclaw_tool_set_recalls_and_stores_on_the_twin() {
    let (runtime, team) = runtime();
    recall_and_store(Arc::new(InMemoryClient::with_runtime(runtime)), &team, true).await;
}

#[tokio::test]
async fn the_openclaw_tool_set_recalls_and_stores_on_the_native_client() {
    let engine = Engine::without_llm(common::db().await, Arc::new(CountingEmbedder::new()));
    let (runtime, team) = runtime();
    // Hybrid search may rank anything by meaning: no "finds nothing" check here.
    recall_and_store(
        Arc::new(NativeClient::from_parts(
            runtime,
            NativeStorage::new(engine),
        )),
        &team,
        false,
    )
    .await;
}
