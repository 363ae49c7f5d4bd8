//! Auto-recall, the OpenClaw-style `before_turn` hook: before each turn, search memory
//! for the user's prompt and hand back a memory block to inject into the context.
//!
//! * Configured per agent ([`AutoRecall`]); off entirely with `enabled = false`.
//! * Prompts shorter than [`AutoRecall::min_prompt_chars`] (default 5, counted in
//!   characters after trimming) make no search and inject nothing.
//! * Long-term results: a fact search of every accessible Destination except the
//!   session Destination, at most [`AutoRecall::long_term_results`] (default 5).
//! * Session results: when a session id exists and a
//!   [`session_destination`](AutoRecall::session_destination) is configured (a
//!   Destination holding the current conversation's memories, like OpenClaw's
//!   session groups), a second search of it, at most
//!   [`AutoRecall::session_results`] (default 3), run concurrently with the first.
//!   Session facts already among the long-term ones (same fact uuid or same text) are
//!   dropped.
//! * The block is recall's untrusted block ([`render_block`]): long-term facts first,
//!   then session facts. Transcripts drop such blocks before they are stored, so
//!   recalled memory never comes back in as new memory.
//! * Both searches share the recall deadline ([`AutoRecall::deadline`], default 12 s):
//!   an expired one is [`Error::RecallDeadlineExpired`](crate::Error::RecallDeadlineExpired);
//!   a harness usually goes ahead without memory then.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use super::recall::{DEFAULT_RECALL_DEADLINE, RecallOptions, render_block, search_facts};
use crate::client::{Client, OperatorId, SearchResult};
use crate::storage::MAX_RESULTS_LIMIT;
use crate::{Error, Result};

/// Auto-recall's configuration for one agent.
///
/// ```
/// use gralkor::agent::hooks::AutoRecall;
///
/// let config = AutoRecall::new().session_destination("session-notes").long_term_results(8);
/// config.validate()?;
/// assert!(AutoRecall::new().long_term_results(0).validate().is_err());
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AutoRecall {
    /// Whether `before_turn` searches at all (default true).
    pub enabled: bool,
    /// The shortest prompt, in characters after trimming, that is searched (default 5).
    pub min_prompt_chars: usize,
    /// Long-term facts at most (1–200, default 5).
    pub long_term_results: usize,
    /// Session facts at most (0–200, default 3; 0 searches no session memory).
    pub session_results: usize,
    /// The Destination searched as session memory (default none).
    pub session_destination: Option<String>,
    /// The deadline of the searches (positive, default 12 s).
    pub deadline: Duration,
}

impl Default for AutoRecall {
    fn default() -> Self {
        AutoRecall {
            enabled: true,
            min_prompt_chars: 5,
            long_term_results: 5,
            session_results: 3,
            session_destination: None,
            deadline: DEFAULT_RECALL_DEADLINE,
        }
    }
}

impl AutoRecall {
    /// The defaults.
    pub fn new() -> AutoRecall {
        AutoRecall::default()
    }

    /// Auto-recall off: `before_turn` always answers `None`.
    pub fn disabled() -> AutoRecall {
        AutoRecall {
            enabled: false,
            ..AutoRecall::default()
        }
    }

    /// The shortest prompt searched.
    pub fn min_prompt_chars(mut self, n: usize) -> Self {
        self.min_prompt_chars = n;
        self
    }

    /// Long-term facts at most.
    pub fn long_term_results(mut self, n: usize) -> Self {
        self.long_term_results = n;
        self
    }

    /// Session facts at most.
    pub fn session_results(mut self, n: usize) -> Self {
        self.session_results = n;
        self
    }

    /// The session Destination.
    pub fn session_destination(mut self, name: impl Into<String>) -> Self {
        self.session_destination = Some(name.into());
        self
    }

    /// The deadline.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Checks the limits and the deadline, naming the field.
    pub fn validate(&self) -> Result<()> {
        if self.deadline.is_zero() {
            return Err(Error::config("auto_recall.deadline", "must be positive"));
        }
        if self.long_term_results == 0 || self.long_term_results > MAX_RESULTS_LIMIT {
            return Err(Error::config(
                "auto_recall.long_term_results",
                format!("must be between 1 and {MAX_RESULTS_LIMIT}"),
            ));
        }
        if self.session_results > MAX_RESULTS_LIMIT {
            return Err(Error::config(
                "auto_recall.session_results",
                format!("must be between 0 and {MAX_RESULTS_LIMIT}"),
            ));
        }
        if matches!(&self.session_destination, Some(d) if d.trim().is_empty()) {
            return Err(Error::config(
                "auto_recall.session_destination",
                "must not be blank when set",
            ));
        }
        Ok(())
    }
}

