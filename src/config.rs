//! Deployment configuration: where the graph lives and which models extract it.
//!
//! [`Config`] combines the FalkorDB backend ([`FalkorConfig`]) with the model roles
//! ([`ModelConfig`]), read from the environment by [`Config::from_env`] or set with
//! the builder methods. Variables (blank values count as unset):
//!
//! | variable | meaning |
//! |---|---|
//! | `FALKORDB_HOST`, `FALKORDB_PORT`, `FALKORDB_USERNAME`, `FALKORDB_PASSWORD`, `FALKORDB_SSL` | a remote FalkorDB; wins over the embedded one |
//! | `FALKORDB_CLUSTER_NODES` | a FalkorDB run as a Redis Cluster: seed nodes `host:port,…` (with the credentials and `FALKORDB_SSL` above) |
//! | `GRALKOR_DATA_DIR` | the embedded FalkorDB's data directory |
//! | `GRALKOR_FALKORDB_TIMEOUT_MS`, `GRALKOR_FALKORDB_BIN_DIR`, `GRALKOR_CACHE_DIR` | see `falkordb::env` |
//! | `GRALKOR_LLM_MODEL`, `GRALKOR_EMBEDDER_MODEL` | `provider:model` specs; unset, they follow the keys (below) |
//! | `OPENAI_API_KEY`, `OPENAI_BASE_URL`, `GOOGLE_API_KEY` | credentials of the providers the two specs select |
//! | `GRALKOR_LLM_SMALL_MODEL`, `GRALKOR_EMBEDDER_DIMENSION` | see [`ModelConfig::from_lookup`] |
//!
//! With no backend configured, [`Config::from_env`] is an error that says what to set.
//! A role whose variable is unset follows the provider access present:
//! `GOOGLE_API_KEY` (alone or with `OPENAI_API_KEY`) gives the Google defaults,
//! `OPENAI_API_KEY` alone the OpenAI defaults, `OPENAI_BASE_URL` alone the OpenAI
//! defaults on that compatible server without a key, and no key at all the local
//! embedder `local:all-minilm-l6-v2` with no language model: memory is stored and
//! searched as episodes, without extraction ([`Config::extracts`] is false). A role
//! whose variable names a provider without its key is an error naming the missing
//! variable and the role. [`Config::describe`] says what was chosen and why.
//!
//! ```
//! use std::collections::HashMap;
//! use gralkor::config::Config;
//!
//! let env = HashMap::from([("GRALKOR_DATA_DIR", "/var/lib/app/gralkor")]);
//! let config = Config::from_lookup(|k| env.get(k).map(|v| v.to_string()))?;
//! assert!(config.falkordb.embedded.is_some());
//! assert!(!config.extracts()); // no provider key: episodes only
//! assert_eq!(
//!     config.describe(),
//!     "embedder local:all-minilm-l6-v2 because no provider key is set; extraction off because \
//!      no provider key is set (set GOOGLE_API_KEY or OPENAI_API_KEY to extract facts); \
//!      backend embedded FalkorDB with data in /var/lib/app/gralkor"
//! );
//!
//! let err = Config::from_lookup(|_| None).unwrap_err();
//! assert!(err.to_string().contains("GRALKOR_DATA_DIR"));
//! # Ok::<(), gralkor::Error>(())
//! ```

use crate::falkordb::FalkorConfig;
use crate::llm::ModelConfig;
use crate::{Error, Result};

