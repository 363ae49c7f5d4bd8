//! Contracts of validation itself: every client refuses exactly the same input, field
//! by field, before anything runs — whatever its storage would or would not notice.

use super::*;

/// A Lens process that searches its store with the request's content as the query
/// (`<NUL>` standing for a NUL character, which the request itself may not carry) and
/// `max_results` taken from the request's source description, then writes nothing.
#[derive(Debug)]
pub struct SearchesItsStore;

#[async_trait]
impl Ingestion for SearchesItsStore {
    async fn ingest(&self, request: &Ingest, store: &LensStore) -> Result<()> {
        let query = request
            .content
            .text()
            .unwrap_or_default()
            .replace("<NUL>", "\0");
        let n = request.source_description.parse().unwrap_or(5);
        store.search(&query, n).await.map(|_| ())
    }
}

pub async fn every_client_refuses_the_same_hostile_fields(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::appending("notes", dest.clone()))
            .lens(Lens::appending("asks", dest.clone()).ingestion(SearchesItsStore))
            .lens(Lens::replace_graph("systems", dest.clone())),
    )
    .await;
    let s = |q: &str| Search::new(&op, q).destinations([&dest]);

    // A NUL in the query, whatever the result type (the native engine refuses it).
    assert_invalid(client.search(&s("a\0b")).await, "query");
    assert_invalid(client.search(&s("a\0b").facts()).await, "query");
    assert_invalid(
        client.search(&s("a\0b").nodes(Vec::<String>::new())).await,
        "query",
    );
    assert_invalid(client.search(&s("a\0b").artefacts(None)).await, "query");
    assert_invalid(
        client
            .search(&s("").artefacts(Some(format!("{w}\0"))))
            .await,
        "result_type.artefact_id",
    );
    // No client promises more results per Destination than the engine returns.
    let engine_limit = gralkor::graph::search::MAX_SEARCH_LIMIT;
    client
        .search(&s(&w).max_results(engine_limit))
        .await
        .unwrap();
    assert_invalid(
        client.search(&s(&w).max_results(engine_limit + 1)).await,
        "max_results",
    );

    // Operator ids: no NUL, at most 256 bytes, in every operation.
    let uuid = uuid::Uuid::new_v4();
    for bad in ["o\0p".to_string(), "o".repeat(257)] {
        let doc = || Content::document(format!("{w} text"));
        assert_invalid(
            client.ingest(&Ingest::new("i", &bad, "notes", doc())).await,
            "operator_id",
        );
        assert_invalid(client.search(&Search::new(&bad, &w)).await, "operator_id");
        assert_invalid(
            client
                .replace(&Replace::new(&bad, "systems", Graph::new()))
                .await,
            "operator_id",
        );
        assert_invalid(
            client.memory_add(&MemoryAdd::new(&bad, doc())).await,
            "operator_id",
        );
        assert_invalid(
            client
                .get_episode(&EpisodeRef::new(&bad, &dest, uuid))
                .await,
            "operator_id",
        );
        assert_invalid(
            client
                .remove_episode(&EpisodeRef::new(&bad, &dest, uuid))
                .await,
            "operator_id",
        );
        assert_invalid(
            client.build_communities(&BuildCommunities::new(&bad)).await,
            "operator_id",
        );
    }
    let longest = "o".repeat(256);
    client
        .search(&Search::new(&longest, &w))
        .await
        .expect("a 256-byte operator id is fine");

    // The caller's ingest id: no NUL.
    assert_invalid(
        client
            .ingest(&Ingest::new(
                "i\0",
                &op,
                "notes",
                Content::document(format!("{w} text")),
            ))
            .await,
        "id",
    );

    // A Lens process's own search is checked like a request's.
    let ask = |query: &str, n: &str| {
        Ingest::new("i", &op, "asks", Content::document(query)).source_description(n)
    };
    assert_invalid(
        client.ingest(&ask(&format!("{w}<NUL>"), "5")).await,
        "query",
    );
    assert_invalid(client.ingest(&ask(&w, "0")).await, "max_results");
    assert_invalid(
        client
            .ingest(&ask(&w, &(engine_limit + 1).to_string()))
            .await,
        "max_results",
    );
    client
        .ingest(&ask(&w, &engine_limit.to_string()))
        .await
        .unwrap();

    let found = client
        .search(&Search::new(&op, &w).destinations([&dest, "personal"]))
        .await
        .unwrap();
    assert!(found.is_empty(), "nothing may be written: {found:?}");
}
