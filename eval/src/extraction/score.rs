//! Scoring a story's run against its gold graph.
//!
//! # The match rules
//!
//! **Entities.** A stored entity refers to the gold entity whose canonical name or
//! one of whose aliases equals its name under [`normalise`] (case, punctuation and
//! spacing aside). Stored entities are taken in name order; the first that refers
//! to a gold entity is a true positive, every further one referring to the same gold
//! entity is a **duplicate** and counts as a false positive, as does one that refers
//! to none. Gold entities no stored entity refers to are false negatives. A true
//! positive's type is right when the gold type is `Entity` or among its labels.
//!
//! **Facts.** The gold side is every gold fact except the restatements
//! (`duplicate_of`), which a correct run merges into the fact they restate. A stored
//! fact is a *candidate* for a gold fact when its source and target entities refer
//! to the gold fact's source and target (same direction) and either its relation
//! equals the gold relation under [`normalise_relation`] or the cosine similarity of
//! the two fact texts, embedded by the run's embedder, is at least
//! [`FACT_SIMILARITY`]. A candidate's score is that similarity, plus 1 when the
//! relations are equal. Pairs are taken greedily, best score first (ties: gold order,
//! then stored order), each fact on either side at most once: taken pairs are true
//! positives, stored facts left over false positives, gold facts left over false
//! negatives.
//!
//! **Times.** A matched fact's times are right when its `valid_at` is within
//! [`TIME_TOLERANCE_DAYS`] of the gold one (both unknown counts as equal) and so is
//! its `invalid_at` of the gold end: the gold invalidation's time when a later
//! episode ends it, else the gold fact's own `invalid_at`.
//!
//! **Invalidations.** A gold invalidation is right when the gold fact it ends is
//! matched and the stored fact has an `invalid_at` and an `expired_at`; its timing
//! error is the distance in days between the stored and the gold `invalid_at`. A
//! stored fact that is expired while its gold fact never ends is a spurious
//! invalidation. Accuracy is right / (gold invalidations + spurious ones).
//!
//! **Attribution.** A gold fact with markers keeps them when it is matched and the
//! stored text contains every marker as a phrase (under [`normalise`]).
//!
//! **Attributes.** Each gold attribute of an entity is right when the stored entity
//! (its true positive) has the same value (strings under [`normalise`]).

use std::collections::BTreeMap;

use gralkor::graph::EntityEdge;
use gralkor::llm::Embedder;
use gralkor::ontology::GENERIC_ENTITY_LABEL;
use gralkor::storage::Timestamp;
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::run::{EpisodeCost, StoryRun};
use super::story::Story;
use crate::Result;
use crate::text::{contains_phrase, normalise, normalise_relation};

/// The least cosine similarity of two fact texts that matches them across different
/// relation names.
pub const FACT_SIMILARITY: f32 = 0.7;

/// How far (in days) a stored time may be from the gold one and still be right.
pub const TIME_TOLERANCE_DAYS: f64 = 1.0;

const MICROS_PER_DAY: f64 = 86_400e6;

/// Counts of a precision/recall measure.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Counts {
    /// True positives.
    pub tp: u64,
    /// False positives.
    pub fp: u64,
    /// False negatives.
    pub fn_: u64,
}

impl Counts {
    /// tp / (tp + fp); 1 when nothing was expected nor found, 0 when nothing was
    /// found but something was expected.
    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp, self.fn_ == 0)
    }

    /// tp / (tp + fn); 1 when nothing was expected.
    pub fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_, true)
    }

    /// Precision as a report shows it: `None` (n/a) when nothing was found, so an
    /// empty run never reads as 100.
    ///
    /// ```
    /// use gralkor_eval::extraction::Counts;
    /// let empty = Counts { tp: 0, fp: 0, fn_: 0 };
    /// assert_eq!(empty.precision(), 1.0);
    /// assert_eq!((empty.measured_precision(), empty.measured_recall(), empty.measured_f1()), (None, None, None));
    /// let found_nothing = Counts { tp: 0, fp: 0, fn_: 3 };
    /// assert_eq!(found_nothing.measured_precision(), None);
    /// assert_eq!(found_nothing.measured_recall(), Some(0.0));
    /// ```
    pub fn measured_precision(&self) -> Option<f64> {
        (self.tp + self.fp > 0).then(|| self.precision())
    }

    /// Recall as a report shows it: `None` (n/a) when nothing was expected.
    pub fn measured_recall(&self) -> Option<f64> {
        (self.tp + self.fn_ > 0).then(|| self.recall())
    }

    /// F1 as a report shows it: `None` (n/a) when precision or recall is.
    pub fn measured_f1(&self) -> Option<f64> {
        self.measured_precision()
            .zip(self.measured_recall())
            .map(|_| self.f1())
    }

    /// The harmonic mean of precision and recall.
    pub fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }

    fn add(&mut self, o: &Counts) {
        self.tp += o.tp;
        self.fp += o.fp;
        self.fn_ += o.fn_;
    }
}

