//! Search latency under write load on an embedded FalkorDB.
//!
//! ```text
//! cargo run --release --example bench_load                   # 5,000 facts, 384-d, 4 rounds of 2 s phases
//! cargo run --release --example bench_load -- 5000 384 2 4   # facts, dimension, seconds per phase, rounds
//! ```
//!
//! Builds a graph of facts with bulk statements (as `bench_search` does, smaller), then
//! runs 16 searchers (`EDGE_HYBRID_SEARCH_RRF`, precomputed query vectors, each
//! searching again as soon as it has its answer) in phases that alternate — alone, then
//! with 2 writers — so that both conditions meet the same machine. Each writer is its
//! own engine (as two processes would be) ingesting episodes into the searched graph
//! through a scripted model that answers after a delay (4 calls an episode): every
//! episode reads its candidates and commits 3 entities and 2 facts with embeddings.
//! Prints the service time of one search alone, then p50/p95 of the searches alone and
//! under load, the ratio of the p95s (over all rounds, and the lowest and highest
//! round), the writers' rate, and the CPU the server and this process used (in cores),
//! for these set-ups:
//!
//! * **engine, 200 ms**: writers use the searchers' `FalkorDb` (one application) and
//!   the model answers after 200 ms, as `bench_ingest`'s fake provider does;
//! * **engine, 0 ms**: the same with an instant model (writers as fast as they go);
//! * **engine, 0 ms, other graph**: the writers write to another graph (no contention
//!   on the searched graph's lock);
//! * **bulk pipelines**: each writer sends pipelines of 200 entity `CREATE`s with
//!   embeddings (an import), in statements per second.
//!
//! `BENCH_ROWS=engine,bulk` keeps the rows whose name starts with one of the words;
//! `BENCH_WRITE_RATE=n` paces each engine writer to at most `n` episodes a second.
//!
//! Figures only, never assertions.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gralkor::falkordb::{EmbeddedConfig, FalkorConfig, FalkorDb, Params, Value};
use gralkor::graph::search::{self, SearchRequest};
use gralkor::graph::{self, AddEpisode, Engine, SourceKind, Timestamp};
use gralkor::llm::doubles::{HashEmbedder, ScriptedModel};
use gralkor::llm::{GenerateRequest, Generation, LanguageModel, ModelSize};
use serde_json::Value as Json;

mod support;
use support::{Rng, cpu_seconds, map, percentile};

const SEARCHERS: usize = 16;
const WRITERS: usize = 2;
const GRAPH: &str = "bench-load";
const OTHER: &str = "bench-load-other";
const WORDS: &[&str] = &[
    "coffee",
    "jazz",
    "chess",
    "hiking",
    "sushi",
    "piano",
    "sailing",
    "opera",
    "cycling",
    "pottery",
    "yoga",
    "baking",
    "billing",
    "payments",
    "search",
    "migration",
    "Paris",
    "Berlin",
    "Tokyo",
    "Lagos",
    "Lima",
    "Oslo",
    "Seoul",
    "Cairo",
];

/// Answers the engine's four schemas (see [`support::answer`]).
fn answer(request: &GenerateRequest) -> gralkor::Result<Json> {
    let prompt: String = request
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    Ok(support::answer(&request.schema.name, &prompt))
}

/// The scripted model, answering after `delay` (a provider's latency).
#[derive(Debug)]
struct Delayed {
    model: ScriptedModel,
    delay: Duration,
}

#[async_trait::async_trait]
impl LanguageModel for Delayed {
    async fn generate(&self, request: &GenerateRequest) -> gralkor::Result<Generation> {
        tokio::time::sleep(self.delay).await;
        self.model.generate(request).await
    }
    fn provider(&self) -> &str {
        self.model.provider()
    }
    fn model(&self, size: ModelSize) -> &str {
        self.model.model(size)
    }
}

fn sentence(rng: &mut Rng, s: usize, t: usize) -> String {
    let (a, b) = (WORDS[rng.below(WORDS.len())], WORDS[rng.below(WORDS.len())]);
    match rng.below(3) {
        0 => format!("Person {s} and Person {t} both enjoy {a} and {b}"),
        1 => format!("Person {s} met Person {t} in {a} while talking about {b}"),
        _ => format!("Person {s} manages the {a} project with Person {t} in {b}"),
    }
}