/// The backend and the models.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the graph lives.
    pub falkordb: FalkorConfig,
    /// The model roles; `None` (or a configuration without an LLM role) stores and
    /// searches episodes without extraction. [`Config::from_env`] always sets it.
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
        self.models.as_ref().is_some_and(ModelConfig::extracts)
    }

    /// A sentence naming the chosen models, the backend and why, e.g. `embedder
    /// local:all-minilm-l6-v2 because no provider key is set; extraction off because
    /// no provider key is set (…); backend embedded FalkorDB with data in /tmp/g`.
    /// Never contains a key or a password.
    pub fn describe(&self) -> String {
        let models = match &self.models {
            Some(models) => models.describe(),
            None => "no models configured: episodes only, without extraction".to_string(),
        };
        let backend = match (&self.falkordb.remote, &self.falkordb.embedded) {
            (Some(remote), _) => format!(
                "remote FalkorDB {}at {}:{}{}{}",
                if remote.cluster { "cluster " } else { "" },
                remote.host,
                remote.port,
                match remote.seeds.len() {
                    0 => String::new(),
                    1 => " and 1 more seed".to_string(),
                    n => format!(" and {n} more seeds"),
                },
                if remote.tls { " over TLS" } else { "" }
            ),
            (None, Some(embedded)) => format!(
                "embedded FalkorDB with data in {}",
                embedded.data_dir.display()
            ),
            (None, None) => "no FalkorDB configured".to_string(),
        };
        format!("{models}; backend {backend}")
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
        // The roles follow the keys present (see `ModelConfig::from_lookup`); with none,
        // an embedder without a language model.
        let models = Some(ModelConfig::from_lookup(&lookup)?);
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

    const DIR: (&str, &str) = ("GRALKOR_DATA_DIR", "/tmp/g");

    fn specs(c: &Config) -> (Option<String>, String) {
        let m = c.models.as_ref().expect("from_lookup always sets models");
        (
            m.llm.as_ref().map(ToString::to_string),
            m.embedder.to_string(),
        )
    }

    #[test]
    fn without_any_provider_key_the_embedder_is_local_and_extraction_off() {
        let c = from(&[DIR]).unwrap();
        assert!(!c.extracts());
        assert_eq!(specs(&c), (None, "local:all-minilm-l6-v2".to_string()));
        assert_eq!(
            c.describe(),
            "embedder local:all-minilm-l6-v2 because no provider key is set; extraction off \
             because no provider key is set (set GOOGLE_API_KEY or OPENAI_API_KEY to extract \
             facts); backend embedded FalkorDB with data in /tmp/g"
        );
        // Blank keys count as unset.
        let c = from(&[DIR, ("OPENAI_API_KEY", " "), ("GOOGLE_API_KEY", "")]).unwrap();
        assert_eq!(specs(&c), (None, "local:all-minilm-l6-v2".to_string()));
    }

    #[test]
    fn an_openai_key_alone_selects_openai_for_both_roles() {
        let c = from(&[DIR, ("OPENAI_API_KEY", "sk-secret")]).unwrap();
        assert!(c.extracts());
        assert_eq!(
            specs(&c),
            (
                Some("openai:gpt-4.1-mini".to_string()),
                "openai:text-embedding-3-small".to_string()
            )
        );
        let d = c.describe();
        assert_eq!(
            d,
            "embedder openai:text-embedding-3-small because OPENAI_API_KEY is set and \
             GOOGLE_API_KEY is not; llm openai:gpt-4.1-mini because OPENAI_API_KEY is set and \
             GOOGLE_API_KEY is not; backend embedded FalkorDB with data in /tmp/g"
        );
        assert!(!d.contains("sk-secret"));
    }

    #[test]
    fn a_google_key_or_both_keys_keep_the_google_defaults() {
        let google = (
            Some("google:gemini-3.1-flash-lite".to_string()),
            "google:gemini-embedding-2-preview".to_string(),
        );
        let c = from(&[DIR, ("GOOGLE_API_KEY", "g")]).unwrap();
        assert_eq!(specs(&c), google);
        assert!(
            c.describe()
                .contains("llm google:gemini-3.1-flash-lite because GOOGLE_API_KEY is set")
        );
        let c = from(&[DIR, ("GOOGLE_API_KEY", "g"), ("OPENAI_API_KEY", "sk")]).unwrap();
        assert_eq!(specs(&c), google);
    }

    #[test]
    fn an_openai_base_url_alone_selects_the_compatible_server_without_a_key() {
        let c = from(&[DIR, ("OPENAI_BASE_URL", "http://localhost:11434/v1")]).unwrap();
        assert!(c.extracts());
        let m = c.models.as_ref().unwrap();
        assert_eq!(m.llm.as_ref().unwrap().provider, Provider::OpenAi);
        assert_eq!(m.embedder.provider, Provider::OpenAi);
        assert!(m.openai.api_key.is_none());
        assert_eq!(
            c.describe(),
            "embedder openai:text-embedding-3-small because OPENAI_BASE_URL names an \
             OpenAI-compatible server and no provider key is set; llm openai:gpt-4.1-mini \
             because OPENAI_BASE_URL names an OpenAI-compatible server and no provider key is \
             set; openai at http://localhost:11434/v1; backend embedded FalkorDB with data in \
             /tmp/g"
        );
        // OpenAI's own URL is not a keyless server: the key is still demanded.
        let err = from(&[DIR, ("OPENAI_BASE_URL", "https://api.openai.com/v1")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`OPENAI_API_KEY` must be set")
                && err.contains("the llm and embedder roles select openai"),
            "{err}"
        );
    }

    #[test]
    fn explicit_model_variables_win_over_the_keys() {
        let c = from(&[
            DIR,
            ("GRALKOR_LLM_MODEL", "openai:gpt-4.1-mini"),
            ("OPENAI_API_KEY", "sk"),
            ("GOOGLE_API_KEY", "g"),
        ])
        .unwrap();
        let m = c.models.as_ref().unwrap();
        assert_eq!(m.llm.as_ref().unwrap().provider, Provider::OpenAi);
        assert_eq!(m.embedder.provider, Provider::Google);
        assert!(c.describe().starts_with(
            "embedder google:gemini-embedding-2-preview because GOOGLE_API_KEY is set; \
             llm openai:gpt-4.1-mini because GRALKOR_LLM_MODEL selects it"
        ));
        // A local embedder next to a Google LLM.
        let c = from(&[
            DIR,
            ("GRALKOR_EMBEDDER_MODEL", "local:all-minilm-l6-v2"),
            ("GOOGLE_API_KEY", "g"),
        ])
        .unwrap();
        assert_eq!(
            specs(&c),
            (
                Some("google:gemini-3.1-flash-lite".to_string()),
                "local:all-minilm-l6-v2".to_string()
            )
        );
    }

    #[test]
    fn a_missing_key_for_an_explicit_provider_names_the_variable_and_the_role() {
        let err = from(&[
            DIR,
            ("GRALKOR_LLM_MODEL", "openai:gpt-4.1-mini"),
            (
                "GRALKOR_EMBEDDER_MODEL",
                "google:gemini-embedding-2-preview",
            ),
            ("OPENAI_API_KEY", "sk"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("GOOGLE_API_KEY") && err.contains("the embedder role selects google"),
            "{err}"
        );
        // No key at all: the explicit LLM still needs its key (the embedder is local).
        let err = from(&[DIR, ("GRALKOR_LLM_MODEL", "google:gemini-3.1-flash-lite")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`GOOGLE_API_KEY` must be set and not blank: the llm role selects google"),
            "{err}"
        );
        let err = from(&[DIR, ("GRALKOR_LLM_MODEL", "anthropic:claude")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("GRALKOR_LLM_MODEL"), "{err}");
    }

    #[test]
    fn describe_names_a_remote_backend_and_no_models() {
        let c = from(&[
            ("FALKORDB_HOST", "db.internal"),
            ("FALKORDB_PORT", "6380"),
            ("FALKORDB_PASSWORD", "hunter2"),
            ("GOOGLE_API_KEY", "g"),
        ])
        .unwrap();
        let d = c.describe();
        assert!(
            d.ends_with("; backend remote FalkorDB at db.internal:6380"),
            "{d}"
        );
        assert!(!d.contains("hunter2"));
        let bare = Config::new(c.falkordb.clone());
        assert_eq!(
            bare.describe(),
            "no models configured: episodes only, without extraction; backend remote FalkorDB \
             at db.internal:6380"
        );
    }

    #[test]
    fn describe_names_a_cluster_and_its_seeds() {
        let c = from(&[
            (
                "FALKORDB_CLUSTER_NODES",
                "10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000",
            ),
            ("FALKORDB_PASSWORD", "hunter2"),
        ])
        .unwrap();
        let d = Config::new(c.falkordb.clone()).describe();
        assert!(
            d.ends_with("; backend remote FalkorDB cluster at 10.0.0.1:7000 and 2 more seeds"),
            "{d}"
        );
        assert!(!d.contains("hunter2"));
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
