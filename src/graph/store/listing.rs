//! Whole-graph reads for inspection and export: the most recent episodes, the counts
//! of what a graph holds, and every entity and fact. Read-only, parameterised.

use uuid::Uuid;

use super::{get_entities, get_facts};
use crate::Result;
use crate::falkordb::{FalkorDb, Params, Value};
use crate::graph::model::{EntityEdge, EntityNode, EpisodeState};

/// What one graph holds ([`Engine::counts`](crate::graph::Engine::counts)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct GraphCounts {
    /// Episodes stored.
    pub episodes: u64,
    /// Episodes stored but not extracted yet.
    pub pending: u64,
    /// Entity nodes.
    pub entities: u64,
    /// Facts (current and invalidated).
    pub facts: u64,
    /// Communities.
    pub communities: u64,
}

/// The uuids in `column` of `rows` (values that are not uuids skipped).
fn uuid_column(rows: &crate::falkordb::QueryResult, column: &str) -> Vec<Uuid> {
    rows.column_values(column)
        .filter_map(|v| v.as_str().and_then(|s| Uuid::parse_str(s).ok()))
        .collect()
}

fn count_of(rows: &crate::falkordb::QueryResult) -> u64 {
    rows.get(0, "n")
        .and_then(Value::as_int)
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}

/// The counts of `graph` (all zero when it does not exist).
pub(crate) async fn counts(db: &FalkorDb, graph: &str) -> Result<GraphCounts> {
    let none = Params::new();
    let n = |query: &'static str| {
        let none = &none;
        async move { db.ro_query(graph, query, none).await.map(|r| count_of(&r)) }
    };
    Ok(GraphCounts {
        episodes: n("MATCH (e:Episodic) RETURN count(e) AS n").await?,
        pending: n("MATCH (e:Episodic) WHERE e.state = 'pending' RETURN count(e) AS n").await?,
        entities: n("MATCH (e:Entity) RETURN count(e) AS n").await?,
        facts: n("MATCH ()-[f:RELATES_TO]->() RETURN count(f) AS n").await?,
        communities: n("MATCH (c:Community) RETURN count(c) AS n").await?,
    })
}

/// The episodes of `graph` and how many of them are pending, read side by side (both
/// zero when the graph does not exist).
pub(crate) async fn episode_counts(db: &FalkorDb, graph: &str) -> Result<(u64, u64)> {
    let none = Params::new();
    let n = |query: &'static str| {
        let none = &none;
        async move { db.ro_query(graph, query, none).await.map(|r| count_of(&r)) }
    };
    tokio::try_join!(
        n("MATCH (e:Episodic) RETURN count(e) AS n"),
        n("MATCH (e:Episodic {state: 'pending'}) RETURN count(e) AS n"),
    )
}

/// Whether `graph` holds any entity (a missing graph holds none).
pub(crate) async fn has_entities(db: &FalkorDb, graph: &str) -> Result<bool> {
    let res = db
        .ro_query(
            graph,
            "MATCH (n:Entity) RETURN n.uuid AS uuid LIMIT 1",
            &Params::new(),
        )
        .await?;
    Ok(!res.into_maps().is_empty())
}

/// The uuids and states of the most recently created episodes of `graph`, newest
/// first, skipping the `skip` newest and returning at most `last`.
pub(crate) async fn recent_episodes(
    db: &FalkorDb,
    graph: &str,
    skip: usize,
    last: usize,
) -> Result<Vec<(Uuid, EpisodeState)>> {
    let int = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let rows = db
        .ro_query(
            graph,
            "MATCH (e:Episodic) RETURN e.uuid AS uuid, e.state AS state \
             ORDER BY e.created_at DESC, e.uuid SKIP $skip LIMIT $n",
            &Params::new().set("skip", int(skip)).set("n", int(last)),
        )
        .await?;
    // An episode written before states existed is complete.
    let states = rows.column_values("state").map(|v| {
        v.as_str()
            .and_then(EpisodeState::parse)
            .unwrap_or(EpisodeState::Complete)
    });
    Ok(uuid_column(&rows, "uuid").into_iter().zip(states).collect())
}

/// Every entity of `graph` (by name, then uuid) and every fact (by creation, then
/// uuid).
pub(crate) async fn contents(
    db: &FalkorDb,
    graph: &str,
) -> Result<(Vec<EntityNode>, Vec<EntityEdge>)> {
    let rows = db
        .ro_query(graph, "MATCH (n:Entity) RETURN n.uuid AS uuid", &Params::new())
        .await?;
    let mut entities = get_entities(db, graph, &uuid_column(&rows, "uuid")).await?;
    entities.sort_by(|a, b| a.name.cmp(&b.name).then(a.uuid.cmp(&b.uuid)));
    let rows = db
        .ro_query(
            graph,
            "MATCH ()-[f:RELATES_TO]->() RETURN f.uuid AS uuid",
            &Params::new(),
        )
        .await?;
    let mut facts = get_facts(db, graph, &uuid_column(&rows, "uuid")).await?;
    facts.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.uuid.cmp(&b.uuid)));
    Ok((entities, facts))
}
