//! `gralkor export`: a Destination's graph — its episodes (oldest first, with their
//! extraction state: without a language model they are all there is), entities, and
//! facts with their valid/invalid times — as JSON, or as Graphviz DOT (entities and
//! facts).

use std::fmt::Write as _;

use gralkor::NativeClient;
use gralkor::client::{Client, OperatorId};
use gralkor::graph::{EntityEdge, EntityNode};
use gralkor::storage::Timestamp;
use serde::Serialize;
use uuid::Uuid;

use crate::args::{ExportArgs, ExportFormat};
use crate::commands::{AskedBy, Out};
use crate::failure::{Failure, Outcome};
use crate::graphs;

#[derive(Debug, Serialize)]
pub struct Entity {
    pub uuid: Uuid,
    pub name: String,
    pub labels: Vec<String>,
    pub summary: String,
    pub attributes: serde_json::Map<String, serde_json::Value>,
    pub created_at: Timestamp,
}

#[derive(Debug, Serialize)]
pub struct Fact {
    pub uuid: Uuid,
    pub source: Uuid,
    pub target: Uuid,
    pub name: String,
    pub fact: String,
    pub valid_at: Option<Timestamp>,
    pub invalid_at: Option<Timestamp>,
    pub expired_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub episodes: Vec<Uuid>,
}

impl From<EntityEdge> for Fact {
    fn from(e: EntityEdge) -> Fact {
        Fact {
            uuid: e.uuid,
            source: e.source_uuid,
            target: e.target_uuid,
            name: e.name,
            fact: e.fact,
            valid_at: e.valid_at,
            invalid_at: e.invalid_at,
            expired_at: e.expired_at,
            created_at: e.created_at,
            episodes: e.episodes,
        }
    }
}

/// One exported episode: its record and extraction state.
#[derive(Debug, Serialize)]
pub struct Episode {
    #[serde(flatten)]
    pub record: gralkor::client::EpisodeRecord,
    pub state: String,
}

#[derive(Debug, Serialize)]
pub struct Export {
    pub destination: String,
    pub graph: String,
    pub episodes: Vec<Episode>,
    pub entities: Vec<Entity>,
    pub facts: Vec<Fact>,
}

impl Export {
    fn new(
        destination: String,
        graph: String,
        nodes: Vec<EntityNode>,
        edges: Vec<EntityEdge>,
    ) -> Export {
        Export {
            destination,
            graph,
            episodes: Vec::new(),
            entities: nodes
                .into_iter()
                .map(|n| Entity {
                    uuid: n.uuid,
                    name: n.name,
                    // `Entity` is on every entity; the ontology labels are the news.
                    labels: n.labels.into_iter().filter(|l| l != "Entity").collect(),
                    summary: n.summary,
                    attributes: n.attributes,
                    created_at: n.created_at,
                })
                .collect(),
            facts: edges.into_iter().map(Fact::from).collect(),
        }
    }

    /// The graph in Graphviz DOT: one node per entity (name and labels), one edge per
    /// fact (its name, text and times); facts no longer true are dashed and grey.
    pub fn dot(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "digraph {} {{\n  rankdir=LR;\n  node [shape=box, style=rounded];",
            quote(&format!("gralkor {}", self.destination))
        );
        for e in &self.entities {
            let label = if e.labels.is_empty() {
                e.name.clone()
            } else {
                format!("{}\n[{}]", e.name, e.labels.join(", "))
            };
            let _ = writeln!(
                out,
                "  {} [label={}];",
                quote(&e.uuid.to_string()),
                quote(&label)
            );
        }
        for f in &self.facts {
            let mut label = format!("{}: {}", f.name, f.fact);
            let times = match (f.valid_at, f.invalid_at) {
                (Some(v), Some(i)) => format!("valid {v} to {i}"),
                (Some(v), None) => format!("valid from {v}"),
                (None, Some(i)) => format!("valid until {i}"),
                (None, None) => String::new(),
            };
            if !times.is_empty() {
                label.push('\n');
                label.push_str(&times);
            }
            if let Some(x) = f.expired_at {
                let _ = write!(label, "\nexpired {x}");
            }
            let style = if f.invalid_at.is_some() || f.expired_at.is_some() {
                ", style=dashed, color=grey50, fontcolor=grey50"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "  {} -> {} [label={}{style}];",
                quote(&f.source.to_string()),
                quote(&f.target.to_string()),
                quote(&label)
            );
        }
        out.push_str("}\n");
        out
    }
}

