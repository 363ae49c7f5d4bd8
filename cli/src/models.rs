//! `gralkor models check`: the configured models against the shipped extraction
//! stories (`gralkor_eval::models::check`), before anything is ingested.

use std::io::IsTerminal;
use std::time::Duration;

use clap::{Args, Subcommand};
use gralkor_eval::EvalError;
use gralkor_eval::extraction::select_stories;
use gralkor_eval::models::{self, Progress};

use crate::args::Global;
use crate::commands::Out;
use crate::failure::{Failure, Outcome};
use crate::settings;

/// What to do with the configured models.
#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Will my model work? Runs the configured language model and embedder against
    /// the shipped extraction stories and prints, per pipeline step, the share of
    /// schema-valid answers, repairs, timeouts, latency p50/p95 per call and tokens,
    /// then entity and fact precision/recall/F1 against the stories' gold graphs.
    ///
    /// Nothing of yours is read or written: an embedded FalkorDB runs in a temporary
    /// directory (a remote one gets graphs `gralkor-models-check:<story>`, cleared).
    /// Each call is bounded (GRALKOR_LLM_CALL_TIMEOUT_SECS or --call-timeout,
    /// GRALKOR_LLM_MAX_OUTPUT_TOKENS): a call past its deadline is counted as a
    /// timeout and the check goes on. Exits 0 when the check ran, whatever it found.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Only this story (repeatable; default: all eight). An unknown name is an error
    /// listing the stories.
    #[arg(long = "story", value_name = "NAME")]
    pub stories: Vec<String>,
    /// The deadline of one structured call, in seconds (overrides
    /// GRALKOR_LLM_CALL_TIMEOUT_SECS); one HTTP attempt may then take all of it.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub call_timeout: Option<u64>,
}

/// Runs a `models` command: no operator, no authorizer, nothing of the user's.
pub async fn run(global: &Global, command: &ModelsCommand, out: Out) -> Outcome {
    let ModelsCommand::Check(args) = command;
    let names: Vec<&str> = args.stories.iter().map(String::as_str).collect();
    // An unknown story name is invalid input naming `--story`, before anything starts.
    let stories =
        select_stories(models::shipped_stories().map_err(failure)?, &names).map_err(failure)?;
    let mut config = settings::config(global)?;
    if let (Some(secs), Some(m)) = (args.call_timeout, config.models.as_mut()) {
        let deadline = Duration::from_secs(secs);
        m.call_deadline = deadline;
        // One HTTP attempt may use the whole deadline: a slow local model cut at the
        // attempt timeout (120 s by default) would start its answer again from scratch.
        m.retry.attempt_timeout = m.retry.attempt_timeout.map(|t| t.max(deadline));
    }
    let mut bar = Bar::None;
    let report = models::check(&config, &stories, &mut |p| bar.show(p)).await;
    bar.finish();
    let report = report.map_err(failure)?;
    out.emit(&report, || report.table().trim_end().to_owned())
}

fn failure(e: EvalError) -> Failure {
    match e {
        EvalError::Gralkor(e) => Failure::Gralkor(e),
        EvalError::Io { context, source } => Failure::Io(context, source),
        EvalError::Data { field, rule, .. } => {
            Failure::Gralkor(gralkor::Error::InvalidInput { field, rule })
        }
    }
}

/// Progress on standard error: a bar on a terminal, plain lines otherwise (standard
/// output stays the report alone, JSON with --json).
enum Bar {
    None,
    Terminal(indicatif::ProgressBar),
    Lines,
}

impl Bar {
    fn show(&mut self, p: Progress<'_>) {
        match p {
            Progress::Started {
                llm,
                embedder,
                stories,
                episodes,
            } => {
                let line = format!(
                    "checking llm {llm}, embedder {embedder}: {stories} stories, {episodes} episodes"
                );
                if std::io::stderr().is_terminal() {
                    let bar = indicatif::ProgressBar::new(episodes as u64);
                    if let Ok(style) = indicatif::ProgressStyle::with_template(
                        "{spinner} [{bar:30}] {pos}/{len} episodes {elapsed} {msg}",
                    ) {
                        bar.set_style(style.progress_chars("=> "));
                    }
                    bar.enable_steady_tick(Duration::from_millis(200));
                    bar.println(line);
                    *self = Bar::Terminal(bar);
                } else {
                    eprintln!("{line}");
                    *self = Bar::Lines;
                }
            }
            Progress::Episode {
                story,
                episode,
                done,
                total,
                ok,
                seconds,
            } => {
                let line = format!(
                    "{done}/{total} {story} {episode}: {} in {seconds:.1} s",
                    if ok { "done" } else { "failed" }
                );
                match self {
                    Bar::Terminal(bar) => {
                        bar.println(line);
                        bar.set_message(format!("{story} {episode}"));
                        bar.inc(1);
                    }
                    Bar::Lines | Bar::None => eprintln!("{line}"),
                }
            }
        }
    }

    fn finish(&self) {
        if let Bar::Terminal(bar) = self {
            bar.finish_and_clear();
        }
    }
}
