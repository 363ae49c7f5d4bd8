//! The cost of a new Destination: many new graphs, each getting its first write.
//!
//! ```text
//! cargo run --release --example bench_new_destinations            # 1,000 graphs, 1024-d
//! cargo run --release --example bench_new_destinations -- 200 64  # graphs, dimension
//! GRALKOR_BENCH_PHASES=1 cargo run --release --example bench_new_destinations -- 20
//! GRALKOR_BENCH_KEEP=1 cargo run --release --example bench_new_destinations -- 100
//! ```
//!
//! One engine with models (a scripted extractor that answers at once and a hashing
//! embedder, so every figure is the engine and the database) writes an episode to
//! each of N graphs that do not exist yet, on an embedded FalkorDB in a temporary
//! directory, then a second episode to the same graph. Prints the first write's cost
//! per graph (p50, p95, mean: preparing the graph — indices, the unique constraint,
//! the vector-debt counters — and the episode), the second write's (the same episode
//! work on a prepared graph), and the server's memory per empty prepared graph
//! (`INFO memory` `used_memory` before and after preparing the N graphs, divided by N).
//! A search right after each graph's first write must find the episode, or the
//! benchmark fails. With `GRALKOR_BENCH_PHASES=1` it also times the phases of
//! preparing one graph.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gralkor::falkordb::{EmbeddedConfig, FalkorConfig, FalkorDb};
use gralkor::graph::search::{COMBINED_HYBRID_SEARCH_RRF, SearchRequest};
use gralkor::graph::{AddEpisode, Engine, SourceKind, Timestamp};
use gralkor::llm::doubles::{HashEmbedder, ScriptedModel};

mod support;
use support::percentile;

#[tokio::main]
async fn main() {
    support::exit_on_error(try_main().await);
}

/// `used_memory` from `INFO memory`, in bytes.
async fn used_memory(socket: &std::path::Path) -> gralkor::Result<u64> {
    let client = redis::Client::open(format!("unix://{}", socket.display()))
        .map_err(|e| gralkor::Error::Protocol(format!("redis client: {e}")))?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| gralkor::Error::Protocol(format!("connecting: {e}")))?;
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await
        .map_err(|e| gralkor::Error::Protocol(format!("INFO memory: {e}")))?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| gralkor::Error::Protocol("INFO memory has no used_memory".into()))
}

fn summary(label: &str, mut times: Vec<Duration>) {
    times.sort();
    let mean = times.iter().sum::<Duration>().as_secs_f64() * 1e3 / times.len() as f64;
    println!(
        "{label:<34} p50 {:>8.2} ms   p95 {:>8.2} ms   mean {:>8.2} ms",
        percentile(&times, 0.50),
        percentile(&times, 0.95),
        mean
    );
}

