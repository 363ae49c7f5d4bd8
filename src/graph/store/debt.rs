//! Vector index debt: the stale entries FalkorDB 4.16 leaves in a vector index, counted
//! so that searches look past them and the engine rebuilds the index before they pile up.
//!
//! Measured on a real server (one node with a vector among 30, `k` = the number of
//! live nodes): every *statement* that updates a record carrying an indexed vector —
//! any property, a label, the vector itself or the same vector again; several `SET`s or
//! rows on one record in one statement count once — leaves one stale entry where the
//! record's vector was. Creating the record and setting its vector in one statement
//! leaves none; adding relationships to it leaves none; removing the property does not
//! clear the stale entries; dropping and recreating the index does. A stale entry takes
//! a result slot and yields no row, so after `s` updates a query for the `k` nearest
//! returns `k - s` rows and misses the record altogether once `s ≥ k` — an entity that
//! every episode mentions (and so re-summarises) vanished from a limit-5 search after a
//! handful of mentions, and from the resolver's candidate search soon after.
//!
//! Setting a vector only when it changes does not help (any update leaves the entry), so
//! every writer adds, in the same statement, an upper bound of the records it updated
//! to a per-graph counter node (`(:GralkorIndexDebt {index, stale})`); every vector
//! query asks the index for `k + stale` neighbours, which holds at least `k` live ones;
//! and once `stale` reaches [`EngineOptions::vector_rebuild_threshold`] the engine drops
//! and recreates that index and subtracts what the rebuild purged.
//!
//! [`EngineOptions::vector_rebuild_threshold`]: crate::graph::EngineOptions::vector_rebuild_threshold

use crate::falkordb::{FalkorDb, IndexEntity, IndexKind, Params, Value};
use crate::{Error, Result};

/// The label of the counter nodes.
pub(crate) const DEBT_LABEL: &str = "GralkorIndexDebt";

/// A vector index the engine keeps, and whose stale entries it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VectorIndex {
    /// `Entity.name_embedding`.
    Entity,
    /// `RELATES_TO.fact_embedding`.
    Fact,
    /// `Community.name_embedding`.
    Community,
    /// `EpisodeEmbedding.embedding` (episode content embeddings; only deletions leave
    /// stale entries there, see [`store`](super)'s episodes).
    Episode,
}

impl VectorIndex {
    /// Every vector index of the engine.
    pub const ALL: [VectorIndex; 4] = [
        VectorIndex::Entity,
        VectorIndex::Fact,
        VectorIndex::Community,
        VectorIndex::Episode,
    ];

    /// The counter node's `index` key.
    pub(crate) const fn key(self) -> &'static str {
        match self {
            VectorIndex::Entity => "entity",
            VectorIndex::Fact => "fact",
            VectorIndex::Community => "community",
            VectorIndex::Episode => "episode",
        }
    }

    fn entity(self) -> IndexEntity {
        match self {
            VectorIndex::Entity => IndexEntity::Node("Entity".into()),
            VectorIndex::Fact => IndexEntity::Relationship("RELATES_TO".into()),
            VectorIndex::Community => IndexEntity::Node("Community".into()),
            VectorIndex::Episode => IndexEntity::Node(super::EPISODE_EMBEDDING_LABEL.into()),
        }
    }

    fn property(self) -> &'static str {
        match self {
            VectorIndex::Fact => "fact_embedding",
            VectorIndex::Entity | VectorIndex::Community => "name_embedding",
            VectorIndex::Episode => "embedding",
        }
    }

    fn from_key(key: &str) -> Option<VectorIndex> {
        VectorIndex::ALL.into_iter().find(|i| i.key() == key)
    }
}

/// Clauses for the middle of a write statement (after an updating clause; `carry` are
/// the variables the statement goes on with) that add `amount`, an integer expression,
/// to `index`'s stale count, and bind the counter node to `debt_<key>` (null on a graph
/// [`prepare`] never ran on, which then counts nothing).
pub(crate) fn add_clause(index: VectorIndex, amount: &str, carry: &str) -> String {
    let key = index.key();
    format!(
        "WITH {carry} OPTIONAL MATCH (debt_{key}:{DEBT_LABEL} {{index: '{key}'}}) \
         FOREACH (_ IN CASE WHEN debt_{key} IS NULL OR {amount} = 0 THEN [] ELSE [1] END | \
           SET debt_{key}.stale = coalesce(debt_{key}.stale, 0) + {amount}) "
    )
}

