//! Latency of an agent's recall, end to end: an operator's [`recall`] over three
//! Destinations (`personal`, `global` and an application `team`) of 10,000 facts each,
//! through a `NativeClient` on an embedded FalkorDB with the in-process embedder
//! (all-MiniLM-L6-v2, 384 dimensions) and no language model.
//!
//! ```text
//! cargo run --release --example bench_recall                 # 10,000 facts per Destination, 300 samples
//! cargo run --release --example bench_recall -- 2000 100     # facts per Destination, samples
//! BENCH_RECALL_VECTORS=hash cargo run --release --example bench_recall
//! BENCH_RECALL_DIR=/tmp/recall cargo run --release --example bench_recall   # keep the data
//! ```
//!
//! `BENCH_RECALL_DIR` keeps the embedded server's data in that directory: the first
//! run loads it, later runs with the same number of facts measure it as loaded (a
//! directory holding another number of facts is refused).
//!
//! Loading: synthetic facts (short English sentences from templates; 2,000 entities
//! and one episode per twenty facts per Destination) are written directly with the
//! engine's store functions (`save_entities`, `save_episode`, `save_facts` after
//! `build_indices`), then the facts' and entities' vector indices are rebuilt: the bulk
//! writes count every record as a possible stale index entry (an upper bound), and the
//! engine rebuilds an index once that count reaches 256, so a live graph never carries
//! 10,000 of them (with them, every vector query asks for 10,000 extra neighbours: the
//! first run measured p50 97 ms, p95 188 ms). Their vectors come from the in-process embedder itself, in
//! batches — so the queries' vectors land among real neighbours — unless
//! `BENCH_RECALL_VECTORS=hash` asks for deterministic bag-of-words vectors (much
//! faster to load, the vector search then finds arbitrary neighbours; the latency
//! shape is the same).
//!
//! Measured, p50/p95/p99 over the samples (after a warm-up):
//!
//! * **recall, extracting**: `gralkor::agent::recall` with the default options (10
//!   facts, 12 s deadline) through a client whose engine extracts (a deployment with a
//!   language model, where 10,000 facts come from; the model is never called by
//!   recall): the query embedding, one fact search across the three Destinations and
//!   the block rendering. Goal: p95 ≤ 15 ms.
//! * **recall, offline**: the same through an engine without a language model, whose
//!   search also asks for the episodes not yet extracted (they stand in as facts).
//! * **recall, offline, partial mode**: one search per Destination (three query
//!   embeddings).
//! * **the search alone**: the same engine searches over the three graphs with the
//!   query vector computed beforehand (facts only; facts and episodes);
//! * **the query embedding alone**, for scale.
//!
//! Each row also gives the CPU used per sample, in milliseconds, by the embedded server
//! (`server`) and by this process (`client`), read from `/proc` (0 elsewhere): on a
//! shared machine these move far less than the latencies do.
//!
//! Figures only, never assertions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gralkor::NativeStorage;
use gralkor::agent::recall::{RecallOptions, recall};
use gralkor::client::{Client, NativeClient, OperatorId};
use gralkor::falkordb::{EmbeddedConfig, FalkorConfig, FalkorDb};
use gralkor::graph::search::{Methods, RerankerKind, ScopeConfig, SearchConfig, SearchRequest};
use gralkor::graph::store::{VectorIndex, rebuild_vector_index, vector_debt};
use gralkor::graph::{
    self, Engine, EntityEdge, EntityNode, Episode, EpisodeState, SourceKind, Timestamp,
};
use gralkor::llm::Embedder;
use gralkor::llm::doubles::{HashEmbedder, ScriptedModel};
use gralkor::llm::local::{LocalEmbedder, LocalModelConfig};
use gralkor::provenance::Writer;
use gralkor::runtime::{Runtime, RuntimeConfig};

mod support;
use support::{Rng, cpu_seconds};

const DIM: usize = 384;
const FIRST: &[&str] = &[
    "Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory",
    "Niaj", "Olivia", "Peggy", "Rupert", "Sybil", "Trent", "Victor", "Walter", "Yvonne", "Zoe",
    "Liam", "Noah", "Emma", "Ava", "Mia", "Lucas", "Ethan", "Amelia", "Harper",
];
const LAST: &[&str] = &[
    "Smith", "Jones", "Garcia", "Rossi", "Tanaka", "Kim", "Nguyen", "Patel", "Okafor", "Silva",
    "Novak", "Dubois", "Jensen", "Haddad", "Moreau", "Fischer", "Costa", "Singh", "Brown",
    "Walker",
];
const CITY: &[&str] = &[
    "Paris", "Berlin", "London", "Tokyo", "Lagos", "Lima", "Oslo", "Seoul", "Cairo", "Madrid",
    "Rome", "Dublin", "Austin", "Nairobi", "Mumbai", "Hanoi", "Prague", "Vienna", "Lisbon",
    "Porto",
];
const THING: &[&str] = &[
    "coffee",
    "green tea",
    "jazz",
    "chess",
    "hiking",
    "sushi",
    "the piano",
    "marathons",
    "gardening",
    "sailing",
    "photography",
    "board games",
    "opera",
    "cycling",
    "pottery",
    "yoga",
];
const ORG: &[&str] = &[
    "Acme Labs",
    "Globex Systems",
    "Initech Bank",
    "Umbrella Foods",
    "Hooli Energy",
    "Vandelay Robotics",
    "Stark Media",
    "Wayne Logistics",
    "Wonka Health",
    "Tyrell Insurance",
];
const PROJECT: &[&str] = &[
    "billing",
    "search",
    "migration",
    "mobile app",
    "data platform",
    "security audit",
    "onboarding",
    "payments",
];

