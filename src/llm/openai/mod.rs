//! OpenAI, and any server that speaks OpenAI's chat-completions and embeddings API
//! (Ollama, vLLM, llama.cpp, …) through [`OpenAiBuilder::base_url`].
//!
//! Build one [`OpenAi`] connection per key; every model client made from it shares its
//! `Limiter`, [`RetryPolicy`] and [`UsageMeter`]:
//!
//! ```no_run
//! use gralkor::llm::openai::OpenAi;
//! use gralkor::llm::{GenerateRequest, LanguageModel, OutputSchema};
//! use serde_json::json;
//!
//! # async fn run() -> gralkor::Result<()> {
//! let openai = OpenAi::builder("sk-…").build()?;
//! let llm = openai.chat("gpt-4.1-mini");
//! let answer = llm
//!     .generate(&GenerateRequest::new(OutputSchema::new(
//!         "capital",
//!         json!({"type": "object", "properties": {"city": {"type": "string"}},
//!                "required": ["city"], "additionalProperties": false}),
//!     )).user("What is the capital of France?"))
//!     .await?;
//! println!("{}", answer.value["city"]);
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::structured::{
    CallBounds, estimate_generation, generate_with_repair, schema_instruction,
};
use super::transport::{Call, ClientSettings, Endpoint, Transport, reported_count};
use super::{
    GenerateRequest, Generation, LanguageModel, Limiter, LimiterSettings, Message, ModelSize,
    RetryPolicy, TokenUsage, UsageMeter, schema,
};
use crate::{Error, Result};

mod embed;
mod rerank;

pub use embed::OpenAiEmbedder;
internal_use!(embed::DEFAULT_EMBED_BATCH_SIZE);
pub use rerank::OpenAiReranker;

internal_item! {
/// OpenAI's public endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
}

internal_item! {
/// The provider name used in errors, logs and usage.
pub const PROVIDER: &str = "openai";
}

/// Builds an [`OpenAi`] connection.
#[derive(Clone)]
pub struct OpenAiBuilder {
    settings: ClientSettings,
    cap_field: Option<TokenCapField>,
}

/// The name of the output-token cap in chat requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenCapField {
    /// `max_completion_tokens`: what OpenAI itself expects (and reasoning models require).
    MaxCompletionTokens,
    /// `max_tokens`: what most compatible servers (Ollama, llama.cpp, older vLLM) read.
    MaxTokens,
}

impl TokenCapField {
    fn as_str(self) -> &'static str {
        match self {
            TokenCapField::MaxCompletionTokens => "max_completion_tokens",
            TokenCapField::MaxTokens => "max_tokens",
        }
    }
}

impl fmt::Debug for OpenAiBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.settings.debug(f, "OpenAiBuilder")
    }
}

impl OpenAiBuilder {
    /// Another endpoint that speaks the same API, e.g. `http://localhost:11434/v1` for
    /// Ollama. Requests go to `<base_url>/chat/completions` and `<base_url>/embeddings`.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.settings.base_url = url.into();
        self
    }

    /// The reqwest client to send requests with (proxies, TLS roots, pools). The retry
    /// policy's per-attempt timeout applies on top of it.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.settings.http = Some(client);
        self
    }

    /// Use this limiter (e.g. one shared with other connections). Without it the
    /// process-wide limiter for this endpoint and key is used (`Limiter::shared`).
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

    /// Which field carries the output-token cap. Default:
    /// [`TokenCapField::MaxCompletionTokens`] for `DEFAULT_BASE_URL`,
    /// [`TokenCapField::MaxTokens`] for any other base URL.
    pub fn token_cap_field(mut self, field: TokenCapField) -> Self {
        self.cap_field = Some(field);
        self
    }

    /// Checks the settings and builds the connection. A base URL that is not
    /// `http(s)://…` is a [`Error::Config`], and so is a blank key for OpenAI itself;
    /// a compatible server at another base URL (Ollama, vLLM, llama.cpp) may take no
    /// key, and then no `Authorization` header is sent.
    pub fn build(self) -> Result<OpenAi> {
        let Endpoint {
            api_key,
            base_url,
            transport,
        } = self
            .settings
            .connect(PROVIDER, "OPENAI_API_KEY", "OPENAI_BASE_URL", |url| {
                url != DEFAULT_BASE_URL
            })?;
        let official = base_url == DEFAULT_BASE_URL;
        let cap_field = self.cap_field.unwrap_or(if official {
            TokenCapField::MaxCompletionTokens
        } else {
            TokenCapField::MaxTokens
        });
        Ok(OpenAi {
            inner: Arc::new(Connection {
                api_key,
                base_url,
                cap_field: cap_field.as_str(),
                official,
                transport,
            }),
        })
    }
}

