//! Throughput and latency of the in-process embedder (all-MiniLM-L6-v2 on the CPU).
//!
//! ```text
//! cargo run --release --features local-embedder --example bench_embed            # 1024 sentences, 200 queries
//! cargo run --release --features local-embedder --example bench_embed -- 4096 500
//! ```
//!
//! Prints the time to find (or provision) and load the model, sentences per second
//! when short sentences are embedded in one call (forward passes of 32), p50/p95/p99 of
//! one short query through the async [`Embedder`] API, and the peak resident memory
//! (`VmHWM`). Figures only, never assertions.

use std::time::{Duration, Instant};

use gralkor::llm::Embedder;
use gralkor::llm::local::{LocalEmbedder, LocalModelConfig};

const SUBJECTS: [&str; 8] = [
    "Ada",
    "The team",
    "My sister",
    "Our landlord",
    "The new intern",
    "Grace",
    "Linus",
    "The client",
];
const VERBS: [&str; 8] = [
    "moved to",
    "works at",
    "visited",
    "complained about",
    "wrote a report on",
    "is planning a trip to",
    "bought a flat near",
    "gave a talk about",
];
const OBJECTS: [&str; 8] = [
    "Lisbon in March",
    "the bakery on Rua Augusta",
    "the quarterly budget",
    "the broken heating",
    "graph databases",
    "Kyoto next spring",
    "the old harbour",
    "vector search",
];

fn sentence(i: usize) -> String {
    format!(
        "{} {} {}.",
        SUBJECTS[i % 8],
        VERBS[(i / 8) % 8],
        OBJECTS[(i / 64) % 8]
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l["VmHWM:".len()..].trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let batch: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1024);
    let queries: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(200);

    let start = Instant::now();
    let embedder = match LocalEmbedder::load(&LocalModelConfig::default()).await {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "model: {} from {} (found/provisioned, checked and loaded in {:.2?})",
        embedder.model(),
        embedder.model_dir().display(),
        start.elapsed()
    );
    println!(
        "threads: {} available",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    // Warm-up.
    embedder.embed(&[sentence(0)], "bench").await?;

    let texts: Vec<String> = (0..batch).map(sentence).collect();
    let start = Instant::now();
    let vectors = embedder.embed(&texts, "bench").await?;
    let took = start.elapsed();
    assert_eq!(vectors.len(), batch);
    println!(
        "batched: {batch} short sentences in {took:.2?}: {:.0} sentences/s",
        batch as f64 / took.as_secs_f64()
    );

    let mut times = Vec::with_capacity(queries);
    for i in 0..queries {
        let q = [format!("Where does {} live?", SUBJECTS[i % 8])];
        let start = Instant::now();
        embedder.embed(&q, "bench").await?;
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        "single query ({queries} runs): p50 {:.2?}, p95 {:.2?}, p99 {:.2?}",
        percentile(&times, 0.50),
        percentile(&times, 0.95),
        percentile(&times, 0.99)
    );
    println!("peak memory (VmHWM): {}", peak_rss());
    Ok(())
}
