//! The statements of the ingestion pipeline ([`crate::graph::Engine`]): the durable
//! episode write, the claim and its lease, the context and candidate reads, and the
//! one atomic commit.
//!
//! The claim protocol and why the commit is atomic are described in
//! [`crate::graph::ingest`].

use std::collections::BTreeMap;

use uuid::Uuid;

use super::debt::{self, VectorIndex};
use super::episodes::episode_embedding_clause;
use super::{
    EPISODE_COLUMNS, FACT_COLUMNS, SET_ENTITY, SET_FACT, checked_labels, entity_row,
    episode_from_row, fact_from_row, fact_row, link_uuid, rows, uuids,
};
use crate::falkordb::{FalkorDb, Params, QueryResult, Value};
use crate::graph::model::{EntityEdge, EntityNode, Episode, EpisodeState, Timestamp};
use crate::{Error, Result};

/// The statement of [`write_pending`].
fn write_pending_statement(episode: &Episode, embedding: Option<&[f32]>) -> (String, Params) {
    (
        format!(
            "MERGE (e:Episodic {{uuid: $uuid}}) \
             ON CREATE SET e.content = $content, e.source = $source, \
                 e.source_description = $source_description, e.valid_at = $valid_at, \
                 e.created_at = $created_at, e.entity_edges = [], e.state = 'pending', \
                 e.generation = 0, e.writer = $writer, e.session = $session \
             {embedding} \
             RETURN {EPISODE_COLUMNS}",
            embedding = episode_embedding_clause("embedding", "e")
        ),
        Params::new()
            .set("uuid", episode.uuid.to_string())
            .set("content", episode.content.as_str())
            .set("source", episode.source.as_str())
            .set("source_description", episode.source_description.as_str())
            .set("valid_at", episode.valid_at.0)
            .set("created_at", episode.created_at.0)
            .set("writer", episode.writer.as_deref())
            .set("session", episode.session.as_deref())
            .set("embedding", embedding.map(<[f32]>::to_vec)),
    )
}

/// The stored episode and whether the statement created it, from the reply of
/// [`write_pending_statement`].
fn read_pending(res: QueryResult) -> Result<(Episode, bool)> {
    let created = res.stats.nodes_created > 0;
    let stored = res
        .into_maps()
        .first()
        .map(episode_from_row)
        .transpose()?
        .ok_or_else(|| Error::Protocol("episode write returned no row".into()))?;
    Ok((stored, created))
}

/// Writes `episode` as pending unless an episode with its uuid exists, with its
/// content `embedding` (when given, and unless the episode has one), and returns the
/// stored episode and whether this call created it. One round trip.
pub(crate) async fn write_pending(
    db: &FalkorDb,
    graph: &str,
    episode: &Episode,
    embedding: Option<&[f32]>,
) -> Result<(Episode, bool)> {
    let (query, params) = write_pending_statement(episode, embedding);
    read_pending(db.query(graph, &query, &params).await?)
}

/// What [`open_episode`] found.
#[derive(Debug, Clone)]
pub(crate) struct Opened {
    /// The episode as stored (before the claim).
    pub stored: Episode,
    /// Whether this call created it.
    pub created: bool,
    /// The claim's outcome, when one was asked for.
    pub claim: Option<Claim>,
    /// The extraction context ([`previous_statement`]), when a claim was asked for.
    pub previous: Vec<String>,
    /// The current facts of the entities the episode names ([`read_known`]), when a
    /// claim was asked for.
    pub known: Vec<KnownFact>,
}

