//! Deployment configuration: where the graph lives and which models extract it.
//!
//! [`Config`] combines the FalkorDB backend ([`FalkorConfig`]) with the model roles
//! ([`ModelConfig`]), read from the environment by [`Config::from_env`] or set with
//! the builder methods. Variables (blank values count as unset):
//!
//! | variable | meaning |
//! |---|---|
//! | `FALKORDB_HOST`, `FALKORDB_PORT`, `FALKORDB_USERNAME`, `FALKORDB_PASSWORD`, `FALKORDB_SSL` | a remote FalkorDB; wins over the embedded one |
//! | `GRALKOR_DATA_DIR` | the embedded FalkorDB's data directory |
//! | `GRALKOR_FALKORDB_TIMEOUT_MS`, `GRALKOR_FALKORDB_BIN_DIR`, `GRALKOR_CACHE_DIR` | see [`falkordb::env`](crate::falkordb::env) |
//! | `GRALKOR_LLM_MODEL`, `GRALKOR_EMBEDDER_MODEL` | `provider:model` specs (defaults `google:gemini-3.1-flash-lite`, `google:gemini-embedding-2-preview`) |
//! | `OPENAI_API_KEY`, `OPENAI_BASE_URL`, `GOOGLE_API_KEY` | credentials of the providers the two specs select |
//! | `GRALKOR_LLM_SMALL_MODEL`, `GRALKOR_EMBEDDER_DIMENSION` | see [`ModelConfig::from_lookup`] |
//!
//! With no backend configured, [`Config::from_env`] is an error that says what to set.
//! With no credential for any provider the specs select, the configuration has no
//! models ([`Config::models`] is `None`): memory is stored and searched as episodes,
//! without extraction. A partial set of credentials (one role's provider has a key,
//! the other's does not) is an error naming the missing variable and role.
//!
//! ```
//! use std::collections::HashMap;
//! use gralkor::config::Config;
//!
//! let env = HashMap::from([("GRALKOR_DATA_DIR", "/var/lib/app/gralkor")]);
//! let config = Config::from_lookup(|k| env.get(k).map(|v| v.to_string()))?;
//! assert!(config.falkordb.embedded.is_some());
//! assert!(config.models.is_none()); // no provider key: episodes only
//!
//! let err = Config::from_lookup(|_| None).unwrap_err();
//! assert!(err.to_string().contains("GRALKOR_DATA_DIR"));
//! # Ok::<(), gralkor::Error>(())
//! ```

use crate::falkordb::FalkorConfig;
use crate::llm::{
    DEFAULT_EMBEDDER_MODEL, DEFAULT_LLM_MODEL, EMBEDDER_MODEL_VAR, LLM_MODEL_VAR, ModelConfig,
    ModelSpec,
};
use crate::{Error, Result};

/// The backend and the models.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the graph lives.
    pub falkordb: FalkorConfig,
    /// The model roles; `None` stores and searches episodes without extraction.
    pub models: Option<ModelConfig>,
}

impl Config {
    /// A backend without models (episodes only); add models with
    /// [`Config::with_models`].
    pub fn new(falkordb: FalkorConfig) -> Config {
        Config {
            falkordb,
            models: None,
        }
    }

    /// Uses these models for extraction and embeddings.
    pub fn with_models(mut self, models: ModelConfig) -> Config {
        self.models = Some(models);
        self
    }

    /// Whether episodes are extracted into entities and facts.
    pub fn extracts(&self) -> bool {
        self.models.is_some()
    }

