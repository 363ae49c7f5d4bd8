//! Fact resolution inside the extraction call: the known facts of the entities an
//! episode names are shown to the one extraction call, which says per new fact which
//! one it restates and which it contradicts, so restatements, paraphrases, added dates
//! and contradictions cost one model call; a candidate the call did not see still goes
//! to the resolution call (test-trees/graph-ingest.md, "fact resolution in the
//! extraction call").

use crate::common;

use std::sync::Arc;

use common::graph::t;
use common::ingest::{Fact, Rules, World, extraction};
use common::{TestGraph, all_facts};
use gralkor::graph::{AddEpisode, EntityEdge, EpisodeOutcome, SourceKind};

const JAN: &str = "2024-01-10T00:00:00Z";
const JUN: &str = "2024-06-01T00:00:00Z";
const MAR: &str = "2025-03-01T00:00:00Z";

fn find<'a>(facts: &'a [EntityEdge], text: &str) -> &'a EntityEdge {
    let found: Vec<&EntityEdge> = facts.iter().filter(|f| f.fact == text).collect();
    assert_eq!(found.len(), 1, "{text}: {facts:#?}");
    found[0]
}

async fn ingest(w: &World, g: &TestGraph, content: &str, when: &str) -> EpisodeOutcome {
    w.engine
        .add_episode(&g.name, AddEpisode::new(content, SourceKind::Text, t(when)))
        .await
        .unwrap()
}

/// A perfect model for Alice's job and home: two facts about the same job or home
/// are one statement; two jobs, or two homes, contradict; anything else is neither.
fn rules() -> Rules {
    let kind = |f: &str| {
        if f.contains("works at") || f.contains("employed by") {
            "job"
        } else if f.contains("lives in") || f.contains("lived in") {
            "home"
        } else {
            "other"
        }
    };
    let place = |f: &str| {
        ["Acme", "Globex", "Lisbon", "Oslo"]
            .into_iter()
            .find(|p| f.contains(p))
    };
    Rules {
        duplicate: Some(Arc::new(move |new, old| {
            kind(new) != "other" && kind(new) == kind(old) && place(new) == place(old)
        })),
        contradicts: Some(Arc::new(move |new, old| {
            kind(new) != "other" && kind(new) == kind(old) && place(new) != place(old)
        })),
        ..Rules::default()
    }
}

