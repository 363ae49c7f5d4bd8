//! [`NativeClient`]: the client logic over [`NativeStorage`] (FalkorDB and the graph
//! engine).

use std::sync::Arc;

use super::memory::MemoryClient;
use crate::Result;
use crate::config::Config;
use crate::falkordb::FalkorDb;
use crate::graph::Engine;
use crate::llm::Models;
use crate::runtime::{Runtime, RuntimeConfig};
use crate::storage::NativeStorage;

/// The memory API over FalkorDB and the graph engine: the client logic
/// ([`MemoryClient`]) over a [`NativeStorage`].
///
/// Build it from [`Config`] (`Config::from_env()` reads the seed's variables) and a
/// [`RuntimeConfig`]. Without model configuration it stores episodes only (searchable
/// by text; an engine with models can [`resume`](Engine::resume_pending) them later).
///
/// ```no_run
/// use gralkor::client::{Client, Content, Ingest, NativeClient, OperatorId, Search};
/// use gralkor::config::Config;
/// use gralkor::runtime::RuntimeConfig;
///
/// # async fn run() -> gralkor::Result<()> {
/// let client = NativeClient::connect(Config::from_env()?, RuntimeConfig::new()).await?;
/// let op = OperatorId::new("op-7")?;
/// client
///     .ingest(&Ingest::new("turn-1", &op, "personal-chat", Content::conversation("Ada: I moved to Lisbon.")))
///     .await?;
/// let found = client.search(&Search::new(&op, "Lisbon")).await?;
/// println!("{} results", found.len());
/// client.shutdown().await?;
/// # Ok(()) }
/// ```
pub type NativeClient = MemoryClient<NativeStorage>;

impl MemoryClient<NativeStorage> {
    /// Connects to (or starts) FalkorDB as `config` says, builds the model clients if
    /// configured, and validates `runtime`. Nothing is written.
    pub async fn connect(config: Config, runtime: RuntimeConfig) -> Result<NativeClient> {
        config.validate()?;
        tracing::info!("gralkor connecting: {}", config.describe());
        let runtime = Runtime::new(runtime)?;
        let db = FalkorDb::connect(config.falkordb.clone()).await?;
        let engine = match config.models.as_ref().filter(|m| m.extracts()) {
            Some(models) => match models.build()? {
                Models {
                    llm: Some(llm),
                    embedder,
                    reranker: Some(reranker),
                    ..
                } => Engine::new(db, llm, embedder).with_reranker(reranker),
                _ => Engine::episodes_only(db),
            },
            // Without a language model the engine stores episodes only and has no use
            // for an embedder yet, so none is built (issue 12 §3 gives episodes
            // vectors).
            None => Engine::episodes_only(db),
        };
        if !engine.extracts() {
            tracing::info!(
                "episodes only: episodes are stored and searched by their text; no embedder \
                 is built until episodes get vectors"
            );
        }
        // An embedder of another dimension than the stored graphs' is refused now,
        // before any write.
        engine.check_dimensions().await?;
        Ok(NativeClient::from_parts(
            runtime,
            NativeStorage::new(engine),
        ))
    }

    /// A client over an existing storage (for your own engine, with its options,
    /// models and database handle).
    pub fn from_parts(runtime: Runtime, storage: NativeStorage) -> NativeClient {
        MemoryClient::build(runtime, Arc::new(storage), None)
    }
}
