//! The extraction benchmark: the stories of `eval/data/extraction/` (or `--data DIR`)
//! through the engine with the configured model, scored against their gold graphs;
//! a table on stdout and the whole report as JSON (`--out`, default
//! `eval-extraction.json`). With a real model, a second table gives every structured
//! call by step: the share of schema-valid answers, repairs, timeouts, latency
//! p50/p95 and tokens. Progress goes to stderr, one line per episode.
//!
//! ```text
//! # offline: the scripted models derived from the gold graphs (the scorer's check)
//! cargo run -p gralkor-eval --bin eval_extraction -- --script perfect
//! cargo run -p gralkor-eval --bin eval_extraction -- --script wrong
//! # a real provider (OpenAI, Gemini, or any OpenAI-compatible server)
//! OPENAI_API_KEY=… cargo run -p gralkor-eval --bin eval_extraction
//! OPENAI_BASE_URL=http://localhost:11434/v1 GRALKOR_LLM_MODEL=openai:qwen2.5:7b \
//!   GRALKOR_EMBEDDER_MODEL=local:all-minilm-l6-v2 cargo run -p gralkor-eval --bin eval_extraction
//! ```
//!
//! Options: `--data DIR`, `--out FILE`, `--script perfect|wrong`, `--story NAME`
//! (repeatable: only these stories; a name no story has is an error listing them).

use std::path::PathBuf;
use std::sync::Arc;

use gralkor::graph::Engine;
use gralkor::llm::doubles::HashEmbedder;
use gralkor::llm::{Embedder, LanguageModel};
use gralkor_eval::extraction::{
    self, MeasuredModel, Script, load_stories, scripted_model, shipped_stories_dir,
};
use gralkor_eval::report::write_json;
use gralkor_eval::setup::{Args, Setup, exit_on_error};
use gralkor_eval::{EvalError, Result};

#[tokio::main]
async fn main() {
    exit_on_error(try_main().await);
}

async fn try_main() -> Result<()> {
    let args = Args::parse(std::env::args().skip(1), &[])?;
    args.only(&["data", "out", "script", "story"])?;
    let data = args
        .value("data")
        .map_or_else(shipped_stories_dir, PathBuf::from);
    let out = PathBuf::from(args.value("out").unwrap_or("eval-extraction.json"));
    let script = match args.value("script") {
        None => None,
        Some("perfect") => Some(Script::Perfect),
        Some("wrong") => Some(Script::Wrong),
        Some(other) => {
            return Err(EvalError::data(
                "<command line>",
                "--script",
                format!("must be perfect or wrong, not `{other}`"),
            ));
        }
    };
    let only = args.values("story");
    let stories = extraction::select_stories(load_stories(&data)?, &only)?;
    let mut setup = Setup::from_env(false).await?;
    if script.is_none() {
        if !setup.config.extracts() {
            return Err(no_model(&setup));
        }
        setup.build_models().await?;
    }
    let mut steps = Vec::new();
    let report = match script {
        Some(script) => {
            let embedder = HashEmbedder::new(256);
            let db = setup.db.clone();
            let e = embedder.clone();
            extraction::run_all(
                &stories,
                |story| {
                    Engine::new(
                        db.clone(),
                        Arc::new(scripted_model(story, script)),
                        Arc::new(e.clone()),
                    )
                },
                &embedder,
                &format!("scripted {script:?} (hashed bag-of-words embedder)").to_lowercase(),
                "eval:extraction",
            )
            .await?
        }
        None => {
            let models = setup.models.as_ref().expect("built");
            let Some(llm) = models.llm.clone() else {
                return Err(no_model(&setup));
            };
            let embedder: Arc<dyn Embedder> = models.embedder.clone();
            let name = format!(
                "{}:{} (embedder {}:{})",
                llm.provider(),
                llm.model(gralkor::llm::ModelSize::Default),
                embedder.provider(),
                embedder.model()
            );
            let db = setup.db.clone();
            let measured = MeasuredModel::new(llm.clone());
            let l: Arc<dyn LanguageModel> = Arc::new(measured.clone());
            let e = embedder.clone();
            let report = extraction::run_all(
                &stories,
                |_| Engine::new(db.clone(), l.clone(), e.clone()),
                embedder.as_ref(),
                &name,
                "eval:extraction",
            )
            .await?;
            steps = measured.steps();
            report
        }
    };
    print!("{}", report.table());
    if !steps.is_empty() {
        print!("{}", MeasuredModel::table(&steps));
    }
    write_json(&out, &report)?;
    println!("report written to {}", out.display());
    setup.shutdown().await
}

fn no_model(setup: &Setup) -> EvalError {
    EvalError::data(
        "<environment>",
        "language model",
        format!(
            "is not configured ({}): set OPENAI_API_KEY, GOOGLE_API_KEY or OPENAI_BASE_URL \
             (with GRALKOR_LLM_MODEL), or run with --script perfect",
            setup.config.describe()
        ),
    )
}
