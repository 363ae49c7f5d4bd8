//! The agent tests' memory: a client of either kind with a capture buffer over it.

use std::sync::Arc;
use std::time::Duration;

use gralkor::NativeStorage;
use gralkor::agent::capture::{
    CaptureBuffer, CaptureConfig, CaptureSink, CaptureStore, FalkorCaptureStore,
    InMemoryCaptureStore,
};
use gralkor::client::{Client, InMemoryClient, NativeClient, OperatorId};
use gralkor::graph::Engine;
use gralkor::runtime::{Runtime, RuntimeConfig};

use super::ingest::CountingEmbedder;

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Twin,
    Native,
}

/// A client of either kind and a capture buffer over it (retries after 1 ms). The
/// native one gets a capture graph of its own, tagged `tag`: a buffer loads every
/// entry its store holds, and the tests of a binary run side by side.
pub async fn memory(kind: Kind, tag: &str) -> (Arc<dyn Client>, CaptureBuffer) {
    let config = CaptureConfig::new().retry_delays([Duration::from_millis(1); 3]);
    match kind {
        Kind::Twin => {
            let client = InMemoryClient::new();
            let buffer = CaptureBuffer::new(
                Arc::new(client.clone()),
                Arc::new(InMemoryCaptureStore::new()),
                config,
            )
            .await
            .unwrap();
            (Arc::new(client), buffer)
        }
        Kind::Native => {
            let db = super::db().await;
            let engine = Engine::without_llm(db.clone(), Arc::new(CountingEmbedder::new()));
            let client = NativeClient::from_parts(
                Runtime::new(RuntimeConfig::new()).unwrap(),
                NativeStorage::new(engine),
            );
            let graph = format!("test:{tag}:{}", uuid::Uuid::new_v4());
            let store: Arc<dyn CaptureStore> = Arc::new(FalkorCaptureStore::in_graph(db, graph));
            let sink: Arc<dyn CaptureSink> = Arc::new(client.clone());
            let buffer = CaptureBuffer::new(sink, store, config).await.unwrap();
            (Arc::new(client), buffer)
        }
    }
}

/// A fresh operator.
pub fn op() -> OperatorId {
    OperatorId::new(format!("op-{}", uuid::Uuid::new_v4())).unwrap()
}
