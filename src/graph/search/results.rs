//! What a search returns: per scope, hits in final order with their scores. No result
//! carries an embedding (`fact_embedding` / `name_embedding` are always `None`): the
//! queries never project them.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::falkordb::Value;
use crate::graph::model::{
    Community, EntityEdge, EntityNode, Episode, EpisodeState, SourceKind, Timestamp,
};
use crate::{Error, Result};

/// An episode a fact came from: enough to cite it without loading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpisodeSource {
    /// The episode's uuid.
    pub uuid: Uuid,
    /// What kind of text it holds.
    pub source: SourceKind,
    /// Where it came from, e.g. `slack #general`.
    pub source_description: String,
}

/// A fact found by a search.
#[derive(Debug, Clone, PartialEq)]
pub struct FactHit {
    /// The fact, without its embedding.
    pub fact: EntityEdge,
    /// The final score (the scope's reranker; higher is better).
    pub score: f64,
    /// The stored episodes among `fact.episodes`, in that order.
    pub sources: Vec<EpisodeSource>,
}

/// An entity found by a search.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityHit {
    /// The entity, without its embedding.
    pub entity: EntityNode,
    /// The final score.
    pub score: f64,
}

/// An episode found by a search.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeHit {
    /// The episode.
    pub episode: Episode,
    /// The final score.
    pub score: f64,
}

/// A community found by a search.
#[derive(Debug, Clone, PartialEq)]
pub struct CommunityHit {
    /// The community, without its embedding.
    pub community: Community,
    /// The final score.
    pub score: f64,
}

/// The results of a search, best first in every scope; a scope that did not run is
/// empty.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SearchResults {
    /// Facts.
    pub facts: Vec<FactHit>,
    /// Entities.
    pub entities: Vec<EntityHit>,
    /// Episodes.
    pub episodes: Vec<EpisodeHit>,
    /// Communities.
    pub communities: Vec<CommunityHit>,
}

/// A hit of any scope, as the rerankers see it.
pub(crate) trait Hit: Clone + Send {
    fn uuid(&self) -> Uuid;
    /// The text a cross-encoder reads.
    fn passage(&self) -> String;
    fn score(&self) -> f64;
    fn set_score(&mut self, score: f64);
}

/// A candidate known only by its uuid and score (fused before it is loaded).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scored {
    pub uuid: Uuid,
    pub score: f64,
}

impl Hit for Scored {
    fn uuid(&self) -> Uuid {
        self.uuid
    }
    fn passage(&self) -> String {
        String::new()
    }
    fn score(&self) -> f64 {
        self.score
    }
    fn set_score(&mut self, score: f64) {
        self.score = score;
    }
}

impl Hit for FactHit {
    fn uuid(&self) -> Uuid {
        self.fact.uuid
    }
    fn passage(&self) -> String {
        self.fact.fact.clone()
    }
    fn score(&self) -> f64 {
        self.score
    }
    fn set_score(&mut self, score: f64) {
        self.score = score;
    }
}

impl Hit for EntityHit {
    fn uuid(&self) -> Uuid {
        self.entity.uuid
    }
    fn passage(&self) -> String {
        if self.entity.summary.is_empty() {
            self.entity.name.clone()
        } else {
            format!("{}: {}", self.entity.name, self.entity.summary)
        }
    }
    fn score(&self) -> f64 {
        self.score
    }
    fn set_score(&mut self, score: f64) {
        self.score = score;
    }
}

impl Hit for EpisodeHit {
    fn uuid(&self) -> Uuid {
        self.episode.uuid
    }
    fn passage(&self) -> String {
        self.episode.content.clone()
    }
    fn score(&self) -> f64 {
        self.score
    }
    fn set_score(&mut self, score: f64) {
        self.score = score;
    }
}

