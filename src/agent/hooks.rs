//! The OpenClaw-style hooks. Auto-recall, `before_turn` ([`AgentRecall`]): before each
//! turn, search memory for the user's prompt and hand back a memory block to inject
//! into the context. Auto-capture, `after_turn` ([`AgentCapture`]): after it, buffer
//! the turn's last messages for capture.
//!
//! * Configured per agent ([`AutoRecall`]); off entirely with `enabled = false`.
//! * Prompts shorter than [`AutoRecall::min_prompt_chars`] (default 5, counted in
//!   characters after trimming) make no search and inject nothing.
//! * Long-term results: a fact search of every accessible Destination except the
//!   session Destination, at most [`AutoRecall::long_term_results`] (default 5).
//! * Session results: when a session id exists and either session-group mode is on
//!   ([`AutoRecall::session_groups`]: the session's own group `session-<session id>`,
//!   [`Destination::session_group`](crate::destination::Destination::session_group),
//!   as OpenClaw's session groups) or a fixed
//!   [`session_destination`](AutoRecall::session_destination) is configured, a
//!   second search of it, at most [`AutoRecall::session_results`] (default 3), run
//!   concurrently with the first. Session facts already among the long-term ones
//!   (same fact uuid or same text) are dropped.
//! * The block is recall's untrusted block ([`render_block`]), named
//!   [`AutoRecall::block_name`] (default `gralkor-memory`; `relevant-memories` as in
//!   the OpenClaw plugin): long-term facts first, then session facts. Transcripts
//!   drop both names' blocks before they are stored
//!   ([`MemoryFilter`](super::transcript::MemoryFilter)), so recalled memory never
//!   comes back in as new memory.
//!
//! Auto-capture in session-group mode ([`AutoCapture::session_groups`]) writes each
//! session's turns to its session group instead of the hook's route; what should
//! outlive the conversation is promoted by writing it to long-term memory
//! (`memory_store` with `longTerm`, `memory_add`).
//! * Both searches share the recall deadline ([`AutoRecall::deadline`], default 12 s):
//!   an expired one is [`Error::RecallDeadlineExpired`];
//!   a harness usually goes ahead without memory then.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

#[cfg(doc)]
use super::recall::render_block;
use super::recall::{
    DEFAULT_BLOCK_NAME, DEFAULT_RECALL_DEADLINE, RecallOptions, check_block_name,
    render_block_named, search_facts,
};
use crate::access::Subject;
use crate::client::{Client, OperatorId, SearchResult};
use crate::storage::MAX_RESULTS_LIMIT;
use crate::{Error, Result};

