//! `Community` nodes: clusters of related entities. Members are `HAS_MEMBER` links,
//! written by [`save_community_members`](super::links::save_community_members), or
//! all at once with the communities by [`replace_communities`].
//!
//! The reads [`current_fact_links`] and [`entity_profiles`] and the write
//! [`replace_communities`] serve [`build_communities`](crate::graph::build_communities).

use std::collections::BTreeMap;

use uuid::Uuid;

use super::links::link_uuid;
use super::{Row, check_dimensions, rows, uuids};
#[cfg(any(test, feature = "testing"))]
use super::{ENTITY_COLUMNS, entity_from_row};
use crate::falkordb::{FalkorDb, IndexEntity, Params, QueryStats, Value};
use crate::graph::model::Community;
#[cfg(any(test, feature = "testing"))]
use crate::graph::model::EntityNode;
use crate::{Error, Result};

#[cfg(any(test, feature = "testing"))]
/// Writes `communities` in one statement: `MERGE` on each uuid, properties set to the
/// given values, `name_embedding` as a `vecf32`. An embedding whose length differs from
/// the graph's `Community.name_embedding` vector index fails the call with
/// `communities[i].name_embedding` before anything is written. Saving the same
/// communities again creates no node.
pub async fn save_communities(
    db: &FalkorDb,
    graph: &str,
    communities: &[Community],
) -> Result<QueryStats> {
    if communities.is_empty() {
        return Ok(QueryStats::default());
    }
    check_dimensions(
        db,
        graph,
        IndexEntity::Node("Community".into()),
        "name_embedding",
        "communities",
        communities.iter().map(|c| c.name_embedding.as_ref()),
    )
    .await?;
    let rows: Vec<Value> = communities
        .iter()
        .map(|c| {
            let row: BTreeMap<String, Value> = [
                ("uuid", Value::String(c.uuid.to_string())),
                ("name", c.name.as_str().into()),
                ("summary", c.summary.as_str().into()),
                ("name_embedding", c.name_embedding.clone().into()),
                ("created_at", Value::Int(c.created_at.0)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
            Value::Map(row)
        })
        .collect();
    let res = db
        .query(
            graph,
            &format!(
                "UNWIND $rows AS r \
                 MERGE (c:Community {{uuid: r.uuid}}) \
                 SET c.name = r.name, c.summary = r.summary, c.created_at = r.created_at, \
                     c.name_embedding = CASE WHEN r.name_embedding IS NULL THEN NULL \
                                        ELSE vecf32(r.name_embedding) END {}",
                super::debt::add_clause(
                    super::VectorIndex::Community,
                    "size($rows)",
                    "count(*) AS written"
                )
            ),
            &Params::new().set("rows", Value::List(rows)),
        )
        .await?;
    Ok(res.stats)
}

#[cfg(any(test, feature = "testing"))]
/// The communities with the given uuids that exist, in the order asked for.
pub async fn get_communities(
    db: &FalkorDb,
    graph: &str,
    uuids_: &[Uuid],
) -> Result<Vec<Community>> {
    if uuids_.is_empty() {
        return Ok(Vec::new());
    }
    let res = db
        .ro_query(
            graph,
            "UNWIND $uuids AS u \
             MATCH (c:Community {uuid: u}) \
             RETURN c.uuid AS uuid, c.name AS name, c.summary AS summary, \
                    c.name_embedding AS name_embedding, c.created_at AS created_at",
            &Params::new().set("uuids", uuids(uuids_)),
        )
        .await?;
    rows(res)
        .iter()
        .map(|row| {
            let r = Row::new("community", row);
            Ok(Community {
                uuid: r.uuid("uuid")?,
                name: r.str("name")?.to_owned(),
                summary: r.str("summary")?.to_owned(),
                name_embedding: r.embedding("name_embedding")?,
                created_at: r.ts("created_at")?,
            })
        })
        .collect()
}

#[cfg(any(test, feature = "testing"))]
/// The members of community `community`, by name then uuid (empty if it does not
/// exist).
pub async fn get_community_members(
    db: &FalkorDb,
    graph: &str,
    community: Uuid,
) -> Result<Vec<EntityNode>> {
    let res = db
        .ro_query(
            graph,
            &format!(
                "MATCH (:Community {{uuid: $uuid}})-[:HAS_MEMBER]->(n:Entity) \
                 RETURN {ENTITY_COLUMNS} ORDER BY n.name, n.uuid"
            ),
            &Params::new().set("uuid", community.to_string()),
        )
        .await?;
    rows(res).iter().map(entity_from_row).collect()
}

/// Two entities linked by current facts: `facts` is the number of `RELATES_TO`
/// relationships from `source` to `target` whose `expired_at` is not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FactLink {
    /// The entity the facts start from.
    pub source: Uuid,
    /// The entity the facts point to.
    pub target: Uuid,
    /// How many current facts go from `source` to `target` (at least 1).
    pub facts: u64,
}

/// Every ordered pair of distinct entities linked by current facts (`expired_at` not
/// set; a fact that ended in the world but was never retired still counts), with the
/// number of such facts, in one read. Facts from an entity to itself are left out.
/// Order: by source, then target.
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
/// use gralkor::graph::store::communities::current_fact_links;
///
/// for link in current_fact_links(&db, "notes").await? {
///     println!("{} -> {}: {} facts", link.source, link.target, link.facts);
/// }
/// # Ok(()) }
/// ```
pub async fn current_fact_links(db: &FalkorDb, graph: &str) -> Result<Vec<FactLink>> {
    let res = db
        .ro_query(
            graph,
            "MATCH (a:Entity)-[f:RELATES_TO]->(b:Entity) \
             WHERE f.expired_at IS NULL AND a.uuid <> b.uuid \
             RETURN a.uuid AS source, b.uuid AS target, count(f) AS facts \
             ORDER BY source, target",
            &Params::new(),
        )
        .await?;
    rows(res)
        .iter()
        .map(|row| {
            let r = Row::new("fact link", row);
            Ok(FactLink {
                source: r.uuid("source")?,
                target: r.uuid("target")?,
                facts: row
                    .get("facts")
                    .and_then(Value::as_int)
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or_else(|| r.bad("facts"))?,
            })
        })
        .collect()
}

/// What a community summary reads of an entity: its name and summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntityProfile {
    /// Identity.
    pub uuid: Uuid,
    /// The name.
    pub name: String,
    /// The summary (empty when there is none).
    pub summary: String,
}

