//! Model configuration: specs, roles, credentials and the clients built from them.
//! The environment is simulated with `ModelConfig::from_lookup`; the process
//! environment is never touched.

use crate::llm_support;

use std::collections::HashMap;
use std::time::Duration;

use gralkor::Error;
use gralkor::llm::openai::OutputMode;
use gralkor::llm::{
    Choice, DEFAULT_EMBEDDER_MODEL, DEFAULT_LLM_MODEL, GenerateRequest, ModelConfig, ModelSize,
    ModelSpec, OutputSchema, Provider, Selection,
};
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
        Some(ModelSpec::new(Provider::Google, "gemini-3.1-flash-lite"))
    );
    assert_eq!(
        c.embedder,
        ModelSpec::new(Provider::Google, "gemini-embedding-2-preview")
    );
    // Blank spec variables count as unset.
    let c = from(&[("GOOGLE_API_KEY", "g"), ("GRALKOR_LLM_MODEL", "  ")]).unwrap();
    assert_eq!(c.llm.unwrap().to_string(), "google:gemini-3.1-flash-lite");
}

fn roles(c: &ModelConfig) -> (Option<String>, String) {
    (
        c.llm.as_ref().map(ToString::to_string),
        c.embedder.to_string(),
    )
}

#[test]
fn with_no_provider_key_the_embedder_is_local_and_there_is_no_llm() {
    let c = from(&[]).unwrap();
    assert_eq!(roles(&c), (None, "local:all-minilm-l6-v2".to_string()));
    assert!(!c.extracts());
    assert_eq!(
        c.selection,
        Selection {
            llm: Choice::NoProviderKey,
            embedder: Choice::NoProviderKey
        }
    );
    assert_eq!(
        c.describe(),
        "embedder local:all-minilm-l6-v2 because no provider key is set; extraction off \
         because no provider key is set (set GOOGLE_API_KEY or OPENAI_API_KEY to extract facts)"
    );
    // Blank keys count as unset; the dimension is the local model's own.
    let c = from(&[
        ("GOOGLE_API_KEY", "  "),
        ("GRALKOR_EMBEDDER_DIMENSION", "384"),
    ])
    .unwrap();
    assert_eq!(roles(&c), (None, "local:all-minilm-l6-v2".to_string()));
}

#[test]
fn an_openai_key_alone_gives_openai_defaults_for_both_roles() {
    let c = from(&[("OPENAI_API_KEY", "sk-hidden")]).unwrap();
    assert_eq!(
        roles(&c),
        (
            Some("openai:gpt-4.1-mini".to_string()),
            "openai:text-embedding-3-small".to_string()
        )
    );
    assert_eq!(c.selection.llm, Choice::OpenAiKey);
    let d = c.describe();
    assert!(
        d.contains(
            "llm openai:gpt-4.1-mini because OPENAI_API_KEY is set and GOOGLE_API_KEY is not"
        ),
        "{d}"
    );
    assert!(!d.contains("sk-hidden"));
    let built = c.build().unwrap();
    assert_eq!(built.llm.unwrap().provider(), "openai");
    assert_eq!(built.embedder.dimension(), 1536);
}

#[test]
fn a_google_key_or_both_keys_give_the_google_defaults() {
    for vars in [
        &[("GOOGLE_API_KEY", "g")][..],
        &[("GOOGLE_API_KEY", "g"), ("OPENAI_API_KEY", "k")][..],
    ] {
        let c = from(vars).unwrap();
        assert_eq!(
            roles(&c),
            (
                Some(DEFAULT_LLM_MODEL.to_string()),
                DEFAULT_EMBEDDER_MODEL.to_string()
            ),
            "{vars:?}"
        );
        assert_eq!(
            c.describe(),
            "embedder google:gemini-embedding-2-preview because GOOGLE_API_KEY is set; \
             llm google:gemini-3.1-flash-lite because GOOGLE_API_KEY is set"
        );
    }
}