/// A DOT double-quoted string: quotes and backslashes escaped, line breaks as `\n`.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub async fn run(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&gralkor::access::Subject>,
    args: &ExportArgs,
    out: Out,
) -> Outcome {
    let snapshot = client.runtime().snapshot();
    let place =
        graphs::places(&snapshot, Some(op), std::slice::from_ref(&args.destination))?.remove(0);
    // The graph is read whole: with an authorizer, only by someone who may read it.
    crate::access::must_read(client, subject, &place.graph).await?;
    let (nodes, edges) = graphs::whole_graph(client, &place).await?;
    let episodes = all_episodes(client, op, subject, &place).await?;
    let mut export = Export::new(
        place.name.clone(),
        place.graph.as_str().to_string(),
        nodes,
        edges,
    );
    export.episodes = episodes;
    let rendered = match args.format {
        ExportFormat::Json => serde_json::to_string_pretty(&export)
            .map_err(|e| Failure::Io("rendering JSON".into(), e.into()))?,
        ExportFormat::Dot => export.dot(),
    };
    match &args.output {
        Some(path) => {
            std::fs::write(path, rendered.as_bytes())
                .map_err(|e| Failure::Io(format!("writing {}", path.display()), e))?;
            let summary = serde_json::json!({
                "destination": export.destination, "episodes": export.episodes.len(),
                "entities": export.entities.len(), "facts": export.facts.len(),
                "output": path.display().to_string(),
            });
            out.emit(&summary, || {
                format!(
                    "exported {}, {} entities and {} facts of {} to {}",
                    crate::commands::plural(export.episodes.len() as u64, "episode", "episodes"),
                    export.entities.len(),
                    export.facts.len(),
                    export.destination,
                    path.display()
                )
            })
        }
        None => {
            println!("{}", rendered.trim_end());
            Ok(())
        }
    }
}

/// Every episode of the graph, oldest first (read a page at a time, newest first).
async fn all_episodes(
    client: &NativeClient,
    op: &OperatorId,
    subject: Option<&gralkor::access::Subject>,
    place: &graphs::Place,
) -> Result<Vec<Episode>, Failure> {
    const PAGE: usize = 200;
    let mut episodes = Vec::new();
    let mut skip = 0;
    loop {
        let batch = graphs::recent_episodes(client, place, skip, PAGE).await?;
        let exhausted = batch.len() < PAGE;
        skip += batch.len();
        for (uuid, state) in batch {
            let request =
                gralkor::client::EpisodeRef::new(op.clone(), &place.name, uuid).asked_by(subject);
            if let Some(record) = client.get_episode(&request).await? {
                episodes.push(Episode { record, state });
            }
        }
        if exhausted {
            break;
        }
    }
    episodes.reverse();
    Ok(episodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_quotes_names_and_dashes_facts_no_longer_true() {
        let mut ada = EntityNode::new("Ada \"the\" Beekeeper");
        ada.labels = vec!["Entity".into(), "Person".into()];
        let lisbon = EntityNode::new("Lisbon");
        let mut lives = EntityEdge::new(ada.uuid, lisbon.uuid, "LIVES_IN", "Ada lives in Lisbon");
        lives.valid_at = Some(Timestamp::parse_rfc3339("2025-03-01T00:00:00Z").unwrap());
        lives.invalid_at = Some(Timestamp::parse_rfc3339("2026-01-01T00:00:00Z").unwrap());
        let export = Export::new(
            "personal".into(),
            "personal/ada".into(),
            vec![ada, lisbon],
            vec![lives],
        );
        let dot = export.dot();
        assert!(dot.starts_with("digraph \"gralkor personal\" {"), "{dot}");
        assert!(
            dot.contains(r#"label="Ada \"the\" Beekeeper\n[Person]""#),
            "{dot}"
        );
        assert!(
            dot.contains(
                r#"label="LIVES_IN: Ada lives in Lisbon\nvalid 2025-03-01T00:00:00.000000Z to 2026-01-01T00:00:00.000000Z", style=dashed"#
            ),
            "{dot}"
        );
        assert!(dot.trim_end().ends_with('}'));
    }
}
