//! `gralkor models check` end to end (test-trees/cli.md, "models check"): the real
//! binary against a real llama.cpp server serving SmolLM2-135M-Instruct, provisioned
//! and started by gralkor's test support (`gralkor::llm::llama_server`, Linux x86_64
//! only). A 135M model's extraction is poor: the test asserts the report's mechanics,
//! never its quality.

mod common;

use common::Home;

#[test]
fn an_unknown_story_is_invalid_input_listing_the_stories_before_anything_starts() {
    let home = Home::new();
    let run = home.run_raw(&["models", "check", "--story", "01-career", "--json"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(
        run.stderr.contains("--story") && run.stderr.contains("no story is named `01-career`"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("career, family, preferences"),
        "{}",
        run.stderr
    );
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "invalid_input");
    assert!(!home.data_dir().exists(), "nothing was started");
}

#[test]
fn without_a_language_model_the_check_is_a_configuration_error() {
    let home = Home::new();
    // No key, no OPENAI_BASE_URL: the local embedder only, nothing to check.
    let run = home.run_raw(&["models", "check", "--story", "career"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert!(run.stderr.contains("GRALKOR_LLM_MODEL"), "{}", run.stderr);
    assert!(!home.data_dir().exists(), "nothing was started");
}

#[cfg(all(
    feature = "local-embedder",
    target_os = "linux",
    target_arch = "x86_64"
))]
#[tokio::test(flavor = "multi_thread")]
async fn models_check_against_a_real_llama_cpp_server_reports_every_step() {
    use std::time::{Duration, Instant};

    use common::Run;

    use gralkor::llm::llama_server::{LlamaServer, LlamaServerConfig, MODEL_NAME};

    let server = LlamaServer::start(&LlamaServerConfig::default())
        .await
        .expect("the llama.cpp server starts");
    let home = Home::new();
    let mut cmd = tokio::process::Command::from(home.command());
    cmd.env("OPENAI_BASE_URL", server.base_url())
        .env("GRALKOR_LLM_MODEL", format!("openai:{MODEL_NAME}"))
        .env("GRALKOR_EMBEDDER_MODEL", "local:all-minilm-l6-v2")
        .env("GRALKOR_LLM_MAX_OUTPUT_TOKENS", "384")
        .env_remove("GRALKOR_LLM_CALL_TIMEOUT_SECS")
        .env_remove("GRALKOR_LLM_OUTPUT_MODE")
        .args([
            "models",
            "check",
            "--story",
            "career",
            "--call-timeout",
            "30",
        ])
        .arg("--json")
        .kill_on_drop(true);
    // Each call ends by its deadline (30 s); the run as a whole is bounded too, so a
    // hang fails the test instead of stalling the suite.
    let started = Instant::now();
    let output = tokio::time::timeout(Duration::from_secs(15 * 60), cmd.output())
        .await
        .expect("models check ends within its bound")
        .unwrap();
    let took = started.elapsed();
    let run = Run::from(output);
    eprintln!("models check against SmolLM2 in {took:?}:\n{}", run.stderr);
    let report = run.json();
    eprintln!("{report:#}");

    assert_eq!(report["llm"], format!("openai:{MODEL_NAME}"));
    assert!(
        report["embedder"]
            .as_str()
            .unwrap()
            .eq_ignore_ascii_case("local:all-minilm-l6-v2"),
        "{report}"
    );
    assert_eq!(report["call_timeout_secs"], 30.0);
    assert_eq!(report["max_output_tokens"], 384);
    let stories = report["extraction"]["stories"].as_array().unwrap();
    assert_eq!(stories.len(), 1);
    assert_eq!(stories[0]["story"], "career");
    let total = &report["extraction"]["total"];
    assert_eq!(total["episodes"], 4);
    // Every step the engine called is reported; every episode starts with `extract`.
    let steps = report["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "{report}");
    assert!(steps.iter().any(|s| s["step"] == "extract"), "{report}");
    let mut calls = 0;
    for s in steps {
        let n = s["calls"].as_u64().unwrap();
        assert!(n > 0, "{s}");
        calls += n;
        let share = s["valid_share"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&share), "{s}");
        assert_eq!(
            s["valid"].as_u64().unwrap()
                + s["timed_out"].as_u64().unwrap()
                + s["failed"].as_u64().unwrap(),
            n,
            "{s}"
        );
        let (p50, p95) = (s["p50_ms"].as_f64().unwrap(), s["p95_ms"].as_f64().unwrap());
        assert!(p50 > 0.0 && p50 <= p95, "{s}");
        // No call outlives its deadline (30 s) by more than the time to notice it.
        assert!(p95 < 35_000.0, "{s}");
    }
    // Each episode made at least its extraction call.
    assert!(calls >= 4, "{report}");
    // Progress: one line per episode on standard error (not a terminal: plain lines).
    for n in 1..=4 {
        assert!(
            run.stderr.contains(&format!("{n}/4 career e{n}")),
            "{}",
            run.stderr
        );
    }
    // Nothing of the user's was touched: the check ran in a directory of its own.
    assert!(
        !home.data_dir().exists(),
        "the configured data directory was used"
    );
}