fn ratio(num: u64, den: u64, empty: bool) -> f64 {
    if den == 0 {
        if empty { 1.0 } else { 0.0 }
    } else {
        num as f64 / den as f64
    }
}

/// A share: `right` of `total`.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Share {
    /// How many were right.
    pub right: u64,
    /// Out of how many.
    pub total: u64,
}

impl Share {
    /// right / total, `None` when there was nothing to count.
    pub fn value(&self) -> Option<f64> {
        (self.total > 0).then(|| self.right as f64 / self.total as f64)
    }

    fn add(&mut self, o: &Share) {
        self.right += o.right;
        self.total += o.total;
    }
}

/// Every measure of one story (or of all of them, added up).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Scores {
    /// Episodes ingested.
    pub episodes: u64,
    /// Episodes that failed.
    pub failed_episodes: u64,
    /// Entities after resolution.
    pub entities: Counts,
    /// Of them, duplicates of a gold entity already matched.
    pub duplicate_entities: u64,
    /// Entity types right, of the matched entities.
    pub types: Share,
    /// Facts.
    pub facts: Counts,
    /// Matched facts whose times are right.
    pub times: Share,
    /// Invalidations right, of the gold ones plus the spurious ones.
    pub invalidations: Share,
    /// Spurious invalidations.
    pub spurious_invalidations: u64,
    /// Sum of the timing errors of the right invalidations, in days.
    pub invalidation_error_days: f64,
    /// Gold facts with markers that kept them.
    pub attribution: Share,
    /// Gold attributes right.
    pub attributes: Share,
    /// Language-model calls.
    pub llm_calls: u64,
    /// Prompt plus completion tokens.
    pub tokens: u64,
    /// Embedding requests.
    pub embedding_calls: u64,
    /// Wall time of the ingestions, in milliseconds.
    pub wall_ms: f64,
}

impl Scores {
    /// Mean timing error of the right invalidations, in days.
    pub fn mean_invalidation_error_days(&self) -> Option<f64> {
        (self.invalidations.right > 0)
            .then(|| self.invalidation_error_days / self.invalidations.right as f64)
    }

    /// Adds another story's scores to these.
    pub fn add(&mut self, o: &Scores) {
        self.episodes += o.episodes;
        self.failed_episodes += o.failed_episodes;
        self.entities.add(&o.entities);
        self.duplicate_entities += o.duplicate_entities;
        self.types.add(&o.types);
        self.facts.add(&o.facts);
        self.times.add(&o.times);
        self.invalidations.add(&o.invalidations);
        self.spurious_invalidations += o.spurious_invalidations;
        self.invalidation_error_days += o.invalidation_error_days;
        self.attribution.add(&o.attribution);
        self.attributes.add(&o.attributes);
        self.llm_calls += o.llm_calls;
        self.tokens += o.tokens;
        self.embedding_calls += o.embedding_calls;
        self.wall_ms += o.wall_ms;
    }
}

/// A story's scores with what explains them.
#[derive(Debug, Clone, Serialize)]
pub struct StoryScore {
    /// The story.
    pub story: String,
    /// What it exercises.
    pub covers: Vec<String>,
    /// The measures.
    pub scores: Scores,
    /// The cost of each episode.
    pub episodes: Vec<EpisodeCost>,
    /// Gold facts with no stored match (ids).
    pub missed_facts: Vec<String>,
    /// Stored facts with no gold match (texts).
    pub extra_facts: Vec<String>,
    /// Stored entities with no gold entity, or duplicates (names).
    pub extra_entities: Vec<String>,
}

fn days(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<f64> {
    match (a, b) {
        (None, None) => Some(0.0),
        (Some(a), Some(b)) => Some((a.0 - b.0).abs() as f64 / MICROS_PER_DAY),
        _ => None,
    }
}

fn within(a: Option<Timestamp>, b: Option<Timestamp>) -> bool {
    days(a, b).is_some_and(|d| d <= TIME_TOLERANCE_DAYS)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => normalise(x) == normalise(y),
        _ => a == b,
    }
}

