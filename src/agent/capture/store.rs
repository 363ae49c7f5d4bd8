//! Where accepted turns wait: the durable side of the capture buffer.
//!
//! A [`PendingEntry`] is one session's buffered turns with their binding and the
//! routes still to write, each with the ingestion id minted when it was buffered. The
//! buffer saves an entry (whole, in one statement) before `append` returns, saves it
//! again when one of its routes is written, and removes it once every route is done;
//! a new buffer loads every entry left behind ([`CaptureStore::load`]).
//!
//! * [`FalkorCaptureStore`] keeps entries in the same FalkorDB server as the memory,
//!   in the graph [`CAPTURE_GRAPH`], one `PendingCapture` node per entry (binding and
//!   routes as JSON) and one `PendingTurn` node per turn, so an append writes one turn
//!   however long the session. The embedded server writes its append-only file before it answers, so
//!   an accepted turn survives the process being killed; `appendfsync everysec` means
//!   the machine losing power can still lose the last second.
//! * [`InMemoryCaptureStore`] keeps them in memory: it survives a buffer being
//!   dropped and rebuilt over the same store, not the process.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::CaptureRoute;
use crate::agent::turn::Turn;
use crate::falkordb::FalkorDb;
use crate::graph::store::capture::{
    load_captures, remove_capture, save_capture, save_capture_turn,
};
use crate::storage::OperatorId;
use crate::{Error, Result};

/// The graph holding the FalkorDB store's pending entries.
pub const CAPTURE_GRAPH: &str = "gralkor/capture-buffer";

/// What a session is bound to on its first append.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Binding {
    /// The operator.
    pub operator_id: OperatorId,
    /// The agent's name in the transcript.
    pub agent_name: String,
    /// The human's name in the transcript.
    pub human_name: String,
    /// Where the session's turns go.
    pub route: CaptureRoute,
    /// Who the turns are written as (required when the client has an authorizer:
    /// every write checks `contribute` and records its fragment with this subject as
    /// `shared_by`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<crate::access::Subject>,
    /// Extra extraction instructions for the turns' writes (the capture's, else the
    /// buffer's configured ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_instructions: Option<String>,
}

impl Binding {
    /// Whether turns under `other` are written the same way as under this binding
    /// (same route and instructions), so they may share a buffered entry.
    pub(crate) fn same_writes(&self, other: &Binding) -> bool {
        self.route == other.route && self.custom_instructions == other.custom_instructions
    }
}

/// One write a flush makes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RouteTarget {
    /// A direct write to this Destination.
    Direct(String),
    /// An ingestion through this Lens.
    Lens(String),
}

impl std::fmt::Display for RouteTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RouteTarget::Direct(d) => write!(f, "direct:{d}"),
            RouteTarget::Lens(l) => write!(f, "lens:{l}"),
        }
    }
}

/// A route still to write, with the ingestion id it keeps across every retry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PendingRoute {
    /// Where.
    pub target: RouteTarget,
    /// `capture-<random uuid>`, minted when the route was buffered.
    pub ingestion_id: String,
}

/// One session's buffered turns (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PendingEntry {
    /// The entry's id (a random uuid).
    pub id: String,
    /// The harness's session id.
    pub session_id: String,
    /// Orders entries (microseconds since the epoch when created, made increasing).
    pub seq: i64,
    /// When the entry's first turn was accepted (microseconds since the epoch): the
    /// reference time of what it writes.
    pub accepted_at: i64,
    /// The session's binding.
    pub binding: Binding,
    /// The routes not yet written.
    pub routes: Vec<PendingRoute>,
    /// The turns, in append order.
    pub turns: Vec<Turn>,
}

/// Keeps pending entries across a buffer's life (see the module
/// documentation). Implement it to keep them elsewhere.
#[async_trait]
pub trait CaptureStore: Send + Sync + std::fmt::Debug + 'static {
    /// Creates or replaces the entry with `entry.id`, durably, before returning.
    async fn save(&self, entry: &PendingEntry) -> Result<()>;
    /// Records that `entry` gained its last turn (the entry is new when it has one),
    /// durably, before returning. By default [`save`](Self::save); a store may write
    /// only what is new, so an append costs the same however long the session.
    async fn append_turn(&self, entry: &PendingEntry) -> Result<()> {
        self.save(entry).await
    }
    /// Removes the entry (nothing when there is none).
    async fn remove(&self, id: &str) -> Result<()>;
    /// Every entry, in `seq` order.
    async fn load(&self) -> Result<Vec<PendingEntry>>;
}

