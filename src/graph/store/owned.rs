//! Owned content: nodes and relationships that belong to one owner (a replace-graph
//! Lens) through the `_gralkor_lens` property, replaced as a whole.
//!
//! Owned nodes are keyed by the owner's own ids, stored as `_gralkor_id`; their labels
//! and relationship types are the owner's, checked to be identifiers before any
//! statement is sent. Nothing here touches content without the owner's mark.
//!
//! [`replace_owned`] runs four steps in order — delete the owner's relationships,
//! delete its nodes, create the nodes, create the relationships — as separate
//! statements: **not a transaction**. If a later step fails, the earlier ones stay
//! applied and the error is returned; running the same replacement again repairs it.

use std::collections::BTreeMap;

use crate::falkordb::{FalkorDb, Params, Value, is_identifier};
use crate::{Error, Result};

/// The ownership property.
pub const OWNER_KEY: &str = "_gralkor_lens";
/// The property holding an owned node's id.
pub const OWNED_ID_KEY: &str = "_gralkor_id";

/// An owned node: its id within the owner's graph, labels and properties.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedNode {
    /// The owner's id for it.
    pub id: String,
    /// Labels (identifiers).
    pub labels: Vec<String>,
    /// Properties (without the two reserved keys).
    pub properties: BTreeMap<String, Value>,
}

/// An owned relationship between two owned nodes, by their ids.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedRelationship {
    /// Source node id.
    pub from: String,
    /// Relationship type (an identifier).
    pub rel_type: String,
    /// Target node id.
    pub to: String,
    /// Properties (without the reserved key).
    pub properties: BTreeMap<String, Value>,
}

/// What a replacement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplaceCounts {
    /// Nodes removed (their relationships went with them).
    pub nodes_deleted: u64,
    /// Relationships removed.
    pub relationships_deleted: u64,
    /// Nodes created.
    pub nodes_created: u64,
    /// Relationships created.
    pub relationships_created: u64,
}

fn check_names(nodes: &[OwnedNode], relationships: &[OwnedRelationship]) -> Result<()> {
    for (i, n) in nodes.iter().enumerate() {
        for (j, l) in n.labels.iter().enumerate() {
            if !is_identifier(l) {
                return Err(Error::invalid(
                    format!("nodes[{i}].labels[{j}]"),
                    "must be an identifier",
                ));
            }
        }
    }
    for (i, r) in relationships.iter().enumerate() {
        if !is_identifier(&r.rel_type) {
            return Err(Error::invalid(
                format!("relationships[{i}].type"),
                "must be an identifier",
            ));
        }
    }
    Ok(())
}