fn person(i: usize) -> String {
    uuid::Uuid::from_u128(i as u128).to_string()
}

async fn load(db: &FalkorDb, facts: usize, emb: &HashEmbedder) -> gralkor::Result<()> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let n_entities = (facts / 2).max(2);
    let people: Vec<Value> = (0..n_entities)
        .map(|i| {
            let name = format!("Person {i}");
            map(vec![
                ("uuid", person(i).into()),
                ("emb", Value::Vector(emb.vector(&name))),
                ("name", name.into()),
            ])
        })
        .collect();
    for chunk in people.chunks(500) {
        db.query(
            GRAPH,
            "UNWIND $rows AS r CREATE (:Entity {uuid: r.uuid, name: r.name, summary: '', \
             attributes: '{}', created_at: 0, name_embedding: vecf32(r.emb)})",
            &Params::new().set("rows", chunk.to_vec()),
        )
        .await?;
    }
    let rows: Vec<Value> = (0..facts)
        .map(|i| {
            let (s, t) = (rng.below(n_entities), rng.below(n_entities));
            let text = sentence(&mut rng, s, t);
            map(vec![
                (
                    "uuid",
                    uuid::Uuid::from_u128((1 << 64) + i as u128)
                        .to_string()
                        .into(),
                ),
                ("s", person(s).into()),
                ("t", person(t).into()),
                ("emb", Value::Vector(emb.vector(&text))),
                ("fact", text.into()),
            ])
        })
        .collect();
    for chunk in rows.chunks(500) {
        db.query(
            GRAPH,
            "UNWIND $rows AS r MATCH (s:Entity {uuid: r.s}) MATCH (t:Entity {uuid: r.t}) \
             CREATE (s)-[:RELATES_TO {uuid: r.uuid, name: 'RELATED', fact: r.fact, \
                 fact_embedding: vecf32(r.emb), episodes: [], valid_at: 0, invalid_at: null, \
                 expired_at: null, created_at: 0, attributes: '{}', source_uuid: r.s, \
                 target_uuid: r.t}]->(t)",
            &Params::new().set("rows", chunk.to_vec()),
        )
        .await?;
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Load<'a> {
    /// Episodes through these engines (one writer each).
    Engine(&'a [Engine]),
    /// 200-statement pipelines, from this many writers.
    Bulk(usize),
}

struct Writers<'a> {
    load: Load<'a>,
    db: &'a FalkorDb,
    graph: &'a str,
    next: &'a AtomicUsize,
}

struct Phase {
    latencies: Vec<Duration>,
    writes: usize,
    /// Cores used by the server and by this process.
    server: f64,
    client: f64,
}

