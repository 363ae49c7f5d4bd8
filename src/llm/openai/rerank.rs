//! A cross-encoder built on chat completions with log-probabilities.
//!
//! Each passage is one request: the model is asked whether the passage is relevant to
//! the query and may answer with one token, `True` or `False`. The score is
//! `P(True) / (P(True) + P(False))` from the first token's top log-probabilities, so it
//! is a calibrated probability in `[0, 1]` even when other tokens take some mass.
//!
//! **Cost**: `n` passages make `n` requests (run concurrently within the limiter),
//! each with roughly `tokens(query) + tokens(passage) + 60` prompt tokens and 1
//! completion token. Needs a model that returns `logprobs` (not reasoning models; see
//! [`ListwiseReranker`](crate::llm::ListwiseReranker) for those, which makes
//! `⌈n / 20⌉` requests instead).

use std::fmt;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tracing::Instrument;

use super::{OpenAi, PROVIDER, chat_usage};
use crate::llm::transport::Call;
use crate::llm::{Reranker, estimate_tokens};
use crate::{Error, Result};

const SYSTEM: &str = "You judge search results. Given a query and a passage, decide whether \
the passage is relevant to the query: whether it answers it or contains facts it asks about.";

/// True/False log-probability reranker. Made by [`OpenAi::reranker`].
#[derive(Clone)]
pub struct OpenAiReranker {
    conn: OpenAi,
    model: String,
}

impl fmt::Debug for OpenAiReranker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiReranker")
            .field("base_url", &self.conn.inner.base_url)
            .field("model", &self.model)
            .finish()
    }
}

impl OpenAi {
    /// A log-probability reranker using `model` (a small non-reasoning chat model such
    /// as `gpt-4.1-mini` or `gpt-4.1-nano`).
    pub fn reranker(&self, model: impl Into<String>) -> OpenAiReranker {
        OpenAiReranker {
            conn: self.clone(),
            model: model.into(),
        }
    }
}

impl OpenAiReranker {
    /// The request body for one passage.
    fn body(&self, query: &str, passage: &str) -> Value {
        let user = format!(
            "<query>\n{query}\n</query>\n<passage>\n{passage}\n</passage>\n\
             Is the passage relevant to the query? Answer with exactly one word: True or False."
        );
        let mut body = json!({
            "model": self.model,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
            "temperature": 0,
            "logprobs": true,
            "top_logprobs": 5,
        });
        body[self.conn.inner.cap_field] = Value::from(1);
        body
    }

    async fn score(self, query: String, passage: String, label: String) -> Result<f64> {
        let body = self.body(&query, &passage);
        let auth = self.conn.auth();
        let call = Call {
            operation: "rerank",
            label: &label,
            url: self.conn.url("chat/completions"),
            headers: &auth,
            body: &body,
            estimated_tokens: estimate_tokens(&query) + estimate_tokens(&passage) + 61,
        };
        let (reply, _) = self.conn.post(call, chat_usage).await?;
        relevance(&reply)
    }
}

/// The relevance probability in a reply.
fn relevance(reply: &Value) -> Result<f64> {
    let classify = |token: &str| match token.trim().to_ascii_lowercase().as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    };
    let (mut p_true, mut p_false) = (0.0f64, 0.0f64);
    let top = reply
        .pointer("/choices/0/logprobs/content/0/top_logprobs")
        .and_then(Value::as_array);
    for entry in top.into_iter().flatten() {
        let (Some(token), Some(lp)) = (
            entry.get("token").and_then(Value::as_str),
            entry.get("logprob").and_then(Value::as_f64),
        ) else {
            continue;
        };
        match classify(token) {
            Some(true) => p_true += lp.exp(),
            Some(false) => p_false += lp.exp(),
            None => {}
        }
    }
    if p_true + p_false > 0.0 {
        return Ok((p_true / (p_true + p_false)).clamp(0.0, 1.0));
    }
    // No log-probabilities (some compatible servers): fall back to the answer itself.
    let text = reply
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match classify(text) {
        Some(true) => Ok(1.0),
        Some(false) => Ok(0.0),
        None => Err(Error::ModelOutput {
            provider: PROVIDER.to_string(),
            message: format!(
                "reranker answer `{text}` is neither True nor False and has no log-probabilities"
            ),
        }),
    }
}

#[async_trait]
impl Reranker for OpenAiReranker {
    /// One request per passage, concurrently within the limiter; see [`Reranker::rerank`].
    ///
    /// ```no_run
    /// # use gralkor::llm::{openai::OpenAi, Reranker};
    /// # async fn run() -> gralkor::Result<()> {
    /// let reranker = OpenAi::builder("sk-…").build()?.reranker("gpt-4.1-nano");
    /// let scores = reranker
    ///     .rerank("who founded Acme?", &["Ada founded Acme.".into(), "It rained.".into()], "search")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    async fn rerank(&self, query: &str, passages: &[String], label: &str) -> Result<Vec<f64>> {
        let mut set = JoinSet::new();
        for (i, passage) in passages.iter().enumerate() {
            let fut = self
                .clone()
                .score(query.to_string(), passage.clone(), label.to_string());
            set.spawn(async move { (i, fut.await) }.instrument(tracing::Span::current()));
        }
        let mut scores = vec![0.0; passages.len()];
        while let Some(joined) = set.join_next().await {
            let (i, score) = joined.map_err(|e| Error::ModelOutput {
                provider: PROVIDER.to_string(),
                message: format!("rerank task failed: {e}"),
            })?;
            scores[i] = score?;
        }
        Ok(scores)
    }

    fn provider(&self) -> &str {
        PROVIDER
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(top: Value, content: &str) -> Value {
        json!({"choices": [{"message": {"content": content}, "logprobs": {"content": [{"top_logprobs": top}]}}]})
    }

    #[test]
    fn probability_of_true_among_true_and_false() {
        let r = reply(
            json!([{"token": "True", "logprob": (0.6f64).ln()}, {"token": "False", "logprob": (0.2f64).ln()}]),
            "True",
        );
        assert!((relevance(&r).unwrap() - 0.75).abs() < 1e-9);
        let r = reply(
            json!([{"token": " false", "logprob": (0.9f64).ln()}, {"token": "Maybe", "logprob": -3.0}]),
            "False",
        );
        assert_eq!(relevance(&r).unwrap(), 0.0);
        assert_eq!(relevance(&reply(json!([]), "true")).unwrap(), 1.0);
        assert!(relevance(&reply(json!([]), "perhaps")).is_err());
    }
}
