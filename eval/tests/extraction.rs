//! The extraction harness on the shipped stories, through the real engine over a real
//! embedded FalkorDB, with the scripted models derived from the gold graphs.

mod support;

use std::sync::Arc;

use gralkor::graph::Engine;
use gralkor::llm::doubles::HashEmbedder;
use gralkor_eval::extraction::{
    Report, Script, load_stories, run_all, scripted_model, shipped_stories_dir,
};

async fn run(script: Script) -> (Report, Vec<gralkor_eval::extraction::Story>) {
    let db = support::db().await;
    let stories = load_stories(&shipped_stories_dir()).unwrap();
    let embedder = HashEmbedder::new(256);
    let e = embedder.clone();
    let report = run_all(
        &stories,
        |story| {
            Engine::new(
                db.clone(),
                Arc::new(scripted_model(story, script)),
                Arc::new(e.clone()),
            )
        },
        &embedder,
        &format!("{script:?}"),
        &format!("eval-test:{}", uuid::Uuid::new_v4()),
    )
    .await
    .unwrap();
    println!("{}", report.table());
    (report, stories)
}

#[test]
fn the_shipped_stories_have_at_least_thirty_episodes_and_cover_the_issue_s_kinds() {
    let stories = load_stories(&shipped_stories_dir()).unwrap();
    let episodes: usize = stories.iter().map(|s| s.episodes.len()).sum();
    assert!(episodes >= 30, "{episodes} episodes");
    let covers: Vec<&str> = stories
        .iter()
        .flat_map(|s| s.covers.iter().map(String::as_str))
        .collect();
    for kind in [
        "people",
        "organisations",
        "places",
        "preferences",
        "plans vs facts",
        "relative dates",
        "contradictions out of order",
        "pronouns",
        "kinship",
        "JSON records",
        "strict mode",
        "attribution",
        "hedging",
    ] {
        assert!(covers.contains(&kind), "no story covers {kind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_perfect_scripted_model_scores_one_hundred_per_cent_on_every_measure() {
    let (report, stories) = run(Script::Perfect).await;
    for s in &report.stories {
        assert!(
            s.missed_facts.is_empty() && s.extra_facts.is_empty() && s.extra_entities.is_empty(),
            "{}: missed {:?}, extra facts {:?}, extra entities {:?}",
            s.story,
            s.missed_facts,
            s.extra_facts,
            s.extra_entities
        );
    }
    let t = &report.total;
    assert_eq!(t.failed_episodes, 0);
    assert_eq!(
        t.episodes,
        stories.iter().map(|s| s.episodes.len() as u64).sum::<u64>()
    );
    assert_eq!(
        (t.entities.precision(), t.entities.recall(), t.entities.f1()),
        (1.0, 1.0, 1.0)
    );
    assert_eq!(
        (t.facts.precision(), t.facts.recall(), t.facts.f1()),
        (1.0, 1.0, 1.0)
    );
    assert_eq!(t.duplicate_entities, 0);
    for (name, share) in [
        ("types", t.types),
        ("times", t.times),
        ("invalidations", t.invalidations),
        ("attribution", t.attribution),
        ("attributes", t.attributes),
    ] {
        assert!(share.total > 0, "{name}: nothing counted");
        assert_eq!(share.right, share.total, "{name}");
    }
    assert_eq!(t.mean_invalidation_error_days(), Some(0.0));
    assert_eq!(t.spurious_invalidations, 0);
    // The engine's own accounting: at least the extraction call per episode, at most four.
    assert!(
        t.llm_calls >= t.episodes && t.llm_calls <= 4 * t.episodes,
        "{} calls",
        t.llm_calls
    );
    assert!(t.tokens > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wrong_scripted_model_scores_what_its_damage_predicts() {
    let (report, stories) = run(Script::Wrong).await;
    let sum = |f: &dyn Fn(&gralkor_eval::extraction::Story) -> usize| {
        stories.iter().map(f).sum::<usize>() as u64
    };
    let gold_entities = sum(&|s| s.gold.entities.len());
    let episodes = sum(&|s| s.episodes.len());
    let final_facts = sum(&|s| s.final_facts().count());
    let restatements = sum(&|s| s.gold.facts.len() - s.final_facts().count());
    let invalidations = sum(&|s| s.gold.invalidations.len());
    let marked = sum(&|s| s.final_facts().filter(|f| !f.markers.is_empty()).count());
    assert!(restatements > 0 && invalidations > 0 && marked > 0);

    let t = &report.total;
    // One invented entity per episode: each a false positive, nothing missed.
    assert_eq!(
        (t.entities.tp, t.entities.fp, t.entities.fn_),
        (gold_entities, episodes, 0)
    );
    assert_eq!(
        t.entities.precision(),
        gold_entities as f64 / (gold_entities + episodes) as f64
    );
    // No duplicate reported: every restatement is an extra fact; no fact is lost.
    assert_eq!(
        (t.facts.tp, t.facts.fp, t.facts.fn_),
        (final_facts, restatements, 0)
    );
    // No contradiction reported: every invalidation missed, and the ended facts' times wrong.
    assert_eq!(
        (t.invalidations.right, t.invalidations.total),
        (0, invalidations)
    );
    assert_eq!(t.mean_invalidation_error_days(), None);
    assert_eq!(
        (t.times.right, t.times.total),
        (final_facts - invalidations, final_facts)
    );
    // Markers stripped: no attribution kept.
    assert_eq!((t.attribution.right, t.attribution.total), (0, marked));
    // What it did not damage stays right.
    assert_eq!(t.types.right, t.types.total);
    assert_eq!(t.attributes.right, t.attributes.total);
}
