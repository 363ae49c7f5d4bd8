//! The retry policy, driven through the real clients against a loopback fake, under
//! tokio's paused clock (waits are virtual: no test sleeps in real time).

use crate::llm_support;

use std::time::Duration;

use gralkor::Error;
use gralkor::llm::gemini::Gemini;
use gralkor::llm::openai::OpenAi;
use gralkor::llm::{
    Embedder, GenerateRequest, LanguageModel, Limiter, LimiterSettings, OutputSchema, RetryPolicy,
    UsageMeter,
};
use llm_support::{Sequence, chat_reply, fake_provider, json_response, paused_policy, test_http};
use serde_json::json;
use tokio::time::Instant;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn request() -> GenerateRequest {
    GenerateRequest::new(OutputSchema::new(
        "answer",
        json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": false}),
    ))
    .user("ok?")
    .label("step")
}

const OK: &str = r#"{"ok": true}"#;

fn connect(server: &MockServer, policy: RetryPolicy) -> OpenAi {
    OpenAi::builder("sk-test")
        .base_url(format!("{}/v1", server.uri()))
        .http_client(test_http())
        .retry(policy)
        .limiter(Limiter::new("openai", LimiterSettings::default()))
        .usage(UsageMeter::new())
        .build()
        .unwrap()
}

async fn serve(server: &MockServer, seq: &Sequence) {
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(seq.clone())
        .mount(server)
        .await;
}

fn error_body(message: &str) -> serde_json::Value {
    json!({"error": {"message": message, "type": "x"}})
}

#[tokio::test(start_paused = true)]
async fn rate_limit_429_waits_for_retry_after_then_succeeds() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![
        json_response(429, error_body("Rate limit reached")).insert_header("retry-after", "7"),
        json_response(200, chat_reply(OK, 3, 1)),
    ]);
    serve(&server, &seq).await;
    let conn = connect(&server, paused_policy());
    let start = Instant::now();
    let answer = conn
        .chat("gpt-4.1-mini")
        .generate(&request())
        .await
        .unwrap();
    let waited = start.elapsed();
    assert_eq!(answer.value, json!({"ok": true}));
    assert_eq!(seq.calls(), 2);
    // Retry-After 7 s is honoured (plus at most 250 ms of jitter), not the 1 s backoff.
    assert!(
        waited >= Duration::from_secs(7) && waited <= Duration::from_millis(7250),
        "{waited:?}"
    );
    let usage = conn.usage().snapshot();
    assert_eq!(
        (
            usage.total.calls,
            usage.total.retries,
            usage.total.failed_calls
        ),
        (1, 1, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn retry_after_ms_header_is_honoured() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![
        json_response(429, error_body("slow down")).insert_header("retry-after-ms", "2500"),
        json_response(200, chat_reply(OK, 1, 1)),
    ]);
    serve(&server, &seq).await;
    let policy = RetryPolicy {
        initial_backoff: Duration::from_millis(10),
        ..paused_policy()
    };
    let start = Instant::now();
    connect(&server, policy)
        .chat("m")
        .generate(&request())
        .await
        .unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(2500) && waited <= Duration::from_millis(2750),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn server_errors_are_retried_with_growing_backoff() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![
        json_response(500, error_body("boom")),
        json_response(503, error_body("overloaded")),
        json_response(200, chat_reply(OK, 1, 1)),
    ]);
    serve(&server, &seq).await;
    let policy = RetryPolicy {
        initial_backoff: Duration::from_secs(2),
        ..paused_policy()
    };
    let start = Instant::now();
    connect(&server, policy)
        .chat("m")
        .generate(&request())
        .await
        .unwrap();
    let waited = start.elapsed();
    assert_eq!(seq.calls(), 3);
    // 1st wait in [1, 2] s, 2nd in [2, 4] s.
    assert!(
        waited >= Duration::from_secs(3) && waited <= Duration::from_secs(6),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn client_errors_are_not_retried_and_keep_their_status() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![json_response(
        400,
        error_body("Invalid 'messages': empty"),
    )]);
    serve(&server, &seq).await;
    let conn = connect(&server, paused_policy());
    let start = Instant::now();
    let err = conn.chat("m").generate(&request()).await.unwrap_err();
    assert_eq!(seq.calls(), 1);
    assert_eq!(start.elapsed(), Duration::ZERO);
    let Error::Provider {
        provider,
        status,
        message,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!((provider.as_str(), *status), ("openai", Some(400)));
    assert_eq!(message, "Invalid 'messages': empty");
    assert!(!err.is_retryable());
    assert_eq!(
        err.to_string(),
        "openai request failed (HTTP 400): Invalid 'messages': empty"
    );
    let usage = conn.usage().snapshot();
    assert_eq!((usage.total.calls, usage.total.failed_calls), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn retries_stop_after_max_attempts_with_the_last_status() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![json_response(502, error_body("bad gateway"))]);
    serve(&server, &seq).await;
    let policy = RetryPolicy {
        max_attempts: 3,
        ..paused_policy()
    };
    let err = connect(&server, policy)
        .chat("m")
        .generate(&request())
        .await
        .unwrap_err();
    assert_eq!(seq.calls(), 3);
    assert!(
        matches!(
            err,
            Error::Provider {
                status: Some(502),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable(), "the caller may still try again later");
}

#[tokio::test(start_paused = true)]
async fn retries_stop_when_retry_after_exceeds_the_time_budget() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![
        json_response(429, error_body("quota")).insert_header("retry-after", "600"),
    ]);
    serve(&server, &seq).await;
    let policy = RetryPolicy {
        max_elapsed: Duration::from_secs(60),
        ..paused_policy()
    };
    let start = Instant::now();
    let err = connect(&server, policy)
        .chat("m")
        .generate(&request())
        .await
        .unwrap_err();
    assert_eq!(seq.calls(), 1, "waiting 600 s would break the 60 s budget");
    assert_eq!(start.elapsed(), Duration::ZERO);
    let Error::Provider {
        status,
        retry_after,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(*status, Some(429));
    assert_eq!(*retry_after, Some(Duration::from_secs(600)));
    assert!(err.is_rate_limit());
}

/// Real time: under a paused clock an attempt timer fires as soon as the runtime waits
/// on the socket, so a *successful* attempt after a timeout needs the real clock.
#[tokio::test]
async fn a_slow_attempt_times_out_and_is_retried() {
    let server = fake_provider().await;
    // The first answer would take 60 s; the attempt limit is 1 s.
    let seq = Sequence::new(vec![
        json_response(200, chat_reply(OK, 1, 1)).set_delay(Duration::from_secs(60)),
        json_response(200, chat_reply(r#"{"ok": false}"#, 1, 1)),
    ]);
    serve(&server, &seq).await;
    let policy = RetryPolicy {
        attempt_timeout: Some(Duration::from_secs(1)),
        initial_backoff: Duration::from_millis(1),
        ..RetryPolicy::default()
    };
    let started = std::time::Instant::now();
    let answer = connect(&server, policy)
        .chat("m")
        .generate(&request())
        .await
        .unwrap();
    assert_eq!(
        answer.value,
        json!({"ok": false}),
        "the second attempt answered"
    );
    assert_eq!(seq.calls(), 2);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the slow answer was not awaited"
    );
}

#[tokio::test(start_paused = true)]
async fn a_timeout_on_every_attempt_is_a_timeout_error() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![
        json_response(200, chat_reply(OK, 1, 1)).set_delay(Duration::from_secs(30)),
    ]);
    serve(&server, &seq).await;
    let policy = RetryPolicy {
        max_attempts: 2,
        attempt_timeout: Some(Duration::from_secs(5)),
        ..paused_policy()
    };
    let err = connect(&server, policy)
        .chat("m")
        .generate(&request())
        .await
        .unwrap_err();
    let Error::Timeout { operation, after } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(operation, "openai chat request");
    assert_eq!(*after, Duration::from_secs(5));
    assert!(err.is_retryable());
}

