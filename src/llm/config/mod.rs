//! Which models play which role, with which credentials: `GRALKOR_LLM_MODEL`,
//! `GRALKOR_EMBEDDER_MODEL` and the provider keys.
//!
//! A role whose variable is unset follows the keys present (see
//! [`ModelConfig::from_lookup`]): `GOOGLE_API_KEY` (with or without `OPENAI_API_KEY`)
//! selects the Google defaults, `OPENAI_API_KEY` alone the OpenAI defaults,
//! `OPENAI_BASE_URL` alone an OpenAI-compatible server without a key, and no key at
//! all the local embedder with no language model (extraction off).

use std::sync::Arc;
use std::time::Duration;

use super::openai::OutputMode;
use super::{Embedder, LanguageModel, LimiterSettings, Reranker, RetryPolicy, UsageMeter};

mod build;
mod choice;
mod env;
mod spec;

pub use choice::{Choice, ProviderAccess, Selection};
pub use spec::{ModelSpec, Provider};
use spec::{SpecError, form_error};

/// Environment variable of the LLM role's spec.
pub const LLM_MODEL_VAR: &str = "GRALKOR_LLM_MODEL";
/// Environment variable of the embedder role's spec.
pub const EMBEDDER_MODEL_VAR: &str = "GRALKOR_EMBEDDER_MODEL";
/// Default LLM spec when `GOOGLE_API_KEY` is set.
pub const DEFAULT_LLM_MODEL: &str = "google:gemini-3.1-flash-lite";
/// Default embedder spec when `GOOGLE_API_KEY` is set.
pub const DEFAULT_EMBEDDER_MODEL: &str = "google:gemini-embedding-2-preview";
/// Default LLM spec when `OPENAI_API_KEY` or `OPENAI_BASE_URL` is set and
/// `GOOGLE_API_KEY` is not.
pub const DEFAULT_OPENAI_LLM_MODEL: &str = "openai:gpt-4.1-mini";
/// Default embedder spec when `OPENAI_API_KEY` or `OPENAI_BASE_URL` is set and
/// `GOOGLE_API_KEY` is not.
pub const DEFAULT_OPENAI_EMBEDDER_MODEL: &str = "openai:text-embedding-3-small";
/// Default embedder spec with no provider key and no `OPENAI_BASE_URL`.
pub const DEFAULT_LOCAL_EMBEDDER_MODEL: &str = "local:all-minilm-l6-v2";
internal_item! {
/// The default deadline of one whole structured call (5 minutes).
pub const DEFAULT_CALL_DEADLINE: Duration = Duration::from_secs(300);
}
/// The in-process embedding models a `local:` spec may name, with their vector size.
pub const LOCAL_EMBEDDING_MODELS: &[(&str, usize)] = &[("all-minilm-l6-v2", 384)];

