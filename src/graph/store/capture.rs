//! The capture buffer's durable side: one `PendingCapture` node per pending entry
//! (`id`, `seq` and its header as JSON text) and one `PendingTurn` node per buffered
//! turn (`entry`, its position `n` and its body as JSON text), in a graph of their
//! own. The buffer (`agent::capture`) owns what the texts mean; these statements
//! only keep them, so an append writes one turn however long the session.

use std::collections::BTreeMap;

use crate::falkordb::{FalkorDb, IndexSpec, Params, Value};
use crate::{Error, Result};

/// One pending entry as kept: its id, its order among entries, its header and its
/// turns' bodies in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredCapture {
    /// The entry's id.
    pub id: String,
    /// Its order among entries.
    pub seq: i64,
    /// The header (JSON text).
    pub header: String,
    /// The turns' bodies (JSON texts), by position.
    pub turns: Vec<String>,
}

/// Saves an entry whole, replacing its header and its turns at the same positions,
/// in one statement.
pub(crate) async fn save_capture(
    db: &FalkorDb,
    graph: &str,
    id: &str,
    seq: i64,
    header: &str,
    turns: Vec<String>,
) -> Result<()> {
    let turns: Vec<Value> = turns.into_iter().map(Value::String).collect();
    db.query(
        graph,
        "MERGE (e:PendingCapture {id: $id}) SET e.seq = $seq, e.header = $header \
         WITH e UNWIND range(0, size($turns) - 1) AS n \
         MERGE (t:PendingTurn {entry: $id, n: n}) SET t.body = $turns[n]",
        &Params::new()
            .set("id", id)
            .set("seq", seq)
            .set("header", header)
            .set("turns", Value::List(turns)),
    )
    .await
    .map(|_| ())
}

/// Saves an entry's header and its turn at position `n`, in one statement.
pub(crate) async fn save_capture_turn(
    db: &FalkorDb,
    graph: &str,
    id: &str,
    seq: i64,
    header: &str,
    n: i64,
    body: &str,
) -> Result<()> {
    db.query(
        graph,
        "MERGE (e:PendingCapture {id: $id}) SET e.seq = $seq, e.header = $header \
         MERGE (t:PendingTurn {entry: $id, n: $n}) SET t.body = $body",
        &Params::new()
            .set("id", id)
            .set("seq", seq)
            .set("header", header)
            .set("n", n)
            .set("body", body),
    )
    .await
    .map(|_| ())
}

/// Removes an entry: its header first (turns without one are never loaded), then
/// its turns.
pub(crate) async fn remove_capture(db: &FalkorDb, graph: &str, id: &str) -> Result<()> {
    let params = Params::new().set("id", id);
    db.query(
        graph,
        "MATCH (e:PendingCapture {id: $id}) DELETE e",
        &params,
    )
    .await?;
    db.query(
        graph,
        "MATCH (t:PendingTurn {entry: $id}) DELETE t",
        &params,
    )
    .await
    .map(|_| ())
}

/// Every entry kept in `graph`, ordered by `(seq, id)`, after indexing what saves
/// and removals look entries and turns up by (idempotent). An entry row without a
/// header is an [`Error::Protocol`].
pub(crate) async fn load_captures(db: &FalkorDb, graph: &str) -> Result<Vec<StoredCapture>> {
    db.create_indices(
        graph,
        &[
            IndexSpec::range_nodes("PendingCapture", ["id"]),
            IndexSpec::range_nodes("PendingTurn", ["entry"]),
        ],
    )
    .await?;
    let res = db
        .ro_query(
            graph,
            "MATCH (e:PendingCapture) \
             OPTIONAL MATCH (t:PendingTurn {entry: e.id}) \
             RETURN e.seq AS seq, e.id AS id, e.header AS header, t.n AS n, t.body AS body",
            &Params::new(),
        )
        .await?;
    // (seq, id) → header and the turns by position.
    type Rows = BTreeMap<(i64, String), (String, BTreeMap<i64, String>)>;
    let mut entries: Rows = BTreeMap::new();
    for row in res.into_maps() {
        let (Some(Value::Int(seq)), Some(Value::String(id)), Some(Value::String(header))) =
            (row.get("seq"), row.get("id"), row.get("header"))
        else {
            return Err(Error::Protocol(format!(
                "a pending capture in `{graph}` is unreadable: no header"
            )));
        };
        let slot = entries
            .entry((*seq, id.clone()))
            .or_insert_with(|| (header.clone(), BTreeMap::new()));
        if let (Some(Value::Int(n)), Some(Value::String(body))) = (row.get("n"), row.get("body")) {
            slot.1.insert(*n, body.clone());
        }
    }
    Ok(entries
        .into_iter()
        .map(|((seq, id), (header, turns))| StoredCapture {
            id,
            seq,
            header,
            turns: turns.into_values().collect(),
        })
        .collect())
}
