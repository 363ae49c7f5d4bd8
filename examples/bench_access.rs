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
//! in `other` (not a member; one in ten involves the subject, so its hits are
//! over-fetched and checked by fragment `view`). Three searches are timed:
//!
//! * **team**: only `team` (the pre-filter alone: one LookupResources round trip);
//! * **all**: every Destination (`personal`, `global`, `team`, `other`): the
//!   pre-filter plus the per-fragment filter of the unreadable graphs;
//! * **other**: only `other` (the per-fragment filter alone).
//!
//! Figures only, never assertions. Goal: with ≤ 1.2× without.
//!
//! Measured on the shared 2-core build machine, **debug build** (`cargo run
//! --no-default-features --example bench_access -- 10000 200`; a release build was
//! not run), 10,000 + 1,000 episodes:
//!
//! | search | without p50 / p95 | with p50 / p95 | ratio p50 / p95 |
//! |--------|-------------------|----------------|-----------------|
//! | team   | 2.97 / 10.47 ms   | 6.99 / 12.51 ms | 2.35× / 1.20× |
//! | all    | 8.18 / 17.33 ms   | 73.5 / 100.3 ms | 8.99× / 5.79× |
//! | other  | 1.79 / 10.05 ms   | 76.2 / 108.4 ms | 42.7× / 10.8× |
//!
//! A second 10,000 run (after the changes to `check_many`): team 3.67 / 9.67 → 6.54 /
//! 15.26 ms (1.78× / 1.58×), all 13.1× / 4.1×, other 29.8× / 12.9×; the widened
//! 200-hit search alone 26.4 ms p50, the bulk view check of 200 fragments 13.9 ms p50.
//! The machine is noisy: repeat before trusting a ratio.
//!
//! At 3,000 + 300 episodes: team 1.18× / 1.18× (another run 1.29× / 1.17×; the
//! lookup alone 0.93 ms p50); other 16× (its widened 200-hit
//! search alone 7.4 ms p50, the bulk view check of 87 fragments 7.6 ms p50). The
//! pre-filter path meets the goal; the per-fragment path (graphs the subject cannot
//! read as a whole) does not yet: it searches again with 200 results and checks each.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gralkor::access::{Authorizer, EmbeddedAuthorizer, Relationship, Subject};
use gralkor::client::{Client, Content, MemoryAdd, NativeClient, OperatorId, Search};
use gralkor::falkordb::{EmbeddedConfig, EmbeddedServer, FalkorDb};
use gralkor::graph::Engine;
use gralkor::runtime::{Runtime, RuntimeConfig};
use gralkor::storage::NativeStorage;

const WORDS: [&str; 12] = [
    "release", "payments", "retry", "friday", "deploy", "invoice", "lisbon", "tea", "budget",
    "roadmap", "incident", "review",
];

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
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
    // For scale: the widened search alone (what `other` runs again before filtering).
    let wide = base.clone().destinations(["other"]).max_results(200);
    let (w50, w95) = time(&plain, &wide, samples).await;
    println!(
        "other, without, 200 results: p50 {:>7.2} ms p95 {:>7.2} ms",
        w50.as_secs_f64() * 1e3,
        w95.as_secs_f64() * 1e3
    );
    // And the bulk view check of 200 fragments alone.
    let some: Vec<gralkor::access::ObjectRef> = plain
        .search(&wide)
        .await?
        .iter()
        .filter_map(|r| {
            r.hit
                .as_episode()
                .map(|e| gralkor::access::ObjectRef::fragment(e.uuid))
        })
        .collect();
    let mut t = Vec::new();
    for _ in 0..samples {
        let start = Instant::now();
        authz
            .check_many(&ada, gralkor::access::Permission::View, &some)
            .await?;
        t.push(start.elapsed());
    }
    t.sort();
    println!(
        "check_many of {} fragments: p50 {:>7.2} ms p95 {:>7.2} ms",
        some.len(),
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
    server.shutdown().await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gralkor-bench-access-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
