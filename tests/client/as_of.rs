//! Searching what was true at an instant (`Search::as_of`) on both clients, and the
//! `memory_search` tool's `as_of` argument. Mirrors `test-trees/graph-search.md`
//! ("as of, through the client").
//!
//! Both clients: the twin and the offline native client (an embedder, no language
//! model), whose fact results are the episodes standing in as facts, timed by their
//! reference time. A fact invalidated later needs extraction: it runs on the native
//! client with a scripted model (the twin never extracts, so it holds no fact that
//! could be invalidated).

use crate::client_contract::word;
use crate::common;

use std::sync::Arc;

use common::ingest::{CountingEmbedder, Rules, World, extraction};
use gralkor::NativeStorage;
use gralkor::agent::tools::{ToolContext, call_tool};
use gralkor::client::{
    Call, Client, Content, Hit, InMemoryClient, Ingest, NativeClient, OperatorId, Search,
    SearchResult,
};
use gralkor::graph::{Engine, Timestamp};
use gralkor::runtime::{Runtime, RuntimeConfig};
use gralkor::{Error, Result};
use serde_json::json;

#[derive(Clone, Copy)]
enum Kind {
    Twin,
    Native,
}

async fn client(kind: Kind) -> Arc<dyn Client> {
    match kind {
        Kind::Twin => Arc::new(InMemoryClient::new()),
        Kind::Native => {
            let engine = Engine::without_llm(common::db().await, Arc::new(CountingEmbedder::new()));
            Arc::new(NativeClient::from_parts(
                Runtime::new(RuntimeConfig::new()).unwrap(),
                NativeStorage::new(engine),
            ))
        }
    }
}

fn op() -> OperatorId {
    OperatorId::new(format!("op-{}", uuid::Uuid::new_v4())).unwrap()
}

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn contents(found: &[SearchResult]) -> Vec<String> {
    found
        .iter()
        .map(|r| match &r.hit {
            Hit::Episode(e) => e.content.clone(),
            Hit::Fact(f) => f.fact.clone(),
            other => panic!("unexpected hit {other:?}"),
        })
        .collect()
}

/// Runs an `async fn(Kind)` test on both clients.
macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn in_memory() {
                super::$name(super::Kind::Twin).await
            }
            #[tokio::test]
            async fn native() {
                super::$name(super::Kind::Native).await
            }
        }
    )*};
}

both!(
    as_of_finds_episodes_and_facts_that_had_happened_by_then,
    without_as_of_a_search_is_unchanged_and_finds_what_happens_later,
    as_of_with_node_or_artefact_results_is_refused_naming_the_field,
    the_memory_search_tool_passes_as_of_and_refuses_a_bad_value,
);

async fn as_of_finds_episodes_and_facts_that_had_happened_by_then(kind: Kind) {
    let c = client(kind).await;
    let op = op();
    let w = word();
    let text = format!("Ada planted the {w} orchard.");
    c.ingest(
        &Ingest::new(
            "planted",
            &op,
            "personal-chat",
            Content::conversation(&text),
        )
        .reference_time(t("2024-03-01T00:00:00Z")),
    )
    .await
    .unwrap();
    let episodes = |at: &str| Search::new(&op, &w).destinations(["personal"]).as_of(t(at));
    let facts = |at: &str| episodes(at).facts();
    for search in [
        episodes("2024-02-01T00:00:00Z"),
        facts("2024-02-01T00:00:00Z"),
    ] {
        assert!(c.search(&search).await.unwrap().is_empty(), "{search:?}");
    }
    for search in [
        episodes("2024-03-01T00:00:00Z"),
        episodes("2025-01-01T00:00:00Z"),
        facts("2024-03-01T00:00:00Z"),
        facts("2025-01-01T00:00:00Z"),
    ] {
        assert_eq!(
            contents(&c.search(&search).await.unwrap()),
            std::slice::from_ref(&text),
            "{search:?}"
        );
    }
    c.shutdown().await.unwrap();
}

async fn without_as_of_a_search_is_unchanged_and_finds_what_happens_later(kind: Kind) {
    let c = client(kind).await;
    let op = op();
    let w = word();
    // A plan: it happens in 2100. Current knowledge includes it; as of now it has
    // not happened yet.
    let text = format!("Ada will open the {w} museum.");
    c.ingest(
        &Ingest::new("plan", &op, "personal-chat", Content::conversation(&text))
            .reference_time(t("2100-01-01T00:00:00Z")),
    )
    .await
    .unwrap();
    let now = Search::new(&op, &w).destinations(["personal"]);
    assert_eq!(
        contents(&c.search(&now).await.unwrap()),
        std::slice::from_ref(&text)
    );
    assert_eq!(
        contents(&c.search(&now.clone().facts()).await.unwrap()),
        [text]
    );
    let today = now.as_of(Timestamp::now());
    assert!(c.search(&today).await.unwrap().is_empty());
    assert!(c.search(&today.facts()).await.unwrap().is_empty());
    c.shutdown().await.unwrap();
}

async fn as_of_with_node_or_artefact_results_is_refused_naming_the_field(kind: Kind) {
    let c = client(kind).await;
    let op = op();
    let at = t("2024-01-01T00:00:00Z");
    for search in [
        Search::new(&op, "Ada")
            .nodes(Vec::<String>::new())
            .as_of(at),
        Search::new(&op, "Ada").artefacts(None).as_of(at),
    ] {
        match c.search(&search).await {
            Err(Error::InvalidInput { field, rule }) => {
                assert_eq!(field, "as_of");
                assert!(rule.contains("episode and fact results only"), "{rule}");
            }
            other => panic!("expected an invalid as_of, got {other:?}"),
        }
    }
    c.shutdown().await.unwrap();
}

