//! Google Gemini (the Generative Language API): `generateContent` with JSON output
//! and a response schema, and the embedding endpoints.
//!
//! ```no_run
//! use gralkor::llm::gemini::Gemini;
//! use gralkor::llm::{Embedder, GenerateRequest, LanguageModel, OutputSchema};
//! use serde_json::json;
//!
//! # async fn run() -> gralkor::Result<()> {
//! let google = Gemini::builder("AIza…").build()?;
//! let llm = google.chat("gemini-3.1-flash-lite");
//! let schema = OutputSchema::new("city", json!({
//!     "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}));
//! let answer = llm.generate(&GenerateRequest::new(schema).user("Capital of France?")).await?;
//! let embedder = google.embedder("gemini-embedding-2-preview", None)?;
//! let vectors = embedder.embed(&["Paris".to_string()], "example").await?;
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::embedding::{check_vectors, number_list, resolve_dimension, run_batches};
use super::structured::{CallBounds, estimate_generation, generate_with_repair};
use super::transport::{Call, ClientSettings, Endpoint, reported_count};
use super::{
    Embedder, GenerateRequest, Generation, LanguageModel, Limiter, LimiterSettings, Message,
    ModelSize, RetryPolicy, Role, TokenUsage, UsageMeter, estimate_tokens, schema,
};
use crate::{Error, Result};

internal_item! {
/// The public Generative Language API endpoint.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";
}

internal_item! {
/// The provider name used in errors, logs and usage.
pub const PROVIDER: &str = "google";
}

/// Builds a [`Gemini`] connection.
#[derive(Clone)]
pub struct GeminiBuilder {
    settings: ClientSettings,
}

impl fmt::Debug for GeminiBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.settings.debug(f, "GeminiBuilder")
    }
}

impl GeminiBuilder {
    /// Another endpoint for the same API (a proxy, a test server).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.settings.base_url = url.into();
        self
    }

    /// The reqwest client to send requests with.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.settings.http = Some(client);
        self
    }

    /// Use this limiter; without it the process-wide one for this endpoint and key.
    pub fn limiter(mut self, limiter: Limiter) -> Self {
        self.settings.limiter = Some(limiter);
        self
    }

    /// Settings for the limiter created for this key when none is given.
    pub fn limits(mut self, limits: LimiterSettings) -> Self {
        self.settings.limits = limits;
        self
    }

    /// Use this limiter for embedding requests. Without it the process-wide embedding
    /// limiter for this endpoint and key is used: embeddings have a budget of their
    /// own, apart from chat requests.
    pub fn embedding_limiter(mut self, limiter: Limiter) -> Self {
        self.settings.embedding_limiter = Some(limiter);
        self
    }

    /// Settings for the embedding limiter created for this key when none is given.
    pub fn embedding_limits(mut self, limits: LimiterSettings) -> Self {
        self.settings.embedding_limits = limits;
        self
    }

    /// The retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.settings.retry = retry;
        self
    }

    /// The meter calls are recorded in (a new one by default).
    pub fn usage(mut self, usage: UsageMeter) -> Self {
        self.settings.usage = Some(usage);
        self
    }

    /// Checks the settings and builds the connection.
    pub fn build(self) -> Result<Gemini> {
        let endpoint =
            self.settings
                .connect(PROVIDER, "GOOGLE_API_KEY", "google base URL", |_| false)?;
        Ok(Gemini {
            inner: Arc::new(endpoint),
        })
    }
}

/// A connection to Gemini for one key. Cheap to clone; clients made from it share its
/// limiter, retry policy and usage meter. The key travels in the `x-goog-api-key`
/// header, never in the URL.
#[derive(Clone)]
pub struct Gemini {
    inner: Arc<Endpoint>,
}

impl fmt::Debug for Gemini {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gemini")
            .field("base_url", &self.inner.base_url)
            .field("limiter", &self.inner.transport.limiter)
            .finish_non_exhaustive()
    }
}

impl Gemini {
    /// Starts building a connection with this API key to `DEFAULT_BASE_URL`.
    pub fn builder(api_key: impl Into<String>) -> GeminiBuilder {
        GeminiBuilder {
            settings: ClientSettings::new(api_key.into(), DEFAULT_BASE_URL),
        }
    }

    /// A structured-generation client for `model` (also used for small requests until
    /// [`GeminiChat::with_small_model`]).
    pub fn chat(&self, model: impl Into<String>) -> GeminiChat {
        let model = bare_model(&model.into());
        GeminiChat {
            conn: self.clone(),
            small_model: model.clone(),
            model,
            temperature: None,
            bounds: CallBounds::default(),
        }
    }