/// The name and summary of each entity of `uuids_` that exists, in one read, in the
/// order asked for. Lighter than [`get_entities`](super::get_entities): no labels,
/// attributes or embeddings travel.
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb, alice: uuid::Uuid) -> gralkor::Result<()> {
/// use gralkor::graph::store::communities::entity_profiles;
///
/// let profiles = entity_profiles(&db, "notes", &[alice]).await?;
/// assert!(profiles.len() <= 1);
/// # Ok(()) }
/// ```
pub async fn entity_profiles(
    db: &FalkorDb,
    graph: &str,
    uuids_: &[Uuid],
) -> Result<Vec<EntityProfile>> {
    if uuids_.is_empty() {
        return Ok(Vec::new());
    }
    let res = db
        .ro_query(
            graph,
            "UNWIND $uuids AS u MATCH (n:Entity {uuid: u}) \
             RETURN n.uuid AS uuid, n.name AS name, n.summary AS summary",
            &Params::new().set("uuids", uuids(uuids_)),
        )
        .await?;
    rows(res)
        .iter()
        .map(|row| {
            let r = Row::new("entity", row);
            Ok(EntityProfile {
                uuid: r.uuid("uuid")?,
                name: r.str("name")?.to_owned(),
                summary: row
                    .get("summary")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            })
        })
        .collect()
}

/// How many `Community` nodes `graph` holds (0 for a graph that does not exist).
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb) -> gralkor::Result<()> {
/// let n = gralkor::graph::store::communities::count_communities(&db, "notes").await?;
/// println!("{n} communities");
/// # Ok(()) }
/// ```
pub async fn count_communities(db: &FalkorDb, graph: &str) -> Result<usize> {
    let res = db
        .ro_query(
            graph,
            "MATCH (c:Community) RETURN count(c) AS c",
            &Params::new(),
        )
        .await?;
    res.get(0, "c")
        .and_then(Value::as_int)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| Error::Protocol("community count missing from the reply".into()))
}

