//! What a storage reports of itself for a status report ([`Storage::status`](super::Storage::status),
//! [`Storage::graph_status`](super::Storage::graph_status)).

use serde::Serialize;

use crate::vocab::ServerInfo;

/// A storage's backend after a round trip: what it is, the server's versions and
/// memory, how many graphs it holds, and the models it uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StorageStatus {
    /// `FalkorDB (embedded)`, `FalkorDB (remote)`, `in-memory`, or the storage's type
    /// name.
    pub backend: String,
    /// The FalkorDB server's versions and memory, for a storage on FalkorDB.
    pub server: Option<ServerInfo>,
    /// Graphs stored.
    pub graphs: usize,
    /// The models the storage calls (none for a storage that does not extract or
    /// embed).
    pub models: Vec<ModelStatus>,
    /// How the models were chosen, when the storage was built from a
    /// `Config` (its `describe`: which
    /// model, and because of which variable). Never contains a key.
    pub configuration: Option<String>,
}

impl StorageStatus {
    /// A status naming only the backend.
    pub fn new(backend: impl Into<String>) -> StorageStatus {
        StorageStatus {
            backend: backend.into(),
            ..StorageStatus::default()
        }
    }
}

/// One model a storage calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ModelStatus {
    /// `llm`, `embedder` or `reranker`.
    pub role: &'static str,
    /// The provider (`openai`, `google`, `local`, `scripted`, …).
    pub provider: String,
    /// The model; for a language model, its main one.
    pub model: String,
}

impl ModelStatus {
    /// A model of `role`.
    pub fn new(role: &'static str, provider: impl Into<String>, model: impl Into<String>) -> Self {
        ModelStatus {
            role,
            provider: provider.into(),
            model: model.into(),
        }
    }
}
