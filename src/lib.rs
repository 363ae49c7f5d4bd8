//! # gralkor
//!
//! Long-term memory for AI agents: a temporal knowledge graph in the style of Zep's
//! Graphiti — episodes turned by a language model into entities and facts that carry
//! when they were true and when the system learned them — stored in FalkorDB, with
//! Destinations, Lenses, Reflections, a capture buffer and agent tools on top.
//!
//! The crate is being built bottom-up. What exists today are the two adapters every
//! layer above stands on, the ontology, and the engine's data model and storage.
//!
//! ## Layers
//!
//! Arrows point down only; nothing below knows anything above it.
//!
//! ```text
//!  agent glue   capture buffer · recall · tools                       (planned)
//!  domain       client · destinations · lenses · reflections          (planned)
//!  engine       graph: model · store · extract · dedup · temporal
//!                      add_episode · search · communities            (planned)
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
//! * [`graph`] — the temporal graph's data model and storage: episodes, entities, facts, indices.
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
pub mod destination;
mod error;
pub mod falkordb;
pub mod graph;
pub mod lens;
pub mod llm;
pub mod ontology;
pub mod provenance;
pub mod reflection;
pub mod runtime;

pub use error::{Error, Result};
pub use falkordb::{FalkorConfig, FalkorDb};
