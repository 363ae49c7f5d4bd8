//! Hostile input through both clients, as property tests: the native client on the
//! shared embedded FalkorDB (the real engine, a scripted model, a hashing embedder)
//! and the in-memory twin, side by side. Mirrors `test-trees/runtime.md` (names).
//!
//! * Names: any Destination, Lens and operator name the runtime accepts can be used to
//!   ingest, search and replace through both clients; any it rejects names its entry.

mod common;

use std::cell::Cell;
use std::sync::{Arc, OnceLock};

use common::ingest::{CountingEmbedder, Rules, answer};
use gralkor::client::{
    Client, Content, EpisodeRef, Hit, InMemoryClient, Ingest, NativeClient, NativeStorage, Replace,
    Search,
};
use gralkor::falkordb::FalkorDb;
use gralkor::graph::Engine;
use gralkor::lens::{Graph, Lens};
use gralkor::llm::doubles::ScriptedModel;
use gralkor::provenance::Writer;
use gralkor::runtime::{Runtime, RuntimeConfig};
use gralkor::{Error, Result};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;

struct Fixture {
    rt: tokio::runtime::Runtime,
    db: FalkorDb,
    engine: Engine,
    embedder: Arc<CountingEmbedder>,
}

/// One runtime, one database handle and one engine for every case of the binary.
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let db = rt.block_on(common::db());
        let rules = Rules {
            fallback: Some(Arc::new(|episode: &str| {
                json!({
                    "entities": [{"name": "Narrator", "type_id": 0}, {"name": "Subject", "type_id": 0}],
                    "facts": [{"source": "Narrator", "target": "Subject", "relation_type": "RELATES_TO",
                               "fact": episode, "valid_at": null, "invalid_at": null}],
                })
            })),
            ..Rules::default()
        };
        let model = ScriptedModel::new().respond_with(move |req| answer(&rules, req));
        let embedder = Arc::new(CountingEmbedder::new());
        let engine = Engine::new(Arc::new(model), embedder.clone());
        Fixture {
            rt,
            db,
            engine,
            embedder,
        }
    })
}

fn native(config: RuntimeConfig) -> Result<NativeClient> {
    let f = fixture();
    let storage = NativeStorage::new(
        f.db.clone(),
        f.engine.clone(),
        Some(f.embedder.clone()),
        None,
    );
    Ok(NativeClient::from_parts(Runtime::new(config)?, storage))
}

