//! Episodes (`Episodic` nodes): write, read, and the row they are read from; and
//! their content embeddings.
//!
//! ## Episode embeddings
//!
//! An episode's content embedding lives on a node of its own,
//! `(:EpisodeEmbedding {uuid, embedding})` with the episode's uuid, not on the
//! `Episodic` node: FalkorDB leaves a stale vector-index entry for every statement that
//! updates a record carrying an indexed vector (see [`debt`](super::debt)), and the
//! `Episodic` node is updated by every claim, lease renewal and commit of the pipeline.
//! The embedding node is created with its vector in one statement (`MERGE … ON CREATE
//! SET`, which leaves no stale entry) and never updated; removing an episode deletes it
//! and counts the one stale entry a deletion leaves. At most
//! [`EPISODE_EMBEDDING_CHARS`] characters of the content are embedded (every provider
//! accepts that much); the whole content stays searchable by fulltext.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::codec::Row;
#[cfg(any(test, feature = "testing"))]
use super::codec::uuids;
use crate::Result;
use crate::falkordb::{FalkorDb, Params, Value};
#[cfg(any(test, feature = "testing"))]
use crate::falkordb::QueryStats;
use crate::graph::model::{Episode, EpisodeState, SourceKind};

/// The label of the nodes holding episode content embeddings.
pub(crate) const EPISODE_EMBEDDING_LABEL: &str = "EpisodeEmbedding";

/// The leading characters of an episode's content that are embedded: about 500
/// tokens of English, within every embedding provider's input limit (the smallest,
/// Gemini's, is 2,048 tokens; a character is at most about one token).
pub const EPISODE_EMBEDDING_CHARS: usize = 2_000;

/// The text embedded for an episode's `content`: its first
/// [`EPISODE_EMBEDDING_CHARS`] characters.
pub fn episode_embedding_text(content: &str) -> String {
    match content.char_indices().nth(EPISODE_EMBEDDING_CHARS) {
        Some((end, _)) => content[..end].to_owned(),
        None => content.to_owned(),
    }
}

/// Clauses for the middle of a write statement (`carry` are the variables it goes on
/// with) that create the embedding node of episode `$uuid` with the vector
/// `$param` unless it exists; nothing when `$param` is null. Never updates an
/// existing embedding node (see the module documentation).
pub(crate) fn episode_embedding_clause(param: &str, carry: &str) -> String {
    format!(
        "WITH {carry} FOREACH (_ IN CASE WHEN ${param} IS NULL THEN [] ELSE [1] END | \
           MERGE (x:{EPISODE_EMBEDDING_LABEL} {{uuid: $uuid}}) \
           ON CREATE SET x.embedding = vecf32(${param})) "
    )
}

#[cfg(any(test, feature = "testing"))]
/// Writes `episode` (`MERGE` on its uuid, then every property set to the given
/// values; a `None` writer or session removes that property). Returns what the write changed: saving the same episode again creates no
/// node.
pub async fn save_episode(db: &FalkorDb, graph: &str, episode: &Episode) -> Result<QueryStats> {
    let params = Params::new()
        .set("uuid", episode.uuid.to_string())
        .set("content", episode.content.as_str())
        .set("source", episode.source.as_str())
        .set("source_description", episode.source_description.as_str())
        .set("valid_at", episode.valid_at.0)
        .set("created_at", episode.created_at.0)
        .set("entity_edges", uuids(&episode.entity_edges))
        .set("state", episode.state.as_str())
        .set("writer", episode.writer.as_deref())
        .set("session", episode.session.as_deref());
    let res = db
        .query(
            graph,
            "MERGE (e:Episodic {uuid: $uuid}) \
             SET e.content = $content, e.source = $source, \
                 e.source_description = $source_description, e.valid_at = $valid_at, \
                 e.created_at = $created_at, e.entity_edges = $entity_edges, e.state = $state, \
                 e.writer = $writer, e.session = $session",
            &params,
        )
        .await?;
    Ok(res.stats)
}

/// The columns [`episode_from_row`] reads, for the episode bound to `e`.
pub(crate) const EPISODE_COLUMNS: &str = "e.uuid AS uuid, e.content AS content, e.source AS source, \
     e.source_description AS source_description, e.valid_at AS valid_at, \
     e.created_at AS created_at, e.entity_edges AS entity_edges, e.state AS state, \
     e.writer AS writer, e.session AS session";

/// The episode with `uuid`, if there is one.
pub async fn get_episode(db: &FalkorDb, graph: &str, uuid: Uuid) -> Result<Option<Episode>> {
    let res = db
        .ro_query(
            graph,
            &format!("MATCH (e:Episodic {{uuid: $uuid}}) RETURN {EPISODE_COLUMNS}"),
            &Params::new().set("uuid", uuid.to_string()),
        )
        .await?;
    res.into_maps().first().map(episode_from_row).transpose()
}

/// The uuids of the episodes of session `session`, oldest first (through the range
/// index on `Episodic.session`).
pub async fn session_episodes(db: &FalkorDb, graph: &str, session: &str) -> Result<Vec<Uuid>> {
    let res = db
        .ro_query(
            graph,
            "MATCH (e:Episodic {session: $session}) RETURN e.uuid AS uuid \
             ORDER BY e.created_at, e.uuid",
            &Params::new().set("session", session),
        )
        .await?;
    res.into_maps()
        .iter()
        .map(|row| Row::new("episode", row).uuid("uuid"))
        .collect()
}

/// An episode from a row of [`EPISODE_COLUMNS`].
pub(crate) fn episode_from_row(row: &BTreeMap<String, Value>) -> Result<Episode> {
    let r = Row::new("episode", row);
    let source = r.str("source")?;
    let state = r.str("state")?;
    Ok(Episode {
        uuid: r.uuid("uuid")?,
        content: r.str("content")?.to_owned(),
        source: SourceKind::parse(source).ok_or_else(|| r.bad("source"))?,
        source_description: r.str("source_description")?.to_owned(),
        valid_at: r.ts("valid_at")?,
        created_at: r.ts("created_at")?,
        entity_edges: r.uuid_list("entity_edges")?,
        state: EpisodeState::parse(state).ok_or_else(|| r.bad("state"))?,
        writer: r.opt_str("writer")?.map(str::to_owned),
        session: r.opt_str("session")?.map(str::to_owned),
    })
}