struct Connection {
    api_key: String,
    base_url: String,
    /// `max_completion_tokens` or `max_tokens`.
    cap_field: &'static str,
    /// OpenAI itself, which always supports `json_schema`.
    official: bool,
    transport: Transport,
}

/// A connection to OpenAI (or a compatible server) for one key. Cheap to clone.
#[derive(Clone)]
pub struct OpenAi {
    inner: Arc<Connection>,
}

impl fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAi")
            .field("base_url", &self.inner.base_url)
            .field("limiter", &self.inner.transport.limiter)
            .finish_non_exhaustive()
    }
}

impl OpenAi {
    /// Starts building a connection with this API key, to `DEFAULT_BASE_URL`, with
    /// default limits and retry policy.
    pub fn builder(api_key: impl Into<String>) -> OpenAiBuilder {
        OpenAiBuilder {
            settings: ClientSettings::new(api_key.into(), DEFAULT_BASE_URL),
            cap_field: None,
        }
    }

    /// A structured-generation client for `model` (also used for
    /// [`ModelSize::Small`] until [`OpenAiChat::with_small_model`] is set).
    pub fn chat(&self, model: impl Into<String>) -> OpenAiChat {
        let model = model.into();
        OpenAiChat {
            conn: self.clone(),
            small_model: model.clone(),
            model,
            temperature: Some(0.0),
            reasoning_effort: None,
            mode: OutputMode::Auto,
            bounds: CallBounds::default(),
            schema_support: Arc::new(AtomicU8::new(SCHEMA_UNKNOWN)),
        }
    }

    /// The limiter every chat and rerank request of this connection goes through.
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

    /// The endpoint.
    pub fn base_url(&self) -> &str {
        &self.inner.base_url
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.inner.base_url)
    }

    /// The bearer key, or no header for a keyless compatible server.
    fn auth(&self) -> Vec<(&'static str, String)> {
        let key = self.inner.api_key.trim();
        if key.is_empty() {
            Vec::new()
        } else {
            vec![("authorization", format!("Bearer {key}"))]
        }
    }

    async fn post(
        &self,
        call: Call<'_>,
        usage_of: impl Fn(&Value) -> TokenUsage,
    ) -> Result<(Value, TokenUsage)> {
        self.inner.transport.post(&call, usage_of).await
    }

    /// As `post`, but a refusal of `json_schema` is returned at once, not retried.
    async fn post_json_schema(
        &self,
        call: Call<'_>,
        usage_of: impl Fn(&Value) -> TokenUsage,
    ) -> Result<(Value, TokenUsage)> {
        self.inner
            .transport
            .post_until(&call, usage_of, refuses_json_schema)
            .await
    }
}

