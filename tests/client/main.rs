//! The memory API: the `Client` contract run on both clients (`in_memory`, `native`),
//! hostile input through both side by side, and the layer rule of the crate.
//!
//! One test binary per layer (`cargo test --test client`), so `cargo test` links fewer
//! binaries and starts fewer servers; each module is one former test file.

#[path = "../common/mod.rs"]
mod common;
#[macro_use]
mod client_contract;

mod as_of;
mod capture;
mod hostile;
mod in_memory;
mod json;
mod layers;
mod native;
mod openclaw;
mod recall;
mod reflection;
mod tools;
mod transcript;
