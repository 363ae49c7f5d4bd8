//! Access control: one authorization contract run on every `Authorizer` (the
//! in-memory one and the embedded one against a real FalkorDB), and enforcement in the
//! client logic over both clients. Test names mirror `test-trees/access.md`.

#[path = "../common/mod.rs"]
mod common;

mod client;
mod contract;
mod forget;
mod reflect;
#[cfg(feature = "spicedb")]
mod spicedb_remote;

/// The embedded authorizer's graph can never be a Destination's or an operator's.
#[test]
fn the_access_graph_name_is_reserved() {
    assert!(gralkor::access::ACCESS_GRAPH.starts_with("gralkor/"));
    let err = gralkor::destination::Destination::new("gralkor/access").unwrap_err();
    assert!(
        err.to_string().contains("reserved prefix `gralkor/`"),
        "{err}"
    );
    assert!(gralkor::storage::OperatorId::new("gralkor/access").is_err());
}
