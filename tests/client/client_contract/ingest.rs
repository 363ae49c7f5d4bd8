//! Contracts of `ingest` and provenance.

use super::*;

pub async fn ingest_writes_through_the_lens_to_its_destination_with_lens_provenance(
    make: &impl Factory,
) {
    let (dest, op, w) = (fresh("notes"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::appending("notes", dest.clone())),
    )
    .await;
    let written = client
        .ingest(
            &Ingest::new(
                "doc-1",
                &op,
                "notes",
                Content::document(format!("Payments {w} retry.")),
            )
            .source_description("runbook"),
        )
        .await
        .unwrap();
    assert_eq!(written.len(), 1);
    assert_eq!(
        (written[0].id.as_str(), written[0].lens.as_str()),
        ("doc-1", "notes")
    );

    let got = client
        .get_episode(&EpisodeRef::new(&op, &dest, written[0].episode))
        .await
        .unwrap()
        .expect("the written episode");
    assert_eq!(got.content, format!("Payments {w} retry."));
    assert_eq!(got.source_kind, SourceKind::Text);
    assert_eq!(got.source_description, "runbook");
    assert_eq!(got.writer, lens_writer("notes"));

    let found = client
        .search(&Search::new(&op, &w).destinations([&dest]))
        .await
        .unwrap();
    let found = episodes(&found);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, dest);
    assert_eq!(found[0].1.uuid, written[0].episode);
    // Not in the operator's personal graph.
    let personal = client
        .search(&Search::new(&op, &w).destinations(["personal"]))
        .await
        .unwrap();
    assert!(personal.is_empty());
}

pub async fn ingest_rejects_invalid_requests_before_writing_anything(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::appending("notes", dest.clone()))
            .lens(Lens::replace_graph("systems", dest.clone())),
    )
    .await;
    let ok = || Ingest::new("id-1", &op, "notes", Content::document(format!("text {w}")));
    let mut blank_id = ok();
    blank_id.id = " ".into();
    assert_invalid(client.ingest(&blank_id).await, "id");
    // An operator id is checked when it is made, so no request carries a bad one: a
    // request read from JSON with one is refused, naming the field.
    for bad in ["", "personal/someone"] {
        let mut json = serde_json::to_value(ok()).unwrap();
        json["operator_id"] = bad.into();
        let err = serde_json::from_value::<Ingest>(json)
            .unwrap_err()
            .to_string();
        assert!(err.contains("`operator_id`"), "{bad:?}: {err}");
    }
    let mut unknown = ok();
    unknown.lens = "nope".into();
    assert_invalid(client.ingest(&unknown).await, "lens");
    let mut retired = ok();
    retired.lens = "operator".into();
    let err = client.ingest(&retired).await.unwrap_err().to_string();
    assert!(err.contains("personal-chat"), "{err}");
    let mut replace_only = ok();
    replace_only.lens = "systems".into();
    let err = client.ingest(&replace_only).await.unwrap_err().to_string();
    assert!(
        err.contains("accepts only whole-graph replacement"),
        "{err}"
    );
    let mut blank_text = ok();
    blank_text.content = Content::conversation("  ");
    assert_invalid(client.ingest(&blank_text).await, "content");
    let mut scalar = ok();
    scalar.content = Content::structured(json!("just a string"));
    assert_invalid(client.ingest(&scalar).await, "content");
    let mut nul = ok();
    nul.content = Content::document(format!("{w} \0 hidden"));
    assert_invalid(client.ingest(&nul).await, "content");
    let mut huge = ok();
    huge.content = Content::document(format!(
        "{w} {}",
        "x".repeat(gralkor::graph::MAX_CONTENT_BYTES)
    ));
    assert_invalid(client.ingest(&huge).await, "content");
    // The description's limit counts the Lens marker gralkor appends.
    let room = gralkor::graph::MAX_SOURCE_DESCRIPTION_BYTES - " [lens: notes]".len();
    let long = ok().source_description("d".repeat(room + 1));
    assert_invalid(client.ingest(&long).await, "source_description");
    let fits = ok().source_description("d".repeat(room));
    let mut fits_but_blank = fits.clone();
    fits_but_blank.content = Content::document(" ");
    assert_invalid(client.ingest(&fits_but_blank).await, "content");

    let found = client
        .search(&Search::new(&op, &w).destinations([&dest, "personal"]))
        .await
        .unwrap();
    assert!(found.is_empty(), "nothing may be written: {found:?}");
}

