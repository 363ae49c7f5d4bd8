//! The OpenAI client against a fake OpenAI on loopback: request bodies, parsing,
//! structured-output modes, repair, embeddings and reranking.

use crate::llm_support;

use gralkor::Error;
use gralkor::llm::openai::{OpenAi, OutputMode, TokenCapField};
use gralkor::llm::{
    Embedder, GenerateRequest, LanguageModel, Limiter, LimiterSettings, ModelSize, OutputSchema,
    Reranker, UsageMeter,
};
use llm_support::{
    Sequence, bodies, chat_reply, fake_provider, json_response, paused_policy, test_http,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer};

fn entities_schema() -> OutputSchema {
    OutputSchema::new(
        "extracted_entities",
        json!({
            "type": "object",
            "properties": {"entities": {"type": "array", "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "type_id": {"type": "integer"}},
                "required": ["name", "type_id"],
                "additionalProperties": false
            }}},
            "required": ["entities"],
            "additionalProperties": false
        }),
    )
}

fn request() -> GenerateRequest {
    GenerateRequest::new(entities_schema())
        .system("Extract entities.")
        .user("Ada met Grace in London.")
        .max_output_tokens(1000)
        .label("extract_nodes")
}

/// A connection to `server` with its own limiter and meter.
fn connect(server: &MockServer) -> OpenAi {
    OpenAi::builder("sk-test")
        .base_url(format!("{}/v1", server.uri()))
        .http_client(test_http())
        .retry(paused_policy())
        .limiter(Limiter::new("openai", LimiterSettings::default()))
        .usage(UsageMeter::new())
        .build()
        .unwrap()
}

async fn mount_chat(server: &MockServer, seq: &Sequence) {
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(seq.clone())
        .mount(server)
        .await;
}

const GOOD: &str =
    r#"{"entities": [{"name": "Ada", "type_id": 0}, {"name": "Grace", "type_id": 0}]}"#;

#[tokio::test]
async fn chat_sends_model_messages_strict_schema_and_bearer_key() {
    let server = fake_provider().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-test"))
        .respond_with(json_response(200, chat_reply(GOOD, 120, 30)))
        .mount(&server)
        .await;
    let llm = connect(&server).chat("gpt-4.1-mini");
    let answer = llm.generate(&request()).await.unwrap();
    assert_eq!(answer.value["entities"][1]["name"], "Grace");
    assert!(!answer.repaired);
    assert_eq!(
        (answer.usage.prompt_tokens, answer.usage.completion_tokens),
        (120, 30)
    );
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 1);
    // A custom base URL is "compatible server": `max_tokens`.
    assert_eq!(
        sent[0],
        json!({
            "model": "gpt-4.1-mini",
            "messages": [
                {"role": "system", "content": "Extract entities."},
                {"role": "user", "content": "Ada met Grace in London."}
            ],
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "extracted_entities", "schema": entities_schema().schema, "strict": true}},
            "max_tokens": 1000,
            "temperature": 0.0
        })
    );
}

#[tokio::test]
async fn a_keyless_compatible_server_gets_no_authorization_header() {
    let server = fake_provider().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(json_response(200, chat_reply(GOOD, 10, 5)))
        .mount(&server)
        .await;
    let llm = OpenAi::builder("")
        .base_url(format!("{}/v1", server.uri()))
        .http_client(test_http())
        .retry(paused_policy())
        .limiter(Limiter::new("openai", LimiterSettings::default()))
        .build()
        .unwrap()
        .chat("llama3.1");
    llm.generate(&request()).await.unwrap();
    let received = server.received_requests().await.unwrap();
    assert_eq!(received.len(), 1);
    assert!(received[0].headers.get("authorization").is_none());
    // OpenAI itself refuses to start without a key.
    let err = OpenAi::builder("  ").build().unwrap_err();
    assert!(
        matches!(&err, Error::Config { field, .. } if field == "OPENAI_API_KEY"),
        "{err:?}"
    );
}

