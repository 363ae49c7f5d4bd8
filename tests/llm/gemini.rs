//! The Gemini client against a fake Gemini on loopback.

use crate::llm_support;

use gralkor::Error;
use gralkor::llm::gemini::Gemini;
use gralkor::llm::{
    Embedder, GenerateRequest, LanguageModel, Limiter, LimiterSettings, ModelSize, OutputSchema,
    UsageMeter,
};
use llm_support::{Sequence, bodies, fake_provider, json_response, paused_policy, test_http};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer};

fn facts_schema() -> OutputSchema {
    OutputSchema::new(
        "extracted_edges",
        json!({
            "type": "object",
            "properties": {"edges": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "fact": {"type": "string", "description": "the fact in one sentence"},
                    "valid_at": {"type": ["string", "null"]},
                    "kind": {"type": "string", "enum": ["state", "event"]}
                },
                "required": ["fact", "valid_at", "kind"],
                "additionalProperties": false
            }}},
            "required": ["edges"],
            "additionalProperties": false
        }),
    )
}

fn request() -> GenerateRequest {
    GenerateRequest::new(facts_schema())
        .system("Extract facts.")
        .user("Ada joined Acme in 2020.")
        .max_output_tokens(2048)
        .label("extract_edges")
}

fn connect(server: &MockServer) -> Gemini {
    Gemini::builder("AIza-test")
        .base_url(server.uri())
        .http_client(test_http())
        .retry(paused_policy())
        .limiter(Limiter::new("google", LimiterSettings::default()))
        .usage(UsageMeter::new())
        .build()
        .unwrap()
}

fn candidate(text: &str, finish: &str) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": finish, "index": 0}],
        "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 12, "thoughtsTokenCount": 3, "totalTokenCount": 55}
    })
}

const GOOD: &str = r#"{"edges": [{"fact": "Ada joined Acme", "valid_at": "2020-01-01T00:00:00Z", "kind": "event"}]}"#;