/// How answers are constrained to the schema (`GRALKOR_LLM_OUTPUT_MODE`).
///
/// | server | `auto` ends up as |
/// |---|---|
/// | OpenAI, Gemini's OpenAI endpoint | `json_schema` (strict when the schema allows) |
/// | Ollama, vLLM, LM Studio, llama.cpp's `llama-server` | `json_schema` |
/// | llama-cpp-python's server (refuses `json_schema`, with HTTP 500) | `json_object` with the schema (its own constrained form) |
/// | a server without any schema support | `json_object`, schema in the prompt |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputMode {
    /// `response_format: json_schema`; if a compatible server (not OpenAI itself)
    /// refuses that — any 4xx or 5xx whose message names `response_format` or
    /// `json_schema` (and not an invalid schema) — switch to
    /// [`OutputMode::JsonObject`] for the rest of this client's life. A refusal is
    /// never retried, whatever its status, so it costs one round trip; other faults
    /// get the retry policy as usual.
    #[default]
    Auto,
    /// Always `response_format: json_schema` (strict when the schema allows it).
    JsonSchema,
    /// `response_format: {"type": "json_object", "schema": …}` — the schema-constrained
    /// form of llama.cpp and llama-cpp-python; servers that do not read `schema` still
    /// return JSON — with the schema also stated in the prompt. OpenAI itself gets no
    /// `schema` field.
    JsonObject,
}

impl OutputMode {
    /// The setting's name: `auto`, `json_schema` or `json_object`.
    pub fn as_str(self) -> &'static str {
        match self {
            OutputMode::Auto => "auto",
            OutputMode::JsonSchema => "json_schema",
            OutputMode::JsonObject => "json_object",
        }
    }

    /// Parses a setting (`auto`, `json_schema`, `json_object`, any case); `field` names
    /// it in the error.
    ///
    /// ```
    /// use gralkor::llm::openai::OutputMode;
    /// assert_eq!(OutputMode::parse("GRALKOR_LLM_OUTPUT_MODE", " JSON_object ").unwrap(), OutputMode::JsonObject);
    /// let err = OutputMode::parse("GRALKOR_LLM_OUTPUT_MODE", "grammar").unwrap_err();
    /// assert!(err.to_string().contains("one of auto, json_schema, json_object"));
    /// ```
    pub fn parse(field: &str, value: &str) -> Result<OutputMode> {
        let v = value.trim();
        [
            OutputMode::Auto,
            OutputMode::JsonSchema,
            OutputMode::JsonObject,
        ]
        .into_iter()
        .find(|m| m.as_str().eq_ignore_ascii_case(v))
        .ok_or_else(|| {
            Error::config(
                field,
                format!("must be one of auto, json_schema, json_object (got `{v}`)"),
            )
        })
    }
}

/// `json_schema` support of the server, as `Auto` has learnt it.
const SCHEMA_UNKNOWN: u8 = 0;
const SCHEMA_WORKS: u8 = 1;
const SCHEMA_REFUSED: u8 = 2;

/// Structured generation through chat completions. Made by [`OpenAi::chat`].
#[derive(Clone)]
pub struct OpenAiChat {
    conn: OpenAi,
    model: String,
    small_model: String,
    temperature: Option<f32>,
    reasoning_effort: Option<String>,
    mode: OutputMode,
    bounds: CallBounds,
    schema_support: Arc<AtomicU8>,
}

impl fmt::Debug for OpenAiChat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiChat")
            .field("base_url", &self.conn.inner.base_url)
            .field("model", &self.model)
            .field("small_model", &self.small_model)
            .field("mode", &self.mode)
            .field("bounds", &self.bounds)
            .finish_non_exhaustive()
    }
}

/// The model name without a `vendor/` prefix, lowercased, for matching model families.
fn plain_model_name(model: &str) -> String {
    model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase()
}

internal_item! {
/// Whether `model` is a reasoning model, which takes no `temperature`: the o-series
/// and GPT-5 and later (except the `-chat` variants).
pub fn is_reasoning_model(model: &str) -> bool {
    let m = plain_model_name(model);
    if m.contains("-chat") {
        return false;
    }
    let o_series = m.len() >= 2
        && m.starts_with('o')
        && m[1..].chars().next().is_some_and(|c| c.is_ascii_digit());
    let gpt_major = m
        .strip_prefix("gpt-")
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse::<u32>().ok());
    o_series || gpt_major.is_some_and(|n| n >= 5)
}
}

