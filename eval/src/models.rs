//! "Will my model work?" — the configured models run against the shipped extraction
//! stories (what `gralkor models check` prints), before anything of the user's is
//! ingested.
//!
//! [`check`] ingests each story through the real engine with the configured language
//! model and embedder (every structured call measured by pipeline step: the share of
//! schema-valid answers, repairs, timeouts, latency p50/p95 and tokens), scores the
//! graph it left against the story's gold graph (entity and fact precision, recall,
//! F1) and returns a [`ModelReport`]. Each call is bounded by the model configuration
//! (`GRALKOR_LLM_CALL_TIMEOUT_SECS`, `GRALKOR_LLM_MAX_OUTPUT_TOKENS`,
//! `GRALKOR_LLM_REPAIR_ATTEMPTS`), so a weak model costs bounded time: a call past its
//! deadline counts as a timeout and the episode as failed, and the run goes on.
//!
//! With an embedded FalkorDB the check runs in a temporary data directory, removed at
//! the end, never the configured one: the user's memory is not touched. With a remote
//! server it writes graphs `gralkor-models-check:<story>`, cleared before and after.
//!
//! ```no_run
//! # #![recursion_limit = "256"]
//! # async fn run() -> gralkor_eval::Result<()> {
//! use gralkor_eval::extraction::select_stories;
//! use gralkor_eval::models::{self, Progress};
//!
//! let config = gralkor::Config::from_env()?;
//! let stories = select_stories(models::shipped_stories()?, &["career"])?;
//! let report = models::check(&config, &stories, &mut |p: Progress<'_>| {
//!     if let Progress::Episode { done, total, .. } = p {
//!         eprintln!("{done}/{total}");
//!     }
//! })
//! .await?;
//! print!("{}", report.table());
//! # Ok(()) }
//! ```

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use gralkor::Config;
use gralkor::falkordb::FalkorDb;
use gralkor::graph::Engine;
use gralkor::llm::{Embedder, LanguageModel, ModelSize};
use serde::Serialize;

use crate::extraction::story::parse_story;
use crate::extraction::{
    MeasuredModel, Report, Scores, StepCalls, Story, graph_name, per_episode, run_story_observed,
    score_story,
};
use crate::report::{pct, table};
use crate::{EvalError, Result};

/// The graphs a check writes on a remote server: `gralkor-models-check:<story>`.
pub const GRAPH_PREFIX: &str = "gralkor-models-check";

/// The shipped stories (`eval/data/extraction/`), compiled into the binary so an
/// installed `gralkor` has them.
const SHIPPED: &[(&str, &str)] = &[
    (
        "01-career.json",
        include_str!("../data/extraction/01-career.json"),
    ),
    (
        "02-family.json",
        include_str!("../data/extraction/02-family.json"),
    ),
    (
        "03-preferences.json",
        include_str!("../data/extraction/03-preferences.json"),
    ),
    (
        "04-out-of-order.json",
        include_str!("../data/extraction/04-out-of-order.json"),
    ),
    (
        "05-json-records.json",
        include_str!("../data/extraction/05-json-records.json"),
    ),
    (
        "06-strict-ontology.json",
        include_str!("../data/extraction/06-strict-ontology.json"),
    ),
    (
        "07-relative-dates.json",
        include_str!("../data/extraction/07-relative-dates.json"),
    ),
    (
        "08-places-orgs.json",
        include_str!("../data/extraction/08-places-orgs.json"),
    ),
];

/// The shipped extraction stories, in file order, from the copy compiled into this
/// crate (the same files [`crate::extraction::load_stories`] reads from
/// [`crate::extraction::shipped_stories_dir`]).
///
/// ```
/// let stories = gralkor_eval::models::shipped_stories().unwrap();
/// assert_eq!(stories[0].name, "career");
/// ```
pub fn shipped_stories() -> Result<Vec<Story>> {
    SHIPPED
        .iter()
        .map(|(file, text)| parse_story(&Path::new("eval/data/extraction").join(file), text))
        .collect()
}

/// How far a check is.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress<'a> {
    /// The models are built and warmed up; `episodes` episodes of `stories` stories
    /// follow.
    Started {
        /// The language model, `provider:model`.
        llm: &'a str,
        /// The embedder, `provider:model`.
        embedder: &'a str,
        /// Stories to run.
        stories: usize,
        /// Episodes to ingest, in all.
        episodes: usize,
    },
    /// One episode was ingested (or failed).
    Episode {
        /// Its story.
        story: &'a str,
        /// Its id in the story.
        episode: &'a str,
        /// Episodes done so far, this one included.
        done: usize,
        /// Episodes in all.
        total: usize,
        /// Whether its ingestion succeeded.
        ok: bool,
        /// How long it took, in seconds.
        seconds: f64,
    },
}