/// Auto-recall's configuration for one agent.
///
/// ```
/// use gralkor::agent::hooks::AutoRecall;
///
/// let config = AutoRecall::new().session_destination("conversation-notes").long_term_results(8);
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
    /// Session-group mode: session memory is the session's own group
    /// `session-<session id>` (default off; not with `session_destination`).
    pub session_groups: bool,
    /// The memory block's tag name (default `gralkor-memory`, jido's;
    /// `relevant-memories` is the OpenClaw plugin's).
    pub block_name: String,
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
            session_groups: false,
            block_name: DEFAULT_BLOCK_NAME.to_string(),
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

    /// Session-group mode on or off (see [`AutoRecall::session_groups`](AutoRecall#structfield.session_groups)).
    pub fn session_groups(mut self, on: bool) -> Self {
        self.session_groups = on;
        self
    }

    /// The memory block's tag name.
    ///
    /// ```
    /// use gralkor::agent::hooks::AutoRecall;
    ///
    /// AutoRecall::new().block_name("relevant-memories").validate()?;
    /// let err = AutoRecall::new().block_name("<x>").validate().unwrap_err();
    /// assert!(err.to_string().contains("auto_recall.block_name"), "{err}");
    /// # Ok::<(), gralkor::Error>(())
    /// ```
    pub fn block_name(mut self, name: impl Into<String>) -> Self {
        self.block_name = name.into();
        self
    }

    /// The OpenClaw plugin's settings: session-group mode and `<relevant-memories>`
    /// blocks (5 long-term and 3 session facts, as the defaults).
    pub fn openclaw() -> AutoRecall {
        AutoRecall::new()
            .session_groups(true)
            .block_name(super::recall::OPENCLAW_BLOCK_NAME)
    }

    /// The deadline.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Checks the limits, the block name and the deadline, naming the field.
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
        if self.session_groups && self.session_destination.is_some() {
            return Err(Error::config(
                "auto_recall.session_groups",
                "cannot be combined with `session_destination`: session memory is either the session's own group or one fixed Destination",
            ));
        }
        check_block_name("auto_recall.block_name", &self.block_name)?;
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
    subject: Option<Subject>,
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
            subject: None,
        })
    }

    /// Searches as `subject`, for a client with an authorizer (which refuses a
    /// search without one).
    pub fn subject(mut self, subject: Subject) -> AgentRecall {
        self.subject = Some(subject);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &AutoRecall {
        &self.config
    }

    fn options(&self, max_results: usize) -> RecallOptions {
        let options = RecallOptions::new()
            .max_results(max_results)
            .deadline(self.config.deadline);
        match &self.subject {
            Some(s) => options.subject(s.clone()),
            None => options,
        }
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
        let session_dest: Option<String> = match session {
            Some(_) if self.config.session_results == 0 => None,
            Some(id) if self.config.session_groups => Some(
                crate::destination::Destination::session_group(id)?
                    .name()
                    .to_string(),
            ),
            Some(_) => self.config.session_destination.clone(),
            None => None,
        };
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
        let long_options = self.options(self.config.long_term_results);
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
                    let options = self.options(self.config.session_results);
                    let dests = [dest];
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
        Ok(Some(render_block_named(&self.config.block_name, &facts)))
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

/// The messages [`AgentCapture::after_turn`] captures by default: the last 10.
pub(crate) const DEFAULT_CAPTURE_MESSAGES: usize = 10;
/// The most messages one `after_turn` may capture.
pub(crate) const MAX_CAPTURE_MESSAGES: usize = 50;

/// Auto-capture's configuration for one agent: the OpenClaw-style `after_turn` hook.
///
/// ```
/// use gralkor::agent::hooks::AutoCapture;
///
/// AutoCapture::new().last_messages(20).validate()?;
/// assert!(AutoCapture::new().last_messages(0).validate().is_err());
/// assert!(AutoCapture::new().last_messages(51).validate().is_err());
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AutoCapture {
    /// Whether `after_turn` captures anything (default true).
    pub enabled: bool,
    /// The last messages of the turn captured, 1 to `MAX_CAPTURE_MESSAGES`
    /// (default `DEFAULT_CAPTURE_MESSAGES`).
    pub last_messages: usize,
    /// Messages whose text is shorter than this, in characters after trimming, are
    /// skipped (default 5) — except an assistant message that calls tools, which the
    /// tool results after it refer to.
    pub min_message_chars: usize,
    /// Session-group mode: each session's turns are written to its own group
    /// `session-<session id>` instead of the hook's route (default off).
    pub session_groups: bool,
}

impl Default for AutoCapture {
    fn default() -> Self {
        AutoCapture {
            enabled: true,
            last_messages: DEFAULT_CAPTURE_MESSAGES,
            min_message_chars: 5,
            session_groups: false,
        }
    }
}

impl AutoCapture {
    /// The defaults: on, the last 10 messages, skipping those under 5 characters.
    pub fn new() -> AutoCapture {
        AutoCapture::default()
    }

    /// Captures nothing.
    pub fn disabled() -> AutoCapture {
        AutoCapture {
            enabled: false,
            ..AutoCapture::default()
        }
    }

    /// Sets [`last_messages`](AutoCapture::last_messages).
    pub fn last_messages(mut self, n: usize) -> Self {
        self.last_messages = n;
        self
    }

    /// Sets [`min_message_chars`](AutoCapture::min_message_chars).
    pub fn min_message_chars(mut self, n: usize) -> Self {
        self.min_message_chars = n;
        self
    }

    /// Sets [`session_groups`](AutoCapture#structfield.session_groups).
    pub fn session_groups(mut self, on: bool) -> Self {
        self.session_groups = on;
        self
    }

    /// Checks the configuration, naming the field.
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_CAPTURE_MESSAGES).contains(&self.last_messages) {
            return Err(Error::invalid(
                "auto_capture.last_messages",
                format!("must be between 1 and {MAX_CAPTURE_MESSAGES}"),
            ));
        }
        Ok(())
    }
}

