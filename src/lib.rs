//! # gralkor
//!
//! Long-term memory for AI agents: a temporal knowledge graph in the style of Zep's
//! Graphiti — episodes turned by a language model into entities and facts that carry
//! when they were true and when the system learned them — stored in FalkorDB, with
//! Destinations, Lenses, Reflections, a capture buffer and agent tools on top.
//!
//! Start with [`NativeClient`] (the memory API over FalkorDB and the models, built
//! from [`Config::from_env`]) or [`InMemoryClient`] (its deterministic twin for your
//! tests). Both are one implementation, [`MemoryClient`], over two storages, and both
//! implement the object-safe [`Client`] trait. The [`agent`] layer wraps a client
//! for an agent's harness: turns and transcripts, the durable capture buffer, recall
//! within a deadline, the memory tools and auto-recall. [`reflection`] runs
//! consumer-invoked synthesis, submitted with [`Client::reflect`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
//! use gralkor::client::{Client, Content, Ingest, OperatorId, Search};
//! use gralkor::InMemoryClient;
//!
//! // The twin needs no server; `NativeClient::connect(Config::from_env()?, …)` is the
//! // same API over FalkorDB and the models.
//! let memory = InMemoryClient::new();
//! let ada = OperatorId::new("ada")?;
//! memory
//!     .ingest(&Ingest::new("turn-1", &ada, "personal-chat",
//!         Content::conversation("Ada: I moved to Lisbon in March.")))
//!     .await?;
//! let found = memory.search(&Search::new(&ada, "where does Ada live? Lisbon")).await?;
//! assert_eq!(found[0].destination, "personal");
//! assert_eq!(found[0].hit.as_episode().unwrap().content, "Ada: I moved to Lisbon in March.");
//! memory.shutdown().await?;
//! # Ok(()) }
//! ```
//!
//! ## Rooms and layers
//!
//! Each room imports only from rooms below it (re-exports in this file and the shared
//! [`Error`] aside), so there is no import circle; `tests/client/layers.rs` checks it.
//! The bottom rooms — the [`Error`], `vocab`, [`ontology`] and the [`storage`] port —
//! are a crate of their own, `gralkor-core` (re-exported here at the same paths),
//! which does not depend on this one: the compiler keeps the port from naming the
//! engine or an adapter.
//!
//! ```text
//!  agent     agent                       turns, transcripts, capture buffer, recall,
//!                                        memory tools, auto-recall; presentation
//!  domain    client                      Client trait, MemoryClient<S>, requests, validation
//!            runtime · reflection        the validated snapshot; Reflection declarations
//!            lens                        Lenses, Ingest, Ingestion, LensStore
//!            destination                 named graphs → GraphId for an OperatorId
//!            access                      who may read, write and forget: the schema,
//!                                        the Authorizer trait, embedded and in-memory
//!  engine    graph                       Engine (one handle: db + models), search,
//!                                        communities, store, model, extract, dedup,
//!                                        temporal; NativeStorage (the engine
//!                                        implementing the storage port)
//!  port      storage                     Storage trait, ids, content rule, records,
//!                                        replace payload, InMemoryStorage — over the
//!                                        vocabulary only: no engine, no adapter
//!            provenance                  writer markers and keys
//!            ontology                    entity and relationship types, identifiers
//!  adapters  config                      settings from the environment
//!            falkordb · llm              FalkorDB (embedded server, Cypher, indices);
//!                                        model providers
//!  shared    vocab (internal)            timestamps, source kinds, content and its one
//!                                        rule, derived ids, physical graph names,
//!                                        value rules, status records
//!            retry · cache (internal)    the one retry helper (bounded backoff); the
//!                                        cache directory and its one locked install
//! ```
//!
//! * `vocab` (internal) — the shared vocabulary that the memory API, the storage port
//!   and the engine all import, so none imports another to say it: [`Timestamp`](storage::Timestamp),
//!   [`SourceKind`](storage::SourceKind), the content limit and its one check, the
//!   derived-uuid rule, the physical graph name, what a value sent to the database
//!   may be, and the status records.
//! ### What is public and what is internal
//!
//! The memory API ([`client`], [`agent`], [`lens`], [`reflection`], [`runtime`],
//! [`destination`], [`storage`], [`access`], [`config`]) is the front door. Below it, the
//! engine and its adapters are closed: each exposes only a small, deliberate surface for
//! advanced users, re-exported once, and keeps the rest `pub(crate)`.
//!
//! * [`graph`] — the temporal graph engine. Public: the [`Engine`](graph::Engine) handle
//!   (it owns the database handle and the models, ingests episodes into entities and
//!   facts — durable first, at most four model calls per episode, one atomic commit,
//!   replay-safe, claimed across processes — searches one or many graphs, replaces
//!   owned content, clusters communities, and lists and counts what a graph holds) with
//!   its options, requests ([`AddEpisode`](graph::AddEpisode),
//!   [`SearchRequest`](graph::SearchRequest) and its configuration) and results, and the
//!   data model (episodes, entities, facts, timestamps, source kinds). Internal: the
//!   store (all Cypher lives there and in the adapter), the search methods and
//!   rerankers, extraction, deduplication, temporal rules and prompts.
//! * [`falkordb`] — the only code that speaks the Redis protocol. Public: the cheap
//!   `Clone + Send + Sync` [`FalkorDb`](falkordb::FalkorDb) handle, its
//!   [`FalkorConfig`](falkordb::FalkorConfig) (remote or embedded), and the provisioning
//!   of the embedded server's binaries. Internal: queries, parameters, replies, indices,
//!   the fulltext sanitiser and the embedded server's supervision.
//! * [`llm`] — the only code that speaks HTTP to model providers. Public: the
//!   [`LanguageModel`](llm::LanguageModel), [`Embedder`](llm::Embedder) and
//!   [`Reranker`](llm::Reranker) traits and their requests,
//!   [`ModelConfig`](llm::ModelConfig) and what it builds ([`Models`](llm::Models)), the
//!   provider builders ([`llm::openai`], [`llm::gemini`], the local embedder), the usage
//!   meter and the deterministic [test doubles](llm::doubles). Internal: the limiter,
//!   retries, transports, the schema checker and the listwise reranker.
//! * [`ontology`] — the entity and relationship types an extraction may use, declared
//!   with a builder and checked when built (the identifier rule and reserved names are
//!   internal).
//! * [`access`] — who may read, write and forget: OpenClaw's SpiceDB schema as
//!   gralkor concepts (people and agents, groups = Destinations, memory fragments =
//!   episodes), the object-safe [`Authorizer`](access::Authorizer) trait, the
//!   [embedded](access::EmbeddedAuthorizer) authorizer (relationships in a FalkorDB
//!   graph of their own) and the [in-memory](access::InMemoryAuthorizer) one.
//! * [`config`] — backend and models from the environment (`Config::from_env`).
//!
//! The crate's own tests reach the internals through the `testing` feature, which
//! turns the internal rooms `pub`. It is enabled only by the crate's self
//! dev-dependency, is **not** a semver promise, and no user build (nor the `cli` and
//! `eval` crates) turns it on. `scripts/api-count` counts the public items rustdoc lists.
//! * [`provenance`] — who wrote an episode: the terminal marker of every stored source
//!   description (` [lens: L]`, `reflection:R`, ` [gralkor: direct]`) and the writer
//!   key stored beside it, which searches filter on.
//! * [`storage`] — the seam under the memory API: the [`Storage`](storage::Storage)
//!   trait, [`OperatorId`](storage::OperatorId) and [`GraphId`](storage::GraphId)
//!   (checked once, when made), the one content rule, the records a search returns,
//!   the replace-graph payload, and the in-memory storage. It imports neither the
//!   engine nor an adapter: the engine implements it ([`NativeStorage`]).
//! * [`destination`] — named graphs: `global`, `personal` (→ `personal/<operator id>`)
//!   and literal application names; reserved and retired names.
//! * [`lens`] — appending Lenses (ontology + [ingestion process](lens::Ingestion),
//!   written with a plain `async fn`, writing through a [`LensStore`](lens::LensStore)),
//!   replace-graph Lenses, the [`Ingest`](lens::Ingest) request, the packaged
//!   `personal-chat` Lens.
//! * [`reflection`] — Reflections: declarations and the output type grammar, the
//!   runner (one structured call per step, a bounded tool loop), artefact ids,
//!   delivery with its retry schedule and outcomes, the packaged `generalisations`
//!   and `erl`.
//! * [`runtime`] — the validated, immutable [`Snapshot`](runtime::Snapshot) of
//!   Destinations, Lenses and Reflections, held by a [`Runtime`](runtime::Runtime)
//!   whose replacement is atomic.
//! * [`client`] — the [`Client`] trait (ingest, replace, search, memory_add, episodes,
//!   admin, shutdown), its serialisable requests and results, the validation every
//!   operation runs once, and [`MemoryClient`], the client logic over any storage.
//! * [`agent`] — the `memory_search` tool and its budgeted readable presentation.
//!
//! Behaviour of Destinations, Lenses and provenance is described for users in
//! `DESTINATIONS.md`.
//!
//! Every fallible call returns [`Result`], whose [`Error`] says what went wrong and,
//! through [`Error::is_retryable`], whether trying again can help.
#![deny(missing_docs)]