impl Hit for CommunityHit {
    fn uuid(&self) -> Uuid {
        self.community.uuid
    }
    fn passage(&self) -> String {
        if self.community.summary.is_empty() {
            self.community.name.clone()
        } else {
            format!("{}: {}", self.community.name, self.community.summary)
        }
    }
    fn score(&self) -> f64 {
        self.score
    }
    fn set_score(&mut self, score: f64) {
        self.score = score;
    }
}

/// The columns [`fact_hit`] reads, for the fact bound to `f` with `sources` and
/// `score` in scope.
pub(crate) const FACT_COLUMNS: &str = "f.uuid AS uuid, f.source_uuid AS source, \
     f.target_uuid AS target, f.name AS name, f.fact AS fact, f.episodes AS episodes, \
     f.valid_at AS valid_at, f.invalid_at AS invalid_at, f.expired_at AS expired_at, \
     f.created_at AS created_at, f.attributes AS attributes, sources, score";

/// The columns [`entity_hit`] reads, for the entity bound to `n` with `score` in scope.
pub(crate) const ENTITY_COLUMNS: &str = "n.uuid AS uuid, n.name AS name, \
     labels(n) AS labels, n.summary AS summary, n.attributes AS attributes, \
     n.created_at AS created_at, score";

/// The columns [`episode_hit`] reads, for the episode bound to `e`.
pub(crate) const EPISODE_COLUMNS: &str = "e.uuid AS uuid, e.content AS content, \
     e.source AS source, e.source_description AS source_description, \
     e.valid_at AS valid_at, e.created_at AS created_at, e.entity_edges AS entity_edges, \
     e.state AS state, score";

/// The columns [`community_hit`] reads, for the community bound to `c`.
pub(crate) const COMMUNITY_COLUMNS: &str = "c.uuid AS uuid, c.name AS name, \
     c.summary AS summary, c.created_at AS created_at, score";

/// One reply row, read with errors that name the record and field.
struct Row<'a> {
    kind: &'static str,
    row: &'a BTreeMap<String, Value>,
}

impl<'a> Row<'a> {
    fn bad(&self, field: &str) -> Error {
        Error::Protocol(format!(
            "stored {} has a missing or malformed `{field}`",
            self.kind
        ))
    }
    fn get(&self, field: &str) -> &'a Value {
        self.row.get(field).unwrap_or(&Value::Null)
    }
    fn str(&self, field: &str) -> Result<&'a str> {
        self.get(field).as_str().ok_or_else(|| self.bad(field))
    }
    fn uuid(&self, field: &str) -> Result<Uuid> {
        Uuid::parse_str(self.str(field)?).map_err(|_| self.bad(field))
    }
    fn opt_ts(&self, field: &str) -> Result<Option<Timestamp>> {
        match self.get(field) {
            Value::Null => Ok(None),
            Value::Int(i) => Ok(Some(Timestamp(*i))),
            _ => Err(self.bad(field)),
        }
    }
    fn ts(&self, field: &str) -> Result<Timestamp> {
        self.opt_ts(field)?.ok_or_else(|| self.bad(field))
    }
    fn list(&self, field: &str) -> Result<&'a [Value]> {
        match self.get(field) {
            Value::Null => Ok(&[]),
            v => v.as_list().ok_or_else(|| self.bad(field)),
        }
    }
    fn uuid_list(&self, field: &str) -> Result<Vec<Uuid>> {
        self.list(field)?
            .iter()
            .map(|v| {
                v.as_str()
                    .and_then(|s| Uuid::parse_str(s).ok())
                    .ok_or_else(|| self.bad(field))
            })
            .collect()
    }
    fn json(&self, field: &str) -> Result<serde_json::Map<String, serde_json::Value>> {
        match self.get(field) {
            Value::Null => Ok(serde_json::Map::new()),
            Value::String(s) => match serde_json::from_str(s) {
                Ok(serde_json::Value::Object(m)) => Ok(m),
                _ => Err(self.bad(field)),
            },
            _ => Err(self.bad(field)),
        }
    }
    fn score(&self) -> Result<f64> {
        self.get("score").as_f64().ok_or_else(|| self.bad("score"))
    }
}

