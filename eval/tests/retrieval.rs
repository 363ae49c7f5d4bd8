//! The retrieval harness on the shipped synthetic set: episodes-only retrieval (no
//! language model) over a real embedded FalkorDB, with the in-process embedder when
//! the `local-embedder` feature is on (the default), else the hashed bag of words.

mod support;

use std::sync::Arc;

use gralkor::graph::Engine;
use gralkor_eval::offline::{client_over, offline_client, offline_embedder};
use gralkor_eval::retrieval::scripted::line_extractor;
use gralkor_eval::retrieval::{
    self, RunOptions, RunResult, Scoring, Summary, load, shipped_synthetic_set,
};

/// One run into fresh graphs (the run's graphs are deleted afterwards), episodes
/// only, or extracting with the line-per-fact scripted model.
async fn run_with(extract: bool, tag: &str) -> RunResult {
    let dataset = load(&shipped_synthetic_set(), None).unwrap();
    let db = support::db().await;
    let embedder = offline_embedder().await.unwrap();
    let client = if extract {
        client_over(Engine::new(
            db.clone(),
            Arc::new(line_extractor()),
            embedder,
        ))
        .unwrap()
    } else {
        offline_client(db.clone(), embedder).unwrap()
    };
    let options = RunOptions {
        run_tag: tag.into(),
        context_k: if extract { 10 } else { 3 },
        ..RunOptions::default()
    };
    let result = retrieval::run_dataset(&client, &dataset, &options)
        .await
        .unwrap();
    for g in client.storage().engine().list_graphs().await.unwrap() {
        if g.contains(&format!("{tag}-")) {
            db.delete_graph(&g).await.unwrap();
        }
    }
    result
}

async fn run() -> RunResult {
    run_with(false, "eval-test").await
}