fn person(rng: &mut Rng) -> String {
    format!("{} {}", rng.pick(FIRST), rng.pick(LAST))
}

fn sentence(rng: &mut Rng, s: &str, t: &str) -> (String, &'static str) {
    match rng.below(6) {
        0 => (format!("{s} works at {}", rng.pick(ORG)), "WORKS_AT"),
        1 => (format!("{s} is married to {t}"), "MARRIED_TO"),
        2 => (format!("{s} reports to {t}"), "REPORTS_TO"),
        3 => (
            format!("{s} and {t} both enjoy {}", rng.pick(THING)),
            "SHARES_HOBBY",
        ),
        4 => (
            format!("{s} manages the {} project with {t}", rng.pick(PROJECT)),
            "MANAGES",
        ),
        _ => (
            format!("{s} moved to {} with {t}", rng.pick(CITY)),
            "MOVED_WITH",
        ),
    }
}

fn query_text(rng: &mut Rng) -> String {
    let who = person(rng);
    match rng.below(5) {
        0 => format!("where does {who} work?"),
        1 => format!("who is {who} married to?"),
        2 => format!("what is {who}'s {} project?", rng.pick(PROJECT)),
        3 => format!("did {who} move to {}?", rng.pick(CITY)),
        _ => format!("does {who} enjoy {}?", rng.pick(THING)),
    }
}

fn pct(sorted: &[Duration], q: f64) -> f64 {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)].as_secs_f64() * 1e3
}

/// Latencies and the CPU both processes used over them.
struct Measured {
    samples: Vec<Duration>,
    /// Milliseconds of CPU per sample: the embedded server's, this process's.
    server: f64,
    client: f64,
}

/// Times `each` over `items`, and the CPU the server (`server_stat`) and this process
/// used meanwhile: steadier than latency on a shared machine.
async fn measure<T, F, Fut>(
    server_stat: &str,
    items: &[T],
    mut each: F,
) -> gralkor::Result<Measured>
where
    F: FnMut(&T) -> Fut,
    Fut: std::future::Future<Output = gralkor::Result<()>>,
{
    let (server0, client0) = (cpu_seconds(server_stat), cpu_seconds("/proc/self/stat"));
    let mut samples = Vec::with_capacity(items.len());
    for item in items {
        let t = Instant::now();
        each(item).await?;
        samples.push(t.elapsed());
    }
    let per = |used: f64| used * 1e3 / items.len().max(1) as f64;
    Ok(Measured {
        server: per(cpu_seconds(server_stat) - server0),
        client: per(cpu_seconds("/proc/self/stat") - client0),
        samples,
    })
}

fn row(name: &str, measured: Measured) {
    let mut samples = measured.samples;
    samples.sort();
    println!(
        "| {name:<40} | {:>8.2} | {:>8.2} | {:>8.2} | {:>8.2} | {:>8.2} |",
        pct(&samples, 0.50),
        pct(&samples, 0.95),
        pct(&samples, 0.99),
        measured.server,
        measured.client,
    );
}

