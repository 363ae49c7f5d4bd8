//! What a backend reports of itself: a graph's counts and index health
//! ([`GraphStatus`]), a database server's versions and memory ([`ServerInfo`]).

/// What a graph holds and whether its indices serve (the engine's
/// `Engine::graph_status`, a storage's
/// [`graph_status`](crate::storage::Storage::graph_status)).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct GraphStatus {
    /// Whether the graph exists (its first write creates it); when not, the rest is
    /// empty.
    pub exists: bool,
    /// Episodes stored.
    pub episodes: u64,
    /// Episodes stored but not extracted yet: searchable by their text, and finished
    /// by a later write's extraction or the engine's `resume_pending`.
    pub pending: u64,
    /// Indices the engine keeps that the graph lacks (`range Episodic.uuid`, …).
    pub indices_missing: Vec<String>,
    /// Indices still being built (not `OPERATIONAL`); searches fall back to scans.
    pub indices_building: Vec<String>,
}

impl GraphStatus {
    /// Whether every index the engine keeps serves (trivially so for a graph that
    /// does not exist yet).
    pub fn indices_operational(&self) -> bool {
        self.indices_missing.is_empty() && self.indices_building.is_empty()
    }
}

/// A FalkorDB server's versions and memory (the adapter's
/// `FalkorDb::server_info`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct ServerInfo {
    /// The Redis (or Valkey) version (`redis_version`).
    pub redis_version: Option<String>,
    /// The FalkorDB module's version (`4.16.2`).
    pub falkordb_version: Option<String>,
    /// Memory the server uses (`used_memory`).
    pub used_memory_bytes: Option<u64>,
    /// Its memory limit (`maxmemory`); `Some(0)` means none.
    pub max_memory_bytes: Option<u64>,
}