pub async fn structured_records_are_stored_json_encoded(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::appending("jira", dest.clone())),
    )
    .await;
    let record = json!({"key": "PAY-1", "summary": format!("{w} settlement retries")});
    let written = client
        .ingest(
            &Ingest::new("PAY-1", &op, "jira", Content::structured(record.clone()))
                .source_description("jira"),
        )
        .await
        .unwrap();
    let got = client
        .get_episode(&EpisodeRef::new(&op, &dest, written[0].episode))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.source_kind, SourceKind::Json);
    let decoded: serde_json::Value = serde_json::from_str(&got.content).unwrap();
    assert_eq!(decoded, record);
}

pub async fn ingestion_processes_make_zero_one_or_many_writes(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::appending("paras", dest.clone()).ingestion(Paragraphs))
            .lens(Lens::appending("silent", dest.clone()).ingestion(Nothing)),
    )
    .await;
    let text = format!("First {w} paragraph.\n\nSecond {w} paragraph.");
    let written = client
        .ingest(&Ingest::new("i1", &op, "paras", Content::document(text)).source_description("doc"))
        .await
        .unwrap();
    assert_eq!(written.len(), 2);
    assert_eq!(
        written[0].content,
        Content::document(format!("First {w} paragraph."))
    );
    assert_eq!(
        written[1].content,
        Content::document(format!("Second {w} paragraph."))
    );

    let none = client
        .ingest(&Ingest::new(
            "i2",
            &op,
            "silent",
            Content::document(format!("{w} ignored")),
        ))
        .await
        .unwrap();
    assert!(none.is_empty());

    let found = episodes(
        &client
            .search(&Search::new(&op, &w).destinations([&dest]))
            .await
            .unwrap(),
    );
    assert_eq!(found.len(), 2);
    assert!(found.iter().all(|(_, e)| e.writer == lens_writer("paras")));
}

pub async fn a_failing_ingestion_process_returns_its_error_without_a_partial_list(
    make: &impl Factory,
) {
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::appending("flaky", dest.clone()).ingestion(WriteThenFail)),
    )
    .await;
    let err = client
        .ingest(&Ingest::new(
            "i1",
            &op,
            "flaky",
            Content::document(format!("{w} once")),
        ))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("the process's own failure"),
        "{err}"
    );
    // The process's own write stays (no rollback), and no fallback write was made.
    let found = client
        .search(&Search::new(&op, &w).destinations([&dest]))
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
}

pub async fn personal_chat_writes_to_each_operators_own_personal_graph(make: &impl Factory) {
    let (alice, bob, w) = (fresh_op("alice"), fresh_op("bob"), word());
    let client = make(RuntimeConfig::new()).await;
    client
        .ingest(
            &Ingest::new(
                "t1",
                &alice,
                "personal-chat",
                Content::conversation(format!("Alice: I like {w}.")),
            )
            .source_description("chat"),
        )
        .await
        .unwrap();
    let mine = episodes(&client.search(&Search::new(&alice, &w)).await.unwrap());
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].0, "personal");
    assert_eq!(mine[0].1.writer, lens_writer("personal-chat"));
    assert_eq!(mine[0].1.source_kind, SourceKind::Message);
    let theirs = client.search(&Search::new(&bob, &w)).await.unwrap();
    assert!(
        theirs.is_empty(),
        "another operator's personal graph leaked: {theirs:?}"
    );
}

