//! Every public request and result round-trips through `serde_json`, with timestamps
//! as RFC 3339 text, so tool schemas and agent frameworks can carry them as JSON.

use gralkor::agent::MemorySearch;
use gralkor::client::{
    Artefact, BuildCommunities, CommunityCounts, Content, EpisodeRecord, EpisodeRef, FactRecord,
    FactSource, Hit, Ingest, IngestedRepresentation, MemoryAdd, NodeRecord, OperatorId, Replace,
    Search, SearchResult, SourceKind,
};
use gralkor::graph::Timestamp;
use gralkor::lens::Graph;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use uuid::Uuid;

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(value: &T) -> String {
    let text = serde_json::to_string(value).unwrap();
    let back: T = serde_json::from_str(&text).unwrap();
    assert_eq!(&back, value, "{text}");
    text
}

#[test]
fn every_request_round_trips_through_json() {
    let op = OperatorId::new("op-7").unwrap();
    let at: Timestamp = "2026-03-01T09:30:00Z".parse().unwrap();
    let ingest = Ingest::new(
        "turn-1",
        &op,
        "personal-chat",
        Content::conversation("Ada: hi"),
    )
    .source_description("chat")
    .reference_time(at);
    let text = round_trip(&ingest);
    assert!(
        text.contains("\"reference_time\":\"2026-03-01T09:30:00.000000Z\""),
        "{text}"
    );
    round_trip(&Ingest::new(
        "r",
        &op,
        "notes",
        Content::structured(json!({"k": [1, 2]})),
    ));
    round_trip(&Replace::new(
        &op,
        "systems",
        Graph::new()
            .node("a", ["System"], json!({"name": "A"}))
            .node("b", ["System"], json!({}))
            .relationship("a", "CALLS", "b", json!({"since": 2024})),
    ));
    round_trip(
        &Search::new(&op, "release day")
            .destinations(["personal", "global"])
            .lenses(["decisions"])
            .nodes(["Person"])
            .max_results(7),
    );
    round_trip(&Search::new(&op, "x").facts());
    round_trip(&Search::new(&op, "").artefacts(Some("weekly".into())));
    round_trip(
        &MemoryAdd::new(&op, Content::document("Ada likes tea."))
            .source_description("note")
            .through_lens("personal-chat"),
    );
    round_trip(&MemoryAdd::new(&op, Content::document("x")).to_destination("global"));
    round_trip(&EpisodeRef::new(&op, "personal", Uuid::new_v4()));
    round_trip(&BuildCommunities::global(&op));
    round_trip(
        &MemorySearch::new(&op, "where does Ada work?")
            .lenses(["personal-chat"])
            .max_bytes(1_000),
    );
}

#[test]
fn every_result_round_trips_through_json() {
    let at: Timestamp = "2026-03-01T09:30:00.123456Z".parse().unwrap();
    let episode = EpisodeRecord::from_stored(
        Uuid::new_v4(),
        "Ada: I moved to Lisbon.",
        SourceKind::Message,
        "chat [lens: personal-chat]",
        at,
        at,
    );
    let mut fact = FactRecord::new(Uuid::new_v4(), "Ada lives in Lisbon.");
    fact.valid_at = Some(at);
    fact.created_at = Some(at);
    fact.sources = vec![FactSource::from_stored(
        episode.uuid,
        Some(SourceKind::Message),
        "chat [lens: personal-chat]",
    )];
    let mut node = NodeRecord::new(Uuid::new_v4(), "Ada");
    node.labels = vec!["Person".into()];
    node.attributes = json!({"city": "Lisbon"});
    let results = vec![
        SearchResult::new("personal", 0.91, Hit::Episode(episode.clone())),
        SearchResult::new("personal", 0.5, Hit::Fact(fact.clone())),
        SearchResult::new("global", 0.25, Hit::Node(node.clone())),
        SearchResult::new(
            "global",
            1.0,
            Hit::Artefact(Artefact::new("weekly", json!({"n": 1}))),
        ),
    ];
    let text = round_trip(&results);
    assert!(
        text.contains("\"valid_at\":\"2026-03-01T09:30:00.123456Z\""),
        "{text}"
    );
    assert!(
        text.contains("\"writer\":{\"lens\":\"personal-chat\"}"),
        "{text}"
    );
    assert!(text.contains("\"source_kind\":\"message\""), "{text}");
    round_trip(&episode);
    round_trip(&fact);
    round_trip(&node);
    round_trip(&CommunityCounts::new(3, 7));
    let written: Vec<IngestedRepresentation> = serde_json::from_value(json!([{
        "id": "turn-1",
        "lens": "personal-chat",
        "content": {"conversation": "Ada: hi"},
        "episode": Uuid::nil(),
    }]))
    .unwrap();
    round_trip(&written);
}
