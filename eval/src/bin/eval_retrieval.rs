//! The retrieval benchmark: a LongMemEval- or LoCoMo-format file (default: the
//! shipped synthetic set) ingested session by session, its questions through
//! `recall`; a table per question kind on stdout and the whole run as JSON (`--out`,
//! default `eval-retrieval.json`).
//!
//! ```text
//! # offline: in-process embedder, no language model (episodes-only retrieval)
//! cargo run -p gralkor-eval --bin eval_retrieval
//! # LongMemEval_S with a real provider: extraction, answers and the judge
//! OPENAI_API_KEY=… cargo run -p gralkor-eval --bin eval_retrieval -- \
//!   --data longmemeval_s.json --max-questions 50
//! # LoCoMo, retrieval only (no extraction), answering and judging with the model
//! OPENAI_API_KEY=… cargo run -p gralkor-eval --bin eval_retrieval -- --data locomo10.json --episodes-only
//! ```
//!
//! Options: `--data FILE`, `--format longmemeval|locomo` (default: from the file's
//! shape), `--out FILE`, `--max-questions N`, `--k 1,3,5,10`, `--context-k N` (facts
//! in the answer context; default 3 episodes-only, 10 with extraction), `--tag T`
//! (operator ids `T-<n>`; default `eval`), `--episodes-only` (do not extract even
//! with a model), `--no-answer` (no answering or judging), `--script lines` (extract
//! offline with the line-per-fact scripted model: the extraction path without a
//! provider), `--generate SEED` (instead of `--data`: the generated long-session set
//! of that seed, written to `generated-SEED.json`; `--conversations N`, default 4).
//! Every table has the plain BM25 baseline's row (`· BM25`) under each of gralkor's.

use std::path::PathBuf;
use std::sync::Arc;

use gralkor::graph::Engine;
use gralkor::llm::ModelSize;
use gralkor_eval::offline::{client_over, offline_client, offline_embedder};
use gralkor_eval::report::write_json;
use gralkor_eval::retrieval::generate::{GenerateOptions, generate};
use gralkor_eval::retrieval::scripted::line_extractor;
use gralkor_eval::retrieval::{self, Format, RunOptions, Summary, shipped_synthetic_set};
use gralkor_eval::setup::{Args, Setup, exit_on_error};
use gralkor_eval::{EvalError, Result};
use serde::Serialize;

#[derive(Serialize)]
struct Report<'a> {
    dataset: &'a str,
    setup: String,
    summary: Summary,
    run: &'a retrieval::RunResult,
}

#[tokio::main]
async fn main() {
    exit_on_error(try_main().await);
}

fn number(args: &Args, name: &str) -> Result<Option<usize>> {
    args.value(name)
        .map(|v| {
            v.parse().map_err(|_| {
                EvalError::data(
                    "<command line>",
                    format!("--{name}"),
                    "must be a whole number",
                )
            })
        })
        .transpose()
}