/// [`write_pending`], then — when `claim` gives an owner and a lease — [`claim`],
/// [`previous_statement`] (`previous` of them) and [`read_known`] (at most `known`), in
/// **one** pipeline round trip instead of four. The claim only takes an episode equal to `episode` in its immutable
/// fields (content, source kind, description, reference time), so a conflicting
/// replay claims nothing; a refused claim is told apart by the stored state the
/// write returned, without another read.
pub(crate) async fn open_episode(
    db: &FalkorDb,
    graph: &str,
    episode: &Episode,
    embedding: Option<&[f32]>,
    claim: Option<(&str, i64)>,
    previous: usize,
    known: usize,
) -> Result<Opened> {
    let Some((owner, lease_ms)) = claim else {
        let (stored, created) = write_pending(db, graph, episode, embedding).await?;
        return Ok(Opened {
            stored,
            created,
            claim: None,
            previous: Vec::new(),
            known: Vec::new(),
        });
    };
    let mut statements = vec![write_pending_statement(episode, embedding)];
    let (query, mut params) = claim_statement(episode.uuid, owner, lease_ms);
    statements.push((
        query.replace(
            "WHERE e.state = 'pending'",
            "WHERE e.state = 'pending' AND e.content = $content AND e.source = $source \
               AND e.source_description = $source_description AND e.valid_at = $valid_at",
        ),
        {
            params.insert("content", episode.content.as_str());
            params.insert("source", episode.source.as_str());
            params.insert("source_description", episode.source_description.as_str());
            params.insert("valid_at", episode.valid_at.0);
            params
        },
    ));
    let with_previous = previous > 0;
    if with_previous {
        statements.push(previous_statement(episode.uuid, episode.valid_at, previous));
    }
    statements.extend(known_statement(&episode.content, known));
    let mut results = db.pipeline(graph, &statements).await?.into_iter();
    let (Some(written), Some(claimed)) = (results.next(), results.next()) else {
        return Err(Error::Protocol(
            "the episode pipeline returned too few replies".into(),
        ));
    };
    let (stored, created) = read_pending(written)?;
    let claim = match claimed.get(0, "generation").and_then(Value::as_int) {
        Some(generation) => Claim::Held(generation),
        None => match stored.state {
            EpisodeState::Complete => Claim::Complete,
            EpisodeState::Quarantined => Claim::Quarantined,
            // Pending but not taken: another live lease (or, for a conflicting
            // replay, which the caller refuses, different fields).
            EpisodeState::Pending => Claim::Busy,
        },
    };
    let previous = if with_previous {
        results.next().map(read_previous).unwrap_or_default()
    } else {
        Vec::new()
    };
    let known = results.next().map(read_known).transpose()?.unwrap_or_default();
    Ok(Opened {
        stored,
        created,
        claim: Some(claim),
        previous,
        known,
    })
}

/// The outcome of [`claim`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// This writer now holds the episode at this generation.
    Held(i64),
    /// The episode is complete already.
    Complete,
    /// Another writer holds a live lease.
    Busy,
    /// The episode does not exist.
    Missing,
    /// The episode is quarantined (see [`begin_commit`]).
    Quarantined,
}

/// Claims the pending episode `uuid` for `owner` for `lease_ms` milliseconds of server
/// time, if no live lease of another owner exists (so a claim retried after a lost
/// reply succeeds). One round trip, two when the claim is refused.
pub(crate) async fn claim(
    db: &FalkorDb,
    graph: &str,
    uuid: Uuid,
    owner: &str,
    lease_ms: i64,
) -> Result<Claim> {
    let (query, params) = claim_statement(uuid, owner, lease_ms);
    let res = db.query(graph, &query, &params).await?;
    if let Some(generation) = res.get(0, "generation").and_then(Value::as_int) {
        return Ok(Claim::Held(generation));
    }
    let state = db
        .ro_query(
            graph,
            "MATCH (e:Episodic {uuid: $uuid}) RETURN e.state AS state, e.lease_owner AS holder",
            &Params::new().set("uuid", uuid.to_string()),
        )
        .await?;
    Ok(match state.get(0, "state").and_then(Value::as_str) {
        None => Claim::Missing,
        Some("complete") => Claim::Complete,
        Some("quarantined") => Claim::Quarantined,
        Some(_) => {
            let holder = state.get(0, "holder").and_then(Value::as_str);
            match holder {
                Some(holder) => take_over(db, graph, uuid, owner, holder, lease_ms).await?,
                None => Claim::Busy,
            }
        }
    })
}

