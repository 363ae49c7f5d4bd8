//! The memory API without a server: Destinations, Lenses, provenance, search selectors
//! and the `memory_search` presentation, run against the deterministic in-memory twin
//! (no FalkorDB, no model, no network).
//!
//! ```text
//! cargo run --example memory_api
//! ```

use gralkor::agent::{MemorySearch, memory_search};
use gralkor::client::{
    Client, Content, Hit, InMemoryClient, Ingest, MemoryAdd, OperatorId, Replace, Search,
};
use gralkor::lens::{Graph, Ingestion, Lens, LensStore};
use gralkor::runtime::RuntimeConfig;
use serde_json::json;

/// An ingestion process that writes each line of a document as its own episode.
#[derive(Debug)]
struct Lines;

impl Ingestion for Lines {
    async fn ingest(&self, request: &Ingest, store: &LensStore) -> gralkor::Result<()> {
        let text = request.content.text().unwrap_or_default().to_string();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            store
                .add(Content::document(line.trim()), &request.source_description)
                .await?;
        }
        Ok(())
    }
}

mod support;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    support::exit_on_error(try_main().await);
}

async fn try_main() -> gralkor::Result<()> {
    let client = InMemoryClient::with_config(
        RuntimeConfig::new()
            .destination("runbooks")
            .lens(Lens::appending("decisions", "global").ingestion(Lines))
            .lens(Lens::appending("ops-notes", "runbooks"))
            .lens(Lens::replace_graph("systems", "runbooks")),
    )?;
    let op = &OperatorId::new("operator-42")?;

    let written = client
        .ingest(
            &Ingest::new(
                "planning-1",
                op,
                "decisions",
                Content::document(
                    "We release payments on Fridays.\nPayments retries use an idempotency key.",
                ),
            )
            .source_description("release planning"),
        )
        .await?;
    println!("decisions wrote {} episodes", written.len());
    client
        .ingest(
            &Ingest::new(
                "rb-1",
                op,
                "ops-notes",
                Content::document("Payments failover: restart the settlement worker."),
            )
            .source_description("runbook v3"),
        )
        .await?;
    client
        .ingest(
            &Ingest::new(
                "turn-1",
                op,
                "personal-chat",
                Content::conversation("Ada: I look after payments."),
            )
            .source_description("chat"),
        )
        .await?;
    client
        .memory_add(&MemoryAdd::new(
            op,
            Content::document("Ada prefers payments alerts by email."),
        ))
        .await?;
    client.await_background_writes().await;
    client
        .replace(&Replace::new(
            op,
            "systems",
            Graph::new()
                .node("payments", ["System"], json!({"name": "Payments"}))
                .node("ledger", ["System"], json!({"name": "Ledger"}))
                .relationship("payments", "DEPENDS_ON", "ledger", json!({})),
        ))
        .await?;

    println!("\nepisodes about payments, every accessible Destination:");
    for r in client.search(&Search::new(op, "payments")).await? {
        if let Hit::Episode(e) = &r.hit {
            let writer = e
                .writer
                .as_ref()
                .map_or("unknown".into(), |w| w.to_string());
            println!(
                "  [{}] {} — {} ({})",
                r.destination, e.content, writer, e.source_description
            );
        }
    }

    println!("\nonly the decisions Lens, facts:");
    for r in client
        .search(&Search::new(op, "payments").lenses(["decisions"]).facts())
        .await?
    {
        if let Hit::Fact(f) = &r.hit {
            println!("  [{}] {}", r.destination, f.fact);
        }
    }

    println!("\nnodes in runbooks:");
    for r in client
        .search(
            &Search::new(op, "payments ledger")
                .destinations(["runbooks"])
                .nodes(["System"]),
        )
        .await?
    {
        if let Hit::Node(n) = &r.hit {
            println!("  {} {:?}", n.name, n.labels);
        }
    }

    println!("\nmemory_search as a model sees it:\n");
    println!(
        "{}",
        memory_search(&client, &MemorySearch::new(op, "payments")).await?
    );

    match client
        .search(&Search::new(op, "payments").destinations(["operator"]))
        .await
    {
        Err(e) => println!("\nselecting the retired Destination: {e}"),
        Ok(_) => unreachable!("retired names are refused"),
    }
    Ok(())
}
