//! `provider:model` specs and the providers they name.

use std::fmt;

use crate::{Error, Result};

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

    pub(super) fn supported_list() -> String {
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

pub(super) enum SpecError {
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

    pub(super) fn parse_inner(spec: &str) -> std::result::Result<ModelSpec, SpecError> {
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

pub(super) fn form_error(field: &str, spec: &str) -> Error {
    Error::config(
        field,
        format!(
            "must have the form `provider:model`, e.g. `openai:gpt-4.1-mini` (got `{}`)",
            spec.trim()
        ),
    )
}