/// Takes over the claim on pending episode `uuid` that `holder` holds when `holder`'s
/// process is provably gone ([`owner::owner_gone`](super::owner::owner_gone)), at
/// once, whatever its lease says; [`Claim::Busy`] otherwise, or when the claim
/// changed hands meanwhile. One round trip when the holder is gone, none otherwise.
pub(crate) async fn take_over(
    db: &FalkorDb,
    graph: &str,
    uuid: Uuid,
    owner: &str,
    holder: &str,
    lease_ms: i64,
) -> Result<Claim> {
    if holder == owner || !super::owner::owner_gone(holder) {
        return Ok(Claim::Busy);
    }
    let (query, params) = claim_statement(uuid, owner, lease_ms);
    let query = query.replace(
        "OR e.lease_owner = $owner)",
        "OR toString(e.lease_owner) IN [$owner, $gone])",
    );
    let res = db.query(graph, &query, &params.set("gone", holder)).await?;
    Ok(match res.get(0, "generation").and_then(Value::as_int) {
        Some(generation) => {
            tracing::warn!(
                graph,
                %uuid,
                holder,
                "took over the claim of a process that is gone"
            );
            Claim::Held(generation)
        }
        None => Claim::Busy,
    })
}

/// The statement of [`claim`]: `generation` is returned when the claim is taken.
fn claim_statement(uuid: Uuid, owner: &str, lease_ms: i64) -> (String, Params) {
    (
        "MATCH (e:Episodic {uuid: $uuid}) \
         WHERE e.state = 'pending' \
           AND (e.lease_until IS NULL OR e.lease_until <= timestamp() \
                OR e.lease_owner = $owner) \
         SET e.generation = coalesce(e.generation, 0) + 1, e.lease_owner = $owner, \
             e.lease_until = timestamp() + $lease \
         RETURN e.generation AS generation"
            .to_owned(),
        Params::new()
            .set("uuid", uuid.to_string())
            .set("owner", owner)
            .set("lease", lease_ms),
    )
}

/// Commits of one episode that may be sent without an answer (the server lost while
/// they were in flight) before the episode is quarantined.
pub(crate) const MAX_UNANSWERED_COMMITS: i64 = 2;

/// What [`begin_commit`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BeginCommit {
    /// Counted as in flight: send the commit.
    Go,
    /// [`MAX_UNANSWERED_COMMITS`] commits were never answered: the episode is now
    /// quarantined (this many), and the commit must not be sent.
    Quarantined(i64),
    /// The episode is not pending at this generation: complete at it (a retried
    /// commit whose first attempt was applied, its reply lost), or claimed anew.
    NotHeld(Committed),
}

/// Counts a commit of episode `uuid` (held at `generation`) as in flight, durably,
/// before it is sent — or, when [`MAX_UNANSWERED_COMMITS`] earlier ones never got an
/// answer, marks the episode quarantined instead. A commit that crashes the server
/// thus stays counted, in this process and in the next one that resumes the episode.
pub(crate) async fn begin_commit(
    db: &FalkorDb,
    graph: &str,
    uuid: Uuid,
    generation: i64,
) -> Result<BeginCommit> {
    let res = db
        .query(
            graph,
            "MATCH (e:Episodic {uuid: $uuid}) \
             WITH e, e.state = 'pending' AND e.generation = $generation AS held, \
                  coalesce(e.unanswered_commits, 0) AS unanswered \
             FOREACH (_ IN CASE WHEN held AND unanswered >= $max THEN [1] ELSE [] END | \
               SET e.state = 'quarantined', e.quarantined_at = timestamp(), \
                   e.lease_until = NULL, e.lease_owner = NULL) \
             FOREACH (_ IN CASE WHEN held AND unanswered < $max THEN [1] ELSE [] END | \
               SET e.unanswered_commits = unanswered + 1) \
             RETURN held, unanswered, e.state AS state, \
                    coalesce(e.generation, 0) AS generation",
            &Params::new()
                .set("uuid", uuid.to_string())
                .set("generation", generation)
                .set("max", MAX_UNANSWERED_COMMITS),
        )
        .await?;
    Ok(match res.get(0, "held").and_then(Value::as_bool) {
        Some(true) => match res.get(0, "unanswered").and_then(Value::as_int) {
            Some(n) if n >= MAX_UNANSWERED_COMMITS => BeginCommit::Quarantined(n),
            _ => BeginCommit::Go,
        },
        _ => BeginCommit::NotHeld(unapplied(&res, generation)),
    })
}