fn alice(target: &'static str, text: &'static str, valid: Option<&'static str>) -> Fact<'static> {
    ("Alice", "relates to", target, text, valid, None)
}

/// The lines of the last extraction request's user message between `<KNOWN_FACTS>`
/// tags, and whether its schema asks for verdicts (strictly).
fn last_extraction(w: &World) -> (Vec<String>, bool) {
    let calls = w.model.calls_for("extraction");
    let last = calls.last().expect("an extraction call");
    let user = &last.messages.last().expect("a user message").content;
    let known = user
        .split("<KNOWN_FACTS>")
        .nth(1)
        .and_then(|t| t.split("</KNOWN_FACTS>").next())
        .map(|t| t.trim().lines().map(str::to_owned).collect())
        .unwrap_or_default();
    let schema = &last.schema.schema;
    let fact = &schema["properties"]["facts"]["items"];
    let asks = fact["properties"]["restates"].is_object()
        && fact["properties"]["contradicts"].is_object()
        && gralkor::llm::schema::is_strict_compatible(schema)
        && gralkor::llm::schema::check_schema(schema).is_ok();
    (known, asks)
}

/// "first: Alice works at Acme and lives in Lisbon." (January 2024).
async fn first(w: &World, g: &TestGraph) -> EpisodeOutcome {
    w.rules.extraction(
        "first:",
        extraction(
            &[("Alice", 0), ("Acme", 0), ("Lisbon", 0)],
            &[
                alice("Acme", "Alice works at Acme.", Some(JAN)),
                alice("Lisbon", "Alice lives in Lisbon.", Some(JAN)),
            ],
        ),
    );
    let out = ingest(w, g, "first: Alice works at Acme and lives in Lisbon.", JAN).await;
    assert_eq!(out.facts.len(), 2);
    let (known, asks) = last_extraction(w);
    assert!(
        known.is_empty() && !asks,
        "nothing known yet: the plain schema"
    );
    out
}

#[tokio::test]
async fn a_paraphrase_and_a_restatement_with_a_new_date_are_resolved_by_the_extraction_call() {
    let g = TestGraph::new("combined-restates").await;
    let w = World::new(&g.db, rules());
    let one = first(&w, &g).await;
    w.rules.extraction(
        "later:",
        extraction(
            &[("Alice", 0), ("Acme", 0), ("Lisbon", 0)],
            &[
                alice("Acme", "Alice is employed by Acme.", Some(JUN)),
                alice(
                    "Lisbon",
                    "Alice has lived in Lisbon since May 2023.",
                    Some("2023-05-01T00:00:00Z"),
                ),
            ],
        ),
    );
    let two = ingest(
        &w,
        &g,
        "later: Alice is employed by Acme, and has lived in Lisbon since May 2023.",
        JUN,
    )
    .await;
    let (known, asks) = last_extraction(&w);
    assert!(asks, "the schema asks for verdicts, strictly");
    assert_eq!(known.len(), 2, "{known:?}");
    assert!(known.iter().any(|l| l.starts_with("known ")
        && l.contains("Alice works at Acme.")
        && l.contains("(Alice —RELATES_TO→ Acme)")));
    assert_eq!(two.usage.llm_calls, 1, "extraction only");
    assert_eq!(two.usage.steps.resolve_facts, 0);
    assert!(w.model.calls_for("fact_resolution").is_empty());
    assert!(two.invalidated.is_empty());
    assert_eq!(
        two.usage.db_round_trips, 5,
        "write+claim+context, entity candidates, fact candidates, in-flight mark, commit"
    );
    let facts = all_facts(&g).await;
    assert_eq!(facts.len(), 2, "no new fact: {facts:#?}");
    for text in ["Alice works at Acme.", "Alice lives in Lisbon."] {
        let f = find(&facts, text);
        assert_eq!(f.episodes, vec![one.episode.uuid, two.episode.uuid]);
        assert_eq!(f.valid_at, Some(t(JAN)), "the stored span is kept");
        assert_eq!((f.invalid_at, f.expired_at), (None, None));
    }
}

#[tokio::test]
async fn a_contradiction_of_a_known_fact_ends_it_at_the_successors_start_in_one_call() {
    let g = TestGraph::new("combined-contradicts").await;
    let w = World::new(&g.db, rules());
    let one = first(&w, &g).await;
    w.rules.extraction(
        "moved on:",
        extraction(
            &[("Alice", 0), ("Globex", 0), ("Acme", 0)],
            &[alice("Globex", "Alice works at Globex.", Some(MAR))],
        ),
    );
    let two = ingest(
        &w,
        &g,
        "moved on: Alice left Acme and works at Globex.",
        MAR,
    )
    .await;
    assert_eq!(two.usage.llm_calls, 1);
    assert!(w.model.calls_for("fact_resolution").is_empty());
    assert_eq!(two.invalidated.len(), 1);
    let facts = all_facts(&g).await;
    assert_eq!(facts.len(), 3);
    let acme = find(&facts, "Alice works at Acme.");
    assert_eq!(acme.invalid_at, Some(t(MAR)), "ended at Globex's start");
    assert!(acme.expired_at.is_some());
    assert_eq!(acme.episodes, vec![one.episode.uuid]);
    let globex = find(&facts, "Alice works at Globex.");
    assert_eq!(globex.valid_at, Some(t(MAR)));
    assert_eq!((globex.invalid_at, globex.expired_at), (None, None));
    let lisbon = find(&facts, "Alice lives in Lisbon.");
    assert_eq!(
        (lisbon.invalid_at, lisbon.expired_at),
        (None, None),
        "no false invalidation"
    );
}

#[tokio::test]
async fn a_new_fact_between_known_entities_restates_and_ends_nothing_in_one_call() {
    let g = TestGraph::new("combined-new").await;
    let w = World::new(&g.db, rules());
    first(&w, &g).await;
    w.rules.extraction(
        "visit:",
        extraction(
            &[("Alice", 0), ("Acme", 0)],
            &[alice("Acme", "Alice gave a talk at Acme.", Some(JUN))],
        ),
    );
    let two = ingest(&w, &g, "visit: Alice gave a talk at Acme.", JUN).await;
    assert_eq!(two.usage.llm_calls, 1);
    assert!(w.model.calls_for("fact_resolution").is_empty());
    assert!(two.invalidated.is_empty());
    let facts = all_facts(&g).await;
    assert_eq!(facts.len(), 3);
    let talk = find(&facts, "Alice gave a talk at Acme.");
    assert_eq!(talk.episodes, vec![two.episode.uuid]);
    for f in &facts {
        assert_eq!((f.invalid_at, f.expired_at), (None, None), "{}", f.fact);
    }
}

#[tokio::test]
async fn a_candidate_the_extraction_did_not_see_still_reaches_the_resolution_call() {
    let g = TestGraph::new("combined-unseen").await;
    let w = World::new(&g.db, rules());
    first(&w, &g).await;
    // The text names nobody the graph knows ("she"): no known facts are shown, and
    // Alice's job is a candidate the extraction never judged.
    w.rules.extraction(
        "she changed jobs:",
        extraction(
            &[("Alice", 0), ("Globex", 0)],
            &[alice("Globex", "Alice works at Globex.", Some(MAR))],
        ),
    );
    let two = ingest(&w, &g, "she changed jobs: now at the other firm.", MAR).await;
    let (known, asks) = last_extraction(&w);
    assert!(known.is_empty() && !asks);
    assert_eq!(two.usage.llm_calls, 2, "extraction + fact resolution");
    assert_eq!(two.usage.steps.resolve_facts, 1);
    assert_eq!(two.invalidated.len(), 1);
    let facts = all_facts(&g).await;
    assert_eq!(
        find(&facts, "Alice works at Acme.").invalid_at,
        Some(t(MAR))
    );
}