    /// An embedder for `model`, one text per request (batch size 1) unless
    /// [`GeminiEmbedder::with_batch_size`] says otherwise. `dimension` as for
    /// [`OpenAi::embedder`](super::openai::OpenAi::embedder); a shortened size is
    /// requested as `outputDimensionality` and the vectors are re-normalised.
    pub fn embedder(
        &self,
        model: impl Into<String>,
        dimension: Option<usize>,
    ) -> Result<GeminiEmbedder> {
        let model = bare_model(&model.into());
        let (dimension, send_dimensions) = resolve_dimension(&model, dimension)?;
        Ok(GeminiEmbedder {
            conn: self.clone(),
            model,
            dimension,
            send_dimensions,
            batch_size: 1,
        })
    }

    /// The limiter every generation request of this connection goes through.
    pub fn limiter(&self) -> &Limiter {
        &self.inner.transport.limiter
    }

    /// The limiter every embedding request of this connection goes through.
    pub fn embedding_limiter(&self) -> &Limiter {
        &self.inner.transport.embedding_limiter
    }

    /// The meter every request of this connection is recorded in.
    pub fn usage(&self) -> &UsageMeter {
        &self.inner.transport.usage
    }

    fn url(&self, model: &str, method: &str) -> String {
        format!("{}/models/{model}:{method}", self.inner.base_url)
    }

    fn auth(&self) -> [(&'static str, String); 1] {
        [("x-goog-api-key", self.inner.api_key.clone())]
    }
}

fn bare_model(model: &str) -> String {
    model.trim().trim_start_matches("models/").to_string()
}

/// Structured generation through `generateContent`. Made by [`Gemini::chat`].
#[derive(Clone)]
pub struct GeminiChat {
    conn: Gemini,
    model: String,
    small_model: String,
    temperature: Option<f32>,
    bounds: CallBounds,
}

impl fmt::Debug for GeminiChat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiChat")
            .field("model", &self.model)
            .field("small_model", &self.small_model)
            .finish_non_exhaustive()
    }
}

impl GeminiChat {
    /// The model for [`ModelSize::Small`] requests.
    pub fn with_small_model(mut self, model: impl Into<String>) -> Self {
        self.small_model = bare_model(&model.into());
        self
    }

    /// The most output tokens any call may ask for; as
    /// [`OpenAiChat::with_max_output_tokens`](super::openai::OpenAiChat::with_max_output_tokens).
    pub fn with_max_output_tokens(mut self, max: u32) -> Self {
        self.bounds.max_output_tokens = Some(max);
        self
    }

    /// A deadline on one whole call; as
    /// [`OpenAiChat::with_call_deadline`](super::openai::OpenAiChat::with_call_deadline).
    pub fn with_call_deadline(mut self, deadline: std::time::Duration) -> Self {
        self.bounds.deadline = Some(deadline);
        self
    }

    /// Repair turns after an unusable answer (default 1).
    pub fn with_repair_attempts(mut self, attempts: u32) -> Self {
        self.bounds.repair_attempts = attempts;
        self
    }

    /// Sampling temperature. Default `None`: the model's own default, which Google
    /// recommends keeping for Gemini 3 models.
    pub fn with_temperature(mut self, temperature: Option<f32>) -> Self {
        self.temperature = temperature;
        self
    }

    /// The request body for one attempt.
    fn body(&self, request: &GenerateRequest, messages: &[Message]) -> Result<Value> {
        let response_schema = schema::to_gemini(&request.schema.schema)
            .map_err(|rule| Error::invalid(format!("schema `{}`", request.schema.name), rule))?;
        let system: Vec<&str> = messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.as_str())
            .collect();
        let contents: Vec<Value> = messages
            .iter()
            .filter(|m| m.role != Role::System)
            .map(|m| {
                let role = if m.role == Role::Assistant {
                    "model"
                } else {
                    "user"
                };
                json!({"role": role, "parts": [{"text": m.content}]})
            })
            .collect();
        let mut config = json!({
            "responseMimeType": "application/json",
            "responseSchema": response_schema,
            "maxOutputTokens": self.bounds.output_cap(request),
        });
        if let Some(t) = self.temperature {
            config["temperature"] = json!(t);
        }
        let mut body = json!({"contents": contents, "generationConfig": config});
        if !system.is_empty() {
            body["systemInstruction"] = json!({"parts": [{"text": system.join("\n\n")}]});
        }
        Ok(body)
    }

    async fn ask(
        &self,
        request: &GenerateRequest,
        messages: Vec<Message>,
    ) -> Result<(String, TokenUsage)> {
        let model = LanguageModel::model(self, request.size);
        let body = self.body(request, &messages)?;
        let auth = self.conn.auth();
        let call = Call {
            operation: "generate",
            label: &request.label,
            url: self.conn.url(model, "generateContent"),
            headers: &auth,
            body: &body,
            estimated_tokens: estimate_generation(&messages, self.bounds.output_cap(request)),
        };
        let (reply, usage) = self
            .conn
            .inner
            .transport
            .post(&call, generate_usage)
            .await?;
        Ok((answer_text(&reply, self.bounds.output_cap(request))?, usage))
    }
}

