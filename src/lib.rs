//! # gralkor
//!
//! Long-term memory for AI agents: a temporal knowledge graph in the style of Zep's
//! Graphiti — episodes turned by a language model into entities and facts that carry
//! when they were true and when the system learned them — stored in FalkorDB, with
//! Destinations, Lenses, Reflections, a capture buffer and agent tools on top.
//!
//! Start with [`NativeClient`] (the memory API over FalkorDB and the models, built
//! from [`Config::from_env`]) or [`InMemoryClient`] (its deterministic twin for your
//! tests); both implement the [`Client`] trait. Reflections, the capture buffer and
//! recall are still to come.
//!
//! ## Layers
//!
//! Arrows point down only; nothing below knows anything above it.
//!
//! ```text
//!  agent glue   memory_search presentation
//!               capture buffer · recall · memory_add tool             (planned)
//!  domain       client (trait, StorageClient, NativeClient, InMemoryClient)
//!               runtime · destination · provenance · lens · reflection (shapes)
//!               Reflection runs                                       (planned)
//!  engine       graph: Engine (ingest) · search · communities
//!                      model · store · extract · dedup · temporal · prompts
//!               ontology
//!  adapters     falkordb (storage, embedded server)    llm (providers, limiter)
//! ```
//!
//! * [`falkordb`] — the only code that speaks the Redis protocol or builds Cypher
//!   text. A cheap `Clone + Send + Sync` [`FalkorDb`] handle runs parameterised queries
//!   on a named graph, passed per call. It runs against a remote FalkorDB server or an
//!   [embedded](falkordb::EmbeddedServer) child server that the crate provisions,
//!   starts, supervises and stops. Also: [indices](falkordb::IndexSpec) and the
//!   [fulltext query sanitiser](falkordb::fulltext_query).
//! * [`llm`] — the only code that speaks HTTP to model providers (OpenAI and
//!   compatible servers, Google Gemini): structured JSON generation against a schema,
//!   embeddings and reranking, behind one limiter and one retry policy, with
//!   deterministic test doubles.
//! * [`ontology`] — the entity and relationship types an extraction may use, declared
//!   with a builder and checked when built (reserved names, duplicates, unknown
//!   endpoints, identifiers), projected to a prompt's type list and to JSON schemas.
//! * [`graph`] — the temporal graph engine: [`graph::Engine`] ingests episodes into
//!   entities and facts (durable first, at most four model calls per episode, one
//!   atomic commit, replay-safe, claimed across processes), [`graph::search`](mod@graph::search) finds
//!   facts, entities, episodes and communities through FalkorDB's own indices, and
//!   [`graph::build_communities`] clusters entities; plus the data model and storage.
//! * [`destination`] — named graphs: `global`, `personal` (→ `personal/<operator id>`)
//!   and literal application names; reserved and retired names.
//! * [`provenance`] — the terminal writer marker of every stored source description
//!   (` [lens: L]`, `reflection:R`, ` [gralkor: direct]`), read back by
//!   [`provenance::parse`]; caller text cannot forge a writer.
//! * [`lens`] — appending Lenses (ontology + [ingestion process](lens::Ingestion)
//!   writing through a [`LensStore`](lens::LensStore)), replace-graph Lenses and their
//!   validated [`Graph`](lens::Graph), the packaged `personal-chat` Lens.
//! * [`reflection`] — Reflection declarations (chain-of-thought shape only).
//! * [`runtime`] — the validated, immutable [`Snapshot`](runtime::Snapshot) of
//!   Destinations, Lenses and Reflections, held by a [`Runtime`](runtime::Runtime)
//!   whose replacement is atomic.
//! * [`client`] — the object-safe [`Client`] trait (ingest, replace, search,
//!   memory_add, episodes, admin), its request and result values, the validation every
//!   implementation shares, [`StorageClient`](client::StorageClient) (the client logic
//!   over any [`Storage`](client::Storage)), [`NativeClient`] over FalkorDB and the
//!   engine, and [`InMemoryClient`], the deterministic twin for tests.
//! * [`agent`] — the `memory_search` tool and its budgeted readable presentation.
//! * [`config`] — backend and models from the environment (`Config::from_env`).
//!
//! Behaviour of Destinations, Lenses and provenance is described for users in
//! `DESTINATIONS.md`.
//!
//! Every fallible call returns [`Result`], whose [`Error`] says what went wrong and,
//! through [`Error::is_retryable`], whether trying again can help.
//!
//! ## Example
//!
//! ```no_run
//! # async fn run() -> gralkor::Result<()> {
//! use gralkor::falkordb::{EmbeddedConfig, FalkorConfig, Params};
//! use gralkor::FalkorDb;
//!
//! // Starts (and on first use provisions) an embedded FalkorDB in ./memory.
//! let db = FalkorDb::connect(FalkorConfig::embedded(EmbeddedConfig::new("./memory"))).await?;
//! db.query("global", "MERGE (:Entity {name: $name})", &Params::new().set("name", "Ada")).await?;
//! let res = db.ro_query("global", "MATCH (e:Entity) RETURN e.name AS name", &Params::new()).await?;
//! assert_eq!(res.get(0, "name").and_then(|v| v.as_str()), Some("Ada"));
//! db.shutdown().await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod agent;
pub mod client;
pub mod config;
pub mod destination;
mod error;
pub mod falkordb;
pub mod graph;
pub mod lens;
pub mod llm;
pub mod ontology;
pub mod provenance;
pub mod reflection;
mod retry;
pub mod runtime;

pub use client::{Client, InMemoryClient, NativeClient};
pub use config::Config;
pub use error::{Error, Result};
pub use falkordb::{FalkorConfig, FalkorDb};