async fn load(
    db: &FalkorDb,
    graph_id: &str,
    facts: usize,
    seed: u64,
    vectors: &dyn Embedder,
) -> gralkor::Result<Vec<(VectorIndex, i64)>> {
    graph::build_indices(db, graph_id, DIM as u32).await?;
    let mut rng = Rng(seed);
    let entities: Vec<EntityNode> = (0..2_000)
        .map(|_| {
            let mut e = EntityNode::new(person(&mut rng));
            e.labels = vec!["Entity".into(), "Person".into()];
            e.summary = format!("{} is a person", e.name);
            e
        })
        .collect();
    for chunk in entities.chunks(500) {
        graph::save_entities(db, graph_id, chunk).await?;
    }
    let n_episodes = (facts / 20).max(1);
    let t0: Timestamp = "2024-01-01T00:00:00Z".parse()?;
    let mut episodes: Vec<Episode> = (0..n_episodes)
        .map(|i| {
            let mut ep = Episode::new(
                format!("bench episode {i}"),
                SourceKind::Message,
                Writer::Direct.describe("bench"),
                t0,
            )
            .writer(Writer::Direct.key());
            ep.state = EpisodeState::Complete;
            ep
        })
        .collect();
    let mut edges = Vec::with_capacity(facts);
    for i in 0..facts {
        let s = &entities[rng.below(entities.len())];
        let t = &entities[rng.below(entities.len())];
        let (text, name) = sentence(&mut rng, &s.name, &t.name);
        let mut edge = EntityEdge::new(s.uuid, t.uuid, name, text);
        edge.valid_at = Some(t0);
        let ep = &mut episodes[i % n_episodes];
        edge.episodes = vec![ep.uuid];
        ep.entity_edges.push(edge.uuid);
        edges.push(edge);
    }
    for chunk in edges.chunks_mut(512) {
        let texts: Vec<String> = chunk.iter().map(|e| e.fact.clone()).collect();
        let vs = vectors.embed(&texts, "bench").await?;
        for (e, v) in chunk.iter_mut().zip(vs) {
            e.fact_embedding = Some(v);
        }
        graph::save_facts(db, graph_id, chunk).await?;
    }
    for ep in &episodes {
        graph::save_episode(db, graph_id, ep).await?;
    }
    // The bulk writes count every record they wrote as possible stale index entries
    // (an upper bound), so every vector query would ask for 10,000 more neighbours.
    // The engine rebuilds an index once its count reaches 256; do it now, as it would.
    let debt = vector_debt(db, graph_id).await?;
    for index in [VectorIndex::Fact, VectorIndex::Entity] {
        rebuild_vector_index(db, graph_id, index).await?;
    }
    Ok(debt)
}

