//! Facts (`RELATES_TO` relationships between entities): write, read, and their rows.

use std::collections::BTreeMap;
#[cfg(any(test, feature = "testing"))]
use std::collections::BTreeSet;

use uuid::Uuid;

use super::codec::{Row, json_text, rows, ts, uuids};
#[cfg(any(test, feature = "testing"))]
use super::debt::{self, VectorIndex};
#[cfg(any(test, feature = "testing"))]
use super::write::check_dimensions;
#[cfg(any(test, feature = "testing"))]
use super::write::missing_nodes;
use crate::falkordb::{FalkorDb, Params, Value};
#[cfg(any(test, feature = "testing"))]
use crate::falkordb::{IndexEntity, QueryStats};
use crate::graph::model::EntityEdge;
use crate::Result;
#[cfg(any(test, feature = "testing"))]
use crate::Error;

/// The `SET` clause writing a [`fact_row`] bound to `r` onto the fact `f`.
pub(crate) const SET_FACT: &str = "SET f.name = r.name, f.fact = r.fact, f.episodes = r.episodes, \
     f.valid_at = r.valid_at, f.invalid_at = r.invalid_at, \
     f.expired_at = r.expired_at, f.created_at = r.created_at, \
     f.attributes = r.attributes, f.source_uuid = r.source, f.target_uuid = r.target, \
     f.fact_embedding = CASE WHEN r.fact_embedding IS NULL THEN NULL \
                        ELSE vecf32(r.fact_embedding) END";

/// A fact's properties and endpoints as one parameter map.
pub(crate) fn fact_row(f: &EntityEdge) -> Value {
    Value::Map(BTreeMap::from([
        ("uuid".to_owned(), Value::String(f.uuid.to_string())),
        (
            "source".to_owned(),
            Value::String(f.source_uuid.to_string()),
        ),
        (
            "target".to_owned(),
            Value::String(f.target_uuid.to_string()),
        ),
        ("name".to_owned(), f.name.as_str().into()),
        ("fact".to_owned(), f.fact.as_str().into()),
        ("fact_embedding".to_owned(), f.fact_embedding.clone().into()),
        ("episodes".to_owned(), uuids(&f.episodes)),
        ("valid_at".to_owned(), ts(f.valid_at)),
        ("invalid_at".to_owned(), ts(f.invalid_at)),
        ("expired_at".to_owned(), ts(f.expired_at)),
        ("created_at".to_owned(), Value::Int(f.created_at.0)),
        ("attributes".to_owned(), json_text(&f.attributes)),
    ]))
}

