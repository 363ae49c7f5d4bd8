//! The extraction benchmark: stories with gold graphs, run through the engine,
//! scored.
//!
//! ```no_run
//! # #![recursion_limit = "256"]
//! # async fn run(engine: gralkor::graph::Engine) -> gralkor_eval::Result<()> {
//! use gralkor_eval::extraction::{self, load_stories, shipped_stories_dir};
//!
//! let stories = load_stories(&shipped_stories_dir())?;
//! let embedder = engine.embedder().expect("an embedder").clone();
//! let report = extraction::run_all(
//!     &stories, |_| engine.clone(), embedder.as_ref(), "configured", "eval:extraction",
//! ).await?;
//! println!("{}", report.table());
//! # Ok(()) }
//! ```

pub mod measured;
pub mod models;
pub mod run;
pub mod score;
pub mod story;

use gralkor::graph::Engine;
use gralkor::llm::Embedder;
use serde::Serialize;

pub use measured::{MeasuredModel, StepCalls};
pub use models::{Script, scripted_model};
pub use run::{EpisodeCost, StoryRun, graph_name, run_story, run_story_observed};
pub use score::{
    Counts, FACT_SIMILARITY, Scores, Share, StoryScore, TIME_TOLERANCE_DAYS, score_story,
};
pub use story::{
    Gold, GoldEntity, GoldFact, GoldInvalidation, Story, StoryEpisode, load_stories,
    shipped_stories_dir,
};

use crate::Result;
use crate::report::{pct, table};

/// The stories named in `only` (all of them when `only` is empty), in their order.
/// A name no story has is an error naming the stories there are.
///
/// ```
/// use gralkor_eval::extraction::{load_stories, select_stories, shipped_stories_dir};
/// let stories = load_stories(&shipped_stories_dir()).unwrap();
/// assert_eq!(select_stories(stories.clone(), &["career"]).unwrap().len(), 1);
/// let err = select_stories(stories, &["01-career"]).unwrap_err().to_string();
/// assert!(err.contains("no story is named `01-career`"), "{err}");
/// assert!(err.contains("career"), "{err}");
/// ```
pub fn select_stories(stories: Vec<Story>, only: &[&str]) -> Result<Vec<Story>> {
    if only.is_empty() {
        return Ok(stories);
    }
    if let Some(missing) = only
        .iter()
        .find(|name| !stories.iter().any(|s| s.name == **name))
    {
        let names: Vec<&str> = stories.iter().map(|s| s.name.as_str()).collect();
        return Err(crate::EvalError::data(
            "<command line>",
            "--story",
            format!(
                "no story is named `{missing}`; the stories are: {}",
                names.join(", ")
            ),
        ));
    }
    Ok(stories
        .into_iter()
        .filter(|s| only.contains(&s.name.as_str()))
        .collect())
}

/// The report of a run over several stories.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Which model answered (`perfect`, `wrong`, or the provider and model).
    pub model: String,
    /// One entry per story, in order.
    pub stories: Vec<StoryScore>,
    /// Every story's measures added up (micro-averaged).
    pub total: Scores,
}

/// Runs every story (each in its own graph, [`graph_name`]`(graph_prefix, story)`,
/// cleared before and after) through the engine `engine_for` gives it, and scores it
/// with `embedder`; `model` names the model in the report.
pub async fn run_all(
    stories: &[Story],
    engine_for: impl Fn(&Story) -> Engine,
    embedder: &dyn Embedder,
    model: &str,
    graph_prefix: &str,
) -> Result<Report> {
    let mut scored = Vec::with_capacity(stories.len());
    let mut total = Scores::default();
    for story in stories {
        let engine = engine_for(story);
        let graph = graph_name(graph_prefix, story);
        let run = run_story(&engine, &graph, story).await?;
        let s = score_story(story, &run, embedder).await?;
        engine.clear(&graph).await?;
        total.add(&s.scores);
        scored.push(s);
    }
    Ok(Report {
        model: model.to_owned(),
        stories: scored,
        total,
    })
}

/// `x` per episode of `s`, one decimal; `n/a` when no episode ran.
pub(crate) fn per_episode(s: &Scores, x: f64) -> String {
    if s.episodes == 0 {
        "n/a".to_owned()
    } else {
        format!("{:.1}", x / s.episodes as f64)
    }
}

fn row(name: &str, s: &Scores) -> Vec<String> {
    let per = |x: f64| per_episode(s, x);
    vec![
        name.to_owned(),
        s.episodes.to_string(),
        s.failed_episodes.to_string(),
        pct(s.entities.measured_precision()),
        pct(s.entities.measured_recall()),
        pct(s.entities.measured_f1()),
        s.duplicate_entities.to_string(),
        pct(s.types.value()),
        pct(s.facts.measured_precision()),
        pct(s.facts.measured_recall()),
        pct(s.facts.measured_f1()),
        pct(s.times.value()),
        pct(s.invalidations.value()),
        s.mean_invalidation_error_days()
            .map_or_else(|| "n/a".into(), |d| format!("{d:.1}")),
        pct(s.attribution.value()),
        pct(s.attributes.value()),
        per(s.llm_calls as f64),
        per(s.tokens as f64),
        per(s.wall_ms),
    ]
}

impl Report {
    /// The report as a table: one row per story and a total row (`failed`: episodes
    /// whose ingestion failed, with their errors in the JSON report). Percentages,
    /// `n/a` where the denominator is empty (never 100);
    /// `inv err d` is the mean timing error of the right invalidations in days;
    /// the last three columns are per episode.
    pub fn table(&self) -> String {
        let header = [
            "story",
            "eps",
            "failed",
            "ent P",
            "ent R",
            "ent F1",
            "dups",
            "types",
            "fact P",
            "fact R",
            "fact F1",
            "times",
            "inval",
            "inv err d",
            "attrib",
            "attrs",
            "calls/ep",
            "tokens/ep",
            "ms/ep",
        ];
        let mut rows: Vec<Vec<String>> = self
            .stories
            .iter()
            .map(|s| row(&s.story, &s.scores))
            .collect();
        rows.push(row("TOTAL", &self.total));
        format!(
            "extraction quality — model: {}\n{}",
            self.model,
            table(&header, &rows)
        )
    }
}