/// One agent's auto-recall: the client, the operator, the agent's name and its
/// [`AutoRecall`] configuration.
#[derive(Clone)]
pub struct AgentRecall {
    client: Arc<dyn Client>,
    operator: OperatorId,
    agent_name: String,
    config: AutoRecall,
}

impl std::fmt::Debug for AgentRecall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRecall")
            .field("operator", &self.operator)
            .field("agent_name", &self.agent_name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl AgentRecall {
    /// Auto-recall for `agent_name` (non-blank) of `operator`; the configuration is
    /// validated now.
    pub fn new(
        client: Arc<dyn Client>,
        operator: impl Into<OperatorId>,
        agent_name: impl Into<String>,
        config: AutoRecall,
    ) -> Result<AgentRecall> {
        let agent_name = agent_name.into();
        if agent_name.trim().is_empty() {
            return Err(Error::invalid("agent_name", "must be a non-blank string"));
        }
        config.validate()?;
        Ok(AgentRecall {
            client,
            operator: operator.into(),
            agent_name,
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &AutoRecall {
        &self.config
    }

    /// The memory block to inject before a turn with this prompt, or `None` when
    /// auto-recall is off or the prompt is too short (no search then). `session` is
    /// the harness's session id, if one exists yet.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::sync::Arc;
    /// use gralkor::agent::hooks::{AgentRecall, AutoRecall};
    /// use gralkor::client::{Client, Content, InMemoryClient, Ingest, OperatorId};
    ///
    /// let client = Arc::new(InMemoryClient::new());
    /// let op = OperatorId::new("op")?;
    /// client.ingest(&Ingest::new("t1", &op, "personal-chat",
    ///     Content::conversation("Ada prefers tea"))).await?;
    /// let hooks = AgentRecall::new(client, op, "Susu", AutoRecall::new())?;
    /// assert_eq!(hooks.before_turn(Some("s-1"), "hi").await?, None);
    /// let block = hooks.before_turn(Some("s-1"), "does Ada like tea?").await?.unwrap();
    /// assert!(block.contains("- Ada prefers tea"));
    /// # Ok(()) }
    /// ```
    pub async fn before_turn(&self, session: Option<&str>, prompt: &str) -> Result<Option<String>> {
        if !self.config.enabled || prompt.trim().chars().count() < self.config.min_prompt_chars {
            return Ok(None);
        }
        let query = prompt.trim();
        let client = self.client.as_ref();
        let session_dest = self
            .config
            .session_destination
            .as_ref()
            .filter(|_| session.is_some() && self.config.session_results > 0);
        let long_term_dests: Vec<String> = match &self.config.session_destination {
            Some(s) => client
                .runtime()
                .snapshot()
                .destinations()
                .iter()
                .map(|d| d.name().to_string())
                .filter(|d| d != s)
                .collect(),
            None => Vec::new(),
        };
        let long_options = RecallOptions::new()
            .max_results(self.config.long_term_results)
            .deadline(self.config.deadline);
        let span = tracing::info_span!(
            "gralkor.before_turn",
            session = session.unwrap_or("-"),
            operator = %self.operator,
            agent = %self.agent_name,
        );
        let searches = async {
            let long_term = search_facts(
                client,
                &self.operator,
                &long_term_dests,
                query,
                &long_options,
            );
            match session_dest {
                Some(dest) => {
                    let options = RecallOptions::new()
                        .max_results(self.config.session_results)
                        .deadline(self.config.deadline);
                    let dests = [dest.clone()];
                    let session_search =
                        search_facts(client, &self.operator, &dests, query, &options);
                    let (l, s) = tokio::join!(long_term, session_search);
                    Ok::<_, Error>((l?.0, s?.0))
                }
                None => Ok((long_term.await?.0, Vec::new())),
            }
        };
        let (long_term, session_facts) = searches.instrument(span).await?;
        let facts = dedup(long_term, session_facts);
        tracing::info!(facts = facts.len(), "auto-recall");
        Ok(Some(render_block(&facts)))
    }
}

/// Long-term facts, then the session facts not already among them (by uuid or text).
fn dedup(long_term: Vec<SearchResult>, session: Vec<SearchResult>) -> Vec<SearchResult> {
    let mut uuids = HashSet::new();
    let mut texts = HashSet::new();
    for f in long_term.iter().filter_map(|r| r.hit.as_fact()) {
        uuids.insert(f.uuid);
        texts.insert(f.fact.trim().to_string());
    }
    let mut out = long_term;
    for r in session {
        if let Some(f) = r.hit.as_fact() {
            if uuids.contains(&f.uuid) || texts.contains(f.fact.trim()) {
                continue;
            }
            uuids.insert(f.uuid);
            texts.insert(f.fact.trim().to_string());
        }
        out.push(r);
    }
    out
}