fn props(map: &BTreeMap<String, Value>) -> Value {
    Value::Map(
        map.iter()
            .filter(|(k, _)| k.as_str() != OWNER_KEY && k.as_str() != OWNED_ID_KEY)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// Replaces everything `owner` owns in `graph` with `nodes` and `relationships`
/// (empty: clears it). Labels and types are checked first; relationship endpoints must
/// be among `nodes` (callers validate the whole graph before calling). Not
/// transactional: see the module docs.
///
/// ```no_run
/// # async fn run(db: gralkor::FalkorDb) -> gralkor::Result<()> {
/// use std::collections::BTreeMap;
/// use gralkor::graph::{replace_owned, OwnedNode};
///
/// let node = OwnedNode { id: "payments".into(), labels: vec!["System".into()],
///                        properties: BTreeMap::from([("name".into(), "Payments".into())]) };
/// replace_owned(&db, "global", "systems", &[node], &[]).await?;
/// # Ok(()) }
/// ```
pub async fn replace_owned(
    db: &FalkorDb,
    graph: &str,
    owner: &str,
    nodes: &[OwnedNode],
    relationships: &[OwnedRelationship],
) -> Result<ReplaceCounts> {
    if owner.trim().is_empty() {
        return Err(Error::invalid("owner", "must not be blank"));
    }
    check_names(nodes, relationships)?;
    let mut counts = ReplaceCounts::default();
    let by_owner = Params::new().set("owner", owner);
    let res = db
        .query(
            graph,
            &format!("MATCH ()-[r]->() WHERE r.{OWNER_KEY} = $owner DELETE r"),
            &by_owner,
        )
        .await?;
    counts.relationships_deleted = res.stats.relationships_deleted;
    let res = db
        .query(
            graph,
            &format!("MATCH (n) WHERE n.{OWNER_KEY} = $owner DETACH DELETE n"),
            &by_owner,
        )
        .await?;
    counts.nodes_deleted = res.stats.nodes_deleted;
    counts.relationships_deleted += res.stats.relationships_deleted;

    // Labels and types cannot be parameters: one statement per label set and type.
    let mut by_labels: BTreeMap<Vec<String>, Vec<Value>> = BTreeMap::new();
    for n in nodes {
        by_labels
            .entry(n.labels.clone())
            .or_default()
            .push(Value::Map(BTreeMap::from([
                ("id".to_string(), Value::from(n.id.as_str())),
                ("props".to_string(), props(&n.properties)),
            ])));
    }
    for (labels, batch) in by_labels {
        let label_text: String = labels.iter().map(|l| format!(":`{l}`")).collect();
        let res = db
            .query(
                graph,
                &format!(
                    "UNWIND $batch AS b CREATE (n{label_text}) SET n = b.props, \
                     n.{OWNER_KEY} = $owner, n.{OWNED_ID_KEY} = b.id"
                ),
                &Params::new().set("batch", batch).set("owner", owner),
            )
            .await?;
        counts.nodes_created += res.stats.nodes_created;
    }
    let mut by_type: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for r in relationships {
        by_type
            .entry(&r.rel_type)
            .or_default()
            .push(Value::Map(BTreeMap::from([
                ("from".to_string(), Value::from(r.from.as_str())),
                ("to".to_string(), Value::from(r.to.as_str())),
                ("props".to_string(), props(&r.properties)),
            ])));
    }
    for (rel_type, batch) in by_type {
        let res = db
            .query(
                graph,
                &format!(
                    "UNWIND $batch AS b \
                     MATCH (a) WHERE a.{OWNER_KEY} = $owner AND a.{OWNED_ID_KEY} = b.from \
                     MATCH (z) WHERE z.{OWNER_KEY} = $owner AND z.{OWNED_ID_KEY} = b.to \
                     CREATE (a)-[r:`{rel_type}`]->(z) SET r = b.props, r.{OWNER_KEY} = $owner"
                ),
                &Params::new().set("batch", batch).set("owner", owner),
            )
            .await?;
        counts.relationships_created += res.stats.relationships_created;
    }
    Ok(counts)
}

/// A node from a row with `id`, `labels` and `props` columns.
fn owned_node(row: &BTreeMap<String, Value>) -> OwnedNode {
    OwnedNode {
        id: row
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        labels: row
            .get("labels")
            .and_then(Value::as_list)
            .map(|l| {
                l.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
        properties: owned_props(row.get("props")),
    }
}

fn owned_props(v: Option<&Value>) -> BTreeMap<String, Value> {
    let mut m = v.and_then(Value::as_map).cloned().unwrap_or_default();
    m.remove(OWNER_KEY);
    m.remove(OWNED_ID_KEY);
    m
}

/// Everything `owner` owns in `graph`: nodes sorted by id, relationships sorted by
/// (from, type, to).
///
/// ```no_run
/// # async fn run(db: gralkor::FalkorDb) -> gralkor::Result<()> {
/// let (nodes, relationships) = gralkor::graph::get_owned(&db, "global", "systems").await?;
/// # let _ = (nodes, relationships); Ok(()) }
/// ```
pub async fn get_owned(
    db: &FalkorDb,
    graph: &str,
    owner: &str,
) -> Result<(Vec<OwnedNode>, Vec<OwnedRelationship>)> {
    let by_owner = Params::new().set("owner", owner);
    let res = db
        .ro_query(
            graph,
            &format!(
                "MATCH (n) WHERE n.{OWNER_KEY} = $owner \
                 RETURN n.{OWNED_ID_KEY} AS id, labels(n) AS labels, properties(n) AS props \
                 ORDER BY id"
            ),
            &by_owner,
        )
        .await?;
    let nodes = res.into_maps().iter().map(owned_node).collect();
    let res = db
        .ro_query(
            graph,
            &format!(
                "MATCH (a)-[r]->(z) WHERE r.{OWNER_KEY} = $owner \
                 RETURN a.{OWNED_ID_KEY} AS from, type(r) AS type, z.{OWNED_ID_KEY} AS to, \
                 properties(r) AS props ORDER BY from, type, to"
            ),
            &by_owner,
        )
        .await?;
    let relationships = res
        .into_maps()
        .into_iter()
        .map(|row| OwnedRelationship {
            from: row
                .get("from")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            rel_type: row
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            to: row
                .get("to")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            properties: owned_props(row.get("props")),
        })
        .collect();
    Ok((nodes, relationships))
}

/// Every Lens-owned node of `graph` with its owner, ordered by owner then id: what a
/// node search looks through besides extracted entities. One read.
///
/// ```no_run
/// # async fn run(db: gralkor::FalkorDb) -> gralkor::Result<()> {
/// for (lens, node) in gralkor::graph::store::owned::all_owned_nodes(&db, "global").await? {
///     println!("{lens}: {}", node.id);
/// }
/// # Ok(()) }
/// ```
pub async fn all_owned_nodes(db: &FalkorDb, graph: &str) -> Result<Vec<(String, OwnedNode)>> {
    let res = db
        .ro_query(
            graph,
            &format!(
                "MATCH (n) WHERE n.{OWNER_KEY} IS NOT NULL \
                 RETURN n.{OWNER_KEY} AS owner, n.{OWNED_ID_KEY} AS id, labels(n) AS labels, \
                        properties(n) AS props \
                 ORDER BY owner, id"
            ),
            &Params::new(),
        )
        .await?;
    Ok(res
        .into_maps()
        .into_iter()
        .map(|row| {
            let owner = row
                .get("owner")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            (owner, owned_node(&row))
        })
        .collect())
}
