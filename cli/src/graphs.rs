//! The reads the memory API does not offer yet (recent episodes, counts, a whole
//! graph), made on the library's own FalkorDB handle with read-only, parameterised
//! queries, and the Destination resolution every command shares.
//!
//! These belong in the library (a `Client` listing, counts and export); they live here
//! until it has them, and only ever read.

use gralkor::client::{EpisodeRecord, GraphId, OperatorId};
use gralkor::falkordb::{FalkorDb, Params, Value};
use gralkor::graph::{EntityEdge, EntityNode};
use gralkor::provenance::Writer;
use gralkor::runtime::Snapshot;
use gralkor::storage::NewEpisode;
use gralkor::{Error, NativeClient, Result};
use serde::Serialize;
use uuid::Uuid;

/// A Destination as a command sees it: its name and, for this operator, its graph.
#[derive(Debug, Clone)]
pub struct Place {
    pub name: String,
    pub graph: GraphId,
}

/// The Destinations named (each checked against the runtime), or every registered one
/// (`personal` only with an operator).
pub fn places(
    snapshot: &Snapshot,
    operator: Option<&OperatorId>,
    named: &[String],
) -> Result<Vec<Place>> {
    let mut out = Vec::new();
    if named.is_empty() {
        for d in snapshot.destinations() {
            match (d.is_personal(), operator) {
                (true, None) => continue,
                (_, Some(op)) => out.push(Place {
                    name: d.name().to_string(),
                    graph: d.graph_id(op)?,
                }),
                // A shared Destination's graph is its name, whoever asks.
                (false, None) => out.push(Place {
                    name: d.name().to_string(),
                    graph: GraphId::new(d.name())?,
                }),
            }
        }
        return Ok(out);
    }
    for (i, name) in named.iter().enumerate() {
        let d = snapshot.destination(&format!("destinations[{i}]"), name)?;
        let graph = match operator {
            Some(op) => d.graph_id(op)?,
            None if d.is_personal() => {
                return Err(Error::Config {
                    field: "operator".into(),
                    rule: "must be set with --operator or GRALKOR_OPERATOR to reach the \
                           `personal` Destination"
                        .into(),
                });
            }
            None => GraphId::new(d.name())?,
        };
        out.push(Place {
            name: name.clone(),
            graph,
        });
    }
    Ok(out)
}

/// The uuid an ingestion with this id writes its first episode under (the library
/// derives it from the graph, the Lens and `<id>#0`), with the Lens's Destination.
pub fn ingested_uuid(
    snapshot: &Snapshot,
    operator: &OperatorId,
    lens: &str,
    id: &str,
) -> Result<(Place, Uuid)> {
    let lens = snapshot.lens("lens", lens)?;
    let destination = snapshot.destination("lens.destination", lens.destination())?;
    let graph = destination.graph_id(operator)?;
    let uuid = NewEpisode::new(
        graph.clone(),
        Writer::Lens(lens.name().to_string()),
        gralkor::client::Content::document("-"),
        "",
        None,
    )
    .replay_key(format!("{id}#0"))
    .uuid;
    Ok((
        Place {
            name: destination.name().to_string(),
            graph,
        },
        uuid,
    ))
}

fn db(client: &NativeClient) -> &FalkorDb {
    client.storage().db()
}

fn uuids(rows: &gralkor::falkordb::QueryResult, column: &str) -> Vec<Uuid> {
    rows.column_values(column)
        .filter_map(|v| v.as_str().and_then(|s| Uuid::parse_str(s).ok()))
        .collect()
}

/// One listed episode: its record and extraction state.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    pub destination: String,
    pub state: String,
    pub episode: EpisodeRecord,
}

/// The `last` most recently created episodes of a graph, newest first.
pub async fn recent_episodes(
    client: &NativeClient,
    place: &Place,
    skip: usize,
    last: usize,
) -> Result<Vec<(Uuid, String)>> {
    let int = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let rows = db(client)
        .ro_query(
            place.graph.as_str(),
            "MATCH (e:Episodic) RETURN e.uuid AS uuid, e.state AS state \
             ORDER BY e.created_at DESC, e.uuid SKIP $skip LIMIT $n",
            &Params::new().set("skip", int(skip)).set("n", int(last)),
        )
        .await?;
    let states: Vec<String> = rows
        .column_values("state")
        .map(|v| v.as_str().unwrap_or("complete").to_string())
        .collect();
    Ok(uuids(&rows, "uuid").into_iter().zip(states).collect())
}

/// What a graph holds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    pub episodes: i64,
    pub pending: i64,
    pub entities: i64,
    pub facts: i64,
    pub communities: i64,
}

async fn count(db: &FalkorDb, graph: &str, query: &str) -> Result<i64> {
    let rows = db.ro_query(graph, query, &Params::new()).await?;
    Ok(rows.get(0, "n").and_then(Value::as_int).unwrap_or(0))
}

/// The counts of one graph.
pub async fn counts(client: &NativeClient, place: &Place) -> Result<Counts> {
    let (db, g) = (db(client), place.graph.as_str());
    Ok(Counts {
        episodes: count(db, g, "MATCH (e:Episodic) RETURN count(e) AS n").await?,
        pending: count(
            db,
            g,
            "MATCH (e:Episodic) WHERE e.state = 'pending' RETURN count(e) AS n",
        )
        .await?,
        entities: count(db, g, "MATCH (e:Entity) RETURN count(e) AS n").await?,
        facts: count(db, g, "MATCH ()-[f:RELATES_TO]->() RETURN count(f) AS n").await?,
        communities: count(db, g, "MATCH (c:Community) RETURN count(c) AS n").await?,
    })
}

/// Every entity and fact of a graph.
pub async fn whole_graph(
    client: &NativeClient,
    place: &Place,
) -> Result<(Vec<EntityNode>, Vec<EntityEdge>)> {
    let (db, g) = (db(client), place.graph.as_str());
    let rows = db
        .ro_query(
            g,
            "MATCH (e:Entity) RETURN e.uuid AS uuid ORDER BY e.name, e.uuid",
            &Params::new(),
        )
        .await?;
    let mut entities = gralkor::graph::get_entities(db, g, &uuids(&rows, "uuid")).await?;
    entities.sort_by(|a, b| a.name.cmp(&b.name).then(a.uuid.cmp(&b.uuid)));
    let rows = db
        .ro_query(
            g,
            "MATCH ()-[f:RELATES_TO]->() RETURN f.uuid AS uuid",
            &Params::new(),
        )
        .await?;
    let mut facts = gralkor::graph::get_facts(db, g, &uuids(&rows, "uuid")).await?;
    facts.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.uuid.cmp(&b.uuid)));
    Ok((entities, facts))
}

/// One fact of a graph by uuid.
pub async fn fact(client: &NativeClient, place: &Place, uuid: Uuid) -> Result<Option<EntityEdge>> {
    let found = gralkor::graph::get_facts(db(client), place.graph.as_str(), &[uuid]).await?;
    Ok(found.into_iter().find(|f| f.uuid == uuid))
}
