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

use gralkor::client::{
    BuildCommunities, Client, Content, EpisodeRecord, EpisodeRef, FactRecord, Hit, Ingest,
    MemoryAdd, OperatorId, Replace, Search, SearchResult, SourceKind,
};
use gralkor::lens::{Graph, Ingestion, Lens, LensStore};
use gralkor::provenance::Writer;
use gralkor::runtime::RuntimeConfig;
use gralkor::{Error, Result};
use serde_json::json;
use tokio::sync::Notify;

mod house;
mod ingest;
mod replace;
mod search;
mod validation;
mod writes;

pub use house::*;
pub use ingest::*;
pub use replace::*;
pub use search::*;
pub use validation::*;
pub use writes::*;

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
            an_ingestion_id_is_replay_safe_and_refuses_different_content,
            replace_swaps_only_the_lenses_own_content,
            replace_rejects_invalid_requests_before_any_mutation,
            a_rejected_replace_leaves_the_previous_graph_intact,
            replaced_values_read_back_as_they_were_sent,
            selector_free_search_covers_every_accessible_destination_in_order,
            destination_selector_narrows_keeps_requested_order_and_dedups,
            lens_selector_filters_writers_before_the_per_destination_limit,
            search_rejects_invalid_requests_before_any_query,
            fact_results_carry_sources_with_their_writers,
            a_facts_sources_keep_the_writers_marker,
            memory_add_returns_at_once_and_writes_in_the_background,
            memory_add_validates_at_once_and_logs_background_failures,
            episodes_are_fetched_and_removed_by_destination_and_uuid,
            admin_operations_succeed_and_validate,
            an_operation_keeps_the_snapshot_it_started_with,
            later_operations_use_the_replaced_configuration,
            every_client_refuses_the_same_hostile_fields,
            replaced_nodes_have_the_same_derived_uuid_in_every_client,
            a_lens_with_3_of_500_episodes_in_a_destination_finds_all_3,
            every_call_after_shutdown_fails_at_once_as_closed
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

/// A fresh word that matches nothing else, of letters only: FalkorDB's fulltext index
/// does not match some letter-and-digit tokens exactly (`zq465f8389fa` is found only
/// as a prefix).
pub fn word() -> String {
    uuid::Uuid::new_v4()
        .simple()
        .to_string()
        .bytes()
        .take(12)
        .map(|b| match b {
            b'0'..=b'9' => char::from(b'g' + (b - b'0')),
            other => char::from(other),
        })
        .fold(String::from("zq"), |mut w, c| {
            w.push(c);
            w
        })
}

/// A fresh operator id with a prefix.
pub fn fresh_op(prefix: &str) -> OperatorId {
    OperatorId::new(fresh(prefix)).unwrap()
}

/// A checked operator id.
pub fn oid(id: &str) -> OperatorId {
    OperatorId::new(id).unwrap()
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

impl Ingestion for Nothing {
    async fn ingest(&self, _: &Ingest, _: &LensStore) -> Result<()> {
        Ok(())
    }
}

/// Writes once, then fails.
#[derive(Debug)]
pub struct WriteThenFail;

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

/// Ingests one document through `lens`, expecting one episode.
async fn add_through(client: &dyn Client, op: &OperatorId, lens: &str, text: String) {
    let written = client
        .ingest(&Ingest::new(fresh("i"), op, lens, Content::document(text)).source_description("t"))
        .await
        .unwrap();
    assert_eq!(written.len(), 1);
}
