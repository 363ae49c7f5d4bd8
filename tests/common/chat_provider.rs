//! A fake OpenAI-compatible chat provider on loopback for the agent tests: each
//! request gets the next scripted reply, and what the provider saw can be read back.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// A provider that answers each request with the next scripted reply (HTTP 500 once
/// the script is spent, or for a reply scripted as `null`).
pub struct Script {
    replies: Vec<Value>,
    next: AtomicUsize,
}

impl Respond for Script {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let i = self.next.fetch_add(1, Ordering::SeqCst);
        match self.replies.get(i) {
            Some(reply) if !reply.is_null() => ResponseTemplate::new(200).set_body_json(reply),
            _ => ResponseTemplate::new(500).set_body_string("scripted failure"),
        }
    }
}

pub fn completion(message: Value, finish: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    })
}

pub fn tool_call(id: &str, name: &str, arguments: Value) -> Value {
    completion(
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": id, "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()},
        }]}),
        "tool_calls",
    )
}

pub fn answer(text: &str) -> Value {
    completion(json!({"role": "assistant", "content": text}), "stop")
}

pub async fn provider(replies: Vec<Value>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Script {
            replies,
            next: AtomicUsize::new(0),
        })
        .mount(&server)
        .await;
    server
}

/// The JSON bodies of every request the provider received, in order.
pub async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}
