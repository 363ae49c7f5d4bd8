//! Contracts of validation itself: every client refuses exactly the same input, field
//! by field, before anything runs — whatever its storage would or would not notice.

use super::*;
use gralkor::client::OperatorId;

/// A Lens process that searches its store with the request's content as the query
/// (`<NUL>` standing for a NUL character, which the request itself may not carry) and
/// `max_results` taken from the request's source description, then writes nothing.
#[derive(Debug)]
pub struct SearchesItsStore;

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
    let (dest, op, w) = (fresh("d"), fresh_op("op"), word());
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

    // Operator ids: no NUL, at most 256 bytes. They are checked once, when made, so
    // no request of any operation can carry a bad one: each is refused when read from
    // JSON, naming the field.
    let uuid = uuid::Uuid::new_v4();
    for bad in ["o\0p".to_string(), "o".repeat(257)] {
        let err = OperatorId::new(bad.clone()).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidInput { field, .. } if field == "operator_id"),
            "{err:?}"
        );
        let good = oid("o");
        let requests = [
            serde_json::to_value(Ingest::new("i", &good, "notes", Content::document("x"))),
            serde_json::to_value(Search::new(&good, &w)),
            serde_json::to_value(Replace::new(&good, "systems", Graph::new())),
            serde_json::to_value(MemoryAdd::new(&good, Content::document("x"))),
            serde_json::to_value(EpisodeRef::new(&good, &dest, uuid)),
            serde_json::to_value(BuildCommunities::new(&good)),
        ];
        for (i, json) in requests.into_iter().enumerate() {
            let mut json = json.unwrap();
            json["operator_id"] = bad.clone().into();
            let err = match i {
                0 => serde_json::from_value::<Ingest>(json).map(drop),
                1 => serde_json::from_value::<Search>(json).map(drop),
                2 => serde_json::from_value::<Replace>(json).map(drop),
                3 => serde_json::from_value::<MemoryAdd>(json).map(drop),
                4 => serde_json::from_value::<EpisodeRef>(json).map(drop),
                _ => serde_json::from_value::<BuildCommunities>(json).map(drop),
            }
            .unwrap_err()
            .to_string();
            assert!(err.contains("`operator_id`"), "request {i}: {err}");
        }
    }
    let longest = oid(&"o".repeat(256));
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