fn generate_usage(reply: &Value) -> TokenUsage {
    let n = |p: &str| reported_count(reply, p);
    TokenUsage {
        prompt_tokens: n("/usageMetadata/promptTokenCount"),
        completion_tokens: n("/usageMetadata/candidatesTokenCount")
            + n("/usageMetadata/thoughtsTokenCount"),
    }
}

/// The categories a response was flagged for, for error messages.
fn flagged_categories(ratings: Option<&Value>) -> String {
    let flagged: Vec<&str> = ratings
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| {
            r.get("blocked").and_then(Value::as_bool) == Some(true)
                || matches!(
                    r.get("probability").and_then(Value::as_str),
                    Some("HIGH" | "MEDIUM")
                )
        })
        .filter_map(|r| r.get("category").and_then(Value::as_str))
        .collect();
    if flagged.is_empty() {
        String::new()
    } else {
        format!("; flagged: {}", flagged.join(", "))
    }
}

/// The answer text of a `generateContent` reply, or a clear error when the prompt or
/// the answer was blocked or the answer was cut off.
fn answer_text(reply: &Value, max_output_tokens: u32) -> Result<String> {
    let output_error = |message: String| Error::ModelOutput {
        provider: PROVIDER.to_string(),
        message,
    };
    let candidate = reply.pointer("/candidates/0");
    if let Some(reason) = reply
        .pointer("/promptFeedback/blockReason")
        .and_then(Value::as_str)
        && candidate.is_none()
    {
        let flagged = flagged_categories(reply.pointer("/promptFeedback/safetyRatings"));
        return Err(output_error(format!(
            "the prompt was blocked by Gemini (blockReason: {reason}{flagged})"
        )));
    }
    let candidate =
        candidate.ok_or_else(|| output_error("the reply has no candidates".to_string()))?;
    match candidate.get("finishReason").and_then(Value::as_str) {
        None | Some("STOP" | "FINISH_REASON_UNSPECIFIED") => {}
        Some("MAX_TOKENS") => {
            return Err(output_error(format!(
                "the answer was cut off at max_output_tokens = {max_output_tokens}; raise the cap or shorten the input"
            )));
        }
        Some(reason) => {
            let flagged = flagged_categories(candidate.get("safetyRatings"));
            return Err(output_error(format!(
                "the answer was blocked by Gemini (finishReason: {reason}{flagged})"
            )));
        }
    }
    let text: String = candidate
        .pointer("/content/parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    Ok(text)
}

#[async_trait]
impl LanguageModel for GeminiChat {
    /// Calls `generateContent` with JSON output and the translated schema; see
    /// [`LanguageModel::generate`].
    ///
    /// ```no_run
    /// # use gralkor::llm::{gemini::Gemini, GenerateRequest, LanguageModel, OutputSchema};
    /// # async fn run() -> gralkor::Result<()> {
    /// let llm = Gemini::builder("AIza…").build()?.chat("gemini-3.1-flash-lite");
    /// let schema = OutputSchema::new("yes_no", serde_json::json!({
    ///     "type": "object", "properties": {"yes": {"type": "boolean"}}, "required": ["yes"]}));
    /// let answer = llm.generate(&GenerateRequest::new(schema).user("Is water wet?")).await?;
    /// # Ok(()) }
    /// ```
    async fn generate(&self, request: &GenerateRequest) -> Result<Generation> {
        let model = LanguageModel::model(self, request.size);
        let work = generate_with_repair(
            PROVIDER,
            model,
            self.bounds.repair_attempts,
            request,
            |messages| self.ask(request, messages),
        );
        self.bounds
            .within_deadline(PROVIDER, model, request, work)
            .await
    }

    fn provider(&self) -> &str {
        PROVIDER
    }

    fn model(&self, size: ModelSize) -> &str {
        match size {
            ModelSize::Default => &self.model,
            ModelSize::Small => &self.small_model,
        }
    }
}

/// Gemini embeddings. Made by [`Gemini::embedder`].
#[derive(Clone)]
pub struct GeminiEmbedder {
    conn: Gemini,
    model: String,
    dimension: usize,
    send_dimensions: bool,
    batch_size: usize,
}

impl fmt::Debug for GeminiEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiEmbedder")
            .field("model", &self.model)
            .field("dimension", &self.dimension)
            .field("batch_size", &self.batch_size)
            .finish()
    }
}