async fn the_memory_search_tool_passes_as_of_and_refuses_a_bad_value(kind: Kind) {
    let c = client(kind).await;
    let op = op();
    let w = word();
    let text = format!("Ada sold the {w} boat.");
    c.ingest(
        &Ingest::new("sold", &op, "personal-chat", Content::conversation(&text))
            .reference_time(t("2024-03-01T00:00:00Z")),
    )
    .await
    .unwrap();
    let ctx = ToolContext::new(op.clone());
    let before = call_tool(
        &*c,
        &ctx,
        "memory_search",
        &json!({"query": w, "as_of": "2024-01-01T00:00:00Z"}),
    )
    .await
    .unwrap();
    assert_eq!(before, gralkor::agent::format::NO_MATCHING_FACTS);
    let after = call_tool(
        &*c,
        &ctx,
        "memory_search",
        &json!({"query": w, "as_of": "2024-06-01T00:00:00+02:00"}),
    )
    .await
    .unwrap();
    assert!(after.contains(&text), "{after}");
    let bad: Result<String> = call_tool(
        &*c,
        &ctx,
        "memory_search",
        &json!({"query": w, "as_of": "last tuesday"}),
    )
    .await;
    match bad {
        Err(Error::InvalidInput { field, rule }) => {
            assert_eq!(field, "memory_search.arguments.as_of");
            assert!(
                rule.contains("RFC 3339") && rule.contains("last tuesday"),
                "{rule}"
            );
        }
        other => panic!("expected an invalid as_of, got {other:?}"),
    }
    c.shutdown().await.unwrap();
}

/// The twin records the search the tool ran, with its instant.
#[tokio::test]
async fn the_tools_search_carries_the_instant() {
    let c = InMemoryClient::new();
    let ctx = ToolContext::new(op());
    call_tool(
        &c,
        &ctx,
        "memory_search",
        &json!({"query": "boat", "as_of": "2024-06-01T00:00:00Z"}),
    )
    .await
    .unwrap();
    match &c.calls()[..] {
        [Call::Search(s)] => assert_eq!(s.as_of, Some(t("2024-06-01T00:00:00Z"))),
        other => panic!("expected one search, got {other:?}"),
    }
}

/// Ada lives in Porto from 2020, then in Lisbon from 2023-06-01; the second fact
/// contradicts the first, which the engine invalidates (`invalid_at` 2023-06-01,
/// `expired_at` when it learned it).
#[tokio::test]
async fn a_fact_invalidated_later_is_found_as_of_when_it_held_and_not_after() {
    let w = word();
    let rules = Rules {
        contradicts: Some(Arc::new(|new, old| {
            new.contains("lives in") && old.contains("lives in")
        })),
        ..Rules::default()
    };
    let world = World::new(&common::db().await, rules);
    let porto = format!("Ada lives in Porto {w}.");
    let lisbon = format!("Ada lives in Lisbon {w}.");
    world.rules.extraction(
        "Lisbon",
        extraction(
            &[("Ada", 0), ("Lisbon", 0)],
            &[(
                "Ada",
                "lives in",
                "Lisbon",
                &lisbon,
                Some("2023-06-01T00:00:00Z"),
                None,
            )],
        ),
    );
    world.rules.extraction(
        "Porto",
        extraction(
            &[("Ada", 0), ("Porto", 0)],
            &[(
                "Ada",
                "lives in",
                "Porto",
                &porto,
                Some("2020-01-01T00:00:00Z"),
                None,
            )],
        ),
    );
    let c = NativeClient::from_parts(
        Runtime::new(RuntimeConfig::new()).unwrap(),
        NativeStorage::new(world.engine.clone()),
    );
    let op = op();
    for (id, said, at) in [
        ("porto", "Ada: I moved to Porto.", "2020-01-01T00:00:00Z"),
        (
            "lisbon",
            "Ada: I left Porto for Lisbon.",
            "2023-06-01T00:00:00Z",
        ),
    ] {
        c.ingest(
            &Ingest::new(id, &op, "personal-chat", Content::conversation(said))
                .reference_time(t(at)),
        )
        .await
        .unwrap();
    }
    let facts = |at: Option<&str>| {
        let s = Search::new(&op, format!("Ada lives {w}"))
            .destinations(["personal"])
            .facts();
        match at {
            Some(at) => s.as_of(t(at)),
            None => s,
        }
    };
    let found = |s: Search| {
        let c = c.clone();
        async move {
            let mut texts = contents(&c.search(&s).await.unwrap());
            texts.sort();
            texts
        }
    };
    // While Ada lived in Porto: the invalidated fact, not the later one.
    assert_eq!(
        found(facts(Some("2021-01-01T00:00:00Z"))).await,
        std::slice::from_ref(&porto)
    );
    // After the move: only Lisbon, as of then and now.
    assert_eq!(
        found(facts(Some("2024-01-01T00:00:00Z"))).await,
        std::slice::from_ref(&lisbon)
    );
    assert_eq!(found(facts(None)).await, std::slice::from_ref(&lisbon));
    // Before either.
    assert!(found(facts(Some("2019-01-01T00:00:00Z"))).await.is_empty());
    c.shutdown().await.unwrap();
}