/// Replaces every community of `graph` with `communities` (each with its member
/// entities' uuids) in **one statement**: the old `Community` nodes are deleted with
/// their `HAS_MEMBER` links, then the new nodes and links are created
/// (`HAS_MEMBER` uuids from [`link_uuid`], `created_at` the community's).
///
/// Atomic: FalkorDB runs each query as one unit under the graph's write lock, so a
/// reader sees the old communities or the new ones, never a mix or none; and a query
/// that fails while running is rolled back (its undo log restores what it deleted and
/// removes what it created — `a_statement_that_fails_midway_is_rolled_back` in
/// `tests/graph/communities.rs` shows it).
///
/// Embeddings are checked first against the graph's `Community.name_embedding`
/// vector index (`communities[i].name_embedding` names a wrong length, before
/// anything is written). A member uuid with no entity behind it (deleted since it was
/// read) is skipped; the returned [`QueryStats`] count what was done:
/// `nodes_deleted` old communities, `nodes_created` new ones, `relationships_created`
/// member links.
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb, alice: uuid::Uuid, acme: uuid::Uuid) -> gralkor::Result<()> {
/// use gralkor::graph::{Community, Timestamp};
/// use gralkor::graph::store::communities::replace_communities;
///
/// let community = Community {
///     uuid: uuid::Uuid::new_v4(),
///     name: "Acme staff".into(),
///     summary: "Alice works at Acme.".into(),
///     name_embedding: None,
///     created_at: Timestamp::now(),
/// };
/// let stats = replace_communities(&db, "notes", &[(community, vec![alice, acme])]).await?;
/// assert_eq!(stats.nodes_created, 1);
/// # Ok(()) }
/// ```
pub async fn replace_communities(
    db: &FalkorDb,
    graph: &str,
    communities: &[(Community, Vec<Uuid>)],
) -> Result<QueryStats> {
    check_dimensions(
        db,
        graph,
        IndexEntity::Node("Community".into()),
        "name_embedding",
        "communities",
        communities.iter().map(|(c, _)| c.name_embedding.as_ref()),
    )
    .await?;
    let rows: Vec<Value> = communities
        .iter()
        .map(|(c, members)| {
            let members: Vec<Value> = members
                .iter()
                .map(|m| {
                    Value::Map(BTreeMap::from([
                        (
                            "uuid".to_owned(),
                            Value::String(link_uuid("HAS_MEMBER", c.uuid, *m).to_string()),
                        ),
                        ("entity".to_owned(), Value::String(m.to_string())),
                    ]))
                })
                .collect();
            let row: BTreeMap<String, Value> = [
                ("uuid", Value::String(c.uuid.to_string())),
                ("name", c.name.as_str().into()),
                ("summary", c.summary.as_str().into()),
                ("name_embedding", c.name_embedding.clone().into()),
                ("created_at", Value::Int(c.created_at.0)),
                ("members", Value::List(members)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
            Value::Map(row)
        })
        .collect();
    let res = db
        .query(
            graph,
            "OPTIONAL MATCH (old:Community) DETACH DELETE old \
             WITH count(*) AS swept \
             UNWIND $rows AS r \
             CREATE (c:Community {uuid: r.uuid}) \
             SET c.name = r.name, c.summary = r.summary, c.created_at = r.created_at, \
                 c.name_embedding = CASE WHEN r.name_embedding IS NULL THEN NULL \
                                    ELSE vecf32(r.name_embedding) END \
             WITH c, r \
             UNWIND r.members AS m \
             MATCH (n:Entity {uuid: m.entity}) \
             CREATE (c)-[:HAS_MEMBER {uuid: m.uuid, created_at: r.created_at}]->(n)",
            &Params::new().set("rows", Value::List(rows)),
        )
        .await?;
    Ok(res.stats)
}