/// Creates the counter nodes of `graph` that do not exist yet (part of preparing a
/// graph, with its indices), so that writers only ever update them.
pub(crate) async fn prepare(db: &FalkorDb, graph: &str) -> Result<()> {
    let keys: Vec<Value> = VectorIndex::ALL
        .iter()
        .map(|i| Value::String(i.key().to_owned()))
        .collect();
    db.query(
        graph,
        &format!(
            "UNWIND $keys AS key MERGE (d:{DEBT_LABEL} {{index: key}}) \
             SET d.stale = coalesce(d.stale, 0)"
        ),
        &Params::new().set("keys", Value::List(keys)),
    )
    .await?;
    Ok(())
}

/// Clauses that open a statement (or a subquery) binding `stale`, the stale count of
/// `index`, to one row: a vector query then asks for `$k + stale` neighbours.
pub(crate) fn stale_clause(index: VectorIndex) -> String {
    format!(
        "OPTIONAL MATCH (debt:{DEBT_LABEL} {{index: '{key}'}}) \
         WITH coalesce(max(debt.stale), 0) AS stale ",
        key = index.key()
    )
}

/// The stale count of every engine vector index of `graph` that has one.
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
/// use gralkor::graph::store::{VectorIndex, vector_debt};
///
/// for (index, stale) in vector_debt(&db, "notes").await? {
///     println!("{index:?}: {stale} stale entries");
/// }
/// # Ok(()) }
/// ```
pub async fn vector_debt(db: &FalkorDb, graph: &str) -> Result<Vec<(VectorIndex, i64)>> {
    let res = db
        .ro_query(
            graph,
            &format!("MATCH (d:{DEBT_LABEL}) RETURN d.index AS index, d.stale AS stale"),
            &Params::new(),
        )
        .await?;
    let mut out: Vec<(VectorIndex, i64)> = res
        .into_maps()
        .iter()
        .filter_map(|row| {
            let index = VectorIndex::from_key(row.get("index")?.as_str()?)?;
            Some((index, row.get("stale").and_then(Value::as_int).unwrap_or(0)))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Drops and recreates `index` on `graph` (waiting until it answers again), which
/// purges its stale entries, then subtracts the count it had before the rebuild.
/// Returns `false` when the graph has no such index.
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
/// use gralkor::graph::store::{VectorIndex, rebuild_vector_index};
///
/// rebuild_vector_index(&db, "notes", VectorIndex::Entity).await?;
/// # Ok(()) }
/// ```
#[tracing::instrument(skip(db))]
pub async fn rebuild_vector_index(db: &FalkorDb, graph: &str, index: VectorIndex) -> Result<bool> {
    let before = vector_debt(db, graph)
        .await?
        .into_iter()
        .find_map(|(i, s)| (i == index).then_some(s))
        .unwrap_or(0);
    let entity = index.entity();
    let Some(info) = db.list_indices(graph).await?.into_iter().find(|i| {
        i.entity == entity
            && i.property == index.property()
            && matches!(i.kind, IndexKind::Vector { .. })
    }) else {
        return Ok(false);
    };
    tracing::info!(
        graph,
        ?index,
        stale = before,
        "rebuilding vector index to purge stale entries"
    );
    db.rebuild_index(graph, info).await?;
    db.query(
        graph,
        &format!(
            "MATCH (debt:{DEBT_LABEL} {{index: $key}}) \
             SET debt.stale = CASE WHEN debt.stale > $before THEN debt.stale - $before ELSE 0 END"
        ),
        &Params::new().set("key", index.key()).set("before", before),
    )
    .await
    .map_err(|e| match e {
        Error::Query { graph, message } => Error::Query {
            graph,
            message: format!("resetting the vector index debt: {message}"),
        },
        other => other,
    })?;
    Ok(true)
}