internal_item! {
/// The `reasoning_effort` gralkor sends by default: `none` for GPT-5.5 and GPT-5.6
/// (so memory writes do not inherit an incompatible reasoning tier), nothing otherwise.
pub fn default_reasoning_effort(model: &str) -> Option<&'static str> {
    let m = plain_model_name(model);
    let pinned = ["gpt-5.5", "gpt-5.6"].iter().any(|p| {
        m.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    });
    pinned.then_some("none")
}
}

impl OpenAiChat {
    /// The model for [`ModelSize::Small`] requests.
    pub fn with_small_model(mut self, model: impl Into<String>) -> Self {
        self.small_model = model.into();
        self
    }

    /// Sampling temperature for non-reasoning models (default `Some(0.0)`); `None`
    /// leaves the server's default. Reasoning models never get one.
    pub fn with_temperature(mut self, temperature: Option<f32>) -> Self {
        self.temperature = temperature;
        self
    }

    /// `reasoning_effort` for reasoning models, overriding
    /// `default_reasoning_effort`.
    pub fn with_reasoning_effort(mut self, effort: impl Into<String>) -> Self {
        self.reasoning_effort = Some(effort.into());
        self
    }

    /// How answers are constrained (default [`OutputMode::Auto`]).
    pub fn with_output_mode(mut self, mode: OutputMode) -> Self {
        self.mode = mode;
        self
    }

    /// The most output tokens any call may ask for (default: each request's own cap,
    /// [`GenerateRequest::output_cap`]). A weak model rambles to the end of whatever
    /// it is allowed; this bounds the time one answer can take.
    pub fn with_max_output_tokens(mut self, max: u32) -> Self {
        self.bounds.max_output_tokens = Some(max);
        self
    }

    /// A deadline on one whole call — every attempt, retry wait and repair — after
    /// which it fails with [`Error::Timeout`] naming the model and the step. Default:
    /// none beyond the retry policy's.
    pub fn with_call_deadline(mut self, deadline: Duration) -> Self {
        self.bounds.deadline = Some(deadline);
        self
    }

    /// Repair turns after an unusable answer (default 1; 0 turns repairs off).
    pub fn with_repair_attempts(mut self, attempts: u32) -> Self {
        self.bounds.repair_attempts = attempts;
        self
    }

    /// The connection this client uses.
    pub fn connection(&self) -> &OpenAi {
        &self.conn
    }

    /// The mode the next request is sent in: `json_object` or not.
    fn use_json_object(&self) -> bool {
        match self.mode {
            OutputMode::JsonObject => true,
            OutputMode::JsonSchema => false,
            OutputMode::Auto => self.schema_support.load(Ordering::Relaxed) == SCHEMA_REFUSED,
        }
    }

    /// What [`OutputMode::Auto`] has learnt so far: `Some(true)` the server took a
    /// `json_schema` request, `Some(false)` it refused one (and `json_object` is used
    /// from then on), `None` not yet known.
    pub fn json_schema_support(&self) -> Option<bool> {
        match self.schema_support.load(Ordering::Relaxed) {
            SCHEMA_WORKS => Some(true),
            SCHEMA_REFUSED => Some(false),
            _ => None,
        }
    }

