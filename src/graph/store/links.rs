//! `MENTIONS` (episode → entity) and `HAS_MEMBER` (community → entity) relationships.
//!
//! A link carries only `uuid` and `created_at`. Its uuid is derived from its kind and
//! its two endpoints ([`link_uuid`]), so saving the same link again — from a retry, a
//! resumed episode or another process — `MERGE`s onto the stored one and creates
//! nothing; `created_at` is set only when the link is created.

#[cfg(any(test, feature = "testing"))]
use std::collections::BTreeMap;

use uuid::Uuid;

use super::{ENTITY_COLUMNS, entity_from_row, rows};
#[cfg(any(test, feature = "testing"))]
use super::{EPISODE_COLUMNS, episode_from_row, missing_nodes};
use crate::falkordb::{FalkorDb, Params};
#[cfg(any(test, feature = "testing"))]
use crate::falkordb::{QueryStats, Value};
use crate::graph::model::EntityNode;
#[cfg(any(test, feature = "testing"))]
use crate::graph::model::{Episode, Timestamp};
use crate::Result;
#[cfg(any(test, feature = "testing"))]
use crate::Error;

/// The deterministic uuid of the `rel_type` link from `from` to `to`:
/// [`derived_uuid`](crate::graph::model::derived_uuid) with namespace `rel_type` over
/// the 16 bytes of `from` and of `to`. The same link always gets
/// the same uuid; distinct links (by kind, direction or endpoints) get distinct ones.
///
/// ```
/// use gralkor::graph::link_uuid;
/// let (a, b) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
/// assert_eq!(link_uuid("MENTIONS", a, b), link_uuid("MENTIONS", a, b));
/// assert_ne!(link_uuid("MENTIONS", a, b), link_uuid("MENTIONS", b, a));
/// assert_ne!(link_uuid("MENTIONS", a, b), link_uuid("HAS_MEMBER", a, b));
/// assert_eq!(link_uuid("MENTIONS", a, b).get_version_num(), 8);
/// ```
pub fn link_uuid(rel_type: &str, from: Uuid, to: Uuid) -> Uuid {
    crate::graph::model::derived_uuid(rel_type, &[from.as_bytes(), to.as_bytes()])
}

#[cfg(any(test, feature = "testing"))]
/// Writes `(from:from_label {uuid: from})-[:rel_type {uuid, created_at}]->(:Entity)` for
/// every entity of `to`, after checking (with reads only) that every endpoint exists.
async fn save_links(
    db: &FalkorDb,
    graph: &str,
    (from_label, rel_type, what): (&str, &str, &str),
    from: Uuid,
    to: &[Uuid],
) -> Result<QueryStats> {
    if to.is_empty() {
        return Ok(QueryStats::default());
    }
    if let Some(m) = missing_nodes(db, graph, from_label, &[from]).await?.first() {
        return Err(Error::NotFound(format!("{what} {m}")));
    }
    if let Some(m) = missing_nodes(db, graph, "Entity", to).await?.first() {
        return Err(Error::NotFound(format!(
            "entity {m}, linked from {what} {from}"
        )));
    }
    let now = Timestamp::now();
    let rows: Vec<Value> = to
        .iter()
        .map(|e| {
            Value::Map(BTreeMap::from([
                (
                    "uuid".to_owned(),
                    Value::String(link_uuid(rel_type, from, *e).to_string()),
                ),
                ("entity".to_owned(), Value::String(e.to_string())),
            ]))
        })
        .collect();
    let res = db
        .query(
            graph,
            &format!(
                "MATCH (a:{from_label} {{uuid: $from}}) \
                 UNWIND $rows AS r \
                 MATCH (n:Entity {{uuid: r.entity}}) \
                 MERGE (a)-[l:{rel_type} {{uuid: r.uuid}}]->(n) \
                 ON CREATE SET l.created_at = $created_at"
            ),
            &Params::new()
                .set("from", from.to_string())
                .set("rows", Value::List(rows))
                .set("created_at", now.0),
        )
        .await?;
    Ok(res.stats)
}

#[cfg(any(test, feature = "testing"))]
/// Records that episode `episode` mentions each of `entities`:
/// `(:Episodic)-[:MENTIONS {uuid, created_at}]->(:Entity)`, uuid from [`link_uuid`].
/// If the episode or any entity does not exist, fails with [`Error::NotFound`] before
/// anything is written. Saving the same mentions again creates no relationship.
pub async fn save_mentions(
    db: &FalkorDb,
    graph: &str,
    episode: Uuid,
    entities: &[Uuid],
) -> Result<QueryStats> {
    save_links(
        db,
        graph,
        ("Episodic", "MENTIONS", "episode"),
        episode,
        entities,
    )
    .await
}

#[cfg(any(test, feature = "testing"))]
/// Makes each of `entities` a member of community `community`:
/// `(:Community)-[:HAS_MEMBER {uuid, created_at}]->(:Entity)`, uuid from [`link_uuid`].
/// If the community or any entity does not exist, fails with [`Error::NotFound`] before
/// anything is written. Saving the same members again creates no relationship.
pub async fn save_community_members(
    db: &FalkorDb,
    graph: &str,
    community: Uuid,
    entities: &[Uuid],
) -> Result<QueryStats> {
    save_links(
        db,
        graph,
        ("Community", "HAS_MEMBER", "community"),
        community,
        entities,
    )
    .await
}

/// The entities episode `episode` mentions, by name then uuid (empty if the episode
/// does not exist).
pub async fn get_mentioned_entities(
    db: &FalkorDb,
    graph: &str,
    episode: Uuid,
) -> Result<Vec<EntityNode>> {
    let res = db
        .ro_query(
            graph,
            &format!(
                "MATCH (:Episodic {{uuid: $uuid}})-[:MENTIONS]->(n:Entity) \
                 RETURN {ENTITY_COLUMNS} ORDER BY n.name, n.uuid"
            ),
            &Params::new().set("uuid", episode.to_string()),
        )
        .await?;
    rows(res).iter().map(entity_from_row).collect()
}

#[cfg(any(test, feature = "testing"))]
/// The episodes that mention entity `entity`, oldest reference time first (ties by
/// uuid); empty if the entity does not exist.
pub async fn get_episodes_mentioning(
    db: &FalkorDb,
    graph: &str,
    entity: Uuid,
) -> Result<Vec<Episode>> {
    let res = db
        .ro_query(
            graph,
            &format!(
                "MATCH (e:Episodic)-[:MENTIONS]->(:Entity {{uuid: $uuid}}) \
                 RETURN {EPISODE_COLUMNS} ORDER BY e.valid_at, e.uuid"
            ),
            &Params::new().set("uuid", entity.to_string()),
        )
        .await?;
    rows(res).iter().map(episode_from_row).collect()
}