#[tokio::test(start_paused = true)]
async fn connection_errors_are_retried_then_reported_without_status() {
    // Bind and drop a listener: nothing accepts on that port.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let conn = OpenAi::builder("sk-test")
        .base_url(format!("http://{addr}/v1"))
        .http_client(test_http())
        .retry(RetryPolicy {
            max_attempts: 3,
            ..paused_policy()
        })
        .limiter(Limiter::new("openai", LimiterSettings::default()))
        .build()
        .unwrap();
    let err = conn.chat("m").generate(&request()).await.unwrap_err();
    let Error::Provider {
        status,
        message,
        source,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(*status, None);
    assert_eq!(message, "could not connect");
    assert!(source.is_some());
    assert_eq!(conn.usage().snapshot().total.retries, 2);
}

#[tokio::test(start_paused = true)]
async fn gemini_429_honours_retry_delay_in_the_body() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![
        ResponseTemplate::new(429).set_body_json(json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
            "message": "Quota exceeded",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}]}})),
        json_response(200, json!({"embedding": {"values": [1.0, 0.0]}})),
    ]);
    Mock::given(method("POST"))
        .respond_with(seq.clone())
        .mount(&server)
        .await;
    let google = Gemini::builder("AIza-test")
        .base_url(server.uri())
        .http_client(test_http())
        .retry(paused_policy())
        .limiter(Limiter::new("google", LimiterSettings::default()))
        .build()
        .unwrap();
    let start = Instant::now();
    let v = google
        .embedder("local-embedder", Some(2))
        .unwrap()
        .embed(&["x".into()], "l")
        .await
        .unwrap();
    let waited = start.elapsed();
    assert_eq!(v, vec![vec![1.0, 0.0]]);
    assert!(
        waited >= Duration::from_secs(12) && waited <= Duration::from_millis(12_250),
        "{waited:?}"
    );
}
