//! Round-trip latency floor of the FalkorDB adapter on the embedded server: the figures
//! later search work is measured against.
//!
//! ```text
//! cargo run --release --example bench_falkordb                 # 100,000 × 1024-d
//! cargo run --release --example bench_falkordb -- 20000 256    # smaller: nodes, dimension
//! ```
//!
//! Prints p50/p95/p99 of: a MATCH by indexed uuid, a vector KNN top-10 through the HNSW
//! index, and a fulltext query through the sanitiser; plus the load rate.

use std::time::{Duration, Instant};

use gralkor::falkordb::{
    DEFAULT_STOPWORDS, EmbeddedConfig, FalkorConfig, FalkorDb, IndexSpec, Params, Similarity,
    Value, fulltext_query,
};

const GRAPH: &str = "bench";
const SAMPLES: usize = 1000;
const WORDS: &[&str] = &[
    "alice", "bob", "carol", "project", "deadline", "meeting", "rust", "graph", "memory", "agent",
    "coffee", "berlin", "london", "invoice", "release", "bug", "review", "holiday", "budget",
    "design", "database", "cluster", "vector", "search", "summary", "customer", "contract",
    "garden", "piano", "marathon",
];

/// xorshift64*: deterministic data without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
    fn vector(&mut self, dim: usize) -> Vec<f32> {
        let v: Vec<f32> = (0..dim).map(|_| self.unit()).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
        v.into_iter().map(|x| x / norm).collect()
    }
    fn sentence(&mut self, words: usize) -> String {
        (0..words)
            .map(|_| WORDS[self.next() as usize % WORDS.len()])
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn percentiles(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let p = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    format!(
        "p50 {:>8.3} ms   p95 {:>8.3} ms   p99 {:>8.3} ms   (n={})",
        p(0.50).as_secs_f64() * 1e3,
        p(0.95).as_secs_f64() * 1e3,
        p(0.99).as_secs_f64() * 1e3,
        samples.len()
    )
}

mod support;

#[tokio::main]
async fn main() {
    support::exit_on_error(try_main().await);
}

async fn try_main() -> gralkor::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let nodes: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let dim: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1024);
    let dir = tempfile::tempdir().map_err(|e| gralkor::Error::Io {
        context: "temp dir".into(),
        source: e,
    })?;
    let db = FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new(dir.path()))).await?;
    println!(
        "bench_falkordb: {nodes} nodes × {dim}-d vectors, embedded FalkorDB in {}",
        dir.path().display()
    );

    db.create_index(GRAPH, &IndexSpec::range_nodes("Doc", ["uuid"]))
        .await?;
    db.create_index(
        GRAPH,
        &IndexSpec::fulltext_nodes("Doc", ["text"], DEFAULT_STOPWORDS),
    )
    .await?;
    db.create_index(
        GRAPH,
        &IndexSpec::vector_nodes("Doc", "emb", dim as u32, Similarity::Cosine),
    )
    .await?;

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let batch = (2_000_000 / (dim * 12)).clamp(50, 1000);
    let load = Instant::now();
    let mut next_report = Instant::now();
    for start in (0..nodes).step_by(batch) {
        let rows: Vec<Value> = (start..(start + batch).min(nodes))
            .map(|i| {
                Value::Map(
                    [
                        ("uuid".to_string(), Value::from(format!("doc-{i}"))),
                        ("text".to_string(), Value::from(rng.sentence(12))),
                        (
                            "emb".to_string(),
                            Value::List(
                                rng.vector(dim)
                                    .into_iter()
                                    .map(|x| Value::Float(x.into()))
                                    .collect(),
                            ),
                        ),
                    ]
                    .into_iter()
                    .collect(),
                )
            })
            .collect();
        db.query(
            GRAPH,
            "UNWIND $rows AS r CREATE (:Doc {uuid: r.uuid, text: r.text, emb: vecf32(r.emb)})",
            &Params::new().set("rows", rows),
        )
        .await?;
        if next_report.elapsed() > Duration::from_secs(10) {
            println!(
                "  loaded {} of {nodes} ({:.0} nodes/s)",
                start + batch,
                (start + batch) as f64 / load.elapsed().as_secs_f64()
            );
            next_report = Instant::now();
        }
    }
    let load_secs = load.elapsed().as_secs_f64();
    println!(
        "load: {nodes} nodes in {load_secs:.1} s ({:.0} nodes/s, batches of {batch})",
        nodes as f64 / load_secs
    );

    // 1. MATCH by indexed uuid.
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let uuid = format!("doc-{}", rng.next() as usize % nodes);
        let t = Instant::now();
        let res = db
            .ro_query(
                GRAPH,
                "MATCH (d:Doc {uuid: $u}) RETURN d.uuid AS u",
                &Params::new().set("u", uuid.clone()),
            )
            .await?;
        samples.push(t.elapsed());
        assert_eq!(res.get(0, "u").and_then(Value::as_str), Some(uuid.as_str()));
    }
    println!("MATCH by indexed uuid     {}", percentiles(samples));

    // 2. Vector KNN top-10 through the HNSW index.
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let q = rng.vector(dim);
        let t = Instant::now();
        let res = db
            .ro_query(
                GRAPH,
                "CALL db.idx.vector.queryNodes('Doc', 'emb', 10, vecf32($q)) YIELD node, score RETURN node.uuid AS u, score",
                &Params::new().set("q", q),
            )
            .await?;
        samples.push(t.elapsed());
        assert_eq!(res.rows.len(), 10);
    }
    println!("vector KNN top-10         {}", percentiles(samples));

    // 3. Fulltext through the sanitiser.
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let text = format!(
            "{}-{}? ({})",
            rng.sentence(1),
            rng.sentence(1),
            rng.sentence(1)
        );
        let q = fulltext_query(&text, DEFAULT_STOPWORDS).expect("words");
        let t = Instant::now();
        db.ro_query(
            GRAPH,
            "CALL db.idx.fulltext.queryNodes('Doc', $q) YIELD node, score RETURN node.uuid AS u, score ORDER BY score DESC LIMIT 10",
            &Params::new().set("q", q),
        )
        .await?;
        samples.push(t.elapsed());
    }
    println!("fulltext top-10           {}", percentiles(samples));

    let t = Instant::now();
    db.shutdown().await?;
    println!(
        "shutdown (AOF rewrite + save): {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