/// The `after_turn` hook of one agent: the turn's last messages, captured into a
/// [`CaptureBuffer`](super::capture::CaptureBuffer) under the agent's binding
/// (operator, agent and human names, route). Injected memory blocks are skipped here,
/// and the buffer's own filter drops any that remain inside a message; nothing is
/// written until the buffer is flushed.
///
/// The session id is the harness's and never minted: before one exists, capture is
/// skipped with a warning naming the operator (memory search works all the same).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
/// use gralkor::agent::capture::{CaptureBuffer, CaptureConfig, CaptureRoute};
/// use gralkor::agent::hooks::{AgentCapture, AutoCapture};
/// use gralkor::client::{InMemoryClient, OperatorId};
/// use serde_json::json;
///
/// let client = InMemoryClient::new();
/// let buffer = CaptureBuffer::in_memory(&client, CaptureConfig::new()).await?;
/// let hook = AgentCapture::new(buffer.clone(), OperatorId::new("op")?, "Susu", "Ada",
///     CaptureRoute::default(), AutoCapture::new())?;
/// let messages = [json!({"role": "user", "content": "I moved to Lisbon."}),
///                 json!({"role": "assistant", "content": "Noted: Lisbon."})];
/// assert!(hook.after_turn(Some("thread-7"), &messages).await?);
/// assert!(!hook.after_turn(None, &messages).await?); // no session yet: skipped
/// assert_eq!(buffer.pending("thread-7").await.len(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct AgentCapture {
    buffer: super::capture::CaptureBuffer,
    operator: OperatorId,
    agent_name: String,
    human_name: String,
    route: super::capture::CaptureRoute,
    config: AutoCapture,
    filter: super::transcript::MemoryFilter,
    subject: Option<Subject>,
    /// The sessions this hook (and its clones) buffered turns of, for
    /// [`AgentCapture::end_of_agent`].
    sessions: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
}

impl AgentCapture {
    /// The hook for `operator`'s agent `agent_name` talking with `human_name`,
    /// capturing along `route`. The names are checked now (non-blank).
    pub fn new(
        buffer: super::capture::CaptureBuffer,
        operator: impl Into<OperatorId>,
        agent_name: impl Into<String>,
        human_name: impl Into<String>,
        route: super::capture::CaptureRoute,
        config: AutoCapture,
    ) -> Result<AgentCapture> {
        config.validate()?;
        let (agent_name, human_name) = (agent_name.into(), human_name.into());
        super::transcript::check_name("agent_name", &agent_name)?;
        super::transcript::check_name("human_name", &human_name)?;
        Ok(AgentCapture {
            buffer,
            operator: operator.into(),
            agent_name,
            human_name,
            route,
            config,
            filter: super::transcript::MemoryFilter::new(),
            subject: None,
            sessions: Default::default(),
        })
    }

    /// Captures as `subject`, for a client with an authorizer (which refuses a
    /// capture without one, naming `subject`).
    pub fn subject(mut self, subject: Subject) -> AgentCapture {
        self.subject = Some(subject);
        self
    }

    /// Who it captures as, if set.
    pub fn subject_of(&self) -> Option<&Subject> {
        self.subject.as_ref()
    }

    /// The same hook skipping the blocks `filter` knows (an auto-recall block of your
    /// own besides `<gralkor-memory …>`).
    pub fn filter(mut self, filter: super::transcript::MemoryFilter) -> AgentCapture {
        self.filter = filter;
        self
    }

