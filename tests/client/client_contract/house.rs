//! Contracts of the house: identities both clients derive alike, the writer filter
//! inside the search, and the closed state after shutdown.

use super::*;
use gralkor::storage::{GraphId, owned_node_uuid};

pub async fn replaced_nodes_have_the_same_derived_uuid_in_every_client(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::replace_graph("systems", dest.clone())),
    )
    .await;
    let graph = Graph::new()
        .node(
            "payments",
            ["System"],
            json!({"name": format!("Payments {w}")}),
        )
        .node("ledger", ["System"], json!({"name": format!("Ledger {w}")}));
    client
        .replace(&Replace::new(&op, "systems", graph))
        .await
        .unwrap();
    let found = client
        .search(
            &Search::new(&op, &w)
                .destinations([dest.clone()])
                .nodes(["System"]),
        )
        .await
        .unwrap();
    let id = GraphId::new(dest.clone()).unwrap();
    let mut uuids: Vec<_> = found
        .iter()
        .map(|r| r.hit.as_node().expect("a node").uuid)
        .collect();
    uuids.sort();
    let mut expected = vec![
        owned_node_uuid(&id, "payments"),
        owned_node_uuid(&id, "ledger"),
    ];
    expected.sort();
    assert_eq!(uuids, expected);
}

pub async fn a_lens_with_3_of_500_episodes_in_a_destination_finds_all_3(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::appending("bulk", dest.clone()))
            .lens(Lens::appending("rare", dest.clone())),
    )
    .await;
    let rare = [3, 250, 497];
    for i in 0..500 {
        let lens = if rare.contains(&i) { "rare" } else { "bulk" };
        client
            .ingest(&Ingest::new(
                format!("e-{i}"),
                &op,
                lens,
                Content::document(format!("note {i} about {w}")),
            ))
            .await
            .unwrap();
    }
    let search = Search::new(&op, &w)
        .destinations([dest.clone()])
        .lenses(["rare"]);
    let mut texts: Vec<String> = episodes(
        &client
            .search(&search.clone().max_results(10))
            .await
            .unwrap(),
    )
    .into_iter()
    .map(|(_, e)| e.content)
    .collect();
    texts.sort();
    assert_eq!(
        texts,
        [
            format!("note 250 about {w}"),
            format!("note 3 about {w}"),
            format!("note 497 about {w}"),
        ]
    );
    // Facts too: only the facts whose sources the selected Lens wrote.
    let facts = facts(
        &client
            .search(&search.facts().max_results(10))
            .await
            .unwrap(),
    );
    assert_eq!(facts.len(), 3, "{facts:?}");
    for (_, fact) in &facts {
        assert!(!fact.sources.is_empty());
        for source in &fact.sources {
            assert_eq!(source.writer, Some(Writer::Lens("rare".into())));
        }
    }
}

pub async fn every_call_after_shutdown_fails_at_once_as_closed(make: &impl Factory) {
    let (op, w) = (fresh_op("op"), word());
    let client = make(RuntimeConfig::new()).await;
    client
        .ingest(&Ingest::new(
            "i",
            &op,
            "personal-chat",
            Content::document(format!("{w} tea")),
        ))
        .await
        .unwrap();
    client.shutdown().await.unwrap();
    client
        .shutdown()
        .await
        .expect("a second shutdown does nothing");
    let closed = |r: Result<()>, what: &str| match r {
        Err(e @ Error::Closed { .. }) => assert!(!e.is_retryable(), "{what}"),
        other => panic!("{what}: expected closed, got {other:?}"),
    };
    let search = Search::new(&op, &w);
    closed(client.search(&search).await.map(drop), "search");
    closed(
        client
            .ingest(&Ingest::new(
                "j",
                &op,
                "personal-chat",
                Content::document("x"),
            ))
            .await
            .map(drop),
        "ingest",
    );
    closed(
        client
            .memory_add(&MemoryAdd::new(&op, Content::document("x")))
            .await,
        "memory_add",
    );
    closed(
        client
            .get_episode(&EpisodeRef::new(&op, "personal", uuid::Uuid::new_v4()))
            .await
            .map(drop),
        "get_episode",
    );
    closed(client.build_indices().await, "build_indices");
    // Closed comes before validation: a caller learns at once that this client is gone.
    closed(
        client.search(&Search::new(&op, " ")).await.map(drop),
        "an invalid search",
    );
}
