//! The main job, end to end on a fresh machine: start an embedded FalkorDB (provisioning
//! its binaries on first use), remember a conversation through the packaged
//! `personal-chat` Lens, write shared knowledge, replace a Lens-owned graph, search it
//! all, and shut down cleanly.
//!
//! ```text
//! cargo run --example quickstart              # embedded FalkorDB in a temporary directory
//! cargo run --example quickstart -- ./memory  # in a named one, kept afterwards
//! ```
//!
//! The backend and the models come from the environment (`GRALKOR_DATA_DIR` or
//! `FALKORDB_HOST`/`FALKORDB_PORT`; `GRALKOR_LLM_MODEL`, `GRALKOR_EMBEDDER_MODEL` and a
//! provider key). With no backend configured it uses the directory given, or a
//! temporary one. With no provider key it runs **episodes only**: every episode is
//! stored and searchable by its text, a fact search (and so `memory_search`) answers
//! from the episodes not yet extracted, and an engine with models can extract them
//! later (`Engine::resume_pending`).

use std::time::Instant;

use gralkor::agent::{MemorySearch, memory_search};
use gralkor::client::{
    Client, Content, Hit, Ingest, MemoryAdd, NativeClient, OperatorId, Replace, Search,
};
use gralkor::config::Config;
use gralkor::graph::Timestamp;
use gralkor::lens::{Graph, Lens};
use gralkor::runtime::RuntimeConfig;
use serde_json::json;

#[tokio::main]
async fn main() {
    if let Err(e) = try_main().await {
        eprintln!("error: {e}");
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            eprintln!("  caused by: {cause}");
            source = cause.source();
        }
        std::process::exit(1);
    }
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
            "embedded FalkorDB ready in {:?} (data in {})",
            started.elapsed(),
            server
                .socket_path()
                .parent()
                .map_or_else(String::new, |p| p.display().to_string())
        ),
        None => println!(
            "connected to the remote FalkorDB in {:?}",
            started.elapsed()
        ),
    }
    if config.extracts() {
        println!("models configured: episodes are extracted into entities and facts");
    } else {
        println!(
            "no provider key set: episodes only (stored and searchable by text; set \
             GOOGLE_API_KEY or OPENAI_API_KEY to extract facts)"
        );
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
    client
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
    println!("\nmemory_search \"where does Ada work\", as an agent sees it:\n");
    println!(
        "{}",
        memory_search(
            &client,
            &MemorySearch::new(op, "where does Ada work Acme Globex")
        )
        .await?
    );

    client.shutdown().await?;
    println!("\nshut down cleanly after {:?}", started.elapsed());
    if let Some(dir) = named {
        println!("data kept in {dir}; run again to see replays store nothing twice");
    }
    Ok(())
}