/// The model roles and everything needed to build their clients.
///
/// The LLM and the embedder each pick a provider from their own spec; the reranker
/// follows the LLM's provider. Only a provider some role selects needs a key. Without
/// an LLM ([`ModelConfig::embedder_only`], or no provider key in the environment)
/// nothing is extracted: episodes only.
/// [`ModelConfig::from_env`] reads the environment; the builder methods set
/// everything explicitly, and the environment is never read again after that.
///
/// ```
/// use gralkor::llm::{ModelConfig, ModelSpec, Provider};
///
/// let config = ModelConfig::new(
///     ModelSpec::new(Provider::OpenAi, "gpt-4.1-mini"),
///     ModelSpec::new(Provider::Google, "gemini-embedding-2-preview"),
/// )
/// .openai_key("sk-…")
/// .google_key("AIza…");
/// config.validate().unwrap();
///
/// let err = ModelConfig::new(
///     ModelSpec::new(Provider::OpenAi, "gpt-4.1-mini"),
///     ModelSpec::new(Provider::OpenAi, "text-embedding-3-small"),
/// )
/// .validate()
/// .unwrap_err();
/// assert!(err.to_string().contains("OPENAI_API_KEY"));
/// ```
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// The LLM role (`GRALKOR_LLM_MODEL`); `None`: no extraction.
    pub llm: Option<ModelSpec>,
    /// The LLM provider's model for small requests (`GRALKOR_LLM_SMALL_MODEL`);
    /// the LLM model when unset.
    pub small_llm_model: Option<String>,
    /// The embedder role (`GRALKOR_EMBEDDER_MODEL`).
    pub embedder: ModelSpec,
    /// The embedding size (`GRALKOR_EMBEDDER_DIMENSION`); needed only for models whose
    /// size gralkor does not know, or to shorten vectors.
    pub embedder_dimension: Option<usize>,
    /// OpenAI credentials (`OPENAI_API_KEY`, `OPENAI_BASE_URL`).
    pub openai: ProviderAccess,
    /// Google credentials (`GOOGLE_API_KEY`).
    pub google: ProviderAccess,
    /// Limits of chat requests (generation and reranking), per provider key
    /// (`GRALKOR_LLM_MAX_IN_FLIGHT`, `GRALKOR_LLM_REQUESTS_PER_MINUTE`,
    /// `GRALKOR_LLM_TOKENS_PER_MINUTE`). Default: 8 in flight, no per-minute budget.
    pub limits: LimiterSettings,
    /// Limits of embedding requests, per provider key, apart from the chat ones
    /// (`GRALKOR_EMBEDDER_MAX_IN_FLIGHT`, `GRALKOR_EMBEDDER_REQUESTS_PER_MINUTE`,
    /// `GRALKOR_EMBEDDER_TOKENS_PER_MINUTE`). Default: 8 in flight, no per-minute
    /// budget.
    pub embedding_limits: LimiterSettings,
    /// The retry policy of every client.
    pub retry: RetryPolicy,
    /// The reqwest client to use (a default one when `None`).
    pub http_client: Option<reqwest::Client>,
    /// How structured answers are constrained on an OpenAI-compatible server
    /// (`GRALKOR_LLM_OUTPUT_MODE=auto|json_schema|json_object`; default `auto`).
    pub output_mode: OutputMode,
    /// The most output tokens any structured call may ask for
    /// (`GRALKOR_LLM_MAX_OUTPUT_TOKENS`); below it each call is sized from what its
    /// step needs ([`GenerateRequest::output_cap`](super::GenerateRequest::output_cap)).
    /// Default: none beyond that sizing.
    pub max_output_tokens: Option<u32>,
    /// The deadline of one whole structured call, attempts, retries and repairs
    /// included (`GRALKOR_LLM_CALL_TIMEOUT_SECS`). Default: 5 minutes.
    pub call_deadline: Duration,
    /// Repair turns after an unusable answer (`GRALKOR_LLM_REPAIR_ATTEMPTS`; default 1).
    pub repair_attempts: u32,
    /// Why each role has its spec (see [`ModelConfig::describe`]).
    pub selection: Selection,
}

impl Default for ModelConfig {
    /// The Google default specs, no keys.
    fn default() -> Self {
        ModelConfig::new(
            ModelSpec::new(Provider::Google, "gemini-3.1-flash-lite"),
            ModelSpec::new(Provider::Google, "gemini-embedding-2-preview"),
        )
    }
}

/// The model clients a gralkor instance uses, sharing limiters and one usage meter.
#[derive(Debug, Clone)]
pub struct Models {
    /// Structured generation; `None` without an LLM role (no extraction).
    pub llm: Option<Arc<dyn LanguageModel>>,
    /// Embeddings.
    pub embedder: Arc<dyn Embedder>,
    /// Reranking; present exactly when `llm` is.
    pub reranker: Option<Arc<dyn Reranker>>,
    /// Where every call is recorded.
    pub usage: UsageMeter,
}

fn local_dimension(model: &str) -> Option<usize> {
    LOCAL_EMBEDDING_MODELS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(model.trim()))
        .map(|(_, d)| *d)
}

fn shown(spec: Option<&ModelSpec>) -> String {
    spec.map_or_else(|| "unset".to_string(), |s| format!("`{s}`"))
}

impl ModelConfig {
    /// Two roles, no credentials, default limits and retry policy.
    pub fn new(llm: ModelSpec, embedder: ModelSpec) -> Self {
        ModelConfig::with_roles(Some(llm), embedder)
    }

