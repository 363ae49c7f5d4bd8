//! Step 6: fact resolution — candidates for every new fact in one round trip, exact
//! restatements confirmed without the model, at most one model call marking duplicates
//! and contradictions for the facts that need it, then the temporal rules. When a fact
//! needs the model is stated in the ingestion module's docs (step 6).

use std::collections::{BTreeSet, HashMap, HashSet};

use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::IngestUsage;
use super::entities::Resolved;
use super::work::Work;
use crate::Result;
use crate::graph::dedup::normalize_fact;
use crate::graph::extract::{ExtractedFact, GENERIC_RELATION_TYPE, KnownVerdict};
use crate::graph::model::{EntityEdge, Episode, Timestamp};
use crate::graph::prompts::resolve as p;
use crate::graph::store::ingest::{self as st, FactQuery, FactUpdate, KnownFact};
use crate::graph::temporal;
use crate::llm::OutputSchema;

/// The schema name of the fact-resolution call.
pub(crate) const FACT_RESOLUTION_SCHEMA: &str = "fact_resolution";

/// The facts of one episode after resolution.
#[derive(Debug, Default)]
pub(super) struct ResolvedFacts {
    /// Facts this episode creates (times already adjusted by the temporal rules).
    pub new_facts: Vec<EntityEdge>,
    /// Existing facts this episode restated, with the episode added to their support.
    pub confirmed: Vec<EntityEdge>,
    /// Existing facts this episode invalidated, as updated.
    pub invalidated: Vec<EntityEdge>,
    /// The changes to existing facts, for the commit.
    pub updates: Vec<FactUpdate>,
}

pub(super) fn schema() -> OutputSchema {
    OutputSchema::new(
        FACT_RESOLUTION_SCHEMA,
        json!({
            "type": "object",
            "properties": {
                "facts": {
                    "type": "array",
                    "description": "One answer per new fact.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "integer", "description": "The new fact's number."},
                            "duplicate_of": {"type": "integer", "description": "The number of the existing fact it restates, or -1."},
                            "contradicts": {
                                "type": "array",
                                "description": "Numbers of existing facts it contradicts.",
                                "items": {"type": "integer"},
                            },
                        },
                        "required": ["id", "duplicate_of", "contradicts"],
                        "additionalProperties": false,
                    },
                },
            },
            "required": ["facts"],
            "additionalProperties": false,
        }),
    )
}

#[derive(Deserialize)]
struct Answer {
    facts: Vec<AnswerItem>,
}

#[derive(Deserialize)]
struct AnswerItem {
    id: i64,
    duplicate_of: i64,
    contradicts: Vec<i64>,
}

/// Per new fact: the numbers of its same-endpoint candidates and of all its candidates.
struct Offered {
    between: Vec<usize>,
    all: Vec<usize>,
}

