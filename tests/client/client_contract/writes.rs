//! Contracts of `memory_add`, episodes, admin operations and runtime snapshots.

use super::*;

pub async fn memory_add_returns_at_once_and_writes_in_the_background(make: &impl Factory) {
    let (op, w) = (fresh_op("op"), word());
    let client = make(RuntimeConfig::new()).await;
    client
        .memory_add(&MemoryAdd::new(
            &op,
            Content::document(format!("Ada drinks {w} tea.")),
        ))
        .await
        .unwrap();
    client
        .memory_add(
            &MemoryAdd::new(&op, Content::conversation(format!("Ada: {w} again")))
                .through_lens("personal-chat")
                .source_description("chat"),
        )
        .await
        .unwrap();
    client.await_background_writes().await;
    let found = episodes(
        &client
            .search(&Search::new(&op, &w).destinations(["personal"]))
            .await
            .unwrap(),
    );
    assert_eq!(found.len(), 2);
    let direct = found
        .iter()
        .find(|(_, e)| e.writer == Some(Writer::Direct))
        .unwrap();
    assert_eq!(direct.1.source_description, "manual");
    assert_eq!(direct.1.source_kind, SourceKind::Text);
    let lens = found
        .iter()
        .find(|(_, e)| e.writer == lens_writer("personal-chat"))
        .unwrap();
    assert_eq!(lens.1.source_description, "chat");
    // A personal-chat Lens filter excludes the direct write.
    let chat_only = client
        .search(&Search::new(&op, &w).lenses(["personal-chat"]))
        .await
        .unwrap();
    assert_eq!(episodes(&chat_only).len(), 1);
}

pub async fn memory_add_validates_at_once_and_logs_background_failures(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::appending("broken", dest.clone()).ingestion(FailAtOnce))
            .lens(Lens::replace_graph("systems", dest.clone())),
    )
    .await;
    let add = || MemoryAdd::new(&op, Content::document(format!("{w} note")));
    assert_invalid(
        client.memory_add(&add().to_destination("nowhere")).await,
        "route.destination",
    );
    assert_invalid(
        client.memory_add(&add().through_lens("systems")).await,
        "lens",
    );
    assert_invalid(
        client
            .memory_add(&MemoryAdd::new(&op, Content::document("")))
            .await,
        "content",
    );
    // A background failure is not returned: the call succeeds, nothing is written.
    client
        .memory_add(&add().through_lens("broken"))
        .await
        .unwrap();
    client.await_background_writes().await;
    let found = client
        .search(&Search::new(&op, &w).destinations([&dest, "personal"]))
        .await
        .unwrap();
    assert!(found.is_empty());
}

/// Fails without writing.
#[derive(Debug)]
pub struct FailAtOnce;

impl Ingestion for FailAtOnce {
    async fn ingest(&self, _: &Ingest, _: &LensStore) -> Result<()> {
        Err(Error::NotFound("nothing to do".into()))
    }
}

// ---------------------------------------------------------------- episodes and admin

pub async fn episodes_are_fetched_and_removed_by_destination_and_uuid(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::appending("notes", dest.clone())),
    )
    .await;
    let written = client
        .ingest(&Ingest::new(
            "i",
            &op,
            "notes",
            Content::document(format!("{w} fact")),
        ))
        .await
        .unwrap();
    let at = EpisodeRef::new(&op, &dest, written[0].episode);
    assert!(client.get_episode(&at).await.unwrap().is_some());
    let elsewhere = EpisodeRef::new(&op, "personal", written[0].episode);
    assert_eq!(client.get_episode(&elsewhere).await.unwrap(), None);
    assert!(!client.remove_episode(&elsewhere).await.unwrap());
    assert!(client.remove_episode(&at).await.unwrap());
    assert_eq!(client.get_episode(&at).await.unwrap(), None);
    assert!(!client.remove_episode(&at).await.unwrap());
    let found = client
        .search(&Search::new(&op, &w).destinations([&dest]))
        .await
        .unwrap();
    assert!(found.is_empty());
    assert_invalid(
        client
            .get_episode(&EpisodeRef::new(&op, "nowhere", written[0].episode))
            .await,
        "destination",
    );
}

pub async fn admin_operations_succeed_and_validate(make: &impl Factory) {
    let op = fresh_op("op");
    let client = make(RuntimeConfig::new()).await;
    client.build_indices().await.unwrap();
    client
        .build_communities(&BuildCommunities::new(&op))
        .await
        .unwrap();
    assert_invalid(
        client
            .build_communities(&BuildCommunities::new(&op).destination("nowhere"))
            .await,
        "destination",
    );
}

// ---------------------------------------------------------------- runtime snapshots

pub async fn an_operation_keeps_the_snapshot_it_started_with(make: &impl Factory) {
    let (a, b, op, w) = (fresh("a"), fresh("b"), fresh_op("op"), word());
    let gate = Arc::new(Gate::default());
    let config = |dest: &str| {
        RuntimeConfig::new()
            .destination(a.clone())
            .destination(b.clone())
            .lens(Lens::appending("moving", dest).ingestion(Gated(gate.clone())))
    };
    let client = make(config(&a)).await;
    let ingest = {
        let client = client.clone();
        let (op, w) = (op.clone(), w.clone());
        tokio::spawn(async move {
            client
                .ingest(&Ingest::new(
                    "i",
                    &op,
                    "moving",
                    Content::document(format!("{w} late")),
                ))
                .await
        })
    };
    gate.started.notified().await;
    // The Lens now points elsewhere, but the running ingestion resolved it already.
    client.runtime().replace(config(&b)).unwrap();
    gate.release.notify_one();
    ingest.await.unwrap().unwrap();
    let found = episodes(
        &client
            .search(&Search::new(&op, &w).destinations([&a, &b]))
            .await
            .unwrap(),
    );
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, a);
}

pub async fn later_operations_use_the_replaced_configuration(make: &impl Factory) {
    let (a, op, w) = (fresh("a"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(a.clone())
            .lens(Lens::appending("old", a.clone())),
    )
    .await;
    add_through(client.as_ref(), &op, "old", format!("{w} before")).await;
    // An invalid replacement changes nothing.
    assert!(
        client
            .runtime()
            .replace(RuntimeConfig::new().lens(Lens::appending("new", "missing")))
            .is_err()
    );
    add_through(client.as_ref(), &op, "old", format!("{w} still")).await;
    client
        .runtime()
        .replace(RuntimeConfig::new().lens(Lens::appending("new", "global")))
        .unwrap();
    assert_invalid(
        client
            .ingest(&Ingest::new(
                "i",
                &op,
                "old",
                Content::document(format!("{w} gone")),
            ))
            .await,
        "lens",
    );
    // The Destination is no longer registered, so it can no longer be searched.
    assert_invalid(
        client
            .search(&Search::new(&op, &w).destinations([&a]))
            .await,
        "destinations[0]",
    );
}
