//! Deterministic **test doubles** for the model traits: no network, no randomness.
//!
//! They exist for gralkor's own tests and for users who test code built on gralkor.
//! They are not models: [`ScriptedModel`] returns what it was told to,
//! [`HashEmbedder`] makes texts that share words close, and [`WordOverlapReranker`]
//! scores by shared words. Never use them in production.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{
    Embedder, GenerateRequest, Generation, LanguageModel, ModelSize, Reranker, TokenUsage,
    estimate_tokens, schema,
};
use crate::{Error, Result};

internal_item! {
/// The provider name the doubles report.
pub const PROVIDER: &str = "test-double";
}

type Responder = Arc<dyn Fn(&GenerateRequest) -> Result<Value> + Send + Sync>;

#[derive(Default)]
struct ScriptState {
    answers: HashMap<String, VecDeque<Value>>,
    responder: Option<Responder>,
    calls: Vec<GenerateRequest>,
}

/// A **test double** [`LanguageModel`] that answers from a script.
///
/// Answers are keyed by schema name: each [`answer`](ScriptedModel::answer) queues one
/// answer for that schema; queued answers are used in order and the last one repeats.
/// Requests for a schema with no queued answer go to the
/// [`respond_with`](ScriptedModel::respond_with) closure, if any, else fail with
/// [`Error::ModelOutput`]. Every answer is validated against the request's schema, as
/// with a real provider, so a wrong script fails loudly. Every request is recorded.
/// Clones share the script and the record.
///
/// ```
/// use gralkor::llm::doubles::ScriptedModel;
/// use gralkor::llm::{GenerateRequest, LanguageModel, OutputSchema};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// let model = ScriptedModel::new().answer("city", json!({"name": "Paris"}));
/// let schema = OutputSchema::new("city", json!({
///     "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}));
/// let answer = model.generate(&GenerateRequest::new(schema).user("Capital of France?")).await?;
/// assert_eq!(answer.value["name"], "Paris");
/// assert_eq!(model.calls().len(), 1);
/// assert_eq!(model.calls()[0].messages[0].content, "Capital of France?");
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct ScriptedModel {
    state: Arc<Mutex<ScriptState>>,
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.lock();
        f.debug_struct("ScriptedModel")
            .field(
                "scripted_schemas",
                &s.answers.keys().collect::<BTreeSet<_>>(),
            )
            .field("has_responder", &s.responder.is_some())
            .field("calls", &s.calls.len())
            .finish()
    }
}

impl ScriptedModel {
    /// A model with an empty script.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ScriptState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `value` as an answer for requests whose schema is named `schema_name`.
    pub fn answer(self, schema_name: impl Into<String>, value: Value) -> Self {
        self.lock()
            .answers
            .entry(schema_name.into())
            .or_default()
            .push_back(value);
        self
    }

    /// Answers requests that have no queued answer with `f` (which may return an error
    /// to simulate a failing provider).
    pub fn respond_with(
        self,
        f: impl Fn(&GenerateRequest) -> Result<Value> + Send + Sync + 'static,
    ) -> Self {
        self.lock().responder = Some(Arc::new(f));
        self
    }

    /// Every request received, in order.
    pub fn calls(&self) -> Vec<GenerateRequest> {
        self.lock().calls.clone()
    }

    /// The requests received for one schema name.
    pub fn calls_for(&self, schema_name: &str) -> Vec<GenerateRequest> {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.schema.name == schema_name)
            .cloned()
            .collect()
    }
}

#[async_trait]
impl LanguageModel for ScriptedModel {
    /// Answers from the script; see the type's documentation.
    async fn generate(&self, request: &GenerateRequest) -> Result<Generation> {
        request.check()?;
        let scripted = {
            let mut s = self.lock();
            s.calls.push(request.clone());
            let queued = s.answers.get_mut(&request.schema.name).and_then(|q| {
                if q.len() > 1 {
                    q.pop_front()
                } else {
                    q.front().cloned()
                }
            });
            match queued {
                Some(v) => Ok(v),
                None => Err(s.responder.clone()),
            }
        };
        let value = match scripted {
            Ok(v) => v,
            Err(Some(responder)) => responder(request)?,
            Err(None) => {
                return Err(Error::ModelOutput {
                    provider: PROVIDER.to_string(),
                    message: format!("no scripted answer for schema `{}`", request.schema.name),
                });
            }
        };
        let violations = schema::validate(&request.schema.schema, &value);
        if !violations.is_empty() {
            return Err(Error::ModelOutput {
                provider: PROVIDER.to_string(),
                message: format!(
                    "scripted answer does not match the schema `{}`: {}",
                    request.schema.name,
                    violations.join("; ")
                ),
            });
        }
        let usage = TokenUsage {
            prompt_tokens: request
                .messages
                .iter()
                .map(|m| estimate_tokens(&m.content))
                .sum(),
            completion_tokens: estimate_tokens(&value.to_string()),
        };
        Ok(Generation {
            value,
            usage,
            repaired: false,
        })
    }

    fn provider(&self) -> &str {
        PROVIDER
    }

