//! Access control: one authorization contract run on every `Authorizer` (the
//! in-memory one and the embedded one against a real FalkorDB), and enforcement in the
//! client logic over both clients. Test names mirror `test-trees/access.md`.

/// Runs each named `async fn(Kind)` of the invoking module as one test per client and
/// authorizer: the twin with the in-memory authorizer, the native client with the
/// embedded one, and (feature `spicedb`) with SpiceDB in process and over gRPC.
macro_rules! every_client {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn in_memory() {
                super::$name(super::Kind::Twin).await
            }
            #[tokio::test]
            async fn native() {
                super::$name(super::Kind::Native).await
            }
            #[cfg(feature = "spicedb")]
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn native_spicedb() {
                super::$name(super::Kind::NativeSpiceDb).await
            }
            #[cfg(feature = "spicedb")]
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn native_spicedb_remote() {
                super::$name(super::Kind::NativeSpiceDbRemote).await
            }
        }
    )*};
}

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
