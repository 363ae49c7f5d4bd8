//! The `Client` contract run against `NativeClient`: the real engine on the shared
//! embedded FalkorDB, with a scripted model whose every episode yields one fact
//! carrying the episode's text, and a hashing embedder.

mod common;
#[macro_use]
mod client_contract;

use std::sync::Arc;

use common::ingest::{CountingEmbedder, Rules, answer};
use gralkor::client::{NativeClient, NativeStorage};
use gralkor::graph::Engine;
use gralkor::llm::doubles::ScriptedModel;
use gralkor::runtime::{Runtime, RuntimeConfig};
use serde_json::json;

/// Every episode: a narrator, a subject, and one fact whose text is the episode's.
fn rules() -> Rules {
    Rules {
        fallback: Some(Arc::new(|episode: &str| {
            json!({
                "entities": [{"name": "Narrator", "type_id": 0}, {"name": "Subject", "type_id": 0}],
                "facts": [{"source": "Narrator", "target": "Subject", "relation_type": "RELATES_TO",
                           "fact": episode, "valid_at": null, "invalid_at": null}],
            })
        })),
        ..Rules::default()
    }
}

async fn native(config: RuntimeConfig) -> NativeClient {
    let r = rules();
    let model = ScriptedModel::new().respond_with(move |req| answer(&r, req));
    let embedder = Arc::new(CountingEmbedder::new());
    let engine = Engine::new(Arc::new(model), embedder.clone());
    let storage = NativeStorage::new(common::db().await, engine, Some(embedder), None);
    NativeClient::from_parts(
        Runtime::new(config).expect("valid contract configuration"),
        storage,
    )
}

run_contract!(|config| client_contract::boxed(native(config)));

use gralkor::client::{Client, Content, Hit, Ingest, Search};
use gralkor::config::Config;
use gralkor::falkordb::{EmbeddedConfig, FalkorConfig, Params, Value};
use gralkor::provenance::Writer;

fn op() -> String {
    format!("op-{}", uuid::Uuid::new_v4())
}

#[tokio::test]
async fn a_replayed_ingest_stores_nothing_twice() {
    let r = rules();
    let model = ScriptedModel::new().respond_with(move |req| answer(&r, req));
    let embedder = Arc::new(CountingEmbedder::new());
    let engine = Engine::new(Arc::new(model.clone()), embedder.clone());
    let db = common::db().await;
    let client = NativeClient::from_parts(
        Runtime::new(RuntimeConfig::new()).unwrap(),
        NativeStorage::new(db.clone(), engine, Some(embedder), None),
    );
    let op = op();
    let request = Ingest::new(
        "turn-1",
        op.as_str(),
        "personal-chat",
        Content::conversation("Ada: I keep bees in Porto."),
    );
    let first = client.ingest(&request).await.unwrap();
    let calls = model.calls().len();
    let again = client.ingest(&request).await.unwrap();
    assert_eq!(
        again[0].episode, first[0].episode,
        "same request, same episode"
    );
    assert_eq!(model.calls().len(), calls, "a replay extracts nothing");
    let graph = format!("personal/{op}");
    let n = db
        .ro_query(
            &graph,
            "MATCH (e:Episodic) RETURN count(e) AS n",
            &Params::new(),
        )
        .await
        .unwrap();
    assert_eq!(n.get(0, "n").and_then(Value::as_int), Some(1));
    let other = Ingest::new(
        "turn-2",
        op.as_str(),
        "personal-chat",
        Content::conversation("Ada: I keep bees in Porto."),
    );
    let second = client.ingest(&other).await.unwrap();
    assert_ne!(
        second[0].episode, first[0].episode,
        "another id is another episode"
    );
    db.delete_graph(&graph).await.unwrap();
}

#[tokio::test]
async fn fact_search_returns_extracted_facts_with_their_lens_sources() {
    let client = native(RuntimeConfig::new()).await;
    let op = op();
    client
        .ingest(&Ingest::new(
            "t-1",
            op.as_str(),
            "personal-chat",
            Content::conversation("Ada: my violin teacher lives in Graz."),
        ))
        .await
        .unwrap();
    let found = client
        .search(&Search::new(op.as_str(), "violin teacher").facts())
        .await
        .unwrap();
    let fact = found
        .iter()
        .find_map(|r| r.hit.as_fact())
        .expect("the extracted fact is found");
    assert!(fact.fact.contains("violin"), "{}", fact.fact);
    assert_eq!(fact.sources.len(), 1);
    assert_eq!(
        fact.sources[0].writer,
        Some(Writer::Lens("personal-chat".into()))
    );
    assert!(!fact.sources[0].source_description.contains("[lens:"));
    assert!(found.iter().all(|r| r.destination == "personal"));
}

#[tokio::test]
async fn connect_from_config_without_models_stores_searchable_episodes_and_shuts_down() {
    let dir = tempfile::Builder::new()
        .prefix("gralkor-native-")
        .tempdir()
        .unwrap();
    let config = Config::new(FalkorConfig::embedded(EmbeddedConfig::new(dir.path())));
    assert!(!config.extracts());
    let client = NativeClient::connect(config, RuntimeConfig::new())
        .await
        .unwrap();
    let op = op();
    client
        .ingest(&Ingest::new(
            "t-1",
            op.as_str(),
            "personal-chat",
            Content::conversation("Ada: the allotment gate code is 4711."),
        ))
        .await
        .unwrap();
    let episodes = client
        .search(&Search::new(op.as_str(), "allotment gate"))
        .await
        .unwrap();
    assert_eq!(episodes.len(), 1);
    assert!(matches!(&episodes[0].hit, Hit::Episode(e) if e.content.contains("4711")));
    let facts = client
        .search(&Search::new(op.as_str(), "allotment gate").facts())
        .await
        .unwrap();
    assert!(facts.is_empty(), "episodes only: nothing extracted yet");
    let server = client.storage().db().embedded_server().unwrap().clone();
    client.shutdown().await.unwrap();
    assert!(server.pid().is_none(), "the embedded server stopped");
}