/// The structured calls of one pipeline step, summed up.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct StepSummary {
    /// The step (`extract`, `resolve_entities`, …).
    pub step: String,
    /// Structured calls.
    pub calls: u64,
    /// Calls that returned a schema-valid answer (first time or after a repair).
    pub valid: u64,
    /// `valid / calls`; `None` without calls.
    pub valid_share: Option<f64>,
    /// Valid answers that needed a repair turn.
    pub repaired: u64,
    /// Calls that ended at their deadline.
    pub timed_out: u64,
    /// Calls that failed otherwise (no valid answer after the repairs, the server's
    /// error).
    pub failed: u64,
    /// Median latency per call, in milliseconds; `None` without calls.
    pub p50_ms: Option<f64>,
    /// 95th-percentile latency per call, in milliseconds; `None` without calls.
    pub p95_ms: Option<f64>,
    /// Prompt tokens of the valid answers.
    pub prompt_tokens: u64,
    /// Completion tokens of the valid answers.
    pub completion_tokens: u64,
}

impl From<&StepCalls> for StepSummary {
    fn from(s: &StepCalls) -> Self {
        StepSummary {
            step: s.step.clone(),
            calls: s.calls,
            valid: s.valid,
            valid_share: s.valid_share(),
            repaired: s.repaired,
            timed_out: s.timed_out,
            failed: s.calls - s.valid - s.timed_out,
            p50_ms: s.latency_ms(0.5),
            p95_ms: s.latency_ms(0.95),
            prompt_tokens: s.prompt_tokens,
            completion_tokens: s.completion_tokens,
        }
    }
}

/// What [`check`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct ModelReport {
    /// The language model, `provider:model`.
    pub llm: String,
    /// The embedder, `provider:model`.
    pub embedder: String,
    /// The deadline of one structured call, in seconds.
    pub call_timeout_secs: f64,
    /// The output-token ceiling of every structured call, when one is set.
    pub max_output_tokens: Option<u32>,
    /// Every structured call by pipeline step, in step-name order.
    pub steps: Vec<StepSummary>,
    /// The extraction scores, per story and in total.
    pub extraction: Report,
    /// Wall time of the whole check (models built, stories run and scored), seconds.
    pub wall_secs: f64,
}

impl ModelReport {
    /// Structured calls in all, and how many got a schema-valid answer.
    pub fn calls(&self) -> (u64, u64) {
        self.steps
            .iter()
            .fold((0, 0), |(c, v), s| (c + s.calls, v + s.valid))
    }

