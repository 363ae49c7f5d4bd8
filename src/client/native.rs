//! [`NativeClient`]: the client logic over [`NativeStorage`] (FalkorDB and the graph
//! engine).

use std::sync::Arc;

use super::memory::MemoryClient;
use crate::Result;
use crate::config::Config;
use crate::falkordb::FalkorDb;
use crate::graph::Engine;
use crate::graph::native_storage::NativeStorage;
use crate::llm::Models;
use crate::runtime::{Runtime, RuntimeConfig};

/// The memory API over FalkorDB and the graph engine: the client logic
/// ([`MemoryClient`]) over a [`NativeStorage`].
///
/// Build it from [`Config`] (`Config::from_env()` reads the seed's variables) and a
/// [`RuntimeConfig`]. With an embedder and no language model (no provider key: the
/// in-process `local:` embedder) it stores episodes with their embeddings and
/// searches them by text and meaning; without model configuration, by text only.
/// Either way an engine with a language model extracts them later
/// ([`extract_pending`](super::Client::extract_pending)).
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
        let mut meter = None;
        let engine = match config.models.as_ref() {
            Some(models) => {
                let Models {
                    llm,
                    embedder,
                    reranker,
                    usage,
                } = models.build()?;
                meter = Some(usage);
                // An in-process model is provisioned and loaded now, so a missing one
                // is an error here rather than at the first write.
                embedder.warm_up().await?;
                match (llm, reranker) {
                    (Some(llm), Some(reranker)) => {
                        Engine::new(db, llm, embedder).with_reranker(reranker)
                    }
                    (Some(llm), None) => Engine::new(db, llm, embedder),
                    (None, _) => {
                        tracing::info!(
                            embedder = %format!("{}:{}", embedder.provider(), embedder.model()),
                            "no language model: episodes are stored with their embeddings \
                             and searched by text and meaning; nothing is extracted"
                        );
                        Engine::without_llm(db, embedder)
                    }
                }
            }
            None => {
                tracing::info!(
                    "no models: episodes are stored and searched by their text; nothing is \
                     embedded or extracted"
                );
                Engine::episodes_only(db)
            }
        };
        // An embedder of another dimension than the stored graphs' is refused now,
        // before any write.
        engine.check_dimensions().await?;
        let mut storage = NativeStorage::new(engine).with_configuration(config.describe());
        if let Some(meter) = meter {
            storage = storage.with_usage(meter);
        }
        Ok(NativeClient::from_parts(runtime, storage))
    }

    /// What the model clients have used so far — calls, tokens, latency, retries and
    /// failures, in all, per label (`extract`, `resolve_facts`, `search`, …) and per
    /// provider — when the client was built with models ([`connect`](Self::connect)
    /// with a model configuration, or a storage given
    /// [`with_usage`](NativeStorage::with_usage)). Each ingest also reports its own
    /// cost ([`IngestedRepresentation::cost`](crate::client::IngestedRepresentation::cost)).
    ///
    /// ```no_run
    /// # async fn run(client: gralkor::NativeClient) {
    /// if let Some(usage) = client.usage() {
    ///     println!("{} model calls so far", usage.total.calls);
    /// }
    /// # }
    /// ```
    pub fn usage(&self) -> Option<crate::llm::UsageSnapshot> {
        self.storage().usage().map(crate::llm::UsageMeter::snapshot)
    }

    /// A client over an existing storage (for your own engine, with its options,
    /// models and database handle).
    pub fn from_parts(runtime: Runtime, storage: NativeStorage) -> NativeClient {
        let model = storage.engine().llm().cloned();
        let server = storage.db().clone();
        MemoryClient::build(runtime, Arc::new(storage), model, Some(server))
    }
}
