//! `Community` nodes: clusters of related entities. Members are `HAS_MEMBER` links,
//! written by [`save_community_members`](super::links::save_community_members).

use std::collections::BTreeMap;

use uuid::Uuid;

use super::{ENTITY_COLUMNS, Row, check_dimensions, entity_from_row, rows, uuids};
use crate::Result;
use crate::falkordb::{FalkorDb, IndexEntity, Params, QueryStats, Value};
use crate::graph::model::{Community, EntityNode};

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
            "UNWIND $rows AS r \
             MERGE (c:Community {uuid: r.uuid}) \
             SET c.name = r.name, c.summary = r.summary, c.created_at = r.created_at, \
                 c.name_embedding = CASE WHEN r.name_embedding IS NULL THEN NULL \
                                    ELSE vecf32(r.name_embedding) END",
            &Params::new().set("rows", Value::List(rows)),
        )
        .await?;
    Ok(res.stats)
}

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
