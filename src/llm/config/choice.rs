//! Provider access and why each role has the spec it has.

use std::fmt;

use super::{
    DEFAULT_EMBEDDER_MODEL, DEFAULT_LLM_MODEL, DEFAULT_LOCAL_EMBEDDER_MODEL,
    DEFAULT_OPENAI_EMBEDDER_MODEL, DEFAULT_OPENAI_LLM_MODEL,
};

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
    /// Given to the builder ([`ModelConfig::new`](super::ModelConfig::new), [`ModelConfig::embedder_only`](super::ModelConfig::embedder_only)).
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
