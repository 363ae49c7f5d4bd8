//! The `Client` contract, written once and run against every implementation.
//!
//! Each contract is one `pub async fn` taking a [`Factory`]: something that builds a
//! fresh client holding a given runtime configuration. An implementation's test
//! binary runs them all with [`run_contract!`]:
//!
//! ```ignore
//! #[macro_use]
//! mod client_contract;
//! run_contract!(|config| client_contract::boxed(async move { /* build a client */ }));
//! ```
//!
//! Contracts are isolated without relying on an empty store: every test uses fresh
//! operator ids, fresh application Destination names and a fresh search word, so an
//! implementation backed by a shared server (where `global` outlives one test) passes
//! too. Tests that count results in `global` are avoided for the same reason.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use gralkor::client::{
    BuildCommunities, Client, Content, EpisodeRecord, EpisodeRef, FactRecord, Hit, Ingest,
    MemoryAdd, Replace, Search, SearchResult, SourceKind,
};
use gralkor::lens::{Graph, Ingestion, Lens, LensStore};
use gralkor::provenance::Writer;
use gralkor::runtime::RuntimeConfig;
use gralkor::{Error, Result};
use serde_json::json;
use tokio::sync::Notify;

/// A client under test.
pub type ClientFuture = Pin<Box<dyn Future<Output = Arc<dyn Client>> + Send>>;

/// Builds a fresh client holding a runtime configuration.
pub trait Factory: Fn(RuntimeConfig) -> ClientFuture {}
impl<F: Fn(RuntimeConfig) -> ClientFuture> Factory for F {}

/// Boxes a client-building future.
pub fn boxed<C: Client + 'static>(f: impl Future<Output = C> + Send + 'static) -> ClientFuture {
    Box::pin(async move { Arc::new(f.await) as Arc<dyn Client> })
}

/// Generates one `#[tokio::test]` per contract for `$factory`.
#[macro_export]
macro_rules! run_contract {
    ($factory:expr) => {
        run_contract!(@tests $factory;
            ingest_writes_through_the_lens_to_its_destination_with_lens_provenance,
            ingest_rejects_invalid_requests_before_writing_anything,
            structured_records_are_stored_json_encoded,
            ingestion_processes_make_zero_one_or_many_writes,
            a_failing_ingestion_process_returns_its_error_without_a_partial_list,
            personal_chat_writes_to_each_operators_own_personal_graph,
            caller_text_cannot_forge_a_writer,
            replace_swaps_only_the_lenses_own_content,
            replace_rejects_invalid_requests_before_any_mutation,
            selector_free_search_covers_every_accessible_destination_in_order,
            destination_selector_narrows_keeps_requested_order_and_dedups,
            lens_selector_filters_writers_before_the_per_destination_limit,
            search_rejects_invalid_requests_before_any_query,
            fact_results_carry_sources_with_their_writers,
            memory_add_returns_at_once_and_writes_in_the_background,
            memory_add_validates_at_once_and_logs_background_failures,
            episodes_are_fetched_and_removed_by_destination_and_uuid,
            admin_operations_succeed_and_validate,
            an_operation_keeps_the_snapshot_it_started_with,
            later_operations_use_the_replaced_configuration
        );
    };
    (@tests $factory:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                client_contract::$name(&$factory).await;
            }
        )*
    };
}

