//! Search latency beside two writers, against the same searches on an idle graph, on
//! an embedded FalkorDB.
//!
//! ```text
//! cargo run --release --example bench_search_under_writes                 # defaults
//! cargo run --release --example bench_search_under_writes -- 200 16 40 64 # seed episodes, searchers, searches each, rebuild threshold
//! ```
//!
//! It seeds one graph with episodes "Member A met Member B at Venue C." (40 members,
//! 8 venues, so every commit re-summarises members and leaves stale vector entries),
//! written by the engine with a scripted model and deterministic embeddings. Then it
//! runs the same searches twice — 16 concurrent searchers, each cycling through
//! facts, entities, episodes and the combined recipe (as `memory_search` does) —
//! once on the idle graph, once while two engines ingest new episodes into it
//! (with the given vector rebuild threshold, so the entity and fact indices are
//! rebuilt while searches run). It prints p50/p95 of both, their ratio (the goal is
//! ≤ 1.3), the episodes the writers committed meanwhile, and every failed search
//! (the goal is none).
//!
//! Figures only, never assertions.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gralkor::falkordb::{EmbeddedConfig, FalkorConfig, FalkorDb};
use gralkor::graph::search::{
    COMBINED_HYBRID_SEARCH_RRF, EDGE_HYBRID_SEARCH_RRF, Methods, NODE_HYBRID_SEARCH_RRF,
    RerankerKind, ScopeConfig, SearchConfig, SearchRequest,
};
use gralkor::graph::{AddEpisode, Engine, EngineOptions, SourceKind, Timestamp};
use gralkor::llm::doubles::{HashEmbedder, ScriptedModel};
use tokio::task::JoinSet;

mod support;
use support::{Rng, percentile};

const GRAPH: &str = "global";

fn episode(rng: &mut Rng) -> String {
    let a = rng.below(40);
    let b = (a + 1 + rng.below(39)) % 40;
    format!(
        "Member {a:03} met Member {b:03} at Venue {:02}.",
        rng.below(8)
    )
}

fn engine(db: &FalkorDb, threshold: i64) -> Engine {
    let model = ScriptedModel::new().respond_with(|req| {
        let prompt: Vec<&str> = req.messages.iter().map(|m| m.content.as_str()).collect();
        Ok(support::answer(&req.schema.name, &prompt.join("\n")))
    });
    Engine::new(
        db.clone(),
        Arc::new(model),
        Arc::new(HashEmbedder::new(256)),
    )
    .with_options(EngineOptions::new().vector_rebuild_threshold(threshold))
}

fn configs() -> [SearchConfig; 4] {
    let episodes = SearchConfig {
        facts: None,
        entities: None,
        episodes: Some(ScopeConfig::new(Methods::HYBRID, RerankerKind::Rrf)),
        communities: None,
        ..COMBINED_HYBRID_SEARCH_RRF
    };
    [
        EDGE_HYBRID_SEARCH_RRF.limit(10),
        NODE_HYBRID_SEARCH_RRF.limit(10),
        episodes.limit(10),
        COMBINED_HYBRID_SEARCH_RRF.limit(10),
    ]
}

/// Runs `per` searches on each of `searchers` concurrent tasks; the latencies sorted,
/// and the errors.
async fn searches(engine: &Engine, searchers: usize, per: usize) -> (Vec<Duration>, Vec<String>) {
    let mut tasks = JoinSet::new();
    for s in 0..searchers {
        let engine = engine.clone();
        tasks.spawn(async move {
            let mut rng = Rng(1000 + s as u64);
            let mut out = (Vec::new(), Vec::new());
            for i in 0..per {
                let config = configs()[(s + i) % 4];
                let query = format!("Member {:03} met Venue {:02}", rng.below(40), rng.below(8));
                let start = Instant::now();
                match engine
                    .search(GRAPH, &SearchRequest::new(query, config))
                    .await
                {
                    Ok(_) => out.0.push(start.elapsed()),
                    Err(e) => out.1.push(e.to_string()),
                }
            }
            out
        });
    }
    let (mut times, mut errors) = (Vec::new(), Vec::new());
    while let Some(done) = tasks.join_next().await {
        let (t, e) = done.expect("searcher");
        times.extend(t);
        errors.extend(e);
    }
    times.sort();
    (times, errors)
}

#[tokio::main]
async fn main() {
    support::exit_on_error(try_main().await);
}

async fn try_main() -> gralkor::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let seed = args.first().copied().unwrap_or(200);
    let searchers = args.get(1).copied().unwrap_or(16);
    let per = args.get(2).copied().unwrap_or(40);
    let threshold = args.get(3).copied().unwrap_or(64) as i64;
    let dir = tempfile::tempdir().map_err(|e| gralkor::Error::Io {
        context: "temp dir".into(),
        source: e,
    })?;
    let db = FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new(dir.path()))).await?;
    println!(
        "bench_search_under_writes: {seed} seed episodes, {searchers} searchers × {per} searches, \
         rebuild threshold {threshold}, FalkorDB in {}",
        dir.path().display()
    );
    let seeder = engine(&db, threshold);
    let mut rng = Rng(7);
    let t0 = Timestamp::now();
    for i in 0..seed {
        let when = Timestamp(t0.0 + i as i64 * 1000);
        seeder
            .add_episode(
                GRAPH,
                AddEpisode::new(episode(&mut rng), SourceKind::Text, when),
            )
            .await?;
    }
    // Warm the connections and the server's caches.
    let _ = searches(&seeder, searchers, 4).await;

    let (idle, idle_errors) = searches(&seeder, searchers, per).await;

    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = JoinSet::new();
    for w in 0..2u64 {
        let (writer, stop) = (engine(&db, threshold), stop.clone());
        writers.spawn(async move {
            let mut rng = Rng(100 + w);
            let mut written = 0usize;
            let mut failed = 0usize;
            while !stop.load(Ordering::SeqCst) {
                let ep = AddEpisode::new(episode(&mut rng), SourceKind::Text, Timestamp::now());
                match writer.add_episode(GRAPH, ep).await {
                    Ok(_) => written += 1,
                    Err(_) => failed += 1,
                }
            }
            (written, failed)
        });
    }
    let started = Instant::now();
    let (busy, busy_errors) = searches(&seeder, searchers, per).await;
    let took = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    let (mut written, mut write_failures) = (0, 0);
    while let Some(done) = writers.join_next().await {
        let (w, f) = done.expect("writer");
        written += w;
        write_failures += f;
    }

    let row = |name: &str, t: &[Duration], errors: usize| {
        println!(
            "{name:<22} {:>6} searches  p50 {:>7.1} ms  p95 {:>7.1} ms  failed {errors}",
            t.len(),
            percentile(t, 0.5),
            percentile(t, 0.95)
        );
    };
    row("idle", &idle, idle_errors.len());
    row("beside 2 writers", &busy, busy_errors.len());
    println!(
        "ratio (writers / idle)  p50 {:.2}×  p95 {:.2}×  (goal ≤ 1.3×)",
        percentile(&busy, 0.5) / percentile(&idle, 0.5),
        percentile(&busy, 0.95) / percentile(&idle, 0.95)
    );
    println!(
        "writers committed {written} episodes in {:.1} s ({write_failures} failed)",
        took.as_secs_f64()
    );
    for e in idle_errors.iter().chain(&busy_errors).take(5) {
        println!("  error: {e}");
    }
    db.shutdown().await?;
    Ok(())
}
