//! Ids: the one derivation of every uuid that must be the same whenever the same
//! thing is written again ([`derived_uuid`]), and the rule naming a logical graph's
//! physical FalkorDB graph ([`physical_graph_name`]).

use uuid::Uuid;

use crate::{Error, Result};

/// Prefix of every physical graph name gralkor creates.
pub const GRAPH_PREFIX: &str = "g_";

/// A stable uuid derived from a namespace and parts: the first 16 bytes of SHA-256 over
/// `gralkor/<namespace>/` followed by each part's length (8 bytes, little endian) and
/// bytes, marked as an RFC 9562 version 8 uuid. The one derivation of every uuid
/// that must be the same whenever the same thing is written again (links, communities,
/// replayed episodes, replace-graph nodes); the length prefixes keep `["ab", "c"]` and
/// `["a", "bc"]` apart.
///
/// ```
/// use gralkor::graph::model::derived_uuid;
///
/// let a = derived_uuid("owned", &[b"global", b"payments"]);
/// assert_eq!(a, derived_uuid("owned", &[b"global", b"payments"]));
/// assert_ne!(a, derived_uuid("owned", &[b"globalp", b"ayments"]));
/// assert_ne!(a, derived_uuid("episode", &[b"global", b"payments"]));
/// assert_eq!(a.get_version_num(), 8);
/// ```
pub fn derived_uuid(namespace: &str, parts: &[&[u8]]) -> Uuid {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"gralkor/");
    h.update(namespace.as_bytes());
    h.update(b"/");
    for part in parts {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&h.finalize()[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// The physical FalkorDB graph name for a logical graph id: `g_` followed by the
/// lowercase hex of the id's UTF-8 bytes.
///
/// ```
/// use gralkor::falkordb::physical_graph_name;
///
/// assert_eq!(physical_graph_name("global").unwrap(), "g_676c6f62616c");
/// assert!(physical_graph_name("  ").is_err());
/// ```
pub fn physical_graph_name(graph: &str) -> Result<String> {
    if graph.trim().is_empty() {
        return Err(Error::invalid("graph", "must not be blank"));
    }
    Ok(format!("{GRAPH_PREFIX}{}", hex::encode(graph.as_bytes())))
}
