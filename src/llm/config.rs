//! Which models play which role, with which credentials: `GRALKOR_LLM_MODEL`,
//! `GRALKOR_EMBEDDER_MODEL` and the provider keys.

use std::fmt;
use std::sync::Arc;

use super::embedding::resolve_dimension;
use super::gemini::Gemini;
use super::openai::{OpenAi, is_reasoning_model};
use super::transport::check_base_url;
use super::{
    Embedder, LanguageModel, LimiterSettings, ListwiseReranker, Reranker, RetryPolicy, UsageMeter,
};
use crate::{Error, Result};

/// Environment variable of the LLM role's spec.
pub const LLM_MODEL_VAR: &str = "GRALKOR_LLM_MODEL";
/// Environment variable of the embedder role's spec.
pub const EMBEDDER_MODEL_VAR: &str = "GRALKOR_EMBEDDER_MODEL";
/// Default LLM spec.
pub const DEFAULT_LLM_MODEL: &str = "google:gemini-3.1-flash-lite";
/// Default embedder spec.
pub const DEFAULT_EMBEDDER_MODEL: &str = "google:gemini-embedding-2-preview";

/// A supported model provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Provider {
    /// OpenAI, or an OpenAI-compatible server through a base URL.
    OpenAi,
    /// Google Gemini.
    Google,
}

impl Provider {
    /// Every supported provider.
    pub const ALL: [Provider; 2] = [Provider::OpenAi, Provider::Google];

    /// The name used in specs: `openai` or `google`.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Google => "google",
        }
    }

    /// The environment variable holding this provider's API key.
    pub fn key_var(self) -> &'static str {
        match self {
            Provider::OpenAi => "OPENAI_API_KEY",
            Provider::Google => "GOOGLE_API_KEY",
        }
    }

    fn parse(name: &str) -> Option<Provider> {
        Provider::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(name.trim()))
    }

    fn supported_list() -> String {
        Provider::ALL.map(Provider::as_str).join(", ")
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `provider:model` spec such as `openai:gpt-4.1-mini`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelSpec {
    /// Who serves the model.
    pub provider: Provider,
    /// The provider's model name.
    pub model: String,
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.provider, self.model)
    }
}

enum SpecError {
    Form,
    UnknownProvider(String),
}

impl ModelSpec {
    /// A spec from its parts.
    pub fn new(provider: Provider, model: impl Into<String>) -> Self {
        ModelSpec {
            provider,
            model: model.into(),
        }
    }

    /// Parses `provider:model`, split on the first colon, both parts trimmed (so
    /// `openai:llama3.1:8b` is model `llama3.1:8b`). `field` names the setting in the
    /// error.
    ///
    /// ```
    /// use gralkor::llm::{ModelSpec, Provider};
    /// let spec = ModelSpec::parse("GRALKOR_LLM_MODEL", " openai : gpt-4.1-mini ").unwrap();
    /// assert_eq!(spec, ModelSpec::new(Provider::OpenAi, "gpt-4.1-mini"));
    /// assert!(ModelSpec::parse("GRALKOR_LLM_MODEL", "anthropic:claude").is_err());
    /// ```
    pub fn parse(field: &str, spec: &str) -> Result<ModelSpec> {
        Self::parse_inner(spec).map_err(|e| match e {
            SpecError::Form => form_error(field, spec),
            SpecError::UnknownProvider(p) => Error::config(
                field,
                format!(
                    "names unsupported provider `{p}` (got `{}`); supported providers: {}",
                    spec.trim(),
                    Provider::supported_list()
                ),
            ),
        })
    }

    fn parse_inner(spec: &str) -> std::result::Result<ModelSpec, SpecError> {
        let (provider, model) = spec.split_once(':').ok_or(SpecError::Form)?;
        let (provider, model) = (provider.trim(), model.trim());
        if provider.is_empty() || model.is_empty() {
            return Err(SpecError::Form);
        }
        let p = Provider::parse(provider)
            .ok_or_else(|| SpecError::UnknownProvider(provider.to_string()))?;
        Ok(ModelSpec::new(p, model))
    }
}

