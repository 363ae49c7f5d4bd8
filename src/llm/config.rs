//! Which models play which role, with which credentials: `GRALKOR_LLM_MODEL`,
//! `GRALKOR_EMBEDDER_MODEL` and the provider keys.
//!
//! A role whose variable is unset follows the keys present (see
//! [`ModelConfig::from_lookup`]): `GOOGLE_API_KEY` (with or without `OPENAI_API_KEY`)
//! selects the Google defaults, `OPENAI_API_KEY` alone the OpenAI defaults,
//! `OPENAI_BASE_URL` alone an OpenAI-compatible server without a key, and no key at
//! all the local embedder with no language model (extraction off).

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
/// The in-process embedding models a `local:` spec may name, with their vector size.
pub const LOCAL_EMBEDDING_MODELS: &[(&str, usize)] = &[("all-minilm-l6-v2", 384)];

/// A supported model provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Provider {
    /// OpenAI, or an OpenAI-compatible server through a base URL.
    OpenAi,
    /// Google Gemini.
    Google,
    /// An embedding model run inside the process (embedder role only; no key).
    Local,
}

impl Provider {
    /// Every supported provider.
    pub const ALL: [Provider; 3] = [Provider::OpenAi, Provider::Google, Provider::Local];

    /// The name used in specs: `openai`, `google` or `local`.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Google => "google",
            Provider::Local => "local",
        }
    }

    /// The environment variable holding this provider's API key; `None` for `local`,
    /// which needs none.
    pub fn key_var(self) -> Option<&'static str> {
        match self {
            Provider::OpenAi => Some("OPENAI_API_KEY"),
            Provider::Google => Some("GOOGLE_API_KEY"),
            Provider::Local => None,
        }
    }

    /// Whether this provider can play the LLM role (`local` serves embeddings only).
    pub fn serves_llm(self) -> bool {
        self != Provider::Local
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

/// A `provider:model` spec such as `openai:gpt-4.1-mini` or `local:all-minilm-l6-v2`.
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
    /// let local = ModelSpec::parse("GRALKOR_EMBEDDER_MODEL", "local:all-minilm-l6-v2").unwrap();
    /// assert_eq!(local.provider, Provider::Local);
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

/// Why a role has the spec it has: named explicitly, or a default that follows the
/// provider access present when the environment was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Choice {
    /// Given to the builder ([`ModelConfig::new`], [`ModelConfig::embedder_only`]).
    Given,
    /// Named by the role's variable (`GRALKOR_LLM_MODEL`, `GRALKOR_EMBEDDER_MODEL`).
    Variable,
    /// The Google default: `GOOGLE_API_KEY` is set (with or without `OPENAI_API_KEY`).
    GoogleKey,
    /// The OpenAI default: `OPENAI_API_KEY` is set and `GOOGLE_API_KEY` is not.
    OpenAiKey,
    /// The OpenAI default on a compatible server: `OPENAI_BASE_URL` is set and no
    /// provider key is.
    OpenAiBaseUrl,
    /// No provider key and no `OPENAI_BASE_URL`: the local embedder, no language
    /// model.
    NoProviderKey,
}

impl Choice {
    /// The default choice for the access present.
    pub fn from_access(google_key: bool, openai_key: bool, openai_base_url: bool) -> Choice {
        if google_key {
            Choice::GoogleKey
        } else if openai_key {
            Choice::OpenAiKey
        } else if openai_base_url {
            Choice::OpenAiBaseUrl
        } else {
            Choice::NoProviderKey
        }
    }

    /// The default specs of this choice: the LLM role's (`None`: extraction off) and
    /// the embedder role's. `Given` and `Variable` have none.
    pub fn defaults(self) -> Option<(Option<&'static str>, &'static str)> {
        match self {
            Choice::Given | Choice::Variable => None,
            Choice::GoogleKey => Some((Some(DEFAULT_LLM_MODEL), DEFAULT_EMBEDDER_MODEL)),
            Choice::OpenAiKey | Choice::OpenAiBaseUrl => Some((
                Some(DEFAULT_OPENAI_LLM_MODEL),
                DEFAULT_OPENAI_EMBEDDER_MODEL,
            )),
            Choice::NoProviderKey => Some((None, DEFAULT_LOCAL_EMBEDDER_MODEL)),
        }
    }