/// Takes back the count of [`begin_commit`] for a commit the server answered without
/// completing the episode (an error, or a fresh name taken), and tells how it ended
/// from the episode's state, in the same statement.
pub(crate) async fn commit_answered(
    db: &FalkorDb,
    graph: &str,
    uuid: Uuid,
    generation: i64,
) -> Result<Committed> {
    let res = db
        .query(
            graph,
            "MATCH (e:Episodic {uuid: $uuid}) \
             FOREACH (_ IN CASE WHEN e.generation = $generation AND e.unanswered_commits > 0 \
                                THEN [1] ELSE [] END | \
               SET e.unanswered_commits = e.unanswered_commits - 1) \
             RETURN e.state AS state, coalesce(e.generation, 0) AS generation",
            &Params::new()
                .set("uuid", uuid.to_string())
                .set("generation", generation),
        )
        .await?;
    Ok(unapplied(&res, generation))
}

/// How a commit by the writer holding `generation` ended when it wrote nothing, from
/// a row of the episode's `state` and `generation`: complete at this generation means
/// an earlier attempt was applied (its reply lost); still pending at it, a fresh name
/// was taken; anything else, the claim was lost.
fn unapplied(res: &QueryResult, generation: i64) -> Committed {
    let state = res.get(0, "state").and_then(Value::as_str);
    let current = res.get(0, "generation").and_then(Value::as_int) == Some(generation);
    match state {
        Some("complete") if current => Committed::Done(Stale::default()),
        Some("pending") if current => Committed::NameTaken,
        _ => Committed::Fenced,
    }
}

/// The uuids of the episodes of `graph` in `state`, oldest reference time first.
pub(crate) async fn episodes_in(
    db: &FalkorDb,
    graph: &str,
    state: EpisodeState,
) -> Result<Vec<Uuid>> {
    let res = db
        .ro_query(
            graph,
            "MATCH (e:Episodic) WHERE e.state = $state \
             RETURN e.uuid AS uuid ORDER BY e.valid_at, e.created_at, e.uuid",
            &Params::new().set("state", state.as_str()),
        )
        .await?;
    res.column_values("uuid")
        .map(|v| {
            v.as_str()
                .and_then(|s| Uuid::parse_str(s).ok())
                .ok_or_else(|| Error::Protocol("stored episode has a malformed uuid".into()))
        })
        .collect()
}

/// Makes quarantined episode `uuid` pending again with no commit counted; `false`
/// when it is not quarantined.
pub(crate) async fn release_quarantined(db: &FalkorDb, graph: &str, uuid: Uuid) -> Result<bool> {
    let res = db
        .query(
            graph,
            "MATCH (e:Episodic {uuid: $uuid}) WHERE e.state = 'quarantined' \
             SET e.state = 'pending', e.unanswered_commits = NULL, e.quarantined_at = NULL \
             RETURN e.uuid AS uuid",
            &Params::new().set("uuid", uuid.to_string()),
        )
        .await?;
    Ok(!res.rows.is_empty())
}

/// Extends the lease of a claim still held at `generation`; `false` when the claim was
/// lost (taken over or completed by someone else).
pub(crate) async fn renew(
    db: &FalkorDb,
    graph: &str,
    uuid: Uuid,
    generation: i64,
    lease_ms: i64,
) -> Result<bool> {
    let res = db
        .query(
            graph,
            "MATCH (e:Episodic {uuid: $uuid}) \
             WHERE e.state = 'pending' AND e.generation = $generation \
             SET e.lease_until = timestamp() + $lease \
             RETURN e.generation AS generation",
            &Params::new()
                .set("uuid", uuid.to_string())
                .set("generation", generation)
                .set("lease", lease_ms),
        )
        .await?;
    Ok(!res.rows.is_empty())
}

/// Gives a claim up (after a failure) so that another writer or
/// [`resume_pending`](crate::graph::Engine::resume_pending) can take the episode at
/// once instead of waiting for the lease to lapse.
pub(crate) async fn release(db: &FalkorDb, graph: &str, uuid: Uuid, generation: i64) -> Result<()> {
    db.query(
        graph,
        "MATCH (e:Episodic {uuid: $uuid}) \
         WHERE e.state = 'pending' AND e.generation = $generation \
         SET e.lease_until = NULL, e.lease_owner = NULL",
        &Params::new()
            .set("uuid", uuid.to_string())
            .set("generation", generation),
    )
    .await?;
    Ok(())
}

