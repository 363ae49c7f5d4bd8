//! A reranker for any [`LanguageModel`]: passages are scored in batches by one
//! structured call each.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{GenerateRequest, LanguageModel, ModelSize, OutputSchema, Reranker};
use crate::{Error, Result};

/// Default passages per call.
pub const DEFAULT_LISTWISE_BATCH: usize = 20;

/// Scores passages with a language model, many per call: the model sees the query and
/// a numbered batch of passages and returns a relevance from 0 to 100 for each, which
/// becomes a score in `[0, 1]`. A passage the model leaves out scores 0.
///
/// **Cost**: `⌈n / batch_size⌉` structured calls on the small model for `n` passages
/// (batch size 20 by default), each with about `tokens(query) + Σ tokens(passage) +
/// 150` prompt tokens and about 12 completion tokens per passage. Works with every
/// provider, reasoning models included.
///
/// ```
/// use std::sync::Arc;
/// use gralkor::llm::{doubles::ScriptedModel, ListwiseReranker, Reranker};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// let model = ScriptedModel::new().answer("relevance_scores", json!({"scores": [
///     {"passage": 0, "relevance": 90}, {"passage": 1, "relevance": 10}]}));
/// let reranker = ListwiseReranker::new(Arc::new(model));
/// let scores = reranker.rerank("q", &["a".into(), "b".into()], "search").await?;
/// assert_eq!(scores, vec![0.9, 0.1]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ListwiseReranker {
    model: Arc<dyn LanguageModel>,
    batch_size: usize,
}

impl ListwiseReranker {
    /// A reranker asking `model` (its small size).
    pub fn new(model: Arc<dyn LanguageModel>) -> Self {
        ListwiseReranker {
            model,
            batch_size: DEFAULT_LISTWISE_BATCH,
        }
    }

    #[cfg(any(test, feature = "testing"))]
    /// Passages per call (at least 1).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    fn schema() -> OutputSchema {
        OutputSchema::new(
            "relevance_scores",
            json!({
                "type": "object",
                "properties": {"scores": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "passage": {"type": "integer", "description": "the passage number"},
                        "relevance": {"type": "integer", "description": "0 (unrelated) to 100 (answers the query)"}
                    },
                    "required": ["passage", "relevance"],
                    "additionalProperties": false
                }}},
                "required": ["scores"],
                "additionalProperties": false
            }),
        )
    }

    async fn score_batch(&self, query: &str, batch: &[String], label: &str) -> Result<Vec<f64>> {
        let mut listing = String::new();
        for (i, p) in batch.iter().enumerate() {
            listing.push_str(&format!("<passage number=\"{i}\">\n{p}\n</passage>\n"));
        }
        let request = GenerateRequest::new(Self::schema())
            .system(
                "You rank search results. For every passage, rate how relevant it is to the query \
                 from 0 (unrelated) to 100 (directly answers it). Rate each passage on its own.",
            )
            .user(format!("<query>\n{query}\n</query>\n{listing}"))
            .size(ModelSize::Small)
            .max_output_tokens(64 + 24 * batch.len() as u32)
            .label(label);
        let answer = self.model.generate(&request).await?;
        let mut scores = vec![0.0; batch.len()];
        for item in answer.value["scores"].as_array().into_iter().flatten() {
            let (Some(i), Some(r)) = (
                item["passage"].as_i64(),
                item.get("relevance").and_then(Value::as_f64),
            ) else {
                continue;
            };
            if let Some(slot) = usize::try_from(i).ok().and_then(|i| scores.get_mut(i)) {
                *slot = (r / 100.0).clamp(0.0, 1.0);
            }
        }
        Ok(scores)
    }
}

#[async_trait]
impl Reranker for ListwiseReranker {
    /// Scores the passages in batches, one model call per batch.
    async fn rerank(&self, query: &str, passages: &[String], label: &str) -> Result<Vec<f64>> {
        let mut scores = Vec::with_capacity(passages.len());
        for batch in passages.chunks(self.batch_size) {
            scores.extend(self.score_batch(query, batch, label).await?);
        }
        if scores.len() != passages.len() {
            return Err(Error::ModelOutput {
                provider: self.model.provider().to_string(),
                message: "score count mismatch".into(),
            });
        }
        Ok(scores)
    }

    fn provider(&self) -> &str {
        self.model.provider()
    }
}
