//! The cost of authorization on search: p50/p95 of the same searches through a
//! `NativeClient` without an authorizer and with the embedded one, over the same data
//! on an embedded FalkorDB (episodes only: fulltext search, no models).
//!
//! ```text
//! cargo run --release --example bench_access                # 10,000 episodes, 200 samples
//! cargo run --release --example bench_access -- 2000 100    # episodes, samples
//! ```
//!
//! Data: `n` episodes in the application Destination `team` (the subject is a member:
//! readable as a whole, hits pass the LookupResources pre-filter unchecked) and `n / 10`
//! in `other` (not a member; one in ten involves the subject). Three searches are
//! timed:
//!
//! * **team**: only `team` (the pre-filter alone: one LookupResources round trip,
//!   concurrent with the search);
//! * **all**: every Destination (`personal`, `global`, `team`, `other`);
//! * **other**: only `other`, the unreadable Destination: after the lookup, the two
//!   relationship reads of the fragments naming the subject (`involves`,
//!   `shared_by`), then `other` searched again restricted to those episodes, inside
//!   the statement and before the limit (no per-hit check).
//!
//! Then, for scale, the parts alone: the restricted search (the storage call the
//! client makes for `other`), the two reads and the lookup.
//!
//! Figures only, never assertions. Goal: with ≤ 1.2× without.
//!
//! Before the pre-filter (debug build, 10,000 + 1,000 episodes), `other` was 29.8× /
//! 12.9× (p50 / p95): it searched again with 200 results (26.4 ms p50) and checked
//! every hit's fragment in bulk (13.9 ms p50), and was exact only when the limit's
//! visible hits were among those 200.
//!
//! With the pre-filter, 10,000 + 1,000 episodes, 200 samples, on the shared 2-core
//! build machine (noisy: repeat before trusting a ratio):
//!
//! | search | build | without p50 / p95 | with p50 / p95 | ratio p50 / p95 |
//! |--------|-------|-------------------|----------------|-----------------|
//! | team   | release¹ | 2.00 / 6.00 ms | 3.17 / 8.69 ms   | 1.59× / 1.45× |
//! | all    | release¹ | 2.62 / 7.06 ms | 70.3 / 105.6 ms  | 26.8× / 15.0× |
//! | other  | release¹ | 0.69 / 0.89 ms | 57.6 / 71.6 ms   | 84.0× / 80.5× |
//! | team   | debug    | 3.36 / 8.27 ms | 4.20 / 10.16 ms  | 1.25× / 1.23× |
//! | all    | debug    | 4.62 / 14.85 ms | 19.27 / 29.92 ms | 4.17× / 2.01× |
//! | other  | debug    | 1.65 / 8.88 ms | 10.25 / 18.71 ms | 6.23× / 2.11× |
//!
//! ¹ Before the embedded authorizer's read by subject started from the subject's key
//! (it scanned every object): the two reads took 54.9 / 89.2 ms there, which is all of
//! the difference. With that fix (the debug rows): the two reads 3.30 / 7.01 ms, the
//! lookup 1.52 / 1.97 ms, the restricted search of `other` alone 2.10 / 6.55 ms (release:
//! 0.74 / 4.52 ms), so `other` costs the lookup, then the reads, then the restricted
//! search, one after the other. A selection of 10,100 uuids (100 of them in `other`)
//! makes the restricted search 38.0 / 55.4 ms debug (27.1 / 41.3 ms release): the
//! selection holds every fragment naming the subject in any graph — a prolific writer
//! brings all of its own (`shared_by`) along.
//!
//! After the lookups started from the subject's key (0.30 ms instead of 1.20 ms), the
//! single read of the fragments naming the subject, and the plan from the previous
//! lookup (a graph found unreadable is searched only restricted, its read running with
//! the lookup), release build, quiet machine, two runs
//! (`cargo run --release --no-default-features --example bench_access`):
//!
//! | search | without p50 / p95 | with p50 / p95 | ratio p50 / p95 |
//! |--------|-------------------|----------------|-----------------|
//! | team   | 1.71 / 2.19 ms    | 2.03 / 2.47 ms | 1.19× / 1.13×   |
//! | all    | 2.51 / 2.98 ms    | 3.67 / 4.55 ms | 1.47× / 1.53×   |
//! | other  | 0.69 / 1.13 ms    | 2.17 / 2.46 ms | 3.17× / 2.18×   |
//!
//! (the second run: 1.19× / 1.14×, 1.49× / 1.43×, 3.85× / 3.08×). `other` costs the
//! lookup and the read (concurrent, one connection) and then the restricted search
//! (0.98 ms), against a plain search of 0.55–0.69 ms; `status_of` over the same data
//! takes 2.10 / 2.81 ms.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gralkor::NativeStorage;
use gralkor::access::{
    Authorizer, EmbeddedAuthorizer, ObjectType, Relation, Relationship, RelationshipFilter, Subject,
};
use gralkor::client::{
    Client, Content, MemoryAdd, NativeClient, OperatorId, Search, StatusRequest,
};
use gralkor::destination::Destination;
use gralkor::falkordb::{EmbeddedConfig, EmbeddedServer, FalkorDb};
use gralkor::graph::Engine;
use gralkor::runtime::{Runtime, RuntimeConfig};
use gralkor::storage::{GraphQuery, ResultType, Storage};