/// A fresh word that matches nothing else (letters and digits only).
pub fn word() -> String {
    format!("zq{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

/// A fresh name with a prefix.
pub fn fresh(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

pub fn episodes(results: &[SearchResult]) -> Vec<(String, EpisodeRecord)> {
    results
        .iter()
        .map(|r| match &r.hit {
            Hit::Episode(e) => (r.destination.clone(), e.clone()),
            other => panic!("expected an episode, got {other:?}"),
        })
        .collect()
}

pub fn facts(results: &[SearchResult]) -> Vec<(String, FactRecord)> {
    results
        .iter()
        .map(|r| match &r.hit {
            Hit::Fact(f) => (r.destination.clone(), f.clone()),
            other => panic!("expected a fact, got {other:?}"),
        })
        .collect()
}

fn lens_writer(name: &str) -> Option<Writer> {
    Some(Writer::Lens(name.to_string()))
}

#[track_caller]
fn assert_invalid<T: std::fmt::Debug>(result: Result<T>, field: &str) {
    match result {
        Err(Error::InvalidInput { field: f, rule }) => {
            assert_eq!(f, field, "wrong field (rule: {rule})")
        }
        other => panic!("expected invalid `{field}`, got {other:?}"),
    }
}

/// Splits a document into paragraphs, one episode each.
#[derive(Debug)]
pub struct Paragraphs;

#[async_trait]
impl Ingestion for Paragraphs {
    async fn ingest(&self, request: &Ingest, store: &LensStore) -> Result<()> {
        let text = request.content.text().unwrap_or_default().to_string();
        for para in text.split("\n\n").filter(|p| !p.trim().is_empty()) {
            store
                .add(Content::document(para), &request.source_description)
                .await?;
        }
        Ok(())
    }
}

/// Writes nothing.
#[derive(Debug)]
pub struct Nothing;

#[async_trait]
impl Ingestion for Nothing {
    async fn ingest(&self, _: &Ingest, _: &LensStore) -> Result<()> {
        Ok(())
    }
}

/// Writes once, then fails.
#[derive(Debug)]
pub struct WriteThenFail;

#[async_trait]
impl Ingestion for WriteThenFail {
    async fn ingest(&self, request: &Ingest, store: &LensStore) -> Result<()> {
        store
            .add(request.content.clone(), &request.source_description)
            .await?;
        Err(Error::NotFound("the process's own failure".into()))
    }
}

/// Signals that it started, waits to be released, then writes straight through.
#[derive(Debug, Default)]
pub struct Gate {
    pub started: Notify,
    pub release: Notify,
}

/// The ingestion process of a [`Gate`].
#[derive(Debug)]
pub struct Gated(pub Arc<Gate>);

#[async_trait]
impl Ingestion for Gated {
    async fn ingest(&self, request: &Ingest, store: &LensStore) -> Result<()> {
        self.0.started.notify_one();
        self.0.release.notified().await;
        store
            .add(request.content.clone(), &request.source_description)
            .await
            .map(|_| ())
    }
}

// ---------------------------------------------------------------- ingest

pub async fn ingest_writes_through_the_lens_to_its_destination_with_lens_provenance(
    make: &impl Factory,
) {
    let (dest, op, w) = (fresh("notes"), fresh("op"), word());
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
    assert_eq!(got.source_kind, SourceKind::Document);
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
    let (dest, op, w) = (fresh("d"), fresh("op"), word());
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
    let mut blank_op = ok();
    blank_op.operator_id = "".into();
    assert_invalid(client.ingest(&blank_op).await, "operator_id");
    let mut private_op = ok();
    private_op.operator_id = "personal/someone".into();
    assert_invalid(client.ingest(&private_op).await, "operator_id");
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
    let (dest, op, w) = (fresh("d"), fresh("op"), word());
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
    assert_eq!(got.source_kind, SourceKind::StructuredRecord);
    let decoded: serde_json::Value = serde_json::from_str(&got.content).unwrap();
    assert_eq!(decoded, record);
}

pub async fn ingestion_processes_make_zero_one_or_many_writes(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh("op"), word());
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
    let (dest, op, w) = (fresh("d"), fresh("op"), word());
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
    let (alice, bob, w) = (fresh("alice"), fresh("bob"), word());
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
    assert_eq!(mine[0].1.source_kind, SourceKind::Conversation);
    let theirs = client.search(&Search::new(&bob, &w)).await.unwrap();
    assert!(
        theirs.is_empty(),
        "another operator's personal graph leaked: {theirs:?}"
    );
}

pub async fn caller_text_cannot_forge_a_writer(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh("op"), word());
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

// ---------------------------------------------------------------- replace

async fn node_names(client: &dyn Client, op: &str, dest: &str, query: &str) -> Vec<String> {
    let mut names: Vec<String> = client
        .search(
            &Search::new(op, query)
                .destinations([dest])
                .nodes(Vec::<String>::new()),
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.hit.as_node().expect("a node").name.clone())
        .collect();
    names.sort();
    names
}

pub async fn replace_swaps_only_the_lenses_own_content(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::replace_graph("systems", dest.clone()))
            .lens(Lens::replace_graph("teams", dest.clone())),
    )
    .await;
    let named = |n: &str| json!({"name": format!("{n} {w}")});
    let first = Graph::new()
        .node("payments", ["System"], named("Payments"))
        .node("ledger", ["System"], named("Ledger"))
        .relationship(
            "payments",
            "DEPENDS_ON",
            "ledger",
            json!({"protocol": "events"}),
        );
    client
        .replace(&Replace::new(&op, "systems", first))
        .await
        .unwrap();
    client
        .replace(&Replace::new(
            &op,
            "teams",
            Graph::new().node("core", ["Team"], named("Core")),
        ))
        .await
        .unwrap();
    assert_eq!(
        node_names(client.as_ref(), &op, &dest, &w).await,
        [
            format!("Core {w}"),
            format!("Ledger {w}"),
            format!("Payments {w}")
        ]
    );

    let second = Graph::new().node("billing", ["System"], named("Billing"));
    client
        .replace(&Replace::new(&op, "systems", second))
        .await
        .unwrap();
    assert_eq!(
        node_names(client.as_ref(), &op, &dest, &w).await,
        [format!("Billing {w}"), format!("Core {w}")]
    );

    client
        .replace(&Replace::new(&op, "systems", Graph::new()))
        .await
        .unwrap();
    assert_eq!(
        node_names(client.as_ref(), &op, &dest, &w).await,
        [format!("Core {w}")]
    );
}

