//! Fact resolution without a model call: exact restatements are confirmed by the
//! engine, and only facts whose candidates could be a paraphrase or a date-changing
//! contradiction reach the model (test-trees/graph-ingest.md, "fact resolution —
//! which facts reach the model").

use crate::common;

use std::sync::Arc;

use common::graph::t;
use common::ingest::{Fact, Rules, World, extraction};
use common::{TestGraph, all_facts};
use gralkor::graph::{AddEpisode, EntityEdge, EpisodeOutcome, SourceKind};
use uuid::Uuid;

const JAN: &str = "2024-01-10T00:00:00Z";
const JUN: &str = "2024-06-01T00:00:00Z";
const MAR: &str = "2025-03-01T00:00:00Z";

fn find<'a>(facts: &'a [EntityEdge], text: &str) -> &'a EntityEdge {
    let found: Vec<&EntityEdge> = facts.iter().filter(|f| f.fact == text).collect();
    assert_eq!(found.len(), 1, "{text}: {facts:#?}");
    found[0]
}

/// The new facts offered to the fact-resolution calls so far, in order.
fn asked(w: &World) -> Vec<String> {
    w.model
        .calls_for("fact_resolution")
        .iter()
        .flat_map(|c| {
            c.messages
                .iter()
                .flat_map(|m| m.content.lines().map(str::to_owned).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        })
        .filter_map(|l| {
            let rest = l.strip_prefix("new fact ")?;
            let text = rest.split_once(": ")?.1;
            Some(text.split(" [valid_at").next()?.to_owned())
        })
        .collect()
}

async fn ingest(w: &World, g: &TestGraph, content: &str, when: &str) -> EpisodeOutcome {
    w.engine
        .add_episode(&g.name, AddEpisode::new(content, SourceKind::Text, t(when)))
        .await
        .unwrap()
}

/// Rules of a perfect model for Alice's job and home: a fact about Acme is a duplicate
/// of another about Acme; two jobs, or two homes, contradict.
fn rules() -> Rules {
    let kind = |f: &str| {
        if f.contains("works at") || f.contains("employed by") {
            "job"
        } else if f.contains("lives in") {
            "home"
        } else {
            "other"
        }
    };
    let place = |f: &str| {
        ["Acme", "Globex", "Lisbon", "Oslo", "Bergen"]
            .into_iter()
            .find(|p| f.contains(p))
    };
    Rules {
        duplicate: Some(Arc::new(move |new, old| {
            kind(new) == kind(old) && place(new) == place(old)
        })),
        contradicts: Some(Arc::new(move |new, old| {
            kind(new) != "other" && kind(new) == kind(old) && place(new) != place(old)
        })),
        ..Rules::default()
    }
}

fn works(company: &'static str, text: &'static str, valid: Option<&'static str>) -> Fact<'static> {
    ("Alice", "works at", company, text, valid, None)
}

fn lives(city: &'static str, text: &'static str, valid: Option<&'static str>) -> Fact<'static> {
    ("Alice", "lives in", city, text, valid, None)
}

/// Alice works at Acme and lives in Lisbon, both since January 2024.
async fn alice(w: &World, g: &TestGraph) -> EpisodeOutcome {
    w.rules.extraction(
        "first",
        extraction(
            &[("Alice", 0), ("Acme", 0), ("Lisbon", 0)],
            &[
                works("Acme", "Alice works at Acme.", Some(JAN)),
                lives("Lisbon", "Alice lives in Lisbon.", Some(JAN)),
            ],
        ),
    );
    let out = ingest(w, g, "first", JAN).await;
    assert_eq!(out.facts.len(), 2);
    assert!(w.model.calls_for("fact_resolution").is_empty());
    out
}

#[tokio::test]
async fn a_restated_fact_commits_with_no_resolution_call_and_adds_the_episode() {
    let g = TestGraph::new("restate-exact").await;
    let w = World::new(&g.db, rules());
    let first = alice(&w, &g).await;
    // Said again in June, with other case, spacing and no final stop: both facts are
    // candidates of each other (same entity), yet neither needs the model.
    w.rules.extraction(
        "again",
        extraction(
            &[("Alice", 0), ("Acme", 0), ("Lisbon", 0)],
            &[
                works("Acme", "alice works at  ACME", Some(JUN)),
                lives("Lisbon", "Alice lives in Lisbon.", None),
            ],
        ),
    );
    let again = ingest(&w, &g, "again", JUN).await;
    assert_eq!(again.usage.llm_calls, 1, "extraction only");
    assert_eq!(again.usage.embedding_calls, 1);
    assert!(w.model.calls_for("fact_resolution").is_empty());
    assert!(again.invalidated.is_empty());

    let facts = all_facts(&g).await;
    assert_eq!(facts.len(), 2, "no new fact");
    let acme = find(&facts, "Alice works at Acme.");
    let lisbon = find(&facts, "Alice lives in Lisbon.");
    for f in [acme, lisbon] {
        assert_eq!(f.episodes, vec![first.episode.uuid, again.episode.uuid]);
        assert_eq!(f.valid_at, Some(t(JAN)), "the stored span is kept");
        assert_eq!((f.invalid_at, f.expired_at), (None, None));
    }
    let mut reported: Vec<Uuid> = again.facts.iter().map(|f| f.uuid).collect();
    reported.sort();
    let mut expected = vec![acme.uuid, lisbon.uuid];
    expected.sort();
    assert_eq!(reported, expected, "the outcome lists the confirmed facts");
    let mut edges = again.episode.entity_edges.clone();
    edges.sort();
    assert_eq!(edges, expected);
}

#[tokio::test]
async fn paraphrases_and_restatements_with_new_dates_still_reach_the_model() {
    let g = TestGraph::new("restate-paraphrase").await;
    let w = World::new(&g.db, rules());
    let first = alice(&w, &g).await;
    // One exact restatement (not asked), one paraphrase and one restatement that
    // brings an earlier start (both asked, in one call).
    w.rules.extraction(
        "later",
        extraction(
            &[("Alice", 0), ("Acme", 0), ("Lisbon", 0)],
            &[
                works("Acme", "Alice works at Acme.", Some(JUN)),
                works("Acme", "Alice is employed by Acme.", Some(JUN)),
                lives(
                    "Lisbon",
                    "Alice lives in Lisbon.",
                    Some("2023-05-01T00:00:00Z"),
                ),
            ],
        ),
    );
    let later = ingest(&w, &g, "later", JUN).await;
    assert_eq!(
        later.usage.llm_calls, 2,
        "extraction + one fact-resolution call"
    );
    assert_eq!(
        asked(&w),
        ["Alice is employed by Acme.", "Alice lives in Lisbon."],
        "the exact restatement is not offered"
    );
    let facts = all_facts(&g).await;
    assert_eq!(facts.len(), 2, "the model called both duplicates");
    for f in &facts {
        assert_eq!(f.episodes, vec![first.episode.uuid, later.episode.uuid]);
    }
}

#[tokio::test]
async fn a_contradiction_next_to_a_restatement_reaches_the_model_and_invalidates() {
    let g = TestGraph::new("restate-contradiction").await;
    let w = World::new(&g.db, rules());
    let first = alice(&w, &g).await;
    w.rules.extraction(
        "moved on",
        extraction(
            &[("Alice", 0), ("Globex", 0), ("Lisbon", 0)],
            &[
                works("Globex", "Alice works at Globex.", Some(MAR)),
                lives("Lisbon", "Alice lives in Lisbon.", Some(MAR)),
            ],
        ),
    );
    let moved = ingest(&w, &g, "moved on", MAR).await;
    assert_eq!(moved.usage.llm_calls, 2);
    assert_eq!(asked(&w), ["Alice works at Globex."]);
    assert_eq!(moved.invalidated.len(), 1);

    let facts = all_facts(&g).await;
    assert_eq!(facts.len(), 3);
    let acme = find(&facts, "Alice works at Acme.");
    assert_eq!(
        acme.invalid_at,
        Some(t(MAR)),
        "ended at the successor's start"
    );
    assert!(acme.expired_at.is_some());
    assert_eq!(acme.episodes, vec![first.episode.uuid]);
    let globex = find(&facts, "Alice works at Globex.");
    assert_eq!(globex.valid_at, Some(t(MAR)));
    assert_eq!((globex.invalid_at, globex.expired_at), (None, None));
    assert_eq!(globex.episodes, vec![moved.episode.uuid]);
    let lisbon = find(&facts, "Alice lives in Lisbon.");
    assert_eq!(
        lisbon.episodes,
        vec![first.episode.uuid, moved.episode.uuid]
    );
    assert_eq!(lisbon.invalid_at, None);

    // Restating the ended job is not a restatement of a current fact: it goes to the
    // model, which finds it contradicts Globex.
    w.rules.extraction(
        "back",
        extraction(
            &[("Alice", 0), ("Acme", 0)],
            &[works(
                "Acme",
                "Alice works at Acme.",
                Some("2025-09-01T00:00:00Z"),
            )],
        ),
    );
    let back = ingest(&w, &g, "back", "2025-09-01T00:00:00Z").await;
    assert_eq!(back.usage.llm_calls, 2);
    assert_eq!(back.invalidated.len(), 1);
    assert_eq!(back.invalidated[0].uuid, globex.uuid);
    assert_eq!(all_facts(&g).await.len(), 4);
}

#[tokio::test]
async fn a_fact_whose_candidates_cannot_change_a_date_needs_no_call() {
    let g = TestGraph::new("restate-undated").await;
    let w = World::new(&g.db, rules());
    let fact = |target: &'static str, text: &'static str, valid: Option<&'static str>| {
        ("Bob Olsen", "relates to", target, text, valid, None)
    };
    let episodes: [(&str, Fact<'static>); 4] = [
        ("tea", fact("Green Tea", "Bob likes green tea.", None)),
        (
            "chess",
            fact("Chess Club", "Bob plays at the chess club.", None),
        ),
        ("dated", fact("Oslo Fjord", "Bob lives in Oslo.", Some(JAN))),
        (
            "moved",
            fact("Bergen Harbour", "Bob lives in Bergen.", Some(MAR)),
        ),
    ];
    for (needle, f) in &episodes {
        w.rules
            .extraction(needle, extraction(&[("Bob Olsen", 0), (f.2, 0)], &[*f]));
    }
    // Undated candidates: whatever the model said, no date could change.
    ingest(&w, &g, "tea", JAN).await;
    let chess = ingest(&w, &g, "chess", JAN).await;
    assert_eq!(chess.usage.llm_calls, 1);
    let dated = ingest(&w, &g, "dated", JAN).await;
    assert_eq!(dated.usage.llm_calls, 1, "its candidates have no valid_at");
    assert!(asked(&w).is_empty());
    // A dated, earlier candidate could be ended: the model is asked, and it is.
    let moved = ingest(&w, &g, "moved", MAR).await;
    assert_eq!(moved.usage.llm_calls, 2);
    assert_eq!(asked(&w), ["Bob lives in Bergen."]);
    assert_eq!(moved.invalidated.len(), 1);
    let facts = all_facts(&g).await;
    assert_eq!(find(&facts, "Bob lives in Oslo.").invalid_at, Some(t(MAR)));
    assert_eq!(find(&facts, "Bob likes green tea.").invalid_at, None);
}