pub(super) async fn resolve(
    work: &Work<'_>,
    episode: &Episode,
    extracted: &[ExtractedFact],
    vectors: Vec<Vec<f32>>,
    entities: &Resolved,
    (known, verdicts): (&[KnownFact], &[KnownVerdict]),
    usage: &mut IngestUsage,
) -> Result<ResolvedFacts> {
    let now = Timestamp::now();
    let mut new_facts = Vec::new();
    // Per new fact: the extraction call's verdict on the known facts.
    let mut said: Vec<Option<&KnownVerdict>> = Vec::new();
    let mut keys = HashSet::new();
    for (n, (f, v)) in extracted.iter().zip(vectors).enumerate() {
        let (Some(s), Some(t)) = (entities.node_of(&f.source), entities.node_of(&f.target)) else {
            continue;
        };
        let mut name = f.relation_type.clone();
        if !work
            .ontology
            .relationship_allowed(&entities.label[s], &name, &entities.label[t])
        {
            name = GENERIC_RELATION_TYPE.to_owned();
        }
        let (source, target) = (entities.nodes[s].uuid, entities.nodes[t].uuid);
        if !keys.insert((source, target, name.clone(), normalize_fact(&f.fact))) {
            continue; // the same fact twice in one episode
        }
        let mut edge = EntityEdge::new(source, target, name, &f.fact);
        edge.fact_embedding = Some(v);
        edge.episodes = vec![episode.uuid];
        edge.valid_at = f.valid_at;
        edge.invalid_at = f.invalid_at;
        edge.created_at = now;
        new_facts.push(edge);
        said.push(verdicts.get(n));
    }
    if new_facts.is_empty() {
        return Ok(ResolvedFacts::default());
    }
    let queries: Vec<FactQuery> = new_facts
        .iter()
        .map(|f| FactQuery {
            source: f.source_uuid,
            target: f.target_uuid,
            embedding: f.fact_embedding.clone().unwrap_or_default(),
        })
        .collect();
    let found = super::retry_db_step("fact_candidates", || {
        st::fact_candidates(work.db, work.graph, &queries, work.opts.fact_candidates)
    })
    .await?;

    // Number every distinct candidate once.
    let mut candidates: Vec<EntityEdge> = Vec::new();
    let mut number: HashMap<Uuid, usize> = HashMap::new();
    let mut offered = Vec::with_capacity(new_facts.len());
    for c in found {
        let mut o = Offered {
            between: Vec::new(),
            all: Vec::new(),
        };
        for (edge, same) in c
            .between
            .into_iter()
            .map(|e| (e, true))
            .chain(c.related.into_iter().map(|e| (e, false)))
        {
            let k = *number.entry(edge.uuid).or_insert_with(|| {
                candidates.push(edge);
                candidates.len() - 1
            });
            if !o.all.contains(&k) {
                o.all.push(k);
                if same {
                    o.between.push(k);
                }
            }
        }
        offered.push(o);
    }
    if candidates.is_empty() {
        return Ok(ResolvedFacts {
            new_facts,
            ..ResolvedFacts::default()
        });
    }
    // Exact restatements are confirmed here. A fact whose every candidate that
    // matters was among the known facts the extraction call judged takes that
    // verdict; the model sees only the other facts whose candidates could be a
    // paraphrase or a contradiction that changes a date.
    let shown: HashMap<Uuid, usize> = known
        .iter()
        .enumerate()
        .map(|(k, f)| (f.edge.uuid, k))
        .collect();
    let restated: Vec<Option<usize>> = new_facts
        .iter()
        .zip(&offered)
        .map(|(f, o)| exact_restatement(f, &candidates, &o.between))
        .collect();
    let mut judged: HashMap<usize, (Option<usize>, Vec<usize>)> = HashMap::new();
    let asked: Vec<bool> = new_facts
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if restated[i].is_some() {
                return false;
            }
            let needed = matters(f, &candidates, &offered[i]);
            if needed.is_empty() {
                return false;
            }
            let covered = needed.iter().all(|&k| shown.contains_key(&candidates[k].uuid));
            match said[i] {
                Some(verdict) if covered => {
                    judged.insert(i, from_known(verdict, known, &number));
                    false
                }
                _ => true,
            }
        })
        .collect();
    tracing::debug!(
        facts = new_facts.len(),
        restated = restated.iter().filter(|r| r.is_some()).count(),
        judged = judged.len(),
        asked = asked.iter().filter(|a| **a).count(),
        "fact resolution"
    );
    let mut answers = if asked.contains(&true) {
        ask_model(work, &new_facts, &candidates, &offered, &asked, usage).await?
    } else {
        HashMap::new()
    };
    answers.extend(judged);
    for (i, r) in restated.iter().enumerate() {
        if let Some(k) = r {
            answers.insert(i, (Some(*k), Vec::new()));
        }
    }

    let mut confirmed: BTreeSet<usize> = BTreeSet::new();
    let mut invalidated: BTreeSet<usize> = BTreeSet::new();
    let mut kept = Vec::with_capacity(new_facts.len());
    for (i, mut fact) in new_facts.into_iter().enumerate() {
        let (dup, contradicts) = answers.get(&i).cloned().unwrap_or((None, Vec::new()));
        if let Some(k) = dup.filter(|k| offered[i].between.contains(k)) {
            let existing = &mut candidates[k];
            if !existing.episodes.contains(&episode.uuid) {
                existing.episodes.push(episode.uuid);
            }
            confirmed.insert(k);
            continue;
        }
        let ks: Vec<usize> = contradicts
            .into_iter()
            .filter(|k| offered[i].all.contains(k))
            .collect();
        if !ks.is_empty() {
            let mut current: Vec<EntityEdge> = ks.iter().map(|&k| candidates[k].clone()).collect();
            let resolution = temporal::resolve_edges(&fact, &current, now);
            resolution.apply(&mut fact, &mut current);
            for (k, edge) in ks.iter().zip(current) {
                if edge.expired_at != candidates[*k].expired_at
                    || edge.invalid_at != candidates[*k].invalid_at
                {
                    candidates[*k] = edge;
                    invalidated.insert(*k);
                }
            }
        }
        kept.push(fact);
    }
    let touched: BTreeSet<usize> = confirmed.union(&invalidated).copied().collect();
    Ok(ResolvedFacts {
        new_facts: kept,
        confirmed: confirmed.iter().map(|&k| candidates[k].clone()).collect(),
        invalidated: invalidated.iter().map(|&k| candidates[k].clone()).collect(),
        updates: touched
            .into_iter()
            .map(|k| {
                let c = &candidates[k];
                FactUpdate {
                    uuid: c.uuid,
                    source: c.source_uuid,
                    target: c.target_uuid,
                    episodes: c.episodes.clone(),
                    invalid_at: c.invalid_at,
                    expired_at: c.expired_at,
                }
            })
            .collect(),
    })
}