#[tokio::test]
async fn chat_uses_the_small_model_for_small_requests_and_non_strict_for_optional_fields() {
    let server = fake_provider().await;
    mount_chat(
        &server,
        &Sequence::new(vec![json_response(200, chat_reply(r#"{"a": "x"}"#, 1, 1))]),
    )
    .await;
    let llm = connect(&server)
        .chat("gpt-4.1-mini")
        .with_small_model("gpt-4.1-nano");
    let loose = OutputSchema::new(
        "loose",
        json!({"type": "object", "properties": {"a": {"type": "string"}}}),
    );
    llm.generate(
        &GenerateRequest::new(loose)
            .user("hi")
            .size(ModelSize::Small),
    )
    .await
    .unwrap();
    let sent = bodies(&server).await;
    assert_eq!(sent[0]["model"], "gpt-4.1-nano");
    assert_eq!(sent[0]["response_format"]["json_schema"]["strict"], false);
    assert_eq!(llm.model(ModelSize::Small), "gpt-4.1-nano");
}

#[tokio::test]
async fn reasoning_models_get_no_temperature_and_gpt_5_5_gets_reasoning_effort_none() {
    let server = fake_provider().await;
    mount_chat(
        &server,
        &Sequence::new(vec![json_response(200, chat_reply(GOOD, 1, 1))]),
    )
    .await;
    let conn = connect(&server);
    for model in ["gpt-5.5", "gpt-5.6", "gpt-5-mini", "o3"] {
        conn.chat(model).generate(&request()).await.unwrap();
    }
    let sent = bodies(&server).await;
    for body in &sent {
        assert!(body.get("temperature").is_none(), "{body}");
    }
    assert_eq!(sent[0]["reasoning_effort"], "none");
    assert_eq!(sent[1]["reasoning_effort"], "none");
    assert!(sent[2].get("reasoning_effort").is_none());
    assert!(sent[3].get("reasoning_effort").is_none());
}

#[tokio::test]
async fn falls_back_to_json_object_when_the_server_rejects_json_schema() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![
        json_response(
            400,
            json!({"error": {"message": "Unsupported response_format type: json_schema"}}),
        ),
        json_response(200, chat_reply(GOOD, 1, 1)),
    ]);
    mount_chat(&server, &seq).await;
    let llm = connect(&server).chat("llama3.1");
    let answer = llm.generate(&request()).await.unwrap();
    assert_eq!(answer.value["entities"][0]["name"], "Ada");
    // The next request goes straight to json_object.
    llm.generate(&request()).await.unwrap();
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0]["response_format"]["type"], "json_schema");
    for body in &sent[1..] {
        assert_eq!(
            body["response_format"],
            json!({"type": "json_object", "schema": entities_schema().schema})
        );
        let last = body["messages"][1]["content"].as_str().unwrap();
        assert!(
            last.starts_with("Ada met Grace in London.\n\nRespond with only a JSON object"),
            "{last}"
        );
        assert!(
            last.contains("\"extracted_entities\"") || last.contains("`extracted_entities`"),
            "{last}"
        );
    }
}

/// What llama-cpp-python 0.3.36's server answers to `response_format: json_schema`.
fn llama_cpp_python_refusal() -> Value {
    json!({"error": {"message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), \
        'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}]",
        "type": "internal_server_error"}})
}