#[tokio::test]
async fn generate_content_sends_system_instruction_json_mime_and_translated_schema() {
    let server = fake_provider().await;
    Mock::given(method("POST"))
        .and(path("/models/gemini-3.1-flash-lite:generateContent"))
        .and(header("x-goog-api-key", "AIza-test"))
        .respond_with(json_response(200, candidate(GOOD, "STOP")))
        .mount(&server)
        .await;
    let llm = connect(&server).chat("models/gemini-3.1-flash-lite");
    let answer = llm.generate(&request()).await.unwrap();
    assert_eq!(answer.value["edges"][0]["kind"], "event");
    assert_eq!(
        (answer.usage.prompt_tokens, answer.usage.completion_tokens),
        (40, 15)
    );
    let sent = bodies(&server).await;
    // Gemini's propertyOrdering follows the schema's own order: sorted with serde_json's
    // default map, as written when a dependency turns on `preserve_order`.
    let schema = facts_schema();
    let declared: Vec<&str> = schema.schema["properties"]["edges"]["items"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = json!({
            "systemInstruction": {"parts": [{"text": "Extract facts."}]},
            "contents": [{"role": "user", "parts": [{"text": "Ada joined Acme in 2020."}]}],
            "generationConfig": {
                "responseMimeType": "application/json",
                "responseSchema": {
                    "type": "OBJECT",
                    "properties": {"edges": {"type": "ARRAY", "items": {
                        "type": "OBJECT",
                        "properties": {
                            "fact": {"type": "STRING", "description": "the fact in one sentence"},
                            "kind": {"type": "STRING", "enum": ["state", "event"], "format": "enum"},
                            "valid_at": {"type": "STRING", "nullable": true}
                        },
                        "propertyOrdering": ["fact", "kind", "valid_at"],
                        "required": ["fact", "valid_at", "kind"]
                    }}},
                    "propertyOrdering": ["edges"],
                    "required": ["edges"]
                },
                "maxOutputTokens": 2048
            }
    });
    expected["generationConfig"]["responseSchema"]["properties"]["edges"]["items"]["propertyOrdering"] =
        json!(declared);
    assert_eq!(sent[0], expected);
    // The key is a header, never part of the URL.
    let received = server.received_requests().await.unwrap();
    assert!(!received[0].url.as_str().contains("AIza-test"));
}

#[tokio::test]
async fn small_requests_use_the_small_model() {
    let server = fake_provider().await;
    Mock::given(method("POST"))
        .and(path("/models/gemini-2.5-flash-lite:generateContent"))
        .respond_with(json_response(200, candidate(GOOD, "STOP")))
        .mount(&server)
        .await;
    let llm = connect(&server)
        .chat("gemini-3-pro")
        .with_small_model("gemini-2.5-flash-lite");
    llm.generate(&request().size(ModelSize::Small))
        .await
        .unwrap();
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_safety_block_is_a_clear_error_without_repair() {
    let server = fake_provider().await;
    let blocked = json!({"candidates": [{"finishReason": "SAFETY", "index": 0, "safetyRatings": [
        {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true},
        {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]}]});
    let seq = Sequence::new(vec![json_response(200, blocked)]);
    Mock::given(method("POST"))
        .respond_with(seq.clone())
        .mount(&server)
        .await;
    let err = connect(&server)
        .chat("gemini-3.1-flash-lite")
        .generate(&request())
        .await
        .unwrap_err();
    assert_eq!(seq.calls(), 1);
    let Error::ModelOutput { provider, message } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(provider, "google");
    assert_eq!(
        message,
        "model `gemini-3.1-flash-lite`, step `extract_edges`: \
         the answer was blocked by Gemini (finishReason: SAFETY; flagged: HARM_CATEGORY_DANGEROUS_CONTENT)"
    );
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn a_blocked_prompt_is_a_clear_error() {
    let server = fake_provider().await;
    let blocked = json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {"promptTokenCount": 9}});
    Mock::given(method("POST"))
        .respond_with(json_response(200, blocked))
        .mount(&server)
        .await;
    let err = connect(&server)
        .chat("gemini-3.1-flash-lite")
        .generate(&request())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "google model output unusable: model `gemini-3.1-flash-lite`, step `extract_edges`: \
         the prompt was blocked by Gemini (blockReason: PROHIBITED_CONTENT)"
    );
}

#[tokio::test]
async fn a_truncated_answer_is_a_clear_error() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![json_response(
        200,
        candidate("{\"edges\": [{\"fact\": \"Ada", "MAX_TOKENS"),
    )]);
    Mock::given(method("POST"))
        .respond_with(seq.clone())
        .mount(&server)
        .await;
    let err = connect(&server)
        .chat("gemini-3.1-flash-lite")
        .generate(&request())
        .await
        .unwrap_err();
    assert_eq!(seq.calls(), 1);
    assert!(
        err.to_string()
            .contains("cut off at max_output_tokens = 2048"),
        "{err}"
    );
}

#[tokio::test]
async fn an_answer_off_schema_is_repaired_with_a_model_turn() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![
        json_response(
            200,
            candidate(
                r#"{"edges": [{"fact": "Ada joined Acme", "kind": "hire"}]}"#,
                "STOP",
            ),
        ),
        json_response(200, candidate(GOOD, "STOP")),
    ]);
    Mock::given(method("POST"))
        .respond_with(seq.clone())
        .mount(&server)
        .await;
    let answer = connect(&server)
        .chat("gemini-3.1-flash-lite")
        .generate(&request())
        .await
        .unwrap();
    assert!(answer.repaired);
    let sent = bodies(&server).await;
    let contents = sent[1]["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3);
    assert_eq!(contents[1]["role"], "model");
    assert_eq!(contents[2]["role"], "user");
    let repair = contents[2]["parts"][0]["text"].as_str().unwrap();
    assert!(
        repair.contains("/edges/0/kind: \"hire\" is not one of"),
        "{repair}"
    );
    assert!(
        repair.contains("/edges/0: missing required property `valid_at`"),
        "{repair}"
    );
}