    fn model(&self, size: ModelSize) -> &str {
        match size {
            ModelSize::Default => "scripted",
            ModelSize::Small => "scripted-small",
        }
    }
}

/// Lowercase alphanumeric words of `text`.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// A **test double** [`Embedder`]: a hashed bag of words, L2-normalised.
///
/// Each lowercase word adds ±1 at a position chosen by its SHA-256, so equal texts
/// get equal vectors, texts that share words have a positive cosine, and texts with no
/// word in common are (almost always) orthogonal. A text without words maps to the zero
/// vector.
///
/// ```
/// use gralkor::llm::doubles::HashEmbedder;
/// use gralkor::llm::Embedder;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// let e = HashEmbedder::new(64);
/// let v = e.embed(&["Ada likes tea".into(), "Ada likes coffee".into(), "rain in Spain".into()], "t").await?;
/// let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
/// assert!(cos(&v[0], &v[1]) > cos(&v[0], &v[2]));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    dimension: usize,
    texts: Arc<Mutex<Vec<String>>>,
}

impl HashEmbedder {
    /// An embedder of `dimension` (at least 1) numbers per vector.
    pub fn new(dimension: usize) -> Self {
        HashEmbedder {
            dimension: dimension.max(1),
            texts: Arc::default(),
        }
    }

    /// The vector of one text.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dimension];
        for word in words(text) {
            let h = Sha256::digest(word.as_bytes());
            let n = u64::from_le_bytes(h[..8].try_into().expect("8 bytes"));
            let sign = if h[8] & 1 == 0 { 1.0 } else { -1.0 };
            v[(n % self.dimension as u64) as usize] += sign;
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }

    /// Every text embedded so far, in order.
    pub fn embedded_texts(&self) -> Vec<String> {
        self.texts.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[async_trait]
impl Embedder for HashEmbedder {
    fn dimension(&self) -> usize {
        self.dimension
    }

    /// Embeds locally; never fails.
    async fn embed(&self, texts: &[String], _label: &str) -> Result<Vec<Vec<f32>>> {
        self.texts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(texts.iter().cloned());
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }

    fn provider(&self) -> &str {
        PROVIDER
    }

    fn model(&self) -> &str {
        "hashed-bag-of-words"
    }
}

/// A **test double** [`Reranker`]: the share of the query's distinct words that occur
/// in the passage (case-insensitive).
///
/// ```
/// use gralkor::llm::doubles::WordOverlapReranker;
/// use gralkor::llm::Reranker;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// let scores = WordOverlapReranker.rerank("ada tea", &["Ada drinks tea".into(), "Ada".into(), "x".into()], "t").await?;
/// assert_eq!(scores, vec![1.0, 0.5, 0.0]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct WordOverlapReranker;

#[async_trait]
impl Reranker for WordOverlapReranker {
    /// Scores locally; never fails.
    async fn rerank(&self, query: &str, passages: &[String], _label: &str) -> Result<Vec<f64>> {
        let q: BTreeSet<String> = words(query).collect();
        Ok(passages
            .iter()
            .map(|p| {
                if q.is_empty() {
                    return 0.0;
                }
                let p: BTreeSet<String> = words(p).collect();
                q.intersection(&p).count() as f64 / q.len() as f64
            })
            .collect())
    }

    fn provider(&self) -> &str {
        PROVIDER
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::OutputSchema;
    use serde_json::json;

    fn schema(name: &str) -> OutputSchema {
        OutputSchema::new(
            name,
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        )
    }

    #[tokio::test]
    async fn queued_answers_then_the_last_repeats() {
        let m = ScriptedModel::new()
            .answer("a", json!({"n": 1}))
            .answer("a", json!({"n": 2}));
        let req = GenerateRequest::new(schema("a")).user("x");
        assert_eq!(m.generate(&req).await.unwrap().value, json!({"n": 1}));
        assert_eq!(m.generate(&req).await.unwrap().value, json!({"n": 2}));
        assert_eq!(m.generate(&req).await.unwrap().value, json!({"n": 2}));
        assert_eq!(m.calls_for("a").len(), 3);
    }

    #[tokio::test]
    async fn responder_unscripted_and_invalid_answers() {
        let m = ScriptedModel::new()
            .answer("bad", json!({"n": "x"}))
            .respond_with(|r| Ok(json!({"n": r.messages.len()})));
        let req = GenerateRequest::new(schema("other")).user("x").user("y");
        assert_eq!(m.generate(&req).await.unwrap().value, json!({"n": 2}));
        let err = m
            .generate(&GenerateRequest::new(schema("bad")).user("x"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("/n: expected integer"), "{err}");
        let bare = ScriptedModel::new();
        let err = bare.generate(&req).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("no scripted answer for schema `other`"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn hash_embedder_is_deterministic_normalised_and_word_based() {
        let e = HashEmbedder::new(128);
        let a = e.vector("The cat sat");
        assert_eq!(a, HashEmbedder::new(128).vector("the CAT, sat!"));
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-6);
        assert!(e.vector("").iter().all(|x| *x == 0.0));
        let out = e.embed(&["a b".into(), "c".into()], "l").await.unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(e.embedded_texts(), vec!["a b".to_string(), "c".to_string()]);
    }
}
