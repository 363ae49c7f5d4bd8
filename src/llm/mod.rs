//! Model providers: the only code in gralkor that speaks HTTP to a model.
//!
//! This layer knows nothing of graphs. It offers three capabilities behind object-safe
//! traits, each used as `Arc<dyn …>`:
//!
//! * [`LanguageModel`]: structured generation. Messages in, a JSON value out that is
//!   valid against the [`OutputSchema`] the caller named (checked here, with one repair
//!   attempt), plus token usage.
//! * [`Embedder`]: a batch of texts in, one vector of [`Embedder::dimension`] floats
//!   per text out.
//! * [`Reranker`]: a query and passages in, one relevance score in `[0, 1]` per passage.
//!
//! Providers: [`openai`] (OpenAI and any OpenAI-compatible server — Ollama, vLLM,
//! llama.cpp — through a base URL) and [`gemini`] (Google Gemini). [`ModelConfig`]
//! turns the `GRALKOR_LLM_MODEL` / `GRALKOR_EMBEDDER_MODEL` specs and the provider keys
//! into a ready [`Models`] bundle.
//!
//! Every HTTP call goes through one `Limiter` per provider and key (in-flight cap,
//! requests and tokens per minute) and one [`RetryPolicy`] (429, 5xx, timeouts and
//! connection errors retried with backoff and jitter, honouring `Retry-After`), and is
//! recorded in a [`UsageMeter`].
//!
//! For tests, [`doubles`] has deterministic stand-ins: [`doubles::ScriptedModel`],
//! [`doubles::HashEmbedder`] and [`doubles::WordOverlapReranker`].

use std::fmt;

use async_trait::async_trait;
use serde_json::Value;

use crate::Result;

mod config;
pub mod doubles;
mod embedding;
pub mod gemini;
mod limiter;
mod listwise;
#[cfg(feature = "testing")]
pub mod llama_server;
#[cfg(feature = "local-embedder")]
pub mod local;
#[cfg(test)]
mod ontology_tests;
pub mod openai;
mod retry;
internal_mod!(schema);
mod structured;
mod transport;
mod usage;

// The public surface: the model traits and requests, the configuration a user sets
// (`ModelConfig` and its parts) and what it builds (`Models`), and the usage meter.
pub use config::{Choice, ModelConfig, ModelSpec, Models, Provider, ProviderAccess, Selection};
pub use limiter::LimiterSettings;
pub use retry::RetryPolicy;
pub use usage::{UsageMeter, UsageSnapshot, UsageTotals};

internal_use!(config::{
    DEFAULT_EMBEDDER_MODEL, DEFAULT_LLM_MODEL, DEFAULT_LOCAL_EMBEDDER_MODEL,
    DEFAULT_OPENAI_EMBEDDER_MODEL, DEFAULT_OPENAI_LLM_MODEL, EMBEDDER_MODEL_VAR, LLM_MODEL_VAR,
    LOCAL_EMBEDDING_MODELS,
});
internal_use!(limiter::{Limiter, LimiterStats, Permit});
internal_use!(listwise::{DEFAULT_LISTWISE_BATCH, ListwiseReranker});

/// Who says a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Instructions that frame the whole exchange.
    System,
    /// The caller's input.
    User,
    /// A previous answer of the model (used by the repair turn).
    Assistant,
}

impl Role {
    /// The lowercase wire name (`system`, `user`, `assistant`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One message of a generation request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Who says it.
    pub role: Role,
    /// The text.
    pub content: String,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message {
            role: Role::System,
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: content.into(),
        }
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// Which of a provider's two configured models answers a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ModelSize {
    /// The main model (`GRALKOR_LLM_MODEL`).
    #[default]
    Default,
    /// The small model, for cheap steps (summaries, timestamps). Falls back to the main
    /// model when no small model is configured.
    Small,
}

/// The JSON schema the answer must satisfy, with a name.
///
/// The schema uses the subset described in `schema`: `type` (one name or an array
/// such as `["string", "null"]`), `properties`, `required`, `items`, `enum`,
/// `additionalProperties: false`, and the annotations `description` and `title`.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSchema {
    /// A short identifier (`[A-Za-z0-9_-]`, at most 64 characters), e.g.
    /// `extracted_entities`. Providers show it to the model; the scripted test double
    /// keys its answers by it.
    pub name: String,
    /// The JSON schema. The root must be an object schema.
    pub schema: Value,
}

