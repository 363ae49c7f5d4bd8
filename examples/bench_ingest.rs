//! Ingestion throughput and model cost against a fake OpenAI-compatible provider on
//! loopback that answers every request after a fixed delay.
//!
//! ```text
//! cargo run --release --example bench_ingest                # 200 episodes, 200 ms a call
//! cargo run --release --example bench_ingest -- 80 100      # episodes, delay in ms
//! ```
//!
//! The real OpenAI client (HTTP, limiter, retries) talks to the fake provider; the real
//! engine writes to an embedded FalkorDB in a temporary directory. Prints, for one
//! graph and for 8 graphs ingested concurrently: episodes per second, language-model
//! calls and embedding requests per episode, and p50/p95 latency per episode.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gralkor::falkordb::{EmbeddedConfig, FalkorConfig, FalkorDb};
use gralkor::graph::{AddEpisode, Engine, SourceKind, Timestamp};
use gralkor::llm::openai::OpenAi;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

mod support;
use support::percentile;

const DIM: usize = 64;

/// The fake provider: answers chat completions for the engine's four schemas and
/// embeddings, after `delay`, counting requests.
struct FakeProvider {
    delay: Duration,
    chat: Arc<AtomicUsize>,
    embed: Arc<AtomicUsize>,
}

fn episode_text(i: usize) -> String {
    format!(
        "Member {:03} met Member {:03} at Venue {:02}.",
        i % 80,
        (i * 7 + 3) % 80,
        i % 25
    )
}

impl Respond for FakeProvider {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let reply = if request.url.path().ends_with("/embeddings") {
            self.embed.fetch_add(1, Ordering::Relaxed);
            let data: Vec<Value> = body["input"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, text)| json!({"index": i, "embedding": vector(text.as_str().unwrap_or(""))}))
                .collect();
            json!({"data": data, "usage": {"prompt_tokens": 1, "total_tokens": 1}})
        } else {
            self.chat.fetch_add(1, Ordering::Relaxed);
            let prompt: String = body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            let answer = support::answer(
                body["response_format"]["json_schema"]["name"]
                    .as_str()
                    .unwrap_or(""),
                &prompt,
            );
            json!({
                "id": "fake", "object": "chat.completion",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": answer.to_string(), "refusal": null}}],
                "usage": {"prompt_tokens": prompt.len() / 4, "completion_tokens": 50,
                          "total_tokens": prompt.len() / 4 + 50}
            })
        };
        ResponseTemplate::new(200)
            .set_body_json(reply)
            .set_delay(self.delay)
    }
}

/// A deterministic unit vector per text.
fn vector(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; DIM];
    for w in text.split_whitespace() {
        let h = Sha256::digest(w.to_lowercase().as_bytes());
        v[h[0] as usize % DIM] += if h[1] & 1 == 0 { 1.0 } else { -1.0 };
    }
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.into_iter().map(|x| x / n).collect()
}

async fn run(engine: &Engine, graphs: usize, episodes: usize) -> Vec<(Duration, u32, u32)> {
    let mut tasks = Vec::new();
    for g in 0..graphs {
        let engine = engine.clone();
        let per_graph = episodes / graphs;
        tasks.push(tokio::spawn(async move {
            let graph = format!("bench-{graphs}-{g}");
            let mut out = Vec::new();
            for i in 0..per_graph {
                let text = episode_text(g * per_graph + i);
                let request = AddEpisode::new(text, SourceKind::Text, Timestamp::now());
                let start = Instant::now();
                let outcome = engine.add_episode(&graph, request).await.expect("ingest");
                out.push((
                    start.elapsed(),
                    outcome.usage.llm_calls,
                    outcome.usage.embedding_calls,
                ));
            }
            out
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("task"));
    }
    all
}

#[tokio::main]
async fn main() {
    if let Err(e) = try_main().await {
        eprintln!("error: {e}");
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            eprintln!("  caused by: {cause}");
            source = cause.source();
        }
        std::process::exit(1);
    }
}

async fn try_main() -> gralkor::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let episodes: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(200);
    let delay_ms: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200);

    let (chat, embed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(FakeProvider {
            delay: Duration::from_millis(delay_ms),
            chat: chat.clone(),
            embed: embed.clone(),
        })
        .mount(&server)
        .await;
    let openai = OpenAi::builder("sk-fake")
        .base_url(format!("{}/v1", server.uri()))
        .build()?;
    let dir = tempfile::tempdir().map_err(|e| gralkor::Error::Io {
        context: "creating a temporary data directory".into(),
        source: e,
    })?;
    // BENCH_CLUSTER=host:port,… ingests into a FalkorDB cluster (its seed nodes, as in
    // FALKORDB_CLUSTER_NODES) instead of an embedded server.
    let config = match std::env::var("BENCH_CLUSTER").ok() {
        Some(nodes) => {
            println!("bench_ingest: FalkorDB cluster at {nodes}");
            FalkorConfig::from_lookup(|k| (k == "FALKORDB_CLUSTER_NODES").then(|| nodes.clone()))?
        }
        None => FalkorConfig::embedded(EmbeddedConfig::new(dir.path())),
    };
    let db = FalkorDb::connect(config).await?;
    let engine = Engine::new(
        db.clone(),
        Arc::new(openai.chat("fake-chat")),
        Arc::new(openai.embedder("fake-embed", Some(DIM))?),
    );
    println!("bench_ingest: {episodes} episodes, fake provider answering after {delay_ms} ms");
    println!(
        "{:<10} {:>10} {:>14} {:>14} {:>12} {:>12}",
        "graphs", "episodes/s", "llm calls/ep", "embed req/ep", "p50 ms", "p95 ms"
    );
    for graphs in [1, 8] {
        let (c0, e0) = (chat.load(Ordering::Relaxed), embed.load(Ordering::Relaxed));
        let start = Instant::now();
        let results = run(&engine, graphs, episodes).await;
        let wall = start.elapsed();
        let n = results.len();
        let mut latencies: Vec<Duration> = results.iter().map(|r| r.0).collect();
        latencies.sort();
        let reported: u32 = results.iter().map(|r| r.1).sum();
        let chat_calls = chat.load(Ordering::Relaxed) - c0;
        let embed_calls = embed.load(Ordering::Relaxed) - e0;
        assert_eq!(
            reported as usize, chat_calls,
            "usage must match what the provider saw"
        );
        println!(
            "{:<10} {:>10.2} {:>14.2} {:>14.2} {:>12.0} {:>12.0}",
            graphs,
            n as f64 / wall.as_secs_f64(),
            chat_calls as f64 / n as f64,
            embed_calls as f64 / n as f64,
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.95),
        );
    }
    db.shutdown().await?;
    Ok(())
}
