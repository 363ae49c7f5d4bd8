//! The agent loop of `examples/agent.rs` (`examples/support/agent_loop.rs`, included
//! here so the test drives the very code the example runs), with the real HTTP client
//! against a fake OpenAI-compatible provider on loopback, on both clients: the twin,
//! and the native client over a real embedded FalkorDB (offline engine, the FalkorDB
//! capture store). Mirrors `test-trees/agent-loop.md`.

#[path = "common/mod.rs"]
mod common;

#[path = "../examples/support/agent_loop.rs"]
mod agent_loop;

use std::collections::HashMap;
use std::time::Duration;

use agent_loop::{Agent, Endpoint};
use common::agent_memory::{Kind, memory, op};
use common::chat_provider::{answer, bodies, provider, tool_call};
use gralkor::agent::tools::memory_tools;
use gralkor::agent::turn::Message;
use gralkor::client::{Client, Content, EpisodeRecord, MemoryAdd, OperatorId, Search};
use serde_json::{Value, json};
use wiremock::MockServer;

const WAIT: Duration = Duration::from_secs(30);

fn endpoint(server: &MockServer) -> Endpoint {
    Endpoint::from_lookup(|k| match k {
        "OPENAI_BASE_URL" => Some(format!("{}/v1", server.uri())),
        "OPENAI_API_KEY" => Some("sk-test".into()),
        "GRALKOR_LLM_MODEL" => Some("openai:fake-model".into()),
        _ => None,
    })
    .unwrap()
    .unwrap()
}

/// Every episode of the operator's `personal` graph that mentions `word`.
async fn episodes(client: &dyn Client, op: &OperatorId, word: &str) -> Vec<EpisodeRecord> {
    client
        .search(&Search::new(op, word).destinations(["personal"]))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| r.hit.as_episode().cloned())
        .filter(|e| e.content.contains(word))
        .collect()
}

const PINNED: &str = r#"{"type":"function","function":{"name":"memory_search"}}"#;
const BLOCK_OPEN: &str = "<gralkor-memory trust=\"untrusted\">";

// agent loop › a turn searches, adds and answers; the provider sees the tools, the
// pinned first call and the injected block; the capture keeps neither the block nor
// the search results; the next session recalls what memory_add stored

async fn a_turn_searches_adds_and_answers_and_the_next_session_recalls_it(kind: Kind) {
    let (client, buffer) = memory(kind, "agent-loop").await;
    let op = op();
    client
        .memory_add(&MemoryAdd::new(
            &op,
            Content::conversation("Ada lives in Lisbon near the river."),
        ))
        .await
        .unwrap();
    client.await_background_writes().await;

    let server = provider(vec![
        tool_call("call_1", "memory_search", json!({"query": "Lisbon"})),
        tool_call(
            "call_2",
            "memory_add",
            json!({"content": "Ada keeps two beehives on the roof.", "source_kind": "document"}),
        ),
        answer("Yes, Lisbon. I will remember the beehives."),
        // Session 2.
        tool_call("call_3", "memory_search", json!({"query": "beehives roof"})),
        answer("Two beehives, on your roof."),
    ])
    .await;
    let agent = Agent::new(
        endpoint(&server),
        client.clone(),
        buffer.clone(),
        op.clone(),
        "Susu",
        "Ada",
    )
    .unwrap();

    let prompt = "Do I still live in Lisbon? And remember the beehives on my roof.";
    let turn = agent.turn("session-1", prompt).await.unwrap();
    assert_eq!(turn.text, "Yes, Lisbon. I will remember the beehives.");
    assert_eq!(turn.iterations, 3);
    let block = turn
        .memory_block
        .clone()
        .expect("recall found the seeded fact");
    assert!(block.starts_with(BLOCK_OPEN), "{block}");
    assert!(
        block.contains("Ada lives in Lisbon near the river."),
        "{block}"
    );

    // What the provider saw.
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 3);
    let tools: Vec<Value> = memory_tools().iter().map(|t| t.openai()).collect();
    let pinned: Value = serde_json::from_str(PINNED).unwrap();
    for (i, body) in sent.iter().enumerate() {
        assert_eq!(body["model"], "fake-model");
        assert_eq!(body["tools"], Value::Array(tools.clone()), "request {i}");
        if i == 0 {
            assert_eq!(body["tool_choice"], pinned);
        } else {
            assert!(body.get("tool_choice").is_none(), "request {i}: {body}");
        }
    }
    let user = sent[0]["messages"][1].clone();
    assert_eq!(user["role"], "user");
    assert_eq!(user["content"], format!("{block}\n\n{prompt}"));
    let search_result = sent[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(search_result["role"], "tool");
    assert_eq!(search_result["tool_call_id"], "call_1");
    let found = search_result["content"].as_str().unwrap();
    assert!(
        found.contains("Ada lives in Lisbon near the river."),
        "{found}"
    );
    let add_result = sent[2]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(add_result["tool_call_id"], "call_2");
    assert_eq!(add_result["content"], "Ingesting.");

    // What was captured: the prompt and the answer; the search's result is dropped,
    // the injected block too.
    let pending = buffer.pending("session-1").await;
    assert_eq!(pending.len(), 1);
    let messages: Vec<Message> = pending[0]
        .messages()
        .iter()
        .map(|m| Message::new(m.role, m.content.trim()))
        .collect();
    assert_eq!(
        messages,
        [
            Message::user(prompt),
            Message::behaviour("tool memory_search"),
            Message::behaviour("tool memory_add → Ingesting."),
            Message::assistant("Yes, Lisbon. I will remember the beehives."),
        ]
    );
    buffer.flush_and_await("session-1", WAIT).await.unwrap();
    client.await_background_writes().await;
    let captured: Vec<EpisodeRecord> = episodes(client.as_ref(), &op, "still live")
        .await
        .into_iter()
        .filter(|e| e.source_description.starts_with("captured"))
        .collect();
    assert_eq!(captured.len(), 1, "{captured:?}");
    assert_eq!(
        captured[0].content,
        format!("Ada: {prompt}\nSusu: Yes, Lisbon. I will remember the beehives.")
    );
    assert!(!captured[0].content.contains("gralkor-memory"));
    assert!(!captured[0].content.contains("near the river"));
    // memory_add stored its content, once.
    assert_eq!(
        episodes(client.as_ref(), &op, "two beehives").await.len(),
        1
    );

    // Session 2, a new session id: recall brings back what memory_add stored.
    let prompt_2 = "What did I say about beehives on my roof?";
    let turn_2 = agent.turn("session-2", prompt_2).await.unwrap();
    assert_eq!(turn_2.text, "Two beehives, on your roof.");
    let block_2 = turn_2
        .memory_block
        .clone()
        .expect("recall before session 2");
    assert!(
        block_2.contains("Ada keeps two beehives on the roof."),
        "{block_2}"
    );
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 5);
    assert_eq!(
        sent[3]["messages"][1]["content"],
        format!("{block_2}\n\n{prompt_2}")
    );
    assert_eq!(
        sent[3]["tool_choice"], pinned,
        "pinned on session 2's first call"
    );
    assert!(sent[4].get("tool_choice").is_none());
    let searched = sent[4]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        searched["content"]
            .as_str()
            .unwrap()
            .contains("Ada keeps two beehives on the roof."),
        "{searched}"
    );

    buffer.shutdown(WAIT).await.unwrap();
    assert!(buffer.pending("session-2").await.is_empty(), "drained");
    assert_eq!(
        episodes(client.as_ref(), &op, "What did I say")
            .await
            .into_iter()
            .filter(|e| e.source_description.starts_with("captured"))
            .count(),
        1,
        "session 2 drained on shutdown"
    );
    client.shutdown().await.unwrap();
}