impl OutputSchema {
    /// A named schema.
    pub fn new(name: impl Into<String>, schema: Value) -> Self {
        OutputSchema {
            name: name.into(),
            schema,
        }
    }

    /// Checks the name and the schema (root `type: object`, only supported keywords).
    pub fn check(&self) -> Result<()> {
        let ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !ok {
            return Err(crate::Error::invalid(
                "schema.name",
                "must be 1 to 64 characters from [A-Za-z0-9_-]",
            ));
        }
        schema::check_schema(&self.schema)
            .map_err(|rule| crate::Error::invalid(format!("schema `{}`", self.name), rule))?;
        if self.schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(crate::Error::invalid(
                format!("schema `{}`", self.name),
                "must have `\"type\": \"object\"` at the root",
            ));
        }
        Ok(())
    }
}

internal_item! {
/// The largest output-token cap a [`GenerateRequest`] is sized to when it sets none
/// (see [`GenerateRequest::output_cap`]).
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 16_384;
}

/// Output tokens every sized cap allows beyond what the schema and input need.
const SIZED_CAP_BASE: u32 = 256;
/// The smallest sized cap.
const SIZED_CAP_MIN: u32 = 512;

/// A structured-generation request.
///
/// ```
/// use gralkor::llm::{GenerateRequest, ModelSize, OutputSchema};
/// use serde_json::json;
///
/// let request = GenerateRequest::new(OutputSchema::new(
///     "greeting",
///     json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
/// ))
/// .system("You greet people.")
/// .user("Greet Ada.")
/// .size(ModelSize::Small)
/// .max_output_tokens(256)
/// .label("greet");
/// assert_eq!(request.messages.len(), 2);
/// assert_eq!(request.output_cap(), 256);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateRequest {
    /// The conversation, usually one system and one user message.
    pub messages: Vec<Message>,
    /// The schema the answer must satisfy.
    pub schema: OutputSchema,
    /// Which model answers.
    pub size: ModelSize,
    /// Upper bound on generated tokens; an answer cut at this bound is an error.
    /// `None` (the default) sizes the bound from what the step can need: see
    /// [`GenerateRequest::output_cap`].
    pub max_output_tokens: Option<u32>,
    /// Caller-supplied label for usage accounting (pipeline step, destination, …).
    pub label: String,
}

impl GenerateRequest {
    /// A request with no messages yet, the default model size, an output cap sized
    /// from the schema and the input ([`GenerateRequest::output_cap`]) and the label
    /// `unlabelled`.
    pub fn new(schema: OutputSchema) -> Self {
        GenerateRequest {
            messages: Vec::new(),
            schema,
            size: ModelSize::Default,
            max_output_tokens: None,
            label: "unlabelled".to_string(),
        }
    }

    /// Appends a system message.
    pub fn system(mut self, content: impl Into<String>) -> Self {
        self.messages.push(Message::system(content));
        self
    }

    /// Appends a user message.
    pub fn user(mut self, content: impl Into<String>) -> Self {
        self.messages.push(Message::user(content));
        self
    }

    /// Sets the model size.
    pub fn size(mut self, size: ModelSize) -> Self {
        self.size = size;
        self
    }

    /// Sets the output-token cap (instead of the sized one).
    pub fn max_output_tokens(mut self, max: u32) -> Self {
        self.max_output_tokens = Some(max);
        self
    }

    /// The output-token cap of this request: the one set, else one sized from what the
    /// step can legitimately need — the schema's own text plus twice the user
    /// messages (an answer restates at most what it was given, entities and facts
    /// included, with JSON around it), plus 256 — between 512 and
    /// `DEFAULT_MAX_OUTPUT_TOKENS`. The system message (instructions) does not
    /// count. A client may lower it further ([`openai::OpenAiChat::with_max_output_tokens`]).
    ///
    /// ```
    /// use gralkor::llm::{GenerateRequest, OutputSchema};
    /// use serde_json::json;
    ///
    /// let schema = OutputSchema::new("n", json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
    /// let short = GenerateRequest::new(schema.clone()).system("x".repeat(40_000)).user("Count: one two.");
    /// assert_eq!(short.output_cap(), 512);
    /// let long = GenerateRequest::new(schema).user("word ".repeat(2_000));
    /// assert!(long.output_cap() > 5_000 && long.output_cap() < 5_400, "{}", long.output_cap());
    /// ```
    pub fn output_cap(&self) -> u32 {
        if let Some(max) = self.max_output_tokens {
            return max;
        }
        let schema = estimate_tokens(&self.schema.schema.to_string());
        let input: u64 = self
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .map(|m| estimate_tokens(&m.content))
            .sum();
        let sized = u64::from(SIZED_CAP_BASE) + schema + 2 * input;
        sized.clamp(
            u64::from(SIZED_CAP_MIN),
            u64::from(DEFAULT_MAX_OUTPUT_TOKENS),
        ) as u32
    }