#[test]
fn an_openai_base_url_alone_selects_the_compatible_server_without_a_key() {
    let c = from(&[("OPENAI_BASE_URL", "http://localhost:11434/v1")]).unwrap();
    assert_eq!(
        roles(&c),
        (
            Some("openai:gpt-4.1-mini".to_string()),
            "openai:text-embedding-3-small".to_string()
        )
    );
    assert!(c.openai.api_key.is_none());
    assert_eq!(c.selection.embedder, Choice::OpenAiBaseUrl);
    assert!(
        c.describe()
            .ends_with("; openai at http://localhost:11434/v1"),
        "{}",
        c.describe()
    );
    c.build().unwrap();
    // The server's own model names, set explicitly, still need no key.
    let c = from(&[
        ("OPENAI_BASE_URL", "http://localhost:11434/v1"),
        ("GRALKOR_LLM_MODEL", "openai:qwen3"),
        ("GRALKOR_EMBEDDER_MODEL", "openai:nomic-embed-text"),
        ("GRALKOR_EMBEDDER_DIMENSION", "768"),
    ])
    .unwrap();
    assert!(c.describe().starts_with(
        "embedder openai:nomic-embed-text because GRALKOR_EMBEDDER_MODEL selects it; \
         llm openai:qwen3 because GRALKOR_LLM_MODEL selects it"
    ));
}

#[test]
fn explicit_model_variables_win_over_the_keys() {
    let c = from(&[
        ("GRALKOR_LLM_MODEL", "google:gemini-2.5-flash"),
        ("GRALKOR_EMBEDDER_MODEL", "openai:text-embedding-3-large"),
        ("GOOGLE_API_KEY", "g"),
        ("OPENAI_API_KEY", "k"),
    ])
    .unwrap();
    assert_eq!(
        roles(&c),
        (
            Some("google:gemini-2.5-flash".to_string()),
            "openai:text-embedding-3-large".to_string()
        )
    );
    assert_eq!(
        c.selection,
        Selection {
            llm: Choice::Variable,
            embedder: Choice::Variable
        }
    );
    // An explicit local embedder next to the keys' LLM default.
    let c = from(&[
        ("GRALKOR_EMBEDDER_MODEL", "local:all-minilm-l6-v2"),
        ("OPENAI_API_KEY", "k"),
    ])
    .unwrap();
    assert_eq!(
        roles(&c),
        (
            Some("openai:gpt-4.1-mini".to_string()),
            "local:all-minilm-l6-v2".to_string()
        )
    );
    // An explicit provider without its key: the error names the variable and role,
    // whatever the keys would have chosen.
    let (field, rule, _) =
        config_error(&[("GRALKOR_EMBEDDER_MODEL", "openai:text-embedding-3-small")]);
    assert_eq!(field, "OPENAI_API_KEY");
    assert!(
        rule.starts_with(
            "must be set and not blank: the embedder role selects openai \
             (GRALKOR_LLM_MODEL=unset, GRALKOR_EMBEDDER_MODEL=`openai:text-embedding-3-small`)"
        ),
        "{rule}"
    );
    let (field, rule, _) = config_error(&[("GRALKOR_LLM_MODEL", "google:gemini-2.5-flash")]);
    assert_eq!(field, "GOOGLE_API_KEY");
    assert!(
        rule.starts_with("must be set and not blank: the llm role selects google"),
        "{rule}"
    );
}

#[test]
fn local_specs_name_a_known_model_and_serve_the_embedder_role_only() {
    let (field, rule, _) = config_error(&[("GRALKOR_LLM_MODEL", "local:all-minilm-l6-v2")]);
    assert_eq!(field, "GRALKOR_LLM_MODEL");
    assert_eq!(
        rule,
        "names provider `local`, which serves the embedder role only (got \
         `local:all-minilm-l6-v2`); the llm role needs one of: openai, google"
    );
    let (field, rule, _) = config_error(&[("GRALKOR_EMBEDDER_MODEL", "local:bert-huge")]);
    assert_eq!(field, "GRALKOR_EMBEDDER_MODEL");
    assert_eq!(
        rule,
        "names local model `bert-huge`, which gralkor does not have; local models: all-minilm-l6-v2"
    );
    let (field, rule, _) = config_error(&[("GRALKOR_EMBEDDER_DIMENSION", "256")]);
    assert_eq!(field, "GRALKOR_EMBEDDER_DIMENSION");
    assert_eq!(
        rule,
        "must be 384 or unset for `local:all-minilm-l6-v2` (got 256): local vectors are not shortened"
    );
    // The builder form validates the same way and needs no key.
    ModelConfig::embedder_only(ModelSpec::new(Provider::Local, "all-minilm-l6-v2"))
        .validate()
        .unwrap();
}