fn form_error(field: &str, spec: &str) -> Error {
    Error::config(
        field,
        format!(
            "must have the form `provider:model`, e.g. `openai:gpt-4.1-mini` (got `{}`)",
            spec.trim()
        ),
    )
}

/// Credentials and endpoint for one provider. The key is never printed by `Debug`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ProviderAccess {
    /// The API key.
    pub api_key: Option<String>,
    /// An endpoint override (e.g. an Ollama server for `openai`).
    pub base_url: Option<String>,
}

impl fmt::Debug for ProviderAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderAccess")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("base_url", &self.base_url)
            .finish()
    }
}

/// The model roles and everything needed to build their clients.
///
/// The LLM and the embedder each pick a provider from their own spec; the reranker
/// follows the LLM's provider. Only a provider some role selects needs a key.
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
    /// The LLM role (`GRALKOR_LLM_MODEL`).
    pub llm: ModelSpec,
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
    /// Limits applied per provider key.
    pub limits: LimiterSettings,
    /// The retry policy of every client.
    pub retry: RetryPolicy,
    /// The reqwest client to use (a default one when `None`).
    pub http_client: Option<reqwest::Client>,
}

impl Default for ModelConfig {
    /// The default specs, no keys.
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
    /// Structured generation.
    pub llm: Arc<dyn LanguageModel>,
    /// Embeddings.
    pub embedder: Arc<dyn Embedder>,
    /// Reranking.
    pub reranker: Arc<dyn Reranker>,
    /// Where every call of the three is recorded.
    pub usage: UsageMeter,
}

impl ModelConfig {
    /// Two roles, no credentials, default limits and retry policy.
    pub fn new(llm: ModelSpec, embedder: ModelSpec) -> Self {
        ModelConfig {
            llm,
            small_llm_model: None,
            embedder,
            embedder_dimension: None,
            openai: ProviderAccess::default(),
            google: ProviderAccess::default(),
            limits: LimiterSettings::default(),
            retry: RetryPolicy::default(),
            http_client: None,
        }
    }