#[tokio::test]
async fn a_json_schema_refusal_with_a_500_costs_one_attempt_then_json_object_with_the_schema() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![
        json_response(500, llama_cpp_python_refusal()),
        json_response(200, chat_reply(GOOD, 1, 1)),
        json_response(200, chat_reply(GOOD, 1, 1)),
    ]);
    mount_chat(&server, &seq).await;
    let llm = connect(&server).chat("smollm2");
    assert_eq!(llm.json_schema_support(), None);
    let answer = llm.generate(&request()).await.unwrap();
    assert_eq!(answer.value["entities"][1]["name"], "Grace");
    assert_eq!(llm.json_schema_support(), Some(false));
    llm.generate(&request()).await.unwrap();
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 3, "the 500 was not retried as a fault");
    assert_eq!(sent[0]["response_format"]["type"], "json_schema");
    for body in &sent[1..] {
        assert_eq!(
            body["response_format"],
            json!({"type": "json_object", "schema": entities_schema().schema})
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_plain_500_gets_the_whole_retry_policy_and_json_schema_stays() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![
        json_response(500, json!({"error": {"message": "model is loading"}})),
        json_response(503, json!({"error": {"message": "busy"}})),
        json_response(200, chat_reply(GOOD, 1, 1)),
    ]);
    mount_chat(&server, &seq).await;
    let llm = connect(&server).chat("llama3.1");
    llm.generate(&request()).await.unwrap();
    assert_eq!(llm.json_schema_support(), Some(true));
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 3);
    assert!(
        sent.iter()
            .all(|b| b["response_format"]["type"] == "json_schema")
    );
}

#[tokio::test]
async fn the_sized_cap_and_the_ceiling_are_what_the_server_is_sent() {
    let server = fake_provider().await;
    mount_chat(
        &server,
        &Sequence::new(vec![
            json_response(200, chat_reply(GOOD, 1, 1)),
            json_response(200, chat_reply(GOOD, 1, 1)),
        ]),
    )
    .await;
    let sized = GenerateRequest::new(entities_schema())
        .system("Extract entities.")
        .user("Ada met Grace in London.")
        .label("extract_nodes");
    let cap = sized.output_cap();
    assert_eq!(
        cap, 512,
        "a short input gets the smallest sized cap, not 16,384"
    );
    let llm = connect(&server).chat("llama3.1");
    llm.generate(&sized).await.unwrap();
    llm.clone()
        .with_max_output_tokens(100)
        .generate(&sized)
        .await
        .unwrap();
    let sent = bodies(&server).await;
    assert_eq!(sent[0]["max_tokens"], 512);
    assert_eq!(sent[1]["max_tokens"], 100);
}

#[tokio::test]
async fn an_invalid_schema_error_is_returned_not_worked_around() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![json_response(
        400,
        json!({"error": {"message": "Invalid schema for response_format 'extracted_entities': bad"}}),
    )]);
    mount_chat(&server, &seq).await;
    let err = connect(&server)
        .chat("gpt-4.1-mini")
        .generate(&request())
        .await
        .unwrap_err();
    assert_eq!(seq.calls(), 1);
    assert!(
        matches!(
            err,
            Error::Provider {
                status: Some(400),
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn json_object_mode_states_the_schema_in_the_prompt() {
    let server = fake_provider().await;
    mount_chat(
        &server,
        &Sequence::new(vec![json_response(200, chat_reply(GOOD, 1, 1))]),
    )
    .await;
    let llm = connect(&server)
        .chat("llama3.1")
        .with_output_mode(OutputMode::JsonObject);
    llm.generate(&request()).await.unwrap();
    let body = &bodies(&server).await[0];
    // The schema rides along in llama.cpp's constrained form, and in the prompt.
    assert_eq!(
        body["response_format"],
        json!({"type": "json_object", "schema": entities_schema().schema})
    );
    let last = body["messages"][1]["content"].as_str().unwrap();
    let schema_text = serde_json::to_string_pretty(&entities_schema().schema).unwrap();
    assert!(last.ends_with(&schema_text), "{last}");
}

#[tokio::test]
async fn malformed_json_is_repaired_once() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![
        json_response(200, chat_reply("{\"entities\": [", 10, 5)),
        json_response(200, chat_reply(GOOD, 20, 7)),
    ]);
    mount_chat(&server, &seq).await;
    let conn = connect(&server);
    let answer = conn
        .chat("gpt-4.1-mini")
        .generate(&request())
        .await
        .unwrap();
    assert!(answer.repaired);
    assert_eq!(answer.usage.prompt_tokens, 30);
    assert_eq!(answer.usage.completion_tokens, 12);
    let sent = bodies(&server).await;
    let messages = sent[1]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(
        messages[2],
        json!({"role": "assistant", "content": "{\"entities\": ["})
    );
    let repair = messages[3]["content"].as_str().unwrap();
    assert!(
        repair.starts_with("Your previous answer could not be used: the answer is not valid JSON"),
        "{repair}"
    );
    let usage = conn.usage().snapshot();
    assert_eq!(usage.by_label["extract_nodes"].calls, 2);
    assert_eq!(usage.by_label["extract_nodes"].prompt_tokens, 30);
}

#[tokio::test]
async fn answer_invalid_against_the_schema_twice_is_an_error_naming_the_violation() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![json_response(
        200,
        chat_reply(r#"{"entities": [{"name": "Ada"}]}"#, 1, 1),
    )]);
    mount_chat(&server, &seq).await;
    let err = connect(&server)
        .chat("gpt-4.1-mini")
        .generate(&request())
        .await
        .unwrap_err();
    assert_eq!(seq.calls(), 2, "one attempt and one repair");
    let Error::ModelOutput { provider, message } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(provider, "openai");
    assert!(
        message.contains("/entities/0: missing required property `type_id`"),
        "{message}"
    );
    assert!(message.ends_with("(after one repair attempt)"), "{message}");
    let sent = bodies(&server).await;
    let repair = sent[1]["messages"][3]["content"].as_str().unwrap();
    assert!(
        repair.contains("missing required property `type_id`"),
        "{repair}"
    );
}