    /// Captures the last [`AutoCapture::last_messages`] of `messages` (OpenAI-style
    /// chat messages, as [`Turn::from_chat`](super::turn::Turn::from_chat) reads them)
    /// as one turn of `session`, skipping short messages and injected memory blocks.
    /// Returns whether a turn was buffered: not when disabled, without a session id,
    /// or when nothing is left.
    pub async fn after_turn(
        &self,
        session: Option<&str>,
        messages: &[serde_json::Value],
    ) -> Result<bool> {
        if !self.config.enabled {
            return Ok(false);
        }
        let Some(session) = session else {
            tracing::warn!(
                operator = %self.operator,
                "no session id yet: this turn is not captured (memory search still works)"
            );
            return Ok(false);
        };
        let start = messages.len().saturating_sub(self.config.last_messages);
        let kept: Vec<serde_json::Value> = messages[start..]
            .iter()
            .filter(|m| self.keeps(m))
            .cloned()
            .collect();
        let turn = super::turn::Turn::from_chat(&kept)?;
        if turn.is_empty() {
            return Ok(false);
        }
        let route = if self.config.session_groups {
            super::capture::CaptureRoute::Direct(
                crate::destination::Destination::session_group(session)?
                    .name()
                    .to_string(),
            )
        } else {
            self.route.clone()
        };
        self.buffer
            .append(
                super::capture::Capture::new(
                    session,
                    self.operator.clone(),
                    self.agent_name.clone(),
                    self.human_name.clone(),
                    turn,
                )
                .route(route)
                .subject_opt(self.subject.clone()),
            )
            .await?;
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session.to_string());
        Ok(true)
    }

    /// The agent-level lifecycle flush (OpenClaw's `agent_end`, a harness's
    /// end-of-agent hook): writes every session this hook buffered turns of and waits,
    /// each within `timeout` ([`CaptureBuffer::flush_and_await`](super::capture::CaptureBuffer::flush_and_await));
    /// the sessions are then forgotten by the hook. Every session is tried; the first
    /// failure is returned (a timed-out session's turns stay buffered).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> gralkor::Result<()> {
    /// use std::time::Duration;
    /// use gralkor::agent::capture::{CaptureBuffer, CaptureConfig, CaptureRoute};
    /// use gralkor::agent::hooks::{AgentCapture, AutoCapture};
    /// use gralkor::client::{Client, InMemoryClient, OperatorId, Search};
    /// use serde_json::json;
    ///
    /// let client = InMemoryClient::new();
    /// let buffer = CaptureBuffer::in_memory(&client, CaptureConfig::new()).await?;
    /// let op = OperatorId::new("op")?;
    /// let hook = AgentCapture::new(buffer.clone(), op.clone(), "Susu", "Ada",
    ///     CaptureRoute::default(), AutoCapture::new())?;
    /// for (session, text) in [("s-1", "I moved to Lisbon."), ("s-2", "I keep bees now.")] {
    ///     let messages = [json!({"role": "user", "content": text}),
    ///                     json!({"role": "assistant", "content": "Noted, thanks."})];
    ///     hook.after_turn(Some(session), &messages).await?;
    /// }
    /// hook.end_of_agent(Duration::from_secs(5)).await?;
    /// assert!(buffer.sessions().await.is_empty());
    /// assert_eq!(client.search(&Search::new(&op, "Lisbon bees")).await?.len(), 2);
    /// # Ok(()) }
    /// ```
    pub async fn end_of_agent(&self, timeout: std::time::Duration) -> Result<()> {
        let sessions =
            std::mem::take(&mut *self.sessions.lock().unwrap_or_else(|p| p.into_inner()));
        let span = tracing::info_span!("gralkor.agent.end_of_agent", sessions = sessions.len());
        let mut first = None;
        async {
            for session in &sessions {
                if let Err(e) = self.buffer.flush_and_await(session, timeout).await {
                    tracing::warn!(session = %session, error = %e, "end-of-agent flush failed");
                    first.get_or_insert(e);
                }
            }
        }
        .instrument(span)
        .await;
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Whether `message` is captured: not an injected block, and long enough (an
    /// assistant message calling tools always is).
    fn keeps(&self, message: &serde_json::Value) -> bool {
        let text = super::turn::content_text(message.get("content"));
        let text = text.trim();
        let calls_tools = message
            .get("tool_calls")
            .and_then(serde_json::Value::as_array)
            .is_some_and(|c| !c.is_empty());
        if calls_tools {
            return true;
        }
        !self.filter.is_block(text) && text.chars().count() >= self.config.min_message_chars
    }
}