    /// Reads the process environment; see [`ModelConfig::from_lookup`].
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads settings through `lookup` (a variable name → its value) and validates
    /// them. Variables: `GRALKOR_LLM_MODEL` (default `google:gemini-3.1-flash-lite`),
    /// `GRALKOR_EMBEDDER_MODEL` (default `google:gemini-embedding-2-preview`),
    /// `GRALKOR_LLM_SMALL_MODEL`, `GRALKOR_EMBEDDER_DIMENSION`, `OPENAI_API_KEY`,
    /// `OPENAI_BASE_URL`, `GOOGLE_API_KEY`. Blank values count as unset.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use gralkor::llm::{ModelConfig, Provider};
    ///
    /// let env = HashMap::from([
    ///     ("GRALKOR_LLM_MODEL", "openai:gpt-4.1-mini"),
    ///     ("OPENAI_API_KEY", "sk-test"),
    ///     ("GOOGLE_API_KEY", "AIza-test"),
    /// ]);
    /// let config = ModelConfig::from_lookup(|k| env.get(k).map(|v| v.to_string())).unwrap();
    /// assert_eq!(config.llm.provider, Provider::OpenAi);
    /// assert_eq!(config.embedder.to_string(), "google:gemini-embedding-2-preview");
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let llm_raw = get(LLM_MODEL_VAR).unwrap_or_else(|| DEFAULT_LLM_MODEL.to_string());
        let emb_raw = get(EMBEDDER_MODEL_VAR).unwrap_or_else(|| DEFAULT_EMBEDDER_MODEL.to_string());
        let parse = |field: &str, raw: &str| {
            ModelSpec::parse_inner(raw).map_err(|e| match e {
                SpecError::Form => form_error(field, raw),
                SpecError::UnknownProvider(p) => Error::config(
                    field,
                    format!(
                        "names unsupported provider `{p}` ({LLM_MODEL_VAR}=`{}`, {EMBEDDER_MODEL_VAR}=`{}`); \
                         supported providers: {}",
                        llm_raw.trim(),
                        emb_raw.trim(),
                        Provider::supported_list()
                    ),
                ),
            })
        };
        let llm = parse(LLM_MODEL_VAR, &llm_raw)?;
        let embedder = parse(EMBEDDER_MODEL_VAR, &emb_raw)?;
        let embedder_dimension = match get("GRALKOR_EMBEDDER_DIMENSION") {
            None => None,
            Some(raw) => match raw.trim().parse::<usize>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    return Err(Error::config(
                        "GRALKOR_EMBEDDER_DIMENSION",
                        format!("must be a positive integer (got `{}`)", raw.trim()),
                    ));
                }
            },
        };
        let config = ModelConfig {
            small_llm_model: get("GRALKOR_LLM_SMALL_MODEL").map(|m| m.trim().to_string()),
            embedder_dimension,
            openai: ProviderAccess {
                api_key: get("OPENAI_API_KEY"),
                base_url: get("OPENAI_BASE_URL"),
            },
            google: ProviderAccess {
                api_key: get("GOOGLE_API_KEY"),
                base_url: None,
            },
            ..ModelConfig::new(llm, embedder)
        };
        config.validate()?;
        Ok(config)
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

    /// Sets the per-key limits.
    pub fn limits(mut self, limits: LimiterSettings) -> Self {
        self.limits = limits;
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

    fn access(&self, provider: Provider) -> &ProviderAccess {
        match provider {
            Provider::OpenAi => &self.openai,
            Provider::Google => &self.google,
        }
    }

    /// Checks that every provider some role selects has a non-blank key, and that
    /// model names, the embedding size (known or given) and limits make sense.
    /// Nothing is built or contacted.
    pub fn validate(&self) -> Result<()> {
        for (field, spec) in [
            (LLM_MODEL_VAR, &self.llm),
            (EMBEDDER_MODEL_VAR, &self.embedder),
        ] {
            if spec.model.trim().is_empty() {
                return Err(form_error(field, &format!("{}:", spec.provider)));
            }
        }
        for provider in Provider::ALL {
            let roles: Vec<&str> = [("llm", &self.llm), ("embedder", &self.embedder)]
                .into_iter()
                .filter(|(_, spec)| spec.provider == provider)
                .map(|(role, _)| role)
                .collect();
            if roles.is_empty() {
                continue;
            }
            let access = self.access(provider);
            let blank = access
                .api_key
                .as_deref()
                .is_none_or(|k| k.trim().is_empty());
            // A compatible server at its own base URL (Ollama, vLLM, llama.cpp) may
            // need no key.
            let keyless_server = provider == Provider::OpenAi
                && access.base_url.as_deref().is_some_and(|u| {
                    u.trim().trim_end_matches('/') != crate::llm::openai::DEFAULT_BASE_URL
                });
            if blank && !keyless_server {
                let who = match roles.as_slice() {
                    [one] => format!("the {one} role selects {provider}"),
                    _ => format!("the {} roles select {provider}", roles.join(" and ")),
                };
                let hint = if provider == Provider::OpenAi {
                    "; a compatible server named by OPENAI_BASE_URL may need none"
                } else {
                    ""
                };
                return Err(Error::config(
                    provider.key_var(),
                    format!(
                        "must be set and not blank: {who} ({LLM_MODEL_VAR}=`{}`, {EMBEDDER_MODEL_VAR}=`{}`){hint}",
                        self.llm, self.embedder
                    ),
                ));
            }
        }
        resolve_dimension(&self.embedder.model, self.embedder_dimension)?;
        if let Some(url) = &self.openai.base_url {
            check_base_url("OPENAI_BASE_URL", url)?;
        }
        if let Some(url) = &self.google.base_url {
            check_base_url("google base URL", url)?;
        }
        if self.limits.max_in_flight == 0 {
            return Err(Error::config("limits.max_in_flight", "must be at least 1"));
        }
        if self
            .small_llm_model
            .as_deref()
            .is_some_and(|m| m.trim().is_empty())
        {
            return Err(Error::config(
                "GRALKOR_LLM_SMALL_MODEL",
                "must not be blank",
            ));
        }
        Ok(())
    }

    fn openai(&self, usage: &UsageMeter) -> Result<OpenAi> {
        let mut b = OpenAi::builder(self.openai.api_key.clone().unwrap_or_default())
            .limits(self.limits)
            .retry(self.retry)
            .usage(usage.clone());
        if let Some(url) = &self.openai.base_url {
            b = b.base_url(url);
        }
        if let Some(http) = &self.http_client {
            b = b.http_client(http.clone());
        }
        b.build()
    }

    fn gemini(&self, usage: &UsageMeter) -> Result<Gemini> {
        let mut b = Gemini::builder(self.google.api_key.clone().unwrap_or_default())
            .limits(self.limits)
            .retry(self.retry)
            .usage(usage.clone());
        if let Some(url) = &self.google.base_url {
            b = b.base_url(url);
        }
        if let Some(http) = &self.http_client {
            b = b.http_client(http.clone());
        }
        b.build()
    }

    /// Validates, then builds the three clients. Requests to one provider key share
    /// one limiter (see [`Limiter::shared`](super::Limiter::shared)), and all three
    /// record into one new [`UsageMeter`].
    ///
    /// The reranker follows the LLM's provider: for OpenAI with a non-reasoning model,
    /// the log-probability [`OpenAiReranker`](super::openai::OpenAiReranker) on the
    /// small model; otherwise a [`ListwiseReranker`] over the LLM.
    pub fn build(&self) -> Result<Models> {
        self.validate()?;
        let usage = UsageMeter::new();
        let openai_needed = [&self.llm, &self.embedder]
            .iter()
            .any(|s| s.provider == Provider::OpenAi);
        let google_needed = [&self.llm, &self.embedder]
            .iter()
            .any(|s| s.provider == Provider::Google);
        let openai = openai_needed.then(|| self.openai(&usage)).transpose()?;
        let google = google_needed.then(|| self.gemini(&usage)).transpose()?;
        let small = self
            .small_llm_model
            .clone()
            .unwrap_or_else(|| self.llm.model.clone());
        let (llm, reranker): (Arc<dyn LanguageModel>, Arc<dyn Reranker>) = match self.llm.provider {
            Provider::OpenAi => {
                let conn = openai.as_ref().expect("built above");
                let llm: Arc<dyn LanguageModel> =
                    Arc::new(conn.chat(&self.llm.model).with_small_model(&small));
                let reranker: Arc<dyn Reranker> = if is_reasoning_model(&small) {
                    Arc::new(ListwiseReranker::new(llm.clone()))
                } else {
                    Arc::new(conn.reranker(&small))
                };
                (llm, reranker)
            }
            Provider::Google => {
                let conn = google.as_ref().expect("built above");
                let llm: Arc<dyn LanguageModel> =
                    Arc::new(conn.chat(&self.llm.model).with_small_model(&small));
                (llm.clone(), Arc::new(ListwiseReranker::new(llm)))
            }
        };
        let embedder: Arc<dyn Embedder> = match self.embedder.provider {
            Provider::OpenAi => Arc::new(
                openai
                    .as_ref()
                    .expect("built above")
                    .embedder(&self.embedder.model, self.embedder_dimension)?,
            ),
            Provider::Google => Arc::new(
                google
                    .as_ref()
                    .expect("built above")
                    .embedder(&self.embedder.model, self.embedder_dimension)?,
            ),
        };
        Ok(Models {
            llm,
            embedder,
            reranker,
            usage,
        })
    }
}
