//! The `Client` contract run against `InMemoryClient`, plus what only the twin does:
//! call recording, canned responses, deterministic matching and fact wrapping.

use crate::client_contract;

use async_trait::async_trait;
use client_contract::oid;
use gralkor::client::{
    BuildCommunities, Call, Canned, Client, CommunityCounts, Content, EpisodeRecord, EpisodeRef,
    Hit, InMemoryClient, Ingest, MemoryAdd, MemoryClient, Replace, Search, SourceKind,
};
use gralkor::lens::{Graph, Lens, OWNER_PROPERTY};
use gralkor::provenance::Writer;
use gralkor::runtime::{Runtime, RuntimeConfig};
use gralkor::storage::{GraphId, GraphQuery, InMemoryStorage, NewEpisode, ScoredHit, Storage};
use gralkor::{Error, Result};
use serde_json::json;
use uuid::Uuid;

run_contract!(|config| client_contract::boxed(async move {
    InMemoryClient::with_config(config).expect("valid contract configuration")
}));

fn ingest(operator: &str, text: &str) -> Ingest {
    Ingest::new(
        format!("i-{text}"),
        oid(operator),
        "personal-chat",
        Content::conversation(text),
    )
    .source_description("chat")
}

#[tokio::test]
async fn every_valid_call_is_recorded_with_its_arguments() {
    let client = InMemoryClient::with_config(
        RuntimeConfig::new().lens(Lens::replace_graph("systems", "global")),
    )
    .unwrap();
    let i = ingest("op", "Ada: tea");
    let r = Replace::new(oid("op"), "systems", Graph::new());
    let s = Search::new(oid("op"), "tea").facts();
    let m = MemoryAdd::new(oid("op"), Content::document("tea"));
    let e = EpisodeRef::new(oid("op"), "personal", Uuid::new_v4());
    let b = BuildCommunities::new(oid("op"));
    client.ingest(&i).await.unwrap();
    client.replace(&r).await.unwrap();
    client.search(&s).await.unwrap();
    client.memory_add(&m).await.unwrap();
    client.get_episode(&e).await.unwrap();
    client.remove_episode(&e).await.unwrap();
    client.build_indices().await.unwrap();
    client.build_communities(&b).await.unwrap();
    client.await_background_writes().await;
    assert_eq!(
        client.calls(),
        [
            Call::Ingest(i),
            Call::Replace(r),
            Call::Search(s),
            Call::MemoryAdd(m),
            Call::GetEpisode(e.clone()),
            Call::RemoveEpisode(e),
            Call::BuildIndices,
            Call::BuildCommunities(b),
        ]
    );
}

#[tokio::test]
async fn invalid_calls_are_rejected_before_recording() {
    let client = InMemoryClient::new();
    assert!(client.ingest(&ingest("op", " ")).await.is_err());
    assert!(
        client
            .search(&Search::new(oid("op"), "q").max_results(0))
            .await
            .is_err()
    );
    assert!(
        client
            .memory_add(&MemoryAdd::new(oid("op"), Content::document(" ")))
            .await
            .is_err()
    );
    assert!(
        client
            .replace(&Replace::new(oid("op"), "personal-chat", Graph::new()))
            .await
            .is_err()
    );
    assert!(client.calls().is_empty());
    assert!(client.storage().graphs().is_empty());
}