#[tokio::test]
async fn schemas_gemini_cannot_express_are_rejected_before_any_call() {
    let server = fake_provider().await;
    let schema = OutputSchema::new(
        "choice",
        json!({"type": "object", "properties": {"v": {"type": ["string", "integer"]}}}),
    );
    let err = connect(&server)
        .chat("g")
        .generate(&GenerateRequest::new(schema).user("x"))
        .await
        .unwrap_err();
    let Error::InvalidInput { field, rule } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(field, "schema `choice`");
    assert!(
        rule.contains("#/properties/v/type: Gemini cannot express a choice of types"),
        "{rule}"
    );
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn embeddings_go_one_text_per_request_by_default() {
    let server = fake_provider().await;
    Mock::given(method("POST"))
        .and(path("/models/gemini-embedding-2-preview:embedContent"))
        .and(header("x-goog-api-key", "AIza-test"))
        .respond_with(|req: &wiremock::Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap();
            let text = body["content"]["parts"][0]["text"].as_str().unwrap();
            let n = text.len() as f32;
            json_response(200, json!({"embedding": {"values": [n, 0.0, 1.0]}}))
        })
        .mount(&server)
        .await;
    let conn = connect(&server);
    let embedder = conn
        .embedder("gemini-embedding-2-preview", Some(3))
        .unwrap();
    assert_eq!(embedder.dimension(), 3);
    let texts = vec!["a".to_string(), "bb".to_string(), "ccc".to_string()];
    let vectors = embedder.embed(&texts, "embed_nodes").await.unwrap();
    // Shortened (3 < 3072) vectors are re-normalised.
    let expected: Vec<Vec<f32>> = [1.0f32, 2.0, 3.0]
        .iter()
        .map(|n| {
            let norm = (n * n + 1.0).sqrt();
            vec![n / norm, 0.0, 1.0 / norm]
        })
        .collect();
    assert_eq!(vectors, expected);
    let mut sent = bodies(&server).await;
    assert_eq!(sent.len(), 3, "one request per text");
    sent.sort_by_key(|b| b["content"]["parts"][0]["text"].as_str().unwrap().len());
    assert_eq!(
        sent[0],
        json!({"model": "models/gemini-embedding-2-preview", "content": {"parts": [{"text": "a"}]}, "outputDimensionality": 3})
    );
    assert_eq!(conn.usage().snapshot().by_label["embed_nodes"].calls, 3);
}

#[tokio::test]
async fn larger_embedding_batches_use_batch_embed_contents() {
    let server = fake_provider().await;
    Mock::given(method("POST"))
        .and(path("/models/text-embedding-004:batchEmbedContents"))
        .respond_with(|req: &wiremock::Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap();
            let embeddings: Vec<Value> = body["requests"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    let n: f32 = r["content"]["parts"][0]["text"]
                        .as_str()
                        .unwrap()
                        .parse()
                        .unwrap();
                    json!({"values": vec![n; 768]})
                })
                .collect();
            json_response(200, json!({"embeddings": embeddings}))
        })
        .mount(&server)
        .await;
    let embedder = connect(&server)
        .embedder("text-embedding-004", None)
        .unwrap()
        .with_batch_size(3);
    let texts: Vec<String> = (0..7).map(|i| i.to_string()).collect();
    let vectors = embedder.embed(&texts, "l").await.unwrap();
    assert_eq!(vectors.len(), 7);
    for (i, v) in vectors.iter().enumerate() {
        assert_eq!(v.len(), 768);
        assert_eq!(v[0], i as f32, "vectors come back in input order");
    }
    let mut sizes: Vec<usize> = bodies(&server)
        .await
        .iter()
        .map(|b| b["requests"].as_array().unwrap().len())
        .collect();
    sizes.sort();
    assert_eq!(sizes, vec![1, 3, 3]);
    for body in bodies(&server).await {
        assert!(
            body["requests"][0].get("outputDimensionality").is_none(),
            "native size is not requested"
        );
    }
}

#[tokio::test]
async fn blank_key_is_a_config_error() {
    let err = Gemini::builder(" ").build().unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid configuration: `GOOGLE_API_KEY` must not be blank"
    );
    let debug = format!("{:?}", Gemini::builder("AIza-secret"));
    assert!(!debug.contains("AIza-secret"), "{debug}");
}
