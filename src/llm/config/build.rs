//! Validating the configuration and building the model clients.

use std::sync::Arc;

use super::{
    EMBEDDER_MODEL_VAR, LLM_MODEL_VAR, LOCAL_EMBEDDING_MODELS, ModelConfig, Models, Provider,
    form_error, local_dimension, shown,
};
use crate::llm::embedding::resolve_dimension;
use crate::llm::gemini::Gemini;
use crate::llm::openai::{OpenAi, is_reasoning_model};
use crate::llm::transport::check_base_url;
use crate::llm::{Embedder, LanguageModel, ListwiseReranker, Reranker, UsageMeter};
use crate::{Error, Result};

impl ModelConfig {
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
    /// limiter (see `Limiter::shared`), and all record into
    /// one new [`UsageMeter`].
    ///
    /// The reranker follows the LLM's provider: for OpenAI with a non-reasoning model,
    /// the log-probability [`OpenAiReranker`](crate::llm::openai::OpenAiReranker) on the
    /// small model; otherwise a `ListwiseReranker` over the LLM. Without an LLM
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
                            let mut chat = conn
                                .chat(&spec.model)
                                .with_small_model(&small)
                                .with_output_mode(self.output_mode)
                                .with_call_deadline(self.call_deadline)
                                .with_repair_attempts(self.repair_attempts);
                            if let Some(max) = self.max_output_tokens {
                                chat = chat.with_max_output_tokens(max);
                            }
                            let llm: Arc<dyn LanguageModel> = Arc::new(chat);
                            let reranker: Arc<dyn Reranker> = if is_reasoning_model(&small) {
                                Arc::new(ListwiseReranker::new(llm.clone()))
                            } else {
                                Arc::new(conn.reranker(&small))
                            };
                            (llm, reranker)
                        }
                        Provider::Google => {
                            let conn = google.as_ref().expect("built above");
                            let mut chat = conn
                                .chat(&spec.model)
                                .with_small_model(&small)
                                .with_call_deadline(self.call_deadline)
                                .with_repair_attempts(self.repair_attempts);
                            if let Some(max) = self.max_output_tokens {
                                chat = chat.with_max_output_tokens(max);
                            }
                            let llm: Arc<dyn LanguageModel> = Arc::new(chat);
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
                crate::llm::local::DeferredLocalEmbedder::new(
                    crate::llm::local::LocalModelConfig::default(),
                )
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
