//! The engine against this binary's one shared FalkorDB server: store, candidates,
//! dedup, extraction, ingestion and claims, owned content, search, temporal rules,
//! communities, triplets. (The two tests that kill or must never restart their server
//! run as their own binaries: `graph_quarantine`, `graph_hostile_names`.)
//!
//! One test binary per layer (`cargo test --test graph`), so `cargo test` links fewer
//! binaries and starts fewer servers; each module is one former test file.

// A former test file keeps its inner module of the same name (`graphs::graphs::…`),
// so the test names the behaviour trees use stay as they were.
#![allow(clippy::module_inception)]

#[path = "../common/mod.rs"]
mod common;
mod graph_search_support;

mod candidates;
mod combined;
mod communities;
mod dedup;
mod dump;
mod episode_vectors;
mod extract;
mod index_rebuild;
mod ingest;
mod ingest_claims;
mod owned;
mod restatements;
mod search;
mod search_filters;
mod search_outage;
mod search_rerank;
mod store;
mod temporal;
mod triplet;