#[cfg(any(test, feature = "testing"))]
/// Writes `facts` in one statement: `MERGE (s)-[:RELATES_TO {uuid}]->(t)` between the
/// existing endpoint entities, properties set to the given values. Before anything is
/// written, an endpoint that does not exist fails the call with [`Error::NotFound`],
/// and a uuid already stored between other endpoints (a fact cannot move) with
/// [`Error::InvalidInput`]. Returns the statistics: saving the same facts again creates
/// no relationship.
pub async fn save_facts(db: &FalkorDb, graph: &str, facts: &[EntityEdge]) -> Result<QueryStats> {
    if facts.is_empty() {
        return Ok(QueryStats::default());
    }
    check_dimensions(
        db,
        graph,
        IndexEntity::Relationship("RELATES_TO".into()),
        "fact_embedding",
        "facts",
        facts.iter().map(|f| f.fact_embedding.as_ref()),
    )
    .await?;
    let endpoints: BTreeSet<Uuid> = facts
        .iter()
        .flat_map(|f| [f.source_uuid, f.target_uuid])
        .collect();
    let endpoints: Vec<Uuid> = endpoints.into_iter().collect();
    if let Some(missing) = missing_nodes(db, graph, "Entity", &endpoints)
        .await?
        .first()
    {
        return Err(Error::NotFound(format!(
            "entity {missing}, an endpoint of a fact to save"
        )));
    }
    // One read for both: a uuid already stored between other endpoints (a fact cannot
    // move), and how many of the facts are stored already — only those leave a stale
    // vector entry when written (one created with its vector leaves none).
    let stored = db
        .ro_query(
            graph,
            "UNWIND $rows AS r \
             MATCH (s)-[f:RELATES_TO]->(t) WHERE f.uuid = r.uuid \
             RETURN count(DISTINCT f) AS stored, \
                    collect(CASE WHEN s.uuid <> r.source OR t.uuid <> r.target \
                            THEN r.uuid END) AS moved",
            &Params::new().set(
                "rows",
                Value::List(
                    facts
                        .iter()
                        .map(|f| {
                            Value::Map(BTreeMap::from([
                                ("uuid".to_owned(), Value::String(f.uuid.to_string())),
                                (
                                    "source".to_owned(),
                                    Value::String(f.source_uuid.to_string()),
                                ),
                                (
                                    "target".to_owned(),
                                    Value::String(f.target_uuid.to_string()),
                                ),
                            ]))
                        })
                        .collect(),
                ),
            ),
        )
        .await?;
    let moved = stored
        .get(0, "moved")
        .and_then(Value::as_list)
        .and_then(|l| l.first())
        .and_then(Value::as_str);
    if let Some(moved) = moved {
        let i = facts
            .iter()
            .position(|f| f.uuid.to_string() == moved)
            .unwrap_or_default();
        return Err(Error::invalid(
            format!("facts[{i}]"),
            "must keep the source and target of the stored fact with the same uuid",
        ));
    }
    let stored = stored.get(0, "stored").and_then(Value::as_int).unwrap_or(0);
    let rows: Vec<Value> = facts.iter().map(fact_row).collect();
    let res = db
        .query(
            graph,
            &format!(
                "UNWIND $rows AS r \
                 MATCH (s:Entity {{uuid: r.source}}) \
                 MATCH (t:Entity {{uuid: r.target}}) \
                 MERGE (s)-[f:RELATES_TO {{uuid: r.uuid}}]->(t) \
                 {SET_FACT} {}",
                debt::add_clause(VectorIndex::Fact, "$updated", "count(*) AS written")
            ),
            &Params::new()
                .set("rows", Value::List(rows))
                .set("updated", stored),
        )
        .await?;
    Ok(res.stats)
}

/// The facts with the given uuids that exist, in the order asked for.
pub async fn get_facts(db: &FalkorDb, graph: &str, uuids_: &[Uuid]) -> Result<Vec<EntityEdge>> {
    if uuids_.is_empty() {
        return Ok(Vec::new());
    }
    let res = db
        .ro_query(
            graph,
            // Endpoints stay unlabelled: with `(s:Entity)-[f:RELATES_TO {uuid: u}]->(t:Entity)`
            // under UNWIND, FalkorDB was seen to drop a row (the reverse-direction fact of
            // `facts_round_trip_exactly_and_resaving_creates_nothing`).
            &format!(
                "UNWIND $uuids AS u \
                 MATCH ()-[f:RELATES_TO {{uuid: u}}]->() \
                 RETURN {FACT_COLUMNS}"
            ),
            &Params::new().set("uuids", uuids(uuids_)),
        )
        .await?;
    rows(res).iter().map(fact_from_row).collect()
}

/// The columns [`fact_from_row`] reads, for the fact bound to `f`, embedding included.
pub(crate) const FACT_COLUMNS: &str = "f.uuid AS uuid, startNode(f).uuid AS source, \
     endNode(f).uuid AS target, f.name AS name, f.fact AS fact, \
     f.fact_embedding AS fact_embedding, f.episodes AS episodes, f.valid_at AS valid_at, \
     f.invalid_at AS invalid_at, f.expired_at AS expired_at, f.created_at AS created_at, \
     f.attributes AS attributes";

/// A fact from a row of [`FACT_COLUMNS`] (a missing embedding column reads as none).
pub(crate) fn fact_from_row(row: &BTreeMap<String, Value>) -> Result<EntityEdge> {
    let r = Row::new("fact", row);
    Ok(EntityEdge {
        uuid: r.uuid("uuid")?,
        source_uuid: r.uuid("source")?,
        target_uuid: r.uuid("target")?,
        name: r.str("name")?.to_owned(),
        fact: r.str("fact")?.to_owned(),
        fact_embedding: r.embedding("fact_embedding")?,
        episodes: r.uuid_list("episodes")?,
        valid_at: r.opt_ts("valid_at")?,
        invalid_at: r.opt_ts("invalid_at")?,
        expired_at: r.opt_ts("expired_at")?,
        created_at: r.ts("created_at")?,
        attributes: r.json("attributes")?,
    })
}