/// The recording is the twin's wrapper, not the client logic's: a capture buffer built
/// from the twin as `Arc<dyn Client>` has its Lens writes recorded (and answered
/// canned) like the twin's own `ingest`, clones share the recording, and the client
/// logic it wraps, used directly, records nothing.
#[tokio::test]
async fn the_wrapper_records_a_capture_buffers_lens_writes_and_the_wrapped_client_records_nothing()
{
    use gralkor::agent::capture::{Capture, CaptureBuffer, CaptureConfig};
    use gralkor::agent::turn::Turn;

    let twin = InMemoryClient::new();
    let shared: std::sync::Arc<dyn Client> = std::sync::Arc::new(twin.clone());
    let buffer = CaptureBuffer::for_client(&*shared, CaptureConfig::new())
        .await
        .unwrap();
    let turn = |text: &str| Turn::completed(text, Vec::<String>::new(), "Noted.");
    let capture = |session: &str, text: &str| {
        Capture::new(session, oid("op"), "Susu", "Ada", turn(text)).lenses(["personal-chat"])
    };
    // The first flush is answered canned: recorded, nothing stored.
    twin.respond(Canned::Ingest(Ok(Vec::new())));
    buffer
        .append(capture("s-1", "We ship on Fridays."))
        .await
        .unwrap();
    buffer.flush_all().await.unwrap();
    assert!(twin.storage().graphs().is_empty(), "canned: nothing stored");
    buffer
        .append(capture("s-2", "The canary was clean."))
        .await
        .unwrap();
    buffer.flush_all().await.unwrap();
    let lens_writes: Vec<Ingest> = twin
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Ingest(i) => Some(i),
            _ => None,
        })
        .collect();
    assert_eq!(lens_writes.len(), 2, "{lens_writes:?}");
    assert_eq!(lens_writes[0].session_id.as_deref(), Some("s-1"));
    assert_eq!(lens_writes[1].session_id.as_deref(), Some("s-2"));
    assert_eq!(
        twin.search(&Search::new(oid("op"), "canary"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        twin.search(&Search::new(oid("op"), "Fridays"))
            .await
            .unwrap()
            .is_empty()
    );

    // The wrapped client logic is the same memory, with no recording of its own.
    let recorded = twin.calls().len();
    let inner: &MemoryClient<InMemoryStorage> = &twin;
    assert_eq!(
        inner
            .search(&Search::new(oid("op"), "canary"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(twin.calls().len(), recorded);
}

#[tokio::test]
async fn canned_responses_are_used_once_in_order_per_operation() {
    let client = InMemoryClient::new();
    client.respond(Canned::Search(Err(Error::NotFound("first".into()))));
    client.respond(Canned::BuildCommunities(Ok(CommunityCounts::new(3, 7))));
    client.respond(Canned::Search(Err(Error::NotFound("second".into()))));
    client.respond(Canned::Ingest(Ok(vec![])));

    let first = client
        .search(&Search::new(oid("op"), "q"))
        .await
        .unwrap_err();
    assert!(first.to_string().contains("first"));
    let second = client
        .search(&Search::new(oid("op"), "q"))
        .await
        .unwrap_err();
    assert!(second.to_string().contains("second"));
    assert!(
        client
            .search(&Search::new(oid("op"), "q"))
            .await
            .unwrap()
            .is_empty()
    );

    let counts = client
        .build_communities(&BuildCommunities::new(oid("op")))
        .await
        .unwrap();
    assert_eq!((counts.communities, counts.edges), (3, 7));
    // The canned ingest answers without writing.
    assert!(
        client
            .ingest(&ingest("op", "Ada: tea"))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(client.storage().graphs().is_empty());
    // Validation still comes first: an invalid call does not consume a canned response.
    client.respond(Canned::GetEpisode(Ok(None)));
    assert!(
        client
            .get_episode(&EpisodeRef::new(oid("op"), "nowhere", Uuid::nil()))
            .await
            .is_err()
    );
    assert_eq!(client.calls().len(), 5);
}

#[tokio::test]
async fn reset_clears_calls_canned_responses_and_memory_but_keeps_the_runtime() {
    let client = InMemoryClient::with_config(RuntimeConfig::new().destination("kb")).unwrap();
    client.ingest(&ingest("op", "Ada: tea")).await.unwrap();
    client.respond(Canned::Search(Err(Error::NotFound("x".into()))));
    client.reset();
    assert!(client.calls().is_empty());
    assert!(client.storage().graphs().is_empty());
    assert!(
        client
            .search(&Search::new(oid("op"), "tea"))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(client.runtime().snapshot().destination("d", "kb").is_ok());
}

#[tokio::test]
async fn search_matches_shared_words_in_insertion_order() {
    let client = InMemoryClient::new();
    for text in [
        "Ada: Tea at noon",
        "Ada: coffee later",
        "Ada: more TEA, please",
    ] {
        client.ingest(&ingest("op", text)).await.unwrap();
    }
    let found = client
        .search(&Search::new(oid("op"), "tea?"))
        .await
        .unwrap();
    let texts: Vec<_> = found
        .iter()
        .map(|r| r.hit.as_episode().unwrap().content.as_str())
        .collect();
    assert_eq!(texts, ["Ada: Tea at noon", "Ada: more TEA, please"]);
    let none = client
        .search(&Search::new(oid("op"), "biscuits"))
        .await
        .unwrap();
    assert!(none.is_empty());
}

#[tokio::test]
async fn facts_wrap_each_episode_as_one_record_with_its_source() {
    let client = InMemoryClient::new();
    let written = client
        .ingest(&ingest("op", "Ada: tea at noon"))
        .await
        .unwrap();
    let found = client
        .search(&Search::new(oid("op"), "tea").facts())
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    let Hit::Fact(fact) = &found[0].hit else {
        panic!("{found:?}")
    };
    assert_eq!(fact.fact, "Ada: tea at noon");
    assert!(fact.created_at.is_some() && fact.valid_at.is_some());
    assert_eq!((fact.invalid_at, fact.expired_at), (None, None));
    assert_eq!(fact.sources.len(), 1);
    let source = &fact.sources[0];
    assert_eq!(source.episode, written[0].episode);
    assert_eq!(source.source_kind, Some(SourceKind::Message));
    assert_eq!(source.source_description, "chat [lens: personal-chat]");
    assert_eq!(source.writer, Some(Writer::Lens("personal-chat".into())));
    // Wrapped facts are generic facts.
    let typed = Search::new(oid("op"), "tea").result_type(gralkor::client::ResultType::Facts {
        edge_types: vec!["PREFERS".into()],
    });
    assert!(client.search(&typed).await.unwrap().is_empty());
}

#[tokio::test]
async fn stored_descriptions_end_with_the_writer_marker() {
    let client = InMemoryClient::new();
    client.ingest(&ingest("op", "Ada: tea")).await.unwrap();
    client
        .memory_add(&MemoryAdd::new(oid("op"), Content::document("tea")).source_description("note"))
        .await
        .unwrap();
    client.await_background_writes().await;
    assert_eq!(
        client.storage().stored_descriptions("personal/op"),
        ["chat [lens: personal-chat]", "note [gralkor: direct]"]
    );
}

#[tokio::test]
async fn replacement_stamps_the_ownership_property_over_any_supplied_value() {
    let client = InMemoryClient::with_config(
        RuntimeConfig::new().lens(Lens::replace_graph("systems", "global")),
    )
    .unwrap();
    let graph = Graph::new()
        .node(
            "a",
            ["System"],
            json!({"name": "A", OWNER_PROPERTY: "impostor"}),
        )
        .relationship("a", "USES", "a", json!({}));
    client
        .replace(&Replace::new(oid("op"), "systems", graph))
        .await
        .unwrap();
    let stored = client.storage().replaced_graph("global");
    assert_eq!(stored.nodes[0].properties[OWNER_PROPERTY], "systems");
    assert_eq!(
        stored.relationships[0].properties[OWNER_PROPERTY],
        "systems"
    );
    let found = client
        .search(
            &Search::new(oid("op"), "A")
                .destinations(["global"])
                .nodes(["System"]),
        )
        .await
        .unwrap();
    let node = found[0].hit.as_node().unwrap();
    assert_eq!(node.attributes, json!({"name": "A"}));
}

/// Fails every search of one graph.
#[derive(Debug, Default)]
struct FailingGraph {
    inner: InMemoryStorage,
    failing: String,
}

#[async_trait]
impl Storage for FailingGraph {
    async fn add_episode(&self, episode: NewEpisode) -> Result<gralkor::storage::StoredEpisode> {
        self.inner.add_episode(episode).await
    }
    async fn search(&self, graphs: &[GraphId], query: &GraphQuery) -> Result<Vec<Vec<ScoredHit>>> {
        if let Some(graph) = graphs.iter().find(|g| g.as_str() == self.failing) {
            return Err(Error::Query {
                graph: graph.to_string(),
                message: "boom".into(),
            });
        }
        self.inner.search(graphs, query).await
    }
    async fn replace_graph(&self, graph: &GraphId, lens: &str, replacement: &Graph) -> Result<()> {
        self.inner.replace_graph(graph, lens, replacement).await
    }
    async fn get_episode(&self, graph: &GraphId, uuid: Uuid) -> Result<Option<EpisodeRecord>> {
        self.inner.get_episode(graph, uuid).await
    }
    async fn remove_episode(&self, graph: &GraphId, uuid: Uuid) -> Result<bool> {
        self.inner.remove_episode(graph, uuid).await
    }
    async fn build_indices(&self) -> Result<()> {
        Ok(())
    }
    async fn build_communities(&self, graph: &GraphId) -> Result<CommunityCounts> {
        self.inner.build_communities(graph).await
    }
}

#[tokio::test]
async fn a_failing_destination_fails_the_whole_search() {
    let storage = FailingGraph {
        inner: InMemoryStorage::new(),
        failing: "global".into(),
    };
    let client = MemoryClient::with_storage(Runtime::packaged(), storage);
    client.ingest(&ingest("op", "Ada: tea")).await.unwrap();
    let err = client
        .search(&Search::new(oid("op"), "tea"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("boom"), "{err}");
    // The healthy Destination alone still answers.
    let ok = client
        .search(&Search::new(oid("op"), "tea").destinations(["personal"]))
        .await
        .unwrap();
    assert_eq!(ok.len(), 1);
}

/// customInstructions reach what the storage hands the engine's extraction, on the
/// twin: a Lens's own; a request's in their place (`Ingest`, `MemoryAdd` direct and
/// through a Lens); the capture buffer's configured default and a turn's own, on a
/// direct and a Lens route; none where none is given. NUL characters are refused
/// naming the field, before anything is written.
#[tokio::test]
async fn custom_instructions_reach_the_extraction_on_the_twin() {
    use gralkor::agent::capture::{Capture, CaptureBuffer, CaptureConfig};
    use gralkor::agent::turn::Turn;

    let client = InMemoryClient::with_config(
        RuntimeConfig::new()
            .destination("notes")
            .lens(Lens::appending("notes", "notes").custom_instructions("Lens rules")),
    )
    .unwrap();
    let op = oid("op");
    let doc = |id: &str| Ingest::new(id, &op, "notes", Content::document(format!("{id} text")));
    client.ingest(&doc("a")).await.unwrap();
    client
        .ingest(&doc("b").custom_instructions("Request rules"))
        .await
        .unwrap();
    client
        .memory_add(
            &MemoryAdd::new(&op, Content::document("c text"))
                .to_destination("notes")
                .custom_instructions("Direct rules"),
        )
        .await
        .unwrap();
    client
        .memory_add(
            &MemoryAdd::new(&op, Content::document("d text"))
                .through_lens("notes")
                .custom_instructions("Add rules"),
        )
        .await
        .unwrap();
    client
        .memory_add(&MemoryAdd::new(&op, Content::document("e text")).to_destination("notes"))
        .await
        .unwrap();
    client.await_background_writes().await;
    let some = |s: &str| Some(s.to_string());
    assert_eq!(
        client.storage().stored_instructions("notes"),
        [
            some("Lens rules"),
            some("Request rules"),
            some("Direct rules"),
            some("Add rules"),
            None
        ]
    );

    let buffer = CaptureBuffer::in_memory(
        &client,
        CaptureConfig::new().custom_instructions(CaptureConfig::OPENCLAW_CUSTOM_INSTRUCTIONS),
    )
    .await
    .unwrap();
    let turn = |q: &str| Turn::completed(q, Vec::<String>::new(), "noted");
    buffer
        .append(Capture::new("s-1", &op, "Susu", "Ada", turn("I like tea")).direct("notes"))
        .await
        .unwrap();
    buffer
        .append(
            Capture::new("s-2", &op, "Susu", "Ada", turn("I like jazz"))
                .lenses(["notes"])
                .custom_instructions("Turn rules"),
        )
        .await
        .unwrap();
    buffer.flush_all().await.unwrap();
    let stored = client.storage().stored_instructions("notes");
    assert_eq!(stored.len(), 7, "{stored:?}");
    assert!(stored[5..].contains(&some(CaptureConfig::OPENCLAW_CUSTOM_INSTRUCTIONS)));
    assert!(stored[5..].contains(&some("Turn rules")));

    let nul = doc("f").custom_instructions("a\0b");
    match client.ingest(&nul).await {
        Err(Error::InvalidInput { field, .. }) => assert_eq!(field, "custom_instructions"),
        other => panic!("expected invalid custom_instructions, got {other:?}"),
    }
    match client
        .memory_add(&MemoryAdd::new(&op, Content::document("g")).custom_instructions("\0"))
        .await
    {
        Err(Error::InvalidInput { field, .. }) => assert_eq!(field, "custom_instructions"),
        other => panic!("expected invalid custom_instructions, got {other:?}"),
    }
    assert_eq!(client.storage().stored_instructions("notes").len(), 7);
}