    fn with_roles(llm: Option<ModelSpec>, embedder: ModelSpec) -> Self {
        ModelConfig {
            llm,
            small_llm_model: None,
            embedder,
            embedder_dimension: None,
            openai: ProviderAccess::default(),
            google: ProviderAccess::default(),
            limits: LimiterSettings::default(),
            embedding_limits: LimiterSettings::default(),
            retry: RetryPolicy::default(),
            http_client: None,
            output_mode: OutputMode::Auto,
            max_output_tokens: None,
            call_deadline: DEFAULT_CALL_DEADLINE,
            repair_attempts: 1,
            selection: Selection::GIVEN,
        }
    }

    /// An embedder without a language model: episodes are embedded, never extracted.
    ///
    /// ```
    /// use gralkor::llm::{ModelConfig, ModelSpec, Provider};
    /// let config = ModelConfig::embedder_only(ModelSpec::new(Provider::Local, "all-minilm-l6-v2"));
    /// config.validate().unwrap();
    /// assert!(!config.extracts());
    /// ```
    pub fn embedder_only(embedder: ModelSpec) -> Self {
        ModelConfig::with_roles(None, embedder)
    }

    /// Whether an LLM role is configured (episodes are extracted).
    pub fn extracts(&self) -> bool {
        self.llm.is_some()
    }

    /// Sets the OpenAI key.
    pub fn openai_key(mut self, key: impl Into<String>) -> Self {
        self.openai.api_key = Some(key.into());
        self
    }

    /// Sets the OpenAI endpoint (Ollama, vLLM, llama.cpp, …).
    pub fn openai_base_url(mut self, url: impl Into<String>) -> Self {
        self.openai.base_url = Some(url.into());
        self
    }

    /// Sets the Google key.
    pub fn google_key(mut self, key: impl Into<String>) -> Self {
        self.google.api_key = Some(key.into());
        self
    }

    /// Sets the Gemini endpoint.
    pub fn google_base_url(mut self, url: impl Into<String>) -> Self {
        self.google.base_url = Some(url.into());
        self
    }

    /// Sets the model for small requests.
    pub fn small_llm_model(mut self, model: impl Into<String>) -> Self {
        self.small_llm_model = Some(model.into());
        self
    }

    /// Sets the embedding size.
    pub fn embedder_dimension(mut self, dimension: usize) -> Self {
        self.embedder_dimension = Some(dimension);
        self
    }

    /// Sets the per-key limits of chat requests.
    pub fn limits(mut self, limits: LimiterSettings) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the per-key limits of embedding requests.
    pub fn embedding_limits(mut self, limits: LimiterSettings) -> Self {
        self.embedding_limits = limits;
        self
    }

    /// Sets the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the reqwest client.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    /// Sets how structured answers are constrained on an OpenAI-compatible server.
    pub fn output_mode(mut self, mode: OutputMode) -> Self {
        self.output_mode = mode;
        self
    }

    /// Sets the most output tokens any structured call may ask for.
    pub fn max_output_tokens(mut self, max: u32) -> Self {
        self.max_output_tokens = Some(max);
        self
    }

    /// Sets the deadline of one whole structured call.
    pub fn call_deadline(mut self, deadline: Duration) -> Self {
        self.call_deadline = deadline;
        self
    }

    /// Sets the repair turns after an unusable answer.
    pub fn repair_attempts(mut self, attempts: u32) -> Self {
        self.repair_attempts = attempts;
        self
    }

    fn access(&self, provider: Provider) -> &ProviderAccess {
        match provider {
            Provider::OpenAi => &self.openai,
            // `local` has no credentials; `validate` skips it before asking.
            Provider::Google | Provider::Local => &self.google,
        }
    }

    fn roles(&self) -> impl Iterator<Item = (&'static str, &'static str, &ModelSpec)> {
        [
            self.llm.as_ref().map(|s| ("llm", LLM_MODEL_VAR, s)),
            Some(("embedder", EMBEDDER_MODEL_VAR, &self.embedder)),
        ]
        .into_iter()
        .flatten()
    }

    fn uses(&self, provider: Provider) -> bool {
        self.roles().any(|(_, _, s)| s.provider == provider)
    }
}