#[tokio::test]
async fn truncated_refused_and_filtered_answers_are_errors_without_repair() {
    let server = fake_provider().await;
    let mut truncated = chat_reply("{\"entities\": [", 1, 1000);
    truncated["choices"][0]["finish_reason"] = json!("length");
    let mut refused = chat_reply("", 1, 1);
    refused["choices"][0]["message"]["refusal"] = json!("I can't help with that.");
    let mut filtered = chat_reply("", 1, 1);
    filtered["choices"][0]["finish_reason"] = json!("content_filter");
    let seq = Sequence::new(vec![
        json_response(200, truncated),
        json_response(200, refused),
        json_response(200, filtered),
    ]);
    mount_chat(&server, &seq).await;
    let llm = connect(&server).chat("gpt-4.1-mini");
    let e1 = llm.generate(&request()).await.unwrap_err().to_string();
    let e2 = llm.generate(&request()).await.unwrap_err().to_string();
    let e3 = llm.generate(&request()).await.unwrap_err().to_string();
    assert_eq!(seq.calls(), 3, "no repair attempts");
    assert!(e1.contains("cut off at max_output_tokens = 1000"), "{e1}");
    assert!(
        e2.contains("the model refused: I can't help with that."),
        "{e2}"
    );
    assert!(e3.contains("blocked by the content filter"), "{e3}");
}

