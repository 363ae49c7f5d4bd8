//! Step 5: entity resolution — existing candidates for every name in one round trip,
//! the deterministic pass, and at most one model call for what stays ambiguous.
//!
//! A name the deterministic pass leaves new still goes to the model with the stored
//! entities among **its own** candidates whose name embedding's cosine similarity to
//! the name's, as the server computed it
//! ([`EntityCandidate::similarity`](crate::graph::store::EntityCandidate)), is at least
//! [`EngineOptions::entity_similarity`](super::EngineOptions::entity_similarity). No
//! embedding is read back: an entity that existed keeps its stored embedding (the
//! commit writes a name embedding only onto an entity that has none), so the
//! resolved node of a stored entity carries none.

use std::collections::{BTreeSet, HashMap};

use super::IngestUsage;
use super::work::Work;
use crate::Result;
use crate::graph::dedup::{self, Candidate, Match, normalize_name};
use crate::graph::extract::ExtractedEntity;
use crate::graph::model::EntityNode;
use crate::graph::prompts::resolve as p;
use crate::graph::store::{self, CandidateQuery};
use crate::llm::OutputSchema;
use crate::ontology::GENERIC_ENTITY_LABEL;
use serde::Deserialize;
use serde_json::json;

/// The schema name of the entity-resolution call.
pub(crate) const ENTITY_RESOLUTION_SCHEMA: &str = "entity_resolution";

/// The entities of one episode after resolution.
#[derive(Debug, Default)]
pub(super) struct Resolved {
    /// Distinct entities the episode mentions: existing ones (as stored, plus new
    /// labels) and new ones.
    pub nodes: Vec<EntityNode>,
    /// `is_new[i]`: whether `nodes[i]` is created by this episode.
    pub is_new: Vec<bool>,
    /// Normalised extracted name → index in `nodes`.
    pub by_name: HashMap<String, usize>,
    /// `label[i]`: the extracted type of `nodes[i]` (`Entity` when generic).
    pub label: Vec<String>,
    /// The normalised names of the new nodes no stored entity had when the candidates
    /// were read. The commit refuses to create them if one has appeared since (another
    /// process created it concurrently), and the episode is resolved again.
    pub fresh_keys: Vec<String>,
}

impl Resolved {
    /// The node an extracted name resolved to.
    pub fn node_of(&self, name: &str) -> Option<usize> {
        self.by_name.get(&normalize_name(name)).copied()
    }
}

pub(super) fn schema() -> OutputSchema {
    OutputSchema::new(
        ENTITY_RESOLUTION_SCHEMA,
        json!({
            "type": "object",
            "properties": {
                "resolutions": {
                    "type": "array",
                    "description": "One answer per item.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "integer", "description": "The item's number."},
                            "duplicate_of": {"type": "integer", "description": "The matching candidate's number, or -1."},
                        },
                        "required": ["id", "duplicate_of"],
                        "additionalProperties": false,
                    },
                },
            },
            "required": ["resolutions"],
            "additionalProperties": false,
        }),
    )
}

#[derive(Deserialize)]
struct Answer {
    resolutions: Vec<AnswerItem>,
}

#[derive(Deserialize)]
struct AnswerItem {
    id: i64,
    duplicate_of: i64,
}