// agent loop › a failed request is captured as a failed turn and returned

async fn a_failed_request_is_captured_as_a_failed_turn(kind: Kind) {
    let (client, buffer) = memory(kind, "agent-loop").await;
    let op = op();
    let server = provider(vec![
        tool_call("call_1", "memory_search", json!({"query": "tea"})),
        Value::Null,
    ])
    .await;
    let agent = Agent::new(
        endpoint(&server),
        client.clone(),
        buffer.clone(),
        op,
        "Susu",
        "Ada",
    )
    .unwrap();
    let err = agent
        .turn("s-fail", "Which tea do I like best?")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            gralkor::Error::Provider {
                status: Some(500),
                ..
            }
        ),
        "{err:?}"
    );
    let pending = buffer.pending("s-fail").await;
    assert_eq!(pending.len(), 1);
    let messages = pending[0].messages();
    assert_eq!(messages[0], Message::user("Which tea do I like best?"));
    let last = messages.last().unwrap();
    assert!(
        last.content.starts_with("request failed: ") && last.content.contains("500"),
        "{last:?}"
    );
    assert!(
        messages
            .iter()
            .all(|m| m.role != gralkor::agent::turn::Role::Assistant)
    );
    buffer.shutdown(WAIT).await.unwrap();
    client.shutdown().await.unwrap();
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn in_memory() {
                super::$name(super::Kind::Twin).await
            }
            #[tokio::test]
            async fn native() {
                super::$name(super::Kind::Native).await
            }
        }
    )*};
}

both!(
    a_turn_searches_adds_and_answers_and_the_next_session_recalls_it,
    a_failed_request_is_captured_as_a_failed_turn,
);

// agent loop › the endpoint comes from the variables gralkor::Config reads

#[test]
fn the_endpoint_comes_from_the_config_variables() {
    let from = |pairs: &[(&str, &str)]| {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Endpoint::from_lookup(|k| map.get(k).cloned())
    };
    assert!(from(&[]).unwrap().is_none(), "no endpoint configured");
    assert!(from(&[("OPENAI_API_KEY", " ")]).unwrap().is_none());
    let openai = from(&[("OPENAI_API_KEY", "sk")]).unwrap().unwrap();
    assert_eq!(openai.base_url, agent_loop::OPENAI_BASE_URL);
    assert_eq!(openai.model, agent_loop::DEFAULT_MODEL);
    let local = from(&[
        ("OPENAI_BASE_URL", "http://localhost:11434/v1/"),
        ("GRALKOR_LLM_MODEL", "openai:qwen3"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(
        (local.base_url.as_str(), local.model.as_str(), local.api_key),
        ("http://localhost:11434/v1", "qwen3", None)
    );
    let err = from(&[
        ("OPENAI_API_KEY", "sk"),
        ("GRALKOR_LLM_MODEL", "google:gemini"),
    ])
    .unwrap_err();
    assert!(err.to_string().contains("GRALKOR_LLM_MODEL"), "{err}");
}