    /// Reads the process environment (see the module docs).
    pub fn from_env() -> Result<Config> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads settings through `lookup` (a variable name → its value) and validates
    /// them.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let falkordb = FalkorConfig::from_lookup(&lookup).map_err(|e| match e {
            Error::Config { field, rule } if field == "falkordb" => Error::config(
                field,
                format!(
                    "{rule}. Set GRALKOR_DATA_DIR to a writable directory for an embedded \
                     FalkorDB, or FALKORDB_HOST and FALKORDB_PORT for a remote one"
                ),
            ),
            other => other,
        })?;
        let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        let llm = ModelSpec::parse(
            LLM_MODEL_VAR,
            &get(LLM_MODEL_VAR).unwrap_or_else(|| DEFAULT_LLM_MODEL.into()),
        )?;
        let embedder = ModelSpec::parse(
            EMBEDDER_MODEL_VAR,
            &get(EMBEDDER_MODEL_VAR).unwrap_or_else(|| DEFAULT_EMBEDDER_MODEL.into()),
        )?;
        let any_access = [llm.provider, embedder.provider]
            .into_iter()
            .any(|p| get(p.key_var()).is_some())
            || get("OPENAI_BASE_URL").is_some();
        let models = if any_access {
            Some(ModelConfig::from_lookup(&lookup)?)
        } else {
            None
        };
        let config = Config { falkordb, models };
        config.validate()?;
        Ok(config)
    }

    /// Checks the backend and, when set, the models. Nothing is started.
    pub fn validate(&self) -> Result<()> {
        self.falkordb.validate()?;
        if let Some(models) = &self.models {
            models.validate()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Provider;
    use std::collections::HashMap;

    fn from(pairs: &[(&str, &str)]) -> Result<Config> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn no_backend_says_what_to_set() {
        let err = from(&[("GOOGLE_API_KEY", "k")]).unwrap_err().to_string();
        assert!(err.contains("GRALKOR_DATA_DIR"), "{err}");
        assert!(
            err.contains("FALKORDB_HOST") && err.contains("FALKORDB_PORT"),
            "{err}"
        );
        let blank = from(&[("GRALKOR_DATA_DIR", "  ")]).unwrap_err().to_string();
        assert!(blank.contains("GRALKOR_DATA_DIR"), "{blank}");
    }

    #[test]
    fn remote_wins_over_embedded() {
        let c = from(&[
            ("GRALKOR_DATA_DIR", "/tmp/g"),
            ("FALKORDB_HOST", "db.internal"),
            ("FALKORDB_PORT", "6380"),
            ("FALKORDB_USERNAME", "app"),
            ("FALKORDB_PASSWORD", "secret"),
        ])
        .unwrap();
        let remote = c.falkordb.remote.as_ref().unwrap();
        assert_eq!((remote.host.as_str(), remote.port), ("db.internal", 6380));
        assert_eq!(remote.username.as_deref(), Some("app"));
        assert!(!format!("{c:?}").contains("secret"));
    }

    #[test]
    fn without_any_provider_key_there_are_no_models() {
        let c = from(&[("GRALKOR_DATA_DIR", "/tmp/g")]).unwrap();
        assert!(!c.extracts());
        // A key for a provider no role selects does not count.
        let c = from(&[("GRALKOR_DATA_DIR", "/tmp/g"), ("OPENAI_API_KEY", "sk")]).unwrap();
        assert!(c.models.is_none());
    }

    #[test]
    fn keys_for_the_selected_providers_give_models() {
        let c = from(&[
            ("GRALKOR_DATA_DIR", "/tmp/g"),
            ("GRALKOR_LLM_MODEL", "openai:gpt-4.1-mini"),
            ("OPENAI_API_KEY", "sk"),
            ("GOOGLE_API_KEY", "g"),
        ])
        .unwrap();
        let m = c.models.unwrap();
        assert_eq!(m.llm.provider, Provider::OpenAi);
        assert_eq!(m.embedder.provider, Provider::Google);
    }

    #[test]
    fn a_partial_set_of_keys_names_the_missing_variable() {
        let err = from(&[
            ("GRALKOR_DATA_DIR", "/tmp/g"),
            ("GRALKOR_LLM_MODEL", "openai:gpt-4.1-mini"),
            ("OPENAI_API_KEY", "sk"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("GOOGLE_API_KEY") && err.contains("embedder"),
            "{err}"
        );
        let err = from(&[
            ("GRALKOR_DATA_DIR", "/tmp/g"),
            ("GRALKOR_LLM_MODEL", "anthropic:claude"),
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("GRALKOR_LLM_MODEL"), "{err}");
    }

    #[test]
    fn the_builder_sets_everything_explicitly() {
        use crate::falkordb::EmbeddedConfig;
        use crate::llm::ModelSpec;
        let c = Config::new(FalkorConfig::embedded(EmbeddedConfig::new("/tmp/g"))).with_models(
            ModelConfig::new(
                ModelSpec::new(Provider::OpenAi, "gpt-4.1-mini"),
                ModelSpec::new(Provider::OpenAi, "text-embedding-3-small"),
            )
            .openai_key("sk"),
        );
        c.validate().unwrap();
        assert!(c.extracts());
        let bad = Config::new(FalkorConfig::embedded(EmbeddedConfig::new("/tmp/g"))).with_models(
            ModelConfig::new(
                ModelSpec::new(Provider::OpenAi, "gpt-4.1-mini"),
                ModelSpec::new(Provider::OpenAi, "text-embedding-3-small"),
            ),
        );
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("OPENAI_API_KEY")
        );
    }
}