pub(super) async fn resolve(
    work: &Work<'_>,
    extracted: &[ExtractedEntity],
    vectors: Vec<Vec<f32>>,
    usage: &mut IngestUsage,
) -> Result<Resolved> {
    if extracted.is_empty() {
        return Ok(Resolved::default());
    }
    let queries: Vec<CandidateQuery> = extracted
        .iter()
        .zip(&vectors)
        .map(|(e, v)| CandidateQuery::new(&e.name).with_embedding(v.clone()))
        .collect();
    let limit = work
        .opts
        .entity_candidates
        .clamp(1, store::MAX_CANDIDATE_LIMIT);
    let found = super::retry_db_step("entity_candidates", || {
        store::entity_candidates(work.db, work.graph, &queries, limit)
    })
    .await?;
    // The union of every name's candidates (first occurrence kept), and per name the
    // server's similarity to each of its own candidates.
    let mut existing: Vec<EntityNode> = Vec::new();
    let mut has_embedding: Vec<bool> = Vec::new();
    let mut index_of: HashMap<uuid::Uuid, usize> = HashMap::new();
    let mut similar: Vec<Vec<(usize, f32)>> = Vec::with_capacity(found.len());
    for list in found {
        let mut own = Vec::new();
        for candidate in list {
            let k = *index_of.entry(candidate.entity.uuid).or_insert_with(|| {
                existing.push(candidate.entity);
                has_embedding.push(candidate.has_embedding);
                existing.len() - 1
            });
            if let Some(s) = candidate.similarity {
                own.push((k, s));
            }
        }
        similar.push(own);
    }
    let wanted: Vec<Candidate> = extracted.iter().map(|e| Candidate::new(&e.name)).collect();
    let stored: Vec<Candidate> = existing
        .iter()
        .map(|n| Candidate::with_uuid(n.uuid, &n.name))
        .collect();
    let resolution = dedup::resolve(&wanted, &stored);

    // Existing index chosen per extracted name (None: new), before SameAs is followed.
    let mut choice: Vec<Option<usize>> = vec![None; extracted.len()];
    let mut ambiguous: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, m) in resolution.matches.iter().enumerate() {
        match m {
            Match::Exact(k) | Match::Fuzzy(k, _) => choice[i] = Some(*k),
            Match::Ambiguous(ks) => ambiguous.push((i, ks.clone())),
            Match::New => {
                // Not matched by name, but an existing entity's name means nearly the
                // same: the model decides, as for any other ambiguous name.
                let mut close: Vec<usize> = similar
                    .get(i)
                    .into_iter()
                    .flatten()
                    .filter(|(_, s)| *s >= work.opts.entity_similarity)
                    .map(|(k, _)| *k)
                    .collect();
                close.sort_unstable();
                close.dedup();
                if !close.is_empty() {
                    ambiguous.push((i, close));
                }
            }
            Match::SameAs(_) => {}
        }
    }
    if !ambiguous.is_empty() {
        ask_model(work, extracted, &existing, &ambiguous, &mut choice, usage).await?;
    }
    for (i, m) in resolution.matches.iter().enumerate() {
        if let Match::SameAs(j) = m {
            choice[i] = choice[*j];
        }
    }

    let mut out = Resolved::default();
    // Whether `out.nodes[i]` is a stored entity that has a name embedding (kept by
    // the commit, so none is sent).
    let mut embedded: Vec<bool> = Vec::new();
    let mut node_of_existing: HashMap<usize, usize> = HashMap::new();
    let mut node_of_new: HashMap<usize, usize> = HashMap::new();
    for (i, entity) in extracted.iter().enumerate() {
        let root = match resolution.matches[i] {
            Match::SameAs(j) => j,
            _ => i,
        };
        let index = match choice[i] {
            Some(k) => *node_of_existing.entry(k).or_insert_with(|| {
                out.nodes.push(existing[k].clone());
                embedded.push(has_embedding[k]);
                out.is_new.push(false);
                out.label.push(GENERIC_ENTITY_LABEL.to_owned());
                out.nodes.len() - 1
            }),
            None => *node_of_new.entry(root).or_insert_with(|| {
                let mut node = EntityNode::new(&extracted[root].name);
                node.created_at = crate::graph::Timestamp::now();
                out.nodes.push(node);
                embedded.push(false);
                out.is_new.push(true);
                out.label.push(GENERIC_ENTITY_LABEL.to_owned());
                out.nodes.len() - 1
            }),
        };
        let node = &mut out.nodes[index];
        if node.name_embedding.is_none() && !embedded[index] {
            node.name_embedding = vectors.get(i).cloned();
        }
        if entity.label != GENERIC_ENTITY_LABEL {
            if !node.labels.contains(&entity.label) {
                node.labels.push(entity.label.clone());
                node.labels.sort();
            }
            if out.label[index] == GENERIC_ENTITY_LABEL {
                out.label[index] = entity.label.clone();
            }
        }
        out.by_name.insert(normalize_name(&entity.name), index);
    }
    let stored_keys: BTreeSet<String> = existing.iter().map(|n| normalize_name(&n.name)).collect();
    let fresh: BTreeSet<String> = out
        .nodes
        .iter()
        .zip(&out.is_new)
        .filter(|(_, new)| **new)
        .map(|(n, _)| normalize_name(&n.name))
        .filter(|k| !stored_keys.contains(k))
        .collect();
    out.fresh_keys = fresh.into_iter().collect();
    Ok(out)
}

/// The one batched call for the ambiguous names; fills `choice`. A number the model
/// was not offered for an item counts as "none of them".
async fn ask_model(
    work: &Work<'_>,
    extracted: &[ExtractedEntity],
    existing: &[EntityNode],
    ambiguous: &[(usize, Vec<usize>)],
    choice: &mut [Option<usize>],
    usage: &mut IngestUsage,
) -> Result<()> {
    let mut user =
        String::from("Decide for every item whether the new name is one of its candidates.\n\n");
    for (i, ks) in ambiguous {
        let options: Vec<String> = ks
            .iter()
            .map(|&k| {
                let n = &existing[k];
                let labels = if n.labels.is_empty() {
                    GENERIC_ENTITY_LABEL.to_owned()
                } else {
                    n.labels.join(", ")
                };
                format!("candidate {k}: {} ({labels}) — {}", n.name, n.summary)
            })
            .collect();
        p::item(
            &mut user,
            "ITEM",
            &format!("item {i}: {} ({})", extracted[*i].name, extracted[*i].label),
            &options,
        );
    }
    let answer: Answer = work
        .ask(
            schema(),
            p::ENTITIES_SYSTEM,
            user,
            "resolve_entities",
            usage,
        )
        .await?;
    for item in answer.resolutions {
        let Some((i, ks)) = ambiguous
            .iter()
            .find(|(i, _)| i64::try_from(*i).ok() == Some(item.id))
        else {
            continue;
        };
        choice[*i] = usize::try_from(item.duplicate_of)
            .ok()
            .filter(|k| ks.contains(k));
    }
    Ok(())
}