    /// The report as text: a heading, the structured calls by step (calls, valid %,
    /// repaired, timeouts, other failures, latency p50/p95 per call, tokens per valid
    /// call) and the extraction scores per story (episodes, failed, entity and fact
    /// precision/recall/F1, calls and ms per episode); `n/a` where there is nothing to
    /// count.
    pub fn table(&self) -> String {
        let t = &self.extraction.total;
        let mut out = format!(
            "models check — llm {}, embedder {}\n\
             {} stories, {} episodes ({} failed) in {:.1} s; call timeout {:.0} s, \
             max output tokens {}\n\n",
            self.llm,
            self.embedder,
            self.extraction.stories.len(),
            t.episodes,
            t.failed_episodes,
            self.wall_secs,
            self.call_timeout_secs,
            self.max_output_tokens
                .map_or_else(|| "per step".to_owned(), |m| m.to_string()),
        );
        let ms = |v: Option<f64>| v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.0}"));
        let step_row = |s: &StepSummary| {
            vec![
                s.step.clone(),
                s.calls.to_string(),
                pct(s.valid_share),
                s.repaired.to_string(),
                s.timed_out.to_string(),
                s.failed.to_string(),
                ms(s.p50_ms),
                ms(s.p95_ms),
                (s.prompt_tokens + s.completion_tokens)
                    .checked_div(s.valid)
                    .map_or_else(|| "n/a".to_owned(), |t| t.to_string()),
            ]
        };
        let mut rows: Vec<Vec<String>> = self.steps.iter().map(step_row).collect();
        let (calls, valid) = self.calls();
        let mut all = self.steps.iter().fold(
            StepSummary {
                step: "TOTAL".into(),
                ..StepSummary::default()
            },
            |mut a, s| {
                a.calls += s.calls;
                a.valid += s.valid;
                a.repaired += s.repaired;
                a.timed_out += s.timed_out;
                a.failed += s.failed;
                a.prompt_tokens += s.prompt_tokens;
                a.completion_tokens += s.completion_tokens;
                a
            },
        );
        all.valid_share = (calls > 0).then(|| valid as f64 / calls as f64);
        rows.push(step_row(&all));
        out.push_str("structured calls by step\n");
        out.push_str(&table(
            &[
                "step", "calls", "valid %", "repaired", "timeouts", "failed", "p50 ms", "p95 ms",
                "tok/call",
            ],
            &rows,
        ));
        out.push('\n');
        let story_row = |name: &str, s: &Scores| {
            let per = |x: f64| per_episode(s, x);
            vec![
                name.to_owned(),
                s.episodes.to_string(),
                s.failed_episodes.to_string(),
                pct(s.entities.measured_precision()),
                pct(s.entities.measured_recall()),
                pct(s.entities.measured_f1()),
                pct(s.facts.measured_precision()),
                pct(s.facts.measured_recall()),
                pct(s.facts.measured_f1()),
                per(s.llm_calls as f64),
                per(s.wall_ms),
            ]
        };
        let mut rows: Vec<Vec<String>> = self
            .extraction
            .stories
            .iter()
            .map(|s| story_row(&s.story, &s.scores))
            .collect();
        rows.push(story_row("TOTAL", t));
        out.push_str("extraction against the gold graphs\n");
        out.push_str(&table(
            &[
                "story", "eps", "failed", "ent P", "ent R", "ent F1", "fact P", "fact R",
                "fact F1", "calls/ep", "ms/ep",
            ],
            &rows,
        ));
        // Why episodes failed: each distinct error once (all of them in the JSON).
        let mut errors: Vec<&str> = Vec::new();
        for e in self.extraction.stories.iter().flat_map(|s| &s.episodes) {
            if let Some(err) = e.error.as_deref()
                && !errors.contains(&err)
            {
                errors.push(err);
            }
        }
        for err in errors.iter().take(3) {
            out.push_str(&format!("failed: {err}\n"));
        }
        if errors.len() > 3 {
            out.push_str(&format!("… and {} other errors\n", errors.len() - 3));
        }
        out
    }
}