async fn try_main() -> gralkor::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let graphs: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let dim: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1024);

    let dir = tempfile::tempdir().map_err(|e| gralkor::Error::Io {
        context: "creating a temporary data directory".into(),
        source: e,
    })?;
    let db = FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new(dir.path()))).await?;
    let socket = db
        .embedded_server()
        .expect("an embedded server")
        .socket_path()
        .to_owned();
    let model = ScriptedModel::new().respond_with(|req| {
        let prompt: String = req
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        Ok(support::answer(&req.schema.name, &prompt))
    });
    let engine = Engine::new(
        db.clone(),
        Arc::new(model),
        Arc::new(HashEmbedder::new(dim)),
    );

    if std::env::var_os("GRALKOR_BENCH_PHASES").is_some() {
        phases(&db, dim as u32, graphs.min(50)).await?;
    }

    println!("bench_new_destinations: {graphs} new graphs, {dim}-d embeddings, embedded FalkorDB");
    // Memory of empty prepared graphs, first, on a fresh server: indices only.
    let mut prepare = Vec::with_capacity(graphs);
    db.persist_index_changes().await?;
    let empty_before = used_memory(&socket).await?;
    for i in 0..graphs {
        let start = Instant::now();
        engine.build_indices(&format!("empty-{i:05}")).await?;
        prepare.push(start.elapsed());
    }
    // With the background AOF rewrite done (it would otherwise be counted or not by
    // chance).
    db.persist_index_changes().await?;
    let empty_after = used_memory(&socket).await?;
    // A written 1024-d graph holds about 12 MB (FalkorDB's vector indices allocate in
    // blocks), so the written graphs are deleted after their measurements unless
    // GRALKOR_BENCH_KEEP is set; the empty graphs stay.
    let keep = std::env::var_os("GRALKOR_BENCH_KEEP").is_some();
    let before = used_memory(&socket).await?;
    let mut first = Vec::with_capacity(graphs);
    let mut second = Vec::with_capacity(graphs);
    for i in 0..graphs {
        let graph = format!("dest-{i:05}");
        let start = Instant::now();
        let out = engine
            .add_episode(
                &graph,
                AddEpisode::new(
                    format!(
                        "Member {:03} met Member {:03} at Venue 01.",
                        i % 80,
                        (i + 1) % 80
                    ),
                    SourceKind::Text,
                    Timestamp::now(),
                ),
            )
            .await?;
        first.push(start.elapsed());
        // A search right after the first write finds the episode.
        let found = engine
            .search(
                &graph,
                &SearchRequest::new(
                    format!("Member {:03}", i % 80),
                    COMBINED_HYBRID_SEARCH_RRF.limit(5),
                ),
            )
            .await?;
        assert!(
            found
                .episodes
                .iter()
                .any(|e| e.episode.uuid == out.episode.uuid),
            "graph {graph}: a search right after the first write missed the episode"
        );
        assert!(
            !found.facts.is_empty() && !found.entities.is_empty(),
            "graph {graph}: a search right after the first write missed its facts or entities"
        );
        let start = Instant::now();
        engine
            .add_episode(
                &graph,
                AddEpisode::new(
                    format!(
                        "Member {:03} met Member {:03} at Venue 02.",
                        i % 80,
                        (i + 2) % 80
                    ),
                    SourceKind::Text,
                    Timestamp::now(),
                ),
            )
            .await?;
        second.push(start.elapsed());
        if !keep {
            engine.clear(&graph).await?;
        }
    }
    let after_writes = used_memory(&socket).await?;
    summary("first write to a new graph", first);
    summary("second write to the same graph", second);
    summary("preparing an empty graph", prepare);
    println!(
        "server memory: {:.1} KiB per empty prepared graph ({} graphs: {} -> {} bytes); \
         {:.1} KiB per graph with two episodes (0 unless GRALKOR_BENCH_KEEP)",
        (empty_after.saturating_sub(empty_before)) as f64 / 1024.0 / graphs as f64,
        graphs,
        empty_before,
        empty_after,
        (after_writes.saturating_sub(before)) as f64 / 1024.0 / graphs as f64,
    );
    Ok(())
}

/// The phases of preparing `n` graphs, timed one by one.
async fn phases(db: &FalkorDb, dim: u32, n: usize) -> gralkor::Result<()> {
    use gralkor::falkordb::IndexEntity;
    let specs = gralkor::graph::store::index_specs(dim);
    let (mut idx, mut constraint, mut debt) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let graph = format!("phase-{i:05}");
        let start = Instant::now();
        db.create_indices(&graph, &specs).await?;
        idx.push(start.elapsed());
        let start = Instant::now();
        db.create_unique_constraint(&graph, &IndexEntity::Node("Episodic".into()), "uuid")
            .await?;
        constraint.push(start.elapsed());
        let start = Instant::now();
        gralkor::graph::build_indices(db, &graph, dim).await?;
        debt.push(start.elapsed());
    }
    summary("phase: create_indices", idx);
    summary("phase: unique constraint", constraint);
    summary("phase: build_indices again", debt);
    Ok(())
}