    /// The request body for one attempt.
    pub(crate) fn body(
        &self,
        request: &GenerateRequest,
        messages: &[Message],
        json_object: bool,
        cap: u32,
    ) -> Value {
        let model = LanguageModel::model(self, request.size);
        let mut wire: Vec<Value> = messages
            .iter()
            .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
            .collect();
        let response_format = if json_object {
            let instruction = schema_instruction(&request.schema);
            match wire.last_mut() {
                Some(last) if last["role"] == "user" => {
                    let text = format!(
                        "{}\n\n{instruction}",
                        last["content"].as_str().unwrap_or_default()
                    );
                    last["content"] = Value::from(text);
                }
                _ => wire.push(json!({"role": "user", "content": instruction})),
            }
            if self.conn.inner.official {
                json!({"type": "json_object"})
            } else {
                json!({"type": "json_object", "schema": request.schema.schema})
            }
        } else {
            json!({"type": "json_schema", "json_schema": {
                "name": request.schema.name,
                "schema": request.schema.schema,
                "strict": schema::is_strict_compatible(&request.schema.schema),
            }})
        };
        let mut body =
            json!({"model": model, "messages": wire, "response_format": response_format});
        body[self.conn.inner.cap_field] = Value::from(cap);
        if is_reasoning_model(model) {
            let effort = self
                .reasoning_effort
                .as_deref()
                .or_else(|| default_reasoning_effort(model));
            if let Some(effort) = effort {
                body["reasoning_effort"] = Value::from(effort);
            }
        } else if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        body
    }

    async fn ask(
        &self,
        request: &GenerateRequest,
        messages: Vec<Message>,
    ) -> Result<(String, TokenUsage)> {
        let cap = self.bounds.output_cap(request);
        let json_object = self.use_json_object();
        let auth = self.conn.auth();
        let call = |body| Call {
            operation: "chat",
            label: &request.label,
            url: self.conn.url("chat/completions"),
            headers: &auth,
            body,
            estimated_tokens: estimate_generation(&messages, cap),
        };
        let auto = self.mode == OutputMode::Auto && !self.conn.inner.official;
        let reply = if auto && !json_object {
            let body = self.body(request, &messages, false, cap);
            match self.conn.post_json_schema(call(&body), chat_usage).await {
                Ok(reply) => {
                    self.schema_support.store(SCHEMA_WORKS, Ordering::Relaxed);
                    Ok(reply)
                }
                Err(e) if refuses_json_schema(&e) => {
                    tracing::warn!(model = %self.model, error = %e, "server refused json_schema; using json_object with the schema from now on");
                    self.schema_support.store(SCHEMA_REFUSED, Ordering::Relaxed);
                    let body = self.body(request, &messages, true, cap);
                    self.conn.post(call(&body), chat_usage).await
                }
                Err(e) => Err(e),
            }
        } else {
            let body = self.body(request, &messages, json_object, cap);
            self.conn.post(call(&body), chat_usage).await
        };
        let (reply, usage) = reply?;
        let text = chat_text(&reply, cap)?;
        Ok((text, usage))
    }
}

/// Whether a refused request says the server does not take `json_schema` output:
/// any 4xx or 5xx but 408/429 whose message names `response_format` or `json_schema`
/// (llama-cpp-python answers 500 `Input should be 'text' or 'json_object'`).
fn refuses_json_schema(e: &Error) -> bool {
    match e {
        Error::Provider {
            status: Some(status),
            message,
            ..
        } => *status >= 400 && !matches!(status, 408 | 429) && rejects_json_schema(message),
        _ => false,
    }
}

/// Whether an error message says the server does not support `json_schema` output (as
/// opposed to rejecting this particular schema, which falling back would not fix).
fn rejects_json_schema(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    (m.contains("response_format") || m.contains("json_schema")) && !m.contains("invalid schema")
}

/// The usage a chat completion reports.
fn chat_usage(reply: &Value) -> TokenUsage {
    TokenUsage {
        prompt_tokens: reported_count(reply, "/usage/prompt_tokens"),
        completion_tokens: reported_count(reply, "/usage/completion_tokens"),
    }
}