fn word() -> String {
    format!("zq{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

// ------------------------------------------------------------------ names

fn hostile_name() -> BoxedStrategy<String> {
    prop_oneof![
        6 => "[a-z][a-z0-9-]{0,12}",
        1 => "\\PC{1,16}",
        1 => any::<String>(),
        1 => (250usize..=262).prop_map(|n| "n".repeat(n)),
        1 => (125usize..=131).prop_map(|n| "é".repeat(n)),
        1 => Just("l".repeat(5000)),
        1 => "[a-z]{1,4}\0[a-z]{0,4}",
        1 => "[a-z]{1,4}[\t\n\r][a-z]{1,4}",
        1 => "[a-z]{1,4} \\[lens: [a-z]{1,4}\\]?",
        1 => prop_oneof![
            Just("personal-chat"), Just("global"), Just("personal"), Just("operator"),
            Just("default"), Just("personal/x"), Just(" pad"), Just("reflection:x"),
        ]
        .prop_map(String::from),
    ]
    .boxed()
}

/// Ingests, searches (episodes, facts, nodes), fetches and replaces through names
/// the runtime accepted.
async fn use_every_name(client: &dyn Client, dest: &str, lens: &str, replacer: &str, op: &str) {
    let w = word();
    let written = client
        .ingest(
            &Ingest::new("i-1", op, lens, Content::document(format!("{w} was noted")))
                .source_description("notes"),
        )
        .await
        .expect("ingest");
    assert_eq!(written.len(), 1);
    let found = client
        .search(&Search::new(op, &w).destinations([dest]).lenses([lens]))
        .await
        .expect("episode search");
    assert_eq!(found.len(), 1, "{found:?}");
    let Hit::Episode(e) = &found[0].hit else {
        panic!("{found:?}")
    };
    assert_eq!(
        (e.writer.clone(), e.source_description.as_str()),
        (Some(Writer::Lens(lens.into())), "notes")
    );
    let facts = client
        .search(
            &Search::new(op, &w)
                .destinations([dest])
                .lenses([lens])
                .facts(),
        )
        .await
        .expect("fact search");
    assert!(!facts.is_empty());
    for r in &facts {
        let fact = r.hit.as_fact().unwrap();
        assert!(
            fact.sources
                .iter()
                .all(|s| s.writer == Some(Writer::Lens(lens.into())))
        );
    }
    let got = client
        .get_episode(&EpisodeRef::new(op, dest, written[0].episode))
        .await
        .expect("get_episode")
        .expect("the episode");
    assert_eq!(got.writer, Some(Writer::Lens(lens.into())));
    client
        .replace(&Replace::new(
            op,
            replacer,
            Graph::new().node("n", ["Thing"], json!({"name": w})),
        ))
        .await
        .expect("replace");
    let nodes = client
        .search(&Search::new(op, &w).destinations([dest]).nodes(["Thing"]))
        .await
        .expect("node search");
    assert!(
        nodes
            .iter()
            .any(|r| r.hit.as_node().is_some_and(|n| n.name == w)),
        "{nodes:?}"
    );
}

#[test]
fn every_name_the_runtime_accepts_works_through_both_clients() {
    let f = fixture();
    let (accepted, rejected) = (Cell::new(0), Cell::new(0));
    let mut runner = TestRunner::new(Config {
        cases: 64,
        max_shrink_iters: 100,
        failure_persistence: None,
        ..Config::default()
    });
    let names = (
        hostile_name(),
        hostile_name(),
        hostile_name(),
        hostile_name(),
    );
    runner
        .run(&names, |(dest, lens, replacer, op)| {
            let config = RuntimeConfig::new()
                .destination(dest.clone())
                .lens(Lens::appending(lens.clone(), dest.clone()))
                .lens(Lens::replace_graph(replacer.clone(), dest.clone()));
            let twin = match InMemoryClient::with_config(config.clone()) {
                Ok(twin) => twin,
                Err(Error::Config { field, rule }) => {
                    let entry = field == "destinations[0]"
                        || (field.starts_with("lenses[") && field.ends_with("].name"));
                    prop_assert!(entry, "`{}` {}", field, rule);
                    let short = field.len() <= gralkor::destination::MAX_NAME_BYTES + 16;
                    prop_assert!(!field.contains('\0') && short, "{:?}", field);
                    rejected.set(rejected.get() + 1);
                    return Ok(());
                }
                Err(other) => panic!("not a configuration error: {other:?}"),
            };
            let native = native(config).expect("the same configuration");
            f.rt.block_on(async {
                for client in [&native as &dyn Client, &twin] {
                    if gralkor::destination::validate_operator_id("operator_id", &op).is_err() {
                        let err = client
                            .ingest(&Ingest::new("i", &op, &lens, Content::document("x")))
                            .await
                            .unwrap_err();
                        assert!(
                            matches!(&err, Error::InvalidInput { field, .. } if field == "operator_id"),
                            "{err:?}"
                        );
                    } else {
                        use_every_name(client, &dest, &lens, &replacer, &op).await;
                    }
                }
            });
            accepted.set(accepted.get() + 1);
            Ok(())
        })
        .unwrap();
    let (accepted, rejected) = (accepted.get(), rejected.get());
    assert!(
        accepted > 10 && rejected > 10,
        "{accepted} accepted, {rejected} rejected"
    );
}
