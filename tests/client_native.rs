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
