//! Ingesting a story through the real engine and reading the graph back.

use std::time::Instant;

use gralkor::graph::{AddEpisode, Engine, EntityEdge, EntityNode};
use serde::Serialize;

use super::story::Story;
use crate::Result;

/// What one episode cost.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct EpisodeCost {
    /// The episode's id.
    pub episode: String,
    /// Language-model calls.
    pub llm_calls: u32,
    /// Prompt tokens (as the provider reports them; estimated by the scripted models).
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Embedding requests.
    pub embedding_calls: u32,
    /// Wall time of the ingestion, in milliseconds.
    pub wall_ms: f64,
    /// The error, when the episode failed (the run goes on).
    pub error: Option<String>,
}

/// A story's run: the cost per episode and the graph it left.
#[derive(Debug, Clone)]
pub struct StoryRun {
    /// The story's name.
    pub story: String,
    /// One entry per episode, in order.
    pub episodes: Vec<EpisodeCost>,
    /// Every entity node of the graph.
    pub entities: Vec<EntityNode>,
    /// Every fact of the graph.
    pub facts: Vec<EntityEdge>,
}

/// The graph a story runs in: `<prefix>:<story name>` (the binary's prefix is
/// `eval:extraction`; concurrent runs on one server need different prefixes).
pub fn graph_name(prefix: &str, story: &Story) -> String {
    format!("{prefix}:{}", story.name)
}

/// Clears `graph`, ingests the story's episodes one at a time in order through
/// `engine` (with the story's ontology), and reads every entity and fact back. An
/// episode that fails is recorded with its error and the run goes on.
///
/// Progress goes to stderr, one line per episode; [`run_story_observed`] hands it to
/// a callback instead.
pub async fn run_story(engine: &Engine, graph: &str, story: &Story) -> Result<StoryRun> {
    run_story_observed(engine, graph, story, &mut |done, cost| {
        // Progress on stderr: a weak local model can take minutes per episode.
        eprintln!(
            "{}: episode {}/{} ({}) {} in {:.1} s",
            story.name,
            done,
            story.episodes.len(),
            cost.episode,
            if cost.error.is_none() {
                "done"
            } else {
                "failed"
            },
            cost.wall_ms / 1e3
        );
    })
    .await
}

/// [`run_story`], calling `on_episode(number, cost)` after each episode (numbered from
/// 1) instead of printing.
pub async fn run_story_observed(
    engine: &Engine,
    graph: &str,
    story: &Story,
    on_episode: &mut (dyn FnMut(usize, &EpisodeCost) + Send),
) -> Result<StoryRun> {
    engine.clear(graph).await?;
    let mut episodes = Vec::with_capacity(story.episodes.len());
    for e in &story.episodes {
        let mut request = AddEpisode::new(e.text(), e.source, e.reference_time)
            .source_description(e.source_description.clone());
        if let Some(o) = &story.ontology {
            request = request.ontology(o.clone());
        }
        let started = Instant::now();
        let outcome = engine.add_episode(graph, request).await;
        let wall_ms = started.elapsed().as_secs_f64() * 1e3;
        episodes.push(match outcome {
            Ok(o) => EpisodeCost {
                episode: e.id.clone(),
                llm_calls: o.usage.llm_calls,
                prompt_tokens: o.usage.tokens.prompt_tokens,
                completion_tokens: o.usage.tokens.completion_tokens,
                embedding_calls: o.usage.embedding_calls,
                wall_ms,
                error: None,
            },
            Err(err) => EpisodeCost {
                episode: e.id.clone(),
                wall_ms,
                error: Some(err.to_string()),
                ..EpisodeCost::default()
            },
        });
        on_episode(episodes.len(), episodes.last().expect("just pushed"));
    }
    let (mut entities, mut facts) = engine.contents(graph).await?;
    // A fixed order, whatever the database returned.
    entities.sort_by(|a, b| (&a.name, a.created_at).cmp(&(&b.name, b.created_at)));
    facts.sort_by(|a, b| (&a.fact, a.valid_at).cmp(&(&b.fact, b.valid_at)));
    Ok(StoryRun {
        story: story.name.clone(),
        episodes,
        entities,
        facts,
    })
}
