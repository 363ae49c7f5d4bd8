//! Owned content: nodes and relationships that belong to one owner (a replace-graph
//! Lens) through the `_gralkor_lens` property, replaced as a whole.
//!
//! Owned nodes are keyed by the owner's own ids, stored as `_gralkor_id`; their labels
//! and relationship types are the owner's, checked to be identifiers before any
//! statement is sent. Nothing here touches content without the owner's mark.
//!
//! [`replace_owned`] is **one statement**, so the owner's graph is never left half
//! replaced: a server that dies before the statement finished never logged it, and a
//! statement the server refuses part way (a unique constraint, a runtime error) is
//! rolled back. The statement first creates the new generation — marked with a fresh
//! `_gralkor_gen` — and only then deletes the owner's older content, so the only work
//! a refusal can roll back is creation: FalkorDB 4.16 restores *deleted* nodes
//! wrongly (their relationships come back attached to the wrong nodes), and nothing
//! after the deletions can fail. One consequence: a unique constraint on a label or
//! type of the owner's graph sees the old and the new generation side by side, so a
//! replacement that keeps a constrained value is refused, and nothing changes.

use std::collections::BTreeMap;

use crate::falkordb::{FalkorDb, Params, Value, is_identifier};
use crate::{Error, Result};

pub use crate::vocab::OWNER_KEY;
/// The property holding an owned node's id.
pub const OWNED_ID_KEY: &str = "_gralkor_id";
/// The property marking the generation (the replacement) that wrote owned content.
const GENERATION_KEY: &str = "_gralkor_gen";

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
            .filter(|(k, _)| ![OWNER_KEY, OWNED_ID_KEY, GENERATION_KEY].contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// Replaces everything `owner` owns in `graph` with `nodes` and `relationships`
/// (empty: clears it), atomically: one statement that creates the new generation and
/// then deletes the older content (see the module docs). Labels and types are checked
/// first; relationship endpoints must be among `nodes` (callers validate the whole
/// graph before calling). On error nothing changed.
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
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
    let generation = uuid::Uuid::new_v4().to_string();
    let mut params = Params::new()
        .set("owner", owner)
        .set("gen", generation.as_str());
    // Parts follow one another through `WITH count(*)`, which yields exactly one row
    // whatever a part matched or unwound, so every later part runs (an empty batch
    // creates nothing). Creation first, deletion last: see the module docs.
    let mut parts: Vec<String> = Vec::new();
    // Labels and types cannot be parameters: one part per label set and type.
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
    for (i, (labels, batch)) in by_labels.into_iter().enumerate() {
        let label_text: String = labels.iter().map(|l| format!(":`{l}`")).collect();
        parts.push(format!(
            "UNWIND $nodes{i} AS b CREATE (n{label_text}) SET n = b.props, \
             n.{OWNER_KEY} = $owner, n.{OWNED_ID_KEY} = b.id, n.{GENERATION_KEY} = $gen \
             WITH count(*) AS created_n{i}"
        ));
        params.insert(format!("nodes{i}"), batch);
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
    let new_node = |v: &str, end: &str| {
        format!(
            "MATCH ({v}) WHERE {v}.{GENERATION_KEY} = $gen AND {v}.{OWNER_KEY} = $owner \
             AND {v}.{OWNED_ID_KEY} = b.{end}"
        )
    };
    for (i, (rel_type, batch)) in by_type.into_iter().enumerate() {
        parts.push(format!(
            "UNWIND $rels{i} AS b {} {} \
             CREATE (a)-[r:`{rel_type}`]->(z) SET r = b.props, r.{OWNER_KEY} = $owner, \
             r.{GENERATION_KEY} = $gen WITH count(*) AS created_r{i}",
            new_node("a", "from"),
            new_node("z", "to"),
        ));
        params.insert(format!("rels{i}"), batch);
    }
    let older = |v: &str| {
        format!(
            "{v}.{OWNER_KEY} = $owner AND \
             ({v}.{GENERATION_KEY} IS NULL OR {v}.{GENERATION_KEY} <> $gen)"
        )
    };
    parts.push(format!(
        "MATCH ()-[r]->() WHERE {} DELETE r WITH count(*) AS deleted_r",
        older("r")
    ));
    parts.push(format!(
        "MATCH (n) WHERE {} DETACH DELETE n WITH count(*) AS deleted_n",
        older("n")
    ));
    parts.push("RETURN 0 AS done".to_string());
    let stats = db.query(graph, &parts.join(" "), &params).await?.stats;
    Ok(ReplaceCounts {
        nodes_deleted: stats.nodes_deleted,
        relationships_deleted: stats.relationships_deleted,
        nodes_created: stats.nodes_created,
        relationships_created: stats.relationships_created,
    })
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
    m.remove(GENERATION_KEY);
    m
}

#[cfg(any(test, feature = "testing"))]
/// Everything `owner` owns in `graph`: nodes sorted by id, relationships sorted by
/// (from, type, to).
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
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
/// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
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
