//! Contracts of `search`.

use super::*;

pub async fn selector_free_search_covers_every_accessible_destination_in_order(
    make: &impl Factory,
) {
    let (a, b, op, w) = (fresh("a"), fresh("b"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(a.clone())
            .destination(b.clone())
            .lens(Lens::appending("to-a", a.clone()))
            .lens(Lens::appending("to-b", b.clone())),
    )
    .await;
    // Written in the opposite order of registration.
    add_through(client.as_ref(), &op, "to-b", format!("{w} in b")).await;
    add_through(client.as_ref(), &op, "to-a", format!("{w} in a")).await;
    add_through(
        client.as_ref(),
        &op,
        "personal-chat",
        format!("{w} in personal"),
    )
    .await;
    let found = episodes(&client.search(&Search::new(&op, &w)).await.unwrap());
    let dests: Vec<&str> = found.iter().map(|(d, _)| d.as_str()).collect();
    assert_eq!(dests, ["personal", a.as_str(), b.as_str()]);
    let writers: Vec<_> = found.iter().map(|(_, e)| e.writer.clone()).collect();
    assert_eq!(
        writers,
        [
            lens_writer("personal-chat"),
            lens_writer("to-a"),
            lens_writer("to-b")
        ]
    );
}

pub async fn destination_selector_narrows_keeps_requested_order_and_dedups(make: &impl Factory) {
    let (a, b, c, op, w) = (fresh("a"), fresh("b"), fresh("c"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(a.clone())
            .destination(b.clone())
            .destination(c.clone())
            .lens(Lens::appending("to-a", a.clone()))
            .lens(Lens::appending("to-b", b.clone()))
            .lens(Lens::appending("to-c", c.clone())),
    )
    .await;
    for lens in ["to-a", "to-b", "to-c"] {
        add_through(client.as_ref(), &op, lens, format!("{w} via {lens}")).await;
    }
    let found = episodes(
        &client
            .search(&Search::new(&op, &w).destinations([&b, &a, &b]))
            .await
            .unwrap(),
    );
    let dests: Vec<&str> = found.iter().map(|(d, _)| d.as_str()).collect();
    assert_eq!(dests, [b.as_str(), a.as_str()]);
}

pub async fn lens_selector_filters_writers_before_the_per_destination_limit(make: &impl Factory) {
    let (a, b, op, w) = (fresh("a"), fresh("b"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(a.clone())
            .destination(b.clone())
            .lens(Lens::appending("busy", a.clone()))
            .lens(Lens::appending("rare", a.clone()))
            .lens(Lens::appending("rare-b", b.clone())),
    )
    .await;
    for i in 0..3 {
        add_through(client.as_ref(), &op, "busy", format!("{w} busy {i}")).await;
    }
    add_through(client.as_ref(), &op, "rare", format!("{w} rare")).await;
    add_through(client.as_ref(), &op, "rare-b", format!("{w} rare b")).await;

    // The busy Lens cannot use up the allowance of the selected one.
    let found = episodes(
        &client
            .search(&Search::new(&op, &w).lenses(["rare"]).max_results(1))
            .await
            .unwrap(),
    );
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].0.as_str(), found[0].1.writer.clone()),
        (a.as_str(), lens_writer("rare"))
    );

    // Lenses OR together; a Lens selector never adds its Destination; limits are per Destination.
    let found = episodes(
        &client
            .search(&Search::new(&op, &w).lenses(["rare", "rare-b", "rare"]))
            .await
            .unwrap(),
    );
    assert_eq!(found.len(), 2);
    let found = episodes(
        &client
            .search(&Search::new(&op, &w).destinations([&a]).lenses(["rare-b"]))
            .await
            .unwrap(),
    );
    assert!(found.is_empty());
    let found = episodes(
        &client
            .search(&Search::new(&op, &w).destinations([&a, &b]).max_results(2))
            .await
            .unwrap(),
    );
    let in_a = found.iter().filter(|(d, _)| *d == a).count();
    let in_b = found.iter().filter(|(d, _)| *d == b).count();
    assert_eq!((in_a, in_b), (2, 1));
}

