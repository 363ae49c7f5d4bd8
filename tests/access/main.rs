//! Access control: one authorization contract run on every `Authorizer` (the
//! in-memory one and the embedded one against a real FalkorDB), and enforcement in the
//! client logic over both clients. Test names mirror `test-trees/access.md`.

#[path = "../common/mod.rs"]
mod common;

mod client;
mod contract;
mod forget;