/// One phase: `searchers_n` searchers for `secs`, with the writers if given.
async fn phase(
    db: &FalkorDb,
    queries: &Arc<Vec<(String, Vec<f32>)>>,
    searchers_n: usize,
    secs: f64,
    writers: Option<&Writers<'_>>,
) -> gralkor::Result<Phase> {
    let server_stat = format!(
        "/proc/{}/stat",
        db.embedded_server().and_then(|s| s.pid()).unwrap_or(0)
    );
    let (server0, client0, t0) = (
        cpu_seconds(&server_stat),
        cpu_seconds("/proc/self/stat"),
        Instant::now(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut searchers = Vec::new();
    for s in 0..searchers_n {
        let (db, queries, stop) = (db.clone(), queries.clone(), stop.clone());
        searchers.push(tokio::spawn(async move {
            let mut out = Vec::new();
            let mut i = s * 7;
            while !stop.load(Ordering::Relaxed) {
                let (q, v) = &queries[i % queries.len()];
                i += 1;
                let req = SearchRequest::new(q.clone(), search::EDGE_HYBRID_SEARCH_RRF)
                    .query_vector(v.clone());
                let t = Instant::now();
                std::hint::black_box(search::search(&db, GRAPH, &req, None, None).await?);
                out.push(t.elapsed());
            }
            gralkor::Result::Ok(out)
        }));
    }
    let mut writing = Vec::new();
    if let Some(w) = writers {
        let engines: Vec<Option<Engine>> = match w.load {
            Load::Engine(engines) => engines.iter().cloned().map(Some).collect(),
            Load::Bulk(n) => vec![None; n],
        };
        for engine in engines {
            let (db, graph, stop) = (w.db.clone(), w.graph.to_owned(), stop.clone());
            let first = w.next.fetch_add(1_000_000, Ordering::Relaxed);
            let dim = queries[0].1.len();
            let rate = std::env::var("BENCH_WRITE_RATE")
                .ok()
                .and_then(|r| r.parse::<f64>().ok())
                .filter(|r| *r > 0.0);
            writing.push(tokio::spawn(async move {
                let mut n = 0;
                let mut pace = rate.map(|r| {
                    let mut t = tokio::time::interval(Duration::from_secs_f64(1.0 / r));
                    t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    t
                });
                while !stop.load(Ordering::Relaxed) {
                    if let (Some(pace), Some(_)) = (pace.as_mut(), &engine) {
                        pace.tick().await;
                    }
                    let i = first + n;
                    match &engine {
                        Some(engine) => {
                            let text = format!(
                                "Member {} met Member {} at Venue {}.",
                                i,
                                i + 500_000,
                                i % 97
                            );
                            let request = AddEpisode::new(text, SourceKind::Text, Timestamp::now());
                            engine.add_episode(&graph, request).await?;
                            n += 1;
                        }
                        None => {
                            let stmts: Vec<(String, Params)> = (0..200)
                                .map(|j| {
                                    let mut v = vec![0.5f32; dim];
                                    v[(i + j) % dim] = 1.0;
                                    (
                                        "CREATE (:Entity {uuid: $u, name: $n, summary: '', \
                                         attributes: '{}', created_at: 0, \
                                         name_embedding: vecf32($v)})"
                                            .to_owned(),
                                        Params::new()
                                            .set("u", person(1_000_000_000 + i + j))
                                            .set("n", format!("Imported {}", i + j))
                                            .set("v", v),
                                    )
                                })
                                .collect();
                            db.pipeline(&graph, &stmts).await?;
                            n += stmts.len();
                        }
                    }
                }
                gralkor::Result::Ok(n)
            }));
        }
    }
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    for s in searchers {
        latencies.extend(s.await.expect("searcher")?);
    }
    let wall = t0.elapsed().as_secs_f64();
    let (server1, client1) = (cpu_seconds(&server_stat), cpu_seconds("/proc/self/stat"));
    let mut writes = 0;
    for w in writing {
        writes += w.await.expect("writer")?;
    }
    Ok(Phase {
        latencies,
        writes,
        server: (server1 - server0) / wall,
        client: (client1 - client0) / wall,
    })
}

#[tokio::main]
async fn main() {
    support::exit_on_error(try_main().await);
}

async fn try_main() -> gralkor::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: f64| {
        args.get(i)
            .and_then(|a| a.parse::<f64>().ok())
            .unwrap_or(default)
    };
    let (facts, dim) = (arg(0, 5000.0) as usize, arg(1, 384.0) as usize);
    let (secs, rounds) = (arg(2, 2.0), arg(3, 4.0) as usize);
    let dir = tempfile::tempdir().map_err(|e| gralkor::Error::Io {
        context: "creating a temporary data directory".into(),
        source: e,
    })?;
    let db = FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new(dir.path()))).await?;
    let emb = Arc::new(HashEmbedder::new(dim));
    let started = Instant::now();
    graph::build_indices(&db, GRAPH, dim as u32).await?;
    graph::build_indices(&db, OTHER, dim as u32).await?;
    load(&db, facts, &emb).await?;
    println!(
        "bench_load: {facts} facts, {dim}-d, {SEARCHERS} searchers, {WRITERS} writers, \
         {rounds} rounds of {secs} s phases, {} cores; built in {:.1} s",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        started.elapsed().as_secs_f64()
    );
    let mut rng = Rng(42);
    let queries: Arc<Vec<(String, Vec<f32>)>> = Arc::new(
        (0..200)
            .map(|_| {
                let q = format!(
                    "Person {} {} {}",
                    rng.below(facts / 2),
                    WORDS[rng.below(WORDS.len())],
                    WORDS[rng.below(WORDS.len())]
                );
                let v = emb.vector(&q);
                (q, v)
            })
            .collect(),
    );
    let model = ScriptedModel::new().respond_with(answer);
    let engines = |ms: u64| -> Vec<Engine> {
        (0..WRITERS)
            .map(|_| {
                let model = Delayed {
                    model: model.clone(),
                    delay: Duration::from_millis(ms),
                };
                Engine::new(db.clone(), Arc::new(model), emb.clone())
            })
            .collect()
    };
    let (slow, fast) = (engines(200), engines(0));
    let next = AtomicUsize::new(0);
    // Warm-up: plan caches, the engines' indices, a first episode per graph.
    phase(&db, &queries, SEARCHERS, 1.0, None).await?;
    for (engines, graph) in [(&fast, GRAPH), (&fast, OTHER), (&slow, GRAPH)] {
        let w = Writers {
            load: Load::Engine(engines),
            db: &db,
            graph,
            next: &next,
        };
        phase(&db, &queries, 0, 0.5, Some(&w)).await?;
    }
    let mut one = phase(&db, &queries, 1, secs, None).await?.latencies;
    one.sort();
    println!(
        "one search at a time: p50 {:.2} ms, p95 {:.2} ms",
        percentile(&one, 0.5),
        percentile(&one, 0.95)
    );

    println!();
    println!(
        "| {:<26} | alone p50 | alone p95 | loaded p50 | loaded p95 | p95 ratio | rounds    | writes/s | server cores | client cores |",
        "writers"
    );
    println!(
        "|----------------------------|----------:|----------:|-----------:|-----------:|----------:|-----------|---------:|--------------|--------------|"
    );
    for (name, load, graph) in [
        ("engine, 200 ms", Load::Engine(&slow), GRAPH),
        ("engine, 0 ms", Load::Engine(&fast), GRAPH),
        ("engine, 0 ms, other graph", Load::Engine(&fast), OTHER),
        ("bulk pipelines", Load::Bulk(WRITERS), GRAPH),
    ] {
        if let Ok(only) = std::env::var("BENCH_ROWS")
            && !only.split(',').any(|o| name.starts_with(o.trim()))
        {
            continue;
        }
        let (mut alone, mut loaded, mut writes) = (Vec::new(), Vec::new(), 0);
        let (mut lo, mut hi) = (f64::MAX, 0f64);
        let mut cores = [0f64; 4];
        let w = Writers {
            load,
            db: &db,
            graph,
            next: &next,
        };
        for _ in 0..rounds {
            let mut a = phase(&db, &queries, SEARCHERS, secs, None).await?;
            let mut l = phase(&db, &queries, SEARCHERS, secs, Some(&w)).await?;
            a.latencies.sort();
            l.latencies.sort();
            let r = percentile(&l.latencies, 0.95) / percentile(&a.latencies, 0.95);
            (lo, hi) = (lo.min(r), hi.max(r));
            for (c, x) in cores
                .iter_mut()
                .zip([a.server, l.server, a.client, l.client])
            {
                *c += x / rounds as f64;
            }
            alone.extend(a.latencies);
            loaded.extend(l.latencies);
            writes += l.writes;
        }
        alone.sort();
        loaded.sort();
        let (a50, a95) = (percentile(&alone, 0.5), percentile(&alone, 0.95));
        let (l50, l95) = (percentile(&loaded, 0.5), percentile(&loaded, 0.95));
        println!(
            "| {name:<26} | {a50:>9.2} | {a95:>9.2} | {l50:>10.2} | {l95:>10.2} | {:>8.2}× | {lo:.2}–{hi:.2} | {:>8.1} | {:.2} → {:.2}  | {:.2} → {:.2}  |",
            l95 / a95,
            writes as f64 / (secs * rounds as f64),
            cores[0],
            cores[1],
            cores[2],
            cores[3],
        );
    }
    println!(
        "\n(latencies in ms; every search of every phase counts; writes/s: episodes, or \
         statements for bulk pipelines; cores: alone → loaded)"
    );
    db.shutdown().await?;
    Ok(())
}