/// The stored fact `fact` restates word for word, if any: the first candidate between
/// the same two entities with the same source, the same target, the same relation name
/// and the same [`normalize_fact`] text, whose span the new fact's dates do not leave
/// ([`temporal::adds_no_date`]).
fn exact_restatement(
    fact: &EntityEdge,
    candidates: &[EntityEdge],
    between: &[usize],
) -> Option<usize> {
    let text = normalize_fact(&fact.fact);
    let times = temporal::FactTimes::from(fact);
    between.iter().copied().find(|&k| {
        let c = &candidates[k];
        c.source_uuid == fact.source_uuid
            && c.target_uuid == fact.target_uuid
            && c.name == fact.name
            && normalize_fact(&c.fact) == text
            && temporal::adds_no_date(&times, &temporal::FactTimes::from(c))
    })
}

/// The candidates of `fact` (not an exact restatement) a model's answer about could
/// change the graph: every candidate between the same entities (it could be a
/// paraphrase), and every other candidate whose contradiction would change a date
/// ([`temporal::could_take_effect`]). None: no call needed.
fn matters(fact: &EntityEdge, candidates: &[EntityEdge], offered: &Offered) -> Vec<usize> {
    let times = temporal::FactTimes::from(fact);
    offered
        .all
        .iter()
        .copied()
        .filter(|&k| {
            offered.between.contains(&k)
                || temporal::could_take_effect(&times, &temporal::FactTimes::from(&candidates[k]))
        })
        .collect()
}

/// The extraction call's verdict on the known facts as candidate numbers (a known
/// fact that is no candidate of this episode drops out; the caller then checks each
/// number against the fact's own candidates, as for the resolution call's answer).
fn from_known(
    verdict: &KnownVerdict,
    known: &[KnownFact],
    number: &HashMap<Uuid, usize>,
) -> (Option<usize>, Vec<usize>) {
    let candidate = |k: &usize| known.get(*k).and_then(|f| number.get(&f.edge.uuid)).copied();
    (
        verdict.restates.as_ref().and_then(candidate),
        verdict.contradicts.iter().filter_map(candidate).collect(),
    )
}

pub(super) fn span(valid_at: Option<Timestamp>, invalid_at: Option<Timestamp>) -> String {
    let t = |x: Option<Timestamp>| x.map_or_else(|| "null".to_owned(), |t| t.to_rfc3339());
    format!("valid_at {} → invalid_at {}", t(valid_at), t(invalid_at))
}

/// The one batched call: per new fact with `asked[i]`, its duplicate (if any) and the
/// facts it contradicts, as candidate numbers. Answers about other facts are ignored.
async fn ask_model(
    work: &Work<'_>,
    new_facts: &[EntityEdge],
    candidates: &[EntityEdge],
    offered: &[Offered],
    asked: &[bool],
    usage: &mut IngestUsage,
) -> Result<HashMap<usize, (Option<usize>, Vec<usize>)>> {
    let mut user = String::from(
        "For every new fact, name the existing fact it restates (if any) and the existing \
         facts it contradicts.\n\n",
    );
    for (i, fact) in new_facts.iter().enumerate() {
        if !asked[i] {
            continue;
        }
        let options: Vec<String> = offered[i]
            .all
            .iter()
            .map(|&k| {
                let c = &candidates[k];
                let kind = if offered[i].between.contains(&k) {
                    "same entities"
                } else {
                    "related"
                };
                format!(
                    "existing {k} ({kind}): {} [{}]",
                    c.fact,
                    span(c.valid_at, c.invalid_at)
                )
            })
            .collect();
        if options.is_empty() {
            continue;
        }
        p::item(
            &mut user,
            "NEW_FACT",
            &format!(
                "new fact {i}: {} [{}]",
                fact.fact,
                span(fact.valid_at, fact.invalid_at)
            ),
            &options,
        );
    }
    let answer: Answer = work
        .ask(schema(), p::FACTS_SYSTEM, user, "resolve_facts", usage)
        .await?;
    let mut out = HashMap::new();
    for item in answer.facts {
        let Ok(i) = usize::try_from(item.id) else {
            continue;
        };
        if !asked.get(i).copied().unwrap_or(false) {
            continue;
        }
        let dup = usize::try_from(item.duplicate_of).ok();
        let contradicts = item
            .contradicts
            .into_iter()
            .filter_map(|k| usize::try_from(k).ok())
            .collect();
        out.insert(i, (dup, contradicts));
    }
    Ok(out)
}
