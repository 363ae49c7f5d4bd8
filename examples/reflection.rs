//! A declared Reflection end to end on the embedded FalkorDB: a scripted model (no
//! network) answers the chain of thought and the extraction, the artefact is delivered
//! to its Destination, the callback prints the outcome, and an artefact search finds
//! it again.
//!
//! ```text
//! cargo run --no-default-features --example reflection
//! ```

use std::sync::Arc;

use gralkor::NativeStorage;
use gralkor::client::{Client, Content, Hit, NativeClient, OperatorId, ReflectOptions, Search};
use gralkor::falkordb::{EmbeddedConfig, FalkorConfig, FalkorDb};
use gralkor::graph::Engine;
use gralkor::llm::doubles::{HashEmbedder, ScriptedModel};
use gralkor::reflection::delivery::Outcome;
use gralkor::reflection::runner::{Invocation, Representation};
use gralkor::reflection::{Reflection, Step};
use gralkor::runtime::{Runtime, RuntimeConfig};
use serde_json::json;

mod support;

#[tokio::main]
async fn main() {
    support::exit_on_error(try_main().await);
}

async fn try_main() -> gralkor::Result<()> {
    let dir = tempfile::tempdir().map_err(|e| gralkor::Error::Io {
        context: "creating a temporary data directory".into(),
        source: e,
    })?;
    let db = FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new(dir.path()))).await?;
    // The chain of thought's answers by step label; the engine's extraction requests
    // are answered by the examples' scripted extractor.
    let model = ScriptedModel::new()
        .answer(
            "step_review",
            json!({"assessment": "The canary ran clean for two hours.", "approved": true}),
        )
        .answer(
            "step_summarise",
            json!({"summary": "Release 7 is approved: the canary ran clean."}),
        )
        .respond_with(|req| {
            let prompt: String = req.messages.iter().map(|m| m.content.as_str()).collect();
            Ok(support::answer(&req.schema.name, &prompt))
        });
    let engine = Engine::new(db, Arc::new(model), Arc::new(HashEmbedder::new(64)));
    let review = Reflection::new("release-review", "releases")
        .step(
            Step::new("review", "Review the supplied release evidence.")
                .typed("assessment", "string")
                .typed("approved", "boolean"),
        )
        .step(
            Step::new("summarise", "Summarise {{ assessment }} in one line.")
                .typed("summary", "string"),
        );
    // Held as the object-safe trait, as an agent framework or the MCP server holds it.
    let client: Arc<dyn Client> = Arc::new(NativeClient::from_parts(
        Runtime::new(
            RuntimeConfig::new()
                .destination("releases")
                .reflection(review),
        )?,
        NativeStorage::new(engine),
    ));
    let op = OperatorId::new("operator-42")?;

    let (tx, rx) = tokio::sync::oneshot::channel();
    let id = client
        .reflect(
            "release-review",
            Invocation::new("release-7", op.clone())
                .context(json!({"reason": "release decision"}))
                .representation(Representation::new(
                    "turn-1",
                    "observations",
                    Content::conversation("Ada: the canary for release 7 was clean."),
                    json!({}),
                )),
            ReflectOptions::new().on_complete(move |done| {
                let _ = tx.send(done);
            }),
        )
        .await?;
    println!("submitted invocation {id}");
    let done = rx.await.expect("the invocation calls back");
    println!(
        "callback: {}",
        serde_json::to_string_pretty(&done).unwrap_or_default()
    );
    let Outcome::Delivered { artefact } = done.outcome else {
        return Err(gralkor::Error::NotFound("a delivered artefact".into()));
    };

    let found = client
        .search(
            &Search::new(&op, "canary release approved")
                .destinations(["releases"])
                .artefacts(None),
        )
        .await?;
    for r in &found {
        if let Hit::Artefact(a) = &r.hit {
            println!(
                "found artefact {} in {}: {}",
                a.id, r.destination, a.payload
            );
        }
    }
    assert!(
        found
            .iter()
            .any(|r| matches!(&r.hit, Hit::Artefact(a) if *a == artefact))
    );
    client.shutdown().await
}