impl GeminiEmbedder {
    /// Texts per request. 1 (the default) uses `embedContent`; more uses
    /// `batchEmbedContents`. Requests are sent concurrently, within the limiter.
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    fn request_for(&self, text: &str) -> Value {
        let mut r = json!({"model": format!("models/{}", self.model), "content": {"parts": [{"text": text}]}});
        if self.send_dimensions {
            r["outputDimensionality"] = Value::from(self.dimension);
        }
        r
    }

    async fn embed_batch(self, batch: Vec<String>, label: String) -> Result<Vec<Vec<f32>>> {
        let single = batch.len() == 1 && self.batch_size == 1;
        let (method, body) = if single {
            ("embedContent", self.request_for(&batch[0]))
        } else {
            (
                "batchEmbedContents",
                json!({"requests": batch.iter().map(|t| self.request_for(t)).collect::<Vec<_>>()}),
            )
        };
        let auth = self.conn.auth();
        let call = Call {
            operation: super::transport::EMBED_OPERATION,
            label: &label,
            url: self.conn.url(&self.model, method),
            headers: &auth,
            body: &body,
            estimated_tokens: batch.iter().map(|t| estimate_tokens(t)).sum(),
        };
        let (reply, _) = self
            .conn
            .inner
            .transport
            .post(&call, |r| TokenUsage {
                prompt_tokens: reported_count(r, "/usageMetadata/promptTokenCount"),
                completion_tokens: 0,
            })
            .await?;
        let values: Vec<&Value> = if single {
            reply.pointer("/embedding/values").into_iter().collect()
        } else {
            reply
                .get("embeddings")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|e| e.get("values"))
                .collect()
        };
        let mut vectors = values
            .into_iter()
            .map(|v| v.as_array().and_then(|xs| number_list(xs)))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::ModelOutput {
                provider: PROVIDER.to_string(),
                message: "an embedding in the reply is not a list of numbers".to_string(),
            })?;
        if vectors.len() != batch.len() {
            return Err(Error::ModelOutput {
                provider: PROVIDER.to_string(),
                message: format!(
                    "{} texts were sent but {} embeddings came back",
                    batch.len(),
                    vectors.len()
                ),
            });
        }
        check_vectors(PROVIDER, &self.model, self.dimension, &vectors)?;
        if self.send_dimensions {
            // Shortened Gemini vectors are not unit length.
            for v in &mut vectors {
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                if norm > 0.0 {
                    v.iter_mut().for_each(|x| *x /= norm);
                }
            }
        }
        Ok(vectors)
    }
}

#[async_trait]
impl Embedder for GeminiEmbedder {
    fn dimension(&self) -> usize {
        self.dimension
    }

    /// One request per batch (one text per request by default); see
    /// [`Embedder::embed`].
    ///
    /// ```no_run
    /// # use gralkor::llm::{gemini::Gemini, Embedder};
    /// # async fn run() -> gralkor::Result<()> {
    /// let e = Gemini::builder("AIza…").build()?.embedder("gemini-embedding-001", Some(768))?;
    /// let vectors = e.embed(&["hello".to_string(), "world".to_string()], "example").await?;
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
    fn blocked_and_truncated_answers_are_errors() {
        let blocked_prompt = json!({"promptFeedback": {"blockReason": "SAFETY",
            "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH"}]}});
        let e = answer_text(&blocked_prompt, 10).unwrap_err().to_string();
        assert!(e.contains("prompt was blocked by Gemini (blockReason: SAFETY; flagged: HARM_CATEGORY_HARASSMENT)"), "{e}");
        let cut = json!({"candidates": [{"finishReason": "MAX_TOKENS", "content": {"parts": [{"text": "{\"a\":"}]}}]});
        assert!(
            answer_text(&cut, 10)
                .unwrap_err()
                .to_string()
                .contains("cut off at max_output_tokens = 10")
        );
        let recitation = json!({"candidates": [{"finishReason": "RECITATION"}]});
        assert!(
            answer_text(&recitation, 10)
                .unwrap_err()
                .to_string()
                .contains("finishReason: RECITATION")
        );
        let ok = json!({"candidates": [{"finishReason": "STOP", "content": {"parts": [
            {"text": "thinking…", "thought": true}, {"text": "{\"a\":"}, {"text": "1}"}]}}]});
        assert_eq!(answer_text(&ok, 10).unwrap(), "{\"a\":1}");
    }

    #[test]
    fn model_names_lose_the_models_prefix() {
        assert_eq!(
            bare_model(" models/gemini-3.1-flash-lite "),
            "gemini-3.1-flash-lite"
        );
    }
}