pub async fn replace_rejects_invalid_requests_before_any_mutation(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::replace_graph("systems", dest.clone()))
            .lens(Lens::appending("notes", dest.clone())),
    )
    .await;
    let kept = Graph::new().node("a", ["System"], json!({"name": format!("Kept {w}")}));
    client
        .replace(&Replace::new(&op, "systems", kept))
        .await
        .unwrap();

    let err = client
        .replace(&Replace::new(&op, "notes", Graph::new()))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("accepts only episode ingestion"),
        "{err}"
    );
    assert_invalid(
        client
            .replace(&Replace::new(&op, "nope", Graph::new()))
            .await,
        "lens",
    );
    assert_invalid(
        client
            .replace(&Replace::new(" ", "systems", Graph::new()))
            .await,
        "operator_id",
    );
    let dangling = Graph::new().node("b", ["System"], json!({})).relationship(
        "b",
        "USES",
        "missing",
        json!({}),
    );
    assert_invalid(
        client
            .replace(&Replace::new(&op, "systems", dangling))
            .await,
        "graph.relationships[0].to",
    );
    let duplicate = Graph::new()
        .node("x", ["A"], json!({}))
        .node("x", ["A"], json!({}));
    assert_invalid(
        client
            .replace(&Replace::new(&op, "systems", duplicate))
            .await,
        "graph.nodes[1].id",
    );
    assert_eq!(
        node_names(client.as_ref(), &op, &dest, &w).await,
        [format!("Kept {w}")]
    );
}

// ---------------------------------------------------------------- search

async fn add_through(client: &dyn Client, op: &str, lens: &str, text: String) {
    let written = client
        .ingest(&Ingest::new(fresh("i"), op, lens, Content::document(text)).source_description("t"))
        .await
        .unwrap();
    assert_eq!(written.len(), 1);
}

pub async fn selector_free_search_covers_every_accessible_destination_in_order(
    make: &impl Factory,
) {
    let (a, b, op, w) = (fresh("a"), fresh("b"), fresh("op"), word());
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
    let (a, b, c, op, w) = (fresh("a"), fresh("b"), fresh("c"), fresh("op"), word());
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
    let (a, b, op, w) = (fresh("a"), fresh("b"), fresh("op"), word());
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
    let op = fresh("op");
    let client = make(RuntimeConfig::new().lens(Lens::appending("notes", "global"))).await;
    let s = || Search::new(&op, "anything");
    assert_invalid(client.search(&Search::new(" ", "q")).await, "operator_id");
    assert_invalid(
        client.search(&Search::new("personal/x", "q")).await,
        "operator_id",
    );
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
    let (dest, op, w) = (fresh("d"), fresh("op"), word());
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
            assert_eq!(source.source_description, "PAY-1");
            assert_eq!(source.source_kind, Some(SourceKind::Document));
        }
    }
}

// ---------------------------------------------------------------- memory_add

pub async fn memory_add_returns_at_once_and_writes_in_the_background(make: &impl Factory) {
    let (op, w) = (fresh("op"), word());
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
    assert_eq!(direct.1.source_kind, SourceKind::Document);
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
    let (dest, op, w) = (fresh("d"), fresh("op"), word());
    let client = make(
        RuntimeConfig::new()
            .destination(dest.clone())
            .lens(Lens::appending("broken", dest.clone()).ingestion(FailAtOnce))
            .lens(Lens::replace_graph("systems", dest.clone())),
    )
    .await;
    let add = || MemoryAdd::new(&op, Content::document(format!("{w} note")));
    assert_invalid(
        client
            .memory_add(&MemoryAdd::new(" ", Content::document("x")))
            .await,
        "operator_id",
    );
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

#[async_trait]
impl Ingestion for FailAtOnce {
    async fn ingest(&self, _: &Ingest, _: &LensStore) -> Result<()> {
        Err(Error::NotFound("nothing to do".into()))
    }
}

// ---------------------------------------------------------------- episodes and admin

pub async fn episodes_are_fetched_and_removed_by_destination_and_uuid(make: &impl Factory) {
    let (dest, op, w) = (fresh("d"), fresh("op"), word());
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
    assert_invalid(
        client
            .remove_episode(&EpisodeRef::new("", &dest, written[0].episode))
            .await,
        "operator_id",
    );
}

pub async fn admin_operations_succeed_and_validate(make: &impl Factory) {
    let op = fresh("op");
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
    assert_invalid(
        client.build_communities(&BuildCommunities::new(" ")).await,
        "operator_id",
    );
}

// ---------------------------------------------------------------- runtime snapshots

pub async fn an_operation_keeps_the_snapshot_it_started_with(make: &impl Factory) {
    let (a, b, op, w) = (fresh("a"), fresh("b"), fresh("op"), word());
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
    let (a, op, w) = (fresh("a"), fresh("op"), word());
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