/// The answer text of a chat completion, or why there is none.
fn chat_text(reply: &Value, max_output_tokens: u32) -> Result<String> {
    let output_error = |message: String| Error::ModelOutput {
        provider: PROVIDER.to_string(),
        message,
    };
    let choice = reply
        .pointer("/choices/0")
        .ok_or_else(|| output_error("the reply has no choices".to_string()))?;
    if let Some(refusal) = choice.pointer("/message/refusal").and_then(Value::as_str) {
        return Err(output_error(format!("the model refused: {refusal}")));
    }
    match choice.get("finish_reason").and_then(Value::as_str) {
        Some("length") => {
            return Err(output_error(format!(
                "the answer was cut off at max_output_tokens = {max_output_tokens}; raise the cap or shorten the input"
            )));
        }
        Some("content_filter") => {
            return Err(output_error(
                "the answer was blocked by the content filter".to_string(),
            ));
        }
        _ => {}
    }
    Ok(choice
        .pointer("/message/content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string())
}

#[async_trait]
impl LanguageModel for OpenAiChat {
    /// Sends a chat completion constrained to the schema; see [`LanguageModel::generate`].
    ///
    /// ```no_run
    /// # use gralkor::llm::{openai::OpenAi, GenerateRequest, LanguageModel, OutputSchema};
    /// # async fn run() -> gralkor::Result<()> {
    /// let llm = OpenAi::builder("ollama").base_url("http://localhost:11434/v1").build()?.chat("qwen3");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_models() {
        for m in [
            "o1",
            "o3-mini",
            "o4-mini",
            "gpt-5",
            "gpt-5-mini",
            "gpt-5.5",
            "gpt-6-luna",
            "openai/gpt-5.1",
        ] {
            assert!(is_reasoning_model(m), "{m}");
        }
        for m in [
            "gpt-4.1-mini",
            "gpt-4o",
            "gpt-5-chat-latest",
            "llama3.1",
            "omni",
            "qwen3",
        ] {
            assert!(!is_reasoning_model(m), "{m}");
        }
    }

    #[test]
    fn only_unsupported_json_schema_triggers_the_fallback() {
        assert!(rejects_json_schema(
            "Unsupported response_format type: json_schema"
        ));
        assert!(rejects_json_schema(
            "json_schema is not supported by this model"
        ));
        assert!(!rejects_json_schema(
            "Invalid schema for response_format 'x': 'additionalProperties' is required"
        ));
        assert!(!rejects_json_schema("Invalid 'messages': empty"));
    }

    fn provider_error(status: u16, message: &str) -> Error {
        Error::Provider {
            provider: PROVIDER.into(),
            status: Some(status),
            message: message.into(),
            retry_after: None,
            source: None,
        }
    }

    #[test]
    fn a_refusal_is_recognised_whatever_the_status() {
        // llama-cpp-python 0.3.36's answer to `json_schema`.
        let llama_cpp_python = "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n  \
            Input should be 'text' or 'json_object' [type=literal_error, input_value='json_schema', input_type=str]";
        for status in [400, 422, 500, 501] {
            assert!(
                refuses_json_schema(&provider_error(status, llama_cpp_python)),
                "{status}"
            );
        }
        assert!(!refuses_json_schema(&provider_error(500, "internal error")));
        assert!(!refuses_json_schema(&provider_error(429, llama_cpp_python)));
        assert!(!refuses_json_schema(&provider_error(
            400,
            "Invalid schema for response_format 'x'"
        )));
        assert!(!refuses_json_schema(&Error::Timeout {
            operation: "json_schema".into(),
            after: Duration::from_secs(1)
        }));
    }

    #[test]
    fn reasoning_effort_none_for_gpt_5_5_and_5_6_only() {
        assert_eq!(default_reasoning_effort("gpt-5.5"), Some("none"));
        assert_eq!(default_reasoning_effort("gpt-5.6-mini"), Some("none"));
        assert_eq!(default_reasoning_effort("GPT-5.5"), Some("none"));
        assert_eq!(default_reasoning_effort("gpt-5.55"), None);
        assert_eq!(default_reasoning_effort("gpt-5"), None);
        assert_eq!(default_reasoning_effort("gpt-5.1"), None);
    }
}
