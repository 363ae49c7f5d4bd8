//! Removing an episode and what only it supported.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::{get_episode, uuids};
use crate::Result;
use crate::falkordb::{FalkorDb, Params, Value};

/// What [`remove_episode`] deleted and changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Removal {
    /// Whether the episode existed (and is now gone).
    pub episode: bool,
    /// Facts deleted because this episode was their only support.
    pub facts_deleted: usize,
    /// Facts kept (other episodes support them) with this episode taken off their
    /// `episodes` list.
    pub facts_updated: usize,
    /// Entities deleted because no other episode mentions them and no remaining fact
    /// touches them.
    pub entities_deleted: usize,
}

/// Removes episode `uuid` from `graph`:
///
/// * facts it produced or touched (its `entity_edges`) that no other episode supports
///   are deleted; the others lose it from their `episodes`;
/// * entities it mentions that no other episode mentions and no remaining fact touches
///   are deleted (an entity kept alive by a fact from [`add_triplet`] stays);
/// * the episode, its `MENTIONS` and its content embedding go.
///
/// **Summaries are not rewritten**: an entity that stays keeps a summary that may
/// include sentences learned from the removed episode, and a fact this episode
/// retired stays retired. Two reads, then one write statement (atomic on FalkorDB).
/// Removing a missing episode returns an empty [`Removal`].
///
/// [`add_triplet`]: crate::graph::Engine::add_triplet
///
/// ```no_run
/// # async fn run(db: gralkor::falkordb::FalkorDb, uuid: uuid::Uuid) -> gralkor::Result<()> {
/// let removal = gralkor::graph::remove_episode(&db, "notes", uuid).await?;
/// println!("{} facts went with it", removal.facts_deleted);
/// # Ok(()) }
/// ```
#[tracing::instrument(skip(db))]
pub async fn remove_episode(db: &FalkorDb, graph: &str, uuid: Uuid) -> Result<Removal> {
    let Some(episode) = get_episode(db, graph, uuid).await? else {
        return Ok(Removal::default());
    };
    let me = uuid.to_string();
    let facts = db
        .ro_query(
            graph,
            "UNWIND $edges AS u \
             MATCH ()-[f:RELATES_TO {uuid: u}]->() \
             RETURN DISTINCT f.uuid AS uuid, f.episodes AS episodes",
            &Params::new().set("edges", uuids(&episode.entity_edges)),
        )
        .await?;
    let (mut delete_facts, mut update_facts) = (Vec::new(), Vec::new());
    for row in facts.into_maps() {
        let Some(f) = row.get("uuid").and_then(Value::as_str) else {
            continue;
        };
        let others = row
            .get("episodes")
            .and_then(Value::as_list)
            .map_or(0, |l| l.iter().filter(|e| e.as_str() != Some(&me)).count());
        let f = Value::String(f.to_owned());
        if others == 0 {
            delete_facts.push(f);
        } else {
            update_facts.push(f);
        }
    }
    let entities = db
        .ro_query(
            graph,
            "MATCH (ep:Episodic {uuid: $uuid})-[:MENTIONS]->(n:Entity) \
             OPTIONAL MATCH (o:Episodic)-[:MENTIONS]->(n) WHERE o.uuid <> $uuid \
             WITH n, count(DISTINCT o) AS others \
             OPTIONAL MATCH (n)-[g:RELATES_TO]-() WHERE NOT g.uuid IN $deleting \
             WITH n, others, count(DISTINCT g) AS kept \
             WHERE others = 0 AND kept = 0 \
             RETURN n.uuid AS uuid",
            &Params::new()
                .set("uuid", me.as_str())
                .set("deleting", Value::List(delete_facts.clone())),
        )
        .await?;
    let delete_entities: BTreeSet<String> = entities
        .column_values("uuid")
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    let removal = Removal {
        episode: true,
        facts_deleted: delete_facts.len(),
        facts_updated: update_facts.len(),
        entities_deleted: delete_entities.len(),
    };
    db.query(
        graph,
        // One equality lookup per uuid (never `uuid IN $list`: see
        // `falkordb::statement`); `[null]` keeps each UNWIND from emptying the row set.
        // Each updated or deleted record that carries an indexed vector leaves a stale
        // entry in its index (see `debt`): the facts, the entities and the episode's
        // content embeddings (one per passage, `passages`).
        &format!(
            "MATCH (ep:Episodic {{uuid: $uuid}}) \
             UNWIND CASE WHEN $delete_facts = [] THEN [null] ELSE $delete_facts END AS du \
             OPTIONAL MATCH ()-[f:RELATES_TO {{uuid: du}}]->() \
             DELETE f \
             WITH DISTINCT ep \
             UNWIND CASE WHEN $update_facts = [] THEN [null] ELSE $update_facts END AS uu \
             OPTIONAL MATCH ()-[g:RELATES_TO {{uuid: uu}}]->() \
             SET g.episodes = [e IN g.episodes WHERE e <> $uuid] \
             {fact_debt}\
             WITH DISTINCT ep \
             UNWIND CASE WHEN $delete_entities = [] THEN [null] ELSE $delete_entities END AS eu \
             OPTIONAL MATCH (n:Entity {{uuid: eu}}) \
             DETACH DELETE n \
             {entity_debt}\
             WITH DISTINCT ep \
             OPTIONAL MATCH (x:{label} {{uuid: $uuid}}) \
             WITH ep, collect(x) AS xs \
             {episode_debt}\
             FOREACH (x IN xs | DELETE x) \
             DETACH DELETE ep",
            fact_debt = super::debt::add_clause(
                super::VectorIndex::Fact,
                "size($update_facts) + size($delete_facts)",
                "DISTINCT ep"
            ),
            entity_debt = super::debt::add_clause(
                super::VectorIndex::Entity,
                "size($delete_entities)",
                "DISTINCT ep"
            ),
            episode_debt = super::debt::add_clause(
                super::VectorIndex::Episode,
                "size(xs)",
                "ep, xs"
            ),
            label = super::EPISODE_EMBEDDING_LABEL,
        ),
        &Params::new()
            .set("uuid", me.as_str())
            .set("delete_facts", Value::List(delete_facts))
            .set("update_facts", Value::List(update_facts))
            .set(
                "delete_entities",
                Value::List(delete_entities.into_iter().map(Value::String).collect()),
            ),
    )
    .await?;
    Ok(removal)
}