#[tokio::test]
async fn invalid_requests_are_rejected_before_any_call() {
    let server = fake_provider().await;
    let llm = connect(&server).chat("gpt-4.1-mini");
    let no_messages = GenerateRequest::new(entities_schema());
    let bad_schema = GenerateRequest::new(OutputSchema::new(
        "x",
        json!({"type": "object", "oneOf": []}),
    ))
    .user("u");
    let bad_name =
        GenerateRequest::new(OutputSchema::new("has space", json!({"type": "object"}))).user("u");
    for (req, field) in [
        (no_messages, "messages"),
        (bad_schema, "schema `x`"),
        (bad_name, "schema.name"),
    ] {
        match llm.generate(&req).await.unwrap_err() {
            Error::InvalidInput { field: f, .. } => assert_eq!(f, field),
            other => panic!("{other:?}"),
        }
    }
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn embeddings_are_split_into_batches_and_reassembled_in_order() {
    let server = fake_provider().await;
    // The fake embeds text "tN" as [N, N, N] and answers out of order.
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(header("authorization", "Bearer sk-test"))
        .respond_with(|req: &wiremock::Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap();
            let inputs = body["input"].as_array().unwrap();
            let mut data: Vec<Value> = inputs
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let n: f32 = t.as_str().unwrap()[1..].parse().unwrap();
                    json!({"object": "embedding", "index": i, "embedding": [n, n, n]})
                })
                .collect();
            data.reverse();
            json_response(
                200,
                json!({"data": data, "usage": {"prompt_tokens": inputs.len() * 2}}),
            )
        })
        .mount(&server)
        .await;
    let conn = connect(&server);
    let embedder = conn
        .embedder("my-embedder", Some(3))
        .unwrap()
        .with_batch_size(2);
    let texts: Vec<String> = (0..5).map(|i| format!("t{i}")).collect();
    let vectors = embedder.embed(&texts, "embed_nodes").await.unwrap();
    let expected: Vec<Vec<f32>> = (0..5).map(|i| vec![i as f32; 3]).collect();
    assert_eq!(vectors, expected);
    let mut batches: Vec<Value> = bodies(&server)
        .await
        .iter()
        .map(|b| b["input"].clone())
        .collect();
    batches.sort_by_key(|b| b[0].as_str().unwrap().to_string());
    assert_eq!(
        batches,
        vec![json!(["t0", "t1"]), json!(["t2", "t3"]), json!(["t4"])]
    );
    for body in bodies(&server).await {
        assert_eq!(body["model"], "my-embedder");
        assert!(
            body.get("dimensions").is_none(),
            "an unknown model's size is declared, not requested"
        );
    }
    let usage = conn.usage().snapshot();
    assert_eq!(usage.by_label["embed_nodes"].calls, 3);
    assert_eq!(usage.by_label["embed_nodes"].prompt_tokens, 10);
    assert!(embedder.embed(&[], "x").await.unwrap().is_empty());
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        3,
        "an empty batch sends nothing"
    );
}

#[tokio::test]
async fn shortened_embeddings_send_dimensions_and_wrong_sizes_are_errors() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![json_response(
        200,
        json!({"data": [{"index": 0, "embedding": [0.1, 0.2]}]}),
    )]);
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(seq)
        .mount(&server)
        .await;
    let conn = connect(&server);
    let short = conn.embedder("text-embedding-3-small", Some(2)).unwrap();
    assert_eq!(short.dimension(), 2);
    assert_eq!(
        short.embed(&["a".into()], "l").await.unwrap(),
        vec![vec![0.1, 0.2]]
    );
    assert_eq!(bodies(&server).await[0]["dimensions"], 2);
    let native = conn.embedder("text-embedding-3-small", None).unwrap();
    assert_eq!(native.dimension(), 1536);
    let err = native
        .embed(&["a".into()], "l")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("returned 2 numbers for text 0, expected 1536"),
        "{err}"
    );
}