const WORDS: [&str; 12] = [
    "release", "payments", "retry", "friday", "deploy", "invoice", "lisbon", "tea", "budget",
    "roadmap", "incident", "review",
];

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// `samples` searches of `graphs` restricted to `selection`, their times sorted.
async fn time_restricted(
    storage: &NativeStorage,
    graphs: &[gralkor::storage::GraphId],
    selection: &[uuid::Uuid],
    samples: usize,
) -> gralkor::Result<Vec<Duration>> {
    let mut t = Vec::new();
    for i in 0..samples {
        let query = GraphQuery::new(
            format!(
                "{} {}",
                WORDS[i % WORDS.len()],
                WORDS[(i * 7 + 3) % WORDS.len()]
            ),
            ResultType::Episodes,
            10,
        )
        .episodes(selection.to_vec());
        let start = Instant::now();
        storage.search(graphs, &query).await?;
        t.push(start.elapsed());
    }
    t.sort();
    Ok(t)
}

async fn time(client: &NativeClient, search: &Search, samples: usize) -> (Duration, Duration) {
    for _ in 0..10 {
        client.search(search).await.unwrap();
    }
    let mut t = Vec::with_capacity(samples);
    for i in 0..samples {
        let mut s = search.clone();
        s.query = format!(
            "{} {}",
            WORDS[i % WORDS.len()],
            WORDS[(i * 7 + 3) % WORDS.len()]
        );
        let start = Instant::now();
        client.search(&s).await.unwrap();
        t.push(start.elapsed());
    }
    t.sort();
    (pct(&t, 0.5), pct(&t, 0.95))
}