#[cfg(feature = "local-embedder")]
#[test]
fn with_no_key_the_models_are_the_local_embedder_and_no_language_model() {
    let models = from(&[]).unwrap().build().unwrap();
    assert!(models.llm.is_none() && models.reranker.is_none());
    // Built without touching the disk or the network: loading waits for `warm_up` or
    // the first embed.
    assert_eq!(
        (
            models.embedder.provider(),
            models.embedder.model(),
            models.embedder.dimension()
        ),
        ("local", "all-MiniLM-L6-v2", 384)
    );
}

#[cfg(not(feature = "local-embedder"))]
#[test]
fn without_the_feature_building_a_local_embedder_names_the_feature() {
    let err = from(&[]).unwrap().build().unwrap_err();
    let Error::Config { field, rule } = err else {
        panic!("expected a config error, got {err:?}")
    };
    assert_eq!(field, "GRALKOR_EMBEDDER_MODEL");
    assert_eq!(
        rule,
        "selects the local embedder `local:all-minilm-l6-v2` (because no provider key is set), \
         which needs gralkor's `local-embedder` feature (on by default; this build turned it \
         off); enable it, or set GOOGLE_API_KEY or OPENAI_API_KEY, or GRALKOR_EMBEDDER_MODEL \
         to an `openai:` or `google:` model"
    );
}

