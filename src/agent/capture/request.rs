//! What a caller hands the buffer: a turn with its session's binding and route, and
//! the buffer's configuration.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::super::transcript::MemoryFilter;
use super::super::turn::Turn;
use crate::access::Subject;
use crate::destination::PERSONAL;
use crate::storage::OperatorId;

/// The source description of every captured write.
pub(crate) const CAPTURED: &str = "captured";

/// The buffer's retry delays by default: 1 s, 2 s, 4 s.
pub(crate) const DEFAULT_RETRY_DELAYS: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
];

/// Where a session's turns go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureRoute {
    /// Written directly to this registered Destination (default `personal`).
    Direct(String),
    /// Ingested through each of these registered appending Lenses (distinct, in
    /// first-selection order).
    Lenses(Vec<String>),
}

impl Default for CaptureRoute {
    fn default() -> Self {
        CaptureRoute::Direct(PERSONAL.to_string())
    }
}

/// One turn to capture, with the session's binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Capture {
    /// The harness's session id (never minted by gralkor).
    pub session_id: String,
    /// The operator.
    pub operator_id: OperatorId,
    /// The agent's name in the transcript.
    pub agent_name: String,
    /// The human's name in the transcript.
    pub human_name: String,
    /// Where it goes (default: direct to `personal`).
    #[serde(default)]
    pub route: CaptureRoute,
    /// The turn.
    pub turn: Turn,
    /// Who the session writes as (required when the client has an authorizer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
    /// Extra extraction instructions for this turn's writes (the seeds'
    /// `customInstructions`; no NUL); default: the buffer's
    /// ([`CaptureConfig::custom_instructions`]), else a Lens route's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_instructions: Option<String>,
}

impl Capture {
    /// A turn of `session_id`, direct to the operator's `personal` graph.
    pub fn new(
        session_id: impl Into<String>,
        operator: impl Into<OperatorId>,
        agent_name: impl Into<String>,
        human_name: impl Into<String>,
        turn: Turn,
    ) -> Capture {
        Capture {
            session_id: session_id.into(),
            operator_id: operator.into(),
            agent_name: agent_name.into(),
            human_name: human_name.into(),
            route: CaptureRoute::default(),
            turn,
            subject: None,
            custom_instructions: None,
        }
    }

    /// Extracts this turn's writes with these extra instructions.
    pub fn custom_instructions(mut self, instructions: impl Into<String>) -> Capture {
        self.custom_instructions = Some(instructions.into());
        self
    }

    /// Written as `subject` (for a client with an authorizer: `contribute` is checked
    /// when the turn is appended and again when it is written, and each written
    /// episode's fragment names the subject as `shared_by`).
    pub fn subject(mut self, subject: Subject) -> Capture {
        self.subject = Some(subject);
        self
    }

    /// Written as `subject`, if any.
    pub fn subject_opt(mut self, subject: Option<Subject>) -> Capture {
        self.subject = subject;
        self
    }

    /// Direct to another Destination.
    pub fn direct(mut self, destination: impl Into<String>) -> Capture {
        self.route = CaptureRoute::Direct(destination.into());
        self
    }

    /// Along `route`.
    pub fn route(mut self, route: CaptureRoute) -> Capture {
        self.route = route;
        self
    }

    /// Through these Lenses.
    pub fn lenses<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Capture {
        self.route = CaptureRoute::Lenses(names.into_iter().map(Into::into).collect());
        self
    }
}

/// How a buffer retries and what it leaves out.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CaptureConfig {
    /// The delay before each retry (`DEFAULT_RETRY_DELAYS`); their number is the
    /// number of retries.
    pub retry_delays: Vec<Duration>,
    /// What is dropped from a turn before it is stored ([`MemoryFilter::new`]).
    pub filter: MemoryFilter,
    /// How long the client's [`shutdown`](crate::Client::shutdown) waits for this
    /// buffer's drain (`DEFAULT_SHUTDOWN_TIMEOUT`); what is not written by then stays
    /// pending in the store for the next buffer.
    pub shutdown_timeout: Duration,
    /// Extra extraction instructions for every captured write whose turn names none
    /// (the seeds' `customInstructions` setting; [`CaptureConfig::OPENCLAW_CUSTOM_INSTRUCTIONS`] is
    /// the OpenClaw plugin's default text); `None`: a Lens route's own, else none.
    pub custom_instructions: Option<String>,
}

/// How long a client's shutdown waits for a buffer's drain by default: 30 s.
pub(crate) const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

impl Default for CaptureConfig {
    fn default() -> Self {
        CaptureConfig::new()
    }
}

impl CaptureConfig {
    /// The OpenClaw plugin's default `customInstructions` (its seed's text), for
    /// [`CaptureConfig::custom_instructions`] and
    /// [`MemoryAdd::custom_instructions`](crate::client::MemoryAdd::custom_instructions).
    pub const OPENCLAW_CUSTOM_INSTRUCTIONS: &str = "Extract key facts about:
- Identity: names, roles, titles, contact info
- Preferences: likes, dislikes, preferred tools/methods
- Goals: objectives, plans, deadlines
- Relationships: connections between people, teams, organizations
- Decisions: choices made, reasoning, outcomes
- Routines: habits, schedules, recurring patterns
Do not extract: greetings, filler, meta-commentary about the conversation itself.";

    /// Retries after 1 s, 2 s, 4 s; the recall block and `memory_search` results left
    /// out.
    pub fn new() -> CaptureConfig {
        CaptureConfig {
            retry_delays: DEFAULT_RETRY_DELAYS.to_vec(),
            filter: MemoryFilter::new(),
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            custom_instructions: None,
        }
    }

    /// Extracts every captured write whose turn names no instructions with these
    /// (checked when the buffer is made: no NUL).
    pub fn custom_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.custom_instructions = Some(instructions.into());
        self
    }

    /// Another bound on the drain the client's shutdown runs (validated positive when
    /// the buffer is made).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Other retry delays (none: no retries).
    pub fn retry_delays(mut self, delays: impl IntoIterator<Item = Duration>) -> Self {
        self.retry_delays = delays.into_iter().collect();
        self
    }

    /// Another filter (for an auto-recall block of your own).
    pub fn filter(mut self, filter: MemoryFilter) -> Self {
        self.filter = filter;
        self
    }
}
