//! OpenAI embeddings (`POST <base>/embeddings`).

use std::fmt;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{OpenAi, PROVIDER};
use crate::llm::embedding::{check_vectors, number_list, resolve_dimension, run_batches};
use crate::llm::transport::{Call, reported_count};
use crate::llm::{Embedder, TokenUsage, estimate_tokens};
use crate::{Error, Result};

/// Default number of texts per request.
pub const DEFAULT_EMBED_BATCH_SIZE: usize = 256;

/// Embeddings through an OpenAI(-compatible) server. Made by [`OpenAi::embedder`].
#[derive(Clone)]
pub struct OpenAiEmbedder {
    conn: OpenAi,
    model: String,
    dimension: usize,
    send_dimensions: bool,
    batch_size: usize,
}

impl fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("base_url", &self.conn.inner.base_url)
            .field("model", &self.model)
            .field("dimension", &self.dimension)
            .field("batch_size", &self.batch_size)
            .finish()
    }
}

impl OpenAi {
    /// An embedder for `model`. `dimension`: `None` uses the model's native size (known
    /// for OpenAI's models and a few common local ones; an unknown model needs it
    /// given); a size different from a known native size is requested from the server
    /// with the `dimensions` parameter (`text-embedding-3-*` support it). An unknown
    /// model's size is taken as given and checked on every answer.
    pub fn embedder(
        &self,
        model: impl Into<String>,
        dimension: Option<usize>,
    ) -> Result<OpenAiEmbedder> {
        let model = model.into();
        let (dimension, send_dimensions) = resolve_dimension(&model, dimension)?;
        Ok(OpenAiEmbedder {
            conn: self.clone(),
            model,
            dimension,
            send_dimensions,
            batch_size: DEFAULT_EMBED_BATCH_SIZE,
        })
    }
}

impl OpenAiEmbedder {
    /// Texts per request (at least 1; OpenAI accepts up to 2048). Default
    /// `DEFAULT_EMBED_BATCH_SIZE`. Batches are sent concurrently, within the limiter.
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    fn body(&self, batch: &[String]) -> Value {
        let mut body = json!({"model": self.model, "input": batch, "encoding_format": "float"});
        if self.send_dimensions {
            body["dimensions"] = Value::from(self.dimension);
        }
        body
    }

    async fn embed_batch(self, batch: Vec<String>, label: String) -> Result<Vec<Vec<f32>>> {
        let body = self.body(&batch);
        let auth = self.conn.auth();
        let call = Call {
            operation: crate::llm::transport::EMBED_OPERATION,
            label: &label,
            url: self.conn.url("embeddings"),
            headers: &auth,
            body: &body,
            estimated_tokens: batch.iter().map(|t| estimate_tokens(t)).sum(),
        };
        let (reply, _) = self
            .conn
            .post(call, |r| TokenUsage {
                prompt_tokens: reported_count(r, "/usage/prompt_tokens"),
                completion_tokens: 0,
            })
            .await?;
        let vectors = parse_embeddings(&reply, batch.len())?;
        check_vectors(PROVIDER, &self.model, self.dimension, &vectors)?;
        Ok(vectors)
    }
}

/// `data[].embedding`, ordered by `data[].index`.
fn parse_embeddings(reply: &Value, expected: usize) -> Result<Vec<Vec<f32>>> {
    let bad = |message: String| Error::ModelOutput {
        provider: PROVIDER.to_string(),
        message,
    };
    let data = reply
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("the reply has no `data` list".into()))?;
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (pos, item) in data.iter().enumerate() {
        let index = item
            .get("index")
            .and_then(Value::as_u64)
            .map_or(pos, |i| i as usize);
        let list = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(format!("item {pos} has no `embedding` list")))?;
        let vector = number_list(list)
            .ok_or_else(|| bad(format!("item {pos} has a non-numeric embedding value")))?;
        match slots.get_mut(index) {
            Some(slot @ None) => *slot = Some(vector),
            _ => {
                return Err(bad(format!(
                    "unexpected or repeated embedding index {index}"
                )));
            }
        }
    }
    slots
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| {
            bad(format!(
                "{expected} texts were sent but {} embeddings came back",
                data.len()
            ))
        })
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn dimension(&self) -> usize {
        self.dimension
    }

    /// Embeds in batches of the configured size; see [`Embedder::embed`].
    ///
    /// ```no_run
    /// # use gralkor::llm::{openai::OpenAi, Embedder};
    /// # async fn run() -> gralkor::Result<()> {
    /// let embedder = OpenAi::builder("sk-…").build()?.embedder("text-embedding-3-small", None)?;
    /// let vectors = embedder.embed(&["hello".to_string()], "example").await?;
    /// assert_eq!(vectors[0].len(), 1536);
    /// # Ok(()) }
    /// ```
    async fn embed(&self, texts: &[String], label: &str) -> Result<Vec<Vec<f32>>> {
        run_batches(PROVIDER, texts, self.batch_size, |batch| {
            self.clone().embed_batch(batch, label.to_string())
        })
        .await
    }

    fn provider(&self) -> &str {
        PROVIDER
    }

    fn model(&self) -> &str {
        &self.model
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_are_ordered_by_index() {
        let reply = json!({"data": [
            {"index": 1, "embedding": [2.0]},
            {"index": 0, "embedding": [1.0]}
        ]});
        assert_eq!(
            parse_embeddings(&reply, 2).unwrap(),
            vec![vec![1.0], vec![2.0]]
        );
        assert!(parse_embeddings(&reply, 3).is_err());
        let dup =
            json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]});
        assert!(parse_embeddings(&dup, 2).is_err());
    }
}