    /// The reason as a clause: "because GOOGLE_API_KEY is set". `var` names the role's
    /// variable.
    pub fn because(self, var: &str) -> String {
        match self {
            Choice::Given => "as configured".to_string(),
            Choice::Variable => format!("because {var} selects it"),
            Choice::GoogleKey => "because GOOGLE_API_KEY is set".to_string(),
            Choice::OpenAiKey => {
                "because OPENAI_API_KEY is set and GOOGLE_API_KEY is not".to_string()
            }
            Choice::OpenAiBaseUrl => "because OPENAI_BASE_URL names an OpenAI-compatible server \
                 and no provider key is set"
                .to_string(),
            Choice::NoProviderKey => "because no provider key is set".to_string(),
        }
    }
}

/// Why each role has its spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Selection {
    /// The LLM role (also why there is none).
    pub llm: Choice,
    /// The embedder role.
    pub embedder: Choice,
}

impl Selection {
    /// Both roles given to the builder.
    pub const GIVEN: Selection = Selection {
        llm: Choice::Given,
        embedder: Choice::Given,
    };
}

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

    /// Reads the process environment; see [`ModelConfig::from_lookup`].
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads settings through `lookup` (a variable name → its value) and validates
    /// them. Variables: `GRALKOR_LLM_MODEL`, `GRALKOR_EMBEDDER_MODEL`,
    /// `GRALKOR_LLM_SMALL_MODEL`, `GRALKOR_EMBEDDER_DIMENSION`, `OPENAI_API_KEY`,
    /// `OPENAI_BASE_URL`, `GOOGLE_API_KEY`. Blank values count as unset.
    ///
    /// A role whose variable is set uses that spec, and a provider it selects must
    /// have its key (an error naming the variable and the role otherwise). A role
    /// whose variable is unset follows the access present ([`Choice::from_access`]):
    ///
    /// | access | LLM role | embedder role |
    /// |---|---|---|
    /// | `GOOGLE_API_KEY` (with or without `OPENAI_API_KEY`) | `google:gemini-3.1-flash-lite` | `google:gemini-embedding-2-preview` |
    /// | `OPENAI_API_KEY` alone | `openai:gpt-4.1-mini` | `openai:text-embedding-3-small` |
    /// | `OPENAI_BASE_URL` alone | `openai:gpt-4.1-mini` at that server, no key | `openai:text-embedding-3-small` there |
    /// | none | none: extraction off | `local:all-minilm-l6-v2` |
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
    /// assert_eq!(config.llm.unwrap().provider, Provider::OpenAi);
    /// assert_eq!(config.embedder.to_string(), "google:gemini-embedding-2-preview");
    ///
    /// let offline = ModelConfig::from_lookup(|_| None).unwrap();
    /// assert!(offline.llm.is_none());
    /// assert_eq!(offline.embedder.to_string(), "local:all-minilm-l6-v2");
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let default = Choice::from_access(
            get("GOOGLE_API_KEY").is_some(),
            get("OPENAI_API_KEY").is_some(),
            get("OPENAI_BASE_URL").is_some(),
        );
        let (llm_default, emb_default) = default.defaults().expect("a default choice");
        let (llm_raw, llm_choice) = match get(LLM_MODEL_VAR) {
            Some(raw) => (Some(raw), Choice::Variable),
            None => (llm_default.map(str::to_string), default),
        };
        let (emb_raw, emb_choice) = match get(EMBEDDER_MODEL_VAR) {
            Some(raw) => (raw, Choice::Variable),
            None => (emb_default.to_string(), default),
        };
        let llm_shown = llm_raw
            .as_deref()
            .map_or_else(|| "unset".to_string(), |r| format!("`{}`", r.trim()));
        let parse = |field: &str, raw: &str| {
            ModelSpec::parse_inner(raw).map_err(|e| match e {
                SpecError::Form => form_error(field, raw),
                SpecError::UnknownProvider(p) => Error::config(
                    field,
                    format!(
                        "names unsupported provider `{p}` ({LLM_MODEL_VAR}={llm_shown}, {EMBEDDER_MODEL_VAR}=`{}`); \
                         supported providers: {}",
                        emb_raw.trim(),
                        Provider::supported_list()
                    ),
                ),
            })
        };
        let llm = llm_raw
            .as_deref()
            .map(|raw| parse(LLM_MODEL_VAR, raw))
            .transpose()?;
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
        let limits = |role: &str| -> Result<LimiterSettings> {
            let defaults = LimiterSettings::default();
            let number = |what: &str| -> Result<Option<u32>> {
                let var = format!("GRALKOR_{role}_{what}");
                get(&var)
                    .map(|raw| match raw.trim().parse::<u32>() {
                        Ok(n) if n > 0 => Ok(n),
                        _ => Err(Error::config(
                            var.as_str(),
                            format!("must be a positive integer (got `{}`)", raw.trim()),
                        )),
                    })
                    .transpose()
            };
            Ok(LimiterSettings {
                max_in_flight: number("MAX_IN_FLIGHT")?
                    .map_or(defaults.max_in_flight, |n| n as usize),
                requests_per_minute: number("REQUESTS_PER_MINUTE")?
                    .or(defaults.requests_per_minute),
                tokens_per_minute: number("TOKENS_PER_MINUTE")?.or(defaults.tokens_per_minute),
            })
        };
        let config = ModelConfig {
            llm,
            limits: limits("LLM")?,
            embedding_limits: limits("EMBEDDER")?,
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
            selection: Selection {
                llm: llm_choice,
                embedder: emb_choice,
            },
            ..ModelConfig::with_roles(None, embedder)
        };
        config.validate()?;
        Ok(config)
    }

    /// A sentence naming the chosen models and why, e.g. `embedder
    /// local:all-minilm-l6-v2 because no provider key is set; extraction off because no
    /// provider key is set (set GOOGLE_API_KEY or OPENAI_API_KEY to extract facts)`.
    /// Never contains a key.
    ///
    /// ```
    /// use gralkor::llm::ModelConfig;
    /// let config = ModelConfig::from_lookup(|k| (k == "OPENAI_API_KEY").then(|| "sk".into())).unwrap();
    /// assert_eq!(
    ///     config.describe(),
    ///     "embedder openai:text-embedding-3-small because OPENAI_API_KEY is set and GOOGLE_API_KEY is not; \
    ///      llm openai:gpt-4.1-mini because OPENAI_API_KEY is set and GOOGLE_API_KEY is not"
    /// );
    /// ```
    pub fn describe(&self) -> String {
        let embedder = format!(
            "embedder {} {}",
            self.embedder,
            self.selection.embedder.because(EMBEDDER_MODEL_VAR)
        );
        let llm = match &self.llm {
            Some(spec) => format!("llm {spec} {}", self.selection.llm.because(LLM_MODEL_VAR)),
            None => match self.selection.llm {
                Choice::Given | Choice::Variable => {
                    "extraction off (no language model configured)".to_string()
                }
                other => format!(
                    "extraction off {} (set GOOGLE_API_KEY or OPENAI_API_KEY to extract facts)",
                    other.because(LLM_MODEL_VAR)
                ),
            },
        };
        match self.openai.base_url.as_deref() {
            Some(url) if self.uses(Provider::OpenAi) => {
                format!("{embedder}; {llm}; openai at {}", url.trim())
            }
            _ => format!("{embedder}; {llm}"),
        }
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

    /// Checks that every provider some role selects has a non-blank key (`local`
    /// needs none, and serves the embedder role only), and that model names, the
    /// embedding size (known or given) and limits make sense. Nothing is built or
    /// contacted.
    pub fn validate(&self) -> Result<()> {
        for (_, field, spec) in self.roles() {
            if spec.model.trim().is_empty() {
                return Err(form_error(field, &format!("{}:", spec.provider)));
            }
        }
        if let Some(spec) = self.llm.as_ref().filter(|s| !s.provider.serves_llm()) {
            return Err(Error::config(
                LLM_MODEL_VAR,
                format!(
                    "names provider `{}`, which serves the embedder role only (got `{spec}`); \
                     the llm role needs one of: openai, google",
                    spec.provider
                ),
            ));
        }
        for provider in Provider::ALL {
            let Some(key_var) = provider.key_var() else {
                continue;
            };
            let roles: Vec<&str> = self
                .roles()
                .filter(|(_, _, spec)| spec.provider == provider)
                .map(|(role, _, _)| role)
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
                    key_var,
                    format!(
                        "must be set and not blank: {who} ({LLM_MODEL_VAR}={}, {EMBEDDER_MODEL_VAR}=`{}`){hint}",
                        shown(self.llm.as_ref()),
                        self.embedder
                    ),
                ));
            }
        }
        if self.embedder.provider == Provider::Local {
            let Some(native) = local_dimension(&self.embedder.model) else {
                return Err(Error::config(
                    EMBEDDER_MODEL_VAR,
                    format!(
                        "names local model `{}`, which gralkor does not have; local models: {}",
                        self.embedder.model.trim(),
                        LOCAL_EMBEDDING_MODELS
                            .iter()
                            .map(|(name, _)| *name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            };
            if let Some(n) = self.embedder_dimension.filter(|n| *n != native) {
                return Err(Error::config(
                    "GRALKOR_EMBEDDER_DIMENSION",
                    format!(
                        "must be {native} or unset for `{}` (got {n}): local vectors are not shortened",
                        self.embedder
                    ),
                ));
            }
        } else {
            resolve_dimension(&self.embedder.model, self.embedder_dimension)?;
        }
        if let Some(url) = &self.openai.base_url {
            check_base_url("OPENAI_BASE_URL", url)?;
        }
        if let Some(url) = &self.google.base_url {
            check_base_url("google base URL", url)?;
        }
        if self.limits.max_in_flight == 0 {
            return Err(Error::config("limits.max_in_flight", "must be at least 1"));
        }
        if self.embedding_limits.max_in_flight == 0 {
            return Err(Error::config(
                "embedding_limits.max_in_flight",
                "must be at least 1",
            ));
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
            .embedding_limits(self.embedding_limits)
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
            .embedding_limits(self.embedding_limits)
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

    /// Validates, then builds the clients. Requests to one provider key share one
    /// limiter (see [`Limiter::shared`](super::Limiter::shared)), and all record into
    /// one new [`UsageMeter`].
    ///
    /// The reranker follows the LLM's provider: for OpenAI with a non-reasoning model,
    /// the log-probability [`OpenAiReranker`](super::openai::OpenAiReranker) on the
    /// small model; otherwise a [`ListwiseReranker`] over the LLM. Without an LLM
    /// there is no reranker.
    ///
    /// A `local:` embedder is a `llm::local::DeferredLocalEmbedder`
    /// (found or provisioned, then loaded, on [`Embedder::warm_up`] or its first use)
    /// when the crate is built with the `local-embedder` feature (on by default), and
    /// a configuration error naming the feature otherwise.
    pub fn build(&self) -> Result<Models> {
        self.validate()?;
        #[cfg(not(feature = "local-embedder"))]
        if self.embedder.provider == Provider::Local {
            return Err(Error::config(
                EMBEDDER_MODEL_VAR,
                format!(
                    "selects the local embedder `{}` ({}), which needs gralkor's \
                     `local-embedder` feature (on by default; this build turned it off); \
                     enable it, or set GOOGLE_API_KEY or OPENAI_API_KEY, or \
                     {EMBEDDER_MODEL_VAR} to an `openai:` or `google:` model",
                    self.embedder,
                    self.selection.embedder.because(EMBEDDER_MODEL_VAR)
                ),
            ));
        }
        let usage = UsageMeter::new();
        let openai = self
            .uses(Provider::OpenAi)
            .then(|| self.openai(&usage))
            .transpose()?;
        let google = self
            .uses(Provider::Google)
            .then(|| self.gemini(&usage))
            .transpose()?;
        let (llm, reranker) = match &self.llm {
            None => (None, None),
            Some(spec) => {
                let small = self
                    .small_llm_model
                    .clone()
                    .unwrap_or_else(|| spec.model.clone());
                let (llm, reranker): (Arc<dyn LanguageModel>, Arc<dyn Reranker>) =
                    match spec.provider {
                        Provider::OpenAi => {
                            let conn = openai.as_ref().expect("built above");
                            let llm: Arc<dyn LanguageModel> =
                                Arc::new(conn.chat(&spec.model).with_small_model(&small));
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
                                Arc::new(conn.chat(&spec.model).with_small_model(&small));
                            (llm.clone(), Arc::new(ListwiseReranker::new(llm)))
                        }
                        Provider::Local => unreachable!("validate rejects a local llm"),
                    };
                (Some(llm), Some(reranker))
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
            #[cfg(feature = "local-embedder")]
            Provider::Local => Arc::new(
                super::local::DeferredLocalEmbedder::new(super::local::LocalModelConfig::default())
                    .usage(usage.clone()),
            ),
            #[cfg(not(feature = "local-embedder"))]
            Provider::Local => unreachable!("returned above"),
        };
        Ok(Models {
            llm,
            embedder,
            reranker,
            usage,
        })
    }
}