#[tokio::test]
async fn reranker_scores_each_passage_from_true_false_logprobs() {
    let server = fake_provider().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(|req: &wiremock::Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap();
            let user = body["messages"][1]["content"].as_str().unwrap();
            let (p_true, p_false) = if user.contains("Ada founded Acme") { (0.9f64, 0.1f64) } else { (0.2, 0.6) };
            json_response(200, json!({
                "choices": [{"index": 0, "finish_reason": "length",
                    "message": {"role": "assistant", "content": "True"},
                    "logprobs": {"content": [{"token": "True", "logprob": p_true.ln(), "top_logprobs": [
                        {"token": "True", "logprob": p_true.ln()}, {"token": "False", "logprob": p_false.ln()}]}]}}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 1}
            }))
        })
        .mount(&server)
        .await;
    let conn = connect(&server);
    let reranker = conn.reranker("gpt-4.1-nano");
    let passages = vec![
        "It rained in Paris.".to_string(),
        "Ada founded Acme in 1990.".to_string(),
    ];
    let scores = reranker
        .rerank("Who founded Acme?", &passages, "search")
        .await
        .unwrap();
    assert!((scores[0] - 0.25).abs() < 1e-9, "{scores:?}");
    assert!((scores[1] - 0.9).abs() < 1e-9, "{scores:?}");
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2, "one request per passage");
    for body in &sent {
        assert_eq!(body["model"], "gpt-4.1-nano");
        assert_eq!(body["max_tokens"], 1);
        assert_eq!(body["logprobs"], true);
        assert!(
            body["messages"][1]["content"]
                .as_str()
                .unwrap()
                .contains("Who founded Acme?")
        );
    }
    assert_eq!(
        conn.usage().snapshot().by_label["search"].prompt_tokens,
        100
    );
    assert!(
        reranker
            .rerank("q", &[], "search")
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn max_completion_tokens_when_asked_and_keys_never_printed() {
    let server = fake_provider().await;
    mount_chat(
        &server,
        &Sequence::new(vec![json_response(200, chat_reply(GOOD, 1, 1))]),
    )
    .await;
    let conn = OpenAi::builder("sk-test")
        .base_url(format!("{}/v1/", server.uri()))
        .http_client(test_http())
        .token_cap_field(TokenCapField::MaxCompletionTokens)
        .build()
        .unwrap();
    conn.chat("gpt-5.5").generate(&request()).await.unwrap();
    let body = &bodies(&server).await[0];
    assert_eq!(body["max_completion_tokens"], 1000);
    assert!(body.get("max_tokens").is_none());
    assert_eq!(
        OpenAi::builder("k").build().unwrap().base_url(),
        "https://api.openai.com/v1"
    );
    let err = OpenAi::builder("  ").build().unwrap_err().to_string();
    assert_eq!(
        err,
        "invalid configuration: `OPENAI_API_KEY` must not be blank"
    );
    let debug = format!(
        "{:?} {:?}",
        OpenAi::builder("sk-secret-value"),
        conn.chat("m")
    );
    assert!(
        !debug.contains("sk-secret-value") && !debug.contains("sk-test"),
        "{debug}"
    );
}

#[tokio::test]
async fn chat_and_embedding_requests_have_budgets_of_their_own() {
    let server = fake_provider().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(json_response(
            200,
            json!({"data": [{"object": "embedding", "index": 0, "embedding": [1.0, 0.0, 0.0]}],
                   "usage": {"prompt_tokens": 1}}),
        ))
        .mount(&server)
        .await;
    mount_chat(
        &server,
        &Sequence::new(vec![json_response(200, chat_reply(GOOD, 10, 5))]),
    )
    .await;
    let one = LimiterSettings {
        max_in_flight: 1,
        ..LimiterSettings::default()
    };
    let conn = OpenAi::builder("sk-test")
        .base_url(format!("{}/v1", server.uri()))
        .http_client(test_http())
        .retry(paused_policy())
        .limiter(Limiter::new("openai", one))
        .embedding_limiter(Limiter::new("openai embeddings", one))
        .build()
        .unwrap();
    let embedder = conn.embedder("my-embedder", Some(3)).unwrap();
    let within = std::time::Duration::from_secs(20);
    // Every chat slot taken: an embedding still goes through.
    let chat_slot = conn.limiter().acquire(0).await;
    let vectors = tokio::time::timeout(within, embedder.embed(&["a".into()], "x"))
        .await
        .expect("an embedding does not wait for a chat slot")
        .unwrap();
    assert_eq!(vectors.len(), 1);
    assert_eq!(conn.embedding_limiter().stats().in_flight, 0);
    drop(chat_slot);
    // Every embedding slot taken: a chat request still goes through.
    let embedding_slot = conn.embedding_limiter().acquire(0).await;
    let answer = tokio::time::timeout(within, conn.chat("gpt-4.1-mini").generate(&request()))
        .await
        .expect("a chat request does not wait for an embedding slot")
        .unwrap();
    assert_eq!(answer.value["entities"][0]["name"], "Ada");
    drop(embedding_slot);
}
