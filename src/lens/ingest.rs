//! The request an appending Lens takes and what its process wrote.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Result;
use crate::access::Subject;
use crate::graph::Timestamp;
use crate::storage::{Content, IngestCost, OperatorId};
use crate::{Error, storage};

/// Content sent through an appending Lens.
///
/// `id` is the caller's replay-safe id for this ingestion, one rule on every client:
/// sending the same request again (same id, Lens and operator) stores nothing twice;
/// the same id with different content, source kind, description or reference time is
/// [`Error::EpisodeConflict`](crate::Error::EpisodeConflict) naming the field, and
/// writes nothing. Validation happens before the Lens runs: an invalid request writes
/// nothing.
///
/// ```
/// use gralkor::client::{Content, Ingest, OperatorId, SourceKind};
///
/// let operator = OperatorId::new("operator-42")?;
/// let req = Ingest::new("planning-2026-08-28", &operator, "decisions",
///                       Content::conversation("Ada: We chose Friday."))
///     .source_description("release planning");
/// assert_eq!(req.content.kind(), SourceKind::Message);
/// let json = serde_json::to_value(&req).unwrap();
/// assert_eq!(json["operator_id"], "operator-42");
/// assert_eq!(serde_json::from_value::<Ingest>(json).unwrap(), req);
/// # Ok::<(), gralkor::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Ingest {
    /// The caller's id for this ingestion (non-blank, no NUL); replay-stable.
    pub id: String,
    /// The operator it is for.
    pub operator_id: OperatorId,
    /// The appending Lens.
    pub lens: String,
    /// What to remember.
    pub content: Content,
    /// The caller's description of the source (the Lens marker is appended).
    #[serde(default)]
    pub source_description: String,
    /// When it happened in the world (default: when it is written).
    #[serde(default)]
    pub reference_time: Option<Timestamp>,
    /// Who asks (required when the client has an authorizer; see
    /// [`MemoryClient::with_authorizer`](crate::client::MemoryClient::with_authorizer)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
    /// The people and agents it concerns: they may view it (with an authorizer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub involves: Vec<Subject>,
    /// The conversation session it came from: every episode it writes records it, so
    /// the session can be forgotten
    /// ([`Client::purge_session`](crate::client::Client::purge_session)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Extra extraction instructions for what this request writes (the seeds'
    /// `customInstructions`; no NUL); in place of the Lens's own
    /// ([`AppendingLens::custom_instructions`](crate::lens::AppendingLens::custom_instructions)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_instructions: Option<String>,
}

impl Ingest {
    /// Content for `lens`, for `operator`, under the caller's replay-stable `id`.
    pub fn new(
        id: impl Into<String>,
        operator: impl Into<OperatorId>,
        lens: impl Into<String>,
        content: Content,
    ) -> Ingest {
        Ingest {
            id: id.into(),
            operator_id: operator.into(),
            lens: lens.into(),
            content,
            source_description: String::new(),
            reference_time: None,
            subject: None,
            involves: Vec::new(),
            session_id: None,
            custom_instructions: None,
        }
    }

    /// Extracts what it writes with these extra instructions.
    pub fn custom_instructions(mut self, instructions: impl Into<String>) -> Ingest {
        self.custom_instructions = Some(instructions.into());
        self
    }

    /// The conversation session it came from.
    pub fn session(mut self, session_id: impl Into<String>) -> Ingest {
        self.session_id = Some(session_id.into());
        self
    }

    /// Who asks (required when the client has an authorizer).
    pub fn subject(mut self, subject: Subject) -> Ingest {
        self.subject = Some(subject);
        self
    }

    /// The people and agents it concerns.
    pub fn involves(mut self, subjects: impl IntoIterator<Item = Subject>) -> Ingest {
        self.involves.extend(subjects);
        self
    }

    /// The caller's description of the source.
    pub fn source_description(mut self, description: impl Into<String>) -> Ingest {
        self.source_description = description.into();
        self
    }

    /// When it happened in the world.
    pub fn reference_time(mut self, at: Timestamp) -> Ingest {
        self.reference_time = Some(at);
        self
    }

    /// Checks what the request holds by itself (id and content); the Lens and the
    /// description are checked against the runtime by the client.
    pub(crate) fn check(&self) -> Result<()> {
        if self.id.trim().is_empty() {
            return Err(Error::invalid("id", "must not be blank"));
        }
        if self.id.contains('\0') {
            return Err(Error::invalid("id", "must not contain NUL characters"));
        }
        if let Some(session) = &self.session_id {
            storage::check_session_id("session_id", session)?;
        }
        check_instructions("custom_instructions", self.custom_instructions.as_deref())?;
        storage::validate_content("content", &self.content)
    }
}

/// One episode an ingestion wrote, in write order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct IngestedRepresentation {
    /// The ingestion request's id.
    pub id: String,
    /// The Lens.
    pub lens: String,
    /// The content written.
    pub content: Content,
    /// The stored episode's uuid.
    pub episode: Uuid,
    /// What storing it cost (model calls by step, tokens, embedding requests,
    /// database round trips, wall time).
    #[serde(default)]
    pub cost: IngestCost,
}

/// Custom extraction instructions are free text without NUL characters (the engine
/// refuses those); blank ones add nothing.
pub(crate) fn check_instructions(field: &str, instructions: Option<&str>) -> Result<()> {
    if instructions.is_some_and(|i| i.contains('\0')) {
        return Err(Error::invalid(field, "must not contain NUL characters"));
    }
    Ok(())
}
