//! Entities (`Entity` nodes with ontology labels): write, read, and their rows.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::codec::{Row, json_text, rows, uuids};
#[cfg(any(test, feature = "testing"))]
use super::debt::{self, VectorIndex};
#[cfg(any(test, feature = "testing"))]
use super::write::check_dimensions;
#[cfg(any(test, feature = "testing"))]
use super::write::run_all;
use crate::falkordb::{FalkorDb, Params, Value, is_identifier};
#[cfg(any(test, feature = "testing"))]
use crate::falkordb::{IndexEntity, QueryStats};
use crate::graph::dedup::normalize_name;
use crate::graph::model::EntityNode;
use crate::ontology::RESERVED_LABELS;
use crate::{Error, Result};

/// The `SET` clause writing an [`entity_row`] bound to `r` onto the entity `n`.
pub(crate) const SET_ENTITY: &str = "SET n.name = r.name, n.name_key = r.name_key, n.summary = r.summary, \
     n.attributes = r.attributes, n.created_at = r.created_at, \
     n.name_embedding = CASE WHEN r.name_embedding IS NULL THEN NULL \
                        ELSE vecf32(r.name_embedding) END";

/// An entity's properties as one parameter map (labels travel separately).
pub(crate) fn entity_row(e: &EntityNode) -> Value {
    Value::Map(BTreeMap::from([
        ("uuid".to_owned(), Value::String(e.uuid.to_string())),
        ("name".to_owned(), e.name.as_str().into()),
        ("name_key".to_owned(), normalize_name(&e.name).into()),
        ("summary".to_owned(), e.summary.as_str().into()),
        ("attributes".to_owned(), json_text(&e.attributes)),
        ("name_embedding".to_owned(), e.name_embedding.clone().into()),
        ("created_at".to_owned(), Value::Int(e.created_at.0)),
    ]))
}

/// Checks an entity's extra labels: identifiers, not one of gralkor's own labels.
pub(crate) fn checked_labels(i: usize, e: &EntityNode) -> Result<Vec<String>> {
    let mut labels = BTreeSet::new();
    for label in &e.labels {
        let field = format!("entities[{i}].labels");
        if !is_identifier(label) {
            return Err(Error::invalid(
                field,
                "must be identifiers: an ASCII letter or `_` followed by ASCII letters, digits or `_`",
            ));
        }
        if label == "Entity" {
            continue;
        }
        if RESERVED_LABELS
            .iter()
            .any(|r| r.eq_ignore_ascii_case(label))
        {
            return Err(Error::invalid(
                field,
                "must not be `Episodic`, `Community` or `Entity` spelt in another case: \
                 those are gralkor's own labels",
            ));
        }
        labels.insert(label.clone());
    }
    Ok(labels.into_iter().collect())
}

#[cfg(any(test, feature = "testing"))]
/// Writes `entities` in one round trip: `MERGE` on each uuid, extra labels added (never
/// removed), properties set to the given values. Every label is checked first; an
/// invalid one fails the call with [`Error::InvalidInput`] before anything is written.
/// Returns the summed statistics: saving the same entities again creates no node.
pub async fn save_entities(
    db: &FalkorDb,
    graph: &str,
    entities: &[EntityNode],
) -> Result<QueryStats> {
    let labels: Vec<Vec<String>> = entities
        .iter()
        .enumerate()
        .map(|(i, e)| checked_labels(i, e))
        .collect::<Result<_>>()?;
    check_dimensions(
        db,
        graph,
        IndexEntity::Node("Entity".into()),
        "name_embedding",
        "entities",
        entities.iter().map(|e| e.name_embedding.as_ref()),
    )
    .await?;
    // Only an entity that is stored already leaves a stale vector entry when written
    // (one created with its vector leaves none): one read finds the new ones.
    let uuids: Vec<Uuid> = entities.iter().map(|e| e.uuid).collect();
    let missing = super::missing_nodes(db, graph, "Entity", &uuids).await?;
    // Labels cannot be parameters: one statement per distinct label set, each with
    // its rows and how many of them update a stored entity.
    let mut groups: BTreeMap<Vec<String>, (Vec<Value>, i64)> = BTreeMap::new();
    for (e, labels) in entities.iter().zip(labels) {
        let group = groups.entry(labels).or_default();
        group.0.push(entity_row(e));
        if !missing.contains(&e.uuid.to_string()) {
            group.1 += 1;
        }
    }
    let statements: Vec<(String, Params)> = groups
        .into_iter()
        .map(|(labels, (rows, updated))| {
            let set_labels = if labels.is_empty() {
                String::new()
            } else {
                format!("SET n:{} ", labels.join(":"))
            };
            let query = format!(
                "UNWIND $rows AS r \
                 MERGE (n:Entity {{uuid: r.uuid}}) \
                 {set_labels}{SET_ENTITY} {}",
                debt::add_clause(VectorIndex::Entity, "$updated", "count(*) AS written")
            );
            (
                query,
                Params::new()
                    .set("rows", Value::List(rows))
                    .set("updated", updated),
            )
        })
        .collect();
    run_all(db, graph, &statements).await
}

/// The columns [`entity_from_row`] reads, for the entity bound to `n`.
pub(crate) const ENTITY_COLUMNS: &str = "n.uuid AS uuid, n.name AS name, labels(n) AS labels, \
     n.summary AS summary, n.attributes AS attributes, \
     n.name_embedding AS name_embedding, n.created_at AS created_at";

/// The entities with the given uuids that exist, in the order asked for. Labels come
/// back sorted, without `Entity`.
pub async fn get_entities(db: &FalkorDb, graph: &str, uuids_: &[Uuid]) -> Result<Vec<EntityNode>> {
    if uuids_.is_empty() {
        return Ok(Vec::new());
    }
    let res = db
        .ro_query(
            graph,
            &format!("UNWIND $uuids AS u MATCH (n:Entity {{uuid: u}}) RETURN {ENTITY_COLUMNS}"),
            &Params::new().set("uuids", uuids(uuids_)),
        )
        .await?;
    rows(res).iter().map(entity_from_row).collect()
}

/// An entity from a row of [`ENTITY_COLUMNS`]; labels sorted, without `Entity`.
pub(crate) fn entity_from_row(row: &BTreeMap<String, Value>) -> Result<EntityNode> {
    let r = Row::new("entity", row);
    let mut labels: Vec<String> = r
        .list("labels")?
        .iter()
        .map(|v| v.as_str().map(str::to_owned).ok_or_else(|| r.bad("labels")))
        .collect::<Result<_>>()?;
    labels.retain(|l| l != "Entity");
    labels.sort();
    Ok(EntityNode {
        uuid: r.uuid("uuid")?,
        name: r.str("name")?.to_owned(),
        labels,
        summary: r.str("summary")?.to_owned(),
        attributes: r.json("attributes")?,
        name_embedding: r.embedding("name_embedding")?,
        created_at: r.ts("created_at")?,
    })
}
