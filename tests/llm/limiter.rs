//! The limiter as the provider sees it: a gated loopback server counts requests in
//! flight while the test decides when each is answered.

use crate::llm_support;

use std::sync::Arc;
use std::time::Duration;

use gralkor::llm::openai::OpenAi;
use gralkor::llm::{
    Embedder, GenerateRequest, LanguageModel, Limiter, LimiterSettings, OutputSchema, RetryPolicy,
    UsageMeter,
};
use llm_support::{
    GatedServer, Sequence, chat_reply, eventually, fake_provider, json_response, test_http,
};
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio::time::Instant;
use wiremock::Mock;
use wiremock::matchers::{method, path};

fn request(label: &str) -> GenerateRequest {
    GenerateRequest::new(OutputSchema::new(
        "answer",
        json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}),
    ))
    .user("ok?")
    .label(label)
}

fn reply(path: &str) -> Value {
    if path.ends_with("/embeddings") {
        json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}], "usage": {"prompt_tokens": 1}})
    } else {
        chat_reply(r#"{"ok": true}"#, 1, 1)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_limiter_given_for_both_caps_chat_and_embeddings_together() {
    let server = GatedServer::start(reply).await;
    let limiter = Limiter::new(
        "openai",
        LimiterSettings {
            max_in_flight: 2,
            ..Default::default()
        },
    );
    let conn = OpenAi::builder("sk-test")
        .base_url(format!("{}/v1", server.url))
        .http_client(test_http())
        .retry(RetryPolicy {
            attempt_timeout: None,
            ..RetryPolicy::default()
        })
        // Chat and embeddings have limiters of their own unless one is given for both.
        .limiter(limiter.clone())
        .embedding_limiter(limiter.clone())
        .build()
        .unwrap();
    let llm = Arc::new(conn.chat("gpt-4.1-mini"));
    let embedder = Arc::new(conn.embedder("tiny", Some(2)).unwrap());
    let mut calls = JoinSet::new();
    for i in 0..4 {
        let llm = llm.clone();
        calls.spawn(async move {
            llm.generate(&request(&format!("step{i}")))
                .await
                .map(|_| ())
        });
    }
    for i in 0..3 {
        let embedder = embedder.clone();
        calls.spawn(async move {
            embedder
                .embed(&[format!("text {i}")], "embed")
                .await
                .map(|_| ())
        });
    }
    // Two requests reach the server; the other five queue in the limiter.
    eventually("2 requests at the server, 5 queued", || {
        server.in_flight() == 2 && limiter.stats().waiting == 5
    })
    .await;
    assert_eq!(
        server.arrivals(),
        2,
        "nothing beyond the cap was sent: {:?} in_flight={} stats={:?}",
        server.paths(),
        server.in_flight(),
        limiter.stats()
    );
    // Answer them one at a time; each answer lets exactly one more through.
    for answered in 1..=7 {
        server.release(1);
        let expected_in_flight = (7 - answered).min(2);
        eventually("the next queued request arrives", || {
            server.arrivals() == (answered + 2).min(7) && server.in_flight() == expected_in_flight
        })
        .await;
    }
    while let Some(done) = calls.join_next().await {
        done.unwrap().unwrap();
    }
    assert_eq!(server.arrivals(), 7);
    assert_eq!(server.max_in_flight(), 2);
    let paths = server.paths();
    assert_eq!(
        paths
            .iter()
            .filter(|p| p.ends_with("/chat/completions"))
            .count(),
        4
    );
    assert_eq!(
        paths.iter().filter(|p| p.ends_with("/embeddings")).count(),
        3
    );
    assert_eq!(limiter.stats().in_flight, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_connections_with_one_key_share_the_process_wide_limiter() {
    let server = GatedServer::start(reply).await;
    let settings = LimiterSettings {
        max_in_flight: 1,
        ..Default::default()
    };
    // A key no other test uses, so the process-wide limiter is this test's alone.
    let make = || {
        OpenAi::builder("sk-shared-limiter-test")
            .base_url(format!("{}/v1", server.url))
            .http_client(test_http())
            .limits(settings)
            .build()
            .unwrap()
    };
    let (a, b) = (make(), make());
    assert!(a.limiter().same_as(b.limiter()));
    let (la, lb) = (Arc::new(a.chat("m")), Arc::new(b.chat("m")));
    let first = tokio::spawn(async move { la.generate(&request("a")).await });
    let second = tokio::spawn(async move { lb.generate(&request("b")).await });
    eventually("one request at the server, one queued", || {
        server.in_flight() == 1 && a.limiter().stats().waiting == 1
    })
    .await;
    assert_eq!(server.arrivals(), 1);
    server.release(2);
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    assert_eq!(server.max_in_flight(), 1);
}

#[tokio::test(start_paused = true)]
async fn requests_per_minute_budget_spaces_requests_at_the_server() {
    let server = fake_provider().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Sequence::new(vec![json_response(
            200,
            chat_reply(r#"{"ok": true}"#, 1, 1),
        )]))
        .mount(&server)
        .await;
    let conn = OpenAi::builder("sk-test")
        .base_url(format!("{}/v1", server.uri()))
        .http_client(test_http())
        .retry(RetryPolicy {
            attempt_timeout: None,
            ..RetryPolicy::default()
        })
        .limiter(Limiter::new(
            "openai",
            LimiterSettings {
                max_in_flight: 8,
                requests_per_minute: Some(2),
                tokens_per_minute: None,
            },
        ))
        .build()
        .unwrap();
    let llm = conn.chat("m");
    let start = Instant::now();
    for _ in 0..3 {
        llm.generate(&request("x")).await.unwrap();
    }
    // Two requests fit the full bucket; the third waits for one request's refill (30 s).
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(30) && waited <= Duration::from_millis(30_050),
        "{waited:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_429_with_retry_after_holds_every_caller_of_the_key() {
    let server = fake_provider().await;
    let seq = Sequence::new(vec![
        json_response(429, json!({"error": {"message": "rate limited"}}))
            .insert_header("retry-after", "20"),
        json_response(200, chat_reply(r#"{"ok": true}"#, 1, 1)),
    ]);
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(seq.clone())
        .mount(&server)
        .await;
    let usage = UsageMeter::new();
    let limiter = Limiter::new(
        "openai",
        LimiterSettings {
            max_in_flight: 1,
            ..Default::default()
        },
    );
    let conn = OpenAi::builder("sk-test")
        .base_url(format!("{}/v1", server.uri()))
        .http_client(test_http())
        .retry(RetryPolicy {
            attempt_timeout: None,
            ..RetryPolicy::default()
        })
        .limiter(limiter.clone())
        .usage(usage.clone())
        .build()
        .unwrap();
    let llm = Arc::new(conn.chat("m"));
    let start = Instant::now();
    let first = tokio::spawn({
        let llm = llm.clone();
        async move { llm.generate(&request("first")).await }
    });
    eventually("the first caller holds the slot", || {
        limiter.stats().in_flight == 1
    })
    .await;
    // The second caller queues behind the first, which is about to get the 429.
    let second = tokio::spawn({
        let llm = llm.clone();
        async move {
            llm.generate(&request("second"))
                .await
                .map(|_| Instant::now())
        }
    });
    eventually("the second caller is queued", || {
        limiter.stats().waiting == 1
    })
    .await;
    let second_done = second.await.unwrap().unwrap();
    first.await.unwrap().unwrap();
    // The second caller never saw the 429 itself, yet it was held until Retry-After passed.
    let held = second_done - start;
    assert!(held >= Duration::from_secs(20), "{held:?}");
    assert_eq!(seq.calls(), 3);
    let snapshot = usage.snapshot();
    assert_eq!(snapshot.by_label["first"].retries, 1);
    assert_eq!(snapshot.by_label["second"].retries, 0);
}