    /// Sets the usage label.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Checks the request before anything is sent: a valid schema, at least one
    /// message, a positive token cap.
    pub fn check(&self) -> Result<()> {
        self.schema.check()?;
        if self.messages.is_empty() {
            return Err(crate::Error::invalid("messages", "must not be empty"));
        }
        if self.max_output_tokens == Some(0) {
            return Err(crate::Error::invalid(
                "max_output_tokens",
                "must be positive",
            ));
        }
        Ok(())
    }
}

/// Tokens a call consumed, as the provider reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenUsage {
    /// Input tokens.
    pub prompt_tokens: u64,
    /// Output tokens (including any reasoning tokens the provider bills).
    pub completion_tokens: u64,
}

impl TokenUsage {
    /// Prompt plus completion tokens.
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

impl std::ops::AddAssign for TokenUsage {
    fn add_assign(&mut self, rhs: Self) {
        self.prompt_tokens += rhs.prompt_tokens;
        self.completion_tokens += rhs.completion_tokens;
    }
}

/// The answer to a [`GenerateRequest`].
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The answer, valid against the request's schema.
    pub value: Value,
    /// Tokens used, summed over the repair attempt when there was one.
    pub usage: TokenUsage,
    /// Whether the first answer was unusable and the repair attempt produced this one.
    pub repaired: bool,
}

/// Structured generation against a JSON schema.
///
/// Implementations validate the answer against [`GenerateRequest::schema`]: an `Ok`
/// value is always valid. See [`openai::OpenAiChat`], [`gemini::GeminiChat`] and
/// the test double [`doubles::ScriptedModel`].
#[async_trait]
pub trait LanguageModel: Send + Sync + fmt::Debug {
    /// Generates an answer valid against the request's schema.
    ///
    /// Errors: [`Error::InvalidInput`](crate::Error::InvalidInput) for a bad request,
    /// [`Error::Provider`](crate::Error::Provider) /
    /// [`Error::Timeout`](crate::Error::Timeout) when the provider failed after the
    /// retry policy gave up or the call's deadline passed,
    /// [`Error::ModelOutput`](crate::Error::ModelOutput) when the answer stayed unusable
    /// after the repair attempts, was blocked or was truncated (naming the model, the
    /// step — the request's label — and what was wrong).
    async fn generate(&self, request: &GenerateRequest) -> Result<Generation>;

    /// The provider name (`openai`, `google`, `scripted`, …).
    fn provider(&self) -> &str;

    /// The model that answers requests of the given size.
    fn model(&self, size: ModelSize) -> &str;
}

/// Turns texts into vectors.
#[async_trait]
pub trait Embedder: Send + Sync + fmt::Debug {
    /// The length of every vector this embedder returns.
    fn dimension(&self) -> usize;

    /// Embeds `texts`, returning one vector per text in the same order. An empty
    /// batch returns an empty list without calling the provider. `label` is recorded in
    /// the usage accounting.
    async fn embed(&self, texts: &[String], label: &str) -> Result<Vec<Vec<f32>>>;

    /// Makes the embedder ready to answer without delay — an in-process model is
    /// found, provisioned and loaded — so that a missing model is an error when the
    /// memory connects, not at the first write. Nothing to do for a remote provider
    /// (the default).
    async fn warm_up(&self) -> Result<()> {
        Ok(())
    }

    /// The provider name.
    fn provider(&self) -> &str;

    /// The embedding model.
    fn model(&self) -> &str;
}

/// Scores passages by relevance to a query (a cross-encoder).
#[async_trait]
pub trait Reranker: Send + Sync + fmt::Debug {
    /// Returns one score in `[0, 1]` per passage, in the passages' order; higher means
    /// more relevant. An empty list returns an empty list without a call.
    async fn rerank(&self, query: &str, passages: &[String], label: &str) -> Result<Vec<f64>>;

    /// The provider name.
    fn provider(&self) -> &str;
}

/// A rough token count for budgeting before the provider reports the real one:
/// one token per four bytes, at least one.
pub(crate) fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4).max(1)
}
