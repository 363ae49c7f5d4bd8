//! The offline retrieval client: a [`NativeClient`] over a FalkorDB handle with an
//! embedder and no language model (episodes-only retrieval: each session is stored
//! with its embedding and recall answers from the episodes).

use std::sync::Arc;

use gralkor::NativeClient;
use gralkor::NativeStorage;
use gralkor::falkordb::FalkorDb;
use gralkor::graph::Engine;
use gralkor::llm::Embedder;
use gralkor::runtime::{Runtime, RuntimeConfig};

use crate::Result;

/// The in-process embedder (all-MiniLM-L6-v2) with the `local-embedder` feature;
/// without it, the deterministic hashed bag of words
/// ([`gralkor::llm::doubles::HashEmbedder`], 384 numbers).
pub async fn offline_embedder() -> Result<Arc<dyn Embedder>> {
    #[cfg(feature = "local-embedder")]
    {
        use gralkor::llm::local::{LocalEmbedder, LocalModelConfig};
        Ok(Arc::new(
            LocalEmbedder::load(&LocalModelConfig::default()).await?,
        ))
    }
    #[cfg(not(feature = "local-embedder"))]
    {
        Ok(Arc::new(gralkor::llm::doubles::HashEmbedder::new(384)))
    }
}

/// A client with only the packaged definitions over `engine`.
pub fn client_over(engine: Engine) -> Result<NativeClient> {
    Ok(NativeClient::from_parts(
        Runtime::new(RuntimeConfig::new())?,
        NativeStorage::new(engine),
    ))
}

/// An episodes-only client over `db` embedding with `embedder`.
pub fn offline_client(db: FalkorDb, embedder: Arc<dyn Embedder>) -> Result<NativeClient> {
    client_over(Engine::without_llm(db, embedder))
}