#[test]
fn the_synthetic_set_has_every_kind_of_question_in_conversations_of_several_sessions() {
    let d = load(&shipped_synthetic_set(), None).unwrap();
    assert_eq!(d.format, retrieval::Format::LongMemEval);
    assert_eq!(d.conversations.len(), 3);
    assert!(d.conversations.iter().all(|c| c.sessions.len() >= 5));
    let qs: Vec<_> = d.conversations.iter().flat_map(|c| &c.questions).collect();
    for kind in [
        "single-session-user",
        "multi-session",
        "temporal-reasoning",
        "knowledge-update",
    ] {
        assert!(qs.iter().any(|q| q.kind == kind), "no {kind} question");
    }
    for scoring in [Scoring::Exact, Scoring::Contains, Scoring::Abstention] {
        assert!(
            qs.iter().any(|q| q.scoring == scoring),
            "no {scoring:?} question"
        );
    }
    assert!(
        qs.iter()
            .filter(|q| q.scoring == Scoring::Abstention)
            .all(|q| q.evidence.is_empty() && !q.absent.is_empty())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn episodes_only_retrieval_scores_the_synthetic_set_reproducibly() {
    let first = run().await;
    let ks = RunOptions::default().ks;
    let summary = Summary::of(&first, &ks);
    println!(
        "{}",
        summary.table("synthetic set, episodes only, no model")
    );
    assert_eq!(first.questions.len(), 20);
    assert!(
        first
            .questions
            .iter()
            .all(|q| q.error.is_none() && q.answer.is_none())
    );
    // Every question with evidence has recall figures; every question is checked.
    for q in &first.questions {
        assert_eq!(
            q.recall_at.values().all(Option::is_some),
            !q.question.evidence.is_empty(),
            "{}",
            q.question.id
        );
        assert!(q.context_correct.is_some(), "{}", q.question.id);
        assert!(q.context_tokens > 0);
    }
    // Every question surfaces sessions of its own conversation through their episodes.
    assert!(first.questions.iter().all(|q| !q.surfaced.is_empty()));
    let r10 = summary.overall.recall_at[&10].unwrap();
    assert!(r10 >= 0.9, "recall@10 {r10}");
    // Abstention: the recalled memory never holds what was never said.
    assert_eq!(summary.kinds.values().map(|r| r.errors).sum::<usize>(), 0);
    let abstentions: Vec<_> = first
        .questions
        .iter()
        .filter(|q| q.question.scoring == Scoring::Abstention)
        .collect();
    assert!(abstentions.iter().all(|q| q.context_correct == Some(true)));
    // The ranking is good enough to be worth measuring: most evidence in the top 3.
    let r3 = summary.overall.recall_at[&3].unwrap();
    assert!(r3 >= 0.6, "recall@3 {r3}");

    // The same run again, into fresh graphs, gives the same figures (latency aside).
    let second = run().await;
    for (a, b) in first.questions.iter().zip(&second.questions) {
        assert_eq!(a.surfaced, b.surfaced, "{}", a.question.id);
        assert_eq!(a.context_correct, b.context_correct);
        assert_eq!(a.context_tokens, b.context_tokens);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extraction_path_answers_from_facts_whose_sources_are_the_sessions() {
    let run = run_with(true, "eval-facts").await;
    let summary = Summary::of(&run, &RunOptions::default().ks);
    println!(
        "{}",
        summary.table("synthetic set, facts extracted by the line-per-fact scripted model")
    );
    assert_eq!(summary.overall.errors, 0);
    // Recall returned extracted facts (one per transcript line), not episodes: their
    // texts are the scripted `<speaker> said: …` sentences, and their sources map to
    // the sessions.
    assert!(run.questions.iter().all(|q| !q.surfaced.is_empty()));
    assert!(run.questions.iter().all(|q| q.context.contains(" said: ")));
    let r10 = summary.overall.recall_at[&10].unwrap();
    assert!(r10 >= 0.8, "recall@10 {r10}");
    let c = summary.overall.context_accuracy.unwrap();
    assert!(c >= 0.6, "context accuracy {c}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_model_each_question_is_answered_from_its_context_checked_and_judged() {
    use gralkor::llm::doubles::ScriptedModel;
    use serde_json::json;

    // A model that always declines, and a judge that accepts everything.
    let model = ScriptedModel::new()
        .answer("eval_answer", json!({"answer": "I don't know."}))
        .answer("eval_judge", json!({"reason": "scripted", "correct": true}));
    let dataset = load(&shipped_synthetic_set(), None).unwrap();
    let db = support::db().await;
    let client = offline_client(db.clone(), offline_embedder().await.unwrap()).unwrap();
    let options = RunOptions {
        run_tag: "eval-model".into(),
        model: Some(Arc::new(model.clone())),
        max_questions: Some(7),
        ..RunOptions::default()
    };
    let run = retrieval::run_dataset(&client, &dataset, &options)
        .await
        .unwrap();
    let summary = Summary::of(&run, &options.ks);
    println!(
        "{}",
        summary.table("synthetic set, first conversation, scripted answers")
    );
    assert_eq!(
        run.questions.len(),
        7,
        "--max-questions stops after the first conversation"
    );
    // Declining is right exactly for the one abstention question of the first seven.
    let right: Vec<&str> = run
        .questions
        .iter()
        .filter(|q| q.answer_correct == Some(true))
        .map(|q| q.question.id.as_str())
        .collect();
    assert_eq!(right, ["c1-q6_abs"]);
    assert_eq!(summary.overall.judge_accuracy, Some(1.0));
    // The answer call reads the question's context and date; the judge the gold answer.
    let asked = model.calls_for("eval_answer");
    assert_eq!(asked.len(), 7);
    let first = &asked[0].messages[1].content;
    assert!(
        first.starts_with("<gralkor-memory trust=\"untrusted\">"),
        "{first}"
    );
    assert!(
        first.contains("The question is asked on 2024-05-30T21:30:00+0.")
            && first.ends_with("Question: What breed is my dog?")
    );
    let judged = &model.calls_for("eval_judge")[0].messages[1].content;
    assert!(
        judged.contains("Gold answer: beagle") && judged.contains("Answer to grade: I don't know."),
        "{judged}"
    );
    for g in client.storage().engine().list_graphs().await.unwrap() {
        if g.contains("eval-model-") {
            db.delete_graph(&g).await.unwrap();
        }
    }
}
