//! The deterministic test doubles, and the listwise reranker driven by one.

use std::sync::Arc;

use gralkor::Error;
use gralkor::llm::doubles::{HashEmbedder, ScriptedModel, WordOverlapReranker};
use gralkor::llm::{
    Embedder, GenerateRequest, LanguageModel, ListwiseReranker, OutputSchema, Reranker,
};
use serde_json::{Value, json};

fn summary_schema() -> OutputSchema {
    OutputSchema::new(
        "summary",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
    )
}

#[tokio::test]
async fn scripted_model_answers_by_closure_and_records_calls_through_a_trait_object() {
    let script = ScriptedModel::new().respond_with(|req| {
        let user = &req.messages.last().unwrap().content;
        Ok(json!({"text": format!("summary of {user}")}))
    });
    let model: Arc<dyn LanguageModel> = Arc::new(script.clone());
    let a = model
        .generate(
            &GenerateRequest::new(summary_schema())
                .user("Ada")
                .label("s"),
        )
        .await
        .unwrap();
    let b = model
        .generate(
            &GenerateRequest::new(summary_schema())
                .user("Grace")
                .label("s"),
        )
        .await
        .unwrap();
    assert_eq!(a.value["text"], "summary of Ada");
    assert_eq!(b.value["text"], "summary of Grace");
    let calls = script.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].messages[0].content, "Grace");
    assert_eq!(script.calls_for("summary").len(), 2);
    assert!(script.calls_for("other").is_empty());
}

#[tokio::test]
async fn scripted_model_can_simulate_provider_errors() {
    let script = ScriptedModel::new().respond_with(|_| {
        Err(Error::Provider {
            provider: "test-double".into(),
            status: Some(503),
            message: "overloaded".into(),
            retry_after: None,
            source: None,
        })
    });
    let err = script
        .generate(&GenerateRequest::new(summary_schema()).user("x"))
        .await
        .unwrap_err();
    assert!(err.is_retryable());
    assert!(matches!(
        err,
        Error::Provider {
            status: Some(503),
            ..
        }
    ));
}

#[tokio::test]
async fn hash_embedder_makes_texts_that_share_words_closer() {
    let e: Arc<dyn Embedder> = Arc::new(HashEmbedder::new(256));
    let texts: Vec<String> = [
        "Ada Lovelace wrote programs",
        "Ada Lovelace wrote notes",
        "The weather in Lisbon is mild",
    ]
    .map(String::from)
    .to_vec();
    let v = e.embed(&texts, "t").await.unwrap();
    let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    assert!(v.iter().all(|x| x.len() == 256));
    assert!(cos(&v[0], &v[1]) > 0.5, "three of four words shared");
    assert!(cos(&v[0], &v[2]).abs() < cos(&v[0], &v[1]));
    assert!((cos(&v[0], &v[0]) - 1.0).abs() < 1e-5);
    let again = e.embed(&texts[..1], "t").await.unwrap();
    assert_eq!(again[0], v[0], "deterministic");
}

#[tokio::test]
async fn word_overlap_reranker_scores_shared_query_words() {
    let scores = WordOverlapReranker
        .rerank(
            "Where does Ada live?",
            &[
                "Ada lives in London".into(),
                "Where is Ada? Where does she live?".into(),
            ],
            "t",
        )
        .await
        .unwrap();
    assert_eq!(scores, vec![0.25, 1.0]);
}

#[tokio::test]
async fn listwise_reranker_scores_in_batches_and_missing_passages_score_zero() {
    // The fake model rates every passage containing "Acme" 80 and leaves out the rest.
    let script = ScriptedModel::new().respond_with(|req| {
        let user = &req.messages.last().unwrap().content;
        let scores: Vec<Value> = user
            .split("<passage number=\"")
            .skip(1)
            .filter(|chunk| chunk.contains("Acme"))
            .map(|chunk| {
                let n: i64 = chunk.split('"').next().unwrap().parse().unwrap();
                json!({"passage": n, "relevance": 80})
            })
            .collect();
        Ok(json!({"scores": scores}))
    });
    let reranker = ListwiseReranker::new(Arc::new(script.clone())).with_batch_size(2);
    let passages: Vec<String> = [
        "Acme was founded by Ada",
        "It rained",
        "Acme makes anvils",
        "Grace codes",
        "Acme",
    ]
    .map(String::from)
    .to_vec();
    let scores = reranker
        .rerank("Tell me about Acme", &passages, "search")
        .await
        .unwrap();
    assert_eq!(scores, vec![0.8, 0.0, 0.8, 0.0, 0.8]);
    let calls = script.calls();
    assert_eq!(calls.len(), 3, "⌈5 / 2⌉ calls");
    assert!(
        calls
            .iter()
            .all(|c| c.label == "search" && c.schema.name == "relevance_scores")
    );
    assert!(calls[0].messages[1].content.contains("Tell me about Acme"));
    assert!(
        reranker
            .rerank("q", &[], "search")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(script.calls().len(), 3, "no call for no passages");
}