#[test]
fn specs_split_on_the_first_colon_and_are_trimmed() {
    let c = from(&[
        ("GRALKOR_LLM_MODEL", " openai : llama3.1:8b "),
        ("GRALKOR_EMBEDDER_MODEL", "OpenAI:nomic-embed-text"),
        ("OPENAI_API_KEY", "k"),
    ])
    .unwrap();
    assert_eq!(c.llm, Some(ModelSpec::new(Provider::OpenAi, "llama3.1:8b")));
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
fn output_mode_caps_deadline_and_repairs_come_from_the_environment_and_reach_the_client() {
    let local = [
        ("GRALKOR_LLM_MODEL", "openai:smollm2"),
        ("GRALKOR_EMBEDDER_MODEL", "local:all-minilm-l6-v2"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
    ];
    let defaults = from(&local).unwrap();
    assert_eq!(defaults.output_mode, OutputMode::Auto);
    assert_eq!(defaults.max_output_tokens, None);
    assert_eq!(defaults.call_deadline, Duration::from_secs(300));
    assert_eq!(defaults.repair_attempts, 1);
    let mut vars = local.to_vec();
    vars.extend([
        ("GRALKOR_LLM_OUTPUT_MODE", "json_object"),
        ("GRALKOR_LLM_MAX_OUTPUT_TOKENS", "512"),
        ("GRALKOR_LLM_CALL_TIMEOUT_SECS", "45"),
        ("GRALKOR_LLM_REPAIR_ATTEMPTS", "0"),
    ]);
    let config = from(&vars).unwrap();
    assert_eq!(config.output_mode, OutputMode::JsonObject);
    assert_eq!(config.max_output_tokens, Some(512));
    assert_eq!(config.call_deadline, Duration::from_secs(45));
    assert_eq!(config.repair_attempts, 0);
    let llm = format!("{:?}", config.build().unwrap().llm.unwrap());
    for part in [
        "mode: JsonObject",
        "max_output_tokens: Some(512)",
        "deadline: Some(45s)",
        "repair_attempts: 0",
    ] {
        assert!(llm.contains(part), "{part} in {llm}");
    }
    for (var, value, rule) in [
        (
            "GRALKOR_LLM_OUTPUT_MODE",
            "grammar",
            "must be one of auto, json_schema, json_object (got `grammar`)",
        ),
        (
            "GRALKOR_LLM_MAX_OUTPUT_TOKENS",
            "0",
            "must be a positive integer (got `0`)",
        ),
        (
            "GRALKOR_LLM_CALL_TIMEOUT_SECS",
            "soon",
            "must be a positive integer (got `soon`)",
        ),
        (
            "GRALKOR_LLM_REPAIR_ATTEMPTS",
            "-1",
            "must be a whole number, 0 or more (got `-1`)",
        ),
    ] {
        let mut bad = local.to_vec();
        bad.push((var, value));
        let (field, got, _) = config_error(&bad);
        assert_eq!((field.as_str(), got.as_str()), (var, rule));
    }
}

#[test]
fn blank_key_names_the_variable_and_the_embedder_role() {
    let (field, _, text) = config_error(&[
        ("GRALKOR_LLM_MODEL", "openai:gpt-4.1-mini"),
        (
            "GRALKOR_EMBEDDER_MODEL",
            "google:gemini-embedding-2-preview",
        ),
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
    let (_, rule, _) = config_error(&[
        ("GRALKOR_LLM_MODEL", "google:gemini-3.1-flash-lite"),
        (
            "GRALKOR_EMBEDDER_MODEL",
            "google:gemini-embedding-2-preview",
        ),
    ]);
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
         (GRALKOR_LLM_MODEL=`anthropic:claude-sonnet`, GRALKOR_EMBEDDER_MODEL=`local:all-minilm-l6-v2`); \
         supported providers: openai, google, local"
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
         GRALKOR_EMBEDDER_MODEL=`voyage:voyage-3`); supported providers: openai, google, local"
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
    let llm = mixed.llm.as_ref().unwrap();
    assert_eq!(
        (llm.provider(), llm.model(ModelSize::Default)),
        ("openai", "gpt-4.1-mini")
    );
    assert_eq!(
        (mixed.embedder.provider(), mixed.embedder.model()),
        ("google", "gemini-embedding-2-preview")
    );
    assert_eq!(mixed.embedder.dimension(), 3072);
    let reranker = mixed.reranker.as_ref().unwrap();
    assert_eq!(reranker.provider(), "openai");
    assert!(
        format!("{reranker:?}").starts_with("OpenAiReranker"),
        "{reranker:?}"
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
        format!("{:?}", reasoning.reranker.unwrap()).starts_with("ListwiseReranker"),
        "no logprobs on reasoning models"
    );

    let google = from(&[
        ("GOOGLE_API_KEY", "g"),
        ("GRALKOR_LLM_SMALL_MODEL", "gemini-2.5-flash-lite"),
    ])
    .unwrap()
    .build()
    .unwrap();
    let llm = google.llm.unwrap();
    assert_eq!(llm.provider(), "google");
    assert_eq!(llm.model(ModelSize::Small), "gemini-2.5-flash-lite");
    assert_eq!(google.reranker.unwrap().provider(), "google");
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
        .as_ref()
        .unwrap()
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

#[test]
fn chat_and_embedding_limits_are_read_from_the_environment_apart() {
    let c = from(&[
        ("OPENAI_API_KEY", "k"),
        ("GRALKOR_LLM_MAX_IN_FLIGHT", "3"),
        ("GRALKOR_LLM_TOKENS_PER_MINUTE", "90000"),
        ("GRALKOR_EMBEDDER_MAX_IN_FLIGHT", "16"),
        ("GRALKOR_EMBEDDER_REQUESTS_PER_MINUTE", "500"),
    ])
    .unwrap();
    assert_eq!(
        (
            c.limits.max_in_flight,
            c.limits.requests_per_minute,
            c.limits.tokens_per_minute
        ),
        (3, None, Some(90000))
    );
    assert_eq!(
        (
            c.embedding_limits.max_in_flight,
            c.embedding_limits.requests_per_minute,
            c.embedding_limits.tokens_per_minute
        ),
        (16, Some(500), None)
    );
    // Unset: the documented defaults, 8 in flight and no per-minute budget, each.
    let d = from(&[("OPENAI_API_KEY", "k")]).unwrap();
    assert_eq!(d.limits, gralkor::llm::LimiterSettings::default());
    assert_eq!(d.embedding_limits, gralkor::llm::LimiterSettings::default());
    assert_eq!(d.limits.max_in_flight, 8);
    for bad in ["0", "-1", "many"] {
        let (field, rule, _) = config_error(&[
            ("OPENAI_API_KEY", "k"),
            ("GRALKOR_EMBEDDER_MAX_IN_FLIGHT", bad),
        ]);
        assert_eq!(field, "GRALKOR_EMBEDDER_MAX_IN_FLIGHT");
        assert_eq!(rule, format!("must be a positive integer (got `{bad}`)"));
    }
}