/// Scores `run` against `story`'s gold graph; fact texts are compared with
/// `embedder` (one request for all of them).
pub async fn score_story(
    story: &Story,
    run: &StoryRun,
    embedder: &dyn Embedder,
) -> Result<StoryScore> {
    let mut s = Scores {
        episodes: run.episodes.len() as u64,
        ..Scores::default()
    };
    for e in &run.episodes {
        s.failed_episodes += u64::from(e.error.is_some());
        s.llm_calls += u64::from(e.llm_calls);
        s.tokens += e.prompt_tokens + e.completion_tokens;
        s.embedding_calls += u64::from(e.embedding_calls);
        s.wall_ms += e.wall_ms;
    }

    // Entities.
    let gold_entities = &story.gold.entities;
    let mut refers: BTreeMap<Uuid, usize> = BTreeMap::new();
    let mut matched: Vec<Option<usize>> = vec![None; gold_entities.len()];
    let mut extra_entities = Vec::new();
    for (k, node) in run.entities.iter().enumerate() {
        match story.entity_of(&node.name) {
            Some(g) => {
                refers.insert(node.uuid, g);
                if matched[g].is_none() {
                    matched[g] = Some(k);
                    s.entities.tp += 1;
                } else {
                    s.entities.fp += 1;
                    s.duplicate_entities += 1;
                    extra_entities.push(format!("{} (duplicate)", node.name));
                }
            }
            None => {
                s.entities.fp += 1;
                extra_entities.push(node.name.clone());
            }
        }
    }
    s.entities.fn_ = matched.iter().filter(|m| m.is_none()).count() as u64;
    for (g, m) in matched.iter().enumerate() {
        let Some(k) = m else { continue };
        let gold = &gold_entities[g];
        let node = &run.entities[*k];
        s.types.total += 1;
        if gold.label == GENERIC_ENTITY_LABEL || node.labels.contains(&gold.label) {
            s.types.right += 1;
        }
    }
    for (g, gold) in gold_entities.iter().enumerate() {
        for (key, value) in &gold.attributes {
            s.attributes.total += 1;
            let stored = matched[g].and_then(|k| run.entities[k].attributes.get(key));
            if stored.is_some_and(|v| same_value(v, value)) {
                s.attributes.right += 1;
            }
        }
    }

    // Facts.
    let gold_facts: Vec<_> = story.final_facts().collect();
    let mut texts: Vec<String> = run.facts.iter().map(|f| f.fact.clone()).collect();
    texts.extend(gold_facts.iter().map(|f| f.fact.clone()));
    let vectors = if texts.is_empty() {
        Vec::new()
    } else {
        embedder.embed(&texts, "eval-score").await?
    };
    let (stored_vecs, gold_vecs) = vectors.split_at(run.facts.len().min(vectors.len()));
    let endpoint = |f: &EntityEdge| (refers.get(&f.source_uuid), refers.get(&f.target_uuid));
    let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
    for (gi, g) in gold_facts.iter().enumerate() {
        let want = (story.entity_of(&g.source), story.entity_of(&g.target));
        for (pi, p) in run.facts.iter().enumerate() {
            let (Some(&ps), Some(&pt)) = endpoint(p) else {
                continue;
            };
            if (Some(ps), Some(pt)) != want {
                continue;
            }
            let same_relation = normalise_relation(&p.name) == normalise_relation(&g.relation);
            let sim = match (stored_vecs.get(pi), gold_vecs.get(gi)) {
                (Some(a), Some(b)) => cosine(a, b),
                _ => 0.0,
            };
            if same_relation || sim >= FACT_SIMILARITY {
                pairs.push((sim + if same_relation { 1.0 } else { 0.0 }, gi, pi));
            }
        }
    }
    pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut gold_match: Vec<Option<usize>> = vec![None; gold_facts.len()];
    let mut stored_taken = vec![false; run.facts.len()];
    for (_, gi, pi) in pairs {
        if gold_match[gi].is_none() && !stored_taken[pi] {
            gold_match[gi] = Some(pi);
            stored_taken[pi] = true;
        }
    }
    s.facts.tp = gold_match.iter().filter(|m| m.is_some()).count() as u64;
    s.facts.fn_ = gold_facts.len() as u64 - s.facts.tp;
    s.facts.fp = run.facts.len() as u64 - s.facts.tp;
    let missed_facts = gold_facts
        .iter()
        .zip(&gold_match)
        .filter(|(_, m)| m.is_none())
        .map(|(g, _)| g.id.clone())
        .collect();
    let extra_facts = run
        .facts
        .iter()
        .zip(&stored_taken)
        .filter(|(_, t)| !**t)
        .map(|(f, _)| f.fact.clone())
        .collect();

    // Times, invalidations, attribution.
    let ends: BTreeMap<&str, Timestamp> = story
        .gold
        .invalidations
        .iter()
        .map(|v| (v.fact.as_str(), v.invalid_at))
        .collect();
    for (gi, g) in gold_facts.iter().enumerate() {
        let stored = gold_match[gi].map(|pi| &run.facts[pi]);
        let gold_end = ends.get(g.id.as_str()).copied().or(g.invalid_at);
        if let Some(p) = stored {
            s.times.total += 1;
            if within(p.valid_at, g.valid_at) && within(p.invalid_at, gold_end) {
                s.times.right += 1;
            }
            if gold_end.is_none() && p.expired_at.is_some() {
                s.spurious_invalidations += 1;
            }
        }
        if !g.markers.is_empty() {
            s.attribution.total += 1;
            if stored.is_some_and(|p| g.markers.iter().all(|m| contains_phrase(&p.fact, m))) {
                s.attribution.right += 1;
            }
        }
    }
    for v in &story.gold.invalidations {
        s.invalidations.total += 1;
        let Some(gi) = gold_facts.iter().position(|g| g.id == v.fact) else {
            continue;
        };
        let Some(p) = gold_match[gi].map(|pi| &run.facts[pi]) else {
            continue;
        };
        if p.expired_at.is_some()
            && let Some(d) =
                days(p.invalid_at, Some(v.invalid_at)).filter(|_| p.invalid_at.is_some())
        {
            s.invalidations.right += 1;
            s.invalidation_error_days += d;
        }
    }
    s.invalidations.total += s.spurious_invalidations;

    Ok(StoryScore {
        story: story.name.clone(),
        covers: story.covers.clone(),
        scores: s,
        episodes: run.episodes.clone(),
        missed_facts,
        extra_facts,
        extra_entities,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extraction::story::Story;
    use gralkor::graph::EntityNode;
    use gralkor::llm::doubles::HashEmbedder;

    fn story() -> Story {
        serde_json::from_value(serde_json::json!({
            "name": "t",
            "episodes": [{"id": "e1", "source": "text", "reference_time": "2025-01-01T00:00:00Z",
                          "content": "Ada works at Acme."}],
            "gold": {
                "entities": [{"name": "Ada Lovelace", "aliases": ["Ada"]}, {"name": "Acme"}],
                "facts": [{"id": "f1", "episode": "e1", "source": "Ada Lovelace", "target": "Acme",
                           "relation": "WORKS_AT", "fact": "Ada works at Acme.",
                           "valid_at": "2025-01-01T00:00:00Z", "markers": ["works"]}]
            }
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn duplicates_and_unmatched_items_count_against_and_relations_or_texts_match_facts() {
        let story = story();
        let (ada, ada2, acme, other) = (
            EntityNode::new("Ada"),
            EntityNode::new("ada lovelace"),
            EntityNode::new("ACME"),
            EntityNode::new("Zed"),
        );
        let mut good = EntityEdge::new(ada2.uuid, acme.uuid, "employed by", "Ada works at Acme.");
        good.valid_at = Some("2025-01-02T00:00:00Z".parse().unwrap());
        // Same endpoints, different relation, unrelated text: no candidate.
        let unrelated = EntityEdge::new(ada.uuid, acme.uuid, "LIKES", "Ada likes the rain.");
        // Reversed endpoints never match.
        let reversed = EntityEdge::new(acme.uuid, ada.uuid, "WORKS_AT", "Ada works at Acme.");
        let run = StoryRun {
            story: "t".into(),
            episodes: vec![],
            entities: vec![ada, ada2, acme, other],
            facts: vec![unrelated, good, reversed],
        };
        let s = score_story(&story, &run, &HashEmbedder::new(64))
            .await
            .unwrap();
        let c = s.scores;
        // Ada and ada lovelace are one gold entity: the second is a duplicate; Zed is extra.
        assert_eq!((c.entities.tp, c.entities.fp, c.entities.fn_), (2, 2, 0));
        assert_eq!(c.duplicate_entities, 1);
        // The fact matches by its text (cosine 1) across relation names, within a day.
        assert_eq!((c.facts.tp, c.facts.fp, c.facts.fn_), (1, 2, 0));
        assert_eq!((c.times.right, c.times.total), (1, 1));
        assert_eq!((c.attribution.right, c.attribution.total), (1, 1));
        assert_eq!(
            s.extra_entities,
            vec!["ada lovelace (duplicate)".to_string(), "Zed".to_string()]
        );
        assert_eq!(c.entities.precision(), 0.5);
        assert!((c.facts.f1() - 0.5).abs() < 1e-9);
    }

    #[test]
    fn empty_sides_have_defined_scores() {
        let none = Counts::default();
        assert_eq!(
            (none.precision(), none.recall(), none.f1()),
            (1.0, 1.0, 1.0)
        );
        let missed = Counts {
            tp: 0,
            fp: 0,
            fn_: 3,
        };
        assert_eq!(
            (missed.precision(), missed.recall(), missed.f1()),
            (0.0, 0.0, 0.0)
        );
        assert_eq!(Share::default().value(), None);
    }
}
