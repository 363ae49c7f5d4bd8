//! Model configuration: specs, roles, credentials and the clients built from them.
//! The environment is simulated with `ModelConfig::from_lookup`; the process
//! environment is never touched.

use crate::llm_support;

use std::collections::HashMap;

use gralkor::Error;
use gralkor::llm::{GenerateRequest, ModelConfig, ModelSize, ModelSpec, OutputSchema, Provider};
use llm_support::{chat_reply, fake_provider, json_response, test_http};
use serde_json::json;
use wiremock::Mock;
use wiremock::matchers::{method, path};

fn from(vars: &[(&str, &str)]) -> gralkor::Result<ModelConfig> {
    let env: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ModelConfig::from_lookup(|k| env.get(k).cloned())
}

fn config_error(vars: &[(&str, &str)]) -> (String, String, String) {
    match from(vars).unwrap_err() {
        e @ Error::Config { .. } => {
            let text = e.to_string();
            let Error::Config { field, rule } = e else {
                unreachable!()
            };
            (field, rule, text)
        }
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn defaults_are_google_for_both_roles() {
    let c = from(&[("GOOGLE_API_KEY", "g")]).unwrap();
    assert_eq!(
        c.llm,
        ModelSpec::new(Provider::Google, "gemini-3.1-flash-lite")
    );
    assert_eq!(
        c.embedder,
        ModelSpec::new(Provider::Google, "gemini-embedding-2-preview")
    );
    // Blank spec variables count as unset.
    let c = from(&[("GOOGLE_API_KEY", "g"), ("GRALKOR_LLM_MODEL", "  ")]).unwrap();
    assert_eq!(c.llm.to_string(), "google:gemini-3.1-flash-lite");
}

#[test]
fn specs_split_on_the_first_colon_and_are_trimmed() {
    let c = from(&[
        ("GRALKOR_LLM_MODEL", " openai : llama3.1:8b "),
        ("GRALKOR_EMBEDDER_MODEL", "OpenAI:nomic-embed-text"),
        ("OPENAI_API_KEY", "k"),
    ])
    .unwrap();
    assert_eq!(c.llm, ModelSpec::new(Provider::OpenAi, "llama3.1:8b"));
    assert_eq!(
        c.embedder,
        ModelSpec::new(Provider::OpenAi, "nomic-embed-text")
    );
}

#[test]
fn a_provider_no_role_selects_needs_no_key() {
    let c = from(&[
        ("GRALKOR_LLM_MODEL", "openai:gpt-4.1-mini"),
        ("GRALKOR_EMBEDDER_MODEL", "openai:text-embedding-3-small"),
        ("OPENAI_API_KEY", "k"),
    ])
    .unwrap();
    assert_eq!(c.google.api_key, None);
    from(&[("GOOGLE_API_KEY", "g")]).unwrap();
}

#[test]
fn missing_key_names_the_variable_and_the_llm_role() {
    let (field, _, text) = config_error(&[
        ("GRALKOR_LLM_MODEL", "openai:gpt-4.1-mini"),
        ("GOOGLE_API_KEY", "g"),
    ]);
    assert_eq!(field, "OPENAI_API_KEY");
    assert_eq!(
        text,
        "invalid configuration: `OPENAI_API_KEY` must be set and not blank: the llm role selects openai \
         (GRALKOR_LLM_MODEL=`openai:gpt-4.1-mini`, GRALKOR_EMBEDDER_MODEL=`google:gemini-embedding-2-preview`); \
         a compatible server named by OPENAI_BASE_URL may need none"
    );
}

#[test]
fn a_compatible_server_at_its_own_base_url_needs_no_key() {
    let vars = [
        ("GRALKOR_LLM_MODEL", "openai:llama3.1"),
        ("GRALKOR_EMBEDDER_MODEL", "openai:nomic-embed-text"),
        ("GRALKOR_EMBEDDER_DIMENSION", "768"),
        ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
    ];
    let config = from(&vars).unwrap();
    assert!(config.openai.api_key.is_none());
    config.build().unwrap();
    // OpenAI itself still needs one, whether its URL is given or not.
    let (field, ..) = config_error(&[
        ("GRALKOR_LLM_MODEL", "openai:gpt-4.1-mini"),
        ("GRALKOR_EMBEDDER_MODEL", "openai:text-embedding-3-small"),
        ("OPENAI_BASE_URL", "https://api.openai.com/v1/"),
    ]);
    assert_eq!(field, "OPENAI_API_KEY");
}

#[test]
fn blank_key_names_the_variable_and_the_embedder_role() {
    let (field, _, text) = config_error(&[
        ("GRALKOR_LLM_MODEL", "openai:gpt-4.1-mini"),
        ("OPENAI_API_KEY", "k"),
        ("GOOGLE_API_KEY", "   "),
    ]);
    assert_eq!(field, "GOOGLE_API_KEY");
    assert_eq!(
        text,
        "invalid configuration: `GOOGLE_API_KEY` must be set and not blank: the embedder role selects google \
         (GRALKOR_LLM_MODEL=`openai:gpt-4.1-mini`, GRALKOR_EMBEDDER_MODEL=`google:gemini-embedding-2-preview`)"
    );
}

#[test]
fn missing_key_for_both_roles_names_both() {
    let (_, rule, _) = config_error(&[]);
    assert!(
        rule.starts_with("must be set and not blank: the llm and embedder roles select google"),
        "{rule}"
    );
    let (field, rule, _) = config_error(&[
        ("GRALKOR_LLM_MODEL", "openai:gpt-5.5"),
        ("GRALKOR_EMBEDDER_MODEL", "openai:text-embedding-3-small"),
        ("GOOGLE_API_KEY", "g"),
    ]);
    assert_eq!(field, "OPENAI_API_KEY");
    assert!(
        rule.starts_with("must be set and not blank: the llm and embedder roles select openai"),
        "{rule}"
    );
}

#[test]
fn unknown_llm_provider_names_both_specs_and_the_supported_providers() {
    let (field, _, text) = config_error(&[("GRALKOR_LLM_MODEL", "anthropic:claude-sonnet")]);
    assert_eq!(field, "GRALKOR_LLM_MODEL");
    assert_eq!(
        text,
        "invalid configuration: `GRALKOR_LLM_MODEL` names unsupported provider `anthropic` \
         (GRALKOR_LLM_MODEL=`anthropic:claude-sonnet`, GRALKOR_EMBEDDER_MODEL=`google:gemini-embedding-2-preview`); \
         supported providers: openai, google"
    );
}

#[test]
fn unknown_embedder_provider_names_both_specs_and_the_supported_providers() {
    let (field, rule, _) = config_error(&[
        ("GRALKOR_EMBEDDER_MODEL", "voyage:voyage-3"),
        ("GOOGLE_API_KEY", "g"),
    ]);
    assert_eq!(field, "GRALKOR_EMBEDDER_MODEL");
    assert_eq!(
        rule,
        "names unsupported provider `voyage` (GRALKOR_LLM_MODEL=`google:gemini-3.1-flash-lite`, \
         GRALKOR_EMBEDDER_MODEL=`voyage:voyage-3`); supported providers: openai, google"
    );
}

#[test]
fn malformed_specs_name_the_expected_form() {
    for bad in ["gpt-4.1-mini", "openai:", ":gpt-4.1-mini", " : "] {
        let (field, rule, _) = config_error(&[("GRALKOR_LLM_MODEL", bad), ("GOOGLE_API_KEY", "g")]);
        assert_eq!(field, "GRALKOR_LLM_MODEL");
        assert_eq!(
            rule,
            format!(
                "must have the form `provider:model`, e.g. `openai:gpt-4.1-mini` (got `{}`)",
                bad.trim()
            )
        );
    }
}

#[test]
fn embedder_dimension_must_be_a_positive_integer_and_known_or_given() {
    for bad in ["0", "-3", "big"] {
        let (field, rule, _) =
            config_error(&[("GRALKOR_EMBEDDER_DIMENSION", bad), ("GOOGLE_API_KEY", "g")]);
        assert_eq!(field, "GRALKOR_EMBEDDER_DIMENSION");
        assert_eq!(rule, format!("must be a positive integer (got `{bad}`)"));
    }
    let (field, rule, _) = config_error(&[
        ("GRALKOR_EMBEDDER_MODEL", "openai:my-local-embedder"),
        ("OPENAI_API_KEY", "k"),
        ("GOOGLE_API_KEY", "g"),
    ]);
    assert_eq!(field, "GRALKOR_EMBEDDER_DIMENSION");
    assert_eq!(
        rule,
        "must be set: the vector size of embedding model `my-local-embedder` is not known"
    );
    let c = from(&[
        ("GRALKOR_EMBEDDER_MODEL", "openai:my-local-embedder"),
        ("GRALKOR_EMBEDDER_DIMENSION", "384"),
        ("OPENAI_API_KEY", "k"),
        ("GOOGLE_API_KEY", "g"),
    ])
    .unwrap();
    assert_eq!(c.embedder_dimension, Some(384));
}

#[test]
fn a_bad_base_url_is_a_config_error() {
    let (field, rule, _) = config_error(&[
        ("GRALKOR_LLM_MODEL", "openai:llama3.1"),
        ("OPENAI_API_KEY", "k"),
        ("OPENAI_BASE_URL", "localhost:11434"),
        ("GOOGLE_API_KEY", "g"),
    ]);
    assert_eq!(field, "OPENAI_BASE_URL");
    assert_eq!(
        rule,
        "must be an http:// or https:// URL (got `localhost:11434`)"
    );
}

#[test]
fn the_builder_validates_the_same_way_and_build_fails_before_any_client() {
    let config = ModelConfig::new(
        ModelSpec::new(Provider::OpenAi, "gpt-4.1-mini"),
        ModelSpec::new(Provider::Google, "gemini-embedding-2-preview"),
    )
    .google_key("g");
    let err = config.build().unwrap_err();
    assert!(
        err.to_string()
            .contains("`OPENAI_API_KEY` must be set and not blank: the llm role selects openai")
    );
    config.clone().openai_key("k").validate().unwrap();
    let debug = format!("{:?}", config.openai_key("sk-very-secret"));
    assert!(
        !debug.contains("sk-very-secret") && debug.contains("<redacted>"),
        "{debug}"
    );
}

#[test]
fn build_makes_each_role_from_its_own_provider_and_the_reranker_follows_the_llm() {
    let mixed = from(&[
        ("GRALKOR_LLM_MODEL", "openai:gpt-4.1-mini"),
        (
            "GRALKOR_EMBEDDER_MODEL",
            "google:gemini-embedding-2-preview",
        ),
        ("OPENAI_API_KEY", "k"),
        ("GOOGLE_API_KEY", "g"),
    ])
    .unwrap()
    .build()
    .unwrap();
    assert_eq!(
        (mixed.llm.provider(), mixed.llm.model(ModelSize::Default)),
        ("openai", "gpt-4.1-mini")
    );
    assert_eq!(
        (mixed.embedder.provider(), mixed.embedder.model()),
        ("google", "gemini-embedding-2-preview")
    );
    assert_eq!(mixed.embedder.dimension(), 3072);
    assert_eq!(mixed.reranker.provider(), "openai");
    assert!(
        format!("{:?}", mixed.reranker).starts_with("OpenAiReranker"),
        "{:?}",
        mixed.reranker
    );

    let reasoning = from(&[
        ("GRALKOR_LLM_MODEL", "openai:gpt-5.5"),
        ("GRALKOR_EMBEDDER_MODEL", "openai:text-embedding-3-large"),
        ("OPENAI_API_KEY", "k"),
    ])
    .unwrap()
    .build()
    .unwrap();
    assert_eq!(reasoning.embedder.dimension(), 3072);
    assert!(
        format!("{:?}", reasoning.reranker).starts_with("ListwiseReranker"),
        "no logprobs on reasoning models"
    );

    let google = from(&[
        ("GOOGLE_API_KEY", "g"),
        ("GRALKOR_LLM_SMALL_MODEL", "gemini-2.5-flash-lite"),
    ])
    .unwrap()
    .build()
    .unwrap();
    assert_eq!(google.llm.provider(), "google");
    assert_eq!(google.llm.model(ModelSize::Small), "gemini-2.5-flash-lite");
    assert_eq!(google.reranker.provider(), "google");
}

#[tokio::test]
async fn built_models_record_every_call_in_one_meter() {
    let server = fake_provider().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(json_response(200, chat_reply(r#"{"ok": true}"#, 11, 2)))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(json_response(
            200,
            json!({"data": [{"index": 0, "embedding": [0.5, 0.5]}], "usage": {"prompt_tokens": 4}}),
        ))
        .mount(&server)
        .await;
    let models = ModelConfig::new(
        ModelSpec::new(Provider::OpenAi, "llama3.1"),
        ModelSpec::new(Provider::OpenAi, "tiny-embedder"),
    )
    .openai_key("sk-config-meter-test")
    .openai_base_url(format!("{}/v1", server.uri()))
    .embedder_dimension(2)
    .http_client(test_http())
    .build()
    .unwrap();
    let schema = OutputSchema::new(
        "ok",
        json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}),
    );
    models
        .llm
        .generate(&GenerateRequest::new(schema).user("ok?").label("reflect"))
        .await
        .unwrap();
    models
        .embedder
        .embed(&["x".to_string()], "embed_query")
        .await
        .unwrap();
    let usage = models.usage.snapshot();
    assert_eq!(usage.total.calls, 2);
    assert_eq!(usage.by_label["reflect"].prompt_tokens, 11);
    assert_eq!(usage.by_label["reflect"].completion_tokens, 2);
    assert_eq!(usage.by_label["embed_query"].prompt_tokens, 4);
    assert_eq!(usage.by_provider["openai"].calls, 2);
}