/// Declares an internal module: `pub` with the `testing` feature (the crate's own
/// tests, not a semver promise), `pub(crate)` without it.
macro_rules! internal_mod {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[cfg(feature = "testing")]
        pub mod $name;
        $(#[$meta])*
        #[cfg(not(feature = "testing"))]
        pub(crate) mod $name;
    };
}

/// Declares an internal item (`pub …`): `pub` with the `testing` feature, `pub(crate)`
/// without it.
macro_rules! internal_item {
    ($(#[$meta:meta])* pub $($item:tt)*) => {
        $(#[$meta])*
        #[cfg(feature = "testing")]
        pub $($item)*
        $(#[$meta])*
        #[cfg(not(feature = "testing"))]
        pub(crate) $($item)*
    };
}

/// Re-exports items only the crate's own tests use: `pub` with the `testing` feature,
/// absent without it (outside the unit tests).
macro_rules! testing_use {
    ($($path:tt)*) => {
        #[cfg(feature = "testing")]
        pub use $($path)*;
        #[cfg(all(test, not(feature = "testing")))]
        #[allow(unused_imports)]
        pub(crate) use $($path)*;
    };
}

/// Re-exports internal items: `pub` with the `testing` feature, `pub(crate)` without
/// it (where the crate itself may not use every name).
macro_rules! internal_use {
    ($($path:tt)*) => {
        #[cfg(feature = "testing")]
        pub use $($path)*;
        #[cfg(not(feature = "testing"))]
        #[allow(unused_imports)]
        pub(crate) use $($path)*;
    };
}

pub mod access;
pub mod agent;
mod cache;
pub mod client;
pub mod config;
pub mod destination;
pub mod falkordb;
pub mod graph;
pub mod lens;
pub mod llm;
pub mod reflection;
mod retry;
pub mod runtime;

// The bottom rooms live in the `gralkor-core` crate, so that the compiler keeps the
// layer rule (the storage port cannot name the engine or an adapter: that crate does
// not depend on this one); their API is re-exported here at its own paths.
#[doc(inline)]
pub use gralkor_core::ontology;
#[doc(inline)]
pub use gralkor_core::storage;
pub(crate) use gralkor_core::vocab;
#[doc(inline)]
pub use gralkor_core::{Error, Result};

/// Who wrote an episode; lives with the storage seam, re-exported at the top.
#[doc(no_inline)]
pub use storage::provenance;

pub use client::{Client, InMemoryClient, MemoryClient, NativeClient};

/// Every Rust example of README.md, compiled (and, unless `no_run`, run) by
/// `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
pub use config::Config;
pub use graph::native_storage::NativeStorage;