async fn run() -> gralkor::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let facts: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let samples: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(300);
    let hash_vectors = std::env::var("BENCH_RECALL_VECTORS").is_ok_and(|v| v == "hash");
    let kept = std::env::var_os("BENCH_RECALL_DIR").map(std::path::PathBuf::from);
    let temp = tempfile::tempdir().map_err(|e| gralkor::Error::Io {
        context: "temp dir".into(),
        source: e,
    })?;
    let dir = kept.clone().unwrap_or_else(|| temp.path().to_path_buf());
    let db = FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new(&dir))).await?;

    let started = Instant::now();
    let local = Arc::new(LocalEmbedder::load(&LocalModelConfig::default()).await?);
    println!(
        "bench_recall: {facts} facts in each of 3 Destinations, {samples} samples; \
         embedder loaded in {:.1} s; fact vectors: {}",
        started.elapsed().as_secs_f64(),
        if hash_vectors {
            "bag-of-words hash (BENCH_RECALL_VECTORS=hash)"
        } else {
            "the in-process embedder"
        }
    );
    let hash = HashEmbedder::new(DIM);
    let vectors: &dyn Embedder = if hash_vectors { &hash } else { &*local };

    let op = OperatorId::new("bench-operator")?;
    let graphs = [format!("personal/{op}"), "global".into(), "team".into()];
    let started = Instant::now();
    let marker = dir.join("bench_recall.facts");
    let loaded = std::fs::read_to_string(&marker).ok();
    match loaded.as_deref().map(str::trim) {
        Some(n) if n == facts.to_string() => {
            println!("{} facts already loaded in {}", 3 * facts, dir.display());
        }
        Some(n) => {
            return Err(gralkor::Error::InvalidInput {
                field: "BENCH_RECALL_DIR".into(),
                rule: format!("holds {n} facts per Destination, not {facts}"),
            });
        }
        None => {
            for (i, g) in graphs.iter().enumerate() {
                let debt = load(&db, g, facts, 0x9e37_79b9 ^ (i as u64 + 1), vectors).await?;
                if i == 0 {
                    println!("index debt after the bulk load, purged by rebuilding: {debt:?}");
                }
            }
            println!(
                "loaded {} facts in {:.1} s",
                3 * facts,
                started.elapsed().as_secs_f64()
            );
            if kept.is_some() {
                std::fs::write(&marker, facts.to_string()).map_err(|e| gralkor::Error::Io {
                    context: format!("writing {}", marker.display()),
                    source: e,
                })?;
            }
        }
    }

    let runtime = || Runtime::new(RuntimeConfig::new().destination("team"));
    // Offline (no language model): the search also asks for the episodes not yet
    // extracted, which stand in as facts.
    let client = NativeClient::from_parts(
        runtime()?,
        NativeStorage::new(Engine::without_llm(db.clone(), local.clone())),
    );
    // A deployment that extracts (10,000 facts per Destination come from one): the
    // search asks for facts only. Its language model is a script that is never called
    // — recall makes no model call.
    let extracting = NativeClient::from_parts(
        runtime()?,
        NativeStorage::new(Engine::new(
            db.clone(),
            Arc::new(ScriptedModel::new()),
            local.clone(),
        )),
    );
    let mut rng = Rng(7);
    let queries: Vec<String> = (0..samples).map(|_| query_text(&mut rng)).collect();
    let default = RecallOptions::new();
    let partial = RecallOptions::new().partial(true);
    for q in queries.iter().take(20) {
        recall(&client, &op, "bench", Some("s"), q, &default).await?;
        recall(&extracting, &op, "bench", Some("s"), q, &default).await?;
    }

    let server_stat = format!(
        "/proc/{}/stat",
        db.embedded_server().and_then(|s| s.pid()).unwrap_or(0)
    );
    let stat = server_stat.as_str();
    // One recall per query through `client`, counting the facts recalled in `seen`.
    let facts_seen = std::cell::Cell::new(0);
    let recalls = |client: NativeClient, options: RecallOptions| {
        let (op, seen) = (&op, &facts_seen);
        move |q: &String| {
            let (client, options, q) = (client.clone(), options.clone(), q.clone());
            async move {
                let r = recall(&client, op, "bench", Some("s"), &q, &options).await?;
                seen.set(seen.get() + r.facts.len());
                Ok(())
            }
        }
    };
    let facts_only = measure(stat, &queries, recalls(extracting.clone(), default.clone())).await?;
    facts_seen.set(0);
    let full = measure(stat, &queries, recalls(client.clone(), default.clone())).await?;
    let full_facts = facts_seen.get();
    let part = measure(stat, &queries, recalls(client.clone(), partial.clone())).await?;
    // The same engine search the client runs (facts and not-yet-extracted episodes,
    // hybrid, RRF, 10 per graph, over the three graphs), its query vector computed
    // beforehand: the search's own share.
    let engine = Engine::without_llm(db.clone(), local.clone());
    let scope = ScopeConfig::new(Methods::HYBRID, RerankerKind::Rrf);
    let config = SearchConfig {
        facts: Some(scope),
        entities: None,
        episodes: Some(scope),
        communities: None,
        limit: 10,
        min_score: 0.0,
    };
    let names: Vec<&str> = graphs.iter().map(String::as_str).collect();
    let mut vectors = Vec::with_capacity(samples);
    for q in &queries {
        let v = local
            .embed(std::slice::from_ref(q), "bench")
            .await?
            .remove(0);
        vectors.push((q.clone(), v));
    }
    let search = |config: SearchConfig| {
        let (engine, names) = (&engine, &names);
        move |(q, v): &(String, Vec<f32>)| {
            let request = SearchRequest::new(q.clone(), config).query_vector(v.clone());
            async move {
                engine.search_many(names, &request).await?;
                Ok(())
            }
        }
    };
    let search_only = measure(stat, &vectors, search(config)).await?;
    let facts_config = SearchConfig {
        episodes: None,
        ..config
    };
    let search_facts = measure(stat, &vectors, search(facts_config)).await?;
    // The facts search by one method at a time: where the search's time goes.
    let mut by_method = Vec::new();
    for methods in [Methods::FULLTEXT, Methods::VECTOR] {
        let one = SearchConfig {
            facts: Some(ScopeConfig::new(methods, RerankerKind::Rrf)),
            ..facts_config
        };
        by_method.push(measure(stat, &vectors, search(one)).await?);
    }
    let embed = measure(stat, &queries, |q| {
        let q = q.clone();
        let local = &local;
        async move {
            local.embed(std::slice::from_ref(&q), "bench").await?;
            Ok(())
        }
    })
    .await?;
    println!(
        "mean facts per block: {:.1}",
        full_facts as f64 / samples as f64
    );
    println!(
        "| {:<40} | {:>8} | {:>8} | {:>8} | {:>8} | {:>8} |",
        "ms", "p50", "p95", "p99", "server", "client"
    );
    println!(
        "|{:-<42}|{:->10}|{:->10}|{:->10}|{:->10}|{:->10}|",
        "", "", "", "", "", ""
    );
    row("recall, extracting (facts only)", facts_only);
    row("recall, offline (facts + episodes)", full);
    row("recall, offline, partial (3 searches)", part);
    row("search alone, facts only", search_facts);
    row("search alone, facts + episodes", search_only);
    let vector_only = by_method.pop().expect("two methods measured");
    row(
        "search alone, facts, fulltext only",
        by_method.pop().expect("two methods measured"),
    );
    row("search alone, facts, vector only", vector_only);
    row("query embedding alone", embed);
    // One shutdown: both clients share the database handle, which it stops.
    client.shutdown().await?;
    Ok(())
}

#[tokio::main]
async fn main() {
    support::exit_on_error(run().await);
}