#[tokio::main]
async fn main() -> gralkor::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(10_000);
    let samples = args.get(1).copied().unwrap_or(200);
    let dir = tempfile_dir();
    let server = EmbeddedServer::start(&EmbeddedConfig::new(&dir)).await?;
    let db = FalkorDb::attach(&server, Duration::from_secs(60)).await?;
    let runtime = || {
        Runtime::new(
            RuntimeConfig::new()
                .destination("team")
                .destination("other"),
        )
    };
    let storage = || NativeStorage::new(Engine::episodes_only(db.clone()));
    let plain = NativeClient::from_parts(runtime()?, storage());
    let authz = Arc::new(EmbeddedAuthorizer::new(db.clone()));
    let guarded = NativeClient::from_parts(runtime()?, storage()).with_authorizer(authz.clone())?;

    let ada_op = OperatorId::new("ada")?;
    let (ada, bob) = (Subject::person("ada")?, Subject::person("bob")?);
    authz
        .write_relationships(&[
            Relationship::member("team", &ada)?,
            Relationship::member("team", &bob)?,
            Relationship::member("other", &bob)?,
        ])
        .await?;
    let load = Instant::now();
    for (dest, count, writer) in [("team", n, &bob), ("other", n / 10, &bob)] {
        for i in 0..count {
            let text = format!(
                "{} {} note {i}: the {} of {} is on {}",
                dest,
                WORDS[i % WORDS.len()],
                WORDS[(i / 3) % WORDS.len()],
                WORDS[(i / 7) % WORDS.len()],
                WORDS[(i / 11) % WORDS.len()]
            );
            let mut add = MemoryAdd::new(&ada_op, Content::document(text))
                .to_destination(dest)
                .subject(writer.clone());
            if dest == "other" && i % 10 == 0 {
                add = add.involves([ada.clone()]);
            }
            guarded.memory_add(&add).await?;
            if i % 500 == 499 {
                guarded.await_background_writes().await;
            }
        }
    }
    guarded.await_background_writes().await;
    println!(
        "loaded {n} + {} episodes in {:.1} s",
        n / 10,
        load.elapsed().as_secs_f64()
    );

    let base = Search::new(&ada_op, "release").max_results(10);
    for (label, search) in [
        ("team", base.clone().destinations(["team"])),
        ("all", base.clone()),
        ("other", base.clone().destinations(["other"])),
    ] {
        let (p50, p95) = time(&plain, &search, samples).await;
        let (a50, a95) = time(&guarded, &search.clone().subject(ada.clone()), samples).await;
        println!(
            "{label:>5}: without p50 {:>7.2} ms p95 {:>7.2} ms | with p50 {:>7.2} ms p95 {:>7.2} ms | ratio p50 {:.2}x p95 {:.2}x",
            p50.as_secs_f64() * 1e3,
            p95.as_secs_f64() * 1e3,
            a50.as_secs_f64() * 1e3,
            a95.as_secs_f64() * 1e3,
            a50.as_secs_f64() / p50.as_secs_f64(),
            a95.as_secs_f64() / p95.as_secs_f64(),
        );
    }
    // For scale: the restricted search alone (what the client runs for `other`
    // once it knows what the subject may view there).
    let naming = |relation: Relation| {
        RelationshipFilter::of_type(ObjectType::MemoryFragment)
            .relation(relation)
            .subject(ada.object().clone())
    };
    let viewable: Vec<uuid::Uuid> = authz
        .read_relationships(&naming(Relation::Involves))
        .await?
        .iter()
        .filter_map(|r| uuid::Uuid::parse_str(&r.resource.id).ok())
        .collect();
    let other = [Destination::new("other")?.graph_id(&ada_op)?];
    let restricted = storage();
    let t = time_restricted(&restricted, &other, &viewable, samples).await?;
    println!(
        "other, restricted to the {} viewable episodes: p50 {:>7.2} ms p95 {:>7.2} ms",
        viewable.len(),
        pct(&t, 0.5).as_secs_f64() * 1e3,
        pct(&t, 0.95).as_secs_f64() * 1e3
    );
    // The same with 10,000 more uuids in the selection, of episodes elsewhere (what a
    // subject who wrote 10,000 episodes in other graphs brings along): the cost of a
    // long selection list.
    let mut long = viewable.clone();
    long.extend((0..10_000).map(|_| uuid::Uuid::new_v4()));
    let t = time_restricted(&restricted, &other, &long, samples).await?;
    println!(
        "other, restricted to {} uuids ({} of them viewable there): p50 {:>7.2} ms p95 {:>7.2} ms",
        long.len(),
        viewable.len(),
        pct(&t, 0.5).as_secs_f64() * 1e3,
        pct(&t, 0.95).as_secs_f64() * 1e3
    );
    // And the read of the fragments naming the subject (`involves` or `shared_by`).
    let naming_ada =
        RelationshipFilter::of_type(ObjectType::MemoryFragment).subject(ada.object().clone());
    let mut t = Vec::new();
    for _ in 0..samples {
        let start = Instant::now();
        std::hint::black_box(authz.read_relationships(&naming_ada).await?);
        t.push(start.elapsed());
    }
    t.sort();
    println!(
        "read of the fragments naming the subject: p50 {:>7.2} ms p95 {:>7.2} ms",
        pct(&t, 0.5).as_secs_f64() * 1e3,
        pct(&t, 0.95).as_secs_f64() * 1e3
    );
    let mut t = Vec::new();
    for _ in 0..samples {
        let start = Instant::now();
        authz
            .lookup_resources(&ada, gralkor::access::Permission::Access)
            .await?;
        t.push(start.elapsed());
    }
    t.sort();
    println!(
        "lookup_resources (access): p50 {:>7.2} ms p95 {:>7.2} ms",
        pct(&t, 0.5).as_secs_f64() * 1e3,
        pct(&t, 0.95).as_secs_f64() * 1e3
    );
    // The health report over the same data, as the subject: four Destinations (two
    // of them readable and counted), the server, the authorizer.
    let request = StatusRequest::new().operator(&ada_op).subject(ada.clone());
    let mut t = Vec::new();
    for _ in 0..samples {
        let start = Instant::now();
        std::hint::black_box(guarded.status_of(&request).await);
        t.push(start.elapsed());
    }
    t.sort();
    println!(
        "status_of (4 Destinations, {} episodes): p50 {:>7.2} ms p95 {:>7.2} ms",
        n + n / 10,
        pct(&t, 0.5).as_secs_f64() * 1e3,
        pct(&t, 0.95).as_secs_f64() * 1e3
    );
    server.shutdown().await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gralkor-bench-access-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