async fn try_main() -> Result<()> {
    let args = Args::parse(std::env::args().skip(1), &["episodes-only", "no-answer"])?;
    args.only(&[
        "data",
        "format",
        "out",
        "max-questions",
        "k",
        "context-k",
        "tag",
        "episodes-only",
        "no-answer",
        "script",
        "generate",
        "conversations",
    ])?;
    let scripted = match args.value("script") {
        None => false,
        Some("lines") => true,
        Some(other) => {
            return Err(EvalError::data(
                "<command line>",
                "--script",
                format!("must be lines, not `{other}`"),
            ));
        }
    };
    let data = match number(&args, "generate")? {
        // The generated set (`retrieval::generate`), written beside the report.
        Some(seed) => {
            let mut g = GenerateOptions {
                seed: seed as u64,
                ..GenerateOptions::default()
            };
            if let Some(n) = number(&args, "conversations")? {
                g.conversations = n;
            }
            let path = PathBuf::from(format!("generated-{seed}.json"));
            write_json(&path, &generate(&g))?;
            path
        }
        None => args
            .value("data")
            .map_or_else(shipped_synthetic_set, PathBuf::from),
    };
    let out = PathBuf::from(args.value("out").unwrap_or("eval-retrieval.json"));
    let format = match args.value("format") {
        None => None,
        Some("longmemeval") => Some(Format::LongMemEval),
        Some("locomo") => Some(Format::LoCoMo),
        Some(other) => {
            return Err(EvalError::data(
                "<command line>",
                "--format",
                format!("must be longmemeval or locomo, not `{other}`"),
            ));
        }
    };
    let mut options = RunOptions {
        max_questions: number(&args, "max-questions")?,
        ..RunOptions::default()
    };
    if let Some(ks) = args.value("k") {
        options.ks = ks
            .split(',')
            .map(|k| k.trim().parse::<usize>().ok().filter(|k| *k > 0))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                EvalError::data(
                    "<command line>",
                    "--k",
                    "must be positive whole numbers separated by commas",
                )
            })?;
    }
    if let Some(tag) = args.value("tag") {
        options.run_tag = tag.to_owned();
    }
    let dataset = retrieval::load(&data, format)?;

    // Offline (no language model configured) the harness's own offline embedder is
    // used: the in-process one with the `local-embedder` feature, else the hashed one.
    let mut setup = Setup::from_env(false).await?;
    if setup.config.extracts() && !scripted {
        setup.build_models().await?;
    }
    let models = setup.models.as_ref();
    let llm = models.and_then(|m| m.llm.clone());
    let extract = scripted || (llm.is_some() && !args.flag("episodes-only"));
    let mut offline_name = String::new();
    let client = match models {
        _ if scripted => {
            let embedder = offline_embedder().await?;
            offline_name = format!(
                "line-per-fact scripted extraction, offline embedder {}:{}",
                embedder.provider(),
                embedder.model()
            );
            client_over(Engine::new(
                setup.db.clone(),
                Arc::new(line_extractor()),
                embedder,
            ))?
        }
        Some(m) if extract => {
            let mut engine = Engine::new(
                setup.db.clone(),
                llm.clone().expect("an llm"),
                m.embedder.clone(),
            );
            if let Some(r) = &m.reranker {
                engine = engine.with_reranker(r.clone());
            }
            engine.check_dimensions().await?;
            client_over(engine)?
        }
        Some(m) => {
            let engine = Engine::without_llm(setup.db.clone(), m.embedder.clone());
            engine.check_dimensions().await?;
            client_over(engine)?
        }
        None => {
            let embedder = offline_embedder().await?;
            offline_name = format!(
                "offline embedder {}:{}",
                embedder.provider(),
                embedder.model()
            );
            offline_client(setup.db.clone(), embedder)?
        }
    };
    options.context_k = number(&args, "context-k")?.unwrap_or(if extract { 10 } else { 3 });
    if !args.flag("no-answer") {
        options.model = llm.clone();
    }
    let described = format!(
        "{}; {}; answers {}",
        if extract {
            "facts extracted"
        } else {
            "episodes only"
        },
        models.map_or_else(
            || offline_name.clone(),
            |m| format!("embedder {}:{}", m.embedder.provider(), m.embedder.model())
        ),
        match &options.model {
            Some(l) => format!("and judge {}:{}", l.provider(), l.model(ModelSize::Default)),
            None => "none (context checks only)".to_owned(),
        }
    );
    eprintln!(
        "{}: {} conversations, {described}",
        dataset.name,
        dataset.conversations.len()
    );
    let run = retrieval::run_dataset(&client, &dataset, &options).await?;
    let summary = Summary::of(&run, &options.ks);
    print!(
        "{}",
        summary.table(&format!(
            "{} — {described}, context {} facts",
            dataset.name, options.context_k
        ))
    );
    write_json(
        &out,
        &Report {
            dataset: &dataset.name,
            setup: described,
            summary: summary.clone(),
            run: &run,
        },
    )?;
    println!("report written to {}", out.display());
    setup.shutdown().await
}
