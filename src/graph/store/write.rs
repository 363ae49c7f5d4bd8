//! What the writers of several record kinds share: batched statements and their
//! summed statistics, the check that referenced nodes exist, and the embedding
//! dimension check (see the [store docs](super#embedding-dimensions)).

#[cfg(any(test, feature = "testing"))]
use uuid::Uuid;

#[cfg(any(test, feature = "testing"))]
use super::codec::uuids;
use crate::falkordb::{FalkorDb, IndexEntity, IndexKind};
#[cfg(any(test, feature = "testing"))]
use crate::falkordb::{Params, QueryStats};
use crate::{Error, Result};

#[cfg(any(test, feature = "testing"))]
pub(crate) fn add_stats(total: &mut QueryStats, s: &QueryStats) {
    total.labels_added += s.labels_added;
    total.nodes_created += s.nodes_created;
    total.nodes_deleted += s.nodes_deleted;
    total.properties_set += s.properties_set;
    total.properties_removed += s.properties_removed;
    total.relationships_created += s.relationships_created;
    total.relationships_deleted += s.relationships_deleted;
    total.indices_created += s.indices_created;
    total.indices_deleted += s.indices_deleted;
    total.execution_time_ms += s.execution_time_ms;
}

/// The dimension of the vector index on `entity`.`property` of `graph`, if there is one.
pub(crate) async fn vector_dimension(
    db: &FalkorDb,
    graph: &str,
    entity: &IndexEntity,
    property: &str,
) -> Result<Option<usize>> {
    Ok(db
        .list_indices(graph)
        .await?
        .into_iter()
        .find_map(|i| match i.kind {
            IndexKind::Vector { dimension, .. }
                if &i.entity == entity && i.property == property =>
            {
                usize::try_from(dimension).ok()
            }
            _ => None,
        }))
}

/// Checks every embedding of a batch against the vector index on `entity`.`property`
/// (see the module docs): `embeddings` yields each record's embedding, if any; an
/// embedding of the wrong length fails with `{list}[i].{property}`. Makes no round trip
/// when no record carries an embedding.
pub(crate) async fn check_dimensions<'a>(
    db: &FalkorDb,
    graph: &str,
    entity: IndexEntity,
    property: &str,
    list: &str,
    embeddings: impl Iterator<Item = Option<&'a Vec<f32>>> + Clone,
) -> Result<()> {
    if embeddings.clone().all(|e| e.is_none()) {
        return Ok(());
    }
    let Some(dim) = vector_dimension(db, graph, &entity, property).await? else {
        return Ok(());
    };
    for (i, e) in embeddings.enumerate() {
        if let Some(e) = e
            && e.len() != dim
        {
            return Err(Error::invalid(
                format!("{list}[{i}].{property}"),
                format!(
                    "must have {dim} components, the dimension of the graph's vector index \
                     (got {})",
                    e.len()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(any(test, feature = "testing"))]
pub(crate) async fn run_all(
    db: &FalkorDb,
    graph: &str,
    statements: &[(String, Params)],
) -> Result<QueryStats> {
    let mut total = QueryStats::default();
    match statements {
        [] => {}
        [(q, p)] => add_stats(&mut total, &db.query(graph, q, p).await?.stats),
        _ => {
            for res in db.pipeline(graph, statements).await? {
                add_stats(&mut total, &res.stats);
            }
        }
    }
    Ok(total)
}

#[cfg(any(test, feature = "testing"))]
/// The uuids of `wanted` that are not stored on a node labelled `label` (one read,
/// in the order asked for).
pub(crate) async fn missing_nodes(
    db: &FalkorDb,
    graph: &str,
    label: &str,
    wanted: &[Uuid],
) -> Result<Vec<String>> {
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let res = db
        .ro_query(
            graph,
            &format!(
                "UNWIND $uuids AS u \
                 OPTIONAL MATCH (n:{label} {{uuid: u}}) \
                 WITH u, n WHERE n IS NULL RETURN u AS missing"
            ),
            &Params::new().set("uuids", uuids(wanted)),
        )
        .await?;
    Ok(res
        .column_values("missing")
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect())
}
