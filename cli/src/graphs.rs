//! The reads the memory API does not offer yet (recent episodes, counts, a whole
//! graph), made through the library's engine (`Engine::recent_episodes`, `counts`,
//! `contents`, `get_facts`), and the Destination resolution every command shares.

use gralkor::client::{EpisodeRecord, GraphId, OperatorId};
use gralkor::graph::{Engine, EntityEdge, EntityNode, GraphCounts};
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

fn engine(client: &NativeClient) -> &Engine {
    client.storage().engine()
}

/// One listed episode: its record and extraction state.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    pub destination: String,
    pub state: String,
    pub episode: EpisodeRecord,
}

/// The `last` most recently created episodes of a graph, newest first, after the
/// `skip` newest.
pub async fn recent_episodes(
    client: &NativeClient,
    place: &Place,
    skip: usize,
    last: usize,
) -> Result<Vec<(Uuid, String)>> {
    let found = engine(client)
        .recent_episodes(place.graph.as_str(), skip, last)
        .await?;
    Ok(found
        .into_iter()
        .map(|(uuid, state)| (uuid, state.as_str().to_string()))
        .collect())
}

/// The counts of one graph.
pub async fn counts(client: &NativeClient, place: &Place) -> Result<GraphCounts> {
    engine(client).counts(place.graph.as_str()).await
}

/// Every entity and fact of a graph.
pub async fn whole_graph(
    client: &NativeClient,
    place: &Place,
) -> Result<(Vec<EntityNode>, Vec<EntityEdge>)> {
    engine(client).contents(place.graph.as_str()).await
}

/// One fact of a graph by uuid.
pub async fn fact(client: &NativeClient, place: &Place, uuid: Uuid) -> Result<Option<EntityEdge>> {
    let found = engine(client)
        .get_facts(place.graph.as_str(), &[uuid])
        .await?;
    Ok(found.into_iter().find(|f| f.uuid == uuid))
}
