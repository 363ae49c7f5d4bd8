//! Helpers for the `llm_*` integration tests: a reqwest client and retry policy that
//! behave under tokio's paused clock, scripted wiremock responders, and a gated
//! loopback server that counts requests in flight.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use gralkor::llm::RetryPolicy;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use wiremock::{Request, Respond, ResponseTemplate};

/// A reqwest client with no pool timers. Under a paused clock tokio jumps to the next
/// timer whenever the runtime waits on I/O, so an idle-connection reaper would make
/// virtual time race ahead while a loopback request is in flight.
pub fn test_http() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_idle_timeout(None)
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

/// The default policy without a per-attempt timeout (which, under a paused clock,
/// would fire while the loopback server is still answering).
pub fn paused_policy() -> RetryPolicy {
    RetryPolicy {
        attempt_timeout: None,
        ..RetryPolicy::default()
    }
}

/// A fresh (not pooled) fake provider, so no request of another test can reach it.
pub async fn fake_provider() -> wiremock::MockServer {
    wiremock::MockServer::builder().start().await
}

/// Answers with the given templates in order; the last one repeats. Counts calls.
#[derive(Clone)]
pub struct Sequence {
    templates: Arc<Vec<ResponseTemplate>>,
    calls: Arc<AtomicUsize>,
}

impl Sequence {
    pub fn new(templates: Vec<ResponseTemplate>) -> Self {
        Sequence {
            templates: Arc::new(templates),
            calls: Arc::default(),
        }
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Respond for Sequence {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let i = self.calls.fetch_add(1, Ordering::SeqCst);
        self.templates[i.min(self.templates.len() - 1)].clone()
    }
}

/// A JSON response.
pub fn json_response(status: u16, body: Value) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(body)
}

/// An OpenAI chat completion whose message content is `content`.
pub fn chat_reply(content: &str, prompt_tokens: u64, completion_tokens: u64) -> Value {
    serde_json::json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content, "refusal": null}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens}
    })
}

/// The JSON bodies of the requests a wiremock server received.
pub async fn bodies(server: &wiremock::MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// A loopback HTTP/1.1 server that holds every request until the test releases it,
/// counting requests in flight. Answers `200` with `reply(path)` and closes the
/// connection.
pub struct GatedServer {
    pub url: String,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
    arrivals: Arc<AtomicUsize>,
    paths: Arc<Mutex<Vec<String>>>,
    gate: Arc<Semaphore>,
}

impl GatedServer {
    pub async fn start(reply: impl Fn(&str) -> Value + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = GatedServer {
            url,
            in_flight: Arc::default(),
            max_in_flight: Arc::default(),
            arrivals: Arc::default(),
            paths: Arc::default(),
            gate: Arc::new(Semaphore::new(0)),
        };
        let reply = Arc::new(reply);
        let (in_flight, max, arrivals, paths, gate) = (
            server.in_flight.clone(),
            server.max_in_flight.clone(),
            server.arrivals.clone(),
            server.paths.clone(),
            server.gate.clone(),
        );
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let (in_flight, max, arrivals, paths, gate, reply) = (
                    in_flight.clone(),
                    max.clone(),
                    arrivals.clone(),
                    paths.clone(),
                    gate.clone(),
                    reply.clone(),
                );
                tokio::spawn(async move {
                    let Some(path) = read_request(&mut stream).await else {
                        return;
                    };
                    // Count the arrival before the request shows as in flight, so a
                    // test that sees N in flight also sees at least N arrivals.
                    paths.lock().unwrap().push(path.clone());
                    arrivals.fetch_add(1, Ordering::SeqCst);
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    max.fetch_max(now, Ordering::SeqCst);
                    gate.acquire().await.unwrap().forget();
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    let body = reply(&path).to_string();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(head.as_bytes()).await;
                    let _ = stream.write_all(body.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        server
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    pub fn arrivals(&self) -> usize {
        self.arrivals.load(Ordering::SeqCst)
    }

    pub fn paths(&self) -> Vec<String> {
        self.paths.lock().unwrap().clone()
    }

    /// Lets `n` held (or future) requests be answered.
    pub fn release(&self, n: usize) {
        self.gate.add_permits(n);
    }
}

/// Reads one request; returns its path.
async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < header_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    head.split_whitespace().nth(1).map(str::to_string)
}

/// Polls `condition` (yielding to other tasks) until it holds; panics after 10 s of
/// real time, which only a broken implementation reaches.
pub async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::task::yield_now().await;
    }
}