/// Pending entries in memory (for the in-memory client and tests).
#[derive(Debug, Default)]
pub struct InMemoryCaptureStore {
    entries: Mutex<BTreeMap<String, PendingEntry>>,
}

impl InMemoryCaptureStore {
    /// An empty store.
    pub fn new() -> InMemoryCaptureStore {
        InMemoryCaptureStore::default()
    }
}

#[async_trait]
impl CaptureStore for InMemoryCaptureStore {
    async fn save(&self, entry: &PendingEntry) -> Result<()> {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(entry.id.clone(), entry.clone());
        Ok(())
    }

    async fn remove(&self, id: &str) -> Result<()> {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        Ok(())
    }

    async fn load(&self) -> Result<Vec<PendingEntry>> {
        let mut all: Vec<PendingEntry> = self
            .entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        all.sort_by_key(|e| e.seq);
        Ok(all)
    }
}

/// Pending entries in a FalkorDB graph (`CAPTURE_GRAPH` unless told otherwise).
#[derive(Debug, Clone)]
pub struct FalkorCaptureStore {
    db: FalkorDb,
    graph: String,
}

impl FalkorCaptureStore {
    /// Entries in `CAPTURE_GRAPH` of `db`'s server.
    pub fn new(db: FalkorDb) -> FalkorCaptureStore {
        FalkorCaptureStore::in_graph(db, CAPTURE_GRAPH)
    }

    /// Entries in another graph (one per buffer that must not see another's).
    pub fn in_graph(db: FalkorDb, graph: impl Into<String>) -> FalkorCaptureStore {
        FalkorCaptureStore {
            db,
            graph: graph.into(),
        }
    }

    /// The graph.
    #[cfg(any(test, feature = "testing"))]
    pub fn graph(&self) -> &str {
        &self.graph
    }
}

/// An entry without its turns (stored on the `PendingCapture` node; each turn is a
/// `PendingTurn` node of its own, so an append writes one turn).
#[derive(Serialize, Deserialize)]
struct Header {
    id: String,
    session_id: String,
    seq: i64,
    accepted_at: i64,
    binding: Binding,
    routes: Vec<PendingRoute>,
}

impl Header {
    fn of(e: &PendingEntry) -> Header {
        Header {
            id: e.id.clone(),
            session_id: e.session_id.clone(),
            seq: e.seq,
            accepted_at: e.accepted_at,
            binding: e.binding.clone(),
            routes: e.routes.clone(),
        }
    }
}

fn json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|e| Error::Protocol(format!("a pending capture did not serialise: {e}")))
}

#[async_trait]
impl CaptureStore for FalkorCaptureStore {
    async fn save(&self, entry: &PendingEntry) -> Result<()> {
        let turns = entry.turns.iter().map(json).collect::<Result<Vec<_>>>()?;
        save_capture(
            &self.db,
            &self.graph,
            &entry.id,
            entry.seq,
            &json(&Header::of(entry))?,
            turns,
        )
        .await
    }

    async fn append_turn(&self, entry: &PendingEntry) -> Result<()> {
        let Some(last) = entry.turns.last() else {
            return self.save(entry).await;
        };
        save_capture_turn(
            &self.db,
            &self.graph,
            &entry.id,
            entry.seq,
            &json(&Header::of(entry))?,
            (entry.turns.len() - 1) as i64,
            &json(last)?,
        )
        .await
    }

    async fn remove(&self, id: &str) -> Result<()> {
        remove_capture(&self.db, &self.graph, id).await
    }

    async fn load(&self) -> Result<Vec<PendingEntry>> {
        // A buffer loads once, when it is made: the moment to index what appends,
        // flushes and removals look entries and turns up by (the store does).
        let bad = |what: &str| {
            Error::Protocol(format!(
                "a pending capture in `{}` is unreadable: {what}",
                self.graph
            ))
        };
        let mut out = Vec::new();
        for stored in load_captures(&self.db, &self.graph).await? {
            let h: Header =
                serde_json::from_str(&stored.header).map_err(|e| bad(&e.to_string()))?;
            let turns = stored
                .turns
                .iter()
                .map(|b| serde_json::from_str(b).map_err(|e| bad(&e.to_string())))
                .collect::<Result<Vec<_>>>()?;
            out.push(PendingEntry {
                id: h.id,
                session_id: h.session_id,
                seq: h.seq,
                accepted_at: h.accepted_at,
                binding: h.binding,
                routes: h.routes,
                turns,
            });
        }
        Ok(out)
    }
}
