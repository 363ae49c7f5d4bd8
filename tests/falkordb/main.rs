//! The storage adapter against real FalkorDB servers: the embedded server, graphs and
//! pipelines, indices and the fulltext sanitiser, values.
//!
//! One test binary per layer (`cargo test --test falkordb`), so `cargo test` links fewer
//! binaries and starts fewer servers; each module is one former test file.

// A former test file keeps its inner module of the same name (`graphs::graphs::…`),
// so the test names the behaviour trees use stay as they were.
#![allow(clippy::module_inception)]

#[path = "../common/mod.rs"]
mod common;

mod embedded;
mod graphs;
mod indices;
mod values;