/// The statement reading the contents of up to `limit` episodes other than `uuid`
/// whose reference time is at or before `at`, newest first (see [`read_previous`]):
/// the context of an extraction.
fn previous_statement(uuid: Uuid, at: Timestamp, limit: usize) -> (String, Params) {
    (
        "MATCH (e:Episodic) WHERE e.valid_at <= $at AND e.uuid <> $uuid \
         RETURN e.content AS content ORDER BY e.valid_at DESC, e.created_at DESC \
         LIMIT $limit"
            .to_owned(),
        Params::new()
            .set("uuid", uuid.to_string())
            .set("at", at.0)
            .set("limit", i64::try_from(limit).unwrap_or(i64::MAX)),
    )
}

/// The contents of a [`previous_statement`] reply, oldest first.
fn read_previous(res: QueryResult) -> Vec<String> {
    let mut out: Vec<String> = res
        .column_values("content")
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    out.reverse();
    out
}

/// The context of an extraction in one pipeline round trip: [`previous_statement`]
/// (`previous` of them) and [`read_known`] (at most `known`).
pub(crate) async fn extraction_context(
    db: &FalkorDb,
    graph: &str,
    episode: &Episode,
    previous: usize,
    known: usize,
) -> Result<(Vec<String>, Vec<KnownFact>)> {
    let mut statements = Vec::new();
    if previous > 0 {
        statements.push(previous_statement(episode.uuid, episode.valid_at, previous));
    }
    statements.extend(known_statement(&episode.content, known));
    if statements.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let mut results = db.pipeline(graph, &statements).await?.into_iter();
    let contents = if previous > 0 {
        results.next().map(read_previous).unwrap_or_default()
    } else {
        Vec::new()
    };
    let facts = results.next().map(read_known).transpose()?.unwrap_or_default();
    Ok((contents, facts))
}

/// A current fact shown to the extraction call, with its endpoints' names.
#[derive(Debug, Clone)]
pub(crate) struct KnownFact {
    pub edge: EntityEdge,
    pub source_name: String,
    pub target_name: String,
}

/// Entities a lookup of the episode's names visits at most (each name key is one
/// index lookup; an episode names few entities).
const KNOWN_ENTITIES: i64 = 64;

/// The statement of [`read_known`], or none when `limit` is 0 or the text holds no
/// word.
fn known_statement(content: &str, limit: usize) -> Option<(String, Params)> {
    if limit == 0 {
        return None;
    }
    let keys = crate::graph::dedup::mention_keys(content);
    if keys.is_empty() {
        return None;
    }
    let columns = FACT_COLUMNS.replace("f.fact_embedding AS", "null AS");
    Some((
        // One equality lookup per key (`name_key IN $keys` crashes FalkorDB 4.16 for
        // stopword keys, see `falkordb::statement`).
        format!(
            "UNWIND $keys AS key \
             MATCH (n:Entity {{name_key: key}}) \
             WITH DISTINCT n LIMIT $entities \
             MATCH (n)-[f:RELATES_TO]-(:Entity) WHERE f.expired_at IS NULL \
             WITH DISTINCT f \
             RETURN {columns}, startNode(f).name AS source_name, \
                 endNode(f).name AS target_name \
             ORDER BY f.created_at DESC, f.uuid LIMIT $k"
        ),
        Params::new()
            .set(
                "keys",
                Value::List(keys.into_iter().map(Value::String).collect()),
            )
            .set("entities", KNOWN_ENTITIES)
            .set("k", i64::try_from(limit).unwrap_or(i64::MAX)),
    ))
}

