//! What a search returns: per scope, hits in final order with their scores. No result
//! carries an embedding (`fact_embedding` / `name_embedding` are always `None`): the
//! queries never project them.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::Result;
use crate::falkordb::Value;
use crate::graph::model::{Community, EntityEdge, EntityNode, Episode, SourceKind};
use crate::graph::store::{Row, entity_from_row, episode_from_row, fact_from_row};

/// An episode a fact came from: enough to cite it without loading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpisodeSource {
    /// The episode's uuid.
    pub uuid: Uuid,
    /// What kind of text it holds.
    pub source: SourceKind,
    /// Where it came from, e.g. `slack #general`.
    pub source_description: String,
    /// Who wrote it (the episode's writer key), if recorded.
    pub writer: Option<String>,
}

/// A fact found by a search.
#[derive(Debug, Clone, PartialEq)]
pub struct FactHit {
    /// The fact, without its embedding.
    pub fact: EntityEdge,
    /// The final score (the scope's reranker; higher is better).
    pub score: f64,
    /// The stored episodes among `fact.episodes`, in that order (under a source
    /// selection, only the selected episodes: see
    /// [`SearchFilters::writers`](super::SearchFilters::writers) and
    /// [`SearchFilters::episodes`](super::SearchFilters::episodes)).
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
    /// Why the search answered without its vector methods (and MMR) although the
    /// request asked for them: the embedder's error, when the query could not be
    /// embedded (a provider answering 500, a timeout…). The results then come from
    /// fulltext (and the breadth-first walk). `None` when every method ran.
    pub degraded: Option<String>,
}

/// A hit of any scope, as the rerankers see it.
pub(crate) trait Hit: Clone + Send {
    fn uuid(&self) -> Uuid;
    /// The text a cross-encoder reads.
    fn passage(&self) -> String;
    fn score(&self) -> f64;
    fn set_score(&mut self, score: f64);
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
     e.state AS state, e.writer AS writer, score";

/// The columns [`community_hit`] reads, for the community bound to `c`.
pub(crate) const COMMUNITY_COLUMNS: &str = "c.uuid AS uuid, c.name AS name, \
     c.summary AS summary, c.created_at AS created_at, score";

/// A hit's `score` column.
fn score(r: &Row<'_>) -> Result<f64> {
    r.get("score").as_f64().ok_or_else(|| r.bad("score"))
}

pub(crate) fn fact_hit(row: &BTreeMap<String, Value>) -> Result<FactHit> {
    let r = Row::new("fact", row);
    let fact = fact_from_row(row)?;
    // `sources` holds [uuid, source, description, writer] lists (nulls skipped by
    // collect), in no particular order: put them in the fact's episode order.
    let mut found: BTreeMap<Uuid, EpisodeSource> = BTreeMap::new();
    for s in r.list("sources")? {
        let parts = s.as_list().ok_or_else(|| r.bad("sources"))?;
        let [uuid, kind, description, writer] = parts else {
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
        let writer = match writer {
            Value::Null => None,
            w => Some(w.as_str().ok_or_else(|| r.bad("sources"))?.to_owned()),
        };
        found.insert(
            uuid,
            EpisodeSource {
                uuid,
                source,
                source_description,
                writer,
            },
        );
    }
    let sources = fact
        .episodes
        .iter()
        .filter_map(|u| found.remove(u))
        .collect();
    Ok(FactHit {
        score: score(&r)?,
        fact,
        sources,
    })
}

pub(crate) fn entity_hit(row: &BTreeMap<String, Value>) -> Result<EntityHit> {
    Ok(EntityHit {
        entity: entity_from_row(row)?,
        score: score(&Row::new("entity", row))?,
    })
}

pub(crate) fn episode_hit(row: &BTreeMap<String, Value>) -> Result<EpisodeHit> {
    Ok(EpisodeHit {
        episode: episode_from_row(row)?,
        score: score(&Row::new("episode", row))?,
    })
}

pub(crate) fn community_hit(row: &BTreeMap<String, Value>) -> Result<CommunityHit> {
    let r = Row::new("community", row);
    Ok(CommunityHit {
        community: Community {
            uuid: r.uuid("uuid")?,
            name: r.str("name")?.to_owned(),
            summary: r.str("summary")?.to_owned(),
            name_embedding: None,
            created_at: r.ts("created_at")?,
        },
        score: score(&r)?,
    })
}
