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
use gralkor::llm::local::{LocalEmbedder, LocalModelConfig, Precision};

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

/// User + system CPU time of the process so far (all threads), from /proc (ticks).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    Duration::from_millis(ticks * 10)
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
    // Each path on its own, by input length: wall time and the process's CPU time
    // (all threads) per text, one text per call.
    let filler = "and then we talked about the weather in Lisbon for a while";
    for words in [6usize, 20, 60, 200] {
        let text: String = (0..words)
            .map(|i| filler.split(' ').nth(i % 12).unwrap())
            .collect::<Vec<_>>()
            .join(" ");
        let runs = (queries * 12 / words.max(12)).max(20);
        for precision in [Precision::Full, Precision::Quantized] {
            let one = [text.clone()];
            embedder.embed_blocking_at(&one, precision)?;
            let mut times = Vec::with_capacity(runs);
            let cpu0 = cpu_time();
            for _ in 0..runs {
                let start = Instant::now();
                embedder.embed_blocking_at(&one, precision)?;
                times.push(start.elapsed());
            }
            let cpu = (cpu_time() - cpu0) / runs as u32;
            times.sort();
            println!(
                "{precision:?} {words} words ({runs} runs): p50 {:.2?}, p95 {:.2?}, cpu/text {cpu:.2?}",
                percentile(&times, 0.50),
                percentile(&times, 0.95)
            );
        }
    }
    println!("peak memory (VmHWM): {}", peak_rss());
    Ok(())
}