pub async fn search_rejects_invalid_requests_before_any_query(make: &impl Factory) {
    let op = fresh_op("op");
    let client = make(RuntimeConfig::new().lens(Lens::appending("notes", "global"))).await;
    let s = || Search::new(&op, "anything");
    assert_invalid(client.search(&Search::new(&op, " ")).await, "query");
    assert_invalid(client.search(&s().max_results(0)).await, "max_results");
    assert_invalid(client.search(&s().max_results(1001)).await, "max_results");
    assert_invalid(
        client
            .search(&s().destinations(["global", "nowhere"]))
            .await,
        "destinations[1]",
    );
    assert_invalid(
        client.search(&s().destinations([""])).await,
        "destinations[0]",
    );
    assert_invalid(
        client.search(&s().destinations(["personal/other"])).await,
        "destinations[0]",
    );
    let err = client
        .search(&s().destinations(["operator"]))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("retired") && err.contains("personal"), "{err}");
    assert_invalid(
        client.search(&s().lenses(["notes", "nope"])).await,
        "lenses[1]",
    );
    assert_invalid(client.search(&s().lenses(["operator"])).await, "lenses[0]");
    assert_invalid(
        client
            .search(&s().lenses(["notes"]).nodes(["Person"]))
            .await,
        "lenses",
    );
    assert_invalid(
        client.search(&s().lenses(["notes"]).artefacts(None)).await,
        "lenses",
    );
    assert_invalid(
        client.search(&s().nodes(["Not A Label"])).await,
        "result_type.entity_types[0]",
    );
    // An artefact lookup by id needs no query.
    client
        .search(&Search::new(&op, "").artefacts(Some("reflection-123".into())))
        .await
        .unwrap();
}

pub async fn fact_results_carry_sources_with_their_writers(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::appending("jira", dest.clone()))
            .lens(Lens::appending("chat", dest.clone())),
    )
    .await;
    client
        .ingest(
            &Ingest::new(
                "j1",
                &op,
                "jira",
                Content::document(format!("Payment retries {w} use an idempotency key.")),
            )
            .source_description("PAY-1"),
        )
        .await
        .unwrap();
    client
        .ingest(
            &Ingest::new(
                "c1",
                &op,
                "chat",
                Content::conversation(format!("Ada: settlement {w} retries thrice.")),
            )
            .source_description("chat"),
        )
        .await
        .unwrap();
    let all = facts(
        &client
            .search(&Search::new(&op, &w).destinations([&dest]).facts())
            .await
            .unwrap(),
    );
    assert!(!all.is_empty());
    for (d, fact) in &all {
        assert_eq!(d, &dest);
        assert!(!fact.sources.is_empty(), "{fact:?}");
    }
    let writers: std::collections::BTreeSet<_> = all
        .iter()
        .flat_map(|(_, f)| f.sources.iter().map(|s| s.writer.clone()))
        .collect();
    assert!(writers.contains(&lens_writer("jira")) && writers.contains(&lens_writer("chat")));

    let jira = facts(
        &client
            .search(
                &Search::new(&op, &w)
                    .destinations([&dest])
                    .lenses(["jira"])
                    .facts(),
            )
            .await
            .unwrap(),
    );
    assert!(!jira.is_empty());
    for (_, fact) in &jira {
        for source in &fact.sources {
            assert_eq!(source.writer, lens_writer("jira"), "{fact:?}");
            // A Lens source keeps its provenance marker (the Destinations document).
            assert_eq!(source.source_description, "PAY-1 [lens: jira]");
            assert_eq!(source.source_kind, Some(SourceKind::Text));
        }
    }
}

/// A fact's sources keep the writer's marker as the Destinations document says: a
/// Lens source's description ends `[lens: <name>]`; a direct source's is the caller's
/// text without the storage-owned `[gralkor: direct]`.
pub async fn a_facts_sources_keep_the_writers_marker(make: &impl Factory) {
    let (op, w) = (fresh_op("op"), word());
    let client = make(RuntimeConfig::new()).await;
    client
        .ingest(
            &Ingest::new(
                "c1",
                &op,
                "personal-chat",
                Content::conversation(format!("Ada: {w} tea at noon")),
            )
            .source_description("chat"),
        )
        .await
        .unwrap();
    client
        .memory_add(&MemoryAdd::new(
            &op,
            Content::document(format!("Ada drinks {w} coffee.")),
        ))
        .await
        .unwrap();
    client.await_background_writes().await;
    let found = facts(
        &client
            .search(&Search::new(&op, &w).destinations(["personal"]).facts())
            .await
            .unwrap(),
    );
    let sources: Vec<_> = found.iter().flat_map(|(_, f)| f.sources.clone()).collect();
    let lens = sources
        .iter()
        .find(|s| s.writer == lens_writer("personal-chat"))
        .expect("a Lens source");
    assert_eq!(lens.source_description, "chat [lens: personal-chat]");
    let direct = sources
        .iter()
        .find(|s| s.writer == Some(Writer::Direct))
        .expect("a direct source");
    assert_eq!(direct.source_description, "manual");
}
