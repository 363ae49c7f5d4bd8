//! Access control: two people, an agent and a shared group.
//!
//! `cargo run --example access` — no server, no network: the in-memory client and
//! authorizer. Over FalkorDB the same code takes a `NativeClient` and an
//! `EmbeddedAuthorizer::new(client.storage().db().clone())`.

use std::sync::Arc;

use gralkor::access::{Authorizer, InMemoryAuthorizer, Relationship, Subject};
use gralkor::client::{
    Client, Content, EpisodeRef, Hit, InMemoryClient, MemoryAdd, OperatorId, Search,
};
use gralkor::runtime::RuntimeConfig;

fn shown(results: &[gralkor::client::SearchResult]) -> Vec<String> {
    results
        .iter()
        .filter_map(|r| match &r.hit {
            Hit::Episode(e) => Some(format!("[{}] {}", r.destination, e.content)),
            _ => None,
        })
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> gralkor::Result<()> {
    let authz = Arc::new(InMemoryAuthorizer::new());
    let client = InMemoryClient::with_config(RuntimeConfig::new().destination("family"))?
        .with_authorizer(authz.clone())?;

    let (ada, bob) = (Subject::person("ada")?, Subject::person("bob")?);
    let helper = Subject::agent("ada-helper")?;
    let (ada_op, bob_op) = (OperatorId::new("ada")?, OperatorId::new("bob")?);

    // Ada owns her helper agent; Ada, Bob and the helper are in the `family` group.
    authz
        .write_relationships(&[
            Relationship::owner("ada-helper", "ada")?,
            Relationship::member("family", &ada)?,
            Relationship::member("family", &bob)?,
            Relationship::member("family", &helper)?,
        ])
        .await?;

    // Ada's own memory, one note involving Bob, and the helper writing to the group.
    client
        .memory_add(
            &MemoryAdd::new(
                &ada_op,
                Content::document("Ada: my PIN hint is the cat's birthday"),
            )
            .subject(ada.clone()),
        )
        .await?;
    client
        .memory_add(
            &MemoryAdd::new(
                &ada_op,
                Content::document("Ada: Bob lent me his cat carrier"),
            )
            .subject(ada.clone())
            .involves([bob.clone()]),
        )
        .await?;
    client
        .memory_add(
            &MemoryAdd::new(
                &ada_op,
                Content::document("Family dinner is on Sunday, the cat stays home"),
            )
            .to_destination("family")
            .subject(helper.clone()),
        )
        .await?;
    client.await_background_writes().await;

    let ask = |op: &OperatorId, who: &Subject| Search::new(op, "cat").subject(who.clone());
    println!(
        "Ada sees:    {:#?}",
        shown(&client.search(&ask(&ada_op, &ada)).await?)
    );
    // Bob names Ada's operator id: only the note that involves him comes from her graph.
    println!(
        "Bob (Ada's graph) sees: {:#?}",
        shown(&client.search(&ask(&ada_op, &bob)).await?)
    );
    println!(
        "Bob (his own) sees:     {:#?}",
        shown(&client.search(&ask(&bob_op, &bob)).await?)
    );

    // Bob may not write into Ada's personal graph, nor delete the helper's note.
    let denied = client
        .memory_add(
            &MemoryAdd::new(&ada_op, Content::document("Bob was here")).subject(bob.clone()),
        )
        .await
        .unwrap_err();
    println!("Bob writing to Ada's graph: {denied}");
    let family = client
        .search(&ask(&bob_op, &bob).destinations(["family"]))
        .await?;
    let note = family[0].hit.as_episode().expect("an episode").uuid;
    let denied = client
        .remove_episode(&EpisodeRef::new(&bob_op, "family", note).subject(bob.clone()))
        .await
        .unwrap_err();
    println!("Bob forgetting the helper's note: {denied}");
    // The helper wrote it, so the helper may forget it.
    let removed = client
        .remove_episode(&EpisodeRef::new(&bob_op, "family", note).subject(helper))
        .await?;
    println!("the helper forgets its note: {removed}");
    println!("status: {:?}", client.status().await);
    client.shutdown().await
}
