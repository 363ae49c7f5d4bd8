//! # gralkor-eval
//!
//! The quality harness of gralkor, kept out of the library: two benchmarks that run
//! offline on the sets shipped in `eval/data/` and against any configured provider.
//!
//! * [`extraction`] — scripted **stories** (episodes with a gold graph: entities with
//!   types, facts with endpoints, relations and times, invalidations, attribution that
//!   must survive) ingested through the real engine ([`gralkor::graph::Engine`] over a
//!   real FalkorDB) with whatever model is configured, scored for entity and fact
//!   precision/recall/F1, invalidation accuracy and timing error, attribution kept,
//!   typed attributes, and the cost per episode. [`extraction::models`] derives a
//!   *perfect* and a deliberately *wrong* scripted model from the gold graphs, so the
//!   scorer itself is tested.
//! * [`retrieval`] — loaders for the LongMemEval and LoCoMo JSON formats, sessions
//!   ingested as transcript episodes (the agent layer's rules) with their dates,
//!   questions run through [`gralkor::agent::recall()`]; recall@k of the evidence
//!   sessions, deterministic answer checks (exact / contains / abstention), and with a
//!   model an answer and an LLM-judge verdict, recall latency p50/p95 and context
//!   tokens.
//!
//! * [`models`] — `gralkor models check`: the configured models against the shipped
//!   stories, reported by pipeline step (schema-valid share, latency, tokens) beside
//!   the extraction scores.
//!
//! Every figure is reproducible: files are read in name order, episodes and questions
//! run one at a time in file order, and the scorers break every tie by position.

#![recursion_limit = "256"]

pub mod error;
pub mod extraction;
pub mod models;
pub mod offline;
pub mod report;
pub mod retrieval;
pub mod setup;
pub mod text;

pub use error::{EvalError, Result};
