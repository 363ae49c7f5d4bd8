//! Reading the configuration from the environment, and describing it.

use super::{
    Choice, EMBEDDER_MODEL_VAR, LLM_MODEL_VAR, ModelConfig, ModelSpec, Provider, ProviderAccess,
    Selection, SpecError, form_error,
};
use std::time::Duration;

use super::DEFAULT_CALL_DEADLINE;
use crate::llm::LimiterSettings;
use crate::llm::openai::OutputMode;
use crate::{Error, Result};

impl ModelConfig {
    /// Reads the process environment; see [`ModelConfig::from_lookup`].
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads settings through `lookup` (a variable name → its value) and validates
    /// them. Variables: `GRALKOR_LLM_MODEL`, `GRALKOR_EMBEDDER_MODEL`,
    /// `GRALKOR_LLM_SMALL_MODEL`, `GRALKOR_EMBEDDER_DIMENSION`, `GRALKOR_LLM_OUTPUT_MODE`,
    /// `GRALKOR_LLM_MAX_OUTPUT_TOKENS`, `GRALKOR_LLM_CALL_TIMEOUT_SECS`,
    /// `GRALKOR_LLM_REPAIR_ATTEMPTS`, `OPENAI_API_KEY`,
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
            output_mode: get(OUTPUT_MODE_VAR)
                .map(|raw| OutputMode::parse(OUTPUT_MODE_VAR, &raw))
                .transpose()?
                .unwrap_or_default(),
            max_output_tokens: positive(&get, "GRALKOR_LLM_MAX_OUTPUT_TOKENS")?,
            call_deadline: positive(&get, "GRALKOR_LLM_CALL_TIMEOUT_SECS")?
                .map_or(DEFAULT_CALL_DEADLINE, |s| Duration::from_secs(u64::from(s))),
            repair_attempts: match get("GRALKOR_LLM_REPAIR_ATTEMPTS") {
                None => 1,
                Some(raw) => raw.trim().parse::<u32>().map_err(|_| {
                    Error::config(
                        "GRALKOR_LLM_REPAIR_ATTEMPTS",
                        format!("must be a whole number, 0 or more (got `{}`)", raw.trim()),
                    )
                })?,
            },
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
}

/// The variable of [`ModelConfig::output_mode`].
const OUTPUT_MODE_VAR: &str = "GRALKOR_LLM_OUTPUT_MODE";

/// A positive whole number from `var`, or `None` when unset.
fn positive(get: &impl Fn(&str) -> Option<String>, var: &str) -> Result<Option<u32>> {
    get(var)
        .map(|raw| match raw.trim().parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(Error::config(
                var,
                format!("must be a positive integer (got `{}`)", raw.trim()),
            )),
        })
        .transpose()
}