/// The current facts touching the stored entities whose names the episode's text
/// contains word for word ([`dedup::mention_keys`](crate::graph::dedup::mention_keys)),
/// oldest first, at most `limit` (the newest); embeddings are not read back. What the
/// extraction call sees to say which known fact a new one restates or contradicts.
fn read_known(res: QueryResult) -> Result<Vec<KnownFact>> {
    let mut out: Vec<KnownFact> = rows(res)
        .iter()
        .map(|row| {
            let name = |k: &str| {
                row.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            Ok(KnownFact {
                edge: fact_from_row(row)?,
                source_name: name("source_name"),
                target_name: name("target_name"),
            })
        })
        .collect::<Result<_>>()?;
    // Oldest first, as the prompt lists them.
    out.reverse();
    Ok(out)
}

/// One new fact to find existing candidates for.
#[derive(Debug, Clone)]
pub(crate) struct FactQuery {
    pub source: Uuid,
    pub target: Uuid,
    pub embedding: Vec<f32>,
}

/// Existing current facts a new fact may duplicate or contradict.
#[derive(Debug, Clone, Default)]
pub(crate) struct FactCandidates {
    /// Current facts between the same two entities (either direction): possible
    /// duplicates, and possible contradictions.
    pub between: Vec<EntityEdge>,
    /// Other current facts touching either entity, most similar first: possible
    /// contradictions.
    pub related: Vec<EntityEdge>,
}

/// Candidates for every query in one pipeline round trip: the current facts between
/// the same endpoints, and the `limit` current facts touching either endpoint whose
/// text embeddings are nearest (exact cosine distance over that neighbourhood, not an
/// approximate index query, so a filter can never starve the result). Embeddings are
/// not read back.
pub(crate) async fn fact_candidates(
    db: &FalkorDb,
    graph: &str,
    queries: &[FactQuery],
    limit: usize,
) -> Result<Vec<FactCandidates>> {
    if queries.is_empty() {
        return Ok(Vec::new());
    }
    let k = i64::try_from(limit).unwrap_or(i64::MAX);
    let columns = FACT_COLUMNS.replace("f.fact_embedding AS", "null AS");
    let mut statements = Vec::with_capacity(queries.len() * 2);
    for q in queries {
        let (s, t) = (q.source.to_string(), q.target.to_string());
        statements.push((
            format!(
                "MATCH (s:Entity {{uuid: $s}})-[f:RELATES_TO]-(t:Entity {{uuid: $t}}) \
                 WHERE f.expired_at IS NULL \
                 WITH DISTINCT f RETURN {columns} ORDER BY f.created_at, f.uuid LIMIT $k"
            ),
            Params::new()
                .set("s", s.clone())
                .set("t", t.clone())
                .set("k", k),
        ));
        statements.push((
            format!(
                "UNWIND $ends AS end \
                 MATCH (n:Entity {{uuid: end}})-[f:RELATES_TO]-(m:Entity) \
                 WHERE NOT m.uuid IN $ends \
                   AND f.expired_at IS NULL AND f.fact_embedding IS NOT NULL \
                 WITH DISTINCT f \
                 WITH f, vec.cosineDistance(f.fact_embedding, vecf32($v)) AS d \
                 RETURN {columns} ORDER BY d, f.uuid LIMIT $k"
            ),
            Params::new()
                .set(
                    "ends",
                    Value::List(vec![Value::String(s), Value::String(t)]),
                )
                .set("v", q.embedding.clone())
                .set("k", k),
        ));
    }
    let results = db.pipeline(graph, &statements).await?;
    let mut out = Vec::with_capacity(queries.len());
    let mut it = results.into_iter();
    while let (Some(between), Some(related)) = (it.next(), it.next()) {
        out.push(FactCandidates {
            between: read_facts(between)?,
            related: read_facts(related)?,
        });
    }
    Ok(out)
}

fn read_facts(res: QueryResult) -> Result<Vec<EntityEdge>> {
    rows(res).iter().map(fact_from_row).collect()
}

/// An existing fact's changed fields: its time span and supporting episodes.
#[derive(Debug, Clone)]
pub(crate) struct FactUpdate {
    pub uuid: Uuid,
    pub source: Uuid,
    pub target: Uuid,
    pub episodes: Vec<Uuid>,
    pub invalid_at: Option<Timestamp>,
    pub expired_at: Option<Timestamp>,
}

/// Everything one episode's extraction writes.
#[derive(Debug, Clone, Default)]
pub(crate) struct CommitSet {
    /// New and changed entities, written whole.
    pub entities: Vec<EntityNode>,
    /// New facts, written whole.
    pub new_facts: Vec<EntityEdge>,
    /// Existing facts whose span or episodes changed.
    pub updated_facts: Vec<FactUpdate>,
    /// Entities the episode mentions.
    pub mentions: Vec<Uuid>,
    /// The facts the episode produced or touched (its `entity_edges`).
    pub entity_edges: Vec<Uuid>,
    /// Normalised names that no entity may have when the episode commits: the new
    /// entities' names that no stored entity had at resolution (see [`Committed`]).
    pub fresh_keys: Vec<String>,
    /// The episode's content embedding, written unless the episode has one.
    pub episode_embedding: Option<Vec<f32>>,
}

/// [`SET_ENTITY`] for the commit: an entity that has a name embedding keeps it, one
/// without gets the row's. The engine never reads stored embeddings back (entity
/// candidates carry the server's similarity instead, see
/// [`entity_candidates`](super::entity_candidates)), so a stored entity's row
/// carries no embedding, or the one of the name that resolved to it.
fn set_entity_keeping_embedding() -> String {
    let keep = "n.name_embedding = CASE WHEN n.name_embedding IS NOT NULL THEN n.name_embedding \
                WHEN r.name_embedding IS NULL THEN NULL ELSE vecf32(r.name_embedding) END";
    let (head, _) = SET_ENTITY
        .split_once("n.name_embedding =")
        .expect("SET_ENTITY sets the name embedding last");
    format!("{head}{keep}")
}

/// How a fenced commit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Committed {
    /// Written, the episode complete; the vector indices' stale counts after it
    /// (zero when a retried commit found its first attempt applied).
    Done(Stale),
    /// Nothing written: an entity with one of the set's `fresh_keys` exists now —
    /// another process created it after this episode read its candidates. Resolving
    /// again finds it.
    NameTaken,
    /// Nothing written: the episode is no longer pending at this generation.
    Fenced,
}