/// Runs the models `config` names against `stories` (see the [module](self)): each
/// story ingested in its own graph through the real engine, every structured call
/// measured, the graph scored against the gold graph and cleared. `progress` hears
/// when the models are ready and after each episode.
///
/// Fails before anything runs when no language model is configured (a configuration
/// error naming `GRALKOR_LLM_MODEL`) or `stories` is empty; an episode whose
/// ingestion fails is reported, not an error.
pub async fn check(
    config: &Config,
    stories: &[Story],
    progress: &mut (dyn FnMut(Progress<'_>) + Send),
) -> Result<ModelReport> {
    let started = Instant::now();
    let Some(model_config) = config.models.as_ref().filter(|m| m.llm.is_some()) else {
        return Err(gralkor::Error::Config {
            field: "GRALKOR_LLM_MODEL".into(),
            rule: format!(
                "names no language model to check ({}): set OPENAI_BASE_URL with \
                 GRALKOR_LLM_MODEL=openai:<model> for a local server, or OPENAI_API_KEY / \
                 GOOGLE_API_KEY",
                config.describe()
            ),
        }
        .into());
    };
    if stories.is_empty() {
        return Err(EvalError::data(
            "<arguments>",
            "stories",
            "must name at least one story",
        ));
    }
    let mut falkordb = config.falkordb.clone();
    let temp = match (&falkordb.remote, &mut falkordb.embedded) {
        (None, Some(embedded)) => {
            let dir = tempfile::Builder::new()
                .prefix("gralkor-models-check-")
                .tempdir()
                .map_err(|e| EvalError::io("creating a temporary data directory", e))?;
            embedded.data_dir = dir.path().to_owned();
            Some(dir)
        }
        _ => None,
    };
    let models = model_config.build()?;
    let llm = models
        .llm
        .clone()
        .expect("a language model is configured (checked above)");
    let embedder: Arc<dyn Embedder> = models.embedder.clone();
    embedder.warm_up().await?;
    let db = FalkorDb::connect(falkordb).await?;
    let outcome = run(&db, &llm, &embedder, stories, progress).await;
    let closed = db.shutdown().await;
    drop(temp);
    let (extraction, steps) = outcome?;
    closed?;
    Ok(ModelReport {
        llm: format!("{}:{}", llm.provider(), llm.model(ModelSize::Default)),
        embedder: format!("{}:{}", embedder.provider(), embedder.model()),
        call_timeout_secs: model_config.call_deadline.as_secs_f64(),
        max_output_tokens: model_config.max_output_tokens,
        steps: steps.iter().map(StepSummary::from).collect(),
        extraction,
        wall_secs: started.elapsed().as_secs_f64(),
    })
}

async fn run(
    db: &FalkorDb,
    llm: &Arc<dyn LanguageModel>,
    embedder: &Arc<dyn Embedder>,
    stories: &[Story],
    progress: &mut (dyn FnMut(Progress<'_>) + Send),
) -> Result<(Report, Vec<StepCalls>)> {
    let llm_name = format!("{}:{}", llm.provider(), llm.model(ModelSize::Default));
    let embedder_name = format!("{}:{}", embedder.provider(), embedder.model());
    let total: usize = stories.iter().map(|s| s.episodes.len()).sum();
    progress(Progress::Started {
        llm: &llm_name,
        embedder: &embedder_name,
        stories: stories.len(),
        episodes: total,
    });
    let measured = MeasuredModel::new(llm.clone());
    let engine = Engine::new(
        db.clone(),
        Arc::new(measured.clone()) as Arc<dyn LanguageModel>,
        embedder.clone(),
    );
    let mut scored = Vec::with_capacity(stories.len());
    let mut sum = Scores::default();
    let mut done = 0;
    for story in stories {
        let graph = graph_name(GRAPH_PREFIX, story);
        let run = run_story_observed(&engine, &graph, story, &mut |_, cost| {
            done += 1;
            progress(Progress::Episode {
                story: &story.name,
                episode: &cost.episode,
                done,
                total,
                ok: cost.error.is_none(),
                seconds: cost.wall_ms / 1e3,
            });
        })
        .await?;
        let s = score_story(story, &run, embedder.as_ref()).await?;
        engine.clear(&graph).await?;
        sum.add(&s.scores);
        scored.push(s);
    }
    let report = Report {
        model: format!("{llm_name} (embedder {embedder_name})"),
        stories: scored,
        total: sum,
    };
    Ok((report, measured.steps()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiled_stories_are_the_shipped_files() {
        let compiled = shipped_stories().unwrap();
        let read =
            crate::extraction::load_stories(&crate::extraction::shipped_stories_dir()).unwrap();
        let names = |v: &[Story]| v.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&compiled), names(&read));
        assert_eq!(compiled.len(), 8);
    }

    #[test]
    fn the_table_reports_every_step_and_n_a_where_nothing_was_counted() {
        let steps = [
            StepCalls {
                step: "extract".into(),
                calls: 4,
                valid: 3,
                timed_out: 1,
                prompt_tokens: 300,
                completion_tokens: 60,
                latencies_ms: vec![100.0, 400.0, 200.0, 300.0],
                ..StepCalls::default()
            },
            StepCalls {
                step: "resolve_entities".into(),
                calls: 2,
                valid: 0,
                latencies_ms: vec![50.0, 70.0],
                ..StepCalls::default()
            },
        ];
        let report = ModelReport {
            llm: "openai:smollm2".into(),
            embedder: "local:all-minilm-l6-v2".into(),
            call_timeout_secs: 60.0,
            max_output_tokens: Some(384),
            steps: steps.iter().map(StepSummary::from).collect(),
            extraction: Report {
                model: "m".into(),
                stories: vec![],
                total: Scores::default(),
            },
            wall_secs: 1.0,
        };
        assert_eq!(report.calls(), (6, 3));
        let s = &report.steps[0];
        assert_eq!(
            (s.valid_share, s.failed, s.p50_ms, s.p95_ms),
            (Some(0.75), 0, Some(200.0), Some(400.0))
        );
        assert_eq!(report.steps[1].failed, 2);
        let t = report.table();
        let line = |first: &str| {
            t.lines()
                .find(|l| l.starts_with(first))
                .unwrap_or_else(|| panic!("no `{first}` row in\n{t}"))
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            line("extract"),
            ["extract", "4", "75.0", "0", "1", "0", "200", "400", "120"]
        );
        assert_eq!(
            line("resolve_entities"),
            [
                "resolve_entities",
                "2",
                "0.0",
                "0",
                "0",
                "2",
                "50",
                "70",
                "n/a"
            ]
        );
        assert_eq!(line("TOTAL")[..3], ["TOTAL", "6", "50.0"]);
        // No episodes: the extraction measures are n/a, never 100.
        let total = t.lines().filter(|l| l.starts_with("TOTAL")).nth(1).unwrap();
        assert!(total.contains("n/a") && !total.contains("100"), "{t}");
    }
}