pub(crate) fn fact_hit(row: &BTreeMap<String, Value>) -> Result<FactHit> {
    let r = Row { kind: "fact", row };
    let fact = EntityEdge {
        uuid: r.uuid("uuid")?,
        source_uuid: r.uuid("source")?,
        target_uuid: r.uuid("target")?,
        name: r.str("name")?.to_owned(),
        fact: r.str("fact")?.to_owned(),
        fact_embedding: None,
        episodes: r.uuid_list("episodes")?,
        valid_at: r.opt_ts("valid_at")?,
        invalid_at: r.opt_ts("invalid_at")?,
        expired_at: r.opt_ts("expired_at")?,
        created_at: r.ts("created_at")?,
        attributes: r.json("attributes")?,
    };
    // `sources` holds [uuid, source, description] triples (nulls skipped by collect),
    // in no particular order: put them in the fact's episode order.
    let mut found: BTreeMap<Uuid, EpisodeSource> = BTreeMap::new();
    for s in r.list("sources")? {
        let parts = s.as_list().ok_or_else(|| r.bad("sources"))?;
        let [uuid, kind, description] = parts else {
            return Err(r.bad("sources"));
        };
        let uuid = uuid
            .as_str()
            .and_then(|u| Uuid::parse_str(u).ok())
            .ok_or_else(|| r.bad("sources"))?;
        let source = kind
            .as_str()
            .and_then(SourceKind::parse)
            .ok_or_else(|| r.bad("sources"))?;
        let source_description = description.as_str().unwrap_or_default().to_owned();
        found.insert(
            uuid,
            EpisodeSource {
                uuid,
                source,
                source_description,
            },
        );
    }
    let sources = fact
        .episodes
        .iter()
        .filter_map(|u| found.remove(u))
        .collect();
    Ok(FactHit {
        score: r.score()?,
        fact,
        sources,
    })
}

pub(crate) fn entity_hit(row: &BTreeMap<String, Value>) -> Result<EntityHit> {
    let r = Row {
        kind: "entity",
        row,
    };
    let mut labels: Vec<String> = r
        .list("labels")?
        .iter()
        .map(|v| v.as_str().map(str::to_owned).ok_or_else(|| r.bad("labels")))
        .collect::<Result<_>>()?;
    labels.retain(|l| l != "Entity");
    labels.sort();
    Ok(EntityHit {
        entity: EntityNode {
            uuid: r.uuid("uuid")?,
            name: r.str("name")?.to_owned(),
            labels,
            summary: r.str("summary")?.to_owned(),
            attributes: r.json("attributes")?,
            name_embedding: None,
            created_at: r.ts("created_at")?,
        },
        score: r.score()?,
    })
}

pub(crate) fn episode_hit(row: &BTreeMap<String, Value>) -> Result<EpisodeHit> {
    let r = Row {
        kind: "episode",
        row,
    };
    Ok(EpisodeHit {
        episode: Episode {
            uuid: r.uuid("uuid")?,
            content: r.str("content")?.to_owned(),
            source: SourceKind::parse(r.str("source")?).ok_or_else(|| r.bad("source"))?,
            source_description: r.str("source_description")?.to_owned(),
            valid_at: r.ts("valid_at")?,
            created_at: r.ts("created_at")?,
            entity_edges: r.uuid_list("entity_edges")?,
            state: EpisodeState::parse(r.str("state")?).ok_or_else(|| r.bad("state"))?,
        },
        score: r.score()?,
    })
}

pub(crate) fn community_hit(row: &BTreeMap<String, Value>) -> Result<CommunityHit> {
    let r = Row {
        kind: "community",
        row,
    };
    Ok(CommunityHit {
        community: Community {
            uuid: r.uuid("uuid")?,
            name: r.str("name")?.to_owned(),
            summary: r.str("summary")?.to_owned(),
            name_embedding: None,
            created_at: r.ts("created_at")?,
        },
        score: r.score()?,
    })
}