/// Writes `set` and marks episode `uuid` complete in **one** statement fenced by
/// `generation` and by `set.fresh_keys` (see the module docs for why this is
/// atomic). Returns `None`, having written nothing, when the episode is no longer
/// pending at that generation or an entity has one of the fresh names; tell which
/// with [`commit_answered`].
pub(crate) async fn commit_episode(
    db: &FalkorDb,
    graph: &str,
    uuid: Uuid,
    generation: i64,
    set: &CommitSet,
) -> Result<Option<Stale>> {
    commit(db, graph, Some((uuid, generation)), set).await
}

/// Writes `set` (which must hold no mentions) in one statement, without an episode:
/// the commit of [`add_triplet`](crate::graph::Engine::add_triplet).
pub(crate) async fn commit_facts(db: &FalkorDb, graph: &str, set: &CommitSet) -> Result<()> {
    commit(db, graph, None, set).await.map(|_| ())
}

async fn commit(
    db: &FalkorDb,
    graph: &str,
    fence: Option<(Uuid, i64)>,
    set: &CommitSet,
) -> Result<Option<Stale>> {
    let uuid = fence.map_or_else(Uuid::nil, |(u, _)| u);
    let mut params = Params::new()
        .set("uuid", uuid.to_string())
        .set("generation", fence.map_or(0, |(_, g)| g))
        .set("now", Timestamp::now().0)
        .set("entity_edges", uuids(&set.entity_edges));
    let mut query = String::from(if fence.is_some() {
        "MATCH (ep:Episodic {uuid: $uuid}) \
         WHERE ep.state = 'pending' AND ep.generation = $generation "
    } else {
        "UNWIND [1] AS one "
    });
    if fence.is_some() && !set.fresh_keys.is_empty() {
        // Under the graph's write lock, so no entity can appear between this check
        // and the writes below.
        query.push_str(
            // One equality lookup per key: `name_key IN $fresh_keys` crashes
            // FalkorDB 4.16 for stopword keys (see `falkordb::statement`).
            "WITH ep UNWIND $fresh_keys AS fresh \
             OPTIONAL MATCH (taken:Entity {name_key: fresh}) \
             WITH ep, count(taken) AS taken WHERE taken = 0 ",
        );
        params = params.set(
            "fresh_keys",
            Value::List(
                set.fresh_keys
                    .iter()
                    .map(|k| Value::String(k.clone()))
                    .collect(),
            ),
        );
    }
    // Labels cannot be parameters: one FOREACH per distinct label set.
    let mut groups: BTreeMap<Vec<String>, Vec<Value>> = BTreeMap::new();
    for (i, e) in set.entities.iter().enumerate() {
        groups
            .entry(checked_labels(i, e)?)
            .or_default()
            .push(entity_row(e));
    }
    for (g, (labels, rows)) in groups.into_iter().enumerate() {
        let set_labels = if labels.is_empty() {
            String::new()
        } else {
            format!("SET n:{} ", labels.join(":"))
        };
        query.push_str(&format!(
            "FOREACH (r IN $entities{g} | MERGE (n:Entity {{uuid: r.uuid}}) {set_labels}{}) ",
            set_entity_keeping_embedding()
        ));
        params = params.set(format!("entities{g}"), Value::List(rows));
    }
    query.push_str(&format!(
        "FOREACH (r IN $facts | \
           MERGE (s:Entity {{uuid: r.source}}) MERGE (t:Entity {{uuid: r.target}}) \
           MERGE (s)-[f:RELATES_TO {{uuid: r.uuid}}]->(t) {SET_FACT}) \
         FOREACH (r IN $updates | \
           MERGE (s:Entity {{uuid: r.source}}) MERGE (t:Entity {{uuid: r.target}}) \
           MERGE (s)-[f:RELATES_TO {{uuid: r.uuid}}]->(t) \
           SET f.episodes = r.episodes, f.invalid_at = r.invalid_at, \
               f.expired_at = r.expired_at) \
         "
    ));
    // Each stored entity or fact this statement updates leaves one stale vector
    // entry (see `debt`); fresh names are new entities, which leave none.
    let carry = if fence.is_some() { "ep" } else { "one" };
    query.push_str(&debt::add_clause(
        VectorIndex::Entity,
        "$entity_debt",
        carry,
    ));
    query.push_str(&debt::add_clause(
        VectorIndex::Fact,
        "$fact_debt",
        &format!("{carry}, debt_entity"),
    ));
    params = params
        .set(
            "entity_debt",
            i64::try_from(set.entities.len().saturating_sub(set.fresh_keys.len()))
                .unwrap_or(i64::MAX),
        )
        .set(
            "fact_debt",
            i64::try_from(set.updated_facts.len()).unwrap_or(i64::MAX),
        );
    if fence.is_some() {
        query.push_str(&episode_embedding_clause(
            "episode_embedding",
            "ep, debt_entity, debt_fact",
        ));
        params = params.set("episode_embedding", set.episode_embedding.clone());
        query.push_str(
            "FOREACH (r IN $mentions | \
               MERGE (n:Entity {uuid: r.entity}) \
               MERGE (ep)-[m:MENTIONS {uuid: r.uuid}]->(n) \
               SET m.created_at = coalesce(m.created_at, $now)) \
             SET ep.state = 'complete', ep.entity_edges = $entity_edges, \
                 ep.lease_until = NULL, ep.lease_owner = NULL, ep.unanswered_commits = NULL \
             RETURN ep.uuid AS uuid, debt_entity.stale AS entity_stale, \
                    debt_fact.stale AS fact_stale",
        );
    } else {
        query.push_str(
            "RETURN one, debt_entity.stale AS entity_stale, debt_fact.stale AS fact_stale",
        );
    }
    let facts: Vec<Value> = set.new_facts.iter().map(fact_row).collect();
    let updates: Vec<Value> = set
        .updated_facts
        .iter()
        .map(|u| {
            Value::Map(BTreeMap::from([
                ("uuid".to_owned(), Value::String(u.uuid.to_string())),
                ("source".to_owned(), Value::String(u.source.to_string())),
                ("target".to_owned(), Value::String(u.target.to_string())),
                ("episodes".to_owned(), uuids(&u.episodes)),
                ("invalid_at".to_owned(), super::ts(u.invalid_at)),
                ("expired_at".to_owned(), super::ts(u.expired_at)),
            ]))
        })
        .collect();
    let mentions: Vec<Value> = set
        .mentions
        .iter()
        .map(|e| {
            Value::Map(BTreeMap::from([
                (
                    "uuid".to_owned(),
                    Value::String(link_uuid("MENTIONS", uuid, *e).to_string()),
                ),
                ("entity".to_owned(), Value::String(e.to_string())),
            ]))
        })
        .collect();
    params = params
        .set("facts", Value::List(facts))
        .set("updates", Value::List(updates))
        .set("mentions", Value::List(mentions));
    let res = db.query(graph, &query, &params).await?;
    if res.rows.is_empty() {
        return Ok(None);
    }
    let stale = |c: &str| res.get(0, c).and_then(Value::as_int).unwrap_or(0);
    Ok(Some(Stale {
        entity: stale("entity_stale"),
        fact: stale("fact_stale"),
    }))
}

/// The stale entries of the entity and fact vector indices after a commit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Stale {
    pub entity: i64,
    pub fact: i64,
}