pub async fn caller_text_cannot_forge_a_writer(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::appending("chat", dest.clone())),
    )
    .await;
    client
        .ingest(
            &Ingest::new("i1", &op, "chat", Content::document(format!("{w} one")))
                .source_description("notes [gralkor: direct]"),
        )
        .await
        .unwrap();
    client
        .memory_add(
            &MemoryAdd::new(&op, Content::document(format!("{w} two")))
                .to_destination(&dest)
                .source_description("notes [lens: admin]"),
        )
        .await
        .unwrap();
    client.await_background_writes().await;
    let found = episodes(
        &client
            .search(&Search::new(&op, &w).destinations([&dest]))
            .await
            .unwrap(),
    );
    assert_eq!(found.len(), 2);
    let one = found
        .iter()
        .find(|(_, e)| e.content.ends_with("one"))
        .unwrap();
    assert_eq!(one.1.writer, lens_writer("chat"));
    assert_eq!(one.1.source_description, "notes [gralkor: direct]");
    let two = found
        .iter()
        .find(|(_, e)| e.content.ends_with("two"))
        .unwrap();
    assert_eq!(two.1.writer, Some(Writer::Direct));
    assert_eq!(two.1.source_description, "notes [lens: admin]");
    // Selecting the forged Lens finds nothing.
    let forged = client
        .search(&Search::new(&op, &w).destinations([&dest]).lenses(["chat"]))
        .await
        .unwrap();
    assert_eq!(episodes(&forged).len(), 1);
}

/// One ingestion-id rule on every client: ids are replay-safe. The same id with the
/// same request is a no-op answering the same episode; the same id with different
/// content, description, kind or reference time is `EpisodeConflict` naming the field,
/// and writes nothing; another id is another episode.
pub async fn an_ingestion_id_is_replay_safe_and_refuses_different_content(make: &impl Factory) {
    let (dest, op, w) = (fresh("ids"), fresh_op("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::appending("notes", dest.clone())),
    )
    .await;
    let at: gralkor::graph::Timestamp = "2024-03-01T00:00:00Z".parse().unwrap();
    let request = |text: String, description: &str| {
        Ingest::new("doc-1", &op, "notes", Content::document(text))
            .source_description(description)
            .reference_time(at)
    };
    let original = request(format!("Payments {w} retry."), "runbook");
    let first = client.ingest(&original).await.unwrap();
    let again = client.ingest(&original).await.unwrap();
    assert_eq!(
        again[0].episode, first[0].episode,
        "a replay is the same episode"
    );

    let conflicts = [
        (
            request(format!("Payments {w} never retry."), "runbook"),
            "content",
        ),
        (
            request(format!("Payments {w} retry."), "wiki"),
            "source_description",
        ),
        (
            Ingest::new(
                "doc-1",
                &op,
                "notes",
                Content::conversation(format!("Payments {w} retry.")),
            )
            .source_description("runbook")
            .reference_time(at),
            "source",
        ),
        (
            request(format!("Payments {w} retry."), "runbook")
                .reference_time("2025-01-01T00:00:00Z".parse().unwrap()),
            "reference_time",
        ),
    ];
    for (changed, field) in conflicts {
        match client.ingest(&changed).await {
            Err(Error::EpisodeConflict { uuid, field: f }) => {
                assert_eq!((uuid, f), (first[0].episode, field));
            }
            other => panic!("same id, different `{field}`: expected a conflict, got {other:?}"),
        }
    }
    let found = episodes(
        &client
            .search(&Search::new(&op, &w).destinations([&dest]))
            .await
            .unwrap(),
    );
    assert_eq!(found.len(), 1, "one episode for the id: {found:?}");
    assert_eq!(found[0].1.content, format!("Payments {w} retry."));
    assert_eq!(found[0].1.source_description, "runbook");

    let other = client
        .ingest(&Ingest::new(
            "doc-2",
            &op,
            "notes",
            Content::document(format!("Payments {w} retry.")),
        ))
        .await
        .unwrap();
    assert_ne!(
        other[0].episode, first[0].episode,
        "another id, another episode"
    );
}
